# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""_journal with real files, real child processes and SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import tempfile
import textwrap
import time

import pytest

from ansible_collections.gpuops.remediation.plugins.module_utils.journal._writer import Journal
from ansible_collections.gpuops.remediation.plugins.module_utils.journal._reader import load_journal, read_journal
from ansible_collections.gpuops.remediation.plugins.module_utils.journal._evidence import completed_resets, left_stopped, unfinished

from ansible_collections.gpuops.remediation.tests.unit.helpers import bounded


@pytest.fixture
def run_child(child_env):
    def _run_child(code, *args, **kwargs):
        return bounded.start([sys.executable, "-c", textwrap.dedent(code)] + [str(arg) for arg in args],
                             env=child_env, **kwargs)
    return _run_child


def test_intent_and_outcome_lines(tmp_path):
    path = str(tmp_path / "gpuops" / "journal.jsonl")
    journal = Journal(path, run_id="r1")
    entry_id = journal.intent("signal", pid=42, signal="TERM")
    journal.outcome(entry_id, True, exited=True)
    records = read_journal(path)
    assert records == journal.entries()
    intent, outcome = records
    assert (intent["run_id"], intent["id"], intent["phase"], intent["action"], intent["pid"]) == (
        "r1", entry_id, "intent", "signal", 42)
    assert (outcome["id"], outcome["phase"], outcome["action"], outcome["ok"], outcome["exited"]) == (
        entry_id, "outcome", "signal", True, True)
    assert intent["ts"].endswith("Z") and intent["ts"][:4].isdigit()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640 & ~current_umask()
    assert stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) == 0o750
    assert unfinished(records) == []


def current_umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_runs_append_and_ids_differ(tmp_path):
    path = str(tmp_path / "journal.jsonl")
    first, second = Journal(path), Journal(path)
    ids = [first.intent("reset", gpu="00000000:18:00.0"), second.intent("reset", gpu="00000000:3B:00.0")]
    assert len(set(ids)) == 2 and first.run_id != second.run_id
    assert [r["id"] for r in read_journal(path)] == ids
    assert len(first.entries()) == 1 and len(second.entries()) == 1


def test_sigkill_between_intent_and_outcome_leaves_the_intent(tmp_path, run_child):
    path = str(tmp_path / "journal.jsonl")
    child = run_child("""
        import sys, time
        from ansible_collections.gpuops.remediation.plugins.module_utils.journal._writer import Journal
        journal = Journal(sys.argv[1], run_id="killed")
        journal.intent("signal", pid=1234, signal="KILL")
        print("intent written", flush=True)
        time.sleep(60)
        journal.outcome("never", True)
    """, path, stdout=subprocess.PIPE, text=True)
    assert bounded.line(child, "child") == "intent written"
    os.kill(child.pid, signal.SIGKILL)
    assert bounded.wait(child, "child") == -signal.SIGKILL
    records = read_journal(path)
    assert [(r["run_id"], r["phase"], r["pid"]) for r in records] == [("killed", "intent", 1234)]
    assert unfinished(records) == records


def test_torn_last_line_is_skipped(tmp_path):
    path = str(tmp_path / "journal.jsonl")
    journal = Journal(path)
    journal.intent("reload", modules=["nvidia"])
    whole = open(path, "rb").read()
    with open(path, "ab") as handle:
        handle.write(whole[: len(whole) // 2])  # what a crash in the middle of a write leaves
    assert read_journal(path) == journal.entries()
    # A later run appends after the torn piece: its line is glued to the garbage, the earlier ones survive.
    later = Journal(path)
    later.intent("reset")
    later.intent("reset")
    assert [r["run_id"] for r in read_journal(path)] == [journal.run_id, later.run_id]


def test_missing_journal_reads_empty(tmp_path):
    assert read_journal(str(tmp_path / "none.jsonl")) == []


def test_concurrent_writers_produce_whole_lines(tmp_path, run_child):
    path = str(tmp_path / "journal.jsonl")
    go = str(tmp_path / "go")
    writers, lines_each = 6, 150
    children = [run_child("""
        import os, sys, time
        from ansible_collections.gpuops.remediation.plugins.module_utils.journal._writer import Journal
        path, go, writer, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
        journal = Journal(path, run_id="writer-" + writer)
        while not os.path.exists(go):
            time.sleep(0.001)
        for number in range(count):
            journal.intent("signal", number=number, padding=writer * 3000)
    """, path, go, writer, lines_each) for writer in range(writers)]
    open(go, "w").close()
    assert [bounded.wait(child, "child") for child in children] == [0] * writers

    with open(path, "rb") as handle:
        raw_lines = handle.read().split(b"\n")
    assert raw_lines[-1] == b""
    records = [json.loads(line) for line in raw_lines[:-1]]  # every line parses: none was interleaved
    assert len(records) == writers * lines_each
    for writer in range(writers):
        mine = [r for r in records if r["run_id"] == "writer-%d" % writer]
        assert [r["number"] for r in mine] == list(range(lines_each))
        assert all(r["padding"] == str(writer) * 3000 for r in mine)


def write_reset_and_reload(path):
    """What gpu_reset and nvidia_driver_reload journal (their own calls), one success and one failure each."""
    journal = Journal(path, run_id="r9")
    ok = journal.intent("gpu_reset", gpus=[0, 1], argv=["/usr/bin/nvidia-smi", "--gpu-reset", "-i", "00000000:18:00.0,00000000:3B:00.0"])
    journal.outcome(ok, True, rc=0, stdout="GPU 00000000:18:00.0 was successfully reset.", stderr="")
    failed = journal.intent("gpu_reset", gpus=[2], argv=["/usr/bin/nvidia-smi", "--gpu-reset", "-i", "00000000:86:00.0"])
    journal.outcome(failed, False, rc=255, stdout="", stderr="in use")
    journal.outcome(journal.intent("module_load", module="nvidia_uvm", argv=["modprobe", "nvidia_uvm"]), True, rc=0, stderr="")
    journal.outcome(journal.intent("module_load", module="nvidia", argv=["modprobe", "nvidia"]), True, rc=0, stderr="")
    journal.intent("gpu_reset", gpus=[3], argv=["nvidia-smi", "--gpu-reset", "-i", "00000000:AF:00.0"])  # killed before its outcome
    return journal


def test_completed_resets_and_reloads(tmp_path):
    path = str(tmp_path / "journal.jsonl")
    journal = write_reset_and_reload(path)
    done = completed_resets(read_journal(path))
    assert [(d["action"], d["gpus"], d["bus_ids"]) for d in done] == [
        ("gpu_reset", [0, 1], ["00000000:18:00.0", "00000000:3B:00.0"]), ("nvidia_driver_reload", None, [])]
    outcomes = [e for e in journal.entries() if e["phase"] == "outcome"]
    assert [d["time"] for d in done] == [outcomes[0]["ts"], outcomes[3]["ts"]]
    assert all(abs(d["epoch"] - time.time()) < 60 for d in done)


def test_an_interrupted_run_leaves_a_journal_that_still_reads(tmp_path):
    path = str(tmp_path / "journal.jsonl")
    write_reset_and_reload(path)
    with open(path, "ab") as handle:
        handle.write(b'{"ts": "2026-12-01T08:44:04.000001Z", "run_id": "r10", "id": "r10-1", "phase": "outc')
    records, error = load_journal(path)
    assert error is None and len(completed_resets(records)) == 2
    with open(path, "wb") as handle:
        handle.write(b"")
    assert load_journal(path) == ([], None)
    assert load_journal(str(tmp_path / "missing" / "journal.jsonl")) == ([], None)
    records, error = load_journal(str(tmp_path))  # a directory where the file should be
    assert records == [] and str(tmp_path) in error
    with open(path, "wb") as handle:
        handle.write(b'\xff\xfe garbage\n[1, 2]\n{"phase": "outcome", "ok": true, "id": "x", "ts": "not a time"}\n')
    assert completed_resets(load_journal(path)[0]) == []


def test_the_tail_of_a_long_journal_keeps_its_last_whole_records(tmp_path):
    path = str(tmp_path / "journal.jsonl")
    journal = Journal(path, run_id="long")
    for number in range(2000):
        journal.intent("signal", pid=number)
    tail = read_journal(path, tail_bytes=4096)
    everything = read_journal(path)
    assert len(everything) == 2000
    assert 0 < len(tail) < 100
    assert tail == everything[-len(tail):]
    assert read_journal(path, tail_bytes=10 ** 9) == everything


def _reset_lines(run_id, ok, ts="2026-12-01T08:44:04.000001Z"):
    """The two lines a gpu_reset run writes (intent, outcome), as a real Journal writes them, dated ts."""
    with tempfile.TemporaryDirectory() as scratch:
        journal = Journal(os.path.join(scratch, "journal.jsonl"), run_id=run_id)
        entry = journal.intent("gpu_reset", gpus=[0], argv=["nvidia-smi", "--gpu-reset", "-i", "00000000:18:00.0"])
        journal.outcome(entry, ok, rc=0 if ok else 255)
        lines = read_journal(journal.path)
    return [dict(line, ts=ts) for line in lines]


def test_two_runs_with_one_run_id_never_share_an_entry_id():
    first, second = _reset_lines("manual", False), _reset_lines("manual", True)
    assert first[0]["id"] != second[0]["id"]
    # The failed reset of the first run is not answered by anything of the second's.
    interleaved = [first[0], second[0], first[1], second[1]]
    assert [r["action"] for r in completed_resets(interleaved)] == ["gpu_reset"]
    assert len(completed_resets(first)) == 0


def test_an_outcome_answers_only_an_intent_of_its_own_action():
    lines = _reset_lines("r1", True)
    lines[1] = dict(lines[1], action="signal")
    assert completed_resets(lines) == []


def test_a_reset_dated_in_the_future_answers_nothing():
    assert completed_resets(_reset_lines("r1", True, ts="2999-06-01T00:00:01Z")) == []
    assert len(completed_resets(_reset_lines("r1", True))) == 1


def test_malformed_lines_are_skipped_not_fatal(tmp_path):
    path = tmp_path / "journal.jsonl"
    good = json.dumps(_reset_lines("r1", True)[0])
    path.write_text("\n".join([
        '{"id": ["x"], "phase": "intent", "action": "gpu_reset", "ts": "2026-12-01T08:44:04Z"}',
        "[" * 200000,
        '{"id": 7, "phase": "outcome", "action": "gpu_reset", "ts": "2026-12-01T08:44:04Z", "ok": true}',
        '"just a string"',
        good,
    ]) + "\n")
    records = read_journal(str(path))
    assert records == [json.loads(good)]
    assert completed_resets(records) == []


def test_units_a_dead_run_stopped_and_never_started_again(tmp_path):
    path = str(tmp_path / "journal.jsonl")
    dead, done, mine = Journal(path, run_id="dead"), Journal(path, run_id="done"), Journal(path, run_id="mine")
    a, b, c, d, e = ("display-manager.service", "nvidia-dcgm.service", "nvidia-persistenced.service", "dcgm-exporter.service",
                     "nvidia-fabricmanager.service")
    for journal, units, start in ((done, [a], True), (dead, [b, c], False), (mine, [d], False)):
        for unit in units:
            journal.outcome(journal.intent("systemctl_stop", unit=unit), True, unit=unit)
        for unit in units if start else []:
            journal.outcome(journal.intent("systemctl_start", unit=unit), True, unit=unit)
    failed_stop = dead.intent("systemctl_stop", unit=e)
    dead.outcome(failed_stop, False, unit=e)
    # A line naming a unit no run of the collection stops (a forged line, whoever wrote it) names nothing to start.
    dead.outcome(dead.intent("systemctl_stop", unit="ssh.service"), True, unit="ssh.service")
    assert left_stopped(read_journal(path), run_id="mine") == [b, c]


# --- where a journal cannot be written (journal_path) -----------------------------------------------------

def test_path_problem_names_why_a_journal_cannot_be_made(tmp_path):
    from ansible_collections.gpuops.remediation.plugins.module_utils.journal._files import path_failure, path_problem  # pylint: disable=import-outside-toplevel
    fifo = tmp_path / "fifo"
    os.mkfifo(str(fifo))
    regular = tmp_path / "plain"
    regular.write_text("x")
    assert path_problem(str(tmp_path / "new" / "deeper" / "journal.jsonl")) is None
    assert path_problem(str(regular)) is None
    assert path_problem(str(regular / "journal.jsonl")) == "%s is not a directory" % regular
    assert path_problem(str(tmp_path)) == "it is a directory"
    assert path_problem(str(fifo)) == "it is not a regular file (a device, FIFO or socket)"
    assert path_problem("/dev/null") == "it is not a regular file (a device, FIFO or socket)"
    assert path_problem("/proc/gpuops/journal.jsonl") == "/proc is on a proc filesystem, where no journal can be created"
    assert path_problem("/sys/gpuops/journal.jsonl") == "/sys is on a sysfs filesystem, where no journal can be created"
    assert path_problem(str(tmp_path / ("x" * 300) / "journal.jsonl")) == "the path is too long"
    assert path_failure("/proc/j.jsonl", True) == (
        "journal_path: '/proc/j.jsonl' cannot be written: /proc is on a proc filesystem, where no journal can be created")
    assert path_failure(str(regular), False) is None


def test_a_line_that_cannot_be_written_raises_naming_journal_path(tmp_path):
    from ansible_collections.gpuops.remediation.plugins.module_utils.journal._writer import JournalUnwritable  # pylint: disable=import-outside-toplevel
    path = tmp_path / "journal.jsonl"
    path.mkdir()
    with pytest.raises(JournalUnwritable, match="journal_path: '%s' cannot be written" % path):
        Journal(str(path)).intent("signal", pid=1)


# --- the evidence that a process is unkillable -------------------------------------------------------------

def test_outlived_kill_reads_only_kill_outcomes_that_say_so(tmp_path):
    from ansible_collections.gpuops.remediation.plugins.module_utils.journal._evidence import outlived_kill  # pylint: disable=import-outside-toplevel
    journal = Journal(str(tmp_path / "journal.jsonl"), run_id="r")
    survived = journal.intent("signal", pid=4242, start_time=777, signal="KILL")
    journal.outcome(survived, True, pid=4242, signal="KILL", exited=False, outlived_kill=True, state="D")
    ended = journal.intent("signal", pid=4243, start_time=778, signal="KILL")
    journal.outcome(ended, True, pid=4243, signal="KILL", exited=True)
    term = journal.intent("signal", pid=4244, start_time=779, signal="TERM")
    journal.outcome(term, True, pid=4244, signal="TERM", exited=False, outlived_kill=True)
    records = read_journal(journal.path)
    assert list(outlived_kill(records)) == [(4242, 777)]
    assert outlived_kill(records)[(4242, 777)] == records[1]["ts"]
    assert outlived_kill([{"phase": "outcome", "id": "x", "signal": "KILL", "outlived_kill": True}]) == {}


# ---------------------------------------------------------------- rotation, and reading across it (issue 19, rule 10)

def _signal_lines(journal, count, **details):
    for number in range(count):
        entry = journal.intent("signal", pid=number, **details)
        journal.outcome(entry, True, exited=True)


def test_the_journal_rotates_before_it_passes_its_size_and_keeps_its_last_files(tmp_path, monkeypatch):
    from ansible_collections.gpuops.remediation.plugins.module_utils.journal import _files
    from ansible_collections.gpuops.remediation.plugins.module_utils.journal import _writer
    monkeypatch.setattr(_writer, "ROTATE_BYTES", 4096)
    path = str(tmp_path / "journal.jsonl")
    journal = Journal(path, run_id="rot")
    _signal_lines(journal, 400)
    files = sorted(os.listdir(str(tmp_path)))
    assert files == [".journal.jsonl.lock", "journal.jsonl"] + ["journal.jsonl.%d" % number for number in range(1, _files.ROTATE_KEEP + 1)]
    files.remove(".journal.jsonl.lock")
    sizes = [os.path.getsize(os.path.join(str(tmp_path), name)) for name in files]
    assert max(sizes) <= 4096 and all(size > 0 for size in sizes)
    # Every file holds whole lines, newest in journal.jsonl, oldest in the last one kept; nothing in between is lost.
    records = read_journal(path)
    pids = [record["pid"] for record in records if record["phase"] == "intent"]
    assert pids == list(range(pids[0], 400))
    assert [record["id"] for record in records] == [entry["id"] for entry in journal.entries()][-len(records):]
    for name in files:
        with open(os.path.join(str(tmp_path), name), "rb") as handle:
            assert handle.read().endswith(b"\n")


def test_the_recent_records_span_the_rotated_files(tmp_path, monkeypatch):
    """An intent written just before a rotation and its run killed: the next run still finds it unfinished."""
    from ansible_collections.gpuops.remediation.plugins.module_utils.journal import _writer
    from ansible_collections.gpuops.remediation.plugins.module_utils.journal import _reader
    monkeypatch.setattr(_writer, "ROTATE_BYTES", 2048)
    path = str(tmp_path / "journal.jsonl")
    journal = Journal(path, run_id="killed")
    _signal_lines(journal, 8)
    journal.intent("gpu_reset", gpus=[0])
    Journal(path, run_id="later").intent("signal", pid=1)  # rotates: the open intent is now in journal.jsonl.1
    assert os.path.exists(path + ".1")
    records, error = _reader.recent_records(path)
    assert error is None and [record["action"] for record in unfinished(records)] == ["gpu_reset", "signal"]


def test_a_window_is_read_back_as_far_as_it_reaches_and_says_when_it_is_partial(tmp_path, monkeypatch):
    from ansible_collections.gpuops.remediation.plugins.module_utils.journal import _files
    from ansible_collections.gpuops.remediation.plugins.module_utils.journal import _writer
    from ansible_collections.gpuops.remediation.plugins.module_utils.journal import _reader
    monkeypatch.setattr(_writer, "ROTATE_BYTES", 8192)
    path = str(tmp_path / "journal.jsonl")
    # Dated lines, one a minute, as real runs would have written them.
    start = 1800000000.0
    lines = []
    for number in range(600):
        stamp = _files._stamp(start + 60 * number)
        lines.append({"ts": stamp, "run_id": "r%d" % number, "id": "e%d" % number, "phase": "intent", "action": "signal", "pid": number})
    for line in lines:
        _writer.append_line(path, line)
    assert os.path.exists(path + ".%d" % _files.ROTATE_KEEP)
    kept = read_journal(path)
    first_kept = kept[0]["pid"]
    assert first_kept > 0  # the oldest lines were rotated away
    # A window inside what is kept: whole, read from the newest file back only as far as needed.
    since = start + 60 * 590
    records, coverage = _reader.read_window(path, since)
    assert [record["pid"] for record in records] == list(range(590, 600))
    assert coverage["complete"] and coverage["reason"] is None and coverage["files"] == [path]
    # A window past what is kept: the answer is what is kept, and it says it is partial, from when.
    records, coverage = _reader.read_window(path, start)
    assert [record["pid"] for record in records] == list(range(first_kept, 600))
    assert not coverage["complete"] and "rotated away" in coverage["reason"]
    assert coverage["from"] == kept[0]["ts"]
    # The byte cap: the newest bytes only, said so.
    records, coverage = _reader.read_window(path, None, max_bytes=3000)
    assert not coverage["complete"] and "3000 bytes" in coverage["reason"] and 0 < len(records) < len(kept)
    assert records == kept[-len(records):]


def test_an_unrotated_journal_is_read_whole_past_the_old_four_mib_tail(tmp_path):
    """A journal of 6.5 MiB written before rotation existed: the window is answered whole, not from its last 4 MiB."""
    from ansible_collections.gpuops.remediation.plugins.module_utils.journal import _reader
    path = str(tmp_path / "journal.jsonl")
    line = {"ts": "2026-11-20T00:00:00.000000Z", "run_id": "old", "id": "x", "phase": "intent", "action": "signal",
            "pad": "p" * 400}
    with open(path, "w") as handle:
        for number in range(16000):
            handle.write(json.dumps(dict(line, id="e%d" % number)) + "\n")
    assert os.path.getsize(path) > 6 * 1024 * 1024
    records, coverage = _reader.read_window(path, None)
    assert len(records) == 16000 and coverage["complete"] and coverage["from"] == "2026-11-20T00:00:00.000000Z"


def _has_open(pid, path):
    """Whether process pid has path open (its /proc/<pid>/fd): the rotating child then polls for its flock, which
    the reader holds (_lock.flock_within never blocks in the kernel, so /proc/locks lists no waiter)."""
    try:
        names = os.listdir("/proc/%d/fd" % pid)
    except FileNotFoundError:
        return False
    for name in names:
        try:
            if os.readlink("/proc/%d/fd/%s" % (pid, name)) == path:
                return True
        except OSError:
            continue
    return False


@pytest.mark.parametrize("reader", ["read_journal", "read_window"])
def test_a_rotation_by_another_process_between_two_file_reads_waits_for_the_reader(tmp_path, monkeypatch, child_env, reader):
    """The reader has read journal.jsonl and not yet journal.jsonl.1 when a writer in another process rotates: the
    rotation waits on the journal's lock file until the reader is done, so the reader gets each line once and none lost."""
    from ansible_collections.gpuops.remediation.plugins.module_utils.journal import _files
    from ansible_collections.gpuops.remediation.plugins.module_utils.journal import _writer
    from ansible_collections.gpuops.remediation.plugins.module_utils.journal import _reader
    path = str(tmp_path / "journal.jsonl")
    _writer.append_line(path, {"ts": _files._stamp(time.time()), "id": "old", "phase": "intent", "action": "signal"})
    assert _writer.rotate_if_full(path, 1, limit=1)
    _writer.append_line(path, {"ts": _files._stamp(time.time()), "id": "new", "phase": "intent", "action": "signal"})
    rotator = []
    read_tail = _reader._read_tail

    def read_then_let_a_writer_rotate(each, budget):
        data = read_tail(each, budget)
        if each == path and not rotator:
            rotator.append(bounded.start(
                [sys.executable, "-c", "import sys; from ansible_collections.gpuops.remediation.plugins.module_utils.journal import _writer;"
                 "sys.exit(0 if _writer.rotate_if_full(sys.argv[1], 1, limit=1) else 3)", path], env=child_env))
            # Until the rotation is either done or waiting on the lock: the kernel says which.
            deadline = time.monotonic() + 60
            while rotator[0].poll() is None and not _has_open(rotator[0].pid, _files.lock_path(path)):
                assert time.monotonic() < deadline, "the rotating child neither finished nor waited on the lock"
                time.sleep(0.01)
        return data
    monkeypatch.setattr(_reader, "_read_tail", read_then_let_a_writer_rotate)
    if reader == "read_journal":
        records = _reader.read_journal(path)
    else:
        records = _reader.read_window(path)[0]
    assert rotator[0].wait(timeout=60) == 0  # it rotated once the reader was done
    assert [record["id"] for record in records] == ["old", "new"]
    assert [record["id"] for record in read_journal(path)] == ["old", "new"]
    assert not os.path.exists(path)  # the rotation happened: journal.jsonl is now .1
