# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark: gpu_journal_info's answer over a journal of 6.5 MiB holding 15,000 ended processes (30 days of runs).

Writes the journal in a temporary directory as the acting modules write it (Journal: a signal intent with the holder's
source, then its outcome, exited), dated over the last 30 days, in two layouts: one file (a journal written before
rotation existed, or with a larger ROTATE_BYTES) and rotated at 1 MiB (journal.jsonl.1 ... .4, the oldest dropped).
Times, best of --repeat: read_window(since=30d) + leak_sources (the module's work), and the old 4 MiB tail for
comparison; checks that the one-file answer counts every ended process and says it is complete, and that the rotated
one says it is partial, from when. Then the module itself once, as a child process reading its arguments on stdin
(as on a node). Exits 1 when a count or a coverage is wrong.

Run: .venv/bin/python bench/journal_read.py   (--kills 15000 --repeat 5)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, ".collections"))

from ansible_collections.gpuops.remediation.plugins.module_utils.journal import _files  # noqa: E402
from ansible_collections.gpuops.remediation.plugins.module_utils.journal import _writer  # noqa: E402
from ansible_collections.gpuops.remediation.plugins.module_utils.journal import _reader  # noqa: E402
from ansible_collections.gpuops.remediation.plugins.module_utils.journal import _evidence  # noqa: E402

DAY = 86400.0


def holder(number):
    """A holder as the snapshot describes one, varied like a cluster's jobs."""
    user = "user%02d" % (number % 40)
    return {"name": ("python3", "torchrun", "jupyter-kernel", "trainer")[number % 4], "user": user,
            "cmdline": ["python3", "train_%d.py" % (number % 97)],
            "used_mib_per_gpu": {str(number % 8): 4096 + number % 2048}}


def write_journal(path, kills, now, rotate_bytes):
    """kills signal intents and outcomes over the 30 days before now, oldest first, each line as Journal writes it (the
    same keys, append_line, rotation); the journal's size in bytes."""
    _writer.ROTATE_BYTES = rotate_bytes
    step = 29.5 * DAY / kills
    for number in range(kills):
        stamp = _files._stamp(now - 29.5 * DAY + number * step)
        run_id, entry_id = "run-%d" % (number // 3), "run-%d-bench-%d" % (number // 3, number)
        _writer.append_line(path, {"ts": stamp, "run_id": run_id, "id": entry_id, "phase": "intent", "action": "signal",
                                   "pid": 10000 + number, "start_time": 123456 + number, "name": "python3", "signal": "TERM",
                                   "source": _writer.holder_source(holder(number))})
        _writer.append_line(path, {"ts": stamp, "run_id": run_id, "id": entry_id, "phase": "outcome", "action": "signal",
                                   "ok": True, "exited": True})
    return sum(os.path.getsize(each) for each in _files.rotated_paths(path) if os.path.exists(each))


def ended(records, since):
    return sum(group["ended"] for group in _evidence.leak_sources(records, since=since))


def best(repeat, work):
    times, answer = [], None
    for dummy in range(repeat):
        started = time.perf_counter()
        answer = work()
        times.append(time.perf_counter() - started)
    return min(times), answer


def module_run(path):
    """(seconds, result) of the gpu_journal_info module run as Ansible runs it on a node: a Python child reading its
    arguments as JSON on stdin (without the controller's own cost, which does not depend on the journal)."""
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, ".collections"))
    args = json.dumps({"ANSIBLE_MODULE_ARGS": {"journal_path": path, "since": "30d"}})
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "ansible_collections.gpuops.remediation.plugins.modules.gpu_journal_info"],
                          input=args, capture_output=True, text=True, env=env, check=False)
    seconds = time.perf_counter() - started
    try:
        return seconds, json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return seconds, {"failed": True, "msg": done.stdout[-2000:] + done.stderr[-2000:]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=15000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    scratch = tempfile.mkdtemp(prefix="gpuops-journal-bench-")
    problems, figures = [], {}
    try:
        now = time.time()
        since = now - 30 * DAY
        for layout, rotate_bytes in (("one_file", 64 * 1024 * 1024), ("rotated_1MiB", 1024 * 1024)):
            path = os.path.join(scratch, layout, "journal.jsonl")
            size = write_journal(path, args.kills, now, rotate_bytes)
            seconds, (records, coverage) = best(args.repeat, lambda: _reader.read_window(path, since))
            count_seconds, count = best(args.repeat, lambda: ended(_reader.read_window(path, since)[0], since))
            tail_seconds, tail = best(args.repeat, lambda: ended(_reader.read_journal(path, _reader.RECENT_BYTES), since))
            figures[layout] = {"bytes": size, "files": len(coverage["files"]), "ended": count, "complete": coverage["complete"],
                               "from": coverage["from"], "read_seconds": round(seconds, 3), "answer_seconds": round(count_seconds, 3),
                               "old_4MiB_tail_ended": tail, "old_4MiB_tail_seconds": round(tail_seconds, 3)}
            print("%-13s %5.2f MiB in %d file(s): %d of %d ended processes, complete=%s from %s; read %.3f s, read+count %.3f s "
                  "(the old 4 MiB tail: %d in %.3f s)" % (layout, size / 1048576.0, len(coverage["files"]), count, args.kills,
                                                          coverage["complete"], coverage["from"], seconds, count_seconds, tail, tail_seconds))
            if layout == "one_file" and (count != args.kills or not coverage["complete"]):
                problems.append("one file: %d of %d, complete=%s" % (count, args.kills, coverage["complete"]))
            if layout != "one_file" and (coverage["complete"] or count >= args.kills or not coverage["from"]):
                problems.append("rotated: %d, complete=%s from %s" % (count, coverage["complete"], coverage["from"]))
        seconds, result = module_run(os.path.join(scratch, "one_file", "journal.jsonl"))
        module_ended = sum(group["ended"] for group in result.get("sources", []))
        figures["module_seconds"] = round(seconds, 2)
        figures["module_ended"] = module_ended
        print("the gpu_journal_info module (since=30d, one file): %d ended, complete=%s, %.2f s wall" % (
            module_ended, result.get("complete"), seconds))
        if module_ended != args.kills or result.get("complete") is not True:
            problems.append("module: %d, complete=%s" % (module_ended, result.get("complete")))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    for problem in problems:
        print("WRONG: %s" % problem)
    print(json.dumps({"bench": "journal_read", "kills": args.kills, "figures": figures, "ok": not problems}))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
