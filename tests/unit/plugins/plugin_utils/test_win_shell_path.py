# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The user's shell is the process whose image path is Winlogon's Shell (HKLM ...\\Winlogon, Shell, resolved under
%SystemRoot%: %SystemRoot%\\explorer.exe by default), compared as a path (any case, normalized), never by name: a
program at C:\\Users\\ada\\Downloads\\explorer.exe holding the GPU is an ordinary program - the kill rung ends it and
restart_explorer never does. One function decides (_cim_processes.is_shell / shell_match); _who_may_end.refusal,
_explorer_restart, _windows_walk.is_shell and the simulation's Winlogon ask it.

On the simulated node and through the real-host path (TargetNode whose module calls the simulated node answers), check
mode first and equal to the run; and on TargetNode answered with the processes script's answer as Windows PowerShell 5.1
writes it."""

from __future__ import annotations

import json

import pytest

from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.rungs import _acting_step, _reset_dispatch
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node import _remote_node
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.tools import _cim_processes
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.simulation import _simulated_node
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows import _node_snapshot
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows._windows_walk import is_shell as ladder_is_shell
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node._remote_node import SimulatedNode
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.protect._who_may_end import Policy, refusal

from ansible_collections.gpuops.remediation.tests.unit.helpers.win_host import ScriptAnswers, target
from ansible_collections.gpuops.remediation.tests.unit.helpers.win_walk import wsl_walk as walk

FAKE = "C:\\Users\\ada\\Downloads\\explorer.exe"


# ---- the rule ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("value, root, image", [
    (None, "C:\\Windows", "c:\\windows\\explorer.exe"),
    ("", "C:\\Windows", "c:\\windows\\explorer.exe"),
    ("explorer.exe", "D:\\WINNT\\", "d:\\winnt\\explorer.exe"),
    ("Explorer.EXE", "C:\\Windows", "c:\\windows\\explorer.exe"),
    ("%SystemRoot%\\explorer.exe", "C:\\Windows", "c:\\windows\\explorer.exe"),
    ("%windir%\\explorer.exe", "C:\\Windows", "c:\\windows\\explorer.exe"),
    ('"C:\\Kiosk App\\kiosk.exe" /fullscreen', "C:\\Windows", "c:\\kiosk app\\kiosk.exe"),
    ("C:\\kiosk\\app.exe -full", "C:\\Windows", "c:\\kiosk\\app.exe"),
    ("explorer.exe", None, None),
])
def test_the_shell_image_is_winlogons_shell_resolved_under_systemroot(value, root, image):
    assert _cim_processes.shell_image(value, root) == image


@pytest.mark.parametrize("name, path, expected", [
    ("explorer.exe", FAKE, False),
    ("EXPLORER.EXE", "C:\\WINDOWS\\Explorer.EXE", True),
    ("explorer.exe", "c:/windows/./explorer.exe", True),
    ("explorer.exe", "\\\\?\\C:\\Windows\\explorer.exe", True),
    ("explorer.exe", "C:\\Windows\\System32\\..\\explorer.exe", True),
    ("explorer.exe", "C:\\Windows\\SysWOW64\\explorer.exe", False),
    ("notexplorer.exe", "C:\\Windows\\explorer.exe", True),  # the path decides, whatever the name says
    ("explorer.exe", None, None),  # image path not known: cannot be told
    ("python.exe", None, False),
])
def test_the_shell_is_matched_by_its_image_path_never_its_name(name, path, expected):
    assert _cim_processes.shell_match(name, path, _cim_processes.shell_image("explorer.exe", "C:\\Windows")) is expected


def test_one_answer_for_the_refusal_the_ladder_and_restart_explorer():
    shell = {"pid": 3000, "name": "explorer.exe", "image_path": "C:\\Windows\\explorer.exe", "shell": True}
    fake = {"pid": 3001, "name": "explorer.exe", "image_path": FAKE, "shell": False}
    unknown = {"pid": 3002, "name": "explorer.exe", "image_path": None, "shell": None}
    assert "user's shell" in refusal(shell, Policy()) and refusal(shell, Policy(allow_shell=True)) is None
    assert refusal(fake, Policy()) is None and refusal(fake, Policy(allow_shell=True)) is None
    assert "image path is not known" in refusal(unknown, Policy()) and "image path is not known" in refusal(unknown, Policy(allow_shell=True))
    assert ladder_is_shell(shell) and not ladder_is_shell(fake) and ladder_is_shell(unknown)


# ---- the real-host path: the processes script's answer as Windows PowerShell 5.1 writes it -----------------------------

def ps51(pid, name, path, created_ms, session=1, user="WS12\\ada"):
    return {"ProcessId": pid, "ParentProcessId": 600, "Name": name, "ExecutablePath": path, "CreationDate": "\\/Date(%d)\\/" % created_ms,
            "SessionId": session, "User": user, "OwnerSid": None, "VmId": None, "Services": []}


def host_list(rows, **facts):
    text = json.dumps(rows, indent=4).replace("\\\\/", "\\/")
    answer = dict({"processes": text, "own_pid": 9999}, **facts)
    return _acting_step.process_list(_remote_node.TargetNode(ScriptAnswers({}, {"processes": answer}), {}))


ROWS = [ps51(4100, "explorer.exe", "C:\\WINDOWS\\Explorer.EXE", 1000), ps51(4200, "explorer.exe", FAKE, 2000),
        ps51(4300, "explorer.exe", None, 3000, session=2, user=None)]


def test_on_the_host_the_path_decides_under_any_systemroot_and_shell_value():
    processes = host_list(ROWS, winlogon_shell="explorer.exe", system_root="C:\\WINDOWS")
    assert [processes[pid]["shell"] for pid in (4100, 4200, 4300)] == [True, False, None]
    assert refusal(processes[4200], Policy()) is None
    assert "restart_explorer" in refusal(processes[4100], Policy())
    kiosk = host_list(ROWS + [ps51(4400, "kiosk.exe", "C:\\Kiosk\\kiosk.exe", 4000)],
                      winlogon_shell='"C:\\Kiosk\\kiosk.exe" /full', system_root="C:\\WINDOWS")
    assert kiosk[4400]["shell"] is True and kiosk[4100]["shell"] is False
    assert refusal(kiosk[4100], Policy()) is None and "user's shell" in refusal(kiosk[4400], Policy())


def test_where_the_host_did_not_say_its_systemroot_no_explorer_is_ended_as_a_program():
    processes = host_list(ROWS, winlogon_shell=None, system_root=None)
    assert [processes[pid]["shell"] for pid in (4100, 4200, 4300)] == [None, None, None]
    assert all("cannot be told" in refusal(processes[pid], Policy()) for pid in (4100, 4200, 4300))


# ---- the walk and restart_explorer on the simulated node and through TargetNode -------------------------------------

SCENARIO = {"hostname": "WS12", "sessions": [{"user": "ada", "explorer_memory_mib": 0}], "administrators": ["ada"],
            "processes": [{"name": "explorer.exe", "image_path": FAKE, "memory_mib": 2048, "session_id": 1, "user": "WS12\\ada"}]}


def node(tmp_path, real_host, **scenario):
    root = str(tmp_path / "ws12")
    _simulated_node.write_node(root, _simulated_node.build_state(dict(SCENARIO, **scenario)))
    return root, (target(root) if real_host else SimulatedNode(root, "ada"))


def explorers(root):
    return sorted((p["pid"], p["image_path"]) for p in _simulated_node.snapshot_of_state(root)["processes"] if p["name"] == "explorer.exe")


@pytest.mark.parametrize("real_host", [False, True])
def test_the_kill_rung_ends_a_program_named_explorer_and_leaves_the_shell(tmp_path, real_host):
    root, host = node(tmp_path, real_host)
    [fake] = [h for h in _node_snapshot.take(host)["holders"] if h["image_path"] == FAKE]
    assert fake["shell"] is False and fake["class"] == "compute"
    [shell] = [pid for pid, path in explorers(root) if path != FAKE]
    planned = walk(host, check_mode=True, max_rung="kill")
    done = walk(host, max_rung="kill")
    assert planned["status"] == "planned" and done["status"] == "fixed" and done["fixed_by"] == "kill"
    line = "pid %s explorer.exe (ada, session 1)" % fake["pid"]
    assert planned["rungs_tried"][0]["plan"] == ["would end " + line] and done["rungs_tried"][0]["plan"] == ["ended " + line]
    assert explorers(root) == [(shell, "C:\\Windows\\explorer.exe")]  # the fake is gone, the shell untouched, none started
    again = walk(host, max_rung="kill")
    assert again["status"] == "clean" and again["rungs_tried"] == []


@pytest.mark.parametrize("real_host", [False, True])
def test_restart_explorer_never_ends_a_program_named_explorer(tmp_path, real_host):
    root, host = node(tmp_path, real_host, sessions=[{"user": "ada", "explorer_memory_mib": 300}])
    before = explorers(root)
    [shell] = [pid for pid, path in before if path != FAKE]
    args = {"method": "restart_explorer", "allow_dwm": True, "user": "ada"}
    predicted = _reset_dispatch.run(host, args, check_mode=True)
    done = _reset_dispatch.run(host, args, check_mode=False)
    for result in (predicted, done):
        [entry] = result["sessions"]
        assert [s["pid"] for s in entry["explorer_before"]] == [shell] and entry["gpu_memory_mib"] == 300
    after = explorers(root)
    assert [entry for entry in before if entry[1] == FAKE][0] in after  # the program named explorer.exe still runs
    assert shell not in [pid for pid, dummy in after] and len(after) == 2  # the shell came back as a new process


def test_winlogon_restarts_only_its_shell_in_the_simulation(tmp_path):
    root, host = node(tmp_path, False)
    [fake] = [h for h in _node_snapshot.take(host)["holders"] if h["image_path"] == FAKE]
    done = _reset_dispatch.run(host, {"method": "kill", "holders": [{"pid": fake["pid"], "creation_time_ms": fake["creation_time_ms"]}]},
                               check_mode=False)
    assert done["ended_pids"] == [fake["pid"]] and [p for p, path in explorers(root) if path == FAKE] == []
