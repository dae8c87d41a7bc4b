# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""An nvidia-caps node is in every instance whose capabilities access file names its minor: when two files name the same
one, a process holding it is counted in both (never in whichever file was read last), so a run narrowed to one of them
refuses it and the other instance counts it as its holder. A DeviceFileMinor that is not plain ASCII digits (negative,
hexadecimal, other digits, too long) names no node. A process holding another GPU's instance node is on that GPU too.
Through ansible-playbook on simulated A100s split in instances, the processes real ones holding the simulated device
files."""

from __future__ import annotations

import os
import subprocess
import sys

from ansible_collections.gpuops.remediation.plugins.module_utils.probes import _mig_caps as mig_caps
from ansible_collections.gpuops.remediation.plugins.module_utils.simulation import _sim_build as sim
from ansible_collections.gpuops.remediation.plugins.module_utils.simulation import _sim_mig as sim_mig
from ansible_collections.gpuops.remediation.tests.unit.helpers import bounded
from ansible_collections.gpuops.remediation.tests.unit.helpers.mig_play import narrowed_kills, play, refused_beyond

A100 = "NVIDIA A100-SXM4-80GB"
HOLD = "import sys\nfiles = [open(path) for path in sys.argv[1:]]\nsys.stdout.write('held\\n')\nsys.stdout.flush()\nsys.stdin.read()\n"


def access_file(root, gi):
    return os.path.join(root, "proc", "driver", "nvidia", "capabilities", "gpu0", "mig", "gi%d" % gi, "access")


def test_a_minor_two_access_files_name_is_both_instances_and_a_narrowed_kill_refuses_its_holder(tmp_path, node_root, collections_root):
    sim.create_node(node_root, {"gpus": [{"name": A100, "memory_mib": 81920, "mig_mode": True,
                                          "mig_instances": [{"profile": "1g.10gb"} for dummy in range(7)]}]})
    with open(access_file(node_root, 5), "w", encoding="ascii") as handle:  # instance 5's file names instance 3's node
        handle.write("DeviceFileMinor: %d\nDeviceFileMode: 292\nDeviceFileModify: 1\n" % sim_mig.cap_minor(0, 3))
    node = os.path.join(node_root, "dev", "nvidia-caps", "nvidia-cap%d" % sim_mig.cap_minor(0, 3))
    holder = bounded.start([sys.executable, "-c", HOLD, os.path.join(node_root, "dev", "nvidia0"), node],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert bounded.line(holder, "the process holding the files") == "held"
        results = play(tmp_path, collections_root, node_root, ["gpuops.remediation.gpu_holders_info: {gpus: [\"0\"]}"] + narrowed_kills(["0:5"]),
                       ["info", "plan", "real"])
        for name in ("plan", "real"):
            assert refused_beyond(results[name], name, holder.pid)["outside"] == "MIG instance 0:3", name
        assert holder.poll() is None  # it runs on
        seen = [h for h in results["info"]["holders"] if h["pid"] == holder.pid][0]
        assert [i["gpu_instance_id"] for i in seen["mig_instances"]] == [3, 5]
        instances = dict((gi["id"], gi["holders"]) for gi in results["info"]["gpus"][0]["gpu_instances"])
        assert instances[3] == [holder.pid] and instances[5] == [holder.pid]
    finally:
        holder.stdin.close()
        bounded.wait(holder, "the process holding the files")


def test_a_minor_that_is_not_plain_ascii_digits_names_no_node(tmp_path):
    texts = {1: "DeviceFileMinor: -12\n", 2: "DeviceFileMinor: 1%s\n" % ("0" * 20), 3: "DeviceFileMinor: 0x1f\n",
             4: "DeviceFileMinor: \u0664\u0660\n", 6: "DeviceFileMinor: 4 1\n", 7: "Device File Minor: 41\n",
             5: "DeviceFileMode: 292\n  DeviceFileMinor:\t40 \n"}
    for gi, text in texts.items():
        path = tmp_path / "gpu0" / "mig" / ("gi%d" % gi) / "access"
        path.parent.mkdir(parents=True)
        path.write_text(text, encoding="utf-8")
    assert mig_caps.instance_minors(str(tmp_path)) == {40: [{"gpu": 0, "gi": 5, "ci": None}]}


def test_a_process_holding_another_gpus_instance_node_is_refused_by_a_run_on_this_gpu(tmp_path, node_root, collections_root):
    """The nvidia-caps node of GPU 1's instance puts the process in that instance, whether or not it holds /dev/nvidia1:
    a run on GPU 0 alone (whole, or narrowed to an instance of it) would end its work there, and refuses it, naming it."""
    sim.create_node(node_root, {"gpus": [{"name": A100, "memory_mib": 81920, "mig_mode": True, "mig_instances": ["1g.10gb"] * 7},
                                         {"name": A100, "memory_mib": 81920, "mig_mode": True, "mig_instances": ["1g.10gb"] * 2}]})
    caps = os.path.join(node_root, "dev", "nvidia-caps")
    paths = [os.path.join(node_root, "dev", "nvidia0"), os.path.join(caps, "nvidia-cap%d" % sim_mig.cap_minor(0, 3)),
             os.path.join(caps, "nvidia-cap%d" % sim_mig.cap_minor(1, 1))]
    holder = bounded.start([sys.executable, "-c", HOLD] + paths, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert bounded.line(holder, "the process holding the files") == "held"
        names = ["plan_instance", "real_instance", "plan_gpu", "real_gpu"]
        results = play(tmp_path, collections_root, node_root, narrowed_kills(["0:3", "0"]), names)
        for name in names:
            assert refused_beyond(results[name], name, holder.pid)["outside"].startswith("GPU 1"), name
        assert holder.poll() is None  # it runs on
    finally:
        holder.stdin.close()
        bounded.wait(holder, "the process holding the files")
