# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Start a run, wait until the node journal shows the intent of ACTION, then SIGKILL the run's whole process tree, as a
run killed at that moment (ansible-core's workers run in sessions of their own: killing ansible-playbook alone leaves a
worker that finishes the module in flight).

    kill_run_at.py JOURNAL ACTION TIMEOUT ARGV...

Exits 0 once the tree is killed; 1 when the run ended, or TIMEOUT seconds passed, before the intent (its output printed).
"""

import json
import os
import signal
import subprocess
import sys
import time


def intent_seen(journal, action):
    try:
        with open(journal, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except FileNotFoundError:
        return False
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if record.get("action") == action and record.get("phase") == "intent":
            return True
    return False


def children():
    """{ppid: [pid]} of every process now."""
    tree = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name, encoding="utf-8", errors="replace") as handle:
                stat = handle.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        tree.setdefault(ppid, []).append(int(name))
    return tree


def descendants(pid):
    tree, found, todo = children(), [], [pid]
    while todo:
        for child in tree.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def main(journal, action, timeout, argv):
    run = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + float(timeout)
    while not intent_seen(journal, action):
        if run.poll() is not None or time.monotonic() > deadline:
            run.kill()
            sys.stdout.write(run.communicate(timeout=60)[0].decode("utf-8", "replace")[-4000:])
            print("kill_run_at: no %s intent in %s before the run ended or %s s passed" % (action, journal, timeout))
            return 1
        time.sleep(0.1)
    # Stop the tree first so that nothing forks while it is read, then kill every process of it.
    tree = [run.pid] + descendants(run.pid)
    for pid in tree:
        try:
            os.kill(pid, signal.SIGSTOP)
        except ProcessLookupError:
            pass
    tree = [run.pid] + descendants(run.pid)
    for pid in tree:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    run.wait(timeout=60)
    print("kill_run_at: killed %d processes once %s began" % (len(tree), action))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]))
