"""The walk up the ladder (plugin_utils/ladder/_ladder.py), without Ansible.

The node is a small model (tests/unit/helpers/ladder_node.py) whose snapshots are judged by the real gpu_state() and
verdict(), and which module calls change as the modules change a node, or which they predict in check mode. The modules
themselves are proven through Ansible by the integration targets; here the walk's decisions are: which module runs,
with what, in what order, and when it stops.
"""

import copy

import pytest

from ansible_collections.gpuops.remediation.plugins.module_utils._verdict import RUNGS, WINDOWS_RUNGS
from ansible_collections.gpuops.remediation.plugins.plugin_utils.ladder._ladder import LadderWalk
from ansible_collections.gpuops.remediation.plugins.plugin_utils.ladder._ladder_decisions import (
    drain_followup, fleet_guard, health_gate, hold_reason, next_rung, slurm_drain_state,
)
from ansible_collections.gpuops.remediation.plugins.plugin_utils.ladder._ladder_options import WalkError, check_options
from ansible_collections.gpuops.remediation.plugins.plugin_utils.ladder._ladder_outcome import kill_plan_lines

from ansible_collections.gpuops.remediation.tests.unit.helpers.ladder_walk import walk_arguments as arguments, walk_options as options
from ansible_collections.gpuops.remediation.tests.unit.helpers.ladder_node import DAEMON, ORPHAN, Node


def walk(node, check_mode=False, **option_overrides):
    return LadderWalk(options(**option_overrides), lambda module, args: node.execute(module, args, check_mode), check_mode,
                      "node07", clock=iter(range(100, 10000, 2)).__next__)


def modules(node):
    return [name for name, dummy in node.calls]


def test_a_healthy_node_costs_the_snapshot_it_was_given_and_no_module():
    node = Node([{"ghost": 0}], holders=[DAEMON])
    state = walk(node).start(node.snapshot())
    assert node.calls == []
    assert state["outcome"]["status"] == "clean"
    assert state["outcome"]["msg"] == "no GPU memory held: nothing to do"
    assert state["pending"] is None and state["drain_followup"] is None
    assert state["outcome"]["held_by"] == []  # daemons are no holders of the report


def test_without_a_snapshot_the_walk_takes_one():
    node = Node([{"ghost": 0}])
    state = walk(node).start()
    assert modules(node) == ["gpu_holders_info"]
    assert "gpus" not in node.calls[0][1] and "run_id" not in node.calls[0][1]  # the inspection gets snapshot options only
    assert state["outcome"]["status"] == "clean"


def test_a_failed_first_inspection_ends_the_walk_with_its_message():
    node = Node([{"ghost": 0}])
    node.inspect_fails = True
    with pytest.raises(WalkError, match="the first inspection failed: probe failed"):
        walk(node).start()


def test_an_orphan_holder_is_ended_by_the_kill_rung_and_nothing_inspects_again():
    node = Node([{"ghost": 0}], holders=[ORPHAN, DAEMON])
    state = walk(node).start(node.snapshot())
    assert modules(node) == ["gpu_kill"]
    args = node.calls[0][1]
    assert args["holders"] == [{"pid": 4242, "start_time": 123456}]  # identity by pid and start time; the daemon is not a target
    assert args["wait_timeout"] == 30.0 and args["run_id"] == "run-1" and args["signals"] == ["TERM", "KILL"]
    outcome = state["outcome"]
    assert outcome["status"] == "fixed" and outcome["fixed_by"] == "kill"
    assert outcome["msg"] == "the kill rung got the memory back (4096 MiB)"
    assert outcome["rungs_tried"] == [{"rung": "kill", "changed": True, "failed": False, "msg": "",
                                       "plan": ["ended pid 4242 orphan-worker with TERM"]}]
    assert outcome["gpus"][0]["memory_used_mib_before"] == 4096 and outcome["gpus"][0]["memory_used_mib_after"] == 0
    assert [i["after_rung"] for i in outcome["inspections"]] == [None, "kill"]
    assert "  held by pid 4242 orphan-worker (alice, compute) on GPU 0: 4096 MiB" in outcome["summary"]
    assert "  GPU 0: 4096 -> 0 MiB used, 4096 MiB back (busy -> ok)" in outcome["summary"]


def test_ghost_memory_enters_at_the_reset_rung_with_one_module():
    node = Node([{"ghost": 3072}])
    ladder = walk(node)
    state = ladder.start(node.snapshot())
    # No holder to end first, no inspection after (the module returned it), then the health gate (no DCGM here).
    assert modules(node) == ["gpu_reset", "gpu_health_check"]
    assert ladder.modules_run == ["gpuops.remediation.gpu_reset", "gpuops.remediation.gpu_health_check"]
    outcome = state["outcome"]
    assert outcome["status"] == "fixed" and outcome["fixed_by"] == "reset" and outcome["memory_freed_mib"] == 3072
    assert outcome["rungs_tried"][0]["plan"] == ["reset GPU 0 (00000000:18:00.0): ghost memory",
                                                 "stopped and started again nvidia-persistenced.service"]


def test_the_reset_rung_ends_the_holders_of_memory_first():
    holder = dict(ORPHAN, gpus=[1], pid=5151)
    node = Node([{"ghost": 3072}, {"ghost": 0}], holders=[holder])
    state = walk(node).start(node.snapshot())
    assert modules(node) == ["gpu_kill", "gpu_reset", "gpu_health_check"]
    assert state["outcome"]["status"] == "fixed"
    assert state["outcome"]["rungs_tried"][0]["changed"] is True


def test_a_rung_that_does_not_help_leads_to_the_next_one():
    node = Node([{"ghost": 2048}], reset_fails=True)
    state = walk(node).start(node.snapshot())
    assert modules(node) == ["gpu_reset", "nvidia_driver_reload", "gpu_health_check"]
    tried = state["outcome"]["rungs_tried"]
    assert [(s["rung"], s["failed"]) for s in tried] == [("reset", True), ("reload", False)]
    assert tried[0]["msg"] == "gpu_reset failed: GPU 0: Not Supported"
    assert state["outcome"]["status"] == "fixed" and state["outcome"]["fixed_by"] == "reload"


def test_a_failed_rung_without_an_after_snapshot_is_followed_by_an_inspection():
    node = Node([{"ghost": 2048}], reload_fails=True)
    state = walk(node, max_rung="reload").start(dict(node.snapshot(), verdict={"rung": "reload", "reasons": [
        {"rung": "reload", "reason": "asked for"}]}))
    assert modules(node) == ["nvidia_driver_reload", "gpu_holders_info"]
    outcome = state["outcome"]
    assert outcome["status"] == "failed"
    assert outcome["msg"].startswith("GPU memory still held after the reload rung(s); the heaviest rung allowed is reload "
                                     "(gpu_reclaim_max_rung=reload, gpu_reclaim_allow_reboot=False): ")


def test_never_above_the_ceiling():
    node = Node([{"ghost": 2048}], reset_fails=True)
    state = walk(node, max_rung="reset").start(node.snapshot())
    assert modules(node) == ["gpu_reset"]
    assert state["outcome"]["status"] == "failed"
    assert "the heaviest rung allowed is reset (gpu_reclaim_max_rung=reset" in state["outcome"]["msg"]


def test_evidence_above_the_ceiling_is_refused_before_any_action():
    node = Node([{"ghost": 2048}])
    state = walk(node, max_rung="kill").start(node.snapshot())
    assert node.calls == []
    outcome = state["outcome"]
    assert outcome["status"] == "refused" and outcome["rungs_tried"] == []
    assert outcome["msg"].startswith("the evidence needs the reset rung (GPU 0 (00000000:18:00.0) has 2048 MiB in use")
    assert outcome["msg"].endswith("but the heaviest rung allowed is kill (gpu_reclaim_max_rung=kill, gpu_reclaim_allow_reboot=False); "
                                   "gpu_reclaim_max_rung=reset would allow it")


def test_a_lost_gpu_is_refused_without_allow_reboot_even_with_max_rung_reboot():
    node = Node([{"ghost": 0}], lost=True)
    state = walk(node, max_rung="reboot", allow_reboot=False).start(node.snapshot())
    assert node.calls == [] and state["outcome"]["status"] == "refused"
    assert "needs the reboot rung" in state["outcome"]["msg"] and "heaviest rung allowed is graphics" in state["outcome"]["msg"]
    assert state["outcome"]["msg"].endswith("gpu_reclaim_max_rung=reboot and gpu_reclaim_allow_reboot=true would allow it")


def test_the_reboot_is_the_controllers_and_the_walk_inspects_after_it():
    node = Node([{"ghost": 0}], lost=True)
    ladder = walk(node, max_rung="reboot", allow_reboot=True)
    state = ladder.start(node.snapshot())
    assert node.calls == []
    assert state["pending"] == "reboot" and state["pending_rung"] == "reboot" and "outcome" not in state
    node.gpus[0]["lost"] = False  # what the reboot did
    state = ladder.continue_after("reboot", state, {"changed": True, "rebooted": True, "elapsed": 40})
    assert modules(node) == ["gpu_holders_info"]
    assert state["outcome"]["status"] == "fixed" and state["outcome"]["fixed_by"] == "reboot"
    assert state["outcome"]["rungs_tried"][0]["plan"] == ["rebooted the node"]


def test_a_failed_reboot_fails_the_walk_without_inspecting():
    node = Node([{"ghost": 0}], lost=True)
    ladder = walk(node, max_rung="reboot", allow_reboot=True)
    state = ladder.continue_after("reboot", ladder.start(node.snapshot()), {"failed": True, "msg": "timed out waiting"})
    assert node.calls == []
    assert state["outcome"]["status"] == "failed"
    assert state["outcome"]["rungs_tried"][0]["failed"] and state["outcome"]["rungs_tried"][0]["msg"] == "timed out waiting"
    assert state["outcome"]["rungs_tried"][0]["plan"] == []  # never "rebooted the node" for a reboot that failed


def test_the_walk_pauses_for_the_drain_before_the_first_destructive_rung_only():
    holder = dict(ORPHAN)
    node = Node([{"ghost": 0}], holders=[holder], survivors=[4242])
    ladder = walk(node, drain="slurm")
    state = ladder.start(node.snapshot())
    assert modules(node) == ["gpu_kill"]  # kill is not destructive by default: no drain for it
    assert state["pending"] == "drain" and state["pending_rung"] == "reset"
    node.survivors.clear()
    drained = {"changed": True, "ours": True, "msg": "drained with reason 'x'"}
    state = ladder.continue_after("drain", state, {"scheduler": "slurm", "slurm": drained, "failure": {}})
    assert state["pending"] is None
    assert modules(node) == ["gpu_kill", "gpu_kill", "gpu_reset", "gpu_health_check"]
    assert state["outcome"]["status"] == "fixed" and state["outcome"]["drained"] == "slurm"
    assert state["drain_followup"] == "resume"
    state = ladder.continue_after("undrain", state, {"scheduler": "slurm", "slurm": {"changed": True, "msg": "resumed"}})
    assert state["outcome"]["undrained"] == "slurm" and state["drain_followup"] is None
    assert state["outcome"]["drain_notes"] == ["slurm drain: drained with reason 'x'", "slurm resume: resumed"]
    with pytest.raises(WalkError, match="continue_after=undrain, but the walk waits for nothing"):
        ladder.continue_after("undrain", state, {"scheduler": "slurm", "slurm": {}})


def test_no_destructive_rung_runs_when_the_drain_failed():
    node = Node([{"ghost": 2048}])
    ladder = walk(node, drain="slurm")
    state = ladder.start(node.snapshot())
    failure = {"failed": True, "ours": True, "msg": "refused: jobs 17 (long-training) still run on gpunode1"}
    state = ladder.continue_after("drain", state, {"scheduler": "slurm", "slurm": failure, "failure": failure})
    assert node.calls == []
    outcome = state["outcome"]
    assert outcome["status"] == "failed"
    assert outcome["rungs_tried"] == [{"rung": "reset", "changed": False, "failed": True, "msg": failure["msg"], "plan": []}]
    assert outcome["drained"] == "slurm"  # kept while the jobs still ran (keep_drain): ours to hand on
    assert state["drain_followup"] == "release"
    # The outcome says what happened: the drain failed, no reset ran (not "memory still held after the reset rung").
    assert outcome["msg"] == "no reset rung ran, the walk stopped at the scheduler: " + failure["msg"]


def test_a_refusal_that_left_the_node_as_found_hands_nothing_on():
    node = Node([{"ghost": 2048}])
    ladder = walk(node, drain="slurm")
    failure = {"failed": True, "ours": False, "msg": "jobs run on Slurm node gpunode1: 17 (bob, train); the node was left as found"}
    state = ladder.continue_after("drain", ladder.start(node.snapshot()), {"scheduler": "slurm", "slurm": failure, "failure": failure})
    assert state["outcome"]["drained"] is None and state["drain_followup"] is None
    assert state["outcome"]["summary"][-1] == "  scheduler: slurm drain: " + failure["msg"]


def test_the_slurm_drain_is_checked_again_before_each_later_destructive_rung():
    node = Node([{"ghost": 2048}], reset_fails=True)
    ladder = walk(node, drain="slurm", max_rung="reload")
    state = ladder.start(node.snapshot())
    assert state["pending"] == "drain" and slurm_drain_state(state) == "drained"
    state = ladder.continue_after("drain", state, {"scheduler": "slurm", "slurm": {"changed": True, "ours": True, "msg": "drained"}})
    # The reset failed; before the reload the walk pauses again, for the check.
    assert modules(node) == ["gpu_reset"] and state["pending"] == "drain" and state["pending_rung"] == "reload"
    assert slurm_drain_state(state) == "confirmed"
    resumed = {"failed": True, "msg": "Slurm node gpunode1 is back in service (state IDLE): someone resumed it"}
    state = ladder.continue_after("drain", state, {"scheduler": "slurm", "slurm": resumed, "failure": resumed})
    outcome = state["outcome"]
    assert modules(node) == ["gpu_reset"]  # no reload
    assert outcome["status"] == "failed" and outcome["drained"] == "slurm"
    assert outcome["msg"].startswith("no reload rung ran, the walk stopped at the scheduler: Slurm node gpunode1 is back in service")
    assert "after the reset rung(s), GPU memory is still held" in outcome["msg"]
    assert outcome["drain_notes"][-1] == "slurm check before the reload rung: " + resumed["msg"]


def test_a_confirmed_drain_lets_the_next_rung_run():
    node = Node([{"ghost": 2048}], reset_fails=True)
    ladder = walk(node, drain="slurm", max_rung="reload")
    state = ladder.continue_after("drain", ladder.start(node.snapshot()), {"scheduler": "slurm", "slurm": {"ours": True}})
    state = ladder.continue_after("drain", state, {"scheduler": "slurm", "slurm": {"msg": "still drained by gpuops run run-1"}})
    assert modules(node) == ["gpu_reset", "nvidia_driver_reload", "gpu_health_check"]
    assert state["outcome"]["status"] == "fixed" and state["outcome"]["drained"] == "slurm"
    assert state["drain_followup"] == "resume"


def test_a_failed_resume_fails_the_walk_naming_it_and_keeps_what_ran():
    node = Node([{"ghost": 2048}])
    ladder = walk(node, drain="slurm")
    state = ladder.continue_after("drain", ladder.start(node.snapshot()), {"scheduler": "slurm", "slurm": {"ours": True, "msg": "drained"}})
    gone = {"failed": True, "msg": "scontrol --oneliner show node failed (rc 1): Unable to contact slurm controller"}
    state = ladder.continue_after("undrain", state, {"scheduler": "slurm", "slurm": gone, "failure": gone})
    outcome = state["outcome"]
    assert outcome["status"] == "failed" and outcome["undrained"] is None
    assert outcome["msg"] == "the reset rung got the memory back (2048 MiB); then the Slurm resume failed: " + gone["msg"]
    assert [step["rung"] for step in outcome["rungs_tried"]] == ["reset"]


def test_a_node_someone_else_cordoned_is_walked_without_our_cordon():
    node = Node([{"ghost": 2048}])
    ladder = walk(node, drain="kubernetes")
    state = ladder.continue_after("drain", ladder.start(node.snapshot()),
                                  {"scheduler": "kubernetes", "kubernetes": {"skipped": True}, "failure": {}})
    assert modules(node) == ["gpu_reset", "gpu_health_check"]
    assert state["outcome"]["status"] == "fixed" and state["outcome"]["drained"] is None
    assert state["drain_followup"] is None  # not our cordon: left as it is


def test_check_mode_plans_the_first_rung_only_with_the_modules_predicting():
    node = Node([{"ghost": 3072}], holders=[dict(ORPHAN, gpus=[0])])
    before = copy.deepcopy(node.gpus)
    state = walk(node, check_mode=True).start(node.snapshot())
    assert modules(node) == ["gpu_kill", "gpu_reset"]
    assert node.gpus == before and len(node.holders) == 1
    outcome = state["outcome"]
    assert outcome["status"] == "planned" and outcome["msg"] == "check mode: would take the reset rung"
    assert outcome["rungs_tried"][0]["plan"] == ["would end pid 4242 orphan-worker with TERM",
                                                 "would reset GPU 0 (00000000:18:00.0): ghost memory",
                                                 "would stop and start again nvidia-persistenced.service"]
    assert outcome["memory_freed_mib"] == 0 and outcome["check_mode"] is True
    assert state["drain_followup"] is None
    assert "  GPU 0: 7168 MiB used, stuck (check mode: nothing changed)" in outcome["summary"]


def test_check_mode_plans_the_same_first_rung_as_the_real_run():
    planned = walk(Node([{"ghost": 3072}]), check_mode=True).start(Node([{"ghost": 3072}]).snapshot())
    real_node = Node([{"ghost": 3072}])
    done = walk(real_node).start(real_node.snapshot())
    assert [s["rung"] for s in planned["tried"]] == [s["rung"] for s in done["tried"]][:1]
    assert [line.replace("would ", "") for line in planned["tried"][0]["plan"]] == [
        line.replace("stopped and started", "stop and start") for line in done["tried"][0]["plan"]]


def test_an_inspection_that_fails_after_a_rung_fails_the_walk_saying_so():
    node = Node([{"ghost": 2048}], reload_fails=True)
    node.inspect_fails = True
    state = walk(node).start(dict(node.snapshot(), verdict={"rung": "reload", "reasons": []}))
    assert state["outcome"]["status"] == "failed"
    assert state["outcome"]["msg"] == "the inspection after the reload rung failed: probe failed"


def test_continuing_a_walk_that_waits_for_something_else_is_refused():
    node = Node([{"ghost": 2048}])
    ladder = walk(node, drain="slurm")
    state = ladder.start(node.snapshot())
    with pytest.raises(WalkError, match="continue_after=reboot, but the walk waits for drain"):
        ladder.continue_after("reboot", state, {})
    with pytest.raises(WalkError, match="continue_after=drain needs state, the state an earlier call of this walk returned"):
        ladder.continue_after("drain", {}, {})


def test_next_rung_never_goes_below_the_floor_back_down_or_above_the_ceiling():
    assert next_rung(0, [], 3) == "kill"
    assert next_rung(2, [], 3) == "reset"
    assert next_rung(0, [{"rung": "kill"}], 3) == "reset"
    assert next_rung(4, [{"rung": "kill"}], 5) == "graphics"
    assert next_rung(0, [{"rung": "reload"}], 3) is None
    assert next_rung(4, [], 3) is None


@pytest.mark.parametrize("drain, drained, held, check_mode, expected", [
    ("slurm", "", False, False, "resume"),  # also a drain an interrupted run of ours left
    ("slurm", "slurm", True, False, "release"),
    ("slurm", "", True, False, None),
    ("kubernetes", "kubernetes", False, False, "resume"),
    ("kubernetes", "", False, False, None),  # someone else's cordon
    ("kubernetes", "kubernetes", True, False, None),
    ("none", "", False, False, None),
    ("slurm", "slurm", False, True, None),
])
def test_drain_followup(drain, drained, held, check_mode, expected):
    assert drain_followup(drain, drained, held, check_mode) == expected


@pytest.mark.parametrize("drain, drained, expected", [
    ("slurm", "slurm", "hold"),
    ("slurm", "", "hold"),  # a drain an interrupted run of ours left, or none: held too (someone else's stays theirs)
    ("kubernetes", "kubernetes", None),  # our cordon simply stays
    ("none", "", None),
])
def test_drain_followup_after_a_failed_health_gate_never_resumes(drain, drained, expected):
    assert drain_followup(drain, drained, False, False, gate_failed=True) == expected
    assert drain_followup(drain, drained, False, True, gate_failed=True) is None  # check mode


@pytest.mark.parametrize("rung, failed, held, setting, check_mode, expected", [
    ("reset", False, False, "auto", False, "run"),
    ("reload", False, False, "auto", False, "run"),
    ("kill", False, False, "auto", False, None),  # a kill-only fix leaves the GPUs as they were
    ("graphics", False, False, "auto", False, None),
    (None, False, False, "auto", False, None),  # no rung
    ("reset", True, False, "auto", False, None),  # the rung failed: the walk failed already
    ("reset", False, True, "auto", False, None),  # the memory is still held: the walk failed already
    ("reset", False, False, "never", False, "off"),
    ("reset", False, True, "auto", True, "plan"),  # check mode: nothing changed, the plan says the gate would run
    ("reset", True, True, "auto", True, None),  # the planned rung would fail
    ("reload", False, True, "never", True, "off"),
])
def test_health_gate(rung, failed, held, setting, check_mode, expected):
    assert health_gate(rung, failed, held, setting, check_mode) == expected


def test_a_passing_gate_lets_the_node_back_into_service():
    node = Node([{"ghost": 3072}], dcgm="pass")
    ladder = walk(node, drain="slurm")
    state = ladder.continue_after("drain", ladder.start(node.snapshot()),
                                  {"scheduler": "slurm", "slurm": {"changed": True, "ours": True}, "failure": {}})
    assert modules(node) == ["gpu_reset", "gpu_health_check"]
    # The run id and the journal go with it: the module journals the gate's start before dcgmi runs.
    assert node.calls[-1][1] == {"level": 1, "timeout": 300.0, "run_id": "run-1"}
    assert state["outcome"]["status"] == "fixed" and state["outcome"]["fixed_by"] == "reset"
    assert state["outcome"]["health_check"]["result"] == "pass"
    assert state["drain_followup"] == "resume" and hold_reason(state) is None
    assert "  health check (dcgmi diag -r 1): pass - dcgmi diag -r 1 passed: software Pass" in state["outcome"]["summary"]


def test_a_failed_gate_fails_the_walk_and_keeps_the_slurm_node_drained_naming_the_gate():
    node = Node([{"ghost": 3072}], dcgm="fail")
    ladder = walk(node, drain="slurm", health_check_level=2, health_check_timeout=60.0)
    state = ladder.continue_after("drain", ladder.start(node.snapshot()),
                                  {"scheduler": "slurm", "slurm": {"changed": True, "ours": True}, "failure": {}})
    assert node.calls[-1] == ("gpu_health_check", {"level": 2, "timeout": 60.0, "run_id": "run-1"})
    outcome = state["outcome"]
    assert outcome["status"] == "failed" and outcome["fixed_by"] is None
    assert outcome["msg"] == ("the reset rung got the memory back (3072 MiB), but the GPUs failed the health check, so the node "
                              "stays out of service: dcgmi diag -r 2 failed: software Fail")
    assert outcome["memory_freed_mib"] == 3072
    assert state["drain_followup"] == "hold" and hold_reason(state) == "dcgmi diag -r 2 failed: software Fail"
    state = ladder.continue_after("undrain", state, {"scheduler": "slurm", "slurm": {"changed": True, "msg": "held drained"}})
    assert modules(node) == ["gpu_reset", "gpu_health_check"]  # the gate ran once
    assert state["outcome"]["status"] == "failed" and state["outcome"]["undrained"] is None
    assert state["outcome"]["drain_notes"] == ["slurm hold: held drained"]


def test_a_failed_gate_leaves_our_kubernetes_cordon():
    node = Node([{"ghost": 3072}], dcgm="fail")
    ladder = walk(node, drain="kubernetes")
    state = ladder.continue_after("drain", ladder.start(node.snapshot()),
                                  {"scheduler": "kubernetes", "kubernetes": {"changed": True}, "failure": {}})
    assert state["outcome"]["status"] == "failed" and state["outcome"]["drained"] == "kubernetes"
    assert state["drain_followup"] is None
    assert state["outcome"]["drain_notes"] == [
        "kubernetes: left cordoned, the GPUs failed the health check; uncordon the node by hand once they are repaired"]


def test_no_dcgm_no_gate_and_a_kill_only_fix_runs_none():
    node = Node([{"ghost": 3072}])
    state = walk(node).start(node.snapshot())
    assert state["outcome"]["status"] == "fixed"
    assert state["outcome"]["health_check"]["result"] == "not_installed"
    orphan = Node([{"ghost": 0}], holders=[dict(ORPHAN)], dcgm="fail")
    state = walk(orphan).start(orphan.snapshot())
    assert modules(orphan) == ["gpu_kill"]
    assert state["outcome"]["status"] == "fixed" and "health_check" not in state["outcome"]


def test_check_mode_plans_the_gate_and_never_turns_it_off_runs_nothing():
    node = Node([{"ghost": 3072}], dcgm="fail")
    state = walk(node, check_mode=True).start(node.snapshot())
    assert modules(node) == ["gpu_reset"]
    gate = state["outcome"]["health_check"]
    assert (gate["result"], gate["reason"]) == ("not_run", "check mode: after the reset rung, would run dcgmi diag -r 1 where "
                                                           "dcgmi is installed, and keep the node out of service if it fails")
    assert state["outcome"]["status"] == "planned"
    node = Node([{"ghost": 3072}], dcgm="fail")
    state = walk(node, health_check="never", option_names={"health_check": "gpu_reclaim_health_check"}).start(node.snapshot())
    assert modules(node) == ["gpu_reset"]
    assert state["outcome"]["status"] == "fixed"
    assert state["outcome"]["health_check"]["reason"] == "the health check is off (gpu_reclaim_health_check=never)"


def test_a_gate_module_that_fails_fails_the_gate_and_a_scoped_walk_checks_its_gpus():
    node = Node([{"ghost": 0}, {"ghost": 3072}], dcgm="pass")
    node._gpu_health_check = lambda args, check_mode: {"failed": True, "msg": "timeout: 0 is not more than 0 seconds"}
    state = walk(node, gpus=["1"]).start()
    assert node.calls[-1][1]["gpus"] == [0, 1]  # the model ignores the scope: both GPUs are in its snapshot
    assert state["outcome"]["status"] == "failed"
    assert state["outcome"]["health_check"]["reason"] == "the health check could not run: timeout: 0 is not more than 0 seconds"


def test_the_fleet_guard_allows_at_least_one_host_and_names_the_rest():
    assert fleet_guard(["a"], 10, 0) == ""
    assert fleet_guard(["a", "b"], 10, 25) == ""
    refusal = fleet_guard(["a", "b", "c"], 10, 25)
    assert refusal.startswith("fleet guard: 3 of 10 hosts would need a destructive rung (a, b, c), more than the 25% allowed (2 hosts")
    assert fleet_guard([], 0, 0) == ""


def test_a_container_stop_that_failed_says_so_never_stopped():
    killed = {"changed": True, "signalled": [], "left_alone": [], "zombies": [], "containers": [
        {"runtime": "docker", "id": "0123456789ab", "pids": [4242], "ok": False, "message": "Error response from daemon: No such container"},
        {"runtime": "podman", "id": "ba9876543210", "pids": [4343], "ok": True, "message": "stopped"}]}
    assert kill_plan_lines(killed, False) == ["could not stop docker container 0123456789ab: Error response from daemon: No such container",
                                              "stopped podman container ba9876543210"]


def test_zombie_and_left_alone_lines():
    killed = {"zombies": [{"pid": 9, "name": "defunct", "gone": True, "parent": {"pid": 8, "name": "trainer"}, "reaped_by": "SIGCHLD"},
                          {"pid": 10, "name": None, "gone": False, "parent": None, "reason": "parent is PID 1"}],
              "left_alone": [{"pid": 11, "name": "keeper", "reason": "protected name: keeper"}]}
    assert kill_plan_lines(killed, False) == ["reaped zombie pid 9 defunct (parent pid 8 trainer) by SIGCHLD",
                                              "could not reap zombie pid 10 : parent is PID 1",
                                              "left pid 11 keeper: protected name: keeper"]
    assert kill_plan_lines(killed, True)[0].startswith("would reap zombie pid 9")


def test_a_given_snapshot_too_old_or_of_other_options_is_taken_again():
    node = Node([{"ghost": 0}])
    stale = node.snapshot()
    stale["scope"]["taken_epoch"] = 100 - 301
    walk(node).start(stale)
    assert modules(node) == ["gpu_holders_info"]
    node.calls = []
    narrowed = node.snapshot()
    narrowed["scope"]["gpus"] = ["0"]
    walk(node).start(narrowed)
    assert modules(node) == ["gpu_holders_info"]
    node.calls = []
    walk(node, ghost_threshold_mib=1024).start(node.snapshot())
    assert modules(node) == ["gpu_holders_info"]
    assert node.calls[0][1]["ghost_threshold_mib"] == 1024


def test_a_snapshot_without_a_scope_is_not_trusted():
    node = Node([{"ghost": 0}])
    snap = node.snapshot()
    del snap["scope"]
    walk(node).start(snap)
    assert modules(node) == ["gpu_holders_info"]


@pytest.mark.parametrize("overrides, message", [
    ({"signals": ["FOO"]}, "signals: 'FOO' is not a signal name"),
    ({"signals": []}, "signals must name at least one signal"),
    ({"grace": 0.0}, "grace must be more than 0 seconds"),
    ({"probe_timeout": 0.0}, "probe_timeout must be greater than 0"),
    ({"kernel_log_window": 0}, "kernel_log_window must be a positive number"),
    ({"ghost_threshold_mib": -1}, "ghost_threshold_mib must be 0 or more"),
    ({"kill_wait_timeout": -1.0}, "kill_wait_timeout must be 0 or more seconds"),
    ({"lock_timeout": -5.0}, "lock_timeout must be 0 or more seconds"),
    ({"health_check_timeout": 0.0}, "health_check_timeout must be more than 0 seconds, got 0.0"),
])
def test_bad_options_are_refused_by_the_modules_own_checks_before_any_rung(overrides, message):
    with pytest.raises(WalkError, match=message):
        check_options(arguments(**overrides))


def test_good_options_pass_the_check():
    check_options(arguments())


def test_continuing_with_other_options_or_another_schedulers_result_is_refused():
    node = Node([{"ghost": 2048}])
    state = walk(node, drain="slurm").start(node.snapshot())
    with pytest.raises(WalkError, match=r"max_rung must stay as the walk started with them \(max_rung='reload'\)"):
        walk(node, drain="slurm", max_rung="reboot").continue_after("drain", state, {"scheduler": "slurm"})
    with pytest.raises(WalkError, match="controller_result: the result of the drain tasks of scheduler 'slurm'"):
        walk(node, drain="slurm").continue_after("drain", state, {"drained": "", "error": "unreachable"})
    assert node.calls == [] and state["pending"] == "drain"


def test_memory_that_came_back_without_any_change_is_not_fixed_by_a_rung():
    node = Node([{"ghost": 0}], holders=[ORPHAN])
    ladder = walk(node, drain="slurm", destructive_rungs=["kill"])
    state = ladder.start(node.snapshot())
    assert state["pending"] == "drain"
    node.holders = []  # the job ended by itself while the drain waited for it
    node.survivors = {4242}
    state = ladder.continue_after("drain", state, {"scheduler": "slurm", "slurm": {"ours": True, "msg": "drained"}})
    assert modules(node) == ["gpu_kill"]
    assert state["outcome"]["status"] == "clean" and state["outcome"]["fixed_by"] is None
    assert state["outcome"]["msg"].startswith("the memory was given back before any rung changed anything")


def test_check_mode_never_claims_the_drain_and_says_when_the_planned_rung_would_fail():
    node = Node([{"ghost": 2048}], reset_fails=True)
    ladder = walk(node, check_mode=True, drain="slurm")
    state = ladder.start(node.snapshot())
    state = ladder.continue_after("drain", state, {"scheduler": "slurm", "slurm": {"ours": True, "msg": "would drain with reason 'x'"}})
    # The reset would fail, changing nothing: the plan climbs on as the real run would, to the drain checked before the reload.
    assert state["pending"] == "drain" and state["pending_rung"] == "reload"
    state = ladder.continue_after("drain", state, {"scheduler": "slurm", "slurm": {}})
    outcome = state["outcome"]
    assert outcome["status"] == "planned" and outcome["drained"] is None
    assert outcome["drain_notes"] == ["slurm drain: would drain with reason 'x'",
                                      "slurm resume: would resume the node once the memory is back and the GPUs pass the health "
                                      "check, or keep it drained if they do not"]
    # Check mode names the drain in the summary too.
    assert "  scheduler: slurm drain: would drain with reason 'x'" in outcome["summary"]
    assert outcome["msg"] == "check mode: would take the reset rung, which would fail: gpu_reset failed: GPU 0: Not Supported; " \
        "then the reload rung"
    assert state["drain_followup"] is None


def test_a_resume_that_held_the_node_fails_the_walk_naming_why():
    node = Node([{"ghost": 0}])
    ladder = walk(node, drain="slurm")
    state = ladder.start(node.snapshot())
    assert state["drain_followup"] == "resume"  # a drain an interrupted run may have left
    held = {"changed": True, "held": True, "msg": "held drained with reason 'gpuops: GPU health check failed (run run-1) - the "
            "GPU health check that run killed began at T never finished; resume by hand once repaired'"}
    state = ladder.continue_after("undrain", state, {"scheduler": "slurm", "slurm": held, "failure": {}})
    outcome = state["outcome"]
    assert outcome["status"] == "failed" and outcome["undrained"] is None
    assert outcome["msg"] == "no GPU memory held: nothing to do; then the Slurm node stays out of service: " + held["msg"]
    assert outcome["drain_notes"] == ["slurm resume: " + held["msg"]]


# A running job's process is busy, not stuck (issue 17, rule 8).
JOB = {"pid": 5151, "start_time": 654321, "name": "train.py", "user": "bob", "class": "busy", "state": "S", "gpus": [0],
       "used_mib": 8192, "job": {"scheduler": "slurm", "id": "4271", "state": "RUNNING", "running": True,
                                 "why": "Slurm job 4271 is RUNNING on this node"}}


def test_a_gpu_only_running_jobs_hold_is_in_use_and_the_walk_leaves_it():
    node = Node([{"ghost": 0}], holders=[JOB])
    snap = node.snapshot()
    assert snap["gpus"][0]["state"] == "in_use" and snap["verdict"]["rung"] == "none"
    assert "busy, not stuck" in snap["verdict"]["reasons"][0]["reason"]
    state = walk(node, drain="slurm").start(snap)
    assert modules(node) == [] and state["pending"] is None
    assert state["outcome"]["status"] == "clean"


def test_the_kill_rung_ends_leftovers_and_never_a_running_job():
    node = Node([{"ghost": 0}], holders=[JOB, ORPHAN])
    snap = node.snapshot()
    assert snap["gpus"][0]["state"] == "busy" and snap["verdict"]["rung"] == "kill"
    state = walk(node).start(snap)
    assert modules(node) == ["gpu_kill"]
    assert [h["pid"] for h in node.calls[0][1]["holders"]] == [ORPHAN["pid"]]
    assert [h["pid"] for h in node.holders] == [JOB["pid"]]
    assert state["outcome"]["status"] == "fixed"


def test_ending_running_jobs_is_destructive_the_kill_rung_too():
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.ladder._ladder_decisions import destructive_entry
    node = Node([{"ghost": 0}], holders=[JOB])
    snap = node.snapshot()
    assert not destructive_entry(snap, options())
    assert destructive_entry(snap, options(end_running_jobs=True))
    ladder = walk(node, drain="slurm", end_running_jobs=True)
    state = ladder.start(snap)
    assert modules(node) == [] and state["pending"] == "drain" and state["pending_rung"] == "kill"
    drained = {"changed": True, "ours": True, "msg": "drained"}
    state = ladder.continue_after("drain", state, {"scheduler": "slurm", "slurm": drained, "failure": {}})
    assert modules(node) == ["gpu_kill"] and node.calls[0][1]["end_running_jobs"] is True
    assert [h["pid"] for h in node.calls[0][1]["holders"]] == [JOB["pid"]]
    assert node.holders == [] and state["outcome"]["status"] == "fixed"


def test_without_a_drain_ending_running_jobs_walks_the_kill_rung_at_once():
    node = Node([{"ghost": 0}], holders=[JOB])
    state = walk(node, end_running_jobs=True).start(node.snapshot())
    assert modules(node) == ["gpu_kill"] and state["pending"] is None


def test_every_rung_but_the_reboot_has_its_taker_named_in_one_table():
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows._windows_walk import WindowsWalk
    for walk_class, rungs in ((LadderWalk, RUNGS), (WindowsWalk, WINDOWS_RUNGS)):
        takers = walk_class.rung_takers(object.__new__(walk_class))
        assert tuple(takers) == rungs[:-1], walk_class
        assert all(callable(taker) for taker in takers.values())


# Check mode fails where the real run fails: the plan's outcome is the real run's (issue 26, rule 5).
@pytest.mark.parametrize("max_rung", ["kill", "reset", "reload"])
def test_check_mode_ends_as_the_real_run_when_every_rung_would_fail(max_rung):
    """A holder no signal ends (a refusal inside each rung): the real run fails after every allowed rung, with its message;
    the plan fails the same way, with the same message and rungs, and changes nothing."""
    def ends(check_mode):
        node = Node([{"ghost": 0}], holders=[ORPHAN], survivors={ORPHAN["pid"]}, reset_fails=True, reload_fails=True)
        return walk(node, check_mode=check_mode, max_rung=max_rung).start(node.snapshot())["outcome"], node
    planned, plan_node = ends(True)
    done, dummy = ends(False)
    assert done["status"] == "failed" and planned["status"] == "failed", (planned["msg"], done["msg"])
    assert planned["msg"] == done["msg"]
    assert [step["rung"] for step in planned["rungs_tried"]] == [step["rung"] for step in done["rungs_tried"]]
    assert [step["msg"] for step in planned["rungs_tried"]] == [step["msg"] for step in done["rungs_tried"]]
    assert plan_node.holders == [ORPHAN]


def test_check_mode_plans_the_rung_that_would_work_after_one_that_would_fail():
    node = Node([{"ghost": 2048}], reset_fails=True)
    outcome = walk(node, check_mode=True).start(node.snapshot())["outcome"]
    assert outcome["status"] == "planned"
    assert outcome["msg"] == "check mode: would take the reset rung, which would fail: gpu_reset failed: GPU 0: Not Supported; then the reload rung"
    assert [step["rung"] for step in outcome["rungs_tried"]] == ["reset", "reload"]


# What the ladder may do, it does; what it may not, it names (issue 26, rule 6).
def test_reach_helps_the_gpus_an_allowed_rung_helps_and_names_the_others():
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.ladder._ladder_decisions import gpu_needs, reach
    from ansible_collections.gpuops.remediation.plugins.module_utils._verdict import rung_index
    node = Node([{"ghost": 0}, {"ghost": 2048}], holders=[dict(ORPHAN, used_mib=14336)])
    snapshot = node.snapshot()
    assert [(need["index"], need["rung"]) for need in gpu_needs(snapshot, options(max_rung="kill"))] == [(0, "kill"), (1, "reset")]
    floor, refused, beyond = reach(snapshot, rung_index("reset"), options(max_rung="kill", option_names={"max_rung": "gpu_reclaim_max_rung"}))
    assert (floor, refused) == (0, "")
    assert [(need["index"], need["rung"], need["allow"]) for need in beyond] == [(1, "reset", "gpu_reclaim_max_rung=reset")]
    # Nothing an allowed rung helps: refused whole, as before.
    lone = Node([{"ghost": 2048}]).snapshot()
    floor, refused, beyond = reach(lone, rung_index("reset"), options(max_rung="kill"))
    assert refused.startswith("the evidence needs the reset rung") and beyond == []


@pytest.mark.parametrize("check_mode", [False, True])
def test_a_node_where_one_gpu_needs_the_kill_and_another_a_reset_is_partly_fixed_under_max_rung_kill(check_mode):
    node = Node([{"ghost": 0}, {"ghost": 2048}], holders=[dict(ORPHAN, used_mib=14336)])
    state = walk(node, check_mode=check_mode, max_rung="kill", option_names={"max_rung": "gpu_reclaim_max_rung"}).start(node.snapshot())
    outcome = state["outcome"]
    assert [step["rung"] for step in outcome["rungs_tried"]] == ["kill"]
    assert modules(node).count("gpu_reset") == 0
    named = "GPU 1 needs the reset rung (GPU 1 (00000000:19:00.0) has 2048 MiB in use that no live process accounts for " \
        "(ghost memory)), which gpu_reclaim_max_rung=reset would allow"
    if check_mode:
        assert outcome["status"] == "partly fixed" and outcome["msg"] == "check mode: would take the kill rung for GPU 0; " + named
        assert node.holders and node.holders[0]["pid"] == ORPHAN["pid"]
    else:
        assert outcome["status"] == "partly fixed" and outcome["fixed_by"] == "kill"
        assert outcome["msg"] == "partly fixed: GPU 0 by kill (14336 MiB back); " + named
        assert node.holders == []
        assert outcome["summary"][0] == "node07: partly fixed - " + outcome["msg"]
    assert [(need["index"], need["rung"]) for need in outcome["needs"]] == [(1, "reset")]


def test_a_partial_walk_whose_allowed_rung_fails_is_failed_not_partly_fixed():
    node = Node([{"ghost": 0}, {"ghost": 2048}], holders=[dict(ORPHAN, used_mib=14336)], survivors={ORPHAN["pid"]})
    outcome = walk(node, max_rung="kill").start(node.snapshot())["outcome"]
    assert outcome["status"] == "failed"


# An empty selection selects nothing (issue 26, rule 4).
def test_select_gpus_only_the_option_left_out_means_every_gpu():
    from ansible_collections.gpuops.remediation.plugins.module_utils._snapshot import select_gpus
    gpus = [{"index": 0, "uuid": "GPU-a"}, {"index": 1, "uuid": "GPU-b"}]
    assert select_gpus(gpus, None) == [0, 1]
    assert select_gpus(gpus, []) == []
    assert select_gpus(gpus, ["1"]) == [1]


def test_a_walk_scoped_to_no_gpu_says_so_and_takes_no_rung():
    node = Node([{"ghost": 2048}], holders=[ORPHAN])
    snapshot = dict(node.snapshot(), gpus=[], holders=[])
    snapshot["scope"] = dict(snapshot["scope"], gpus=[])
    snapshot["verdict"] = {"rung": "none", "reasons": []}
    outcome = walk(node, gpus=[]).start(snapshot)["outcome"]
    assert outcome["status"] == "clean" and outcome["rungs_tried"] == []
    assert outcome["msg"] == "gpus: [] selects no GPU: nothing is inspected or changed (leave gpus out for every GPU)"
    assert modules(node) == []


def test_a_walk_scoped_to_gpus_gates_those_gpus_and_an_unscoped_one_leaves_the_gate_option_out():
    # Left out means every GPU; an empty list would select none (the gate would run nothing).
    node = Node([{"ghost": 3072}, {"ghost": 0}], dcgm="pass")
    node.taken_epoch = 100
    scoped = node.snapshot()
    scoped["scope"]["gpus"] = ["0"]
    scoped["gpus"] = scoped["gpus"][:1]
    walk(node, gpus=["0"]).start(scoped)
    assert node.calls[-1] == ("gpu_health_check", {"level": 1, "timeout": 300.0, "gpus": [0], "run_id": "run-1"})


def test_the_fleet_guard_counts_a_host_by_the_rungs_its_walk_takes_not_by_its_node_verdict():
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.ladder._ladder_decisions import destructive_entry, first_rung
    node = Node([{"ghost": 0}, {"ghost": 3072}], holders=[ORPHAN])
    snap = node.snapshot()
    assert snap["verdict"]["rung"] == "reset"
    # max_rung kill: the walk takes the kill rung for GPU 0 and names GPU 1 (partly fixed): nothing destructive.
    assert first_rung(snap, options(max_rung="kill")) == "kill" and not destructive_entry(snap, options(max_rung="kill"))
    assert first_rung(snap, options(max_rung="reset")) == "reset" and destructive_entry(snap, options(max_rung="reset"))
    # A walk refused whole (no GPU helped by an allowed rung) takes no rung at all.
    ghost_only = Node([{"ghost": 3072}]).snapshot()
    assert first_rung(ghost_only, options(max_rung="kill")) is None and not destructive_entry(ghost_only, options(max_rung="kill"))
    assert walk(Node([{"ghost": 3072}]), max_rung="kill").start(ghost_only)["outcome"]["status"] == "refused"
