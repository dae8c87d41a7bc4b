# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the journal keeps of the holders it ends, and the leak sources read back from it (real journal files)."""

from __future__ import annotations

import datetime

import pytest

from ansible_collections.gpuops.remediation.plugins.module_utils.journal._files import journal_epoch
from ansible_collections.gpuops.remediation.plugins.module_utils.journal._writer import holder_source, Journal, SOURCE_CMDLINE_CHARS
from ansible_collections.gpuops.remediation.plugins.module_utils.journal._reader import read_journal
from ansible_collections.gpuops.remediation.plugins.module_utils.journal._evidence import leak_sources, run_summaries
from ansible_collections.gpuops.remediation.plugins.modules.gpu_journal_info import since_epoch

HOLDER = {"pid": 4242, "start_time": 99, "name": "python3", "user": "alice", "uid": 1001, "cmdline": ["python3", "train.py", "--name", "my run"],
          "ppid": 4200, "parent_name": "bash", "container": None, "slurm_job": "41822", "systemd_unit": None,
          "used_mib_per_gpu": {"0": 40000, "1": 1000}, "devices": ["/dev/nvidia0"], "seen_by": ["nvml"]}


def _end(journal, holder, exited=True, signal="TERM"):
    entry = journal.intent("signal", pid=holder["pid"], start_time=holder["start_time"], name=holder["name"], signal=signal,
                           source=holder_source(holder))
    journal.outcome(entry, True, pid=holder["pid"], signal=signal, exited=exited)


def test_holder_source_keeps_identity_and_owner_not_scan_details():
    source = holder_source(HOLDER)
    assert source == {"name": "python3", "user": "alice", "uid": 1001, "cmdline": "python3 train.py --name 'my run'", "ppid": 4200,
                      "parent_name": "bash", "slurm_job": "41822", "used_mib_per_gpu": {"0": 40000, "1": 1000},
                      "command": "python3"}


def test_holder_source_cuts_a_long_command_line():
    source = holder_source(dict(HOLDER, cmdline=["x" * 300, "y" * 300]))
    assert len(source["cmdline"]) == SOURCE_CMDLINE_CHARS + 3 and source["cmdline"].endswith("...")
    assert holder_source(dict(HOLDER, cmdline="already text"))["cmdline"] == "already text"


def test_leak_sources_groups_by_user_and_program_and_counts_a_process_once(tmp_path):
    path = str(tmp_path / "journal.jsonl")
    first = Journal(path, run_id="run-1")
    _end(first, HOLDER, exited=False, signal="TERM")  # ignored TERM, then KILL: one process ended
    _end(first, HOLDER, exited=True, signal="KILL")
    second = Journal(path, run_id="run-2")
    _end(second, dict(HOLDER, pid=5000, slurm_job="41900"))
    _end(second, dict(HOLDER, pid=5001, name="jupyter", user="bob", slurm_job=None, container={"runtime": "docker", "id": "f" * 64}))
    sources = leak_sources(read_journal(path))
    assert [(s["user"], s["name"], s["ended"], s["runs"]) for s in sources] == [("alice", "python3", 2, 2), ("bob", "jupyter", 1, 1)]
    assert sources[0]["used_mib"] == 82000
    assert sources[0]["owners"] == ["slurm job 41900", "slurm job 41822"]
    assert sources[1]["owners"] == ["docker container ffffffffffff"]
    assert sources[0]["cmdlines"] == ["python3 train.py --name 'my run'"]


def test_a_signal_the_process_survived_ends_nothing(tmp_path):
    path = str(tmp_path / "journal.jsonl")
    _end(Journal(path), HOLDER, exited=False)
    assert leak_sources(read_journal(path)) == []


def test_container_stops_count_each_holder_in_them(tmp_path):
    path = str(tmp_path / "journal.jsonl")
    journal = Journal(path)
    entry = journal.intent("container_stop", runtime="podman", container="abc", argv=["podman", "stop", "abc"],
                           sources=[holder_source(HOLDER), holder_source(dict(HOLDER, pid=1, name="worker"))])
    journal.outcome(entry, True, rc=0)
    failed = journal.intent("container_stop", runtime="podman", container="def", argv=[], sources=[holder_source(HOLDER)])
    journal.outcome(failed, False, rc=125)
    assert sorted((s["name"], s["ended"]) for s in leak_sources(read_journal(path))) == [("python3", 1), ("worker", 1)]


def test_hostile_and_foreign_lines_are_skipped_not_fatal(tmp_path):
    path = tmp_path / "journal.jsonl"
    journal = Journal(str(path))
    _end(journal, HOLDER)
    with open(path, "ab") as handle:
        handle.write(b'{"id": "x", "phase": "outcome", "action": "signal", "ts": "not a time", "ok": true, "exited": true}\n')
        handle.write(b'{"id": "y", "phase": "intent", "action": "signal", "ts": "2026-01-01T00:00:00Z", "source": "alice"}\n')
        handle.write(b'{"id": "y", "phase": "outcome", "action": "signal", "ts": "2026-01-01T00:00:01Z", "ok": true, "exited": true}\n')
        handle.write(b'[1, 2]\n{"torn": ')
    records = read_journal(str(path))
    assert [s["name"] for s in leak_sources(records)] == ["python3"]
    assert len(run_summaries(records)) == 2


def test_since_leaves_out_older_actions(tmp_path):
    path = str(tmp_path / "journal.jsonl")
    _end(Journal(path), HOLDER)
    records = read_journal(path)
    stamp = journal_epoch(records[0]["ts"])
    assert leak_sources(records, since=stamp + 1) == []
    assert len(leak_sources(records, since=stamp - 1)) == 1


def test_run_summaries_count_failures_and_interrupted_actions(tmp_path):
    path = str(tmp_path / "journal.jsonl")
    killed = Journal(path, run_id="killed")
    killed.intent("module_unload", module="nvidia")  # the run died here
    later = Journal(path, run_id="later")
    failed = later.intent("gpu_reset", gpus=[0])
    later.outcome(failed, False, rc=255)
    runs = dict((run["run_id"], run) for run in run_summaries(read_journal(path)))
    assert (runs["killed"]["actions"], runs["killed"]["interrupted"], runs["killed"]["failed"]) == (1, 1, 0)
    assert (runs["later"]["actions"], runs["later"]["failed"]) == (1, 1)
    later.close_interrupted(read_journal(path)[0])
    runs = dict((run["run_id"], run) for run in run_summaries(read_journal(path)))
    assert runs["killed"]["interrupted"] == 1 and runs["later"]["failed"] == 1


def test_since_accepts_durations_and_iso_times():
    now = 1_000_000.0
    assert since_epoch("", now) is None and since_epoch(None, now) is None
    assert since_epoch("90m", now) == now - 5400
    assert since_epoch("2w", now) == now - 14 * 86400
    assert since_epoch(" 1.5h ", now) == now - 5400
    expected = datetime.datetime(2026, 12, 1, 8, tzinfo=datetime.timezone.utc).timestamp()
    assert since_epoch("2026-12-01T08:00:00Z", now) == expected
    assert since_epoch("2026-12-01T08:00:00", now) == expected
    assert since_epoch("2026-12-01T09:00:00+01:00", now) == expected


def test_since_refuses_what_is_neither():
    for text in ("last tuesday", "-5d", "5 fortnights", "7"):
        with pytest.raises(ValueError):
            since_epoch(text, 0.0)


def test_a_source_names_the_process_as_ps_does_not_by_its_15_byte_comm():
    from ansible_collections.gpuops.remediation.plugins.module_utils.journal._writer import holder_source
    holder = {"pid": 1, "name": "<img src=x oner", "user": "eve", "cmdline": ["/opt/<img src=x onerror=alert(1)>", "-v"],
              "exe": "/usr/bin/python3.11"}
    source = holder_source(holder)
    assert source["command"] == "<img src=x onerror=alert(1)> (python3.11)" and source["name"] == "<img src=x oner"
    assert "command" not in holder_source({"pid": 2, "name": "worker", "cmdline": "worker --x"})  # an older line's text
