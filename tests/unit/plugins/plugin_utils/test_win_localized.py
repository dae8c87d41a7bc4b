# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The real-host path (_remote_node.TargetNode) on a host that answers in another language: taskkill in zh-CN (the OEM
code page 936), quser in German (850), wsl.exe in zh-CN (UTF-16LE with and without a BOM). What happened is read from
the process list, the exit codes and the WSL VM process, never from the words; check mode equals the run.

The simulated node acts; its English lines are rewritten into the language the host speaks, in the bytes the tool
writes, before they travel back through win_command's ISO-8859-1 transport.
"""

from __future__ import annotations

import codecs
import json
import re

import pytest

from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node import _remote_node, _powershell_scripts
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.rungs import _reset_dispatch, _end_by_handle, _wsl_shutdown
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.simulation import _simulated_node
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows import _node_snapshot
from ansible_collections.gpuops.remediation.tests.unit.helpers.win_walk import live_processes as live, simulated_root as build

# The zh-CN line of the issue (taskkill /T on a child), and its siblings in the same wording.
ZH_CHILD = "成功: 已终止 PID {pid} (属于 PID {parent} 子进程)的进程。"
ZH_OWN = "成功: 已终止 PID 为 {pid} 的进程。"
ZH_ERROR = "错误: 无法终止 PID {pid} 的进程。\r\n原因: 拒绝访问。"
DE_NOBODY = "Kein Benutzer für * vorhanden.\r\n"
ZH_NO_WSL = "没有正在运行的分发。\r\n"

_SUCCESS = re.compile(r"SUCCESS: The process with PID (\d+)(?: \(child process of PID (\d+)\))? has been terminated\.")
_ERROR = re.compile(r"ERROR: The process with PID (\d+).*could not be terminated\.\r?\nReason: .*")


def zh_taskkill(text):
    text = _SUCCESS.sub(lambda m: (ZH_CHILD if m.group(2) else ZH_OWN).format(pid=m.group(1), parent=m.group(2)), text)
    return _ERROR.sub(lambda m: ZH_ERROR.format(pid=m.group(1)), text)


class LocalizedAction:
    """Ansible's ActionBase plumbing for TargetNode, answered by the simulated node in the host's languages."""

    def __init__(self, root, user, wsl_bom):
        self._task = Task()
        self.root, self.user, self.wsl_bom = root, user, wsl_bom

    def _execute_module(self, module_name, module_args, task_vars):
        del task_vars
        if module_name == _remote_node.WIN_COMMAND:
            argv = module_args["argv"]
            answer = _simulated_node.run_command(self.root, argv, self.user)
            out, err = answer.stdout, answer.stderr
            tool = argv[0].lower().rsplit("\\", 1)[-1]
            if tool == "taskkill":
                out = zh_taskkill(out.decode()).encode("cp936")
                err = zh_taskkill(err.decode()).encode("cp936")
            elif tool == "quser" and answer.rc == 1:
                err = DE_NOBODY.encode("cp850")
            elif tool == "wsl.exe" and answer.rc not in (0,) and "--list" in argv:
                out = (codecs.BOM_UTF16_LE if self.wsl_bom else b"") + ZH_NO_WSL.encode("utf-16-le")
            return {"rc": answer.rc, "stdout": _simulated_node.transported(out), "stderr": _simulated_node.transported(err)}
        name = next(name for name, text in _powershell_scripts.SCRIPTS.items() if text == module_args["script"])
        result = _simulated_node.run_script(self.root, name, module_args["parameters"], self.user)
        if name == "terminate_held":  # taskkill run by the script on a zh-CN host: its words in Chinese
            items = [dict(item, Message=zh_taskkill(item["Message"]) if item.get("Message") else None)
                     for item in json.loads(result["results"]) if item]
            result = dict(result, results=json.dumps(items, ensure_ascii=False))
        return {"result": result, "changed": False}


class Task:
    check_mode, delegate_to = False, None


@pytest.mark.parametrize("select", [("python.exe",), ("python.exe", "worker.exe"), ("worker.exe", "python.exe")])
def test_a_zh_cn_taskkill_tree_is_read_from_the_process_list(tmp_path, select):
    # constrained_language: Add-Type is refused, the terminate script cannot run, taskkill /T (in zh-CN) ends the tree
    tree = {"name": "python.exe", "memory_mib": 2048,
            "children": [{"name": "worker.exe", "memory_mib": 512, "children": [{"name": "helper.exe"}]}]}
    root = build(tmp_path, constrained_language=True, processes=[tree])
    node = _remote_node.TargetNode(LocalizedAction(root, "ada", False), {})
    snapshot = _node_snapshot.take(node)
    by_name = dict((p["name"], p) for p in live(root).values())
    holders = [next(h for h in snapshot["holders"] if h["name"] == name) for name in select]
    predicted = _reset_dispatch.run(node, {"method": "kill", "holders": holders}, check_mode=True)
    done = _reset_dispatch.run(node, {"method": "kill", "holders": holders}, check_mode=False)
    tree = sorted(by_name[name]["pid"] for name in ("python.exe", "worker.exe", "helper.exe"))
    assert predicted["ended_pids"] == done["ended_pids"] == tree
    assert [line.replace("would end", "ended") for line in predicted["plan"]] == done["plan"]
    assert not [line for line in done["plan"] if "already gone" in line]
    assert [line for line in done["plan"] if _end_by_handle.HELD_WORDS in line]  # the fallback, said in the plan
    assert done["changed"] and not done["failed"]
    assert not set(tree) & set(live(root))
    outcomes = [line for line in done["journal"] if line["phase"] == "outcome"]
    assert [line["action"] for line in outcomes if line["action"] == "terminate" and line.get("unavailable")]
    killed = [line for line in outcomes if line["action"] == "taskkill"]
    assert killed and all(line["ok"] and set(line["exit_codes"].values()) == {0} for line in killed)  # exit codes, not words


def test_a_zh_cn_refusal_is_a_failure_read_from_the_process_list(tmp_path):
    root = build(tmp_path, constrained_language=True, administrators=["ada"], processes=[{"name": "render.exe", "user": "bob", "memory_mib": 1024}])
    node = _remote_node.TargetNode(LocalizedAction(root, "carol", False), {})
    holders = [h for h in _node_snapshot.take(node)["holders"] if h["name"] == "render.exe"]
    done = _reset_dispatch.run(node, {"method": "kill", "holders": holders}, check_mode=False)
    assert done["failed"] and not done["changed"] and done["ended_pids"] == []
    # the words (OEM code page 936, unknown to the controller) are kept for the report only
    assert done["processes"][0]["outcome"] == "failed" and "taskkill exited 1" in done["msg"]
    assert holders[0]["pid"] in live(root)


def test_a_german_quser_with_nobody_logged_on_is_nobody(tmp_path):
    root = build(tmp_path, sessions=[])
    node = _remote_node.TargetNode(LocalizedAction(root, "ada", False), {})
    snapshot = _node_snapshot.take(node)
    assert snapshot["sessions"] == [] and snapshot["probes"]["sessions"]["ok"]
    done = _reset_dispatch.run(node, {"method": "logoff", "user": "ada"}, check_mode=False)
    assert not done["failed"] and not done["changed"]


@pytest.mark.parametrize("bom", [True, False])
def test_a_zh_cn_wsl_with_nothing_running_is_decided_by_the_exit_and_the_wsl_vm(tmp_path, bom):
    root = build(tmp_path, distributions=[{"name": "Ubuntu-22.04", "memory_mib": 3072}])
    node = _remote_node.TargetNode(LocalizedAction(root, "ada", bom), {})
    predicted = _wsl_shutdown.stop(node, None, True)
    done = _wsl_shutdown.stop(node, None, False)
    assert predicted["stopped"] == done["stopped"] == ["Ubuntu-22.04"] and done["changed"] and not done.get("failed")
    again = _wsl_shutdown.stop(node, None, False)
    assert not again["changed"] and again["running_before"] == []
    assert _node_snapshot.take(node)["wsl"]["running"] == []
