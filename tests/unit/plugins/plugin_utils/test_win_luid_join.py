# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A counter's LUID -> its DirectX adapter (AdapterLuid) -> the nvidia-smi GPU at the adapter's PCI location.

Against the simulated node (which answers the registry read and the graphics kernel's adapter address in the shape the
snapshot script returns them) and against the script's JSON alone, for what the simulation does not produce."""

import json

import pytest

from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.tools import _gpu_memory_counters
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.simulation import _simulated_node
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows import _node_snapshot
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node._remote_node import SimulatedNode

A4000 = "NVIDIA RTX A4000"
# Two identical GPUs (one name: the name says nothing) whose LUIDs run the other way round from nvidia-smi's index order.
TWO_GPUS = [{"name": A4000, "pci_bus_id": "00000000:0C:00.0", "luid": 0x2E40A},
            {"name": A4000, "pci_bus_id": "00000000:1C:00.0", "luid": 0x1D3F7}]


def build(tmp_path, **scenario):
    root = str(tmp_path / "ws12")
    _simulated_node.write_node(root, _simulated_node.build_state(dict({"hostname": "WS12", "gpus": TWO_GPUS}, **scenario)))
    return SimulatedNode(root, "ada")


def by_name(snapshot):
    return dict((h["name"], h) for h in snapshot["holders"])


def test_each_luid_joins_the_gpu_at_its_pci_location_whatever_the_luid_order(tmp_path):
    node = build(tmp_path, processes=[{"name": "train.exe", "gpus": [1], "memory_mib": 4096},
                                      {"name": "render.exe", "gpus": [0], "memory_mib": 1024}])
    snapshot = _node_snapshot.take(node)
    registry = json.loads(_simulated_node.run_script(node.root, "snapshot", {"WslPath": "x"})["adapters"])
    assert [int(a["AdapterLuid"]) for a in registry] == [0x1D3F7, 0x2E40A]  # the registry's order: GPU 1 first
    assert [(g["index"], g["luid"], g["luid_join"]) for g in snapshot["gpus"]] == [
        (0, "0x00000000_0x0002e40a", "pci_location"), (1, "0x00000000_0x0001d3f7", "pci_location")]
    assert snapshot["probes"]["luid_join"] == {"ok": True, "error": None, "method": "pci_location"}
    holders = by_name(snapshot)
    assert holders["train.exe"]["gpus"] == [1] and holders["train.exe"]["used_mib_by_gpu"] == {"1": 4096}
    assert holders["render.exe"]["gpus"] == [0] and holders["render.exe"]["used_mib"] == 1024
    dwm = holders["dwm.exe"]["used_mib"]
    assert [g["attributed_mib"] for g in snapshot["gpus"]] == [1024 + dwm, 4096]
    assert [g["unattributed_mib"] for g in snapshot["gpus"]] == [0, 0]


def test_an_integrated_gpus_luid_is_never_an_nvidia_gpus(tmp_path):
    node = build(tmp_path, integrated_gpu=True, processes=[
        {"name": "chrome.exe", "gpus": [], "igpu_memory_mib": 512},
        {"name": "train.exe", "gpus": [0], "memory_mib": 2048, "igpu_memory_mib": 256}])
    snapshot = _node_snapshot.take(node)
    registry = json.loads(_simulated_node.run_script(node.root, "snapshot", {"WslPath": "x"})["adapters"])
    assert [a["VendorId"] for a in registry].count(0x8086) == 1
    holders = by_name(snapshot)
    assert "chrome.exe" not in holders  # its memory is on the Intel adapter only
    assert holders["train.exe"]["used_mib_by_gpu"] == {"0": 2048} and holders["train.exe"]["gpus"] == [0]
    assert sorted(g["luid"] for g in snapshot["gpus"]) == ["0x00000000_0x0001d3f7", "0x00000000_0x0002e40a"]
    intel = [a for a in snapshot["adapters"] if not a["is_nvidia"]]
    assert len(intel) == 1 and intel[0]["gpu"] is None and len(snapshot["adapters"]) == 3
    assert snapshot["verdict"]["rung"] == "kill" and "chrome.exe" not in json.dumps(snapshot["verdict"])


# ---- the script's JSON alone ----------------------------------------------------------------------------------------

SMI_GPUS = [{"index": 0, "name": A4000, "pci_bus_id": "00000000:0C:00.0"}, {"index": 1, "name": A4000, "pci_bus_id": "00000000:1C:00.0"}]


def registry_json(*adapters):
    keys = ("Key", "Description", "AdapterLuid", "VendorId", "DeviceId", "BusNumber", "DeviceNumber", "FunctionNumber")
    return json.dumps([dict(zip(keys, adapter)) for adapter in adapters], indent=4)


def join(adapters_json, gpus=None, counters=None):
    gpus = [dict(gpu) for gpu in (gpus or SMI_GPUS)]
    probes = {}
    joined = _node_snapshot._join_luids(gpus, _node_snapshot._adapters(adapters_json), counters or _gpu_memory_counters.CounterReading({}, []), probes)
    return joined, gpus, probes["luid_join"]


def test_a_localized_description_does_not_matter_where_the_location_is_known():
    joined, gpus, report = join(registry_json(
        ("{b}", "Carte graphique NVIDIA", str(0x1D3F7), 4318, 9649, 28, 0, 0),
        ("{a}", "Intel(R) UHD Graphics 770", str(0xB1E5), 32902, 18048, 0, 2, 0),
        ("{c}", "Carte graphique NVIDIA", str(0x2E40A), 4318, 9649, 12, 0, 0)))
    assert joined == {"0x00000000_0x0002e40a": 0, "0x00000000_0x0001d3f7": 1} and report["ok"]


def test_without_locations_the_join_falls_back_to_the_name_and_says_so():
    joined, gpus, report = join(registry_json(("{a}", A4000, str(0x2E40A), 4318, 9649, None, None, None)), gpus=SMI_GPUS[:1])
    assert joined == {"0x00000000_0x0002e40a": 0} and gpus[0]["luid_join"] == "name" and report["method"] == "name"
    dummy, gpus, report = join(registry_json(("{a}", A4000, str(0x2E40A), 4318, 9649, None, None, None),
                                             ("{b}", A4000, str(0x1D3F7), 4318, 9649, None, None, None)))
    assert [g["luid"] for g in gpus] == [None, None] and "2 NVIDIA DirectX adapters of that name" in report["error"]


def test_without_locations_identical_gpus_are_never_joined_by_name_even_when_the_counters_show_one_adapter():
    seen = _gpu_memory_counters.CounterReading({4242: {"by_luid": {"0x00000000_0x0002e40a": {"dedicated_bytes": 1}}}}, [])
    dummy, gpus, report = join(registry_json(("{a}", A4000, str(0x2E40A), 4318, 9649, None, None, None),
                                             ("{b}", A4000, str(0x1D3F7), 4318, 9649, None, None, None)), counters=seen)
    assert [g["luid"] for g in gpus] == [None, None]
    assert "1 NVIDIA DirectX adapters of that name, which another GPU matches too" in report["error"]


def test_an_intel_adapter_at_the_gpus_location_is_not_joined_and_an_unmatched_location_is_reported():
    joined, gpus, report = join(registry_json(("{a}", "Intel(R) UHD Graphics 770", str(0xB1E5), 32902, 18048, 12, 0, 0),
                                              ("{c}", A4000, str(0x2E40A), 4318, 9649, 12, 0, 0)))
    assert joined == {"0x00000000_0x0002e40a": 0}
    assert gpus[1]["luid"] is None and not report["ok"]
    assert "GPU 1 (NVIDIA RTX A4000): 0 NVIDIA DirectX adapters at its PCI location 00000000:1C:00.0" in report["error"]


@pytest.mark.parametrize("bus_id, location", [("00000000:0C:00.0", [12, 0, 0]), ("0000:3b:1f.7", [0x3B, 0x1F, 7]), ("N/A", None), (None, None)])
def test_pci_location_of_an_nvidia_smi_bus_id(bus_id, location):
    assert _node_snapshot.pci_location(bus_id) == location


# ---- Add-Type refused (Constrained Language Mode, AppLocker): no location from the graphics kernel ---------------------

def test_without_add_type_two_different_gpus_join_by_their_pnp_devices_location(tmp_path):
    gpus = [dict(TWO_GPUS[0], device_id="24B0"), dict(TWO_GPUS[1], name="NVIDIA RTX A5000", device_id="2231")]
    node = build(tmp_path, gpus=gpus, constrained_language=True, processes=[{"name": "train.exe", "gpus": [1], "memory_mib": 4096}])
    snapshot = _node_snapshot.take(node)
    assert [(g["index"], g["luid"], g["luid_join"]) for g in snapshot["gpus"]] == [
        (0, "0x00000000_0x0002e40a", "pnp_location"), (1, "0x00000000_0x0001d3f7", "pnp_location")]
    join = snapshot["probes"]["luid_join"]
    assert join["ok"] and join["method"] == "pnp_location" and "language mode" in join["d3dkmt_error"]
    assert by_name(snapshot)["train.exe"]["gpus"] == [1]


def test_without_add_type_two_identical_gpus_are_never_guessed(tmp_path):
    node = build(tmp_path, constrained_language=True, processes=[{"name": "train.exe", "gpus": [1], "memory_mib": 4096}])
    snapshot = _node_snapshot.take(node)
    join = snapshot["probes"]["luid_join"]
    assert not join["ok"] and join["method"] == "name" and join["d3dkmt_error"]
    assert [g["luid"] for g in snapshot["gpus"]] == [None, None]
    assert [g["unattributed_mib"] for g in snapshot["gpus"]] == [None, None]  # unknown, not 0


def test_without_add_type_a_single_gpu_still_joins(tmp_path):
    node = build(tmp_path, gpus=[TWO_GPUS[0]], constrained_language=True)
    snapshot = _node_snapshot.take(node)
    assert snapshot["gpus"][0]["luid"] == "0x00000000_0x0002e40a" and snapshot["gpus"][0]["luid_join"] == "pnp_location"


def test_the_pnp_fallback_needs_exactly_one_present_device_with_the_adapters_ids():
    adapter = {"vendor_id": 0x10DE, "device_id": 0x2204, "subsys_id": 0x40051458, "revision_id": 0xA1}
    here = {"present": True, "pci_location": [12, 0, 0]}
    twin = {"present": True, "pci_location": [28, 0, 0]}
    gone = {"present": False, "pci_location": [28, 0, 0]}
    one = "pci\\ven_10de&dev_2204&subsys_40051458&rev_a1\\4&1&0&0008"
    two = "pci\\ven_10de&dev_2204&subsys_40051458&rev_a1\\4&1&0&0018"
    other = "pci\\ven_10de&dev_2231&subsys_40051458&rev_a1\\4&1&0&0018"
    assert _node_snapshot.locate_by_pnp(adapter, {one: here, other: twin}) == [12, 0, 0]
    assert _node_snapshot.locate_by_pnp(adapter, {one: here, two: twin}) is None
    assert _node_snapshot.locate_by_pnp(adapter, {one: here, two: gone}) == [12, 0, 0]
    assert _node_snapshot.locate_by_pnp(dict(adapter, device_id=None), {one: here}) is None
