# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""_slurm parsers and decisions, against what `scontrol --oneliner show node` and squeue of slurm-wlm 22.05.8 (Debian 12)
printed on the one-node cluster of tools/slurm_env.sh (fixtures/scontrol-show-node, sources in fixtures/SOURCES.md);
the integration targets slurm_drain and gpu_reclaim_slurm run the module against that cluster itself.
"""

from __future__ import annotations

import os

import pytest

from ansible_collections.gpuops.remediation.plugins.module_utils.scheduler._slurm import (
    SlurmNodeUnknown, admin_flags, control_character, drain_reason, drain_run, drained_with_marker, gate_unfinished,
    hands_off, hold_reason, is_drained, out_of_service, parse_node, parse_nodes, parse_squeue, unknown_node,
)

MARKER = "gpuops: reclaiming stuck GPU memory"
FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "scontrol-show-node")


def capture(name):
    with open(os.path.join(FIXTURES, name + ".txt")) as handle:
        return handle.read()


def node(name):
    return parse_node(capture(name), "gpunode1")


def test_an_idle_node_has_no_reason_and_no_flag():
    idle = node("idle")
    assert (idle["state"], idle["base"], idle["flags"], idle["reason"], idle["reason_user"]) == ("idle", "IDLE", [], None, None)
    assert not is_drained(idle) and not out_of_service(idle) and hands_off(idle, MARKER) == ""


def test_down_and_drain_is_drained_to_sinfo_but_down_here():
    # sinfo prints "drained" for DOWN+DRAIN; only scontrol shows the DOWN an admin set.
    down = node("down-drain")
    assert (down["state"], down["base"], down["flags"]) == ("drained", "DOWN", ["DRAIN"])
    assert down["reason"] == "admin: down, PSU swap"
    assert (down["reason_user"], down["reason_time"]) == ("root", "2026-12-01T21:39:44")
    assert admin_flags(down) == ["DOWN"]
    assert "DOWN+DRAIN" in hands_off(down, MARKER) and "admin: down, PSU swap" in hands_off(down, MARKER)


@pytest.mark.parametrize("name, flags", [
    ("down", ["DOWN"]), ("idle-fail", ["FAIL"]), ("idle-maintenance-reserved", ["MAINTENANCE"]),
    ("idle-drain-maintenance", ["MAINTENANCE"]), ("down-drain-reboot-issued", ["DOWN", "REBOOT_ISSUED"]),
])
def test_an_administrators_state_is_left_as_found(name, flags):
    found = node(name)
    assert admin_flags(found) == flags
    assert hands_off(found, MARKER)


def test_out_of_service_means_no_job_can_start():
    assert out_of_service(node("down")) and out_of_service(node("idle-fail")) and out_of_service(node("idle-drain-ours"))
    # A maintenance reservation still lets its own users' jobs start: not out of service.
    assert not out_of_service(node("idle-maintenance-reserved"))
    assert not out_of_service(node("mixed"))


def test_not_responding_alone_is_nobodys_decision():
    # Seen for a moment after a RESUME of a DOWN node, until slurmd registers again.
    found = node("idle-not-responding")
    assert found["flags"] == ["NOT_RESPONDING"] and hands_off(found, MARKER) == ""


@pytest.mark.parametrize("name", ["idle-after-resume-ours-24.11", "idle-after-resume-others-24.11"])
def test_a_reason_left_on_a_node_back_in_service_is_nobodys_drain(name):
    """Slurm 24.11 (Debian 13) without accounting storage keeps the reason after RESUME: the node is in service, the
    reason an ended drain's leftover - neither someone else's drain to keep off nor a gpuops drain for the breaker."""
    text = capture(name)
    assert " Reason=" in text and " Version=24.11" in text
    found = parse_node(text, "gpunode1")
    assert (found["base"], found["reason"], found["reason_user"], found["reason_time"]) == ("IDLE", None, None, None)
    assert not is_drained(found) and not out_of_service(found) and hands_off(found, MARKER) == ""
    assert drain_run(found, MARKER) is None and drained_with_marker([found], MARKER) == {}


def test_the_reservation_slurm_24_prints_after_the_reason_is_not_part_of_it():
    """24.11 prints ReservationName= after the reason of a node in a maintenance reservation (22.05 prints nothing there)."""
    found = node("idle-drain-maintenance-ours-24.11")
    assert "MAINTENANCE" in found["flags"] and "DRAIN" in found["flags"]
    assert (found["reason"], found["reason_user"]) == ("gpuops: reclaiming stuck GPU memory (run r1: the reset rung)", "root")
    assert drain_run(found, MARKER) == "r1"


def test_our_drain_read_back_whole():
    ours = node("idle-drain-ours")
    assert ours["reason"] == "gpuops: reclaiming stuck GPU memory (run r1: the reset rung)"
    assert drain_run(ours, MARKER) == "r1" and hands_off(ours, MARKER) == ""
    draining = node("mixed-drain-ours")
    assert (draining["state"], draining["base"]) == ("draining", "MIXED") and drain_run(draining, MARKER) == "r2"


def test_a_reason_whose_first_line_is_ours_is_someone_elses():
    found = node("idle-drain-multiline-reason")
    assert found["reason"] == "gpuops: reclaiming stuck GPU memory (run r1: the reset rung)\nadmin: RMA, do not resume"
    assert found["reason_user"] == "root"
    assert drain_run(found, MARKER) is None
    assert "someone else's reason" in hands_off(found, MARKER)


def test_a_stamp_inside_a_reason_is_not_the_end_of_its_first_line():
    # Constructed from idle-drain-ours.txt: an admin wrote a reason that imitates ours and the stamp after it.
    line = capture("idle-drain-ours").replace(
        "Reason=gpuops: reclaiming stuck GPU memory (run r1: the reset rung) [root@",
        "Reason=gpuops: reclaiming stuck GPU memory (run r1: the reset rung) [root@2026-01-01T00:00:00] x [root@")
    found = parse_node(line, "gpunode1")
    assert found["reason"] == "gpuops: reclaiming stuck GPU memory (run r1: the reset rung) [root@2026-01-01T00:00:00] x"
    assert drain_run(found, MARKER) is None


def test_comment_and_extra_after_the_reason_are_not_part_of_it():
    # As scontrol 22.05.8 printed it with Comment and Extra set (the end of the line, from the same session).
    line = capture("idle-drain-multiline-reason").rstrip("\n") + " Comment=a comment Extra=x=1\n"
    found = parse_node(line, "gpunode1")
    assert found["reason"] == "gpuops: reclaiming stuck GPU memory (run r1: the reset rung)\nadmin: RMA, do not resume"
    ours = parse_node(capture("idle-drain-ours").rstrip("\n") + " Comment=a comment\n", "gpunode1")
    assert drain_run(ours, MARKER) == "r1"


def test_unknown_node():
    with pytest.raises(SlurmNodeUnknown):
        parse_node(capture("idle"), "gpunode")
    with pytest.raises(SlurmNodeUnknown):
        parse_node("", "gpunode1")
    assert unknown_node(1, "", "Node nosuch not found\n")
    assert not unknown_node(1, "", "slurm_load_node error: Unable to contact slurm controller (connect failure)\n")


def test_nodes_drained_with_our_reason():
    nodes = parse_nodes(capture("idle-drain-ours") + capture("idle-drain-multiline-reason").replace("gpunode1", "gpunode2", 1)
                        + capture("idle").replace("gpunode1", "gpunode3", 1))
    assert [n["node"] for n in nodes] == ["gpunode1", "gpunode2", "gpunode3"]
    assert drained_with_marker(nodes, MARKER) == {"gpunode1": "r1"}


def test_a_reason_that_only_starts_with_the_marker_is_someone_elses():
    for reason in ("gpuops: reclaiming stuck GPU memory failed, RMA - do not resume",
                   "gpuops: reclaiming stuck GPU memory (run x: reset) - and then a human note",
                   "gpuops: reclaiming stuck GPU memory (run x: reset)\n",
                   "gpuops: reclaiming stuck GPU memory"):
        assert drain_run({"flags": ["DRAIN"], "reason": reason}, MARKER) is None, reason
    # Only a drain can be ours: a resumed node may keep a stale reason.
    assert drain_run({"flags": [], "reason": drain_reason(MARKER, "r", "x")}, MARKER) is None


def test_odd_run_ids_and_purposes_still_read_back():
    reason = drain_reason(MARKER, "awx job 42: (retry)", "the (reset) [rung]")
    assert reason == "gpuops: reclaiming stuck GPU memory (run awx_job_42___retry_: the reset rung)"
    assert drain_run({"flags": ["DRAIN"], "reason": reason}, MARKER) == "awx_job_42___retry_"


def test_control_characters_are_named():
    assert control_character("a\nb") == repr("\n")
    assert control_character("tab\there") == repr("\t")
    assert control_character("fine: reason (1)") is None
    assert control_character(None) is None


def test_squeue_jobs():
    assert parse_squeue("1|root|RUNNING|wrap\n42|alice|PENDING|train | v2\n\n") == [
        {"job_id": "1", "user": "root", "state": "RUNNING", "name": "wrap"},
        {"job_id": "42", "user": "alice", "state": "PENDING", "name": "train | v2"},
    ]
    assert parse_squeue("") == []


def test_a_hold_reason_names_the_gate_and_is_no_drain_of_ours_to_resume():
    reason = hold_reason("run (1)", "dcgmi diag -r 1 failed:\n software Fail\x07")
    assert reason == ("gpuops: GPU health check failed (run run__1_) - dcgmi diag -r 1 failed: software Fail; resume by hand "
                      "once repaired")
    assert control_character(reason) is None
    assert drain_run({"flags": ["DRAIN"], "reason": reason}, MARKER) is None
    assert drain_run({"flags": ["DRAIN"], "reason": reason}, "gpuops") is None
    assert len(hold_reason("run-1", "x" * 500)) == 200


def _gate(run, phase, entry, ok=None, ts="2026-12-01T10:00:00Z"):
    record = {"run_id": run, "id": entry, "phase": phase, "action": "health_check", "ts": ts}
    if ok is not None:
        record.update(ok=ok, result="pass" if ok else "fail", reason="dcgmi said so")
    return record


def test_a_gate_begun_and_never_finished_blocks_the_resume():
    assert gate_unfinished([], "r1") is None
    begun = [_gate("r1", "intent", "r1-a-1")]
    assert "never finished" in gate_unfinished(begun, "r1")
    assert gate_unfinished(begun, "r2") is None
    # A later check that passed (this run's, or any run's after it) lets the resume go on.
    assert gate_unfinished(begun + [_gate("r1", "outcome", "r1-a-1", ok=True)], "r1") is None
    assert gate_unfinished(begun + [_gate("r2", "intent", "r2-b-1"), _gate("r2", "outcome", "r2-b-1", ok=True)], "r1") is None
    # A failed check that was never acted on blocks it too.
    assert "failed" in gate_unfinished(begun + [_gate("r1", "outcome", "r1-a-1", ok=False)], "r1")
    # A pass before the last begun check counts for nothing.
    earlier = [_gate("r1", "intent", "r1-a-1"), _gate("r1", "outcome", "r1-a-1", ok=True), _gate("r1", "intent", "r1-a-2")]
    assert "never finished" in gate_unfinished(earlier, "r1")


def read_with_sinfo(name, node_name):
    """parse_node of a capture, with the sinfo %E output captured beside it (as slurm_drain reads a node that looks ours)."""
    found = parse_node(capture(name), node_name)
    with open(os.path.join(FIXTURES, name + ".sinfo")) as handle:
        found["sinfo_reason"] = handle.read()
    return found


@pytest.mark.parametrize("name", ["idle-drain-spoofed-stamp", "idle-drain-trailing-newline"])
def test_an_admin_reason_scontrol_shows_as_ours_is_not_ours(name):
    """review19: scontrol drops a reason's empty lines and cannot tell its stamp from a stamp-like text of the reason
    followed by " Comment=" (22.05 prints nothing after the reason): both admin reasons read back as exactly ours, with
    the spoofed reason even dated 2026-01-01 (a stale drain, resumed at once). sinfo's %E shows them as stored."""
    scontrol_only = parse_node(capture(name), "gpunode9")
    assert drain_run(scontrol_only, MARKER) == "abc"  # what scontrol alone makes of it
    found = read_with_sinfo(name, "gpunode9")
    assert drain_run(found, MARKER) is None
    assert "someone else's reason" in hands_off(found, MARKER)
    assert "as sinfo shows it" in hands_off(found, MARKER)
    assert drained_with_marker([found], MARKER) == {}


def test_our_reason_read_whole_by_sinfo_stays_ours():
    found = read_with_sinfo("gpunode9-idle-drain-ours", "gpunode9")
    assert drain_run(found, MARKER) == "abc"
    assert hands_off(found, MARKER) == ""
    # one line per partition the node is in
    assert drain_run(dict(found, sinfo_reason=found["sinfo_reason"] * 2), MARKER) == "abc"
    for other in ("", "none\n", found["sinfo_reason"] + "\n", found["sinfo_reason"][:-1], found["sinfo_reason"] + "x\n"):
        assert drain_run(dict(found, sinfo_reason=other), MARKER) is None, other


def test_check_mode_predicts_the_state_slurm_shows_after_a_drain_and_a_resume():
    """review19: check mode kept raw_state "IDLE" for a drain (the diff read IDLE -> IDLE) and called a busy node "drained"
    where Slurm says "draining"; a prediction is what scontrol shows after the real command (fixtures)."""
    from ansible_collections.gpuops.remediation.plugins.module_utils.scheduler._slurm import as_drained, as_resumed
    for before, after in (("idle", "idle-drain-ours"), ("mixed", "mixed-drain-ours")):
        real = node(after)
        predicted = as_drained(node(before), real["reason"])
        for field in ("state", "base", "flags", "raw_state", "reason"):
            assert predicted[field] == real[field], (before, field)
        resumed = as_resumed(real)
        assert (resumed["state"], resumed["raw_state"], resumed["flags"], resumed["reason"]) == (
            node(before)["state"], node(before)["raw_state"], node(before)["flags"], None)


def test_every_slurm_read_asks_for_hidden_partitions_too():
    """review19, on the one-node cluster of tools/slurm_env.sh (slurm-wlm 22.05.8) with its partition Hidden=YES and a
    job running on gpunode9: as a user who is not root nor SlurmUser (an operator), `squeue --nodelist gpunode9` listed
    no job (the drain would have gone on under a running job), `scontrol show node gpunode9` said "Node gpunode9 not
    found" and sinfo printed nothing; with --all each showed the node and the job."""
    from ansible_collections.gpuops.remediation.plugins.module_utils.scheduler._jobs import job_states_argv
    from ansible_collections.gpuops.remediation.plugins.module_utils.scheduler._slurm import (
        show_node_argv, sinfo_argv, sinfo_reason_argv, squeue_argv)
    for argv in (show_node_argv("scontrol", "n1"), squeue_argv("squeue", "n1"), sinfo_argv("sinfo", "n1"),
                 sinfo_reason_argv("sinfo", "n1"), job_states_argv("squeue", {"7"})):
        assert argv[1] == "--all", argv
