# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A Windows service's process (Win32_Service.ProcessId, read by the processes script through CIM) is never ended
unless allow_daemons - as a Linux daemon known from the init system - the refusal naming the service and the option;
where Win32_Service could not be read, a session-0 process is refused the same way (fails closed). One home:
_who_may_end.refusal (service_refusal), asked by the walk, win_gpu_reset method=kill on its own and the tree check.

On the simulated node and through the real-host path (TargetNode whose module calls the simulated node answers), check
mode first and equal to the run; and on TargetNode answered with the processes script's rows as Windows PowerShell 5.1
writes them."""

from __future__ import annotations

import json

import pytest

from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.rungs import _acting_step, _reset_dispatch
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node import _remote_node
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.tools import _cim_processes
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.simulation import _simulated_node
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows import _node_snapshot
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node._remote_node import SimulatedNode
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.protect._who_may_end import Policy, refusal, tree_refusal

from ansible_collections.gpuops.remediation.tests.unit.helpers.win_host import ScriptAnswers, target
from ansible_collections.gpuops.remediation.tests.unit.helpers.win_walk import wsl_walk as walk

SERVICE = "NVDisplay.ContainerLocalSystem"


# ---- the processes script's rows ------------------------------------------------------------------------------------

def row(pid, name, services, session=0, ppid=700, created_ms=5000, user="NT AUTHORITY\\SYSTEM"):
    base = {"ProcessId": pid, "ParentProcessId": ppid, "Name": name, "ExecutablePath": "C:\\Windows\\System32\\%s" % name,
            "CreationDate": "\\/Date(%d)\\/" % created_ms, "SessionId": session, "User": user, "OwnerSid": None, "VmId": None}
    if services != "missing":
        base["Services"] = services
    return base


@pytest.mark.parametrize("services, expected", [
    ([SERVICE], [SERVICE]), (SERVICE, [SERVICE]), (["Dnscache", "LanmanWorkstation"], ["Dnscache", "LanmanWorkstation"]),
    ([], []), (None, None), ("missing", None),
])
def test_the_services_a_process_runs_as_convertto_json_writes_them(services, expected):
    [process] = _cim_processes.parse_cim_processes(json.dumps([row(2480, "NVDisplay.Container.exe", services)]))
    assert process["services"] == expected


def host_list(rows):
    text = json.dumps(rows, indent=4).replace("\\\\/", "\\/")
    answer = {"processes": text, "own_pid": 9999, "winlogon_shell": "explorer.exe", "system_root": "C:\\Windows"}
    return _acting_step.process_list(_remote_node.TargetNode(ScriptAnswers({}, {"processes": answer}), {}))


def test_a_services_process_is_refused_naming_the_service_and_the_option():
    processes = host_list([row(2480, "NVDisplay.Container.exe", [SERVICE]), row(3100, "svchost.exe", ["Dnscache", "nsi"])])
    why = refusal(processes[2480], Policy())
    assert SERVICE in why and "allow_daemons" in why and "gpu_reclaim_allow_daemons" in why
    assert "Dnscache, nsi" in refusal(processes[3100], Policy())
    assert refusal(processes[2480], Policy(allow_daemons=True)) is None
    # the same answer for every caller: the walk's policy and win_gpu_reset's
    assert refusal(processes[2480], Policy.from_args({"allow_daemons": True})) is None
    assert "allow_daemons" in refusal(processes[2480], Policy.from_args({"allow_daemons": False}))


def test_a_process_that_runs_no_service_is_not_refused_for_it_in_any_session():
    processes = host_list([row(4100, "render.exe", [], session=0), row(4200, "train.exe", [], session=1, user="WS12\\ada")])
    assert refusal(processes[4100], Policy()) is None and refusal(processes[4200], Policy()) is None


def test_where_win32_service_was_not_read_session_0_fails_closed_and_user_sessions_do_not():
    processes = host_list([row(4100, "render.exe", None, session=0), row(4200, "train.exe", None, session=1, user="WS12\\ada")])
    why = refusal(processes[4100], Policy())
    assert "not known" in why and "Win32_Service" in why and "allow_daemons" in why
    assert refusal(processes[4100], Policy(allow_daemons=True)) is None
    assert refusal(processes[4200], Policy()) is None


def test_a_tree_that_holds_a_services_process_is_refused_unless_allow_daemons():
    processes = host_list([row(5000, "launcher.exe", [], session=0, created_ms=1000),
                           row(5001, "worker.exe", ["GpuWorker"], session=0, ppid=5000, created_ms=2000)])
    why = tree_refusal(processes, processes[5000], Policy())
    assert why and "pid 5001" in why and "GpuWorker" in why
    assert tree_refusal(processes, processes[5000], Policy(allow_daemons=True)) is None


# ---- the walk and win_gpu_reset on the simulated node and through TargetNode -------------------------------------------

SCENARIO = {"hostname": "WS12", "sessions": [{"user": "ada"}], "administrators": ["ada"],
            "processes": [{"name": "NVDisplay.Container.exe", "session_id": 0, "user": "NT AUTHORITY\\SYSTEM", "memory_mib": 1024,
                           "image_path": "C:\\Windows\\System32\\DriverStore\\FileRepository\\nv_dispi.inf_amd64\\Display.NvContainer\\NVDisplay.Container.exe",
                           "service": SERVICE}]}


def node(tmp_path, real_host, **scenario):
    root = str(tmp_path / "ws12")
    _simulated_node.write_node(root, _simulated_node.build_state(dict(SCENARIO, **scenario)))
    return root, (target(root) if real_host else SimulatedNode(root, "ada"))


def container(root):
    return [p["pid"] for p in _simulated_node.snapshot_of_state(root)["processes"] if p["name"] == "NVDisplay.Container.exe"]


@pytest.mark.parametrize("real_host", [False, True])
def test_the_kill_rung_leaves_a_services_process_saying_what_would_allow_it(tmp_path, real_host):
    root, host = node(tmp_path, real_host)
    [holder] = [h for h in _node_snapshot.take(host)["holders"] if h["name"] == "NVDisplay.Container.exe"]
    assert holder["class"] == "compute" and holder["services"] == [SERVICE]
    planned = walk(host, check_mode=True, max_rung="kill")
    done = walk(host, max_rung="kill")
    for outcome in (planned, done):
        [line] = outcome["rungs_tried"][0]["plan"]
        assert line.startswith("left pid %s NVDisplay.Container.exe" % holder["pid"]) and SERVICE in line and "allow_daemons" in line
        assert not outcome["rungs_tried"][0]["changed"]
    assert planned["rungs_tried"][0]["plan"] == done["rungs_tried"][0]["plan"]
    assert container(root) == [holder["pid"]]


@pytest.mark.parametrize("real_host", [False, True])
def test_with_allow_daemons_the_kill_rung_ends_it(tmp_path, real_host):
    root, host = node(tmp_path, real_host)
    [holder] = [h for h in _node_snapshot.take(host)["holders"] if h["name"] == "NVDisplay.Container.exe"]
    planned = walk(host, check_mode=True, max_rung="kill", allow_daemons=True)
    done = walk(host, max_rung="kill", allow_daemons=True)
    assert planned["rungs_tried"][0]["plan"] == ["would end pid %s NVDisplay.Container.exe (SYSTEM, session 0)" % holder["pid"]]
    assert done["status"] == "fixed" and done["rungs_tried"][0]["plan"] == [
        "ended pid %s NVDisplay.Container.exe (SYSTEM, session 0)" % holder["pid"]]
    assert container(root) == []


@pytest.mark.parametrize("allow", [False, True])
def test_win_gpu_reset_kill_on_its_own_asks_the_same_rule(tmp_path, allow):
    root, host = node(tmp_path, True)
    [holder] = [h for h in _node_snapshot.take(host)["holders"] if h["name"] == "NVDisplay.Container.exe"]
    args = {"method": "kill", "holders": [{"pid": holder["pid"], "creation_time_ms": holder["creation_time_ms"]}], "allow_daemons": allow}
    predicted = _reset_dispatch.run(host, args, check_mode=True)
    done = _reset_dispatch.run(host, args, check_mode=False)
    assert predicted["changed"] == done["changed"] == allow
    assert [p["outcome"].replace("would_end", "ended") for p in predicted["processes"]] == [p["outcome"] for p in done["processes"]]
    if allow:
        assert done["ended_pids"] == [holder["pid"]] and container(root) == []
    else:
        assert done["processes"][0]["outcome"] == "refused" and SERVICE in done["processes"][0]["reason"]
        assert container(root) == [holder["pid"]]


def test_where_the_node_cannot_read_its_services_a_session_0_holder_is_left(tmp_path):
    root, host = node(tmp_path, False, services_readable=False)
    outcome = walk(host, max_rung="kill")
    [line] = outcome["rungs_tried"][0]["plan"]
    assert "Win32_Service could not be read" in line and container(root)
