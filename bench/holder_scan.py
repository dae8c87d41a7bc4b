# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark: the /proc holder scan against `lsof` and `fuser -v` on the same device files.

Builds a temporary dev dir (nvidia0..nvidia7, nvidiactl, nvidia-uvm as regular files: lsof and fuser take
any file), fills the process table to at least --processes entries with cheap forked sleepers (some hold a
device file open, some mapped with the fd closed, one holds it only through a thread whose leader
exited, one through a second node of the device (a hard link elsewhere), one in a thread with a file table of
its own, and one names a device with an O_PATH descriptor only, which is no holder), then times:
  scan   scan_holders() in this process (its default workers), and with workers=1 (no fork); the fds-only
         tier (memory_maps=False: what a healthy node's snapshot reads) with workers=1
  lsof   the whole `lsof <files>` process
  fuser  the whole `fuser -v <files>` process
each warmed up once, then best of --repeat rounds that run all four in turn (load from elsewhere on the
machine then hits them alike), and the median of the rounds' own ratios (the two runs of one round met the same load).
It checks that the scan's holder pids are a superset of what each tool reports, prints the ratios and one
JSON line (with the median CPU seconds of each contender and their kernel part), and exits 1 when the scan misses a
holder a tool sees (2 when the setup itself fails).

Run: make bench   (or .venv/bin/python bench/holder_scan.py --processes 2000)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, ".collections"))

from ansible_collections.gpuops.remediation.plugins.module_utils._node import NodeLayout  # noqa: E402
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._procscan import (  # noqa: E402
    _worker_count, scan_holders, scan_processes)

DEVICE_NAMES = ["nvidia%d" % i for i in range(8)] + ["nvidiactl", "nvidia-uvm"]
INSTALL_HINT = "apt-get install -y lsof psmisc"


def parse_lsof_pids(text):
    """PIDs in `lsof` default output (COMMAND PID ... NAME; a command's spaces are printed as \\x20)."""
    pids = set()
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) > 1 and fields[1].isdigit():
            pids.add(int(fields[1]))
    return pids


def parse_fuser_pids(stdout):
    """PIDs `fuser` prints on stdout (the -v table goes to stderr; access letters never reach stdout)."""
    return {int(token.rstrip("cefFrm")) for token in stdout.split() if token.rstrip("cefFrm").isdigit()}


# ---------------------------------------------------------------------------------------------------------
# The process table: one spawner, forked sleepers


# Runs as `python -S -c SPAWNER <count> <dev_dir> <ready_fd> <hold_fd> <preload> <device names>`. Without
# site and with only os and sys loaded, each forked sleeper maps about 40 regions, like a small daemon.
# With preload=1 the spawner first imports what a typical Python service loads (json, ctypes, subprocess,
# ...): about 135 regions each. Sleepers block reading hold_fd, a pipe whose only writer is the benchmark:
# when the benchmark ends, however it ends, they read EOF and exit, and the spawner reaps them.
SPAWNER = r"""
import os, sys

def sleeper(role, device, hold_fd):
    try:
        if role == "open":
            os.open(device, os.O_RDWR)
        elif role == "second_node":
            os.open(os.path.join(os.path.dirname(os.path.dirname(device)), "alt", os.path.basename(device)), os.O_RDWR)
        elif role == "o_path":
            os.open(device, os.O_PATH)
        elif role == "own_table":
            import ctypes, threading
            opened = threading.Event()
            def hold():
                if ctypes.CDLL(None).unshare(0x400) == 0:  # CLONE_FILES: a file table of its own
                    os.open(device, os.O_RDWR)
                opened.set()
                os.read(hold_fd, 1)
            threading.Thread(target=hold).start()
            opened.wait()
        elif role == "mmap":
            import ctypes  # not Python's mmap module: it keeps a dup of the fd
            libc = ctypes.CDLL(None)
            libc.mmap.restype = ctypes.c_void_p
            libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
            fd = os.open(device, os.O_RDWR)
            libc.mmap(None, 4096, 1, 1, fd, 0)  # PROT_READ, MAP_SHARED
            os.close(fd)
        elif role == "leader_exited":
            import ctypes, threading
            os.open(device, os.O_RDWR)
            threading.Thread(target=os.read, args=(hold_fd, 1)).start()
            ctypes.CDLL(None).pthread_exit(None)  # the main thread leaves; the other keeps the fds alive
        os.read(hold_fd, 1)
    finally:
        os._exit(0)

count, dev_dir, ready_fd, hold_fd = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
if sys.argv[5] == "1":
    import argparse, ctypes, json, mmap, subprocess, tempfile, threading
devices = [os.path.join(dev_dir, name) for name in sys.argv[6:]]
pids = {"open": [], "mmap": [], "leader_exited": [], "second_node": [], "own_table": [], "o_path": [], "idle": []}
for index in range(count):
    role = {0: "leader_exited", 3: "second_node", 4: "own_table", 5: "o_path"}.get(index) or {1: "open", 2: "mmap"}.get(index % 100, "idle")
    pid = os.fork()
    if pid == 0:
        os.close(ready_fd)
        sleeper(role, devices[index % len(devices)], hold_fd)
    pids[role].append(pid)
os.write(ready_fd, (" ".join("%s=%s" % (role, ",".join(map(str, found))) for role, found in pids.items()) + "\n").encode())
os.close(ready_fd)
os.read(hold_fd, 1)  # EOF: the benchmark is done, and so is every sleeper
for _ in range(count):
    os.wait()
"""


class Table:
    """The spawner and its sleepers: {role: [pids]} in .roles once every sleeper has been forked."""

    def __init__(self, count, dev_dir, preload=False):
        ready_read, ready_write = os.pipe()
        hold_read, self._hold_write = os.pipe()
        argv = [sys.executable, "-S", "-c", SPAWNER, str(count), dev_dir, str(ready_write), str(hold_read),
                "1" if preload else "0"] + DEVICE_NAMES
        self.spawner = subprocess.Popen(argv, pass_fds=(ready_write, hold_read), start_new_session=True)  # pylint: disable=consider-using-with
        os.close(ready_write)
        os.close(hold_read)
        with os.fdopen(ready_read) as pipe:
            line = pipe.readline()
        if not line:
            self.stop()
            raise RuntimeError("the spawner exited before reporting its children")
        self.roles = {}
        for item in line.split():
            role, pids = item.split("=", 1)
            self.roles[role] = [int(pid) for pid in pids.split(",") if pid]

    def stop(self):
        os.close(self._hold_write)
        try:
            self.spawner.wait(timeout=60)
        except subprocess.TimeoutExpired:
            # The spawner leads its own session: its group holds it and every sleeper, nothing else.
            os.killpg(self.spawner.pid, signal.SIGKILL)
            self.spawner.wait()


def process_count():
    return sum(1 for name in os.listdir("/proc") if name.isdigit())


# ---------------------------------------------------------------------------------------------------------
# Timing


def best_of_interleaved(repeat, contenders):
    """({name: (best seconds, last result)}, [{name: seconds} of each round]): one warm-up each, then `repeat` rounds
    that run every contender once, so that load from elsewhere on the machine hits them all alike."""
    best = {}
    rounds = []
    for name, func in contenders.items():
        best[name] = (float("inf"), func())
    for _round in range(repeat):
        rounds.append({})
        for name, func in contenders.items():
            cpu, kernel = cpu_seconds(), kernel_seconds()
            started = time.perf_counter()
            result = func()
            elapsed = time.perf_counter() - started
            rounds[-1][name] = elapsed
            rounds[-1][name + "_cpu"] = cpu_seconds() - cpu
            rounds[-1][name + "_kernel"] = kernel_seconds() - kernel
            best[name] = (min(best[name][0], elapsed), result)
    return best, rounds


def cpu_seconds():
    """User and system seconds of this process and of its children that ended (the scan's workers, lsof, fuser):
    the work done, which another job loading the machine slows less than it slows the wall clock."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def kernel_seconds():
    """The system part of cpu_seconds(): the kernel's own work for the reads and stats (formatting maps files above all),
    which no change in the scan's Python can take out."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_stime + children.ru_stime


def median_seconds(rounds, key):
    values = sorted(one_round[key] for one_round in rounds)
    middle = len(values) // 2
    return round(values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2, 4)


def round_ratios(rounds, tool, contender):
    """(median, lowest, highest) of tool's seconds over contender's, round by round: on a loaded machine the two
    runs of one round, seconds apart, met the same load, where the best of each may come from different moments."""
    ratios = sorted(one_round[tool] / one_round[contender] for one_round in rounds)
    middle = len(ratios) // 2
    median = ratios[middle] if len(ratios) % 2 else (ratios[middle - 1] + ratios[middle]) / 2
    return round(median, 2), round(ratios[0], 2), round(ratios[-1], 2)


def run_tool(argv):
    completed = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=False)
    return completed.stdout


def check_tools():
    missing = [tool for tool in ("lsof", "fuser") if shutil.which(tool) is None]
    if missing:
        sys.exit("missing %s: install them with `%s` (Debian packages lsof and psmisc)" % (", ".join(missing), INSTALL_HINT))


def check_process_limit(wanted):
    soft, hard = resource.getrlimit(resource.RLIMIT_NPROC)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        if hard == resource.RLIM_INFINITY or hard >= wanted:
            resource.setrlimit(resource.RLIMIT_NPROC, (wanted, hard))
        else:
            sys.exit("ulimit -u is %d (hard %d): too low for %d processes" % (soft, hard, wanted))
    with open("/proc/sys/kernel/pid_max") as handle:
        pid_max = int(handle.read())
    if pid_max < wanted * 2:
        sys.exit("kernel.pid_max %d is too low for %d processes" % (pid_max, wanted))


def make_dev_dir(root):
    """<root>/dev with the device files, and <root>/alt with a second node (hard link) of each."""
    dev_dir = os.path.join(root, "dev")
    os.mkdir(dev_dir)
    os.mkdir(os.path.join(root, "alt"))
    for name in DEVICE_NAMES:
        with open(os.path.join(dev_dir, name), "wb") as handle:
            handle.write(b"\0" * 4096)
        os.link(os.path.join(dev_dir, name), os.path.join(root, "alt", name))
    return dev_dir


def measure(args, dev_dir, roles):
    # The simulated-node layout of a root whose dev/ is the benchmark's device directory.
    layout = NodeLayout(os.path.dirname(dev_dir))
    files = [os.path.join(dev_dir, name) for name in DEVICE_NAMES]
    best, rounds = best_of_interleaved(args.repeat, {
        "scan": lambda: scan_holders(dev_dir),
        "scan_one_worker": lambda: scan_holders(dev_dir, workers=1),
        # The tier a healthy node's snapshot runs: every fd, no memory map.
        "fds_one_worker": lambda: scan_holders(dev_dir, workers=1, memory_maps=False),
        # What gpu_holders_info runs: the scan in a forked child with a deadline, its result sent back as JSON.
        "scan_as_module": lambda: scan_processes(layout, 60)[0],
        "lsof": lambda: run_tool(["lsof"] + files),
        "fuser": lambda: run_tool(["fuser", "-v"] + files),
    })
    scan_s, ours = best["scan"]
    scan_one_s, ours_one = best["scan_one_worker"]
    fds_s, ours_fds = best["fds_one_worker"]
    module_s, ours_module = best["scan_as_module"]
    lsof_s, lsof_out = best["lsof"]
    fuser_s, fuser_out = best["fuser"]
    ours_pids = set(ours)
    # lsof and fuser take an O_PATH descriptor for an open file: that process is no holder.
    o_path = set(roles["o_path"])
    seen = {"lsof": parse_lsof_pids(lsof_out) - o_path, "fuser": parse_fuser_pids(fuser_out) - o_path}
    fd_holders = set(roles["open"]) | set(roles["leader_exited"]) | set(roles["second_node"]) | set(roles["own_table"])
    expected = fd_holders | set(roles["mmap"])
    return {
        "processes": process_count(),
        "holders": {"ours": len(ours_pids), "lsof": len(seen["lsof"]), "fuser": len(seen["fuser"]),
                    "planted": len(expected)},
        "workers": _worker_count(process_count()),
        "seconds": {"scan": round(scan_s, 4), "scan_one_worker": round(scan_one_s, 4), "scan_as_module": round(module_s, 4),
                    "fds_one_worker": round(fds_s, 4),
                    "lsof": round(lsof_s, 4),
                    "fuser": round(fuser_s, 4)},
        "speedup": {"vs_lsof": round(lsof_s / scan_s, 2), "vs_fuser": round(fuser_s / scan_s, 2),
                    "one_worker_vs_lsof": round(lsof_s / scan_one_s, 2),
                    "one_worker_vs_fuser": round(fuser_s / scan_one_s, 2),
                    "fds_one_worker_vs_lsof": round(lsof_s / fds_s, 2), "fds_one_worker_vs_fuser": round(fuser_s / fds_s, 2),
                    "as_module_vs_lsof": round(lsof_s / module_s, 2), "as_module_vs_fuser": round(fuser_s / module_s, 2)},
        # Round by round (median, lowest, highest): what to quote when the machine is loaded.
        "round_ratios": dict(("%s_vs_%s" % (contender, tool), round_ratios(rounds, tool, contender))
                             for contender in ("scan", "scan_one_worker", "scan_as_module") for tool in ("lsof", "fuser")),
        # The same of CPU seconds: how much less work the scan does (its workers' included), whatever the load.
        "cpu_round_ratios": dict(("%s_vs_%s" % (contender, tool), round_ratios(rounds, tool + "_cpu", contender + "_cpu"))
                                 for contender in ("scan", "scan_one_worker") for tool in ("lsof", "fuser")),
        # Median CPU seconds of a round, and their kernel part: where the scan's work can still be cut, and where not.
        "cpu_seconds": dict((name, {"cpu": median_seconds(rounds, name + "_cpu"), "kernel": median_seconds(rounds, name + "_kernel")})
                            for name in ("scan_one_worker", "fds_one_worker", "lsof", "fuser")),
        "one_worker_same_holders": sorted(ours_one) == sorted(ours) == sorted(ours_module),
        "we_miss": {tool: sorted(pids - ours_pids) for tool, pids in seen.items()},
        "they_miss": {tool: sorted(ours_pids - pids) for tool, pids in seen.items()},
        "planted_missed_by_us": sorted(expected - ours_pids),
        "o_path_taken_by": sorted(tool for tool, out in (("scan", ours_pids), ("lsof", parse_lsof_pids(lsof_out)),
                                                         ("fuser", parse_fuser_pids(fuser_out))) if o_path & set(out)),
        # The fds-only tier finds every fd holder (the leader-exited one too) and none of the mmap-only ones.
        "fds_tier_finds_fd_holders": set(ours_fds) == fd_holders,
        "leader_exited_via": ours.get(roles["leader_exited"][0], {}).get("via"),
    }


def report(result, args):
    seconds = result["seconds"]
    print("process table: %d processes, %d planted holders" % (result["processes"], result["holders"]["planted"]))
    print("scan_holders  %.4f s (best of %d rounds, %d worker processes)" % (seconds["scan"], args.repeat, result["workers"]))
    speedup = result["speedup"]
    print("  one worker  %.4f s  (%.2fx lsof, %.2fx fuser)"
          % (seconds["scan_one_worker"], speedup["one_worker_vs_lsof"], speedup["one_worker_vs_fuser"]))
    print("  fds only    %.4f s  (%.2fx lsof, %.2fx fuser; one worker, the tier of a healthy node: no memory map read)"
          % (seconds["fds_one_worker"], speedup["fds_one_worker_vs_lsof"], speedup["fds_one_worker_vs_fuser"]))
    print("  as module   %.4f s  (%.2fx lsof, %.2fx fuser; in a deadline child, as gpu_holders_info runs it)"
          % (seconds["scan_as_module"], speedup["as_module_vs_lsof"], speedup["as_module_vs_fuser"]))
    print("lsof          %.4f s  -> scan is %.2fx faster (target >= 3x)" % (seconds["lsof"], result["speedup"]["vs_lsof"]))
    print("fuser -v      %.4f s  -> scan is %.2fx faster (target >= 2x)" % (seconds["fuser"], result["speedup"]["vs_fuser"]))
    print("round by round (median, lowest, highest of the rounds' own ratios), wall and CPU seconds:")
    for kind in ("round_ratios", "cpu_round_ratios"):
        for name, (median, lowest, highest) in sorted(result[kind].items()):
            print("  %-4s %-26s %.2fx  (%.2fx to %.2fx)" % ("cpu" if kind.startswith("cpu") else "wall", name, median, lowest, highest))
    print("CPU seconds (median of the rounds; in the kernel):")
    for name, item in result["cpu_seconds"].items():
        print("  %-16s %.3f  (%.3f)" % (name, item["cpu"], item["kernel"]))
    for tool, missed in sorted(result["they_miss"].items()):
        if missed:
            print("%s misses %d holder(s) the scan sees: %s" % (tool, len(missed), missed[:10]))
    for tool, missed in sorted(result["we_miss"].items()):
        if missed:
            print("THE SCAN MISSES %d holder(s) %s sees: %s" % (len(missed), tool, missed[:10]))
    if result["o_path_taken_by"]:
        print("the process with an O_PATH descriptor alone is taken for a holder by: %s" % ", ".join(result["o_path_taken_by"]))
    print(json.dumps(result, sort_keys=True))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=2000, help="fill the process table to at least this many")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--heavy-sleepers", action="store_true",
                        help="sleepers forked from a Python that loaded json, ctypes, subprocess...: ~135 maps lines each")
    args = parser.parse_args(argv)

    check_tools()
    check_process_limit(args.processes + 500)
    root = tempfile.mkdtemp(prefix="gpuops-bench-")
    table = None
    try:
        dev_dir = make_dev_dir(root)
        # A margin for processes that come and go meanwhile.
        table = Table(max(args.processes - process_count(), 0) + 50, dev_dir, args.heavy_sleepers)
        time.sleep(0.5)  # let the leader-exited child's main thread leave
        if process_count() < args.processes:
            print("only %d processes in the table, %d wanted" % (process_count(), args.processes), file=sys.stderr)
            return 2
        result = measure(args, dev_dir, table.roles)
    finally:
        if table is not None:
            table.stop()
        shutil.rmtree(root, ignore_errors=True)
    report(result, args)
    missed = (any(result["we_miss"].values()) or result["planted_missed_by_us"] or not result["one_worker_same_holders"]
              or not result["fds_tier_finds_fd_holders"] or "scan" in result["o_path_taken_by"])
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
