# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Windows ladder: the same walk (_ladder.LadderWalk) on the Windows rungs, run against the simulated Windows
node itself (_simulated_node through _remote_node.SimulatedNode, the node the action plugins get), not a stand-in for it."""

import pytest

from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.simulation import _simulated_node
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows import _node_snapshot
from ansible_collections.gpuops.remediation.plugins.plugin_utils.ladder._ladder_options import walk_argument_spec
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows._windows_walk import logoff_users
from ansible_collections.gpuops.remediation.plugins.module_utils._verdict import kill_targets
from ansible_collections.gpuops.remediation.tests.unit.helpers.win_walk import build, recording_walk, windows_walk_options


def options(**overrides):
    return windows_walk_options("restart_adapter", **overrides)


def walk(node, check_mode=False, **overrides):
    return recording_walk(node, check_mode, **overrides)


def test_a_wsl_vm_that_holds_the_gpu_is_stopped_by_the_wsl_rung(tmp_path):
    node = build(tmp_path, distributions=[{"name": "Ubuntu-22.04", "memory_mib": 3072}])
    ladder, calls = walk(node)
    state = ladder.start()
    assert calls == ["win_gpu_holders_info", "wsl_shutdown", "win_gpu_holders_info"]
    outcome = state["outcome"]
    assert outcome["status"] == "fixed" and outcome["fixed_by"] == "wsl"
    assert outcome["rungs_tried"][0]["plan"][0] == "stopped WSL distribution Ubuntu-22.04"
    assert outcome["memory_freed_mib"] >= 3072
    after = _node_snapshot.take(node)
    assert after["wsl"]["running"] == [] and not [h for h in after["holders"] if h["class"] == "wsl_vm"]


def test_check_mode_plans_the_wsl_rung_and_stops_nothing(tmp_path):
    node = build(tmp_path, distributions=[{"name": "Ubuntu-22.04", "memory_mib": 3072}])
    ladder, calls = walk(node, check_mode=True)
    state = ladder.start()
    assert state["outcome"]["status"] == "planned"
    assert state["outcome"]["rungs_tried"][0]["plan"][0] == "would stop WSL distribution Ubuntu-22.04"
    assert _node_snapshot.take(node)["wsl"]["running"] == ["Ubuntu-22.04"]
    assert calls == ["win_gpu_holders_info", "wsl_shutdown"]


def test_a_healthy_workstation_costs_one_snapshot(tmp_path):
    node = build(tmp_path)
    ladder, calls = walk(node)
    state = ladder.start()
    assert calls == ["win_gpu_holders_info"] and state["outcome"]["status"] == "clean"


def test_the_windows_ceiling_refuses_before_any_action_naming_the_windows_variable(tmp_path):
    node = build(tmp_path, distributions=[{"name": "Ubuntu-22.04", "memory_mib": 3072}])
    ladder, calls = walk(node, max_rung="kill")
    state = ladder.start()
    assert calls == ["win_gpu_holders_info"]
    assert state["outcome"]["status"] == "refused"
    assert state["outcome"]["msg"].endswith("gpu_reclaim_windows_max_rung=wsl would allow it")


def test_a_given_snapshot_without_a_scope_is_taken_again_on_the_node(tmp_path):
    node = build(tmp_path, distributions=[{"name": "Ubuntu-22.04", "memory_mib": 3072}])
    ladder, calls = walk(node)
    stale = _node_snapshot.take(node)
    stale["verdict"] = {"rung": "logoff", "reasons": [{"rung": "logoff", "reason": "what another host said"}]}
    state = ladder.start(stale)
    assert calls[0] == "win_gpu_holders_info"  # the walk read the node itself, not the snapshot it was handed
    assert state["outcome"]["entry_rung"] == "wsl" and state["outcome"]["fixed_by"] == "wsl"


def test_kill_targets_are_compute_processes_only():
    snapshot = {"holders": [
        {"pid": 1, "gpus": [0], "class": "compute"}, {"pid": 2, "gpus": [0], "class": "wsl_vm"},
        {"pid": 3, "gpus": [0], "class": "graphics_session"}, {"pid": 4, "gpus": [0], "class": "system", "session_id": 1},
        {"pid": 5, "gpus": [], "class": "compute"}]}
    assert [h["pid"] for h in kill_targets(snapshot, "windows")] == [1]


def test_logoff_is_of_the_users_whose_session_system_processes_hold_a_gpu():
    snapshot = {"sessions": [{"id": 1, "user": "ada"}, {"id": 2, "user": "bob"}], "holders": [
        {"pid": 10, "gpus": [0], "class": "system", "session_id": 1},
        {"pid": 11, "gpus": [0], "class": "system", "session_id": 1},
        {"pid": 12, "gpus": [0], "class": "system", "session_id": 0},
        {"pid": 13, "gpus": [0], "class": "compute", "session_id": 2}]}
    assert logoff_users(snapshot) == ["ada"]


@pytest.mark.parametrize("overrides, message", [
    ({"max_rung": "reload"}, "max_rung: 'reload' is not a rung of the windows ladder"),
    ({"destructive_rungs": ["reset"]}, "destructive_rungs: 'reset' not a rung of the windows ladder"),
])
def test_rungs_of_the_other_ladder_are_refused(overrides, message):
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.ladder._ladder_options import WalkError, check_options
    args = dict((name, spec.get("default")) for name, spec in walk_argument_spec().items())
    args.update(platform="windows", max_rung="wsl")
    args.update(overrides)
    with pytest.raises(WalkError, match=message):
        check_options(args)


def test_a_job_that_holds_the_gpu_is_ended_by_the_kill_rung_by_pid_and_creation_time(tmp_path):
    node = build(tmp_path, processes=[{"name": "python.exe", "memory_mib": 2048}])
    ladder, calls = walk(node)
    state = ladder.start()
    outcome = state["outcome"]
    assert outcome["status"] == "fixed" and outcome["fixed_by"] == "kill", outcome["summary"]
    assert calls == ["win_gpu_holders_info", "win_gpu_reset"]  # the module's snapshot_after: no inspection after
    assert any("python.exe" in line for line in outcome["rungs_tried"][0]["plan"])
    assert not [h for h in _node_snapshot.take(node)["holders"] if h["name"] == "python.exe"]


def test_the_shell_holding_the_gpu_is_restarted_never_killed_with_its_tree(tmp_path):
    node = build(tmp_path, sessions=[{"user": "ada", "explorer_memory_mib": 1024}])
    before = [h for h in _node_snapshot.take(node)["holders"] if h["name"] == "explorer.exe"]
    assert before and before[0]["class"] == "compute"
    ladder, calls = walk(node, allow_display=True)
    state = ladder.start()
    assert calls[:2] == ["win_gpu_holders_info", "win_gpu_reset"]
    assert state["outcome"]["rungs_tried"][0]["rung"] == "kill"
    assert state["outcome"]["status"] == "fixed", state["outcome"]["summary"]
    assert state["outcome"]["rungs_tried"][0]["plan"][0].startswith("restarted explorer.exe of session 1 (ada)")


def test_a_rung_includes_the_lighter_ones_a_wsl_entry_ends_the_job_too(tmp_path):
    # The WSL VM makes the verdict wsl, so the walk enters above kill: the wsl rung ends the job first, as a Linux reset does.
    node = build(tmp_path, processes=[{"name": "python.exe", "memory_mib": 2048}], distributions=[{"name": "Ubuntu-22.04", "memory_mib": 3072}])
    planned = walk(node, check_mode=True)[0].start()["outcome"]
    assert planned["entry_rung"] == "wsl" and planned["status"] == "planned"
    assert planned["rungs_tried"][0]["plan"][0].startswith("would end pid ") and "python.exe" in planned["rungs_tried"][0]["plan"][0]
    assert "would stop WSL distribution Ubuntu-22.04" in planned["rungs_tried"][0]["plan"]
    ladder, calls = walk(node)
    outcome = ladder.start()["outcome"]
    assert outcome["status"] == "fixed" and outcome["fixed_by"] == "wsl", outcome["summary"]
    assert calls == ["win_gpu_holders_info", "win_gpu_reset", "wsl_shutdown", "win_gpu_holders_info"]
    assert [step["plan"] for step in outcome["rungs_tried"]] == [[line.replace("would ", "").replace("end ", "ended ", 1).replace(
        "stop ", "stopped ", 1).replace("run:", "ran:") for line in planned["rungs_tried"][0]["plan"]]]
    after = _node_snapshot.take(node)
    assert after["verdict"]["rung"] == "none" and [h["class"] for h in after["holders"]] == ["graphics_session"]


@pytest.mark.parametrize("check_mode", [True, False])
def test_an_empty_gpu_list_restarts_no_adapter(tmp_path, check_mode):
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.rungs import _reset_dispatch
    node = build(tmp_path, gpus=[{"ghost_mib": 2048}])
    before = _simulated_node.snapshot_of_state(node.root)
    done = _reset_dispatch.run(node, {"method": "restart_adapter", "gpu": []}, check_mode=check_mode)
    assert not done["failed"] and not done["changed"], done
    after = _simulated_node.snapshot_of_state(node.root)
    assert [e["argv"] for e in after["command_log"] if "/restart-device" in e["argv"]] == []
    assert after["gpus"] == before["gpus"]
