# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Issue 18 adversarial review (rev18): cases no earlier test had, on the real-host path (TargetNode answered as the
host answers) and on the simulated node, check mode against the real run."""

from __future__ import annotations

import json

import pytest

from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.rungs import _acting_step, _reset_dispatch
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node import _remote_node, _powershell_scripts
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.simulation import _simulated_node
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows import _node_snapshot
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node._remote_node import SimulatedNode
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.protect._who_may_end import Policy, refusal, tree_refusal

from .test_win_facts import HostAction


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
    return _remote_node.TargetNode(HostAction({}, {"processes": {"processes": text, "own_pid": own_pid}}), {})


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


def sim(tmp_path, **scenario):
    root = str(tmp_path / "ws12")
    _simulated_node.write_node(root, _simulated_node.build_state(dict({"hostname": "WS12", "sessions": [{"user": "ada"}]}, **scenario)))
    return SimulatedNode(root, "ada")


def run_both(tmp_path, scenario, args):
    """win_gpu_reset in check mode, then for real on a fresh node of the same scenario: (check, real, pids before, after)."""
    checked = _reset_dispatch.run(sim(tmp_path / "check", **scenario), args(sim(tmp_path / "check", **scenario)), check_mode=True)
    node = sim(tmp_path / "real", **scenario)
    before = [p["pid"] for p in _simulated_node.snapshot_of_state(node.root)["processes"]]
    done = _reset_dispatch.run(node, args(node), check_mode=False)
    after = [p["pid"] for p in _simulated_node.snapshot_of_state(node.root)["processes"]]
    return checked, done, before, after


@pytest.mark.parametrize("direct", [True, False])
def test_kill_called_on_its_own_never_ends_the_process_ansible_runs_under(tmp_path, direct):
    # The connection's shell holds the GPU (a launcher run from the SSH session); Ansible's module runs below it.
    scenario = {"gpus": [{"ghost_mib": 0}], "processes": [{"name": "launcher.exe", "memory_mib": 1024, "children": [
        {"name": "pwsh.exe", "memory_mib": 0, "runs_ansible": True}] if direct else [
        {"name": "cmd.exe", "memory_mib": 0, "children": [{"name": "pwsh.exe", "memory_mib": 0, "runs_ansible": True}]}]}]}

    def args(node):
        holder = next(h for h in _node_snapshot.take(node)["holders"] if h["name"] == "launcher.exe")
        return {"method": "kill", "holders": [holder]}
    checked, done, before, after = run_both(tmp_path, scenario, args)
    for result in (checked, done):
        assert not result["changed"] and result["processes"][0]["outcome"] == "refused", result["plan"]
        assert "Ansible run" in result["processes"][0]["reason"]
    assert before == after


# ---- bad input: the option and the value named, nothing run -------------------------------------------------------

@pytest.mark.parametrize("method", ["kill", "restart_adapter"])
@pytest.mark.parametrize("value", ["", "   ", "nvidia-smi\n", 7])
def test_win_gpu_reset_refuses_an_nvidia_smi_that_names_no_program(tmp_path, method, value):
    node = sim(tmp_path, gpus=[{"ghost_mib": 2048}], processes=[{"name": "render.exe", "memory_mib": 1024}])
    before = _simulated_node.snapshot_of_state(node.root)
    with pytest.raises(_reset_dispatch.WinResetInputError) as error:
        _reset_dispatch.run(node, {"method": method, "nvidia_smi": value}, check_mode=False)
    assert str(error.value).startswith("nvidia_smi: %r" % (value,))
    after = _simulated_node.snapshot_of_state(node.root)
    assert after["command_log"] == before["command_log"] and after["processes"] == before["processes"]


# ---- WSL: every name WSL accepts (^[a-zA-Z0-9._-]+$) is a name; one passing for an option never reaches argv -------

@pytest.mark.parametrize("bom", [True, False])
@pytest.mark.parametrize("name", ["_work", ".scratch", "9.x_-"])
def test_a_distribution_whose_name_starts_with_a_dot_or_underscore_is_listed_and_stopped(tmp_path, bom, name):
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.rungs import _wsl_shutdown
    from .test_win_wsl_rung import build as wsl_build, running, target
    scenario = {"distributions": [{"name": name, "memory_mib": 1024}, {"name": "Ubuntu", "memory_mib": 0}]}
    check_root = wsl_build(tmp_path / "check", **scenario).root
    predicted = _wsl_shutdown.stop(target(check_root, bom=bom), None, True, gpu_holders=True)
    root = wsl_build(tmp_path / "real", **scenario).root
    done = _wsl_shutdown.stop(target(root, bom=bom), None, False, gpu_holders=True)
    # was: "not a list of distribution names", the rung failed on the whole host
    assert not done.get("failed"), done.get("msg")
    for key in ("changed", "stopped", "commands", "running_after"):
        assert predicted[key] == done[key], key
    assert done["stopped"] == [name] and running(root) == ["Ubuntu"] and sorted(running(check_root)) == sorted([name, "Ubuntu"])
    direct = _wsl_shutdown.stop(target(wsl_build(tmp_path / "direct", **scenario).root), name, False)
    assert direct["stopped"] == [name] and direct["commands"][0][-2:] == ["--terminate", name]


@pytest.mark.parametrize("name", ["-u", "--shutdown", "-x.y"])
def test_a_name_that_passes_for_an_option_is_refused_naming_the_option(tmp_path, name):
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.rungs import _wsl_shutdown
    from .test_win_wsl_rung import build as wsl_build
    node = wsl_build(tmp_path, distributions=[{"name": "Ubuntu", "memory_mib": 1024}])
    with pytest.raises(ValueError, match="^distribution: not a WSL distribution name"):
        _wsl_shutdown.stop(node, name, False)
    assert _simulated_node.snapshot_of_state(node.root)["command_log"] == []


# ---- protect_users: a form that names no process owner is refused, never silently protecting nothing ---------------

@pytest.mark.parametrize("user", ["@render", " @video", "S-1-5-21-3623811015-3361044348-30300820-1013", "s-1-5-18"])
@pytest.mark.parametrize("method", ["kill", "restart_adapter", "logoff"])
def test_protect_users_given_as_a_group_or_a_sid_is_refused_naming_it(tmp_path, user, method):
    node = sim(tmp_path, gpus=[{"ghost_mib": 2048}], processes=[{"name": "render.exe", "memory_mib": 1024}])
    holders = [h for h in _node_snapshot.take(node)["holders"] if h["name"] == "render.exe"]
    before = _simulated_node.snapshot_of_state(node.root)
    # was: accepted, and the process of the user that SID or group names was ended (the owner is a name: no match)
    assert refusal({"pid": 10, "name": "render.exe", "user": "WS12\\ada"}, Policy(protect_users=[user])) is None
    args = {"method": method, "protect_users": ["ada", user], "holders": holders, "user": "ada"}
    with pytest.raises(_reset_dispatch.WinResetInputError) as error:
        _reset_dispatch.run(node, args, check_mode=False)
    assert str(error.value).startswith("protect_users[1]: %r is a " % (user,))
    after = _simulated_node.snapshot_of_state(node.root)
    assert after["command_log"] == before["command_log"] and after["processes"] == before["processes"]


@pytest.mark.parametrize("user", [".\\ada", "ada@WS12", "WS12\\ADA", "CORP\\ada", "NT AUTHORITY\\SYSTEM"])
def test_protect_users_in_a_windows_form_still_protects(tmp_path, user):
    node = sim(tmp_path, gpus=[{"ghost_mib": 2048}], processes=[{"name": "render.exe", "memory_mib": 1024}])
    holder = next(h for h in _node_snapshot.take(node)["holders"] if h["name"] == "render.exe")
    done = _reset_dispatch.run(node, {"method": "kill", "holders": [holder], "protect_users": [user]}, check_mode=False)
    assert done["processes"][0]["outcome"] == ("refused" if "SYSTEM" not in user else "ended")


@pytest.mark.parametrize("check_mode", [True, False])
def test_the_walk_with_a_group_in_protect_users_changes_nothing_and_says_why(tmp_path, check_mode):
    from .test_win_review18 import walk
    node = sim(tmp_path, gpus=[{"ghost_mib": 2048}], processes=[{"name": "render.exe", "memory_mib": 1024}])
    before = _simulated_node.snapshot_of_state(node.root)
    ladder, dummy = walk(node, check_mode=check_mode, protect_users=["@render"])
    state = ladder.start()
    assert state["outcome"]["status"] == "failed"  # check mode fails where the real run fails
    assert [rung["msg"] for rung in state["outcome"]["rungs_tried"] if rung["failed"]][0].startswith(
        "win_gpu_reset: protect_users[0]: '@render' is a group")
    after = _simulated_node.snapshot_of_state(node.root)
    assert after["processes"] == before["processes"] and not [e for e in after["command_log"] if e["argv"][0] == "pnputil"]


# ---- check mode equals the run: a holder named twice, or a child named before its parent -----------------------------

@pytest.mark.parametrize("order", ["parent_twice", "child_first", "parent_first"])
def test_kill_check_mode_predicts_each_entry_as_the_run_finds_it(tmp_path, order):
    scenario = {"gpus": [{"ghost_mib": 0}], "processes": [{"name": "render.exe", "memory_mib": 1024,
                                                          "children": [{"name": "worker.exe", "memory_mib": 64}]}]}
    results = {}
    for check_mode in (True, False):
        node = sim(tmp_path / str(check_mode), **scenario)
        holders = dict((h["name"], h) for h in _node_snapshot.take(node)["holders"])
        parent, child = holders["render.exe"], holders["worker.exe"]
        chosen = {"parent_twice": [parent, parent], "child_first": [child, parent], "parent_first": [parent, child]}[order]
        done = _reset_dispatch.run(node, {"method": "kill", "holders": chosen}, check_mode=check_mode)
        results[check_mode] = done
    predicted, done = results[True], results[False]
    # was (parent_twice): "would end" twice, the run "ended" then "already gone"; (child_first): the parent's tree
    # predicted with the child the run had already ended
    assert [(p["outcome"].replace("would_end", "ended"), p["also_ended"]) for p in predicted["processes"]] == \
        [(p["outcome"], p["also_ended"]) for p in done["processes"]]
    assert [line.replace("would end", "ended") for line in predicted["plan"]] == done["plan"]
    assert predicted["ended_pids"] == done["ended_pids"] and predicted["changed"] == done["changed"]


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


@pytest.mark.parametrize("check_mode", [True, False])
def test_a_users_program_named_vmmem_holding_the_gpu_is_no_vm_and_the_walk_ends_it(tmp_path, check_mode):
    from .test_win_review18 import walk
    scenario = {"gpus": [{"ghost_mib": 0}], "processes": [{"name": "vmmem.exe", "memory_mib": 4096,
                                                          "image_path": "C:\\Users\\ada\\vmmem.exe"}]}
    node = sim(tmp_path, **scenario)
    [holder] = [h for h in _node_snapshot.take(node)["holders"] if h["name"] == "vmmem.exe"]
    # was: class "vm" (a Hyper-V VM's, never ours), verdict "none", and the walk said "no GPU memory held: nothing to do"
    assert holder["class"] == "compute" and holder["owner_sid"].startswith("S-1-5-21-")
    ladder, calls = walk(node, check_mode=check_mode)
    state = ladder.start()
    assert state["outcome"]["status"] == ("planned" if check_mode else "fixed"), state["outcome"]["msg"]
    assert ("win_gpu_reset", "kill") in calls
    alive = [p["pid"] for p in _simulated_node.snapshot_of_state(node.root)["processes"]]
    assert (holder["pid"] in alive) is check_mode


def test_a_hyper_v_vms_memory_process_is_still_never_ended(tmp_path):
    vm = {"name": "vmmem", "memory_mib": 4096, "session_id": 0, "user": "NT VIRTUAL MACHINE\\1C1B3E9B-8F1B-4C8A-9C73-9E0A0A6D1E2F"}
    node = sim(tmp_path, gpus=[{"ghost_mib": 0}], processes=[vm])
    [holder] = [h for h in _node_snapshot.take(node)["holders"] if h["name"] == "vmmem"]
    assert holder["class"] == "vm" and holder["owner_sid"].startswith("S-1-5-83-1-")
    done = _reset_dispatch.run(node, {"method": "kill", "holders": [holder]}, check_mode=False)
    assert done["processes"][0]["outcome"] == "refused" and "virtual machine" in done["processes"][0]["reason"]


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


@pytest.mark.parametrize("check_mode", [True, False])
def test_a_users_program_named_csrss_is_ended_by_the_kill_rung_not_a_logoff(tmp_path, check_mode):
    from .test_win_review18 import walk
    node = sim(tmp_path, gpus=[{"ghost_mib": 0}], processes=[{"name": "csrss.exe", "memory_mib": 4096,
                                                              "image_path": "C:\\Users\\ada\\csrss.exe"}])
    system = [p["pid"] for p in _simulated_node.snapshot_of_state(node.root)["processes"] if p["name"] == "csrss.exe" and "SYSTEM" in p["user"]]
    [holder] = [h for h in _node_snapshot.take(node)["holders"] if h["name"] == "csrss.exe"]
    # was: class "system" and the verdict "logoff" (the user's whole session), "reboot" in session 0
    assert holder["class"] == "compute" and _node_snapshot.take(node)["verdict"]["rung"] == "kill"
    ladder, calls = walk(node, check_mode=check_mode, max_rung="logoff")
    state = ladder.start()
    assert [c for c in calls if c[0] == "win_gpu_reset"] == [("win_gpu_reset", "kill")], state["outcome"]["msg"]
    alive = [p["pid"] for p in _simulated_node.snapshot_of_state(node.root)["processes"]]
    assert (holder["pid"] in alive) is check_mode and all(pid in alive for pid in system) and len(system) == 2


# ---- quser (Add-Type refused) cuts names at 20 characters and prints no domain: whose session it is comes from its
# processes' owners ------------------------------------------------------------------------------------------------------

LONG_1, LONG_2 = "svc-gpu-render-node-01", "svc-gpu-render-node-02"  # one 20-character quser row for both


def quser_node(tmp_path, sessions):
    return sim(tmp_path, constrained_language=True, oem_code_page=850, administrators=["ada"], sessions=sessions)


def session_ids(node):
    return sorted(s["id"] for s in _simulated_node.snapshot_of_state(node.root)["sessions"])


@pytest.mark.parametrize("check_mode", [True, False])
def test_logoff_of_a_long_name_under_quser_logs_off_that_users_session_only(tmp_path, check_mode):
    node = quser_node(tmp_path, [{"user": LONG_1, "id": 1}, {"user": LONG_2, "id": 2, "session_name": "rdp-tcp#0"}])
    done = _reset_dispatch.run(node, {"method": "logoff", "allow_dwm": True, "user": LONG_2}, check_mode=check_mode)
    # was: both sessions (quser shows svc-gpu-render-node for each) logged off
    assert [(s["id"], s["outcome"]) for s in done["sessions"]] == [(1, "refused"), (2, "logoff" if check_mode else "logged_off")]
    assert "cut at 20 characters" in done["sessions"][0]["message"]
    assert session_ids(node) == ([1, 2] if check_mode else [1])


@pytest.mark.parametrize("method", ["logoff", "restart_explorer"])
@pytest.mark.parametrize("check_mode", [True, False])
def test_a_domain_prefix_quser_cannot_show_is_proven_by_the_sessions_processes(tmp_path, method, check_mode):
    node = quser_node(tmp_path, [{"user": "bob", "id": 2, "explorer_memory_mib": 300}])
    before = _simulated_node.snapshot_of_state(node.root)
    done = _reset_dispatch.run(node, {"method": method, "allow_dwm": True, "user": "CORP\\bob", "force": True}, check_mode=check_mode)
    # was: WS12\bob's session logged off (or his shell ended) for CORP\bob
    assert [s["outcome"] for s in done["sessions"]] == ["refused"] and not done["changed"]
    after = _simulated_node.snapshot_of_state(node.root)
    assert after["sessions"] == before["sessions"] and after["processes"] == before["processes"]
    ok = _reset_dispatch.run(node, {"method": method, "allow_dwm": True, "user": "WS12\\bob", "force": True}, check_mode=True)
    assert [s["outcome"] for s in ok["sessions"]] == ["logoff" if method == "logoff" else "restart"]


# ---- bad input found inside a method (a gpu naming no GPU) writes nothing on the host, not even an earlier run's
# interrupted outcome --------------------------------------------------------------------------------------------------

def journal_lines(node):
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node import _node_journal
    path = _simulated_node.host_file(node.root, _node_journal.DEFAULT_PATH)
    with open(path) as handle:
        return [json.loads(line) for line in handle if line.strip()]


@pytest.mark.parametrize("gpu", ["GPU-0", 7, "0000:99:00.0"])
def test_a_gpu_naming_no_gpu_writes_nothing_on_the_host(tmp_path, gpu):
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node import _node_journal
    node = sim(tmp_path, gpus=[{"ghost_mib": 2048}])
    _node_journal.WindowsJournal(node, None, "an-earlier-run").intent("restart_adapter", gpu=0)  # it never finished
    before = journal_lines(node)
    with pytest.raises(_reset_dispatch.WinResetInputError, match="^gpu: "):
        _reset_dispatch.run(node, {"method": "restart_adapter", "gpu": gpu}, check_mode=False)
    assert journal_lines(node) == before  # was: the earlier intent's "interrupted" outcome written before the refusal
    done = _reset_dispatch.run(node, {"method": "restart_adapter", "gpu": 0}, check_mode=False)
    assert [a["action"] for a in done["interrupted_actions"]] == ["restart_adapter"]
    closed = [r for r in journal_lines(node) if r.get("interrupted")]
    assert len(closed) == 1 and closed[0]["of_run"] == "an-earlier-run"
    assert _reset_dispatch.run(node, {"method": "restart_adapter", "gpu": 0}, check_mode=False)["interrupted_actions"] == []


def test_the_plan_of_a_walk_whose_rungs_refuse_is_the_real_runs_failure(tmp_path):
    """Check mode ends as the real run does, with the same message and rungs, where a protect entry names nobody."""
    from .test_win_review18 import walk
    outcomes = []
    for check_mode in (True, False):
        node = sim(tmp_path / str(check_mode), gpus=[{"ghost_mib": 2048}], processes=[{"name": "render.exe", "memory_mib": 1024}])
        ladder, dummy = walk(node, check_mode=check_mode, protect_users=["@render"])
        outcomes.append(ladder.start()["outcome"])
    planned, done = outcomes
    assert planned["status"] == done["status"] == "failed"
    assert planned["msg"] == done["msg"]
    assert [(step["rung"], step["msg"]) for step in planned["rungs_tried"]] == [(step["rung"], step["msg"]) for step in done["rungs_tried"]]
