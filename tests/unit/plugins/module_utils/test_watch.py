# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The watch's judging across runs: streaks kept in the state, new Xid events, unresponsive probes, the state file."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import time

import pytest

from ansible_collections.gpuops.remediation.plugins.module_utils.probes import _process
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._kernel_log import parse_kernel_log
from ansible_collections.gpuops.remediation.plugins.module_utils._lock import NodeLock
from ansible_collections.gpuops.remediation.plugins.module_utils._safe_files import UnsafePath, write_atomic
from ansible_collections.gpuops.remediation.plugins.module_utils.watch._watch import (
    Thresholds, dump_state, empty_state, fingerprint, judge, last_remediation, load_state, new_xid_events, probe_node_lock,
    sample_of,
)

from ansible_collections.gpuops.remediation.tests.unit.helpers import bounded

MIB = 1024
HOST = "node07"
T0 = 1800000000.0


def gpu(index=0, used=1000, total=80 * MIB, ghost=0, recovery="none", uuid=None):
    return {"index": index, "uuid": uuid or "GPU-%d" % index, "name": "NVIDIA H100", "pci_bus_id": "00000000:%02X:00.0" % (0x18 + index),
            "memory_total_mib": total, "memory_used_mib": used, "attributed_mib": used - ghost, "unattributed_mib": ghost,
            "holders": [], "recovery_action": recovery, "state": "ok"}


def snapshot(*gpus, ok=True, timed_out=False):
    probe = {"backend": "nvml", "ok": ok, "timed_out": timed_out, "error": None if ok else "NVML did not answer in 10.0 s"}
    return {"gpus": list(gpus), "probes": {"gpu": probe}}


def samples_at(start, step, *snapshots):
    return [sample_of(snap, start + number * step) for number, snap in enumerate(snapshots)]


def run(state, samples, thresholds=None, events=(), host=HOST):
    now = samples[-1]["epoch"] + 0.5
    return judge(state, samples, list(events), thresholds or Thresholds(), now, host)


def kinds(findings):
    return sorted((finding["kind"], finding["gpu"]) for finding in findings)


def test_high_usage_is_a_finding_only_once_it_lasted_the_minutes_across_runs():
    thresholds = Thresholds(high_usage_percent=90, high_usage_minutes=10)
    high = snapshot(gpu(used=76 * MIB))
    judged = run(empty_state(), samples_at(T0, 10, high, high, high), thresholds)
    state = judged.state
    findings = judged.findings
    restarted = judged.restarted
    assert findings == [] and restarted
    assert state["gpus"]["GPU-0"]["high_usage_since"] == T0
    # Ten minutes later, still high: the streak began in the earlier run.
    judged = run(state, samples_at(T0 + 600, 10, high), thresholds)
    state = judged.state
    findings = judged.findings
    restarted = judged.restarted
    assert kinds(findings) == [("high_memory_usage", "GPU-0")] and not restarted
    assert findings[0]["since_epoch"] == T0 and findings[0]["used_percent"] == 95.0


def test_high_usage_streak_ends_at_the_first_sample_below_the_threshold():
    thresholds = Thresholds(high_usage_minutes=10)
    high, low = snapshot(gpu(used=76 * MIB)), snapshot(gpu(used=10 * MIB))
    judged = run(empty_state(), samples_at(T0, 10, high, low), thresholds)
    state = judged.state
    assert state["gpus"]["GPU-0"]["high_usage_since"] is None
    judged = run(state, samples_at(T0 + 600, 10, high), thresholds)
    state = judged.state
    findings = judged.findings
    assert findings == [] and state["gpus"]["GPU-0"]["high_usage_since"] == T0 + 600


def test_exactly_at_the_percentage_is_not_high():
    judged = run(empty_state(), samples_at(T0, 10, snapshot(gpu(used=72 * MIB, total=80 * MIB))), Thresholds(high_usage_percent=90))
    state = judged.state
    assert state["gpus"]["GPU-0"]["high_usage_since"] is None


def test_ghost_memory_counts_samples_in_a_row_across_runs():
    thresholds = Thresholds(ghost_threshold_mib=256, ghost_samples=3)
    ghost = snapshot(gpu(used=4096, ghost=3072), gpu(index=1))
    judged = run(empty_state(), samples_at(T0, 10, ghost, ghost), thresholds)
    state = judged.state
    findings = judged.findings
    assert findings == [] and state["gpus"]["GPU-0"]["ghost_samples"] == 2
    judged = run(state, samples_at(T0 + 600, 10, ghost), thresholds)
    state = judged.state
    findings = judged.findings
    assert kinds(findings) == [("ghost_memory", "GPU-0")]
    assert findings[0]["samples"] == 3 and findings[0]["ghost_mib"] == 3072
    # A sample at or under the threshold ends the streak.
    judged = run(state, samples_at(T0 + 1200, 10, snapshot(gpu(used=4096, ghost=256))), thresholds)
    state = judged.state
    findings = judged.findings
    assert findings == [] and state["gpus"]["GPU-0"]["ghost_samples"] == 0


def test_a_state_older_than_its_max_age_starts_the_streaks_over():
    thresholds = Thresholds(ghost_samples=2, state_max_age_minutes=30)
    ghost = snapshot(gpu(used=4096, ghost=3072))
    judged = run(empty_state(), samples_at(T0, 10, ghost), thresholds)
    state = judged.state
    judged = run(state, samples_at(T0 + 3600, 10, ghost), thresholds)
    state = judged.state
    findings = judged.findings
    restarted = judged.restarted
    assert restarted and findings == [] and state["gpus"]["GPU-0"]["ghost_samples"] == 1


def test_a_failed_probe_is_a_finding_and_changes_no_streak_and_no_last_success():
    thresholds = Thresholds(ghost_samples=3)
    ghost = snapshot(gpu(used=4096, ghost=3072))
    judged = run(empty_state(), samples_at(T0, 10, ghost, ghost), thresholds)
    state = judged.state
    # The driver hangs: the GPUs are the device nodes' placeholders, with no memory figure.
    hung = snapshot({"index": 0, "uuid": None, "name": None, "pci_bus_id": None}, ok=False, timed_out=True)
    judged = run(state, samples_at(T0 + 600, 10, hung, hung), thresholds)
    state = judged.state
    findings = judged.findings
    # The placeholder of /dev/nvidia0 is the GPU the state knows at index 0: its UUID, bus id and name.
    assert kinds(findings) == [("unresponsive", "GPU-0")]
    assert (findings[0]["gpu_uuid"], findings[0]["pci_bus_id"]) == ("GPU-0", "00000000:18:00.0")
    assert findings[0]["timed_out"] and findings[0]["failed_samples"] == 2
    assert "timed out in 2 of 2 samples" in findings[0]["message"]
    assert state["gpus"]["GPU-0"]["ghost_samples"] == 2
    assert state["last_success_epoch"] == T0 + 10


def test_a_probe_that_names_no_gpu_is_a_finding_of_the_node():
    judged = run(empty_state(), samples_at(T0, 10, snapshot(ok=False)))
    findings = judged.findings
    assert kinds(findings) == [("unresponsive", "node")] and not findings[0]["timed_out"]


def test_a_recovery_action_other_than_none_is_a_finding():
    judged = run(empty_state(), samples_at(T0, 10, snapshot(gpu(recovery="reset"), gpu(index=1, recovery="none"))))
    findings = judged.findings
    assert kinds(findings) == [("recovery_action", "GPU-0")] and findings[0]["recovery_action"] == "reset"


XID_LOG = (
    "2026-12-01T08:00:00+0000 node07 kernel: NVRM: Xid (PCI:0000:18:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n"
    "2026-12-01T08:05:00+0000 node07 kernel: NVRM: Xid (PCI:0000:19:00): 13, pid=4242, name=python, Graphics SM Warp Exception\n"
)
LATER_XID = "2026-12-01T09:00:00+0000 node07 kernel: NVRM: Xid (PCI:0000:19:00): 31, pid=4243, name=python, MMU Fault\n"


def events_of(text):
    events = parse_kernel_log(text)
    for event in events:
        event["gpu_index"] = {"18": 0, "19": 1}.get(event["pci_bus_id"].split(":")[1])
    return events


def test_xid_events_are_new_once_and_counted_by_gpu_and_code():
    fresh, xid = new_xid_events({}, events_of(XID_LOG))
    assert [event["xid"] for event in fresh] == [79, 13]
    assert xid["counts"] == {"0": {"79": 1}, "1": {"13": 1}}
    again, xid = new_xid_events(xid, events_of(XID_LOG))
    assert again == [] and xid["counts"] == {"0": {"79": 1}, "1": {"13": 1}}
    later, xid = new_xid_events(xid, events_of(XID_LOG + LATER_XID))
    assert [event["xid"] for event in later] == [31]
    assert xid["counts"]["1"] == {"13": 1, "31": 1}


def test_xid_events_older_than_the_last_one_seen_are_not_new_even_when_forgotten():
    xid = new_xid_events({}, events_of(XID_LOG + LATER_XID))[1]
    xid["seen"] = []  # the remembered lines rolled off
    fresh = new_xid_events(xid, events_of(XID_LOG))[0]
    assert fresh == []


def test_new_xids_are_one_finding_per_gpu():
    snap = snapshot(gpu(), gpu(index=1))
    judged = run(empty_state(), samples_at(T0, 10, snap), events=events_of(XID_LOG))
    findings = judged.findings
    fresh = judged.fresh_xids
    assert kinds(findings) == [("xid", "GPU-0"), ("xid", "GPU-1")]
    assert [finding["xids"] for finding in findings] == [[79], [13]] and len(fresh) == 2


def test_fingerprints_are_stable_per_host_gpu_and_kind():
    ghost = snapshot(gpu(used=4096, ghost=3072))
    thresholds = Thresholds(ghost_samples=1)
    judged = run(empty_state(), samples_at(T0, 10, ghost), thresholds)
    state = judged.state
    first = judged.findings
    judged = run(state, samples_at(T0 + 600, 10, ghost), thresholds)
    second = judged.findings
    assert [f["fingerprint"] for f in first] == [f["fingerprint"] for f in second] == [fingerprint(HOST, "GPU-0", "ghost_memory")]
    judged = run(empty_state(), samples_at(T0, 10, ghost), thresholds, host="node08")
    other_host = judged.findings
    assert other_host[0]["fingerprint"] != first[0]["fingerprint"]
    assert fingerprint(HOST, "GPU-0", "xid") != fingerprint(HOST, "GPU-0", "ghost_memory")
    assert len(first[0]["fingerprint"]) == 64


def test_the_state_file_round_trips_and_a_corrupt_one_is_reported_and_replaced(tmp_path):
    path = str(tmp_path / "watch" / "state.json")
    state, problem = load_state(path)
    assert state == empty_state() and problem is None
    judged = run(state, samples_at(T0, 10, snapshot(gpu(used=4096, ghost=3072))))
    state = judged.state
    write_atomic(path, json.dumps(state))
    assert load_state(path) == (state, None)
    assert os.listdir(str(tmp_path / "watch")) == ["state.json"]  # no temporary file left behind
    with open(path, "w") as handle:
        handle.write('{"version": 1, "gpus": {')  # torn
    state, problem = load_state(path)
    assert state == empty_state() and "corrupt" in problem and path in problem
    with open(path, "w") as handle:
        handle.write('["not", "a", "state"]')
    assert "not one this version writes" in load_state(path)[1]


def test_a_state_path_that_is_no_regular_file_is_refused_naming_it(tmp_path):
    directory = tmp_path / "state.json"
    directory.mkdir()  # not a file the watch wrote: never believed, nor replaced
    with pytest.raises(UnsafePath, match=r"state_path: '%s' is refused: it is not a regular file" % re.escape(str(directory))):
        load_state(str(directory))


def journal_line(run, entry, phase, action, ts, ok=None, **details):
    record = {"ts": ts, "run_id": run, "id": "%s-%d" % (run, entry), "phase": phase, "action": action}
    if ok is not None:
        record["ok"] = ok
    record.update(details)
    return record


def test_the_last_remediation_is_the_latest_rung_that_ended_well():
    records = [
        journal_line("a", 1, "intent", "signal", "2026-12-01T08:00:00Z", pid=10),
        journal_line("a", 1, "outcome", "signal", "2026-12-01T08:00:01Z", ok=True),
        journal_line("a", 2, "intent", "gpu_reset", "2026-12-01T08:01:00Z", gpus=[0]),
        journal_line("a", 2, "outcome", "gpu_reset", "2026-12-01T08:01:05Z", ok=True),
        journal_line("b", 1, "intent", "module_unload", "2026-12-01T09:00:00Z", module="nvidia_uvm"),
        journal_line("b", 1, "outcome", "module_unload", "2026-12-01T09:00:01Z", ok=True),
        journal_line("b", 2, "intent", "gpu_reset", "2026-12-01T09:01:00Z", gpus=[0]),
        journal_line("b", 2, "outcome", "gpu_reset", "2026-12-01T09:01:05Z", ok=False),
        journal_line("b", 3, "intent", "systemctl_stop", "2026-12-01T09:02:00Z", unit="nvidia-persistenced.service"),
        journal_line("b", 3, "outcome", "systemctl_stop", "2026-12-01T09:02:01Z", ok=True),
    ]
    last = last_remediation(records)
    assert last["rung"] == "reset" and last["time"] == "2026-12-01T08:01:05Z" and last["epoch"] == 1796112065.0
    records += [journal_line("c", 1, "intent", "module_load", "2026-12-01T10:00:00Z", module="nvidia"),
                journal_line("c", 1, "outcome", "module_load", "2026-12-01T10:00:02Z", ok=True)]
    assert last_remediation(records)["rung"] == "reload"
    assert last_remediation([]) is None


def test_an_xid_while_the_probe_fails_is_still_a_finding_of_its_gpu():
    hung = snapshot({"index": 0, "uuid": None, "name": None, "pci_bus_id": None}, ok=False, timed_out=True)
    judged = run(empty_state(), samples_at(T0, 10, hung), events=events_of(XID_LOG))
    findings = judged.findings
    assert kinds(findings) == [("unresponsive", "index:0"), ("xid", "index:0"), ("xid", "index:1")]


def test_a_gpu_the_driver_no_longer_lists_keeps_no_streak():
    thresholds = Thresholds(ghost_samples=3)
    state = run(empty_state(), samples_at(T0, 10, snapshot(gpu(used=4096, ghost=3072), gpu(index=1))), thresholds).state
    state = run(state, samples_at(T0 + 600, 10, snapshot(gpu(index=1))), thresholds).state
    assert sorted(state["gpus"]) == ["GPU-1"]


def test_remediation_is_narrowed_to_the_gpus_whose_findings_ask_for_it():
    from ansible_collections.gpuops.remediation.plugins.module_utils.watch._watch import remediation_for
    findings = [{"kind": "ghost_memory", "gpu_index": 2}, {"kind": "high_memory_usage", "gpu_index": 1},
                {"kind": "recovery_action", "gpu_index": 10}, {"kind": "ghost_memory", "gpu_index": 2}]
    assert remediation_for(findings, ["ghost_memory", "recovery_action"]) == {"needed": True, "gpus": ["2", "10"]}
    assert remediation_for(findings, ["xid"]) == {"needed": False, "gpus": []}
    assert remediation_for([], ["ghost_memory"]) == {"needed": False, "gpus": []}
    # A probe that failed for the whole node names no GPU: the ladder may need every GPU.
    node_wide = findings + [{"kind": "unresponsive", "gpu_index": None}]
    assert remediation_for(node_wide, ["unresponsive", "ghost_memory"]) == {"needed": True, "gpus": None}


def test_a_run_that_locks_the_state_last_cannot_rewind_it_with_older_samples():
    """Two runs at once sample side by side; the one that takes the state file's lock second holds samples older than
    those already judged. They are history: the streaks and the last success stay those of the newest sample."""
    thresholds = Thresholds(ghost_threshold_mib=256, ghost_samples=2)
    older = samples_at(T0, 10, snapshot(gpu(ghost=2048)), snapshot(gpu(ghost=2048)))
    newer = samples_at(T0 + 5, 10, snapshot(gpu(ghost=0)), snapshot(gpu(ghost=0)))
    state = judge(empty_state(), newer, [], thresholds, T0 + 16, HOST).state
    judged = judge(state, older, [], thresholds, T0 + 17, HOST)
    assert judged.state["last_success_epoch"] == T0 + 15
    assert judged.state["gpus"]["GPU-0"]["ghost_samples"] == 0
    assert kinds(judged.findings) == []


def test_a_gpu_lost_to_the_driver_is_a_finding_every_run_while_the_others_answer():
    """NVML answers for the other GPUs and names this one lost (fallen off the bus): the probe succeeded, but this
    GPU was not read. Its Xid 79 is new once; the finding must last as long as the GPU stays lost."""
    lost = {"index": 1, "lost": True, "processes": [], "state": "lost"}
    samples = samples_at(T0, 10, snapshot(gpu(0), lost))
    first = run(empty_state(), samples)
    assert kinds(first.findings) == [("unresponsive", "index:1")]
    assert "lost" in first.findings[0]["message"]
    later = run(first.state, samples_at(T0 + 600, 10, snapshot(gpu(0), lost)))
    assert kinds(later.findings) == [("unresponsive", "index:1")]
    assert later.findings[0]["fingerprint"] == first.findings[0]["fingerprint"]


def test_a_state_file_of_the_right_version_with_fields_of_the_wrong_type_is_replaced_not_a_crash(tmp_path):
    """Valid JSON is not a valid state: a hand edit, another tool or a bad disk leave fields no run could judge with."""
    path = str(tmp_path / "state.json")
    good = run(empty_state(), samples_at(T0, 10, snapshot(gpu(ghost=3072)))).state
    bad_fields = ({"updated_epoch": "yesterday"}, {"last_success_epoch": [1]}, {"gpus": {"GPU-0": None}},
                  {"gpus": {"GPU-0": {"ghost_samples": "3"}}}, {"updated_epoch": float("inf")}, {"xid": {"seen": 5, "counts": {}, "last_epoch": None}},
                  {"xid": {"seen": [], "counts": {"0": {"79": "x"}}, "last_epoch": None}})
    for fields in bad_fields:
        write_atomic(path, json.dumps(dict(good, **fields)))
        state, problem = load_state(path)
        assert state == empty_state() and "not one this version writes" in problem, fields
        xid = {"kind": "xid", "xid": 79, "gpu_index": 0, "time_epoch": T0, "line": "Xid 79"}
        run(state, samples_at(T0 + 60, 10, snapshot(gpu(ghost=3072))), events=[xid])


def test_a_last_success_after_now_is_a_clock_stepped_back_and_skips_no_sample():
    """A state from the future (the clock was stepped back) restarts: its last success skips no sample of now."""
    state = run(empty_state(), samples_at(T0 + 3600, 10, snapshot(gpu(ghost=0)))).state
    judged = judge(state, samples_at(T0, 10, snapshot(gpu(ghost=3072))), [], Thresholds(ghost_samples=1), T0 + 1, HOST)
    assert judged.state["last_success_epoch"] == T0
    assert kinds(judged.findings) == [("ghost_memory", "GPU-0")]


def test_an_xid_finding_keeps_its_fingerprint_when_the_probe_fails_in_the_run_that_logs_it():
    """Xid 79 is logged as the GPU falls off the bus, so the run that sees it often has no answer from the probe, and
    the kernel line names only the bus. The GPU is still the one the state remembers: the same key, the same fingerprint."""
    xid = {"kind": "xid", "xid": 79, "gpu_index": None, "pci_bus_id": "0000:18:00", "time": "t", "time_epoch": T0 + 100,
           "line": "NVRM: Xid (PCI:0000:18:00): 79, GPU has fallen off the bus."}
    answered = run(empty_state(), samples_at(T0, 10, snapshot(gpu(0))), events=[dict(xid, gpu_index=0, line="earlier")])
    failed = run(answered.state, samples_at(T0 + 100, 10, snapshot(ok=False)), events=[xid])
    xids = [finding for finding in failed.findings if finding["kind"] == "xid"]
    assert [(finding["gpu"], finding["gpu_index"]) for finding in xids] == [("GPU-0", 0)]
    assert xids[0]["fingerprint"] == [f for f in answered.findings if f["kind"] == "xid"][0]["fingerprint"]
    assert failed.state["xid"]["counts"] == {"0": {"79": 2}}  # one series per GPU, whether the probe answered or not


# ---------------------------------------------------------------- resolved findings

def test_a_finding_that_clears_is_resolved_once_with_the_fingerprint_it_fired_with():
    ghost = snapshot(gpu(ghost=3 * MIB))
    clean = snapshot(gpu(ghost=0))
    thresholds = Thresholds(ghost_samples=1)
    fired = run(empty_state(), samples_at(T0, 10, ghost), thresholds)
    assert kinds(fired.findings) == [("ghost_memory", "GPU-0")] and fired.resolved == []
    still = run(fired.state, samples_at(T0 + 600, 10, ghost), thresholds)
    assert still.resolved == []
    cleared = run(still.state, samples_at(T0 + 1200, 10, clean), thresholds)
    assert cleared.findings == []
    assert cleared.resolved == [{"fingerprint": fired.findings[0]["fingerprint"], "kind": "ghost_memory", "gpu": "GPU-0",
                                 "gpu_index": 0, "gpu_uuid": "GPU-0", "pci_bus_id": "00000000:18:00.0"}]
    # Resolved once: the next clean run has nothing left to close.
    assert run(cleared.state, samples_at(T0 + 1800, 10, clean), thresholds).resolved == []


def test_a_restarted_or_replaced_state_resolves_nothing():
    thresholds = Thresholds(ghost_samples=1)
    fired = run(empty_state(), samples_at(T0, 10, snapshot(gpu(ghost=3 * MIB))), thresholds)
    assert fired.state["active"]
    # Written an hour before: what was active then says nothing of now.
    stale = run(fired.state, samples_at(T0 + 3600, 10, snapshot(gpu())), thresholds)
    assert stale.restarted and stale.resolved == [] and stale.state["active"] == {}
    assert run(empty_state(), samples_at(T0 + 600, 10, snapshot(gpu())), thresholds).resolved == []


def test_the_active_findings_survive_the_state_file(tmp_path):
    fired = run(empty_state(), samples_at(T0, 10, snapshot(gpu(), ok=False, timed_out=True)))
    path = str(tmp_path / "state.json")
    write_atomic(path, dump_state(fired.state))
    state, problem = load_state(path)
    assert problem is None and list(state["active"]) == [fired.findings[0]["fingerprint"]]
    # An active entry that is not one this version writes: the state is replaced.
    write_atomic(path, json.dumps(dict(fired.state, active={"x": {"kind": 1}})))
    assert "not one this version writes" in load_state(path)[1]


# ---------------------------------------------------------------- a ladder run in progress (the node lock)

LOCK_HOLDER = """
    import sys, time
    from ansible_collections.gpuops.remediation.plugins.module_utils._lock import NodeLock
    with NodeLock(sys.argv[1], timeout=5):
        print("locked", flush=True)
        sys.stdin.read()
"""


@pytest.fixture
def ladder_holding_the_lock(tmp_path, child_env):
    path = str(tmp_path / "run" / "gpuops.lock")
    proc = bounded.start([sys.executable, "-c", textwrap.dedent(LOCK_HOLDER), path], env=child_env,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert bounded.line(proc, "proc") == "locked"
    yield proc, path
    proc.stdin.close()
    proc.wait(timeout=10)


def test_the_probe_names_the_holder_of_the_node_lock_without_waiting_or_keeping_it(ladder_holding_the_lock):
    proc, path = ladder_holding_the_lock
    began = time.monotonic()
    holder = probe_node_lock(path)
    assert time.monotonic() - began < 0.5
    assert holder["pid"] == proc.pid and holder["start_time"] == _process.start_time(proc.pid)
    assert holder["description"].startswith("pid %d (" % proc.pid)
    proc.stdin.close()
    proc.wait(timeout=10)
    assert probe_node_lock(path) is None
    # The probe kept nothing: the ladder takes the lock at once.
    with NodeLock(path, timeout=0):
        pass


def test_no_lock_file_is_no_run_in_progress(tmp_path):
    assert probe_node_lock(str(tmp_path / "run" / "gpuops.lock")) is None
    assert not os.path.exists(str(tmp_path / "run"))


def test_samples_taken_while_the_ladder_holds_the_lock_raise_no_unresponsive_and_hold_the_ghost_streak(ladder_holding_the_lock):
    proc, path = ladder_holding_the_lock
    thresholds = Thresholds(ghost_samples=2)
    first = run(empty_state(), samples_at(T0, 10, snapshot(gpu(ghost=3 * MIB))), thresholds)
    hung = snapshot(gpu(), ok=False, timed_out=True)
    down = run(first.state, samples_at(T0 + 600, 10, hung), thresholds)
    assert kinds(down.findings) == [("unresponsive", "GPU-0")]
    holder = probe_node_lock(path)
    under_reset = [sample_of(snap, T0 + 1200 + number * 10, holder) for number, snap in
                   enumerate((hung, snapshot(gpu(ghost=3 * MIB)), snapshot(gpu(ghost=3 * MIB))))]
    assert under_reset[0]["remediation_in_progress"] and under_reset[0]["remediation_holder"]["pid"] == proc.pid
    judged = run(down.state, under_reset, thresholds)
    # No unresponsive finding from the timed-out sample, nor resolved (nothing known of it); the ghost streak held at 1.
    assert judged.findings == [] and judged.resolved == []
    assert list(judged.state["active"]) == [down.findings[0]["fingerprint"]]
    assert judged.state["gpus"]["GPU-0"]["ghost_samples"] == 1
    # The ladder done, the GPU answers and the unresponsive finding is resolved.
    after = run(judged.state, samples_at(T0 + 1800, 10, snapshot(gpu())), thresholds)
    assert [entry["kind"] for entry in after.resolved] == ["unresponsive"]
    assert after.state["gpus"]["GPU-0"]["ghost_samples"] == 0


# ---------------------------------------------------------------- a run that could not see a GPU (issue 19, rules 7 and 8)

def _placeholder(index):
    return {"index": index, "uuid": None, "name": None, "pci_bus_id": None}


def _lost(index, bus=None):
    return {"index": index, "uuid": None, "name": None, "pci_bus_id": bus, "lost": True, "processes": [], "state": "lost"}


@pytest.mark.parametrize("blind", ["hung", "failed_no_gpus", "lost_by_index", "lost_by_bus"])
def test_a_run_that_cannot_see_a_gpu_resolves_nothing_on_it_and_the_next_answer_fires_nothing_new(blind):
    """Ghost memory, high usage and a recovery action on GPU 0: a run whose probe hangs (or that finds the GPU lost)
    neither makes them again nor resolves them; they stay active, held, and the run that reads the GPU again carries
    them on under the same fingerprints (no firing, resolved, firing)."""
    thresholds = Thresholds(ghost_samples=1, high_usage_percent=50, high_usage_minutes=0.01)
    sick = snapshot(gpu(0, used=70 * MIB, ghost=3072, recovery="reset"), gpu(1))
    first = run(empty_state(), samples_at(T0, 10, sick, sick), thresholds)
    fired = dict((finding["fingerprint"], finding["kind"]) for finding in first.findings if finding["gpu"] == "GPU-0")
    assert sorted(fired.values()) == ["ghost_memory", "high_memory_usage", "recovery_action"]
    blind_snapshot = {
        "hung": snapshot(_placeholder(0), _placeholder(1), ok=False, timed_out=True),
        "failed_no_gpus": snapshot(ok=False),
        "lost_by_index": snapshot(_lost(0), gpu(1)),
        "lost_by_bus": snapshot(_lost(0, "00000000:18:00.0"), gpu(1)),
    }[blind]
    second = run(first.state, samples_at(T0 + 300, 10, blind_snapshot, blind_snapshot), thresholds)
    assert [entry for entry in second.resolved if entry["gpu"] == "GPU-0"] == []
    assert dict((entry["fingerprint"], entry["kind"]) for entry in second.held) == fired
    assert all(entry["held"] for entry in second.held)
    assert set(fired) <= set(second.state["active"])
    # The GPU the probe could not read is GPU-0 under every guise: one unresponsive finding, of GPU-0.
    unresponsive = [finding for finding in second.findings if finding["kind"] == "unresponsive"]
    assert [finding["gpu"] for finding in unresponsive if finding["gpu"] != "GPU-1"] == ["GPU-0"]
    third = run(second.state, samples_at(T0 + 600, 10, sick, sick), thresholds)
    assert set(fired) <= set(finding["fingerprint"] for finding in third.findings)
    assert [entry["kind"] for entry in third.resolved] == ["unresponsive"] * len(unresponsive)


def test_a_gpu_that_answers_again_healthy_resolves_what_it_had_once():
    thresholds = Thresholds(ghost_samples=1)
    first = run(empty_state(), samples_at(T0, 10, snapshot(gpu(0, ghost=3072))), thresholds)
    hung = snapshot(_placeholder(0), ok=False, timed_out=True)
    second = run(first.state, samples_at(T0 + 300, 10, hung), thresholds)
    assert second.resolved == [] and [entry["kind"] for entry in second.held] == ["ghost_memory"]
    third = run(second.state, samples_at(T0 + 600, 10, snapshot(gpu(0))), thresholds)
    assert sorted(entry["kind"] for entry in third.resolved) == ["ghost_memory", "unresponsive"]
    assert third.held == [] and third.state["active"] == {}


def test_a_lost_gpu_seen_by_index_and_by_bus_id_is_one_finding_with_one_fingerprint():
    """The probe hangs in one sample (the device node's index only) and answers in the next with GPU 1 lost, named by
    the bus id of its Xid line: one unresponsive finding for GPU 1, under the UUID the state knows, run after run."""
    known = run(empty_state(), samples_at(T0, 10, snapshot(gpu(0), gpu(1)))).state
    mixed = samples_at(T0 + 300, 10, snapshot(_placeholder(0), _placeholder(1), ok=False, timed_out=True),
                       snapshot(gpu(0), _lost(1, "00000000:19:00.0")))
    judged = run(known, mixed)
    # GPU 0 did not answer in the first sample either: one finding each, by UUID.
    assert kinds(judged.findings) == [("unresponsive", "GPU-0"), ("unresponsive", "GPU-1")]
    lost = [finding for finding in judged.findings if finding["gpu"] == "GPU-1"]
    assert len(lost) == 1 and lost[0]["gpu_uuid"] == "GPU-1" and lost[0]["pci_bus_id"] == "00000000:19:00.0"
    assert [finding for finding in judged.findings if finding["gpu"].startswith(("index:", "0000"))] == []
    # The next run sees it by index only (no Xid line, no bus id): the same GPU, bus id and fingerprint.
    later = run(judged.state, samples_at(T0 + 600, 10, snapshot(gpu(0), _lost(1))))
    again = [finding for finding in later.findings if finding["kind"] == "unresponsive"]
    assert [(finding["gpu"], finding["pci_bus_id"], finding["fingerprint"]) for finding in again] == \
        [("GPU-1", "00000000:19:00.0", lost[0]["fingerprint"])]
    assert [(entry["gpu"], entry["kind"]) for entry in later.resolved] == [("GPU-0", "unresponsive")]


def test_a_lost_gpu_first_seen_by_index_keeps_that_identity_when_its_bus_id_is_read_later():
    first = run(empty_state(), samples_at(T0, 10, snapshot(gpu(0), _lost(1))))
    later = run(first.state, samples_at(T0 + 300, 10, snapshot(gpu(0), _lost(1, "00000000:19:00.0"))))
    assert [finding["fingerprint"] for finding in later.findings] == [finding["fingerprint"] for finding in first.findings]
    assert later.resolved == []


def test_identities_outlive_a_restarted_state():
    """A state older than its max age restarts its streaks, not who the GPUs are."""
    known = run(empty_state(), samples_at(T0, 10, snapshot(gpu(0)))).state
    judged = run(known, samples_at(T0 + 7200, 10, snapshot(_placeholder(0), ok=False, timed_out=True)))
    assert judged.restarted and kinds(judged.findings) == [("unresponsive", "GPU-0")]


def test_a_hung_probe_without_device_nodes_names_the_gpus_the_state_knows():
    known = run(empty_state(), samples_at(T0, 10, snapshot(gpu(0), gpu(1)))).state
    judged = run(known, samples_at(T0 + 300, 10, snapshot(ok=False)))
    assert kinds(judged.findings) == [("unresponsive", "GPU-0"), ("unresponsive", "GPU-1")]


def test_another_gpu_on_the_same_index_is_not_taken_for_the_known_one():
    """A GPU replaced (another UUID and bus id on index 0) is a new GPU, not the old one."""
    known = run(empty_state(), samples_at(T0, 10, snapshot(gpu(0)))).state
    other = dict(gpu(0), uuid="GPU-new", pci_bus_id="00000000:3B:00.0")
    judged = run(known, samples_at(T0 + 300, 10, snapshot(other)))
    assert [sample_gpu["key"] for sample_gpu in judged.samples[0]["gpus"]] == ["GPU-new"]
