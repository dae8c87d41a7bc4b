# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulated node's MIG: real A100/H100 profiles and placements, the memory-slice rule, and
nvidia-smi mig -cgi / -lgi run as the executables gpu_sim writes, compared with the real captures."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from ansible_collections.gpuops.remediation.plugins.module_utils._node import NodeLayout
from ansible_collections.gpuops.remediation.plugins.module_utils.probes import _mig_caps as mig_caps
from ansible_collections.gpuops.remediation.plugins.module_utils.probes import _nvsmi
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._device_nodes import DeviceTable
from ansible_collections.gpuops.remediation.plugins.module_utils.simulation import _sim_build as sim
from ansible_collections.gpuops.remediation.plugins.module_utils.simulation import _sim_mig as mig
from ansible_collections.gpuops.remediation.plugins.module_utils.simulation import _sim_state as sim_state
from ansible_collections.gpuops.remediation.tests.unit.helpers import bounded

A100 = "NVIDIA A100-SXM4-80GB"
H100 = "NVIDIA H100 80GB HBM3"
FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures")
REAL_MIG = os.path.join(FIXTURES, "nvidia-smi-mig")


def mig_gpu(name=A100):
    return {"index": 0, "name": name, "mig_mode": {"current": True, "pending": True}}


def smi(root, *args):
    return bounded.run([os.path.join(root, "bin", "nvidia-smi")] + list(args), "simulated nvidia-smi %s" % " ".join(args),
                       capture_output=True, text=True)


@pytest.mark.parametrize("name", [A100, H100])
def test_profiles_are_the_real_seven_with_their_placements(name):
    table = mig.profiles(name)
    names = sorted(profile["name"] for profile in table.values())
    assert names == sorted(["1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"])
    assert table[19]["starts"] == (0, 1, 2, 3, 4, 5, 6) and table[19]["size"] == 1
    assert table[9]["starts"] == (0, 4) and table[9]["size"] == 4
    assert table[0]["starts"] == (0,) and table[0]["size"] == mig.MEMORY_SLICES


def test_the_memory_of_a_2g_instance_is_the_real_a100_80gb_one():
    # fb_memory_usage total of each 2g.20gb mig_device in the real A100-SXM4-80GB -q -x capture
    with open(os.path.join(FIXTURES, "nvidia-smi-qx", "v12-a100-sxm4-mig-535.54.03.xml")) as handle:
        assert "<total>19968 MiB</total>" in handle.read()
    assert mig.profiles(A100)[14]["memory_mib"] == 19968


def test_seven_1g_instances_fill_the_gpu_and_an_eighth_has_no_room():
    gpu = mig_gpu()
    starts = [mig.create_gpu_instance(gpu, 19)["start"] for _count in range(7)]
    assert starts == [0, 1, 2, 3, 4, 5, 6]
    with pytest.raises(mig.MigError, match="^Insufficient Resources$"):
        mig.create_gpu_instance(gpu, 19)


def test_a_placement_overlapping_an_instance_is_refused_and_the_free_one_is_taken():
    gpu = mig_gpu(H100)
    mig.create_gpu_instance(gpu, 19, start=0)
    # 3g.40gb may start at 0 or 4 only: slice 0 is taken, so it goes to 4
    assert mig.create_gpu_instance(gpu, 9)["start"] == 4
    with pytest.raises(mig.MigError, match="Insufficient Resources"):
        mig.create_gpu_instance(gpu, 9)  # the 4-slice placement at 0 overlaps the 1g at slice 0
    with pytest.raises(mig.MigError, match="Invalid Argument"):
        mig.create_gpu_instance(gpu, 9, start=2)  # not a placement of 3g.40gb


def test_4g_plus_3g_use_all_seven_compute_slices():
    gpu = mig_gpu()
    assert (mig.create_gpu_instance(gpu, 5)["start"], mig.create_gpu_instance(gpu, 9)["start"]) == (0, 4)
    with pytest.raises(mig.MigError, match="Insufficient Resources"):
        mig.create_gpu_instance(gpu, 19)


def test_only_one_media_extension_instance():
    gpu = mig_gpu()
    mig.create_gpu_instance(gpu, 20)
    with pytest.raises(mig.MigError, match="Insufficient Resources"):
        mig.create_gpu_instance(gpu, 20)


def test_no_instance_without_mig_mode_and_a_gi_with_a_ci_is_not_destroyed():
    with pytest.raises(mig.MigError, match="Not Supported"):
        mig.create_gpu_instance({"index": 0, "name": A100, "mig_mode": None}, 19)
    gpu = mig_gpu()
    gi = mig.create_gpu_instance(gpu, 14)
    mig.create_compute_instance(gpu, gi["id"])
    with pytest.raises(mig.MigError, match="In use by another client"):
        mig.destroy_gpu_instance(gpu, gi["id"])
    gi["compute_instances"] = []
    mig.destroy_gpu_instance(gpu, gi["id"])
    assert gpu["gpu_instances"] == []


def test_cgi_on_the_simulated_node_says_what_the_real_tool_says(node_root):
    sim.create_node(node_root, {"gpus": [{"name": A100, "memory_mib": 81920, "mig_mode": True}]})
    result = smi(node_root, "mig", "-cgi", "9,9,9", "-C")
    lines = result.stdout.splitlines()
    assert result.returncode != 0
    assert lines[0] == "Successfully created GPU instance ID  1 on GPU  0 using profile MIG 3g.40gb (ID  9)"
    assert lines[1] == "Successfully created compute instance ID  0 on GPU  0 GPU instance ID  1 using profile MIG 3g.40gb (ID  2)"
    with open(os.path.join(REAL_MIG, "cgi-insufficient-resources-then-success.txt")) as handle:
        real = handle.read().splitlines()
    # the refusal is word for word the real one, with the profile as the operator wrote it
    assert lines[4:] == [line.replace("20", "9") for line in real[1:3]]
    state = sim_state.load_state(node_root)
    assert [(gi["id"], gi["start"]) for gi in state["gpus"][0]["gpu_instances"]] == [(1, 0), (2, 4)]


def test_lgi_lists_each_instance_with_its_placement(node_root):
    sim.create_node(node_root, {"gpus": [{"name": H100, "memory_mib": 81559, "mig_mode": True}]})
    assert smi(node_root, "mig", "-lgi").returncode != 0
    assert smi(node_root, "mig", "-cgi", "1g.10gb,MIG 2g.20gb").returncode == 0
    rows = [line for line in smi(node_root, "mig", "-lgi").stdout.splitlines() if "MIG " in line]
    expected = [["0", "MIG", "1g.10gb", "19", "1", "0:1"], ["0", "MIG", "2g.20gb", "14", "2", "2:2"]]
    assert [row.split()[1:7] for row in rows] == expected


def test_the_cap_minors_are_the_drivers_layout():
    # the MIG user guide's example: gpu0/mig/gi1/access says DeviceFileMinor: 12; config 1 and monitor 2 come first
    assert mig.cap_minor(0, 1) == 12
    assert mig.cap_minor(0, 1, 0) == 13
    assert mig.cap_minor(0, 0) == 3
    assert mig.cap_minor(1, 0) == 3 + 135


def test_created_instances_show_their_capabilities_files_and_cap_nodes(node_root):
    sim.create_node(node_root, {"gpus": [{"name": H100, "memory_mib": 81559, "mig_mode": False},
                                         {"name": H100, "memory_mib": 81559, "mig_mode": True}]})
    assert smi(node_root, "mig", "-i", "1", "-cgi", "19,19", "-C").returncode == 0
    layout = NodeLayout(node_root)
    minors = mig_caps.instance_minors(layout.mig_capabilities_dir)
    expected = {mig.cap_minor(1, 1): [{"gpu": 1, "gi": 1, "ci": None}], mig.cap_minor(1, 1, 0): [{"gpu": 1, "gi": 1, "ci": 0}],
                mig.cap_minor(1, 2): [{"gpu": 1, "gi": 2, "ci": None}], mig.cap_minor(1, 2, 0): [{"gpu": 1, "gi": 2, "ci": 0}]}
    assert minors == expected
    nodes = sorted(mig_caps.cap_minor_from_name(name) for name in os.listdir(os.path.join(node_root, "dev", "nvidia-caps")))
    assert nodes == sorted(expected)


def test_an_access_file_without_a_minor_and_odd_names_are_skipped(tmp_path):
    gi_dir = tmp_path / "gpu0" / "mig" / "gi3"
    (gi_dir / "ci0").mkdir(parents=True)
    (gi_dir / "access").write_text("DeviceFileMode: 292\n")
    (gi_dir / "ci0" / "access").write_text("DeviceFileMinor: 40\nDeviceFileMode: 292\nDeviceFileModify: 1\n")
    (tmp_path / "gpu0" / "mig" / "gi-x").mkdir()
    (tmp_path / "notgpu").mkdir()
    assert mig_caps.instance_minors(str(tmp_path)) == {40: [{"gpu": 0, "gi": 3, "ci": 0}]}
    assert mig_caps.instance_minors(str(tmp_path / "missing")) == {}
    assert mig_caps.cap_minor_from_name("/dev/nvidia-caps/nvidia-cap12") == 12
    assert mig_caps.cap_minor_from_name("/dev/nvidia0") is None


def test_list_names_each_mig_device_as_the_real_tool_does(node_root):
    sim.create_node(node_root, {"gpus": [{"name": A100, "memory_mib": 81920, "mig_mode": True}]})
    assert smi(node_root, "mig", "-cgi", "2g.20gb,1g.10gb", "-C").returncode == 0
    lines = smi(node_root, "-L").stdout.splitlines()
    with open(os.path.join(FIXTURES, "nvidia-smi-L", "linux-h200-mig-590.48.01.txt")) as handle:
        real = handle.read().splitlines()
    shape = re.compile(r"^  MIG (\S+) +Device +(\d+): \(UUID: (MIG-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\)$")
    assert all(shape.match(line) for line in real[1:])
    found = [shape.match(line).groups()[:2] for line in lines[1:]]
    assert found == [("2g.20gb", "0"), ("1g.10gb", "1")]
    assert len(set(shape.match(line).group(3) for line in lines[1:])) == 2


def test_query_xml_mig_devices_read_by_the_real_parser(node_root):
    sim.create_node(node_root, {"gpus": [{"name": A100, "memory_mib": 81920, "mig_mode": True}]})
    assert smi(node_root, "mig", "-cgi", "14,14,14", "-C").returncode == 0
    simulated = _nvsmi.parse_query_xml(smi(node_root, "-q", "-x").stdout)["gpus"][0]["mig_devices"]
    with open(os.path.join(FIXTURES, "nvidia-smi-qx", "v12-a100-sxm4-mig-535.54.03.xml")) as handle:
        real = _nvsmi.parse_query_xml(handle.read())["gpus"][0]["mig_devices"]
    assert set(simulated[0]) == set(real[0])
    assert [(d["gpu_instance_id"], d["compute_instance_id"], d["memory_total_mib"]) for d in simulated] == \
        [(1, 0, 19968), (2, 0, 19968), (3, 0, 19968)]
    assert real[0]["memory_total_mib"] == 19968


def test_a_process_holding_an_instance_cap_node_is_attributed_to_that_instance(node_root):
    sim.create_node(node_root, {"gpus": [{"name": H100, "memory_mib": 81559, "mig_mode": True}]})
    assert smi(node_root, "mig", "-cgi", "19,19,19", "-C").returncode == 0
    layout = NodeLayout(node_root)
    minors = mig_caps.instance_minors(layout.mig_capabilities_dir)
    cap = os.path.join(node_root, "dev", "nvidia-caps", "nvidia-cap%d" % mig.cap_minor(0, 2, 0))
    holder = bounded.start([sys.executable, "-c", "import sys; f = open(sys.argv[1], 'rb'); print('ready', flush=True); sys.stdin.read()",
                            cap], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert bounded.line(holder, "the holder opening its instance's cap node").strip() == "ready"
        table = DeviceTable(os.path.join(node_root, "dev"), sys_dir=os.path.join(node_root, "sys"),
                            nvidia_dri=layout.dri_node_rule)
        fd_dir = "/proc/%d/fd" % holder.pid
        devices = [table.device((st.st_mode, st.st_ino, st.st_dev, st.st_rdev))
                   for st in (os.stat(os.path.join(fd_dir, fd)) for fd in os.listdir(fd_dir) if fd not in ("0", "1", "2"))]
        assert mig_caps.instances_held([d for d in devices if d], minors) == {(0, 2, 0)}
    finally:
        holder.kill()
        bounded.wait(holder, "the holder after kill")
