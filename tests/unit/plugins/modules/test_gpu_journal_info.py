# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_journal_info run as Ansible runs a module (its arguments as JSON on stdin), in a child process: the window read
across the journal's rotated files, and None (AWX's empty answer) taken as no answer for every option."""

from __future__ import annotations

import json
import subprocess
import sys

from ansible_collections.gpuops.remediation.plugins.module_utils.journal import _files
from ansible_collections.gpuops.remediation.plugins.module_utils.journal import _writer

MODULE = "ansible_collections.gpuops.remediation.plugins.modules.gpu_journal_info"


def run_module(child_env, **args):
    done = subprocess.run([sys.executable, "-m", MODULE], input=json.dumps({"ANSIBLE_MODULE_ARGS": args}).encode(),
                          capture_output=True, env=child_env, check=False, timeout=120)
    return json.loads(done.stdout.decode().strip().splitlines()[-1])


def signal_lines(path, count, start):
    for number in range(count):
        stamp = _files._stamp(start + 60 * number)
        source = {"name": "python3", "user": "alice", "cmdline": "python3 train.py"}
        _writer.append_line(path, {"ts": stamp, "run_id": "r%d" % number, "id": "e%d" % number, "phase": "intent",
                                   "action": "signal", "pid": number, "start_time": 1, "source": source})
        _writer.append_line(path, {"ts": stamp, "run_id": "r%d" % number, "id": "e%d" % number, "phase": "outcome",
                                   "action": "signal", "ok": True, "exited": True})


def test_none_for_every_option_is_no_answer(tmp_path, child_env):
    path = str(tmp_path / "journal.jsonl")
    signal_lines(path, 3, 1800000000.0)
    result = run_module(child_env, journal_path=path, since=None, records=None, max_records=None)
    assert not result.get("failed"), result
    assert result["sources"][0]["ended"] == 3 and result["complete"] is True and "records" not in result


def test_the_window_spans_the_rotated_files_and_says_when_it_is_partial(tmp_path, child_env, monkeypatch):
    monkeypatch.setattr(_writer, "ROTATE_BYTES", 64 * 1024)
    path = str(tmp_path / "journal.jsonl")
    start = 1800000000.0
    signal_lines(path, 50, start)
    # More dated lines after them: the journal rotates, and journal.jsonl alone no longer holds the window.
    for number in range(60):
        _writer.append_line(path, {"ts": _files._stamp(start + 3600 + number), "run_id": "pad", "id": "pad%d" % number,
                                   "phase": "intent", "action": "noop", "pad": "x" * 2000})
    assert (tmp_path / "journal.jsonl.1").exists()
    whole = run_module(child_env, journal_path=path, since="2027-01-15T00:00:00Z")
    assert not whole.get("failed"), whole
    assert whole["sources"][0]["ended"] == 50 and whole["complete"] is True
    kept = [each for each in _files.rotated_paths(path) if (tmp_path / each.rsplit("/", 1)[1]).exists()]
    assert len(kept) < _files.ROTATE_KEEP + 1
    assert whole["coverage"]["files"] == kept and whole["coverage"]["since"] == "2027-01-15T00:00:00Z"
    assert whole["coverage"]["from"] == _files._stamp(start)
    # A window older than anything kept, once the oldest rotated file is there: partial, and from when.
    for number in range(200):
        _writer.append_line(path, {"ts": _files._stamp(start + 7200 + number), "run_id": "pad", "id": "more%d" % number,
                                   "phase": "intent", "action": "noop", "pad": "x" * 2000})
    assert (tmp_path / ("journal.jsonl.%d" % _files.ROTATE_KEEP)).exists()
    partial = run_module(child_env, journal_path=path, since="2027-01-15T00:00:00Z")
    assert partial["complete"] is False and "rotated away" in partial["coverage"]["reason"]
    assert partial["coverage"]["from"] > _files._stamp(start)
    assert partial["sources"] == []
