# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulated node's MIG changes, run as the executables gpu_sim writes: -cgi with a placement, -cci, -dci, -dgi,
-lci with the real tool's words and exit codes, and a GPU reset or a driver unload leaving MIG on with no instance."""

from __future__ import annotations

import os
import subprocess
import sys

from ansible_collections.gpuops.remediation.plugins.module_utils.simulation import _sim_build as sim
from ansible_collections.gpuops.remediation.plugins.module_utils.simulation import _sim_mig as mig
from ansible_collections.gpuops.remediation.plugins.module_utils.simulation import _sim_state as sim_state
from ansible_collections.gpuops.remediation.tests.unit.helpers import bounded

A100 = "NVIDIA A100-SXM4-80GB"


def run(root, tool, *args):
    return bounded.run([os.path.join(root, "bin", tool)] + list(args), "simulated %s %s" % (tool, " ".join(args)),
                       capture_output=True, text=True)


def instances(root, index=0):
    gpu = sim_state.load_state(root)["gpus"][index]
    return [(gi["id"], gi["profile_id"], gi["start"], [ci["profile_id"] for ci in gi["compute_instances"]])
            for gi in sorted(gpu.get("gpu_instances", []), key=lambda g: g["id"])]


def mig_node(root, mode=True):
    sim.create_node(root, {"gpus": [{"name": A100, "memory_mib": 81920, "mig_mode": mode}, {"name": A100, "memory_mib": 81920}]})


def test_cgi_takes_the_placement_start_after_a_colon(node_root):
    mig_node(node_root)
    result = run(node_root, "nvidia-smi", "mig", "-i", "0", "-cgi", "19:6,9:0,14:4", "-C")
    assert result.returncode == 0, result.stdout
    assert instances(node_root) == [(1, 19, 6, [0]), (2, 9, 0, [2]), (3, 14, 4, [1])]
    refused = run(node_root, "nvidia-smi", "mig", "-i", "0", "-cgi", "19:5")  # slice 5 is the 2g's (4:2)
    assert refused.returncode == 255
    assert refused.stdout.splitlines() == ["Unable to create a GPU instance on GPU  0 using profile 19:5: Insufficient Resources",
                                           "Failed to create GPU instances: Insufficient Resources"]
    assert run(node_root, "nvidia-smi", "mig", "-i", "0", "-cgi", "9:2").stdout.endswith("Failed to create GPU instances: Invalid Argument\n")


def test_dci_then_dgi_then_cgi_and_cci_recreate_one_instance_in_its_place(node_root):
    mig_node(node_root)
    assert run(node_root, "nvidia-smi", "mig", "-i", "0", "-cgi", "19:0,19:1,19:2", "-C").returncode == 0
    # a GPU instance with a compute instance left is in use: the real refusal, two lines, exit 255
    refused = run(node_root, "nvidia-smi", "mig", "-i", "0", "-dgi", "-gi", "2")
    assert (refused.returncode, refused.stdout.splitlines()) == (255, [
        "Unable to destroy GPU instance ID  2 from GPU  0: In use by another client", "Failed to destroy GPU instances: In use by another client"])
    dci = run(node_root, "nvidia-smi", "mig", "-i", "0", "-dci", "-gi", "2", "-ci", "0")
    assert (dci.returncode, dci.stdout) == (0, "Successfully destroyed compute instance ID  0 from GPU  0 GPU instance ID  2\n")
    dgi = run(node_root, "nvidia-smi", "mig", "-i", "0", "-dgi", "-gi", "2")
    assert (dgi.returncode, dgi.stdout) == (0, "Successfully destroyed GPU instance ID  2 from GPU  0\n")
    assert instances(node_root) == [(1, 19, 0, [0]), (3, 19, 2, [0])]
    assert run(node_root, "nvidia-smi", "mig", "-i", "0", "-cgi", "19:1").returncode == 0
    cci = run(node_root, "nvidia-smi", "mig", "-i", "0", "-cci", "0", "-gi", "2")
    assert cci.stdout == "Successfully created compute instance ID  0 on GPU  0 GPU instance ID  2 using profile MIG 1g.10gb (ID  0)\n"
    assert instances(node_root) == [(1, 19, 0, [0]), (2, 19, 1, [0]), (3, 19, 2, [0])]
    missing = run(node_root, "nvidia-smi", "mig", "-i", "0", "-dgi", "-gi", "9")
    assert missing.returncode == 255 and missing.stdout.endswith("Failed to destroy GPU instances: Not Found\n")


def test_an_instance_a_process_holds_is_not_destroyed(node_root):
    mig_node(node_root)
    assert run(node_root, "nvidia-smi", "mig", "-i", "0", "-cgi", "19:0", "-C").returncode == 0
    cap = os.path.join(node_root, "dev", "nvidia-caps", "nvidia-cap%d" % mig.cap_minor(0, 1, 0))
    holder = bounded.start([sys.executable, "-c", "import sys; f = open(sys.argv[1], 'rb'); print('ready', flush=True); sys.stdin.read()",
                            cap], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert bounded.line(holder, "the holder opening its instance's cap node").strip() == "ready"
        refused = run(node_root, "nvidia-smi", "mig", "-i", "0", "-dci", "-gi", "1")
        assert refused.returncode == 255
        assert refused.stdout.splitlines()[0] == "Unable to destroy compute instance ID  0 from GPU  0 GPU instance ID  1: In use by another client"
        assert instances(node_root) == [(1, 19, 0, [0])]
    finally:
        holder.kill()
        bounded.wait(holder, "the holder after kill")


def test_lci_lists_each_compute_instance(node_root):
    mig_node(node_root)
    assert run(node_root, "nvidia-smi", "mig", "-i", "0", "-lci").stdout == "No compute instances found: Not Found\n"
    assert run(node_root, "nvidia-smi", "mig", "-i", "0", "-cgi", "14:0,19:6", "-C").returncode == 0
    rows = [line.strip("|").split() for line in run(node_root, "nvidia-smi", "mig", "-i", "0", "-lci").stdout.splitlines() if "MIG " in line]
    assert rows == [["0", "1", "MIG", "2g.20gb", "1", "0", "0:2"], ["0", "2", "MIG", "1g.10gb", "0", "0", "0:1"]]


def test_a_reset_leaves_mig_on_with_no_instance_and_applies_a_pending_mode(node_root):
    mig_node(node_root)
    assert run(node_root, "nvidia-smi", "mig", "-i", "0", "-cgi", "9:0,9:4", "-C").returncode == 0
    sim_state.update_state(node_root, lambda state: state["gpus"][1].update(mig_mode={"current": False, "pending": True}))
    assert run(node_root, "nvidia-smi", "--gpu-reset", "-i", "0").returncode == 0
    gpu = sim_state.load_state(node_root)["gpus"][0]
    assert gpu["mig_mode"] == {"current": True, "pending": True} and gpu["gpu_instances"] == []
    assert not os.path.exists(os.path.join(node_root, "dev", "nvidia-caps"))
    assert run(node_root, "nvidia-smi", "mig", "-i", "0", "-lgi").stdout == "No GPU instances found: Not Found\n"
    assert sim_state.load_state(node_root)["gpus"][1]["mig_mode"] == {"current": False, "pending": True}
    assert run(node_root, "nvidia-smi", "--gpu-reset", "-i", "1").returncode == 0
    assert sim_state.load_state(node_root)["gpus"][1]["mig_mode"] == {"current": True, "pending": True}


def test_a_driver_unload_takes_every_instance(node_root):
    mig_node(node_root)
    assert run(node_root, "nvidia-smi", "mig", "-i", "0", "-cgi", "0", "-C").returncode == 0
    assert run(node_root, "modprobe", "-r", "nvidia_drm", "nvidia_modeset", "nvidia_uvm", "nvidia").returncode == 0
    assert run(node_root, "modprobe", "nvidia").returncode == 0
    assert instances(node_root) == []
    assert sim_state.load_state(node_root)["gpus"][0]["mig_mode"]["current"] is True
