# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ghost memory on Windows (_node_snapshot.ghost_memory): from the adapter-level figure or the driver's per-process
view, never from the sum of the per-process counters, which are not additive; unknown (None), never 0, where WDDM
gives N/A and no adapter figure exists; a counter sample of -1 is no sample."""

from __future__ import annotations

import json

import pytest

from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.tools import _gpu_memory_counters
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.simulation import _simulated_node
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows import _node_snapshot
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node._remote_node import SimulatedNode

MIB = 1024 * 1024


def gpu(used, processes, luid="0x00000000_0x0000fa7a"):
    return {"index": 0, "memory_used_mib": used, "processes": processes, "luid": luid}


def test_under_wddm_the_adapter_figure_decides_and_a_huge_process_counter_hides_nothing():
    # the es-ES capture's shape: dwm's counter at 9.4 GB on an adapter using 0.99 GB; nvidia-smi says 1500 MiB in use
    ghost = _node_snapshot.ghost_memory(gpu(1500, [{"pid": 2056, "used_mib": None}]), 1014 * MIB)
    assert ghost == {"ghost_mib": 486, "attributed_mib": 1014, "source": "adapter_counter", "reason": None}


def test_under_wddm_without_an_adapter_figure_ghost_memory_is_unknown_not_0():
    ghost = _node_snapshot.ghost_memory(gpu(1500, [{"pid": 2056, "used_mib": None}]), None)
    assert ghost["ghost_mib"] is None and ghost["attributed_mib"] is None and "N/A" in ghost["reason"]
    unjoined = _node_snapshot.ghost_memory(gpu(1500, [{"pid": 2056, "used_mib": None}], luid=None), None)
    assert unjoined["ghost_mib"] is None and "LUID" in unjoined["reason"]


def test_under_tcc_the_driver_per_process_view_decides():
    ghost = _node_snapshot.ghost_memory(gpu(6000, [{"pid": 1, "used_mib": 4096}, {"pid": 2, "used_mib": 400}]), None)
    assert ghost == {"ghost_mib": 1504, "attributed_mib": 4496, "source": "nvidia_smi_processes", "reason": None}


def test_no_memory_figure_is_no_ghost_figure():
    assert _node_snapshot.ghost_memory(gpu(None, []), 10 * MIB)["ghost_mib"] is None


@pytest.mark.parametrize("row", [{"Name": "luid_0x00000000_0x0000fa7a_phys_0", "DedicatedUsage": -1},
                                 {"InstanceName": "luid_0x00000000_0x0000fa7a_phys_0", "CookedValue": -1}])
def test_an_adapter_sample_of_minus_1_is_no_sample(row):
    assert _gpu_memory_counters.parse_adapter_memory(json.dumps([row])) == {}


def test_a_process_sample_of_minus_1_is_no_sample_never_minus_1_bytes():
    reading = _gpu_memory_counters.parse_cim_process_memory(json.dumps([
        {"Name": "pid_7_luid_0x00000000_0x0000fa7a_phys_0", "DedicatedUsage": -1, "SharedUsage": -1},
        {"Name": "pid_8_luid_0x00000000_0x0000fa7a_phys_0", "DedicatedUsage": 5 * MIB, "SharedUsage": 0}]))
    assert "dedicated_bytes" not in reading.by_pid[7] and reading.by_pid[8]["dedicated_bytes"] == 5 * MIB


def test_the_snapshot_reads_ghost_memory_from_the_adapter_through_overstating_and_exited_counters(tmp_path):
    root = str(tmp_path / "ws")
    _simulated_node.write_node(root, _simulated_node.build_state({"hostname": "WS12", "gpus": [{"ghost_mib": 900}], "processes": [
        {"name": "browser.exe", "graphics": True, "memory_mib": 300, "counter_mib": 9400},
        {"name": "python.exe", "memory_mib": 2048, "counter_mib": -1}]}))
    snapshot = _node_snapshot.take(SimulatedNode(root))
    [card] = snapshot["gpus"]
    assert card["unattributed_mib"] == 900 and card["ghost_source"] == "adapter_counter" and card["state"] == "stuck"
    assert snapshot["verdict"]["rung"] == "restart_adapter"
    python = next(h for h in snapshot["holders"] if h["name"] == "python.exe")
    assert python["class"] == "compute" and python["used_mib"] is None  # its -1 sample is no figure, nvidia-smi says N/A
    assert snapshot["probes"]["adapter_memory"]["ok"]


# A counter is not memory: a per-process figure larger than what the GPU uses is not taken as residency (issue 26, rule 7).
def test_a_process_counter_larger_than_the_gpus_use_is_not_memory_held():
    card = {"index": 0, "memory_used_mib": 2990, "luid": "0x00000000_0x0000fa7a"}
    dwm = {"used_mib": 8996, "used_mib_by_gpu": {"0": 8996}, "nvidia_smi_used_mib": None}
    fields = _node_snapshot.counter_residency(dwm, [card], {})
    assert fields["used_mib"] is None and fields["used_mib_by_gpu"] == {} and fields["used_mib_source"] is None
    assert fields["counter_dedicated_mib_by_gpu"] == {"0": 8996}
    assert fields["used_mib_reason"] == ("its Dedicated Usage counter on GPU 0 (8996 MiB) is larger than the memory that GPU "
                                         "uses (2990 MiB): not memory held")


def test_a_counter_within_the_gpus_use_is_memory_held_and_says_so():
    card = {"index": 0, "memory_used_mib": 2990}
    fields = _node_snapshot.counter_residency({"used_mib": 2990, "used_mib_by_gpu": {"0": 2990}}, [card], {})
    assert "used_mib" not in fields and fields["used_mib_by_gpu"] == {"0": 2990} and fields["used_mib_source"] == "counter"


def test_without_nvidia_smis_figure_the_adapter_counter_is_the_limit_and_nvidia_smi_figure_stands_in():
    cards = [{"index": 0, "memory_used_mib": None, "luid": "0x0_0x1"}, {"index": 1, "memory_used_mib": 4000}]
    holder = {"used_mib": 9000, "used_mib_by_gpu": {"0": 6000, "1": 3000}, "nvidia_smi_used_mib": 512}
    fields = _node_snapshot.counter_residency(holder, cards, {"0x0_0x1": 1000 * MIB})
    assert fields["used_mib"] == 3000 and fields["used_mib_by_gpu"] == {"1": 3000} and "GPU 0 (6000 MiB)" in fields["used_mib_reason"]
    alone = _node_snapshot.counter_residency(dict(holder, used_mib_by_gpu={"0": 6000}), cards, {"0x0_0x1": 1000 * MIB})
    assert alone["used_mib"] == 512 and alone["used_mib_source"] == "nvidia-smi"


def test_the_snapshot_never_reports_dwm_holding_more_than_its_gpu_uses(tmp_path):
    root = str(tmp_path / "ws")
    _simulated_node.write_node(root, _simulated_node.build_state({"hostname": "WS12", "gpus": [{"ghost_mib": 0}], "processes": [
        {"name": "python.exe", "memory_mib": 1024}, {"name": "render.exe", "graphics": True, "memory_mib": 300, "counter_mib": 8996}]}))
    snapshot = _node_snapshot.take(SimulatedNode(root))
    [card] = snapshot["gpus"]
    render = next(h for h in snapshot["holders"] if h["name"] == "render.exe")
    python = next(h for h in snapshot["holders"] if h["name"] == "python.exe")
    assert card["memory_used_mib"] < 8996
    assert render["counter_dedicated_mib_by_gpu"] == {"0": 8996} and render["used_mib"] != 8996
    assert "(8996 MiB) is larger than the memory that GPU uses (%d MiB)" % card["memory_used_mib"] in render["used_mib_reason"]
    assert python["used_mib"] == 1024 and python["used_mib_source"] == "counter"
    for holder in snapshot["holders"]:
        assert (holder["used_mib"] or 0) <= card["memory_used_mib"]


@pytest.mark.parametrize("driver_model", [{"current": "WDDM", "pending": "WDDM"}, "WDDM"])
def test_under_wddm_an_empty_process_list_is_no_per_process_view(driver_model):
    # nvidia-smi lists no process on a WDDM GPU (all of them vacuously "have" a figure): the whole use is not ghost
    # memory; the adapter-level figure decides, and without one it is unknown.
    gpu = {"index": 0, "memory_used_mib": 3000, "processes": [], "luid": "0x00000000_0x0000fa7a", "driver_model": driver_model}
    ghost = _node_snapshot.ghost_memory(gpu, 3000 * MIB)
    assert ghost["ghost_mib"] == 0 and ghost["source"] == "adapter_counter"
    assert _node_snapshot.ghost_memory(gpu, None)["ghost_mib"] is None


def test_under_tcc_an_empty_process_list_is_the_driver_saying_no_process_holds_memory():
    gpu = {"index": 0, "memory_used_mib": 3000, "processes": [], "luid": None, "driver_model": {"current": "TCC", "pending": "TCC"}}
    assert _node_snapshot.ghost_memory(gpu, None)["ghost_mib"] == 3000
