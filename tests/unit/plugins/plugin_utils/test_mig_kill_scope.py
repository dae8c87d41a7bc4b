# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A run narrowed to one MIG instance ends nothing outside it: a process that holds the nvidia-caps nodes of the selected
instance and of a neighbour's instance too is in both, and ending it would end what it does in the neighbour's; gpu_kill
refuses it (check mode alike), naming the instance, as it refuses a process holding a GPU outside the selection. Through
ansible-playbook on a simulated A100 split in seven, the process a real one holding the simulated device files."""

from __future__ import annotations

import os
import subprocess
import sys

from ansible_collections.gpuops.remediation.plugins.module_utils.simulation import _sim_build as sim
from ansible_collections.gpuops.remediation.tests.unit.helpers import bounded
from ansible_collections.gpuops.remediation.tests.unit.helpers.mig_play import play

A100 = "NVIDIA A100-SXM4-80GB"
HOLD = "import sys\nfiles = [open(path) for path in sys.argv[1:]]\nsys.stdout.write('held\\n')\nsys.stdout.flush()\nsys.stdin.read()\n"


def cap_node(root, gi):
    """The nvidia-caps node of GPU instance gi of GPU 0, by the DeviceFileMinor its capabilities file names."""
    with open(os.path.join(root, "proc", "driver", "nvidia", "capabilities", "gpu0", "mig", "gi%d" % gi, "access"), encoding="ascii") as handle:
        minor = [line.split(":")[1].strip() for line in handle if line.startswith("DeviceFileMinor:")][0]
    return os.path.join(root, "dev", "nvidia-caps", "nvidia-cap%s" % minor)


def test_a_process_in_the_selected_instance_and_a_neighbours_is_not_ended(tmp_path, node_root, collections_root):
    sim.create_node(node_root, {"gpus": [{"name": A100, "memory_mib": 81920, "mig_mode": True,
                                          "mig_instances": [{"profile": "1g.10gb"} for dummy in range(7)]}]})
    paths = [os.path.join(node_root, "dev", "nvidia0"), cap_node(node_root, 3), cap_node(node_root, 5)]
    both = bounded.start([sys.executable, "-c", HOLD] + paths, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert bounded.line(both, "the process holding the files") == "held"
        task = "gpuops.remediation.gpu_kill: {gpus: [\"0:3\"], end_running_jobs: true}\n      ignore_errors: true"
        results = play(tmp_path, collections_root, node_root, ["gpuops.remediation.gpu_holders_info: {gpus: [\"0:3\"]}",
                                                               task + "\n      check_mode: true", task], ["info", "plan", "real"])
        seen = [h for h in results["info"]["holders"] if h["pid"] == both.pid]
        assert [i["gpu_instance_id"] for i in seen[0]["mig_instances"]] == [3, 5]
        for name in ("plan", "real"):
            result = results[name]
            assert result["failed"] is True and result["changed"] is False, (name, result.get("signalled"))
            assert [p["pid"] for p in result["beyond_selection"]] == [both.pid]
            assert "MIG instance 0:5" in result["msg"], result["msg"]
        assert both.poll() is None  # it runs on
    finally:
        both.stdin.close()
        bounded.wait(both, "the process holding the files")
