# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A pnputil display adapter -> its nvidia-smi GPU through its PnP location (DEVPKEY_Device_BusNumber, _Address).

The parser against the snapshot script's JSON (a fixture in Get-PnpDeviceProperty's shape), the join and
win_gpu_reset's restart_adapter against the simulated node, which answers the same script with the same shape."""

import json

import pytest

from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.tools import _pnputil_adapters
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.rungs import _reset_dispatch
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.simulation import _simulated_node
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows import _node_snapshot
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node._remote_node import CommandResult, SimulatedNode

RTX4090 = "NVIDIA GeForce RTX 4090"
# pnputil lists in instance-id order: GPU 1's adapter ("...\\4&1A...") comes before GPU 0's ("...\\4&9F...").
FIRST_ID = "PCI\\VEN_10DE&DEV_2684&SUBSYS_889111D4&REV_A1\\4&9F3C2B1&0&0008"
SECOND_ID = "PCI\\VEN_10DE&DEV_2684&SUBSYS_889111D4&REV_A1\\4&1A2B3C4&0&0008"
TWO_4090 = [{"name": RTX4090, "pci_bus_id": "00000000:01:00.0", "ghost_mib": 900, "instance_id": FIRST_ID},
            {"name": RTX4090, "pci_bus_id": "00000000:41:00.0", "ghost_mib": 700, "instance_id": SECOND_ID}]
HOSTILE_IDS = ["PCI\\VEN_10DE&DEV_2684\\'; Remove-Item -Recurse C:\\ #", "PCI\\VEN_10DE&DEV_2684\\$(Stop-Computer)`\u2019 & x"]
FIXTURE = ("windows", "pnp-device-property", "display-two-rtx4090-intel-idd-ps51.json")


def build(tmp_path, gpus=None, **scenario):
    root = str(tmp_path / "ws")
    _simulated_node.write_node(root, _simulated_node.build_state(dict({"hostname": "WS12", "gpus": gpus or TWO_4090}, **scenario)))
    return root


def restart_commands(root):
    return [entry["argv"] for entry in _simulated_node.snapshot_of_state(root)["command_log"] if entry["argv"][0] == "pnputil"
            and entry["argv"][1] != "/enum-devices"]


# ---- the script's JSON --------------------------------------------------------------------------------------------

def test_the_locations_of_two_identical_gpus_an_igpu_and_a_virtual_display(captures):
    locations = _pnputil_adapters.parse_pnp_locations(captures.text(*FIXTURE))
    assert [(key.split("\\")[-1], value["pci_location"], value["present"]) for key, value in locations.items()] == [
        ("4&2b1c3f9&0&0008", [65, 0, 0], True), ("4&1a2b3c4&0&0008", [1, 0, 0], True),
        ("3&11583659&0&10", [0, 2, 0], True), ("0000", None, True)]
    assert all(key == key.lower() for key in locations)  # instance ids are compared case-insensitively


@pytest.mark.parametrize("properties, location", [
    ([{"KeyName": "DEVPKEY_Device_BusNumber", "Type": "UInt32", "Data": 59},
      {"KeyName": "DEVPKEY_Device_Address", "Type": 6, "Data": 0x1F0007}], [59, 31, 7]),
    ({"KeyName": "DEVPKEY_Device_BusNumber", "Type": 7, "Data": 1}, None),  # one key alone
    ([{"KeyName": "DEVPKEY_Device_BusNumber", "Type": 0, "Data": None}, {"KeyName": "DEVPKEY_Device_Address", "Type": 0, "Data": None}], None),
    ([{"KeyName": "DEVPKEY_Device_BusNumber", "Type": 7, "Data": 1}, {"KeyName": "DEVPKEY_Device_Address", "Type": 7, "Data": 0x200000}], None),
    ([{"KeyName": "DEVPKEY_Device_BusNumber", "Type": 7, "Data": 1}, {"KeyName": "DEVPKEY_Device_Address", "Type": 7, "Data": 8}], None),
    ([{"KeyName": "DEVPKEY_Device_BusNumber", "Type": 18, "Data": "1"}, {"KeyName": "DEVPKEY_Device_Address", "Type": 7, "Data": 0}], None),
    ([{"KeyName": "DEVPKEY_Device_BusNumber", "Type": [7], "Data": 1}, "junk"], None),
])
def test_a_location_needs_both_keys_as_whole_numbers_in_range(properties, location):
    text = json.dumps({"InstanceId": FIRST_ID, "Present": True, "Properties": properties})
    assert _pnputil_adapters.parse_pnp_locations(text)[FIRST_ID.lower()]["pci_location"] == location


def test_only_a_pci_device_has_a_pci_location_and_text_that_is_no_json_is_refused():
    numbers = [{"KeyName": "DEVPKEY_Device_BusNumber", "Type": 7, "Data": 0}, {"KeyName": "DEVPKEY_Device_Address", "Type": 7, "Data": 0}]
    text = json.dumps([{"InstanceId": "SWD\\REMOTEDISPLAYENUM\\RDPIDD_INDIRECTDISPLAY&SESSIONID_0002", "Properties": numbers},
                       {"InstanceId": None, "Properties": numbers}])
    found = _pnputil_adapters.parse_pnp_locations(text)
    assert list(found) == ["swd\\remotedisplayenum\\rdpidd_indirectdisplay&sessionid_0002"]
    assert [(v["present"], v["pci_location"], v["pci_domain"]) for v in found.values()] == [(None, None, None)]
    with pytest.raises(ValueError):
        _pnputil_adapters.parse_pnp_locations("InstanceId : PCI\\VEN_10DE")


# ---- the join and the restart, on the simulated node ----------------------------------------------------------------

def test_two_identical_gpus_listed_in_another_order_join_by_location_and_the_others_never(tmp_path):
    root = build(tmp_path, integrated_gpu=True, virtual_display=True)
    snapshot = _node_snapshot.take(SimulatedNode(root))
    adapters = [(a["instance_id"], a["pci_location"], a["gpu"], a["gpu_join"]) for a in snapshot["adapters"]]
    assert adapters == [(SECOND_ID, [0x41, 0, 0], 1, "pci_location"), (FIRST_ID, [1, 0, 0], 0, "pci_location"),
                        (_simulated_node.INTEGRATED_GPU["instance_id"], [0, 2, 0], None, None),
                        (_simulated_node.VIRTUAL_DISPLAY["instance_id"], None, None, None)]
    assert snapshot["probes"]["adapter_join"] == {"ok": True, "error": None, "method": "pci_location"}
    assert snapshot["probes"]["pnp_locations"] == {"ok": True, "error": None}


def test_restart_adapter_restarts_the_chosen_gpus_adapter_only(tmp_path):
    root = build(tmp_path, integrated_gpu=True, virtual_display=True)
    result = _reset_dispatch.run(SimulatedNode(root), {"method": "restart_adapter", "gpu": "0000:41:00.0"}, check_mode=False)
    assert not result["failed"] and result["changed"]
    assert [(a["gpu"], a["instance_id"], a["adapter_join"], a["outcome"]) for a in result["adapters"]] == [
        (1, SECOND_ID, "pci_location", "restarted")]
    assert restart_commands(root) == [["pnputil", "/restart-device", SECOND_ID]]
    assert [(g["restarts"], g["ghost_mib"]) for g in _simulated_node.snapshot_of_state(root)["gpus"]] == [(0, 900), (1, 0)]


def test_without_locations_identical_names_are_refused_and_nothing_is_restarted(tmp_path):
    root = build(tmp_path, pnp_properties=False)
    snapshot = _node_snapshot.take(SimulatedNode(root))
    assert [a["gpu"] for a in snapshot["adapters"]] == [None, None]
    assert snapshot["probes"]["adapter_join"]["method"] == "name" and not snapshot["probes"]["adapter_join"]["ok"]
    assert "not recognized" in snapshot["probes"]["pnp_locations"]["error"]
    result = _reset_dispatch.run(SimulatedNode(root), {"method": "restart_adapter", "gpu": 1}, check_mode=False)
    assert result["failed"] and result["adapters"][0]["outcome"] == "no_adapter"
    assert "joined by name" in result["msg"] and "2 NVIDIA PnP display adapters of that name" in result["msg"]
    assert restart_commands(root) == []  # never /class Display, never a guess


def test_without_locations_a_single_gpu_still_joins_by_name_and_says_so(tmp_path):
    root = build(tmp_path, gpus=[{"ghost_mib": 900}], pnp_properties=False, integrated_gpu=True, virtual_display=True)
    snapshot = _node_snapshot.take(SimulatedNode(root))
    assert [(a["gpu"], a["gpu_join"]) for a in snapshot["adapters"] if a["is_nvidia"]] == [(0, "name")]
    result = _reset_dispatch.run(SimulatedNode(root), {"method": "restart_adapter"}, check_mode=False)
    assert result["adapters"][0]["adapter_join"] == "name" and result["adapters"][0]["outcome"] == "restarted"


def test_hostile_instance_ids_are_joined_by_location_and_given_whole_as_one_argument(tmp_path):
    gpus = [dict(gpu, instance_id=instance_id) for gpu, instance_id in zip(TWO_4090, HOSTILE_IDS)]
    root = build(tmp_path, gpus=gpus)
    result = _reset_dispatch.run(SimulatedNode(root), {"method": "restart_adapter", "force": True}, check_mode=False)
    assert [(a["gpu"], a["instance_id"]) for a in result["adapters"]] == [(0, HOSTILE_IDS[0]), (1, HOSTILE_IDS[1])]
    assert sorted(restart_commands(root)) == sorted(["pnputil", "/restart-device", i] for i in HOSTILE_IDS)


def test_an_instance_id_pnputil_cannot_be_given_is_refused_not_run(tmp_path):
    root = build(tmp_path, gpus=[dict(TWO_4090[0], instance_id='PCI\\VEN_10DE&DEV_2684\\"quoted"')])
    result = _reset_dispatch.run(SimulatedNode(root), {"method": "restart_adapter"}, check_mode=False)
    assert result["failed"] and result["adapters"][0]["outcome"] == "no_adapter" and "not a device instance id" in result["msg"]
    assert restart_commands(root) == []


def test_a_device_windows_keeps_for_a_card_no_longer_there_is_not_a_candidate():
    pnputil = "\r\n".join(
        "Instance ID:                %s\r\nDevice Description:         %s\r\nClass Name:                 Display\r\n"
        "Class GUID:                 {4d36e968-e325-11ce-bfc1-08002be10318}\r\nManufacturer Name:          NVIDIA\r\n"
        "Status:                     %s\r\n" % row for row in ((FIRST_ID, RTX4090, "Started"), (SECOND_ID, RTX4090, "Disconnected")))
    numbers = [{"KeyName": "DEVPKEY_Device_BusNumber", "Type": 7, "Data": 1}, {"KeyName": "DEVPKEY_Device_Address", "Type": 7, "Data": 0}]
    locations = _pnputil_adapters.parse_pnp_locations(json.dumps([{"InstanceId": FIRST_ID, "Present": True, "Properties": numbers},
                                                                  {"InstanceId": SECOND_ID, "Present": False, "Properties": numbers}]))

    class Pnputil:  # the node's one answer this join reads: the pnputil listing above
        @staticmethod
        def command(argv, read_only):
            assert argv == ["pnputil", "/enum-devices", "/class", "Display"] and read_only
            return CommandResult(0, pnputil, "", "utf-8")

    probes = {}
    devices = _node_snapshot._adapter_devices(Pnputil(), [{"index": 0, "name": RTX4090, "pci_bus_id": "00000000:01:00.0"}], locations, probes)
    assert [(d["instance_id"], d["gpu"]) for d in devices] == [(FIRST_ID, 0), (SECOND_ID, None)]
    assert probes["adapter_join"]["ok"]
