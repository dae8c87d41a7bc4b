# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Seeing a MIG GPU's instances: the simulated node's read side (nvidia-smi mig -lci, NVML's MIG calls through
nvidia-ml-py's own wrappers) with real processes inside instances, the two probes (NVML and nvidia-smi) agreeing, and
a selection narrowed to one instance."""

from __future__ import annotations

import os

import pytest

from ansible_collections.gpuops.remediation.plugins.module_utils import _mig_selection as selection
from ansible_collections.gpuops.remediation.plugins.module_utils._node import NodeLayout
from ansible_collections.gpuops.remediation.plugins.module_utils._snapshot import UnknownGpu, select_gpus, unknown_gpu_message
from ansible_collections.gpuops.remediation.plugins.module_utils.probes import _mig_instances as mig
from ansible_collections.gpuops.remediation.plugins.module_utils.probes import _nvsmi
from ansible_collections.gpuops.remediation.plugins.module_utils.simulation import _sim_build as sim
from ansible_collections.gpuops.remediation.plugins.module_utils.simulation._sim_state import SimError
from ansible_collections.gpuops.remediation.tests.unit.helpers import bounded

A100 = "NVIDIA A100-SXM4-80GB"
H100 = "NVIDIA H100 80GB HBM3"
FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures")


def smi(root, *args):
    return bounded.run([os.path.join(root, "bin", "nvidia-smi")] + list(args), "simulated nvidia-smi %s" % " ".join(args),
                       capture_output=True, text=True)


def seven_node(root, ghost_in=None, holders=()):
    """An A100-80GB in seven 1g.10gb instances; `holders`: (GPU instance, MiB) of real processes started inside them."""
    instances = [{"profile": "1g.10gb", "ghost_mib": 2048 if number + 1 == ghost_in else 0} for number in range(7)]
    return sim.create_node(root, {"gpus": [{"name": A100, "memory_mib": 81920, "mig_mode": True, "mig_instances": instances}],
                                  "holders": [{"gpus": [0], "mig_instance": gi, "memory_mib": mib} for gi, mib in holders]})


def test_lci_lists_each_compute_instance_and_not_found_without_any(node_root):
    sim.create_node(node_root, {"gpus": [{"name": H100, "memory_mib": 81559, "mig_mode": True}]})
    empty = smi(node_root, "mig", "-lci")
    assert (empty.returncode, empty.stdout.strip()) == (6, "No compute instances found: Not Found")
    assert smi(node_root, "mig", "-cgi", "3g.40gb,1g.10gb", "-C").returncode == 0
    listed = smi(node_root, "mig", "-lci")
    assert listed.returncode == 0
    assert mig.parse_lci(listed.stdout) == {(0, 1, 0): {"profile_id": 2, "placement": {"start": 0, "size": 3}},
                                            (0, 2, 0): {"profile_id": 0, "placement": {"start": 0, "size": 1}}}
    assert mig.parse_lgi(smi(node_root, "mig", "-lgi").stdout) == {
        (0, 1): {"profile": "3g.40gb", "profile_id": 9, "placement": {"start": 0, "size": 4}},
        (0, 2): {"profile": "1g.10gb", "profile_id": 19, "placement": {"start": 4, "size": 1}}}


def test_scenario_instances_and_a_holder_in_an_instance_it_lacks_are_refused(node_root):
    with pytest.raises(SimError, match=r"gpus\[0\]\.mig_instances\[1\]: profile '7g.80gb' on NVIDIA A100-SXM4-80GB: Insufficient Resources"):
        sim.create_node(node_root, {"gpus": [{"name": A100, "mig_mode": True, "mig_instances": [{"profile": "1g.10gb"}, {"profile": "7g.80gb"}]}]})
    with pytest.raises(SimError, match=r"holders\[0\]\.mig_instance: 3 is not a GPU instance of GPU 0 \(it has: 1\)"):
        sim.create_node(node_root, {"gpus": [{"name": A100, "mig_mode": True, "mig_instances": [{"profile": "1g.10gb"}]}],
                                    "holders": [{"gpus": [0], "mig_instance": 3}]})
    with pytest.raises(SimError, match=r"gpus\[0\]\.mig_instances needs gpus\[0\]\.mig_mode: true"):
        sim.create_node(node_root, {"gpus": [{"name": A100, "mig_instances": [{"profile": "1g.10gb"}]}]})


def test_nvml_mig_calls_through_nvidia_ml_py_see_each_instance_and_its_processes(node_root):
    state = seven_node(node_root, ghost_in=4, holders=[(2, 700), (3, 3000)])
    pids = [holder["pid"] for holder in state["holders"]]
    pynvml = NodeLayout(node_root).load_nvml()
    pynvml.nvmlInit()
    try:
        gpu = pynvml.nvmlDeviceGetHandleByIndex(0)
        assert pynvml.nvmlDeviceGetMaxMigDeviceCount(gpu) == 7
        handles = [pynvml.nvmlDeviceGetMigDeviceHandleByIndex(gpu, index) for index in range(7)]
        assert [pynvml.nvmlDeviceGetGpuInstanceId(h) for h in handles] == [1, 2, 3, 4, 5, 6, 7]
        assert set(pynvml.nvmlDeviceGetComputeInstanceId(h) for h in handles) == {0}
        assert [pynvml.nvmlDeviceGetMemoryInfo(h).used // 2 ** 20 for h in handles] == [0, 700, 3000, 2048, 0, 0, 0]
        assert set(pynvml.nvmlDeviceGetMemoryInfo(h).total // 2 ** 20 for h in handles) == {9728}
        assert [[p.pid for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h)] for h in handles[:4]] == [[], [pids[0]], [pids[1]], []]
        # the GPU's own list names each process's instance
        assert sorted((p.pid, p.gpuInstanceId, p.computeInstanceId) for p in pynvml.nvmlDeviceGetComputeRunningProcesses(gpu)) == \
            sorted([(pids[0], 2, 0), (pids[1], 3, 0)])
        info = pynvml.nvmlGpuInstanceGetInfo(pynvml.nvmlDeviceGetGpuInstanceById(gpu, 3))
        assert (info.id, info.profileId, info.placement.start, info.placement.size) == (3, 19, 2, 1)
        assert pynvml.nvmlDeviceGetName(handles[2]).endswith("MIG 1g.10gb")
        assert pynvml.nvmlDeviceIsMigDeviceHandle(handles[2]).value == 1
        listed = [line.split("UUID: ")[1].rstrip(")") for line in smi(node_root, "-L").stdout.splitlines() if "MIG " in line]
        uuids = [pynvml.nvmlDeviceGetUUID(h) for h in handles]
        assert [u.decode() if isinstance(u, bytes) else u for u in uuids] == listed
        with pytest.raises(pynvml.NVMLError_NotFound):
            pynvml.nvmlDeviceGetMigDeviceHandleByIndex(gpu, 7)
        with pytest.raises(pynvml.NVMLError_InvalidArgument):
            pynvml.nvmlDeviceGetGpuInstanceId(gpu)  # the GPU's own handle is in no instance
    finally:
        pynvml.nvmlShutdown()


def _probe_with_nvml(root):
    pynvml = NodeLayout(root).load_nvml()
    pynvml.nvmlInit()
    try:
        def optional(func, *args):
            try:
                return func(*args)
            except pynvml.NVMLError:
                return None
        devices, placed, dummy_failed = mig.nvml_mig_devices(pynvml, pynvml.nvmlDeviceGetHandleByIndex(0), optional)
        return mig.gpu_instances(devices), placed
    finally:
        pynvml.nvmlShutdown()


def test_the_nvml_and_nvidia_smi_probes_see_the_same_instances(node_root):
    state = seven_node(node_root, ghost_in=5, holders=[(1, 512), (6, 1024)])
    by_nvml, placed = _probe_with_nvml(node_root)
    gpu = _nvsmi.parse_query_xml(smi(node_root, "-q", "-x").stdout)["gpus"][0]
    by_smi = mig.gpu_instances(mig.smi_mig_devices(gpu, mig.parse_lgi(smi(node_root, "mig", "-lgi").stdout),
                                                   mig.parse_lci(smi(node_root, "mig", "-lci").stdout),
                                                   mig.parse_list_uuids(smi(node_root, "-L").stdout)))
    assert placed == {state["holders"][0]["pid"]: (1, 0), state["holders"][1]["pid"]: (6, 0)}
    assert [gi["memory_used_mib"] for gi in by_smi] == [512, 0, 0, 0, 2048, 1024, 0]
    for key in ("id", "profile", "profile_id", "placement", "memory_total_mib", "memory_used_mib"):
        assert [gi[key] for gi in by_nvml] == [gi[key] for gi in by_smi], key
    assert [[ci["uuid"] for ci in gi["compute_instances"]] for gi in by_nvml] == [[ci["uuid"] for ci in gi["compute_instances"]] for gi in by_smi]
    assert all(ci["placement"] == {"start": 0, "size": 1} for gi in by_smi for ci in gi["compute_instances"])


def test_list_uuids_read_from_the_real_h200_capture():
    with open(os.path.join(FIXTURES, "nvidia-smi-L", "linux-h200-mig-590.48.01.txt")) as handle:
        found = mig.parse_list_uuids(handle.read())
    assert sorted(found) == [(0, index) for index in range(5)]
    assert all(uuid.startswith("MIG-") for uuid in found.values())


def test_ghost_memory_is_judged_per_instance_and_holders_placed_by_their_cap_nodes():
    gpus = [{"index": 0, "processes": [{"pid": 10, "used_mib": 700, "gpu_instance_id": 2, "compute_instance_id": 0}],
             "gpu_instances": [{"id": 2, "memory_used_mib": 700, "compute_instances": [{"id": 0}]},
                               {"id": 3, "memory_used_mib": 2048, "compute_instances": [{"id": 0}]}]}]
    holders = [{"pid": 10}, {"pid": 11}, {"pid": 12}]
    mig.attribute(holders, gpus, {10: {(0, 2, None), (0, 2, 0)}, 11: {(0, 3, None), (0, 3, 0)}})
    assert holders[0]["mig_instances"] == [{"gpu": 0, "gpu_instance_id": 2, "compute_instance_id": 0, "seen_by": ["nvidia-caps", "nvml"]}]
    # a process the driver does not list (it holds no memory) is in its instance by the kernel's fact alone
    assert holders[1]["mig_instances"] == [{"gpu": 0, "gpu_instance_id": 3, "compute_instance_id": 0, "seen_by": ["nvidia-caps"]}]
    assert holders[2]["mig_instances"] == []
    assert [(gi["holders"], gi["attributed_mib"], gi["unattributed_mib"]) for gi in gpus[0]["gpu_instances"]] == [([10], 700, 0), ([11], 0, 2048)]


GPUS = [{"index": 0, "uuid": "GPU-aaaa", "pci_bus_id": "00000000:00:03.0",
         "gpu_instances": [{"id": 3, "compute_instances": [{"id": 0, "uuid": "MIG-0000-3"}]}]},
        {"index": 1, "uuid": "GPU-bbbb", "pci_bus_id": "00000000:18:00.0",
         "gpu_instances": [{"id": 3, "compute_instances": [{"id": 0, "uuid": "MIG-1111-3"}]},
                           {"id": 5, "compute_instances": [{"id": 0, "uuid": "MIG-1111-5"}]}]}]


@pytest.mark.parametrize("key, found", [
    ("1:5", (1, 5, None)), ("1:5/0", (1, 5, 0)), ("mig-1111-5", (1, 5, 0)), ("GPU-bbbb:3", (1, 3, None)),
    ("0000:18:00.0:5/0", (1, 5, 0)), ("1:5/1", None), ("1:4", None), ("MIG-none", None), ("2:3", None)])
def test_an_instance_is_named_by_its_mig_uuid_or_gpu_gi_ci(key, found):
    assert selection.resolve_instance(GPUS, key) == found


def test_a_gpu_named_whole_is_not_narrowed_and_a_bus_id_wins():
    assert selection.narrowed_instances(GPUS, ["1:5", "0"]) == {1: {(5, None)}}
    assert selection.narrowed_instances(GPUS, ["1:5", "1"]) == {}
    # a bus id narrows nothing; "0:3" (00:03.0 and instance 3 of GPU 0) is refused by select_gpus: test_mig_selection_ambiguity.py
    assert selection.narrowed_instances(GPUS, ["0:3"]) == {}
    assert select_gpus(GPUS, ["0000:00:03.0", "MIG-1111-3"]) == [0, 1]


def test_a_narrowed_selection_reaches_only_the_holders_in_its_instances():
    instances = selection.narrowed_instances(GPUS, ["1:5"])
    inside = {"gpus": [1], "mig_instances": [{"gpu": 1, "gpu_instance_id": 5, "compute_instance_id": 0}]}
    neighbour = {"gpus": [1], "mig_instances": [{"gpu": 1, "gpu_instance_id": 3, "compute_instance_id": 0}]}
    outside_any = {"gpus": [1], "mig_instances": []}
    assert [selection.reaches(h, [1], instances) for h in (inside, neighbour, outside_any)] == [True, False, False]
    assert [selection.reaches(h, [1], {}) for h in (inside, neighbour, outside_any)] == [True, True, True]
    assert selection.scope_words(instances).startswith("the selection is MIG instance 1:5: only holders in it are ended")


def test_an_instance_the_node_lacks_is_refused_listing_the_instances_it_has():
    with pytest.raises(UnknownGpu) as caught:
        select_gpus(GPUS, ["1:9"])
    message = unknown_gpu_message(caught.value)
    assert message.startswith("gpus: no GPU or MIG instance on this node is named '1:9' (give an index, a UUID, a PCI bus id, "
                              "a MIG device UUID or GPU:GI[/CI])")
    assert message.endswith("MIG instances: 0:3/0 (MIG-0000-3), 1:3/0 (MIG-1111-3), 1:5/0 (MIG-1111-5)")
    # a node without MIG says what it always said
    with pytest.raises(UnknownGpu) as plain:
        select_gpus([{"index": 0, "uuid": "GPU-x", "pci_bus_id": "00000000:18:00.0"}], ["7"])
    assert "MIG" not in unknown_gpu_message(plain.value)
