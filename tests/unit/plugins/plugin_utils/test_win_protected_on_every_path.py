# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The protect rules on every path that ends, logs off or restarts on Windows: win_gpu_reset's methods called on their
own (kill, logoff, restart_adapter, restart_explorer) and the walk, in check mode and for real; protect_users in the
forms Windows writes (and refused where it names a group or a SID); what quser cannot show proven by the processes' owners;
the run's own process, a Hyper-V VM's memory process and a system process never ended, a user's program that only
borrows their names ended by the kill rung; protect_users failing closed where a holder's owner is not known; the
desktop ended only with allow_display; a protected user's WSL VM. The rule itself: test_win_who_may_be_ended.py."""

import pytest

from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.rungs import _reset_dispatch
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.simulation import _simulated_node
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows import _node_snapshot, _windows_walk
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.protect import _who_may_end
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node._remote_node import SimulatedNode
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.protect._who_may_end import Policy, refusal
from ansible_collections.gpuops.remediation.tests.unit.helpers.win_walk import (
    build, command_log, recording_walk, running, stops, windows_walk_options, wsl_node, wsl_walk,
)


def options(**overrides):
    return windows_walk_options("restart_adapter", **overrides)


def walk(node, check_mode=False, **overrides):
    return recording_walk(node, check_mode, lambda name, args: (name, args.get("method")), **overrides)


def commands(node):
    """The commands the simulated node ran (given the node, or its root)."""
    return command_log(getattr(node, "root", node))


@pytest.mark.parametrize("check_mode", [True, False])
def test_restart_adapter_is_refused_for_a_protected_application_that_only_draws(tmp_path, check_mode):
    # A protected name holds the GPU as a graphics application (not a compute context): an adapter restart takes the
    # GPU from it as surely as from a compute process.
    node = build(tmp_path, gpus=[{"ghost_mib": 2048}], processes=[{"name": "render.exe", "memory_mib": 512, "graphics": True}])
    ladder, calls = walk(node, check_mode=check_mode, protect_names=["render"], max_rung="restart_adapter")
    state = ladder.start()
    assert ("win_gpu_reset", "restart_adapter") not in calls, state["outcome"]
    assert not [argv for argv in commands(node) if argv[0].lower().startswith("pnputil") and "/restart-device" in argv]


@pytest.mark.parametrize("check_mode", [True, False])
def test_win_gpu_reset_logoff_called_on_its_own_never_logs_off_a_protected_user(tmp_path, check_mode):
    node = build(tmp_path)
    args = {"method": "logoff", "user": "ada", "protect_users": ["WS12\\ADA"]}
    done = _reset_dispatch.run(node, args, check_mode=check_mode)
    assert not done["changed"], done["plan"]
    assert [s["user"] for s in _node_snapshot.take(node)["sessions"]] == ["ada"]


def test_win_gpu_reset_logoff_never_ends_a_protected_name_running_in_the_session(tmp_path):
    node = build(tmp_path, processes=[{"name": "render.exe", "memory_mib": 0}])
    done = _reset_dispatch.run(node, {"method": "logoff", "user": "ada", "protect_names": ["render"]}, check_mode=False)
    assert not done["changed"], done["plan"]
    assert "render.exe" in [p["name"] for p in _simulated_node.snapshot_of_state(node.root)["processes"]]


@pytest.mark.parametrize("check_mode", [True, False])
def test_win_gpu_reset_restart_adapter_called_on_its_own_leaves_a_gpu_a_protected_process_holds(tmp_path, check_mode):
    node = build(tmp_path, gpus=[{"ghost_mib": 2048}], processes=[{"name": "render.exe", "memory_mib": 512, "graphics": True}])
    done = _reset_dispatch.run(node, {"method": "restart_adapter", "protect_names": ["RENDER.EXE"]}, check_mode=check_mode)
    assert done["failed"] and not done["changed"] and "render.exe" in done["msg"] and "protected name" in done["msg"]
    assert [a["outcome"] for a in done["adapters"]] == ["refused"]
    assert not [argv for argv in commands(node) if "/restart-device" in argv]


@pytest.mark.parametrize("check_mode", [True, False])
def test_the_walk_never_logs_off_a_protected_user(tmp_path, check_mode):
    node = build(tmp_path, gpus=[{"recovery_action": "None"}], processes=[])
    snapshot = _node_snapshot.take(node)
    # a system process of ada's session holds the GPU: the logoff rung's case
    snapshot["holders"] = [{"pid": 999, "name": "csrss.exe", "class": "system", "session_id": 1, "gpus": [0], "user": None}]
    ladder, calls = walk(node, check_mode=check_mode, protect_users=["ada"], max_rung="logoff")
    step, dummy = ladder._take_logoff(snapshot)
    assert not step["changed"] and [s["user"] for s in _node_snapshot.take(node)["sessions"]] == ["ada"], step


@pytest.mark.parametrize("check_mode", [False])
def test_a_critical_process_with_an_ordinary_name_is_never_ended(tmp_path, check_mode):
    # A service host Windows marks critical: no name rule knows it. TerminateProcess would end it (and bugcheck the
    # host); the terminate script asks IsProcessCritical on the handle first and leaves it.
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.rungs import _end_by_handle
    node = build(tmp_path, processes=[{"name": "svchost.exe", "memory_mib": 1024, "critical": True, "user": "NT AUTHORITY\\SYSTEM", "session_id": 0}])
    holder = next(h for h in _node_snapshot.take(node)["holders"] if h["name"] == "svchost.exe")
    done = _reset_dispatch.run(node, {"method": "kill", "holders": [holder]}, check_mode=check_mode)
    assert not done["changed"] and done["failed"], done["plan"]
    assert "critical system process" in done["processes"][0]["reason"]
    assert holder["pid"] in [p["pid"] for p in _simulated_node.snapshot_of_state(node.root)["processes"]]
    assert _end_by_handle.reason({"outcome": "critical", "code": 0}).startswith("a critical system process")
    assert "Win32 error 50" in _end_by_handle.reason({"outcome": "critical", "code": 50})


@pytest.mark.parametrize("check_mode", [True, False])
def test_win_gpu_reset_kill_leaves_a_process_protected_by_its_path(tmp_path, check_mode):
    node = build(tmp_path, processes=[{"name": "render.exe", "memory_mib": 1024, "image_path": "C:\\Apps\\render.exe"}])
    holder = next(h for h in _node_snapshot.take(node)["holders"] if h["name"] == "render.exe")
    done = _reset_dispatch.run(node, {"method": "kill", "holders": [holder], "protect_names": ["c:\\apps\\RENDER.EXE"]}, check_mode=check_mode)
    assert not done["changed"] and done["processes"][0]["outcome"] == "refused"
    assert holder["pid"] in [p["pid"] for p in _simulated_node.snapshot_of_state(node.root)["processes"]]


def test_a_hyper_v_vm_holding_the_gpu_never_shuts_down_an_idle_wsl(tmp_path):
    node = build(tmp_path, processes=[{"name": "vmmem", "memory_mib": 4096, "user": "NT VIRTUAL MACHINE\\7A1B", "session_id": 0}],
                 distributions=[{"name": "Ubuntu", "memory_mib": 0}])
    ladder, calls = walk(node, max_rung="wsl")
    ladder.start()
    assert not [argv for argv in commands(node) if argv[0].lower().endswith("wsl.exe") and "--shutdown" in argv]


sim = build  # the simulated WS12 with ada's session


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
    node = sim(tmp_path, gpus=[{"ghost_mib": 2048}], processes=[{"name": "render.exe", "memory_mib": 1024}])
    before = _simulated_node.snapshot_of_state(node.root)
    ladder, dummy = walk(node, check_mode=check_mode, protect_users=["@render"])
    state = ladder.start()
    assert state["outcome"]["status"] == "failed"  # check mode fails where the real run fails
    assert [rung["msg"] for rung in state["outcome"]["rungs_tried"] if rung["failed"]][0].startswith(
        "win_gpu_reset: protect_users[0]: '@render' is a group")
    after = _simulated_node.snapshot_of_state(node.root)
    assert after["processes"] == before["processes"] and not [e for e in after["command_log"] if e["argv"][0] == "pnputil"]


@pytest.mark.parametrize("check_mode", [True, False])
def test_a_users_program_named_vmmem_holding_the_gpu_is_no_vm_and_the_walk_ends_it(tmp_path, check_mode):
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


@pytest.mark.parametrize("check_mode", [True, False])
def test_a_users_program_named_csrss_is_ended_by_the_kill_rung_not_a_logoff(tmp_path, check_mode):
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


def test_the_plan_of_a_walk_whose_rungs_refuse_is_the_real_runs_failure(tmp_path):
    """Check mode ends as the real run does, with the same message and rungs, where a protect entry names nobody."""
    outcomes = []
    for check_mode in (True, False):
        node = sim(tmp_path / str(check_mode), gpus=[{"ghost_mib": 2048}], processes=[{"name": "render.exe", "memory_mib": 1024}])
        ladder, dummy = walk(node, check_mode=check_mode, protect_users=["@render"])
        outcomes.append(ladder.start()["outcome"])
    planned, done = outcomes
    assert planned["status"] == done["status"] == "failed"
    assert planned["msg"] == done["msg"]
    assert [(step["rung"], step["msg"]) for step in planned["rungs_tried"]] == [(step["rung"], step["msg"]) for step in done["rungs_tried"]]


# ---- protect_users fails closed: a holder whose owner is not known is never ended while it is set --------------------

def hidden_owner_node(tmp_path, **scenario):
    root = str(tmp_path / "ws12")
    spec = dict({"hostname": "WS12", "gpus": [{"ghost_mib": 2048}],
                 "processes": [{"name": "render.exe", "memory_mib": 1024, "owner_known": False}]}, **scenario)
    _simulated_node.write_node(root, _simulated_node.build_state(spec))
    return SimulatedNode(root, "ada")


@pytest.mark.parametrize("check_mode", [True, False])
def test_kill_called_on_its_own_never_ends_a_holder_whose_owner_is_not_known_while_protect_users_is_set(tmp_path, check_mode):
    node = hidden_owner_node(tmp_path)
    holder = next(h for h in _node_snapshot.take(node)["holders"] if h["name"] == "render.exe")
    assert holder["user"] is None
    done = _reset_dispatch.run(node, {"method": "kill", "holders": [holder], "protect_users": ["bob"]}, check_mode=check_mode)
    assert not done["changed"] and done["processes"][0]["outcome"] == "refused"
    reason = done["processes"][0]["reason"]
    assert ("pid %s" % holder["pid"]) in reason and "owner is not known" in reason and "run elevated" in reason
    assert holder["pid"] in [p["pid"] for p in _simulated_node.snapshot_of_state(node.root)["processes"]]


def test_without_protect_users_the_same_holder_is_ended(tmp_path):
    node = hidden_owner_node(tmp_path)
    holder = next(h for h in _node_snapshot.take(node)["holders"] if h["name"] == "render.exe")
    done = _reset_dispatch.run(node, {"method": "kill", "holders": [holder]}, check_mode=False)
    assert done["changed"] and done["ended_pids"] == [holder["pid"]]


@pytest.mark.parametrize("check_mode", [True, False])
def test_restart_adapter_is_refused_when_a_holder_of_the_gpu_has_no_known_owner_and_protect_users_is_set(tmp_path, check_mode):
    node = hidden_owner_node(tmp_path)
    done = _reset_dispatch.run(node, {"method": "restart_adapter", "protect_users": ["bob"]}, check_mode=check_mode)
    assert done["failed"] and not done["changed"] and "owner is not known" in done["msg"]
    assert _simulated_node.snapshot_of_state(node.root)["gpus"][0]["restarts"] == 0


def test_the_walk_leaves_a_holder_without_a_known_owner_when_protect_users_is_set():
    holders = [{"pid": 10, "name": "python.exe", "user": None, "class": "compute"}, {"pid": 11, "name": "job.exe", "user": "WS12\\ada", "class": "compute"}]
    may, left = _windows_walk.protected_split(holders, {"protect_users": ["bob"], "protect_names": []})
    assert [h["pid"] for h in may] == [11] and [h["pid"] for h, dummy in left] == [10]


def test_a_tree_member_without_a_known_owner_refuses_the_tree():
    processes = {100: {"pid": 100, "ppid": 1, "name": "python.exe", "user": "WS12\\ada", "creation_time_ms": 5000},
                 101: {"pid": 101, "ppid": 100, "name": "helper.exe", "user": None, "creation_time_ms": 6000}}
    why = _who_may_end.tree_refusal(processes, processes[100], _who_may_end.Policy(protect_users=["bob"]))
    assert "pid 101 (helper.exe)" in why and "owner is not known" in why


# ---- the walk: the display, protected processes and users, an idle distribution --------------------------------------

# A desktop is a destructive step: the restart of the shell and the logoff end it only with allow_display (issue 26, rule 3).
@pytest.mark.parametrize("check_mode", [True, False])
def test_a_restart_of_the_shell_refuses_without_allow_display(tmp_path, check_mode):
    node = build(tmp_path, sessions=[{"user": "ada", "explorer_memory_mib": 1024}])
    before = _simulated_node.snapshot_of_state(node.root)
    ladder, dummy = recording_walk(node, check_mode=check_mode, max_rung="kill")
    outcome = ladder.start()["outcome"]
    failed = [step for step in outcome["rungs_tried"] if step["failed"]]
    assert outcome["status"] == "failed", outcome["summary"]
    assert failed and "would end the desktop of session 1 (display server pid" in failed[-1]["msg"], outcome["rungs_tried"]
    assert "dwm.exe" in failed[-1]["msg"] and "allow_dwm=true (gpu_reclaim_allow_display through the roles)" in failed[-1]["msg"]
    after = _simulated_node.snapshot_of_state(node.root)
    assert after["processes"] == before["processes"] and after["sessions"] == before["sessions"]


@pytest.mark.parametrize("check_mode", [True, False])
@pytest.mark.parametrize("method", ["logoff", "restart_explorer"])
def test_win_gpu_reset_ends_no_desktop_without_allow_dwm(tmp_path, check_mode, method):
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.rungs import _reset_dispatch
    node = build(tmp_path, sessions=[{"user": "ada", "explorer_memory_mib": 1024}])
    before = _simulated_node.snapshot_of_state(node.root)
    [dwm] = [p["pid"] for p in before["processes"] if p["name"] == "dwm.exe"]
    done = _reset_dispatch.run(node, {"method": method, "user": "ada"}, check_mode=check_mode)
    assert done["failed"] and not done["changed"]
    assert "would end the desktop of session 1 (display server pid %s (dwm.exe)); allow_dwm=true" % dwm in done["msg"]
    after = _simulated_node.snapshot_of_state(node.root)
    assert after["processes"] == before["processes"] and after["sessions"] == before["sessions"]
    allowed = _reset_dispatch.run(node, {"method": method, "user": "ada", "allow_dwm": True}, check_mode=True)
    assert not allowed["failed"] and allowed["changed"], allowed


def test_protected_processes_are_left_alone_and_no_heavier_rung_takes_the_gpu_from_them(tmp_path):
    node = build(tmp_path, processes=[{"name": "render.exe", "memory_mib": 2048}, {"name": "python.exe", "memory_mib": 1024}])
    ladder, calls = recording_walk(node, protect_names=["RENDER"], max_rung="restart_adapter")
    state = ladder.start()
    tried = state["outcome"]["rungs_tried"]
    assert [step["rung"] for step in tried] == ["kill", "wsl", "restart_adapter"]  # wsl: nothing ran, nothing done
    assert tried[0]["plan"][0].startswith("left pid ") and "render.exe: protected name: render.exe" in tried[0]["plan"][0]
    assert not tried[1]["changed"]
    assert tried[2]["failed"] and "protected processes too" in tried[2]["msg"] and "render.exe" in tried[2]["msg"]
    assert calls.count("win_gpu_reset") == 1  # the kill of python.exe; the adapter restart was never sent
    holders = [h["name"] for h in _node_snapshot.take(node)["holders"]]
    assert "render.exe" in holders and "python.exe" not in holders
    assert state["outcome"]["status"] == "failed"


def test_protected_users_match_with_or_without_the_domain(tmp_path):
    node = build(tmp_path, processes=[{"name": "python.exe", "memory_mib": 1024}])
    ladder, calls = recording_walk(node, protect_users=["ADA"], max_rung="kill")
    state = ladder.start()
    assert calls == ["win_gpu_holders_info"]  # nothing to end: the only holder is ada's
    assert state["outcome"]["rungs_tried"][0]["plan"][0].endswith("protected user: WS12\\ada")


@pytest.mark.parametrize("check_mode", [True, False])
def test_an_idle_distribution_is_never_stopped_for_a_protected_holder(tmp_path, check_mode):
    # Issue 18, defect 1: the walk climbed to the wsl rung and shut down a distribution holding nothing, then refused
    # restart_adapter anyway. A rung runs only when what it acts on holds GPU memory it can get back.
    node = build(tmp_path, processes=[{"name": "render.exe", "memory_mib": 2048}, {"name": "python.exe", "memory_mib": 1024}],
                 distributions=[{"name": "Ubuntu-22.04", "memory_mib": 0}])
    ladder, calls = recording_walk(node, check_mode=check_mode, protect_names=["render"], max_rung="restart_adapter")
    state = ladder.start()
    assert "wsl_shutdown" not in calls
    assert _node_snapshot.take(node)["wsl"]["running"] == ["Ubuntu-22.04"]
    log = [entry["argv"] for entry in _simulated_node.snapshot_of_state(node.root)["command_log"]]
    assert not [argv for argv in log if argv[0].lower().endswith("wsl.exe") and "--list" not in argv]
    tried = state["outcome"]["rungs_tried"]
    if not check_mode:
        assert [step["rung"] for step in tried] == ["kill", "wsl", "restart_adapter"]
        assert not tried[1]["changed"] and not [line for line in tried[1]["plan"] if "WSL" in line or "wsl" in line]
        assert tried[2]["failed"] and "render.exe" in tried[2]["msg"]


# ---- the wsl rung and the adapter restart: a protected user's WSL VM -------------------------------------------------

@pytest.mark.parametrize("check_mode", [True, False])
def test_the_wsl_rung_is_refused_for_a_protected_user_before_the_kill_runs(tmp_path, check_mode):
    node = wsl_node(tmp_path, distributions=[{"name": "Ubuntu", "memory_mib": 1024}], processes=[{"name": "python.exe", "memory_mib": 512}])
    outcome = wsl_walk(node, check_mode=check_mode, protect_users=["WS12\\ADA"])
    assert stops(node.root) == [] and running(node.root) == ["Ubuntu"]
    assert "python.exe" in [p["name"] for p in _simulated_node.snapshot_of_state(node.root)["processes"]]  # no lighter side effect
    [rung] = outcome["rungs_tried"]
    assert rung["failed"] and rung["msg"].startswith("refused: the wsl rung would stop the WSL distributions of a protected user")
    assert "protected user: WS12\\ada" in rung["msg"]


@pytest.mark.parametrize("check_mode", [True, False])
def test_an_adapter_restart_is_refused_while_a_protected_user_s_wsl_vm_holds_the_gpu(tmp_path, check_mode):
    # the VM runs as its own account; its hold is its user's, whom the caller protects
    node = wsl_node(tmp_path, gpus=[{"ghost_mib": 2048}], distributions=[{"name": "Ubuntu", "memory_mib": 1024, "gpu_probe": False}])
    outcome = wsl_walk(node, check_mode=check_mode, protect_users=["bob", "ada"], max_rung="restart_adapter")
    assert stops(node.root) == [] and running(node.root) == ["Ubuntu"]
    assert not [argv for argv in commands(node.root) if "/restart-device" in argv]
    assert [r for r in outcome["rungs_tried"] if r["msg"].startswith("refused")]
