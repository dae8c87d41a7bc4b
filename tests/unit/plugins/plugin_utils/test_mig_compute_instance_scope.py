# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A process is in every compute instance whose nvidia-caps node it holds: one holding the nodes of two compute instances
of the same GPU instance is in both, and a run narrowed to one of them ends nothing that would also end work in the
other (gpu_kill refuses it, check mode alike, naming the compute instance left out). The instance rung never destroys a
GPU instance while a job runs in one of its compute instances, whether the run names the whole GPU or the idle
compute instance beside the job's. Through ansible-playbook on a
simulated A100 whose 3g.40gb GPU instance is split in two compute instances, the process a real one holding the
simulated device files."""

from __future__ import annotations

import os
import subprocess
import sys

from ansible_collections.gpuops.remediation.plugins.module_utils.simulation import _sim_build as sim
from ansible_collections.gpuops.remediation.plugins.module_utils.simulation import _sim_mig as sim_mig
from ansible_collections.gpuops.remediation.plugins.module_utils.simulation import _sim_tools as sim_tools
from ansible_collections.gpuops.remediation.plugins.module_utils.simulation import _sim_state as sim_state
from ansible_collections.gpuops.remediation.tests.unit.helpers import bounded
from ansible_collections.gpuops.remediation.tests.unit.helpers.mig_play import narrowed_kills, play, refused_beyond

A100 = "NVIDIA A100-SXM4-80GB"
HOLD = "import sys\nfiles = [open(path) for path in sys.argv[1:]]\nsys.stdout.write('held\\n')\nsys.stdout.flush()\nsys.stdin.read()\n"


def split_node(root, ghost_mib=0):
    """GPU 0: GPU instance 1 (3g.40gb) split into compute instances 0 and 1 (one slice each), as
    `nvidia-smi mig -cci 0,0 -gi 1` leaves it, with ghost_mib in it that no process accounts for; the driver's
    capabilities files and nvidia-caps nodes published for both; returns the GI's and the two CIs' nodes."""
    sim.create_node(root, {"gpus": [{"name": A100, "memory_mib": 81920, "mig_mode": True, "mig_instances": [{"profile": "3g.40gb"}]}]})

    def split(state):
        gi = state["gpus"][0]["gpu_instances"][0]
        gi["compute_instances"] = [{"id": 0, "profile_id": 0}, {"id": 1, "profile_id": 0}]
        gi["ghost_mib"] = ghost_mib
    sim_tools._publish_mig(root, sim_state.update_state(root, split))  # pylint: disable=protected-access
    return [os.path.join(root, "dev", "nvidia-caps", "nvidia-cap%d" % sim_mig.cap_minor(0, gi, ci)) for gi, ci in ((1, None), (1, 0), (1, 1))]


def test_a_process_in_two_compute_instances_is_in_both_and_a_narrowed_kill_refuses_it(tmp_path, node_root, collections_root):
    gi_node, ci0_node, ci1_node = split_node(node_root)
    paths = [os.path.join(node_root, "dev", "nvidia0"), gi_node, ci0_node, ci1_node]
    both = bounded.start([sys.executable, "-c", HOLD] + paths, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert bounded.line(both, "the process holding the files") == "held"
        results = play(tmp_path, collections_root, node_root, ["gpuops.remediation.gpu_holders_info: {gpus: [\"0:1/1\"]}"] + narrowed_kills(["0:1/1", "0:1/0"]),
                       ["info", "plan1", "real1", "plan0", "real0"])
        for name, left_out in (("plan1", "0:1/0"), ("real1", "0:1/0"), ("plan0", "0:1/1"), ("real0", "0:1/1")):
            assert refused_beyond(results[name], name, both.pid)["outside"] == "MIG instance %s" % left_out, name
            assert "MIG instance %s" % left_out in results[name]["msg"], (name, results[name]["msg"])
        assert both.poll() is None  # it runs on
        seen = [h for h in results["info"]["holders"] if h["pid"] == both.pid][0]
        assert sorted((i["gpu_instance_id"], i["compute_instance_id"]) for i in seen["mig_instances"]) == [(1, 0), (1, 1)]
    finally:
        both.stdin.close()
        bounded.wait(both, "the process holding the files")


def test_the_instance_rung_leaves_a_gpu_instance_whose_other_compute_instance_runs_a_job(tmp_path, node_root, collections_root):
    gi_node, dummy_ci0, ci1_node = split_node(node_root, ghost_mib=4096)
    job = bounded.start([sys.executable, "-c", HOLD, os.path.join(node_root, "dev", "nvidia0"), gi_node, ci1_node],
                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert bounded.line(job, "the job in compute instance 1") == "held"
        layout_before = sim_state.load_state(node_root)["gpus"][0]["gpu_instances"]
        tasks = []
        for key in ("0", "0:1/0"):
            task = "gpuops.remediation.gpu_mig_recreate: {gpus: [\"%s\"]}\n      ignore_errors: true" % key
            tasks += [task + "\n      check_mode: true", task]
        names = ["plan_gpu", "real_gpu", "plan_ci", "real_ci"]
        results = play(tmp_path, collections_root, node_root, tasks, names)
        for name in names:
            result = results[name]
            assert result["failed"] is True and result["changed"] is False and result["instances"] == [], (name, result.get("plan"))
            assert [entry["gi"] for entry in result["refused"]] == [1], name
        assert "held by pid %d" % job.pid in results["real_gpu"]["refused"][0]["why"]
        assert "0:1/1" in results["real_ci"]["refused"][0]["why"]
        assert sim_state.load_state(node_root)["gpus"][0]["gpu_instances"] == layout_before
        assert job.poll() is None
    finally:
        job.stdin.close()
        bounded.wait(job, "the job in compute instance 1")
