# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark: the operator's wait, from reset_gpu.yml's start to the memory back, per rung, on one simulated node.

For each rung a node that needs it: `kill` (a job holding 4096 MiB on GPU 0; it ends on SIGTERM), `reset` (2048 MiB
of ghost memory), `reload` (ghost memory on the GPU that drives the console, which nvidia-smi refuses to reset, so the
reset rung fails and the reload frees it). Runs `playbooks/reset_gpu.yml` against it (--repeat times, the node built
stuck again each time) and reports, from the fleet_timing callback: the whole run's wall time, the walk's span (the
gpu_ladder task: every module it runs on the node, the orchestration), the outcome (the run report), and the tasks
and module executions on the host. Targets: the kill rung within its grace + 1 s, the reset rung within 3 s, the
reload within 5 s, of orchestration (the walk's span).

Run: .venv/bin/python bench/reclaim_time.py   (--repeat 3 --grace 2)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import fleet  # noqa: E402  (bench/fleet.py: the Runner, the inventory, the timing callback)

SCENARIOS = {
    "kill": {"gpus": [{}], "holders": [{"kind": "fd", "gpus": [0], "memory_mib": 4096, "name": "trainer"}]},
    "reset": {"gpus": [{"ghost_mib": 2048}]},
    "reload": {"gpus": [{"ghost_mib": 2048, "primary": True}]},
}
WALK_TASK = "Walk the ladder from the snapshot"


class OneNode(fleet.Fleet):
    """One simulated node built from the scenario of a rung."""

    def __init__(self, workdir, spec):
        super().__init__(workdir, 1, 1, spec)


def _walk_seconds(timing):
    return round(sum(task["seconds"] for task in (timing or {}).get("tasks", []) if WALK_TASK in task["name"]), 3)


def _outcome(workdir):
    path = os.path.join(workdir, "reports", "latest.json")
    with open(path) as handle:
        host = json.load(handle)["hosts"][0]
    return host.get("status"), host.get("fixed_by"), [step["rung"] for step in host.get("rungs_tried", [])]


def measure(rung, repeat):
    workdir = tempfile.mkdtemp(prefix="gpuops-reclaim-")
    for sub in ("nodes", "logs", "reports", "ansible-local"):
        os.makedirs(os.path.join(workdir, sub))
    node = OneNode(workdir, SCENARIOS[rung])
    runner = fleet.Runner(workdir, node)
    runs = []
    try:
        for dummy in range(repeat):
            node.rebuild(node.names)
            record = runner.run("reset_gpu", 1, 1)
            status, fixed_by, tried = _outcome(workdir)
            runs.append({"wall_s": record["wall_s"], "walk_s": _walk_seconds(record["tasks"]), "status": status, "fixed_by": fixed_by,
                         "rungs_tried": tried, "tasks": record.get("tasks_per_host"), "modules": record.get("modules_per_host")})
    finally:
        runner.stop()
        node.destroy(node.names)
        shutil.rmtree(workdir, ignore_errors=True)
    return runs


TARGETS = {"kill": lambda grace: grace + 1.0, "reset": lambda grace: 3.0, "reload": lambda grace: 5.0}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per rung; the median is reported (default 3)")
    parser.add_argument("--grace", type=float, default=10.0, help="gpu_reclaim_kill_grace of the runs (default 10, the role's)")
    parser.add_argument("--rungs", default=",".join(SCENARIOS), help="of %s" % ", ".join(SCENARIOS))
    args = parser.parse_args(argv)
    fleet.Runner.argv = _argv_with_grace(fleet.Runner.argv, args.grace)
    results, status = {}, 0
    print("%-7s %-9s %-9s %-8s %-16s %-6s %-8s %s" % ("rung", "walk s", "wall s", "target", "outcome", "tasks", "modules", "met"))
    for rung in [name for name in args.rungs.split(",") if name]:
        runs = measure(rung, args.repeat)
        walk = fleet._median([run["walk_s"] for run in runs])
        wall = fleet._median([run["wall_s"] for run in runs])
        target = TARGETS[rung](args.grace)
        fixed = all(run["status"] == "fixed" and run["fixed_by"] == rung for run in runs)
        met = fixed and walk <= target
        status = status or (0 if met else 1)
        last = runs[-1]
        outcome = "%s by %s" % (last["status"], last["fixed_by"])
        cells = (rung, walk, wall, target, outcome, last["tasks"], last["modules"], "met" if met else "MISSED")
        print("%-7s %-9s %-9s <= %-5s %-16s %-6s %-8s %s" % cells)
        results[rung] = {"walk_s": walk, "wall_s": wall, "target_walk_s": target, "met": met, "runs": runs}
    print(json.dumps({"bench": "reclaim_time", "grace": args.grace, "repeat": args.repeat, "results": results}, sort_keys=True))
    return status


def _argv_with_grace(argv, grace):
    def with_grace(self, kind, inventory, forks):
        return [item if not item.startswith("gpu_reclaim_kill_grace=") else "gpu_reclaim_kill_grace=%s" % grace
                for item in argv(self, kind, inventory, forks)]
    return with_grace


if __name__ == "__main__":
    sys.exit(main())
