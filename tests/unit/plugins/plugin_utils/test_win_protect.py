# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""_who_may_end: the one answer to who may be ended on Windows, and every path that asks it (the walk, win_gpu_reset
method=kill called on its own, restart_explorer, the tree a tree kill would take)."""

import pytest

from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.protect import _who_may_end
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.rungs import _reset_dispatch
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.simulation import _simulated_node
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows import _node_snapshot
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node._remote_node import SimulatedNode
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.protect._who_may_end import Policy, refusal, tree_refusal


def test_refusals_name_the_process_and_what_would_allow_it():
    assert "WSL VM" in refusal({"pid": 9120, "name": "vmmemWSL"}, Policy())
    assert "protected Windows system process" in refusal({"pid": 612, "name": "csrss.exe"}, Policy())
    dwm = {"pid": 2056, "name": "dwm.exe"}
    assert "allow_dwm" in refusal(dwm, Policy())
    assert refusal(dwm, Policy(allow_dwm=True)) is None
    shell = {"pid": 3000, "name": "EXPLORER.EXE", "image_path": "C:\\Windows\\explorer.exe", "shell": True}
    assert "restart_explorer" in refusal(shell, Policy())
    assert refusal(shell, Policy(allow_shell=True)) is None
    # named explorer.exe, image path not known: whether it is the shell cannot be told, so nothing ends it
    assert "image path is not known" in refusal({"pid": 3000, "name": "explorer.exe"}, Policy(allow_shell=True))
    assert "remote connection" in refusal({"pid": 5000, "name": "wsmprovhost.exe"}, Policy())
    assert refusal({"pid": 3124, "name": "python.exe"}, Policy()) is None


@pytest.mark.parametrize("listed, name", [
    ("render", "render.exe"), ("RENDER.EXE", "render.exe"), ("render.exe", "Render"), ("Render.Exe", "RENDER.EXE"),
])
def test_protect_names_match_any_case_with_or_without_exe(listed, name):
    assert refusal({"pid": 10, "name": name}, Policy(protect_names=[listed])) == "protected name: %s" % name


@pytest.mark.parametrize("listed, user", [
    ("ada", "WS12\\ada"), ("WS12\\ADA", "ada"), ("corp\\ada", "WS12\\Ada"), ("ada@corp.example", "CORP\\ada"),
])
def test_protect_users_match_any_case_with_or_without_the_domain(listed, user):
    assert refusal({"pid": 10, "name": "python.exe", "user": user}, Policy(protect_users=[listed])) == "protected user: %s" % user


@pytest.mark.parametrize("owner", [None, "", "  "])
def test_with_protect_users_a_process_whose_owner_is_not_known_is_refused_fail_closed(owner):
    # Get-Process -IncludeUserName needs an elevated session; a process Windows does not name an owner for may be a
    # protected user's: never ended while protect_users is set, the refusal naming the pid and what would allow it
    why = refusal({"pid": 10, "name": "python.exe", "user": owner}, Policy(protect_users=["ada"]))
    assert why.startswith("pid 10 (python.exe)") and "owner is not known" in why and "run elevated" in why
    assert refusal({"pid": 10, "name": "python.exe", "user": owner}, Policy()) is None  # no protect_users: nothing to clear


def test_a_system_process_is_refused_whatever_the_caller_allows():
    assert "protected Windows system process" in refusal({"pid": 4, "name": "anything"}, Policy(allow_dwm=True, allow_shell=True))


def test_the_tree_is_refused_for_any_member_refused_on_its_own():
    processes = {
        100: {"pid": 100, "ppid": 1, "name": "python.exe", "user": "WS12\\ada", "creation_time_ms": 1000},
        101: {"pid": 101, "ppid": 100, "name": "worker.exe", "user": "WS12\\bob", "creation_time_ms": 1100},
        102: {"pid": 102, "ppid": 101, "name": "explorer.exe", "user": "WS12\\ada", "creation_time_ms": 1200},
    }
    assert "bob" in tree_refusal(processes, processes[100], Policy(protect_users=["bob"]))
    assert "worker.exe" in tree_refusal(processes, processes[100], Policy(protect_names=["worker"]))
    # the shell is never taken by a tree, even by a caller that may end it alone
    assert "explorer.exe" in tree_refusal(processes, processes[100], Policy(allow_shell=True))
    del processes[102]
    assert tree_refusal(processes, processes[100], Policy()) is None


def test_a_child_older_than_its_parent_id_is_no_child():
    processes = {
        100: {"pid": 100, "ppid": 1, "name": "python.exe", "creation_time_ms": 5000},
        # pid 100 once named another process: this one's parent exited, and the pid was handed out again
        200: {"pid": 200, "ppid": 100, "name": "lsass.exe", "creation_time_ms": 10},
    }
    assert _who_may_end.descendants(processes, processes[100]) == []
    assert tree_refusal(processes, processes[100], Policy()) is None


# ---- every path asks it ---------------------------------------------------------------------------------------------

def build(tmp_path, **scenario):
    root = str(tmp_path / "ws")
    _simulated_node.write_node(root, _simulated_node.build_state(dict({"hostname": "WS12"}, **scenario)))
    return root


def live(root):
    return dict((p["pid"], p) for p in _simulated_node.snapshot_of_state(root)["processes"])


@pytest.mark.parametrize("protect", [{"protect_names": ["RENDER"]}, {"protect_users": ["ws12\\ADA"]}])
def test_win_gpu_reset_kill_called_on_its_own_leaves_protected_processes(tmp_path, protect):
    root = build(tmp_path, processes=[{"name": "render.exe", "memory_mib": 1024}])
    holder = next(h for h in _node_snapshot.take(SimulatedNode(root))["holders"] if h["name"] == "render.exe")
    args = dict({"method": "kill", "holders": [holder]}, **protect)
    predicted = _reset_dispatch.run(SimulatedNode(root), args, check_mode=True)
    done = _reset_dispatch.run(SimulatedNode(root), args, check_mode=False)
    assert predicted["plan"] == done["plan"] and predicted["changed"] is done["changed"] is False
    assert done["processes"][0]["outcome"] == "refused" and done["processes"][0]["reason"].startswith("protected ")
    assert live(root)[holder["pid"]]["creation_time_ms"] == holder["creation_time_ms"]
    assert not [e for e in _simulated_node.snapshot_of_state(root)["command_log"] if e["argv"][0] == "taskkill"]
    assert not _simulated_node.snapshot_of_state(root).get("script_log")


def test_win_gpu_reset_kill_refuses_a_tree_holding_a_protected_child(tmp_path):
    root = build(tmp_path, processes=[{"name": "python.exe", "memory_mib": 2048, "children": [{"name": "keeper.exe"}]}])
    holder = next(h for h in _node_snapshot.take(SimulatedNode(root))["holders"] if h["name"] == "python.exe")
    done = _reset_dispatch.run(SimulatedNode(root), {"method": "kill", "holders": [holder], "protect_names": ["keeper"]}, check_mode=False)
    assert done["processes"][0]["outcome"] == "refused" and "keeper.exe" in done["processes"][0]["reason"]
    assert not done["changed"] and holder["pid"] in live(root)


def test_restart_explorer_leaves_a_protected_shell(tmp_path):
    root = build(tmp_path, processes=[{"name": "python.exe", "memory_mib": 64}])
    args = {"method": "restart_explorer", "user": "ada", "force": True, "protect_names": ["explorer"]}
    done = _reset_dispatch.run(SimulatedNode(root), args, check_mode=False)
    assert not done["changed"] and [s["outcome"] for s in done["sessions"]] == ["refused"]


@pytest.mark.parametrize("option, value", [("protect_names", "render"), ("protect_names", [""]), ("protect_users", [3]),
                                           ("protect_users", ["a\nb"])])
def test_bad_protect_lists_are_refused_naming_the_option(tmp_path, option, value):
    root = build(tmp_path)
    with pytest.raises(_reset_dispatch.WinResetInputError, match=option):
        _reset_dispatch.run(SimulatedNode(root), {"method": "kill", option: value}, check_mode=False)
