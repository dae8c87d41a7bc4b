# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""_slurm parsers, against what sinfo and squeue of slurm-wlm 22.05.8 (Debian 12) printed for the formats we use.

The lines were captured from the one-node cluster of tools/slurm_env.sh; the integration target slurm_drain runs
the module against that cluster itself.
"""

from __future__ import annotations

import pytest

from ansible_collections.gpuops.remediation.plugins.module_utils._slurm import (
    SlurmNodeUnknown, base_state, drain_reason, drain_run, hold_reason, is_drained, parse_sinfo, parse_squeue,
)

MARKER = "gpuops: reclaiming stuck GPU memory"
IDLE = "node07|idle|Unknown|Unknown|none\n"
IDLE_NOT_RESPONDING = "node07|idle*|Unknown|Unknown|none\n"
DRAINING = "node07|draining|root(0)|2026-12-01T08:54:06|gpuops run=abc: reset | test\n"
DRAINED_FLAGGED = "node07|drained*|root(0)|2026-12-01T08:54:46|second\n"


def test_idle_node_has_no_reason():
    node = parse_sinfo(IDLE, "node07")
    assert node == {"node": "node07", "state": "idle", "raw_state": "idle", "reason": None, "reason_user": None, "reason_time": None}


def test_flags_are_not_part_of_the_state():
    assert parse_sinfo(IDLE_NOT_RESPONDING, "node07")["state"] == "idle"
    assert parse_sinfo(DRAINED_FLAGGED, "node07")["state"] == "drained"
    assert base_state("DRAINING~") == "draining"


def test_a_reason_keeps_its_bars():
    node = parse_sinfo(DRAINING, "node07")
    assert node["reason"] == "gpuops run=abc: reset | test"
    assert node["reason_user"] == "root(0)"
    assert node["state"] == "draining"


def test_an_unknown_node_prints_nothing():
    with pytest.raises(SlurmNodeUnknown):
        parse_sinfo("", "nosuch")
    with pytest.raises(SlurmNodeUnknown):
        parse_sinfo(IDLE, "node0")


def test_ours_is_the_reason_drain_reason_writes_and_names_the_run():
    ours = parse_sinfo("node07|drained|root(0)|2026-12-01T08:54:06|%s\n" % drain_reason(MARKER, "run-1", "the reset rung"), "node07")
    assert ours["reason"] == "gpuops: reclaiming stuck GPU memory (run run-1: the reset rung)"
    assert drain_run(ours, MARKER) == "run-1"
    assert drain_run(parse_sinfo(DRAINED_FLAGGED, "node07"), MARKER) is None
    assert drain_run(parse_sinfo(IDLE, "node07"), MARKER) is None
    # A resumed node may keep no reason, or a stale one: only a drain can be ours.
    assert drain_run(dict(ours, state="idle"), MARKER) is None
    assert is_drained(parse_sinfo(DRAINING, "node07"))


def test_a_reason_that_only_starts_with_the_marker_is_someone_elses():
    for reason in ("gpuops: reclaiming stuck GPU memory failed, RMA - do not resume",
                   "gpuops: reclaiming stuck GPU memory (run x: reset) - and then a human note",
                   "gpuops: reclaiming stuck GPU memory"):
        node = {"state": "drained", "reason": reason}
        assert drain_run(node, MARKER) is None, reason


def test_odd_run_ids_and_purposes_still_read_back():
    reason = drain_reason(MARKER, "awx job 42: (retry)", "the (reset) rung")
    assert reason == "gpuops: reclaiming stuck GPU memory (run awx_job_42___retry_: the reset rung)"
    assert drain_run({"state": "draining", "reason": reason}, MARKER) == "awx_job_42___retry_"


def test_squeue_jobs():
    assert parse_squeue("1|root|RUNNING|wrap\n42|alice|PENDING|train | v2\n\n") == [
        {"job_id": "1", "user": "root", "state": "RUNNING", "name": "wrap"},
        {"job_id": "42", "user": "alice", "state": "PENDING", "name": "train | v2"},
    ]
    assert parse_squeue("") == []


def test_a_hold_reason_names_the_gate_and_is_no_drain_of_ours_to_resume():
    reason = hold_reason("run (1)", "dcgmi diag -r 1 failed:\n software Fail")
    assert reason == ("gpuops: GPU health check failed (run run__1_) - dcgmi diag -r 1 failed: software Fail; resume by hand "
                      "once repaired")
    assert drain_run({"state": "drained", "reason": reason}, MARKER) is None
    assert drain_run({"state": "drained", "reason": reason}, "gpuops") is None
    assert len(hold_reason("run-1", "x" * 500)) == 200
