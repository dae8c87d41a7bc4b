# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A walk narrowed to a MIG instance climbs no higher than the instance rung: a reset, a reload, the graphics restart
and a reboot reach the whole GPU or the whole node, every other instance's jobs with them, whatever max_rung and
allow_reboot allow. When the instance rung cannot get the memory back, the run fails saying so and naming the whole GPU
as what would allow more, check mode alike. Through reset_gpu.yml, as an operator runs it, on a simulated A100 split in
seven: six instances run jobs, instance 3 holds ghost memory and a zombie whose parent never reaps it (and may not be
ended), so the instance is never empty."""

from __future__ import annotations

import json
import os

from ansible_collections.gpuops.remediation.plugins.module_utils.simulation import _sim_build as sim
from ansible_collections.gpuops.remediation.plugins.module_utils.simulation import _sim_state as sim_state
from ansible_collections.gpuops.remediation.tests.unit.helpers.reset_run import reset_gpu, resets

A100 = "NVIDIA A100-SXM4-80GB"
NARROWED = {"gpu_reclaim_gpus": ["0:3"], "gpu_reclaim_max_rung": "reboot", "gpu_reclaim_allow_reboot": True,
            "gpu_reclaim_allow_parent_termination": False}


def test_a_walk_narrowed_to_an_instance_stops_at_the_instance_rung_whatever_max_rung_allows(tmp_path, node_root, collections_root):
    instances = [{"profile": "1g.10gb", "ghost_mib": 4096 if gi == 3 else 0} for gi in range(1, 8)]
    holders = [{"gpus": [0], "mig_instance": gi, "memory_mib": 1024, "running": True} for gi in (1, 2, 4, 5, 6, 7)]
    holders.append({"gpus": [0], "mig_instance": 3, "memory_mib": 512, "kind": "zombie"})
    sim.create_node(node_root, {"gpus": [{"name": A100, "memory_mib": 81920, "mig_mode": True, "mig_instances": instances}], "holders": holders})
    jobs = sorted(h["pid"] for h in sim_state.load_state(node_root)["holders"] if h.get("running"))
    checked, dummy, dummy_commands = reset_gpu(str(tmp_path), node_root, collections_root, extra=["--check", "-e", json.dumps(NARROWED)])
    with open(os.path.join(str(tmp_path), "reports-node", "latest-plan.json"), encoding="utf-8") as handle:
        plan = json.load(handle)["hosts"][0]
    run, report, commands = reset_gpu(str(tmp_path), node_root, collections_root, extra=["-e", json.dumps(NARROWED)])
    for name, entry in (("check", plan), ("real", report)):
        assert [step["rung"] for step in entry["rungs_tried"]] == ["instance"], (name, entry["msg"])
        assert entry["rungs_tried"][0]["failed"] is True, name
        assert "narrows the run to MIG instance 0:3" in entry["msg"] and "whole GPU (0)" in entry["msg"], (name, entry["msg"])
    assert report["status"] == "failed" and run.returncode != 0
    assert resets(commands) == []
    assert all(os.path.exists("/proc/%d" % pid) for pid in jobs) and len(jobs) == 6
