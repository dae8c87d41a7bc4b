# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""_nvidia_smi_output: the driver model and WDDM's unknown per-process memory, on the Windows nvidia-smi captures."""

from __future__ import annotations

import re

import pytest

from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.tools import _nvidia_smi_output

WIDE_GPU = ("nvidia-smi-query-gpu", "windows-wddm-rtx2080s-591.86-idle")


def wide_fields(captures):
    return re.search(r"--query-gpu=(\S+)", captures.text(WIDE_GPU[0], WIDE_GPU[1] + ".cmd")).group(1).split(",")


def wddm_gpus(captures):
    return _nvidia_smi_output.parse_query_gpu_csv(captures.text(WIDE_GPU[0], WIDE_GPU[1] + ".csv"), wide_fields(captures))


def test_wddm_xml_with_n_a_process_memory_keeps_none_with_the_reason(captures):
    gpu = _nvidia_smi_output.parse_query_xml(captures.text("nvidia-smi-qx", "telegraf-tesla_p4.xml"))["gpus"][0]
    assert gpu["driver_model"] == {"current": "WDDM", "pending": "WDDM"}
    assert len(gpu["processes"]) == 13
    assert all(p["used_mib"] is None and p["used_mib_reason"] == _nvidia_smi_output.WDDM_MEMORY_REASON for p in gpu["processes"])
    assert [p["name"] for p in gpu["processes"]].count(None) == 12  # WDDM nvidia-smi left 12 names empty


def test_wddm_xml_with_numbers_keeps_them_and_gives_no_reason(captures):
    gpu = _nvidia_smi_output.parse_query_xml(captures.text("nvidia-smi-qx", "v12-rtx3080-wddm-536.40.xml"))["gpus"][0]
    assert gpu["driver_model"]["current"] == "WDDM"
    assert all(isinstance(p["used_mib"], int) and p["used_mib_reason"] is None for p in gpu["processes"])


def test_linux_xml_has_no_driver_model_and_every_gpu_gets_one_entry(captures):
    result = _nvidia_smi_output.parse_query_xml(captures.text("nvidia-smi-qx", "v13-2x-rtxa5000-590.44.01.xml"))
    assert [gpu["driver_model"] for gpu in result["gpus"]] == [{"current": None, "pending": None}] * 2
    assert all(p["used_mib_reason"] is None for gpu in result["gpus"] for p in gpu["processes"])


def test_query_gpu_csv_from_windows_carries_the_driver_model(captures):
    gpus = wddm_gpus(captures)
    assert len(gpus) == 1
    assert gpus[0]["driver_model"] == {"current": "WDDM", "pending": "WDDM"}
    assert gpus[0]["pci_bus_id"] == "00000000:0C:00.0" and gpus[0]["name"] == "NVIDIA GeForce RTX 2080 SUPER"


def test_compute_apps_under_wddm_are_none_never_zero_with_the_reason(captures):
    text = captures.text("nvidia-smi-query-compute-apps", "windows-wddm-rtx2080s-591.86-load.csv")
    processes = _nvidia_smi_output.parse_compute_apps_csv(text, wddm_gpus(captures), fields=None)
    assert len(processes) == 12
    assert all(p["used_mib"] is None and p["used_mib_reason"] == _nvidia_smi_output.WDDM_MEMORY_REASON for p in processes)
    assert {p["pci_bus_id"] for p in processes} == {"00000000:0C:00.0"}
    assert processes[2]["name"] == "C:\\Windows\\System32\\dwm.exe"


def test_linux_compute_apps_have_numbers_and_no_reason(captures):
    text = captures.text("nvidia-smi-query-compute-apps", "linux-h100-mig-590.48.01-load.csv")
    gpus = [{"pci_bus_id": "00000000:00:00.0", "driver_model": {"current": None, "pending": None}}]
    processes = _nvidia_smi_output.parse_compute_apps_csv(text, gpus, fields=None)
    assert [p["used_mib"] for p in processes] and all(isinstance(p["used_mib"], int) for p in processes)
    assert all(p["used_mib_reason"] is None for p in processes)


@pytest.mark.parametrize("text, model", [("WDDM", "WDDM"), ("mcdm", "MCDM"), (" TCC ", "TCC"), ("N/A", None),
                                         ("[N/A]", None), ("", None), (None, None), ("XDDM", None)])
def test_driver_model_names(text, model):
    assert _nvidia_smi_output.normalize_driver_model(text) == model


def test_an_unknown_value_outside_wddm_gets_the_generic_reason():
    assert _nvidia_smi_output.used_memory_reason(None, "TCC") == _nvidia_smi_output.NOT_REPORTED_REASON
    assert _nvidia_smi_output.used_memory_reason(0, "WDDM") is None


def test_the_csv_argv_queries_the_driver_model():
    argv = _nvidia_smi_output.query_gpu_argv("nvidia-smi.exe")
    assert argv[0] == "nvidia-smi.exe" and "driver_model.current" in argv[1] and argv[2] == "--format=csv,noheader,nounits"
    assert _nvidia_smi_output.query_xml_argv("nvidia-smi.exe") == ["nvidia-smi.exe", "-q", "-x"]
    assert _nvidia_smi_output.compute_apps_argv("nvidia-smi.exe")[1].startswith("--query-compute-apps=pid,")


def test_own_argv_output_round_trips():
    text = "0, GPU-1, NVIDIA RTX A4000, 00000000:65:00.0, TCC, WDDM, 16376, 512\n"
    gpu = _nvidia_smi_output.parse_query_gpu_csv(text)[0]
    assert gpu["driver_model"] == {"current": "TCC", "pending": "WDDM"} and gpu["memory.used"] == 512
