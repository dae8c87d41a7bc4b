# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The circuit breaker's journal source: real journal lines, written by the real Journal class and read back from the
file, turned into the nodes out (journal_out) and the hosts not read (journal_reads)."""

import time

from ansible_collections.gpuops.remediation.plugins.module_utils.journal._writer import Journal
from ansible_collections.gpuops.remediation.plugins.module_utils.journal._reader import read_journal
from ansible_collections.gpuops.remediation.plugins.plugin_utils._breaker import (
    breaker_refusal, journal_destructive, journal_out, journal_reads, unread_note,
)


def journal(tmp_path, name="node"):
    path = str(tmp_path / name / "journal.jsonl")
    return Journal(path, run_id="run-%s" % name, syslog_file=str(tmp_path / name / "syslog")), path


def test_a_reset_that_ended_ok_counts_named_with_the_action_its_time_and_run(tmp_path):
    writer, path = journal(tmp_path)
    writer.outcome(writer.intent("gpu_reset", gpus=[0], argv=["nvidia-smi", "--gpu-reset", "-i", "00000000:3B:00.0"]), True, rc=0)
    records = read_journal(path)
    out = journal_out({"gpu3.example.org": records}, time.time() + 5 * 60, 60)
    assert list(out) == ["gpu3"]
    assert out["gpu3"].startswith("GPU reset (gpu_reset) in its journal at %s, 5 min ago, run run-node, ok" % records[0]["ts"])


def test_an_intent_without_outcome_and_an_interrupted_one_count_as_unknown(tmp_path):
    writer, path = journal(tmp_path, "open")
    writer.intent("module_unload", module="nvidia", argv=["modprobe", "-r", "nvidia"])
    found = journal_destructive(read_journal(path), time.time(), 60)
    assert (found["name"], found["outcome"]) == ("driver reload", "outcome unknown: no outcome line")

    killed, path = journal(tmp_path, "cut")
    killed.intent("gpu_reset", gpus=[1], argv=["nvidia-smi", "--gpu-reset", "-i", "0"])
    intent = read_journal(path)[-1]
    Journal(path, run_id="next-run").close_interrupted(intent)
    found = journal_destructive(read_journal(path), time.time(), 60)
    assert (found["action"], found["run_id"], found["outcome"]) == ("gpu_reset", "run-cut", "outcome unknown: its run was interrupted")


def test_a_failed_action_does_not_count(tmp_path):
    writer, path = journal(tmp_path)
    writer.outcome(writer.intent("gpu_reset", gpus=[0], argv=["nvidia-smi", "--gpu-reset"]), False, rc=3, stderr="in use")
    writer.outcome(writer.intent("module_unload", module="nvidia", argv=["modprobe", "-r", "nvidia"]), False, rc=1)
    assert journal_destructive(read_journal(path), time.time(), 60) is None
    assert journal_out({"node": read_journal(path)}, time.time(), 60) == {}


def test_an_action_started_before_the_window_does_not_count_one_inside_does(tmp_path):
    writer, path = journal(tmp_path)
    writer.outcome(writer.intent("gpu_reset", gpus=[0], argv=[]), True)
    records = read_journal(path)
    assert journal_destructive(records, time.time() + 61 * 60, 60) is None
    assert journal_destructive(records, time.time() + 59 * 60, 60)["action"] == "gpu_reset"


def test_a_line_from_a_clock_far_ahead_counts_for_nothing(tmp_path):
    writer, path = journal(tmp_path)
    writer.outcome(writer.intent("gpu_reset", gpus=[0], argv=[]), True)
    assert journal_destructive(read_journal(path), time.time() - 3600, 60) is None


def test_signals_container_stops_and_unit_stops_are_not_destructive(tmp_path):
    writer, path = journal(tmp_path)
    writer.outcome(writer.intent("signal", pid=4242, start_time=1, name="python3", signal="KILL"), True, exited=True)
    writer.outcome(writer.intent("container_stop", runtime="docker", container="abc", argv=["docker", "stop", "abc"]), True)
    writer.outcome(writer.intent("systemctl_stop", unit="nvidia-persistenced.service"), True)
    writer.outcome(writer.intent("systemctl_start", unit="nvidia-persistenced.service"), True)
    writer.intent("signal", pid=4343, start_time=2, name="python3", signal="TERM")  # cut short, still not destructive
    assert journal_destructive(read_journal(path), time.time(), 60) is None


def test_a_graphics_restart_counts_by_its_way_down_not_by_its_way_back_up(tmp_path):
    writer, path = journal(tmp_path, "up")
    writer.outcome(writer.intent("systemctl_isolate", target="graphical.target"), True)
    assert journal_destructive(read_journal(path), time.time(), 60) is None
    writer.outcome(writer.intent("systemctl_isolate", target="multi-user.target"), True)
    assert journal_destructive(read_journal(path), time.time(), 60)["name"] == "graphics restart"


def test_the_latest_destructive_action_names_the_node(tmp_path):
    writer, path = journal(tmp_path)
    writer.outcome(writer.intent("gpu_reset", gpus=[0], argv=[]), True)
    writer.outcome(writer.intent("module_unload", module="nvidia", argv=["modprobe", "-r", "nvidia"]), True)
    writer.outcome(writer.intent("module_load", module="nvidia", argv=["modprobe", "nvidia"]), True)
    out = journal_out({"n1": read_journal(path), "n2": []}, time.time(), 60)
    assert list(out) == ["n1"] and out["n1"].startswith("driver reload (module_load)")


def test_reads_unreachable_failed_and_unreadable_hosts_are_unread_not_healthy(tmp_path):
    writer, path = journal(tmp_path)
    writer.outcome(writer.intent("gpu_reset", gpus=[0], argv=[]), True)
    results = [
        {"item": "n1", "changed": False, "records": read_journal(path), "error": None},
        {"item": "n2", "changed": False, "records": [], "error": None},
        {"item": "n3", "unreachable": True, "msg": "Failed to connect to the host via ssh: Connection refused"},
        {"item": "n4", "failed": True, "msg": "python3: not found"},
        {"item": "n5", "records": [], "error": "cannot read the journal /var/lib/gpuops/journal.jsonl: Permission denied"},
        {"item": "n7", "skipped": True, "skip_reason": "Conditional result was False"},
        {"item": {"host": "n8"}, "records": []},  # not a loop over hosts: nothing to name
        "not a result",
    ]
    journals, unread = journal_reads(results)
    assert sorted(journals) == ["n1", "n2"]
    assert unread == {"n3": "unreachable: Failed to connect to the host via ssh: Connection refused",
                      "n4": "the read failed: python3: not found",
                      "n5": "cannot read the journal /var/lib/gpuops/journal.jsonl: Permission denied",
                      "n7": "not read (skipped)"}
    out = journal_out(journals, time.time(), 60)
    refusal = breaker_refusal("n6", out, 5, 20, 0, 60, unread=unread)
    assert "1 of the 5 nodes of the fleet is already out: n1 (GPU reset (gpu_reset) in its journal" in refusal
    assert "the journals of 4 fleet hosts could not be read, so they are counted neither out nor healthy: n3 (unreachable" in refusal
    assert "n4 (the read failed: python3: not found)" in refusal
    # Allowed (room for two), the note still names them for the warning; the host's own entry is never named.
    assert breaker_refusal("n6", out, 10, 20, 0, 60, unread=unread) == ""
    assert unread_note({}) == ""
    own = breaker_refusal("n3", dict(out, n2="x"), 5, 20, 0, 60, unread=unread)
    assert "the journals of 3 fleet hosts" in own and "n3 (unreachable" not in own


def test_the_hosts_own_journal_is_not_counted_against_it(tmp_path):
    writer, path = journal(tmp_path)
    writer.outcome(writer.intent("gpu_reset", gpus=[0], argv=[]), True)
    out = journal_out({"gpu1.example.org": read_journal(path)}, time.time(), 60)
    assert breaker_refusal("gpu1.example.org", out, 5, 20, 0, 60, node_name="gpu1") == ""
    assert breaker_refusal("gpu2.example.org", out, 5, 20, 0, 60, node_name="gpu2").startswith("circuit breaker: 1 of the 5")


def test_an_outcome_in_the_window_whose_intent_is_not_counts_for_nothing(tmp_path):
    # gpu_journal_info's window keeps the lines at or after its start: an action started before it leaves its outcome only.
    writer, path = journal(tmp_path)
    writer.outcome(writer.intent("gpu_reset", gpus=[0], argv=[]), True)
    outcomes = [record for record in read_journal(path) if record["phase"] == "outcome"]
    assert journal_destructive(outcomes, time.time(), 60) is None


def test_a_host_recorded_and_with_a_reset_in_its_journal_is_one_node_out_under_its_node_name(tmp_path):
    """review20: the journal named node7.example.com 'node7' while its breaker record and Slurm named it gpu-07, so one
    host counted as two nodes out. The node name comes from the host's record, or its gpu_reclaim_drain_node_name."""
    from ansible_collections.gpuops.remediation.plugins.plugin_utils._breaker import recorded_node_names, recorded_out
    from ansible_collections.gpuops.remediation.plugins.action.gpu_breaker import fleet_node_names
    writer, path = journal(tmp_path)
    writer.outcome(writer.intent("gpu_reset", gpus=[0], argv=[]), True)
    now = time.time()
    records = [{"host": "node7.example.com", "node": "gpu-07", "epoch": now - 60, "run": "r", "rung": "reset"}]
    journals = {"node7.example.com": read_journal(path), "node8.example.com": read_journal(path)}
    out = recorded_out(records, now, 60)
    hostvars = {"node8.example.com": {"gpu_reclaim_drain_node_name": "gpu-08"}, "node7.example.com": {}}
    names = dict(fleet_node_names({"hostvars": hostvars}, list(journals)), **recorded_node_names(records))
    assert names == {"node7.example.com": "gpu-07", "node8.example.com": "gpu-08"}
    for name, why in journal_out(journals, now, 60, names).items():
        out.setdefault(name, why)
    assert sorted(out) == ["gpu-07", "gpu-08"]
    assert breaker_refusal("node9.example.com", out, 10, 20, 0, 60).startswith("circuit breaker: 2 of the 10 nodes")
