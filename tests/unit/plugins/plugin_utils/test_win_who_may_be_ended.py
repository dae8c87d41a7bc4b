# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""_who_may_end: the one answer to who may be ended on Windows (names, image paths, owners, roles by owner SID, the
run's own process and its ancestors by the process tree, the tree a tree kill would take), and the paths that ask it
(win_gpu_reset method=kill called on its own, restart_explorer); a Windows service's process (Win32_Service.ProcessId)
never ended unless allow_daemons, where Win32_Service could not be read a session-0 process refused the same way, on
the simulated node and through the real-host path. The protect rules on the other paths: test_win_protected_on_every_path.py."""

import json

import pytest

from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.protect import _who_may_end
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node import _remote_node, _powershell_scripts
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.rungs import _acting_step, _reset_dispatch
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.simulation import _simulated_node
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.tools import _cim_processes
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows import _node_snapshot
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node._remote_node import SimulatedNode
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.protect._who_may_end import Policy, refusal, tree_refusal

from ansible_collections.gpuops.remediation.tests.unit.helpers.win_host import ScriptAnswers, target
from ansible_collections.gpuops.remediation.tests.unit.helpers.win_walk import live_processes as live, simulated_root as build, wsl_walk as walk


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


def test_a_tree_member_whose_creation_time_is_unknown_still_counts_for_what_the_tree_would_take():
    # CIM gave no CreationDate for the child: the terminate script never ends it (no creation time to match), but
    # taskkill /T, the fallback, takes it by its parent pid: a protected process there refuses the tree.
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.protect._who_may_end import Policy, descendants, tree_refusal
    processes = {
        100: {"pid": 100, "ppid": 1, "name": "python.exe", "user": "WS12\\ada", "creation_time_ms": 5000},
        101: {"pid": 101, "ppid": 100, "name": "keeper.exe", "user": "WS12\\bob", "creation_time_ms": None},
    }
    assert "keeper.exe" in tree_refusal(processes, processes[100], Policy(protect_users=["bob"]))
    assert descendants(processes, processes[100]) == []  # never sent to the terminate script without its creation time


@pytest.mark.parametrize("name", ["sshd-session.exe", "SSHD-AUTH.EXE", "sshd.exe", "wsmprovhost.exe"])
def test_the_connection_host_processes_of_openssh_9_8_are_never_ended(name):
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.protect._who_may_end import Policy, refusal
    assert "remote connection" in refusal({"pid": 7000, "name": name}, Policy(allow_dwm=True, allow_shell=True))


@pytest.mark.parametrize("name", ["explorer.exe", "EXPLORER.EXE", "Explorer", "explorer"])
def test_the_walk_knows_the_shell_by_the_name_the_protect_rules_use(name):
    # restart_explorer for the shell, never the kill rung (which refuses it): whatever form the process list gives
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows._windows_walk import is_shell
    assert is_shell({"name": name})
    assert not is_shell({"name": "explorer2.exe"}) and not is_shell({"name": None})


def test_a_protect_name_given_as_the_executable_path_protects_that_executable():
    # "C:\Apps\render.exe" never equalled a process name: the process it meant was ended
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.protect._who_may_end import Policy, refusal
    policy = Policy(protect_names=["C:\\Apps\\Render.exe"])
    assert refusal({"pid": 10, "name": "render.exe", "image_path": "c:\\apps\\render.exe"}, policy).startswith("protected name")
    assert refusal({"pid": 10, "name": "render.exe", "image_path": "D:\\other\\render.exe"}, policy) is None
    assert refusal({"pid": 10, "name": "render.exe", "image_path": None}, policy).startswith("protected name")  # not known: kept


def ps51(pid, ppid, name, created_ms, user=None, session=0):
    """One Win32_Process row as the processes script's ConvertTo-Json writes it under Windows PowerShell 5.1."""
    return {"ProcessId": pid, "ParentProcessId": ppid, "Name": name, "ExecutablePath": None,
            "CreationDate": "\\/Date(%d)\\/" % created_ms, "SessionId": session, "User": user, "OwnerSid": None, "VmId": None,
            "Services": []}


# ---- Ansible's own process and its ancestors: decided by the process tree, never by a name -------------------------

# An SSH server that is not OpenSSH (its name on no list), the session's shell, and the module's PowerShell ($PID).
CHAIN = [ps51(700, 640, "services.exe", 1000, "NT AUTHORITY\\SYSTEM"),
         ps51(2210, 700, "BvSshServer.exe", 5000, "NT AUTHORITY\\SYSTEM"),
         ps51(8120, 2210, "cmd.exe", 9000, "WS12\\ada"),
         ps51(8164, 8120, "powershell.exe", 9100, "WS12\\ada"),
         ps51(9000, 2210, "render.exe", 9050, "WS12\\ada")]


def host(processes, own_pid):
    text = json.dumps(processes, indent=4).replace("\\\\/", "\\/")  # 5.1 writes "\/Date(..)\/"
    return _remote_node.TargetNode(ScriptAnswers({}, {"processes": {"processes": text, "own_pid": own_pid}}), {})


@pytest.mark.parametrize("pid", [8164, 8120, 2210])
def test_the_runs_own_process_and_its_ancestors_are_never_ended_whatever_their_names(pid):
    processes = _acting_step.process_list(host(CHAIN, 8164))
    why = refusal(processes[pid], Policy())
    assert why and "this Ansible run's own process or one of its ancestors" in why, why
    # a sibling of the connection's shell is not the run's
    assert refusal(processes[9000], Policy()) is None and tree_refusal(processes, processes[9000], Policy()) is None


def test_a_tree_that_would_take_the_run_with_it_is_refused():
    processes = _acting_step.process_list(host(CHAIN, 8164))
    why = tree_refusal(processes, processes[2210], Policy())
    assert why and ("pid 8120" in why or "pid 8164" in why), why


def test_a_parent_pid_now_naming_a_younger_process_is_no_ancestor():
    # cmd.exe's parent exited; Windows gave its pid (2210) to a process started after cmd.exe: not the run's ancestor
    rows = [dict(row) for row in CHAIN]
    rows[1] = ps51(2210, 700, "notepad.exe", 9500, "WS12\\bob", 2)
    processes = _acting_step.process_list(host(rows, 8164))
    assert processes[8120].get("run_ancestor") and not processes[2210].get("run_ancestor")
    assert refusal(processes[2210], Policy()) is None


def test_the_processes_script_says_its_own_pid():
    assert "own_pid = $PID" in _powershell_scripts.PROCESSES


# ---- a VM's memory process is one its owner SID says is a VM's, not any process named vmmem -------------------------

VM_SID = "S-1-5-83-1-2048927643-1284214555-2691203228-801566218"


USER_SID = "S-1-5-21-3623811015-3361044348-30300820-1013"


@pytest.mark.parametrize("name", ["vmmem", "vmmem.exe", "VMMEMWSL.EXE"])
@pytest.mark.parametrize("sid, is_vm", [(VM_SID, True), (None, True), (USER_SID, False)])
def test_the_vm_role_is_the_owner_sids_where_windows_gave_one(name, sid, is_vm):
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.tools import _cim_processes
    row = dict(ps51(9120, 640, name, 5000, "WS12\\ada" if sid == USER_SID else None, 1 if sid == USER_SID else 0), OwnerSid=sid)
    [process] = _cim_processes.parse_cim_processes(json.dumps([row]))
    assert (process["role"] == "vm") is is_vm
    why = refusal(process, Policy())
    assert (why is not None and "virtual machine's memory process" in why) is is_vm


# ---- a system process is one SYSTEM owns, not any process with its name -----------------------------------------------

@pytest.mark.parametrize("name", ["csrss.exe", "LSASS.EXE", "winlogon.exe", "Registry", "Memory Compression"])
@pytest.mark.parametrize("sid, protected", [("S-1-5-18", True), (None, True), (USER_SID, False)])
def test_the_protected_role_is_systems_own_where_windows_gave_the_owner_sid(name, sid, protected):
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.tools import _cim_processes
    row = dict(ps51(6120, 640, name, 5000, None, 1), OwnerSid=sid)
    [process] = _cim_processes.parse_cim_processes(json.dumps([row]))
    assert (process["role"] == "protected") is protected
    assert (refusal(process, Policy()) or "").endswith("is a protected Windows system process") is protected
    # pids 0 and 4 are the kernel's whatever their owner
    assert _cim_processes.role(name, 4, USER_SID) == "protected"


def test_the_processes_script_asks_the_owner_sid_of_every_system_processs_name():
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.tools import _cim_processes
    text = _powershell_scripts.PROCESSES
    listed = text[text.index("$systemNames = @(") + len("$systemNames = @("):]
    listed = listed[:listed.index(")")]
    assert set(name.strip().strip("'") for name in listed.replace("\n", " ").split(",")) == set(_cim_processes.PROTECTED_NAMES)


SERVICE = "NVDisplay.ContainerLocalSystem"


# ---- a service's process (never ended unless allow_daemons): the processes script's rows -----------------------------

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


# ---- a service's process: the walk and win_gpu_reset on the simulated node and through TargetNode --------------------

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
