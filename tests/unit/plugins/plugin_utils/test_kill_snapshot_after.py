# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_kill's node after the run (its snapshot_after option and return): through ansible-playbook on a simulated node,
the holders real processes holding its device files.

- snapshot_after=false (what the ladder walk passes at the reset and instance rungs, where the next module inspects the
  node under the lock itself) leaves the inspection after a successful run out; the memory after still comes from the
  driver, once it lists none of the ended processes.
- A run that fails returns the node after it all the same: the walk reads it to decide what comes next.
- With gpus set, the one snapshot after the run is of the selection: the memory after and snapshot_after agree.
- A driver that stops answering while the run waits for it is no driver that lists none of the ended processes: the
  memory after is unknown, never the memory before less what the ended processes held.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from ansible_collections.gpuops.remediation.plugins.module_utils.probes._process import read_process
from ansible_collections.gpuops.remediation.plugins.module_utils.simulation import _sim_build as sim
from ansible_collections.gpuops.remediation.tests.unit.helpers import bounded
from ansible_collections.gpuops.remediation.tests.unit.helpers.mig_play import play

# Holds the files named, says so, then waits on stdin; with "block", SIGTERM stays pending (only KILL ends it).
HOLD = ("import signal, sys\n"
        "if sys.argv[1] == 'block':\n    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})\n"
        "files = [open(path) for path in sys.argv[2:]]\nsys.stdout.write('held\\n')\nsys.stdout.flush()\nsys.stdin.read()\n")
# Holds GPU 1; on SIGTERM unloads the simulated node's driver (NVML and nvidia-smi answer "Driver Not Loaded"), then exits.
UNLOADS_ON_TERM = ("import os, signal, sys\n"
                   "from ansible_collections.gpuops.remediation.plugins.module_utils.simulation import _sim_state\n"
                   "def unload(state):\n    state['modules']['nvidia']['loaded'] = False\n"
                   "def on_term(signum, frame):\n    _sim_state.update_state(sys.argv[1], unload)\n    os._exit(0)\n"
                   "signal.signal(signal.SIGTERM, on_term)\n"
                   "held = open(os.path.join(sys.argv[1], 'dev', 'nvidia1'))\nsys.stdout.write('held\\n')\nsys.stdout.flush()\nsys.stdin.read()\n")
KILL = "gpuops.remediation.gpu_kill: {%s, end_running_jobs: true}\n      ignore_errors: true"


def _identity(proc):
    return "{pid: %d, start_time: %d}" % (proc.pid, read_process(proc.pid)["start_time"])


def _holder(node_root, mode):
    proc = bounded.start([sys.executable, "-c", HOLD, mode, os.path.join(node_root, "dev", "nvidia1")],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert bounded.line(proc, "a %s holder of GPU 1" % mode) == "held"
    return proc


def test_the_node_after_is_inspected_only_where_it_is_read(tmp_path, node_root, collections_root):
    sim.create_node(node_root, {"gpus": [{}, {}]})
    plain, blocker, last = (_holder(node_root, mode) for mode in ("plain", "block", "plain"))
    try:
        results = play(tmp_path, collections_root, node_root, [
            KILL % ("holders: [%s], snapshot_after: false" % _identity(plain)),
            KILL % ("holders: [%s], signals: [TERM], grace: 1, snapshot_after: false" % _identity(blocker)),
            KILL % "gpus: [\"1\"]",
        ], ["walk", "failed", "scoped"])

        walk = results["walk"]
        assert walk.get("failed") is not True and walk["changed"] is True, walk.get("msg")
        assert [(s["pid"], s["exited"]) for s in walk["signalled"]] == [(plain.pid, True)]
        assert "snapshot_after" not in walk
        # The memory after, from the driver's answer the run waited on: known for every GPU, never a guess.
        assert sorted(g["index"] for g in walk["gpus"]) == [0, 1]
        assert all(g["memory_used_mib_after"] is not None for g in walk["gpus"]), walk["gpus"]

        failed = results["failed"]
        assert failed["failed"] is True and "still runs after TERM" in failed["msg"], failed.get("msg")
        assert blocker.pid in [h["pid"] for h in failed["snapshot_after"]["holders"]]
        assert failed["snapshot_after"]["scope"]["gpus"] is None

        scoped = results["scoped"]
        assert scoped.get("failed") is not True, scoped.get("msg")
        assert sorted(s["pid"] for s in scoped["signalled"]) == sorted([blocker.pid, last.pid])
        after = scoped["snapshot_after"]
        assert after["scope"]["gpus"] == ["1"] and [g["index"] for g in after["gpus"]] == [1]
        assert not [h for h in after["holders"] if h["pid"] in (blocker.pid, last.pid)]
        assert [g["memory_used_mib_after"] for g in scoped["gpus"]] == [after["gpus"][0]["memory_used_mib"]]
    finally:
        for proc in (plain, blocker, last):
            proc.stdin.close()
            bounded.wait_quietly(proc)
    # Each ended by a signal of the runs (a holder the runs left alone exits 0 when its stdin closes).
    assert [proc.returncode < 0 for proc in (plain, blocker, last)] == [True, True, True]


def test_the_kill_asks_the_init_system_what_its_snapshot_asked_once(tmp_path, node_root, collections_root):
    # The GPU units' members are asked once, by the snapshot under the lock; the kill's protect rules read the same
    # answers (a second `systemctl show` a moment later, under the same lock, could say nothing new).
    sim.create_node(node_root, {"gpus": [{}, {}]})
    holder = _holder(node_root, "plain")
    try:
        results = play(tmp_path, collections_root, node_root, [KILL % ("holders: [%s], snapshot_after: false" % _identity(holder))], ["walk"])
        assert [s["pid"] for s in results["walk"]["signalled"]] == [holder.pid], results["walk"].get("msg")
    finally:
        holder.stdin.close()
        bounded.wait_quietly(holder)
    assert holder.returncode < 0
    with open(os.path.join(node_root, "commands.jsonl"), encoding="utf-8") as handle:
        asked = [json.loads(line)["argv"] for line in handle]
    members = [argv for argv in asked if argv[:1] == ["show"] and "nvidia-persistenced.service" in argv]
    assert len(members) == 1, asked


def test_a_driver_that_stops_answering_gives_no_memory_after(tmp_path, node_root, collections_root, child_env):
    sim.create_node(node_root, {"gpus": [{}, {}]})
    holder = bounded.start([sys.executable, "-c", UNLOADS_ON_TERM, node_root], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           text=True, start_new_session=True, env=child_env)
    try:
        assert bounded.line(holder, "a holder that unloads the driver on SIGTERM") == "held"
        results = play(tmp_path, collections_root, node_root, [
            KILL % ("holders: [%s], signals: [TERM], wait_timeout: 2, snapshot_after: false" % _identity(holder))], ["walk"])
    finally:
        holder.stdin.close()
        bounded.wait_quietly(holder)
    walk = results["walk"]
    assert walk.get("failed") is not True and [(s["pid"], s["exited"]) for s in walk["signalled"]] == [(holder.pid, True)], walk.get("msg")
    assert holder.returncode == 0  # its TERM handler ran: the driver was unloaded before it exited
    # Before, the GPU's memory as the snapshot under the lock read it; after, nothing answered: unknown.
    assert [g["memory_used_mib_before"] is not None for g in walk["gpus"]] == [True, True], walk["gpus"]
    assert [g["memory_used_mib_after"] for g in walk["gpus"]] == [None, None], walk["gpus"]
    assert [g["freed_mib"] for g in walk["gpus"]] == [None, None], walk["gpus"]
