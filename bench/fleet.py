# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark: gpu_report.yml and reset_gpu.yml on a fleet of simulated hosts, against `ansible -m ping` and a naive playbook.

Builds up to --hosts simulated GPU nodes on this machine (each its own root, its own supervisor and holder
processes; two GPUs, ghost memory on GPU 0, a job on GPU 1), an inventory of them (local connection, the node's
root in gpuops_environment), then times, for each host count of the series, with --forks:
  ping          ansible gpu_nodes -m ansible.builtin.ping (the floor of any Ansible fleet job)
  ping_playbook bench/fleet/ping.yml: one ansible.builtin.ping task in the play gpu_report.yml runs in (the
                floor of a one-task playbook: what the report's snapshot task costs beyond it is the module's)
  holders_info  bench/fleet/holders_info.yml: one gpuops.remediation.gpu_holders_info task (the core of gpu_report)
  gpu_report    playbooks/gpu_report.yml
  naive         bench/fleet/naive.yml: nvidia-smi --query-gpu, --query-compute-apps, lsof /dev/nvidia*, ps, one task each
  reset_gpu     playbooks/reset_gpu.yml (kill rung for the job, reset rung for the ghost memory); the nodes it
                fixed are built again afterwards
  gpu_watch     playbooks/gpu_watch.yml, one sample a run, no webhook, no remediation (what the 10-minute schedule
                costs a host: the snapshot, the state file and the metrics file)
It fits wall = intercept + slope * hosts per playbook, prints a table, the per-task spans and one JSON line, and
tears every node down at the end, on failure and on SIGINT/SIGTERM/SIGHUP too. Exit 1 when a run fails a host
(or, with --strict, misses a target), 2 when the setup fails.

Run: make bench   (or .venv/bin/python bench/fleet.py --quick; --hosts 25,50,100,200 --forks 10 --forks-sweep 5,20)
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, ".collections"))

from ansible_collections.gpuops.remediation.plugins.module_utils.simulation import _sim_build, _sim_state  # noqa: E402

BIN = os.path.join(ROOT, ".venv", "bin")
FLEET_DIR = os.path.join(ROOT, "bench", "fleet")
# Two GPUs: ghost memory on GPU 0 (reset rung), a job on GPU 1 (kill rung): 2 processes per node with the supervisor.
SCENARIO = {"gpus": [{"ghost_mib": 2048}, {}],
            "holders": [{"kind": "fd", "gpus": [1], "memory_mib": 4096, "name": "trainer"}]}
# --healthy: the same job, no ghost memory: the snapshot's scan skips the memory maps (its tier for a healthy node).
HEALTHY_SCENARIO = {"gpus": [{}, {}], "holders": SCENARIO["holders"]}
PLAYBOOKS = {
    "ping_playbook": os.path.join(FLEET_DIR, "ping.yml"),
    "holders_info": os.path.join(FLEET_DIR, "holders_info.yml"),
    "naive": os.path.join(FLEET_DIR, "naive.yml"),
    "gpu_report": os.path.join(ROOT, "playbooks", "gpu_report.yml"),
    "reset_gpu": os.path.join(ROOT, "playbooks", "reset_gpu.yml"),
    "gpu_watch": os.path.join(ROOT, "playbooks", "gpu_watch.yml"),
}
# The watch writes only its own state and metrics files under each node's root: the nodes stay as they were.
READ_ONLY = ("ping", "ping_playbook", "holders_info", "gpu_report", "naive", "gpu_watch")
RECAP = re.compile(r"^(\S+)\s+: ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)
PING_OK = re.compile(r"^(\S+) \| SUCCESS", re.M)


class Interrupted(Exception):
    """SIGTERM or SIGHUP: unwind through the finally blocks that tear the fleet down."""


def _raise_interrupted(signum, _frame):
    raise Interrupted("signal %d" % signum)


# ---------------------------------------------------------------------------------------------------------
# The fleet: simulated nodes, their supervisors, the inventories

class Fleet:
    """Simulated nodes node001..nodeNNN under one temporary directory."""

    def __init__(self, workdir, count, builders, scenario):
        self.workdir = workdir
        self.scenario = scenario
        self.names = ["node%03d" % number for number in range(1, count + 1)]
        self.builders = builders
        self.built = set()

    def root(self, name):
        return os.path.join(self.workdir, "nodes", name)

    def build(self, names):
        """Create the nodes in parallel threads (create_node mostly waits for the supervisor and the holder)."""
        def create(name):
            _sim_build.create_node(self.root(name), self.scenario)
            self.built.add(name)
        with ThreadPoolExecutor(max_workers=self.builders) as pool:
            list(pool.map(create, names))

    def rebuild(self, names):
        self.destroy(names)
        self.build(names)

    def destroy(self, names):
        names = [name for name in names if name in self.built or os.path.exists(self.root(name))]
        self.signal_supervisors(names, signal.SIGCONT)  # a stopped supervisor cannot reap what destroy kills

        def remove(name):
            _sim_build.destroy_node(self.root(name))
            self.built.discard(name)
        with ThreadPoolExecutor(max_workers=self.builders) as pool:
            list(pool.map(remove, names))

    def signal_supervisors(self, names, signum):
        """SIGSTOP/SIGCONT the supervisors: each polls its spawn directory 50 times a second, which on 200 nodes
        is a core's worth of load no real node has. Read-only runs need no supervisor; reset_gpu does (it reaps
        the holders the kill rung kills)."""
        for name in names:
            try:
                supervisor = _sim_state.load_state(self.root(name)).get("supervisor") or {}
            except _sim_state.SimError:
                continue
            if _sim_state.process_exists(supervisor.get("pid"), supervisor.get("start_time")):
                os.kill(supervisor["pid"], signum)

    def inventory(self, count):
        """An inventory of the first `count` nodes (JSON is YAML), in the group gpu_nodes the playbooks target."""
        hosts = dict((name, {"gpuops_environment": {"GPUOPS_SIM_ROOT": self.root(name)}}) for name in self.names[:count])
        data = {"all": {"children": {"gpu_nodes": {
            "hosts": hosts,
            "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}}}
        path = os.path.join(self.workdir, "inventory-%03d.yml" % count)
        with open(path, "w") as handle:
            json.dump(data, handle, indent=1)
        return path


# ---------------------------------------------------------------------------------------------------------
# Running and timing one ansible command

class Runner:
    def __init__(self, workdir, fleet):
        self.workdir = workdir
        self.fleet = fleet
        self.current = None
        self.serial = 0

    def env(self, timing_file, tree_dir=None):
        env = dict(os.environ)
        env.update({"ANSIBLE_CONFIG": os.path.join(ROOT, "ansible.cfg"), "ANSIBLE_NOCOLOR": "1",
                    "PATH": BIN + os.pathsep + env.get("PATH", ""),
                    "ANSIBLE_CALLBACK_PLUGINS": os.path.join(FLEET_DIR, "callback_plugins"),
                    "ANSIBLE_CALLBACKS_ENABLED": "fleet_timing", "GPUOPS_FLEET_TIMING": timing_file,
                    "ANSIBLE_LOCAL_TEMP": os.path.join(self.workdir, "ansible-local")})
        if tree_dir:
            env.update({"ANSIBLE_CALLBACKS_ENABLED": "fleet_timing,tree", "ANSIBLE_CALLBACK_TREE_DIR": tree_dir})
        return env

    def argv(self, kind, inventory, forks):
        if kind == "ping":
            return [os.path.join(BIN, "ansible"), "gpu_nodes", "-i", inventory, "-m", "ansible.builtin.ping", "-f", str(forks)]
        argv = [os.path.join(BIN, "ansible-playbook"), PLAYBOOKS[kind], "-i", inventory, "-f", str(forks),
                "-e", "gpu_remediate_report_dir=%s" % os.path.join(self.workdir, "reports")]
        if kind == "reset_gpu":
            # Every node needs the reset rung: lift the fleet guard; the job dies on SIGTERM, no grace needed.
            argv += ["-e", "gpu_remediate_max_destructive_percent=100", "-e", "gpu_reclaim_kill_grace=2"]
        if kind == "gpu_watch":
            argv += ["-e", "gpu_watch_samples=1", "-e", "gpu_watch_interval=0"]
        return argv

    def run(self, kind, count, forks, tree=False):
        """Run one measurement; return its record (wall, CPU of every descendant, hosts that ended well).

        tree: keep each host's last result as JSON (the tree callback) and add the module's own timings."""
        self.serial += 1
        log_path = os.path.join(self.workdir, "logs", "%02d-%s-%d-f%d.log" % (self.serial, kind, count, forks))
        timing_path = log_path[:-4] + ".timing.json"
        tree_dir = log_path[:-4] + ".tree" if tree else None
        argv = self.argv(kind, self.fleet.inventory(count), forks)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        load_before = os.getloadavg()[0]
        started = time.perf_counter()
        with open(log_path, "w") as log:
            self.current = subprocess.Popen(argv, cwd=ROOT, env=self.env(timing_path, tree_dir), stdout=log,
                                            stderr=subprocess.STDOUT, start_new_session=True)
            rc = self.current.wait()
            self.current = None
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        with open(log_path) as log:
            text = log.read()
        record = {"playbook": kind, "hosts": count, "forks": forks, "rc": rc, "wall_s": round(wall, 3),
                  "s_per_host": round(wall / count, 4), "cpu_s_per_host": round(cpu / count, 4),
                  "hosts_ok": _hosts_that_ended_well(kind, text), "log": log_path, "tasks": _read_timing(timing_path),
                  # The machine's 1-minute load average as the run began and ended: other work's share of the figures.
                  "load": [round(load_before, 1), round(os.getloadavg()[0], 1)]}
        if tree_dir and os.path.isdir(tree_dir):
            record["module_timings"] = snapshot_costs(tree_dir)
        record.update(per_host_counts(record["tasks"]))
        return record

    def stop(self):
        """Kill the ansible run in progress (its own session: the workers and modules go with it)."""
        if self.current is not None and self.current.poll() is None:
            os.killpg(self.current.pid, signal.SIGTERM)
            try:
                self.current.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.current.pid, signal.SIGKILL)
                self.current.wait()


def _hosts_that_ended_well(kind, text):
    if kind == "ping":
        return len(PING_OK.findall(text))
    return sum(1 for _name, _ok, _changed, unreachable, failed in RECAP.findall(text) if unreachable == "0" and failed == "0")


def per_host_counts(timing):
    """The median, over the hosts of a run, of the tasks that ran on a host and of the module executions on it."""
    per_host = list(((timing or {}).get("per_host") or {}).values())
    if not per_host:
        return {}
    return {"tasks_per_host": _median([counts["tasks"] for counts in per_host]),
            "modules_per_host": _median([counts["modules"] for counts in per_host])}


def _read_timing(path):
    try:
        with open(path) as handle:
            return json.load(handle)
    except (IOError, OSError, ValueError):
        return None


# ---------------------------------------------------------------------------------------------------------
# Figures

def linear_fit(points):
    """Least squares wall = intercept + slope * hosts over (hosts, wall) points; with R^2."""
    n = len(points)
    if n < 2:
        return None
    mean_x = sum(x for x, _y in points) / float(n)
    mean_y = sum(y for _x, y in points) / float(n)
    sxx = sum((x - mean_x) ** 2 for x, _y in points)
    if sxx == 0:
        return None
    slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / sxx
    intercept = mean_y - slope * mean_x
    ss_tot = sum((y - mean_y) ** 2 for _x, y in points)
    ss_res = sum((y - intercept - slope * x) ** 2 for x, y in points)
    r2 = 1.0 - ss_res / ss_tot if ss_tot else 1.0
    return {"slope_s_per_host": round(slope, 4), "intercept_s": round(intercept, 3), "r2": round(r2, 4), "points": n}


def fits(records, forks):
    result = {}
    for kind in PLAYBOOKS.keys() | {"ping"}:
        points = [(r["hosts"], r["wall_s"]) for r in records if r["playbook"] == kind and r["forks"] == forks]
        fit = linear_fit(sorted(points))
        if fit:
            result[kind] = fit
    return result


def _find(records, kind, hosts, forks):
    for record in records:
        if record["playbook"] == kind and record["hosts"] == hosts and record["forks"] == forks:
            return record
    return None


def _largest_common(records, kinds, forks):
    counts = [set(r["hosts"] for r in records if r["playbook"] == kind and r["forks"] == forks) for kind in kinds]
    common = set.intersection(*counts) if counts else set()
    return max(common) if common else None


def _ratio_target(records, fitted, slow, fast, forks, target, met):
    """slow's time per host over fast's at the largest host count both ran, and the ratio of their slopes."""
    hosts = _largest_common(records, (slow, fast), forks)
    if hosts is None:
        return None
    slow_run, fast_run = _find(records, slow, hosts, forks), _find(records, fast, hosts, forks)
    ratio = slow_run["s_per_host"] / fast_run["s_per_host"]
    item = {"hosts": hosts, "ratio": round(ratio, 2), "target": target, "met": met(ratio),
            # CPU seconds per host (every descendant): moves less than wall time with other work's load.
            "cpu_ratio": round(slow_run["cpu_s_per_host"] / fast_run["cpu_s_per_host"], 2)}
    if slow in fitted and fast in fitted and fitted[fast]["slope_s_per_host"] > 0:
        item["slope_ratio"] = round(fitted[slow]["slope_s_per_host"] / fitted[fast]["slope_s_per_host"], 2)
    return item


def targets(records, fitted, forks):
    """The issues' targets: gpu_report at most 1.15x ping per host, naive at least 3x gpu_report, gpu_watch at most 1.3x
    gpu_report, reset_gpu at most 4x gpu_report, wall linear in hosts."""
    found = {
        "report_vs_ping": _ratio_target(records, fitted, "gpu_report", "ping", forks, "<= 1.15", lambda r: r <= 1.15),
        "naive_vs_report": _ratio_target(records, fitted, "naive", "gpu_report", forks, ">= 3", lambda r: r >= 3.0),
    }
    # A node fixed at the reset rung (the job on GPU 1 ended, GPU 0 reset): at most 4x the report, at most 5 modules.
    # The 10-minute schedule (issue 21): a watched host at most 1.3x a reported one.
    found["watch_vs_report"] = _ratio_target(records, fitted, "gpu_watch", "gpu_report", forks, "<= 1.3", lambda r: r <= 1.3)
    found["reset_vs_report"] = _ratio_target(records, fitted, "reset_gpu", "gpu_report", forks, "<= 4", lambda r: r <= 4.0)
    resets = [r for r in records if r["playbook"] == "reset_gpu" and r.get("modules_per_host") is not None]
    if resets:
        modules = max(r["modules_per_host"] for r in resets)
        found["reset_modules_per_host"] = {"ratio": modules, "target": "<= 5", "met": modules <= 5,
                                           "tasks_per_host": max(r["tasks_per_host"] for r in resets)}
    if fitted.get("gpu_report", {}).get("points", 0) >= 3:
        r2 = fitted["gpu_report"]["r2"]
        found["report_linear"] = {"ratio": r2, "target": "R^2 >= 0.99", "met": r2 >= 0.99}
    return dict((name, item) for name, item in found.items() if item)


def snapshot_costs(tree_dir):
    """Median of the module's own timings over the hosts of a holders_info run with the tree callback."""
    samples = {"probes.seconds": [], "probes.gpu.seconds": [], "probes.process_scan.seconds": []}
    for name in os.listdir(tree_dir):
        try:
            with open(os.path.join(tree_dir, name)) as handle:
                probes = json.load(handle).get("probes") or {}
        except (IOError, OSError, ValueError):
            continue
        samples["probes.seconds"].append(probes.get("seconds"))
        samples["probes.gpu.seconds"].append((probes.get("gpu") or {}).get("seconds"))
        samples["probes.process_scan.seconds"].append((probes.get("process_scan") or {}).get("seconds"))
    return dict((key, _median([v for v in values if v is not None])) for key, values in samples.items())


def _median(values):
    if not values:
        return None
    values = sorted(values)
    middle = len(values) // 2
    return values[middle] if len(values) % 2 else round((values[middle - 1] + values[middle]) / 2.0, 4)


def busy_cpu_share(seconds=2.0):
    """Share of the machine's CPU time busy while the benchmark waits: the simulation's load and anything else."""
    def busy_total():
        with open("/proc/stat") as handle:
            fields = [int(value) for value in handle.readline().split()[1:]]
        idle = fields[3] + fields[4]
        return sum(fields) - idle, sum(fields)
    busy0, total0 = busy_total()
    time.sleep(seconds)
    busy1, total1 = busy_total()
    return round((busy1 - busy0) / float(max(total1 - total0, 1)), 3)


# ---------------------------------------------------------------------------------------------------------
# Output

def print_table(records):
    print("\n%-13s %6s %6s %9s %9s %12s %9s %12s" % ("playbook", "hosts", "forks", "wall s", "s/host", "CPU s/host", "hosts ok", "load"))
    for r in records:
        failed = "" if r["hosts_ok"] == r["hosts"] else "  FAILED: " + r["log"]
        load = "%.1f-%.1f" % tuple(r.get("load") or (0, 0))
        row = (r["playbook"], r["hosts"], r["forks"], r["wall_s"], r["s_per_host"], r["cpu_s_per_host"], r["hosts_ok"], r["hosts"], load, failed)
        print("%-13s %6d %6d %9.2f %9.4f %12.4f %5d/%-3d %12s%s" % row)


def print_fits(fitted, forks):
    print("\nwall = intercept + slope * hosts (forks %d)" % forks)
    for kind, fit in sorted(fitted.items()):
        print("  %-13s slope %.4f s/host  intercept %6.2f s  R^2 %.4f  (%d points)"
              % (kind, fit["slope_s_per_host"], fit["intercept_s"], fit["r2"], fit["points"]))


def _spans_by_name(timing):
    """{task name: seconds} over a run (a task included several times adds up), slowest first, top 12."""
    spans = {}
    for task in (timing or {}).get("tasks", []):
        spans[task["name"]] = round(spans.get(task["name"], 0.0) + task["seconds"], 3)
    return dict(sorted(spans.items(), key=lambda item: -item[1])[:12])


def print_spans(record):
    timing = record.get("tasks") or {}
    if not timing.get("tasks"):
        return
    accounted = sum(task["seconds"] for task in timing["tasks"])
    print("\n%s, %d hosts, forks %d: %.2f s wall; where it goes (task spans, all hosts)" % (
        record["playbook"], record["hosts"], record["forks"], record["wall_s"]))
    print("  %-60s %7.2f s  (start-up: parsing, inventory, fork of the controller)" % ("before the first task", record["wall_s"] - accounted))
    if "tasks_per_host" in record:
        print("  per host (median): %s tasks ran, %s module executions on the host" % (record["tasks_per_host"], record["modules_per_host"]))
    for name, seconds in _spans_by_name(timing).items():
        print("  %-60s %7.2f s  %6.1f ms/host" % (name[:60], seconds, 1000.0 * seconds / record["hosts"]))
    walk = timing.get("walk_modules") or {}
    if walk:
        print("  inside the walk (each module's transfer and run, as gpu_ladder timed it; forks run hosts' walks at once):")
    for name, spent in sorted(walk.items(), key=lambda item: -item[1]["seconds"]):
        print("    %-58s %7.2f s  %6.1f ms a run, %d runs" % (name, spent["seconds"], 1000.0 * spent["seconds"] / spent["runs"], spent["runs"]))


def print_cost_model(records, fitted):
    """The marginal cost of one more host (fitted slopes), split the way the playbooks stack up."""
    slope = dict((kind, fit["slope_s_per_host"]) for kind, fit in fitted.items())
    if "ping" not in slope:
        return
    print("\nwhat one more host costs (fitted slopes):")
    print("  %-58s %6.0f ms" % ("ping: fork, AnsiballZ, a Python on the target, the callback", 1000 * slope["ping"]))
    info = [r for r in records if r["playbook"] == "holders_info" and r.get("module_timings")]
    if info:
        module = info[-1]["module_timings"]["probes.seconds"]
        label = "gpu_holders_info's snapshot itself"
        print("  %-58s %6.0f ms  (measured by the module, %d forks at once)" % (label, 1000 * module, info[-1]["forks"]))
    if "gpu_report" in slope:
        print("  %-58s %6.0f ms" % ("gpu_report.yml, all of it", 1000 * slope["gpu_report"]))


def print_targets(found):
    print("\ntargets at the largest host count:")
    for name, item in found.items():
        value = item["ratio"]
        extra = " (%d hosts; ratio of the fitted slopes %s)" % (item["hosts"], item["slope_ratio"]) if "slope_ratio" in item else ""
        extra += " (CPU s/host: %sx)" % item["cpu_ratio"] if "cpu_ratio" in item else ""
        print("  %-16s %6s  target %-12s %s%s" % (name, value, item["target"], "met" if item["met"] else "MISSED", extra))


# ---------------------------------------------------------------------------------------------------------

# What `make bench` measures (about 10 minutes on 2 busy vCPUs): the report over four host counts for the fit, ping
# and the naive playbook for the targets, reset_gpu on a few (each run fixes nodes that are then rebuilt).
DEFAULT_PLAN = {"ping": [50, 200], "ping_playbook": [200], "holders_info": [50], "gpu_report": [25, 50, 100, 200], "naive": [100],
                "reset_gpu": [10, 25], "gpu_watch": [50, 200]}
QUICK_PLAN = {"ping": [10, 40], "ping_playbook": [40], "holders_info": [10], "gpu_report": [10, 20, 40], "naive": [40], "reset_gpu": [5],
              "gpu_watch": [10, 40]}
KINDS = ("ping", "ping_playbook", "holders_info", "gpu_report", "naive", "reset_gpu", "gpu_watch")


def _counts(text):
    return sorted(set(int(n) for n in text.split(",") if n))


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", help="host counts for every playbook (default: gpu_report %s, ping %s, naive %s)" % (
        DEFAULT_PLAN["gpu_report"], DEFAULT_PLAN["ping"], DEFAULT_PLAN["naive"]))
    parser.add_argument("--reset-hosts", help="host counts for reset_gpu.yml (default %s)" % DEFAULT_PLAN["reset_gpu"])
    parser.add_argument("--naive-hosts", help="host counts for the naive playbook (default %s)" % DEFAULT_PLAN["naive"])
    parser.add_argument("--forks", type=int, default=10, help="forks of every run (default 10)")
    parser.add_argument("--forks-sweep", default="", help="other fork counts for ping and gpu_report, e.g. 5,20 (default none)")
    parser.add_argument("--sweep-hosts", type=int, default=100, help="host count of the forks sweep (default 100)")
    parser.add_argument("--only", default=",".join(KINDS), help="what to measure, of %s" % ", ".join(KINDS))
    parser.add_argument("--quick", action="store_true", help="at most 40 hosts, no forks sweep (about two minutes)")
    parser.add_argument("--builders", type=int, default=8, help="threads that create the nodes (default 8)")
    parser.add_argument("--healthy", action="store_true",
                        help="nodes without ghost memory (a job on GPU 1 only); reset_gpu is then not measured")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--repeat", type=int, default=1,
                        help="run each read-only measurement this many times and keep the fastest (default 1)")
    parser.add_argument("--keep", action="store_true", help="keep the logs and reports (the nodes are always removed)")
    args = parser.parse_args(argv)
    args.only = [kind for kind in args.only.split(",") if kind and not (args.healthy and kind == "reset_gpu")]
    plan = dict(QUICK_PLAN if args.quick else DEFAULT_PLAN)
    if args.hosts:
        plan.update((kind, _counts(args.hosts)) for kind in READ_ONLY)
    if args.reset_hosts:
        plan["reset_gpu"] = _counts(args.reset_hosts)
    if args.naive_hosts:
        plan["naive"] = _counts(args.naive_hosts)
    args.plan = dict((kind, counts) for kind, counts in plan.items() if kind in args.only and counts)
    args.forks_sweep = [] if args.quick else [int(n) for n in args.forks_sweep.split(",") if n and int(n) != args.forks]
    return args


def missing_playbooks(only):
    return [kind for kind in only if kind in PLAYBOOKS and not os.path.exists(PLAYBOOKS[kind])]


def measure(args, fleet, runner):
    """Every run, the read-only ones first, interleaved per host count (drifting load then hits them alike).

    holders_info runs with the tree callback too, which keeps each host's result: the module's own timings.
    """
    records = []
    fleet.signal_supervisors(fleet.names, signal.SIGSTOP)
    for count in sorted(set(n for kind in READ_ONLY for n in args.plan.get(kind, []))):
        for kind in READ_ONLY:
            if count in args.plan.get(kind, []):
                records.append(_best_of(args.repeat, functools.partial(runner.run, kind, count, args.forks, tree=kind == "holders_info")))
    for forks in args.forks_sweep:
        for kind in ("ping", "gpu_report"):
            if kind in args.plan:
                records.append(_report_run(runner.run(kind, args.sweep_hosts, forks)))
    for count in args.plan.get("reset_gpu", []):
        targeted = fleet.names[:count]
        fleet.signal_supervisors(targeted, signal.SIGCONT)
        records.append(_report_run(runner.run("reset_gpu", count, args.forks)))
        fleet.rebuild(targeted)  # the run fixed them: build them stuck again for the next count
        fleet.signal_supervisors(targeted, signal.SIGSTOP)
    return records


def _best_of(repeat, run):
    """The fastest of `repeat` runs: load from other work on the machine only ever adds time."""
    runs = [_report_run(run()) for dummy in range(max(repeat, 1))]
    best = min(runs, key=lambda record: record["wall_s"])
    best["repeats"] = len(runs)
    return best


def _report_run(record):
    print("  %-13s %4d hosts  forks %2d  %7.2f s  %.4f s/host  %d/%d ok" % (
        record["playbook"], record["hosts"], record["forks"], record["wall_s"], record["s_per_host"], record["hosts_ok"], record["hosts"]))
    sys.stdout.flush()
    return record


def main(argv=None):
    args = parse_args(argv)
    missing = missing_playbooks(args.only)
    if missing:
        print("not measured (playbook missing): %s" % ", ".join(missing))
        args.only = [kind for kind in args.only if kind not in missing]
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _raise_interrupted)
    workdir = tempfile.mkdtemp(prefix="gpuops-fleet-")
    for sub in ("nodes", "logs", "reports", "ansible-local"):
        os.makedirs(os.path.join(workdir, sub))
    fleet = Fleet(workdir, max(n for counts in args.plan.values() for n in counts), args.builders,
                  HEALTHY_SCENARIO if args.healthy else SCENARIO)
    runner = Runner(workdir, fleet)
    status = 0
    try:
        started = time.perf_counter()
        fleet.build(fleet.names)
        print("built %d simulated nodes in %.1f s (create_node in %d threads; %s)" % (
            len(fleet.names), time.perf_counter() - started, args.builders, json.dumps(fleet.scenario, sort_keys=True)))
        print("CPU busy while nothing is measured: %.0f%% with the supervisors running, " % (100 * busy_cpu_share()), end="")
        fleet.signal_supervisors(fleet.names, signal.SIGSTOP)
        print("%.0f%% with them stopped (read-only runs stop them; the rest is other work on this machine)" % (100 * busy_cpu_share()))
        records = measure(args, fleet, runner)
        status = _summarise(args, records, missing)
    except (KeyboardInterrupt, Interrupted) as exc:
        print("\ninterrupted (%s): removing the nodes" % (exc or "SIGINT"))
        status = 130
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_IGN)  # a second Ctrl-C must not leave processes behind
        runner.stop()
        fleet.destroy(fleet.names)
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            print("logs and reports kept in %s" % workdir)
    return status


def _summarise(args, records, missing):
    print_table(records)
    fitted = fits(records, args.forks)
    print_fits(fitted, args.forks)
    for kind in ("holders_info", "gpu_report", "gpu_watch", "reset_gpu"):
        counts = args.plan.get(kind)
        record = _find(records, kind, max(counts), args.forks) if counts else None
        if record:
            print_spans(record)
            if record.get("module_timings"):
                print("  gpu_holders_info's own timings (probes), median over the hosts: %s" % json.dumps(record["module_timings"], sort_keys=True))
    print_cost_model(records, fitted)
    found = targets(records, fitted, args.forks)
    print_targets(found)
    for record in records:
        record.pop("log")
        timing = record.pop("tasks") or {}
        if record["playbook"] in ("gpu_report", "gpu_watch", "reset_gpu", "holders_info"):
            record["task_spans"] = _spans_by_name(timing)
            if timing.get("walk_modules"):
                record["walk_modules"] = timing["walk_modules"]
    print(json.dumps({"bench": "fleet", "forks": args.forks, "cpus": os.cpu_count(), "loadavg": os.getloadavg()[0],
                      "scenario": HEALTHY_SCENARIO if args.healthy else SCENARIO, "runs": records, "fits": fitted, "targets": found, "not_measured": missing},
                     sort_keys=True))
    if any(r["hosts_ok"] != r["hosts"] or r["rc"] != 0 for r in records):
        return 1
    return 1 if args.strict and not all(item["met"] for item in found.values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
