# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark: what one gpu_holders_info run costs on its target, beyond what ansible.builtin.ping costs.

bench/fleet.py measures whole playbooks; this splits the per-host difference between gpu_report.yml and ping.
It builds --nodes simulated nodes (the process table a fleet run of that size scans: every simulated node's
supervisor and holder), keeps the AnsiballZ payloads Ansible sends for ping and for gpu_holders_info
(ANSIBLE_KEEP_REMOTE_FILES=1), then measures the CPU time (user + system, children included) of:
  ping            ping's payload, run as Ansible runs it on a target
  imports         gpu_holders_info's payload with a bad option: imports and argument checks, then it fails
  holders_info    gpu_holders_info's payload, the whole snapshot
  compiled_twice  the same with the module's compile_each_file_once() call taken out (_payload_imports: zipimport
                  then compiles every file twice), the baseline of that call
each --runs times, interleaved, median and minimum; and, inside this process, the parts of the snapshot:
  compile         compile() of the collection's module_utils that the module imports, twice (zipimport in
                  Python 3.11 compiles a file once to find it and once to run it, and keeps no bytecode)
  nvml_child      the NVML probe in its deadline child (imports nvidia-ml-py, calls NVML, forks)
  scan            the /proc scan of every process's fds and memory map, with one worker
and prints one JSON line at the end. The nodes are removed at the end, on failure and on SIGINT/SIGTERM too.
--profile N: also one run of the snapshot payload under cProfile (the profiler started where AnsiballZ hands over to
the module, so the payload's own unzip is outside it), its N most expensive functions by cumulative time, and the
commands the snapshot ran (strace -f -e execve, when strace is installed): what the module's own process spends,
and what it spends in children. --healthy: the nodes of bench/fleet.py --healthy (no ghost memory); --idle: no holder at all.

Run: .venv/bin/python bench/snapshot_cost.py            # --nodes 200 --runs 15 --profile 25 --healthy
"""

from __future__ import annotations

import argparse
import base64
import glob
import json
import io
import os
import pstats
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, ".collections"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fleet import BIN, HEALTHY_SCENARIO, SCENARIO, Fleet, Interrupted, _raise_interrupted  # noqa: E402  pylint: disable=wrong-import-position

from ansible_collections.gpuops.remediation.plugins.module_utils.probes._deadline import run_with_deadline  # noqa: E402
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._gpu_probe import nvml_snapshot  # noqa: E402
from ansible_collections.gpuops.remediation.plugins.module_utils._node import NodeLayout  # noqa: E402
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._procscan import scan_holders_report  # noqa: E402

# --idle: GPUs that nothing holds: no process to classify, no ghost memory.
IDLE_SCENARIO = {"gpus": [{}, {}], "holders": []}
MODULE_UTILS = os.path.join(ROOT, "plugins", "module_utils")
PAYLOAD_PLAY = """- name: Keep the payloads
  hosts: all
  gather_facts: false
  environment: "{{ gpuops_environment }}"
  tasks:
    - name: Ping
      ansible.builtin.ping:
    - name: Snapshot
      gpuops.remediation.gpu_holders_info:
"""


def cpu_seconds():
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def keep_payloads(workdir, node_root):
    """The AnsiballZ files Ansible runs on a target for ping and for gpu_holders_info."""
    inventory = os.path.join(workdir, "inventory.json")
    with open(inventory, "w") as handle:
        json.dump({"all": {"hosts": {"node": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                                              "gpuops_environment": {"GPUOPS_SIM_ROOT": node_root}}}}}, handle)
    playbook = os.path.join(workdir, "payloads.yml")
    with open(playbook, "w") as handle:
        handle.write(PAYLOAD_PLAY)
    remote_tmp = os.path.join(workdir, "remote")
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_KEEP_REMOTE_FILES="1",
               ANSIBLE_REMOTE_TMP=remote_tmp, ANSIBLE_LOCAL_TEMP=os.path.join(workdir, "local"))
    subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", inventory, playbook], cwd=ROOT, env=env, check=True,
                   stdout=subprocess.DEVNULL)
    payloads = {}
    for name, module in (("ping", "ping"), ("holders_info", "gpu_holders_info")):
        found = glob.glob(os.path.join(remote_tmp, "ansible-tmp-*", "AnsiballZ_%s.py" % module))
        if len(found) != 1:
            raise SystemExit("snapshot_cost: expected one AnsiballZ_%s.py under %s, found %d" % (module, remote_tmp, len(found)))
        payloads[name] = found[0]
    payloads["imports"] = _with_bad_option(payloads["holders_info"], os.path.join(workdir, "AnsiballZ_imports.py"))
    payloads["compiled_twice"] = _compiled_twice(payloads["holders_info"], os.path.join(workdir, "AnsiballZ_twice.py"))
    return payloads


def _compiled_twice(payload, path):
    """The payload with the module's compile_each_file_once() call taken out: zipimport's own cost, the baseline."""
    with open(payload) as handle:
        text = handle.read()
    found = re.search(r"zip_data='([A-Za-z0-9+/=]+)'", text)
    if found is None:
        raise SystemExit("snapshot_cost: cannot find the zip in %s" % payload)
    source, target = io.BytesIO(base64.b64decode(found.group(1))), io.BytesIO()
    with zipfile.ZipFile(source) as old, zipfile.ZipFile(target, "w") as new:
        for item in old.infolist():
            data = old.read(item)
            if item.filename.endswith("/modules/gpu_holders_info.py"):
                if data.count(b"\ncompile_each_file_once()") != 1:
                    raise SystemExit("snapshot_cost: cannot find compile_each_file_once() in %s" % item.filename)
                data = data.replace(b"\ncompile_each_file_once()", b"\npass  # compile_each_file_once()")
            new.writestr(item, data)
    with open(path, "w") as handle:
        handle.write(text[:found.start(1)] + base64.b64encode(target.getvalue()).decode() + text[found.end(1):])
    return path


def _with_bad_option(payload, path):
    """The payload with backend=bogus: the module imports everything, checks its arguments and fails."""
    with open(payload) as handle:
        text = handle.read()
    marker = '"ANSIBLE_MODULE_ARGS": {'
    if text.count(marker) != 1:
        raise SystemExit("snapshot_cost: cannot find the module arguments in %s" % payload)
    with open(path, "w") as handle:
        handle.write(text.replace(marker, marker + '"backend": "bogus", '))
    return path


PROFILE_HOOK = """
        import atexit, cProfile
        _gpuops_profiler = cProfile.Profile()
        atexit.register(lambda: (_gpuops_profiler.disable(), _gpuops_profiler.dump_stats(os.environ["GPUOPS_PROFILE_OUT"])))
        _gpuops_profiler.enable()
        _loader.run_module("""


def profile_payload(payload, node_root, workdir, top):
    """One run of the payload with cProfile around the module (not the unzip), and the commands it ran."""
    with open(payload) as handle:
        text = handle.read()
    marker = "\n        _loader.run_module("
    if text.count(marker) != 1:
        raise SystemExit("snapshot_cost: cannot find where %s hands over to the module" % payload)
    profiled = os.path.join(os.path.dirname(payload), "AnsiballZ_profiled.py")
    with open(profiled, "w") as handle:
        handle.write(text.replace(marker, "\n" + PROFILE_HOOK.strip("\n")))
    stats_path = os.path.join(workdir, "payload.prof")
    env = dict(os.environ, GPUOPS_SIM_ROOT=node_root, GPUOPS_PROFILE_OUT=stats_path)
    command = [sys.executable, profiled]
    trace = os.path.join(workdir, "execve.txt")
    if shutil.which("strace"):
        command = ["strace", "-f", "-qq", "-e", "trace=execve", "-e", "signal=none", "-o", trace] + command
    subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    out = io.StringIO()
    pstats.Stats(stats_path, stream=out).sort_stats("cumulative").print_stats(top)
    out.seek(0)
    print("\ncProfile of one gpu_holders_info run (the module's own process; children show as the time waited for them):")
    print("\n".join(line for line in out.getvalue().splitlines() if line.strip())[:12000])
    out = io.StringIO()
    pstats.Stats(stats_path, stream=out).sort_stats("cumulative").print_stats(r"gpuops/remediation/.*\(<module>\)", top)
    print("\nwhat importing each of the collection's files cost (cumulative, with what it imports):")
    print("\n".join(line for line in out.getvalue().splitlines()[6:] if line.strip()))
    if os.path.exists(trace):
        with open(trace) as handle:
            ran = [line.split('"')[1] for line in handle if "execve(" in line and '"' in line][1:]
        print("\ncommands the snapshot ran: %s" % (", ".join(os.path.basename(name) for name in ran) or "none"))


def run_payloads(payloads, node_root, runs):
    """{name: [CPU seconds of each run]}, the payloads interleaved so that load from elsewhere hits them alike."""
    env = dict(os.environ, GPUOPS_SIM_ROOT=node_root)
    samples = dict((name, []) for name in payloads)
    for dummy in range(runs):
        for name, path in payloads.items():
            before = cpu_seconds()
            subprocess.run([sys.executable, path], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
            samples[name].append(cpu_seconds() - before)
    return samples


def _imported_sources():
    """The module_utils files gpu_holders_info's payload carries (what AnsiballZ found it imports)."""
    names = ("probes/_deadline", "_gpu_names", "probes/_gpu_probe", "probes/_kernel_log", "probes/_kmod", "_node", "probes/_pci", "probes/_procscan",
             "_services", "_snapshot", "_verdict")
    sources = []
    for name in names:
        with open(os.path.join(MODULE_UTILS, name + ".py")) as handle:
            sources.append((name, handle.read()))
    with open(os.path.join(ROOT, "plugins", "modules", "gpu_holders_info.py")) as handle:
        sources.append(("gpu_holders_info", handle.read()))
    return sources


def measure_parts(node_root, runs):
    """{part: [CPU seconds of each run]} for the pieces of a snapshot, in this process."""
    layout = NodeLayout(node_root)
    sources = _imported_sources()
    parts = {"compile": [], "nvml_child": [], "scan": []}
    for dummy in range(runs):
        before = cpu_seconds()
        for name, text in sources:
            for dummy_pass in range(2):
                compile(text, name, "exec", dont_inherit=True)
        parts["compile"].append(cpu_seconds() - before)
        before = cpu_seconds()
        run_with_deadline(lambda: nvml_snapshot(layout), 30)
        parts["nvml_child"].append(cpu_seconds() - before)
        before = cpu_seconds()
        scan_holders_report(layout.dev_dir, sys_dir=layout.sys_dir, workers=1)
        parts["scan"].append(cpu_seconds() - before)
    return parts


def summary(samples):
    return dict((name, {"median_s": round(statistics.median(values), 4), "min_s": round(min(values), 4)})
                for name, values in samples.items())


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=200, help="simulated nodes, as in a fleet run of that size (default 200)")
    parser.add_argument("--runs", type=int, default=15, help="runs of each measurement (default 15)")
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="also profile one snapshot run (cProfile, N functions; strace of the commands it runs)")
    parser.add_argument("--healthy", action="store_true", help="nodes without ghost memory, as bench/fleet.py --healthy")
    parser.add_argument("--idle", action="store_true", help="nodes without ghost memory and without any holder (no job either)")
    args = parser.parse_args(argv)
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _raise_interrupted)
    workdir = tempfile.mkdtemp(prefix="gpuops-snapshot-cost-")
    os.makedirs(os.path.join(workdir, "nodes"))
    fleet = Fleet(workdir, args.nodes, 8, IDLE_SCENARIO if args.idle else HEALTHY_SCENARIO if args.healthy else SCENARIO)
    try:
        fleet.build(fleet.names)
        fleet.signal_supervisors(fleet.names, signal.SIGSTOP)
        node_root = fleet.root(fleet.names[0])
        processes = len([name for name in os.listdir("/proc") if name.isdigit()])
        payloads = keep_payloads(workdir, node_root)
        if args.profile:
            profile_payload(payloads["holders_info"], node_root, workdir, args.profile)
        started = time.perf_counter()
        results = summary(run_payloads(payloads, node_root, args.runs))
        results.update(summary(measure_parts(node_root, args.runs)))
        print("%d simulated nodes, %d processes in the table, %d runs each (%.0f s)\n" % (
            args.nodes, processes, args.runs, time.perf_counter() - started))
        print("%-14s %10s %10s" % ("CPU seconds", "median", "min"))
        for name, item in results.items():
            print("%-14s %10.4f %10.4f" % (name, item["median_s"], item["min_s"]))
        extra = results["holders_info"]["median_s"] - results["ping"]["median_s"]
        print("\ngpu_holders_info - ping, on the target: %.3f CPU s (median), %.3f (min)" % (
            extra, results["holders_info"]["min_s"] - results["ping"]["min_s"]))
        print("gpu_holders_info / ping: %.2fx; with every file compiled twice: %.2fx" % (
            results["holders_info"]["median_s"] / results["ping"]["median_s"],
            results["compiled_twice"]["median_s"] / results["ping"]["median_s"]))
        print(json.dumps({"bench": "snapshot_cost", "nodes": args.nodes, "processes": processes, "runs": args.runs,
                          "cpu": results}, sort_keys=True))
        return 0
    except (KeyboardInterrupt, Interrupted) as exc:
        print("\ninterrupted (%s): removing the nodes" % (exc or "SIGINT"))
        return 130
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_IGN)
        fleet.destroy(fleet.names)
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
