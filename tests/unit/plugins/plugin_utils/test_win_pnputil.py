# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""_pnputil_adapters: display adapters from the captures in fixtures/windows/pnputil, and restarting one."""

from __future__ import annotations

import pytest

from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.tools import _pnputil_adapters

RTX_2080S = "PCI\\VEN_10DE&DEV_1E93&SUBSYS_12BC1462&REV_A1\\4&443bd0d&0&0008"
# The Intel + NVIDIA capture with German labels (built: no non-English capture exists; the values are the capture's).
GERMAN_LABELS = {"Instance ID:": "Instanz-ID:", "Device Description:": "Gerätebeschreibung:", "Class Name:": "Klassenname:",
                 "Class GUID:": "Klassen-GUID:", "Manufacturer Name:": "Herstellername:", "Status:": "Status:",
                 "Driver Name:": "Treibername:", "Extension Driver Names:": "Erweiterungstreibernamen:"}


def devices(captures, name):
    found, unrecognised = _pnputil_adapters.parse_enum_devices(captures.text("windows", "pnputil", name))
    assert unrecognised == []
    return found


def test_intel_and_nvidia_desktop_with_a_continued_extension_driver_list(captures):
    intel, nvidia = devices(captures, "enum-devices-display-intel-nvidia-desktop.txt")
    assert intel["extension_drivers"] == ["oem4.inf", "oem3.inf"] and intel["driver_name"] == "oem0.inf"
    assert (intel["vendor_id"], intel["is_nvidia"]) == ("8086", False)
    assert nvidia["instance_id"] == RTX_2080S and nvidia["is_nvidia"] and nvidia["device_id"] == "1E93"
    assert nvidia["status"] == "Started" and nvidia["is_display"] and nvidia["driver_name"] == "oem1.inf"
    assert "started" not in nvidia and not nvidia["state_known"]  # the word decides nothing


def test_nvidia_and_amd_laptop(captures):
    nvidia, amd = devices(captures, "enum-devices-display-nvidia-amd-laptop.txt")
    assert nvidia["description"] == "NVIDIA GeForce RTX 2060 with Max-Q Design" and nvidia["extension_drivers"] == []
    assert amd["manufacturer"] == "Advanced Micro Devices, Inc." and amd["extension_drivers"] == ["oem12.inf"]


@pytest.mark.parametrize("name, status", [("enum-devices-class-display-disconnected-idd.txt", "Disconnected"),
                                          ("enum-devices-class-display-started-idd-hdr-single.txt", "Started")])
def test_a_virtual_display_with_or_without_the_banner(captures, name, status):
    [device] = devices(captures, name)
    assert device["instance_id"] == "ROOT\\DISPLAY\\0000" and device["status"] == status and device["problem_code"] is None
    assert device["vendor_id"] is None and not device["is_nvidia"]


def test_localized_labels_read_by_position(captures):
    text = captures.text("windows", "pnputil", "enum-devices-display-intel-nvidia-desktop.txt")
    for english, german in GERMAN_LABELS.items():
        text = text.replace(english, german)
    text = text.replace("Status:                     Started", "Status:                     Gestartet")
    found, unrecognised = _pnputil_adapters.parse_enum_devices(text)
    assert unrecognised == [] and [d["instance_id"] for d in found][1] == RTX_2080S
    assert found[0]["extension_drivers"] == ["oem4.inf", "oem3.inf"]
    assert found[1]["status"] == "Gestartet" and found[1]["problem_code"] is None  # kept for the report, deciding nothing


def test_a_problem_code_is_read_by_its_shape():
    text = ("Instance ID:                PCI\\VEN_10DE&DEV_2204&SUBSYS_00000000&REV_A1\\4&1&0&0008\n"
            "Device Description:         NVIDIA GeForce RTX 3090\nClass Name:                 Display\n"
            "Class GUID:                 {4d36e968-e325-11ce-bfc1-08002be10318}\nManufacturer Name:          NVIDIA\n"
            "Status:                     Problem\nProblem Code:               43 (0x2B) [CM_PROB_FAILED_POST_START]\n"
            "Driver Name:                oem7.inf\n")
    [device] = _pnputil_adapters.parse_enum_devices(text)[0]
    assert device["problem_code"] == 43 and device["driver_name"] == "oem7.inf"


def test_blocks_that_are_no_device_are_reported(captures):
    found, unrecognised = _pnputil_adapters.parse_enum_devices(captures.text("windows", "pnputil", "enable-device-failed-not-connected.txt"))
    assert found == [] and unrecognised == ["Failed to enable device:  ROOT\\DISPLAY\\0000\nThe device is not connected."]
    assert _pnputil_adapters.parse_enum_devices(captures.text("windows", "pnputil", "enable-device-deviceid-unsupported-prints-usage.txt")) == ([], [])


def test_restart_argv_names_the_one_device():
    assert _pnputil_adapters.restart_device_argv(RTX_2080S) == ["pnputil", "/restart-device", RTX_2080S]


@pytest.mark.parametrize("instance_id", ["/class", "/class Display", "", "PCI", "PCI\\VEN_10DE\" /class Display \"",
                                         "PCI\\VEN_10DE\n", "PCI\\VEN\x00", None, "\\VEN_10DE"])
def test_restart_argv_refuses_what_is_no_instance_id(instance_id):
    with pytest.raises(ValueError, match="not a device instance id"):
        _pnputil_adapters.restart_device_argv(instance_id)


def test_restart_outcomes_by_exit_status(captures):
    assert _pnputil_adapters.restart_outcome(0, "Microsoft PnP Utility\n\nRestarting device: ...\n")["outcome"] == "restarted"
    reboot = _pnputil_adapters.restart_outcome(3010, "")
    assert reboot["restarted"] and reboot["reboot_required"] and reboot["outcome"] == "reboot_required"
    failed = _pnputil_adapters.restart_outcome(1, captures.text("windows", "pnputil", "enable-device-failed-not-connected.txt"))
    assert failed["outcome"] == "failed" and "not connected" in failed["message"]


def test_an_old_pnputil_printing_its_usage_did_nothing_whatever_its_exit_status(captures):
    usage = captures.text("windows", "pnputil", "enable-device-deviceid-unsupported-prints-usage.txt")
    for rc in (0, 1):
        assert _pnputil_adapters.restart_outcome(rc, usage)["outcome"] == "unsupported"
