# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""_nvsmi against real nvidia-smi captures (fixtures/nvidia-smi-*, sources in SOURCES.md)."""

from __future__ import annotations

import os
import re

import pytest

from ansible_collections.gpuops.remediation.plugins.module_utils.probes import _nvsmi

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures")
QX = os.path.join(FIXTURES, "nvidia-smi-qx")
BUS_ID = re.compile(r"^[0-9A-F]{8}:[0-9A-F]{2}:[0-9A-F]{2}\.[0-7]$")
GPU_KEYS = {"index", "minor_number", "uuid", "serial", "name", "pci_bus_id", "memory_total_mib", "memory_used_mib",
            "memory_free_mib", "memory_reserved_mib", "persistence_mode", "compute_mode", "mig_mode", "mig_devices",
            "recovery_action", "nvlink_peers", "processes"}
PROCESS_KEYS = {"pid", "type", "used_mib", "name", "gpu_instance_id", "compute_instance_id"}


def read(*parts):
    with open(os.path.join(FIXTURES, *parts), encoding="utf-8") as handle:
        return handle.read()


def qx(name):
    return _nvsmi.parse_query_xml(read("nvidia-smi-qx", name))


# file: (driver_version, cuda_version, [(bus id, name, memory total MiB, memory used MiB, process count)])
XML_EXPECTED = {
    "nodtd-gtx1660ti-418.43.xml": ("418.43", "10.1", [("00000000:43:00.0", "Graphics Device", 5912, 0, 0)]),
    "v11-8x-v100s-460.73.01.xml": ("460.73.01", "11.2", [
        ("00000000:00:0D.0", "Tesla V100S-PCIE-32GB", 32510, 31689, 1),
        ("00000000:00:0E.0", "Tesla V100S-PCIE-32GB", 32510, 29545, 1),
        ("00000000:00:0F.0", "Tesla V100S-PCIE-32GB", 32510, 29539, 1),
        ("00000000:00:10.0", "Tesla V100S-PCIE-32GB", 32510, 32099, 1),
        ("00000000:00:11.0", "Tesla V100S-PCIE-32GB", 32510, 29517, 1),
        ("00000000:00:12.0", "Tesla V100S-PCIE-32GB", 32510, 32141, 1),
        ("00000000:00:13.0", "Tesla V100S-PCIE-32GB", 32510, 32157, 1),
        ("00000000:00:14.0", "Tesla V100S-PCIE-32GB", 32510, 29501, 1)]),
    "v11-tesla-t4-515.105.01.xml": ("515.105.01", "11.7", [("00000000:00:1E.0", "Tesla T4", 15360, 1032, 2)]),
    "v11-v100-pcie-460.39.xml": ("460.39", "11.2", [("00000000:21:01.0", "Tesla V100-PCIE-32GB", 32510, 12311, 4)]),
    "v12-a100-sxm4-mig-535.54.03.xml": ("535.54.03", "12.2", [("00000000:01:00.0", "NVIDIA A100-SXM4-80GB", 81920, 50, 0)]),
    "v12-rtx3080-wddm-536.40.xml": ("536.40", "12.2", [("00000000:04:00.0", "NVIDIA GeForce RTX 3080", 10240, 1128, 5)]),
    "v13-2x-rtxa5000-590.44.01.xml": ("590.44.01", "13.1", [
        ("00000000:81:00.0", "NVIDIA RTX A5000", 24564, 22437, 1),
        ("00000000:C1:00.0", "NVIDIA RTX A5000", 24564, 17253, 1)]),
    "v13-rtx4000-sff-ada-595.84.xml": ("595.84", "13.2", [
        ("00000000:06:00.0", "NVIDIA RTX 4000 SFF Ada Generation", 20475, 3534, 4)]),
    "v13-rtxpro6000-blackwell-590.44.01.xml": ("590.44.01", "13.1", [
        ("00000000:61:00.0", "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition", 97887, 65720, 1)]),
    "telegraf-3090-v13.xml": ("590.44.01", "13.1", [("00000000:09:00.0", "NVIDIA GeForce RTX 3090", 24576, 7, 0)]),
    "telegraf-a10g.xml": ("515.105.01", "11.7", [("00000000:00:1E.0", "NVIDIA A10G", 23028, 22, 1)]),
    "telegraf-dual_2070-v13.xml": ("590.44.01", "13.1", [
        ("00000000:01:00.0", "NVIDIA GeForce RTX 2070", 8192, 1, 0),
        ("00000000:02:00.0", "NVIDIA GeForce RTX 2070", 8192, 1, 0)]),
    "telegraf-dual_2080-v13.xml": ("590.44.01", "13.1", [
        ("00000000:01:00.0", "NVIDIA GeForce RTX 2080", 8192, 1, 0),
        ("00000000:02:00.0", "NVIDIA GeForce RTX 2080", 8192, 1, 0)]),
    "telegraf-gt-1030.xml": ("470.74", "11.4", [("00000000:2D:00.0", "NVIDIA GeForce GT 1030", 1998, 875, 10)]),
    "telegraf-gtx-1070-ti.xml": (None, None, [("00000000:01:00.0", "GeForce GTX 1070 Ti", 4096, 42, 0)]),
    "telegraf-quadro-p2000-v12.xml": ("525.125.06", "12.0", [("00000000:17:00.0", "Quadro P2000", 5120, 1, 0)]),
    "telegraf-quadro-p400.xml": ("418.43", "10.1", [("00000000:43:00.0", "Quadro P400", 1998, 0, 0)]),
    "telegraf-rtx-3060-v12.xml": ("570.124.04", "12.8", [("00000000:2D:00.0", "NVIDIA GeForce RTX 3060", 12288, 116, 0)]),
    "telegraf-rtx-3080-v13.xml": ("595.58.03", "13.2", [("00000000:0C:00.0", "NVIDIA GeForce RTX 3080", 10240, 9184, 0)]),
    "telegraf-rtx-3090-v12.xml": ("525.147.05", "12.0", [("00000000:00:10.0", "NVIDIA GeForce RTX 3090", 24576, 1, 0)]),
    "telegraf-tesla_p4.xml": ("513.46", "11.6", [("00000000:00:0B.0", "GRID P4-1Q", 1024, 807, 13)]),
}


def test_every_xml_fixture_has_an_expectation():
    assert sorted(os.listdir(QX)) == sorted(XML_EXPECTED)


@pytest.mark.parametrize("name", sorted(XML_EXPECTED))
def test_parse_query_xml_values(name):
    driver, cuda, gpus = XML_EXPECTED[name]
    result = qx(name)
    assert (result["driver_version"], result["cuda_version"]) == (driver, cuda)
    got = [(g["pci_bus_id"], g["name"], g["memory_total_mib"], g["memory_used_mib"], len(g["processes"]))
           for g in result["gpus"]]
    assert got == gpus
    assert [g["index"] for g in result["gpus"]] == list(range(len(gpus)))


@pytest.mark.parametrize("name", sorted(XML_EXPECTED))
def test_parse_query_xml_shape(name):
    for gpu in qx(name)["gpus"]:
        assert set(gpu) == GPU_KEYS
        assert BUS_ID.match(gpu["pci_bus_id"])
        assert gpu["uuid"].startswith("GPU-")
        assert gpu["serial"] is None or (isinstance(gpu["serial"], str) and gpu["serial"].strip() == gpu["serial"] != ""), gpu["serial"]
        assert gpu["compute_mode"] == "Default"
        assert gpu["nvlink_peers"] == []
        assert set(gpu["mig_mode"]) == {"current", "pending"}
        for process in gpu["processes"]:
            assert set(process) == PROCESS_KEYS
            assert isinstance(process["pid"], int) and process["pid"] > 0
            assert process["type"] in ("C", "G", "C+G")


def test_a100_mig_devices():
    gpu = qx("v12-a100-sxm4-mig-535.54.03.xml")["gpus"][0]
    assert gpu["mig_mode"] == {"current": True, "pending": True}
    assert gpu["mig_devices"] == [
        {"gpu_instance_id": gi, "compute_instance_id": 0, "memory_used_mib": 12, "memory_total_mib": 19968}
        for gi in (3, 4, 5, 6)]
    assert gpu["memory_reserved_mib"] == 869
    assert gpu["memory_free_mib"] == 80999
    # The capture kept only the first of 4 <gpu> elements; its /dev node is nvidia1, its position 0.
    assert (gpu["index"], gpu["minor_number"]) == (0, 1)
    assert gpu["persistence_mode"] is False
    assert gpu["recovery_action"] is None


def test_v100s_eight_gpus_one_python_each():
    gpus = qx("v11-8x-v100s-460.73.01.xml")["gpus"]
    assert [g["minor_number"] for g in gpus] == list(range(8))
    assert [[(p["pid"], p["type"], p["name"]) for p in g["processes"]] for g in gpus] == [[(37305, "C", "python")]] * 8
    assert [g["processes"][0]["used_mib"] for g in gpus] == [31683, 29539, 29533, 32093, 29511, 32135, 32151, 29495]
    assert all(g["mig_mode"] == {"current": None, "pending": None} for g in gpus)


def test_same_pid_on_two_gpus_and_minor_order():
    gpus = qx("v13-2x-rtxa5000-590.44.01.xml")["gpus"]
    assert [(g["index"], g["minor_number"], g["pci_bus_id"]) for g in gpus] == [
        (0, 1, "00000000:81:00.0"), (1, 0, "00000000:C1:00.0")]
    assert [(p["pid"], p["used_mib"]) for g in gpus for p in g["processes"]] == [(100477, 22430), (100477, 17246)]
    assert all(p["name"].startswith("/root/src/llama.cpp/build/bin/") for g in gpus for p in g["processes"])
    assert [g["recovery_action"] for g in gpus] == ["none", "none"]
    assert [g["persistence_mode"] for g in gpus] == [True, True]


def test_process_types_g_c_and_c_plus_g():
    processes = qx("v13-rtx4000-sff-ada-595.84.xml")["gpus"][0]["processes"]
    assert [(p["pid"], p["type"], p["name"], p["used_mib"]) for p in processes] == [
        (1842, "G", "cosmic-comp", 410), (3190, "G", "/usr/bin/code", 451), (4937, "C", "python", 160),
        (34626, "C+G", "/usr/lib/chromium/chromium", 183)]
    assert all(p["gpu_instance_id"] is None and p["compute_instance_id"] is None for p in processes)


def test_wddm_long_process_name_and_missing_minor():
    gpu = qx("v12-rtx3080-wddm-536.40.xml")["gpus"][0]
    assert gpu["minor_number"] is None and gpu["index"] == 0
    assert gpu["persistence_mode"] is None
    assert [p["pid"] for p in gpu["processes"]] == [835, 1481, 2214, 4044, 42416]
    edge = gpu["processes"][2]["name"]
    assert edge.startswith("/opt/microsoft/msedge/msedge --type=gpu-process") and len(edge) > 200


def test_na_used_memory_is_none():
    processes = qx("telegraf-tesla_p4.xml")["gpus"][0]["processes"]
    assert len(processes) == 13
    assert {p["type"] for p in processes} == {"C+G"}
    assert all(p["used_mib"] is None for p in processes)
    assert [p["name"] for p in processes].count(None) == 12
    assert processes[-1]["name"] == "C:\\Windows\\explorer.exe"


def test_schema_v10_without_driver_version():
    result = qx("telegraf-gtx-1070-ti.xml")
    gpu = result["gpus"][0]
    assert gpu["persistence_mode"] is None and gpu["minor_number"] is None
    assert gpu["memory_free_mib"] == 4054 and gpu["memory_reserved_mib"] is None


@pytest.mark.parametrize("text, action", [("Reset", "reset"), ("Reboot", "reboot"), ("Drain P2P", "drain_p2p"),
                                          ("Drain and Reset", "drain_and_reset"), ("None", "none")])
def test_recovery_action_values(text, action):
    # The real v13 capture with its <gpu_recovery_action>None</...> swapped for the other values NVML reports.
    xml = read("nvidia-smi-qx", "v13-rtxpro6000-blackwell-590.44.01.xml")
    assert "<gpu_recovery_action>None</gpu_recovery_action>" in xml
    xml = xml.replace("<gpu_recovery_action>None</gpu_recovery_action>",
                      "<gpu_recovery_action>%s</gpu_recovery_action>" % text)
    assert _nvsmi.parse_query_xml(xml)["gpus"][0]["recovery_action"] == action


def test_text_before_the_xml_is_skipped():
    xml = read("nvidia-smi-qx", "v11-tesla-t4-515.105.01.xml")
    noisy = "WARNING: infoROM is corrupted at gpu 0000:00:1E.0\n" + xml
    assert _nvsmi.parse_query_xml(noisy) == _nvsmi.parse_query_xml(xml)
    assert _nvsmi.parse_query_xml(xml.encode("utf-8")) == _nvsmi.parse_query_xml(xml)


@pytest.mark.parametrize("text", ["", "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
                                  "<other_root/>"])
def test_not_nvidia_smi_xml_raises(text):
    with pytest.raises(ValueError):
        _nvsmi.parse_query_xml(text)


@pytest.mark.parametrize("text, expected", [
    ("0000:18:00.0", "00000000:18:00.0"),
    ("00000000:18:00.0", "00000000:18:00.0"),
    ("00000000:c1:00.0", "00000000:C1:00.0"),
    ("18:00.0", "00000000:18:00.0"),
    ("0000:3b:00", "00000000:3B:00.0"),
    ("PCI:0000:9b:00", "00000000:9B:00.0"),
    ("0001:b3:1f.7", "00000001:B3:1F.7"),
    (" 00000000:21:01.0\n", "00000000:21:01.0"),
    ("N/A", None),
    ("", None),
    (None, None),
    ("GPU-8a47641b", None),
])
def test_normalize_bus_id(text, expected):
    assert _nvsmi.normalize_bus_id(text) == expected


def test_argv():
    assert _nvsmi.query_xml_argv("/usr/bin/nvidia-smi") == ["/usr/bin/nvidia-smi", "-q", "-x"]
    assert _nvsmi.compute_apps_argv("/usr/bin/nvidia-smi") == [
        "/usr/bin/nvidia-smi", "--query-compute-apps=pid,process_name,used_gpu_memory,gpu_bus_id,gpu_uuid",
        "--format=csv,noheader,nounits"]


# compute-apps CSV: file -> [(pid, process_name, used MiB, bus id)]
COMPUTE_APPS_EXPECTED = {
    ("nvidia-smi-query-compute-apps", "linux-h100-mig-590.48.01-load.csv"): [
        (21180, "/root/tools/memhog", 2296, "00000000:00:09.0"), (21181, "/root/tools/memhog", 1272, "00000000:00:09.0"),
        (21198, "./gpu_burn", 7484, "00000000:00:09.0")],
    ("nvidia-smi-query-compute-apps", "linux-l40s-595.80-idle-empty.csv"): [],
    ("nvidia-smi-csv", "gpuexp-nvidia-geforce-rtx-2080-super__595.71.05.idle.compute-apps.csv"): [],
    ("nvidia-smi-csv", "gpuexp-nvidia-geforce-rtx-2080-super__595.71.05.load.compute-apps.csv"): [
        (5268, "ffmpeg", 370, "00000000:0C:00.0"), (5267, "ffmpeg", 230, "00000000:0C:00.0")],
    ("nvidia-smi-csv", "gpuexp-nvidia-geforce-rtx-2080-super__610.57.04.idle.compute-apps.csv"): [],
    ("nvidia-smi-csv", "gpuexp-nvidia-geforce-rtx-2080-super__610.57.04.load.compute-apps.csv"): [
        (28512, "ffmpeg", 370, "00000000:0C:00.0"), (28511, "ffmpeg", 230, "00000000:0C:00.0")],
    ("nvidia-smi-csv", "gpuexp-nvidia-geforce-rtx-4080-super__595.71.05.idle.compute-apps.csv"): [
        (2165, "/usr/bin/kwin_wayland", 25, "00000000:01:00.0")],
    ("nvidia-smi-csv", "gpuexp-nvidia-geforce-rtx-4080-super__595.71.05.load.compute-apps.csv"): [
        (2165, "/usr/bin/kwin_wayland", 25, "00000000:01:00.0"), (5022, "ffmpeg", 503, "00000000:01:00.0"),
        (5021, "ffmpeg", 360, "00000000:01:00.0")],
    ("nvidia-smi-csv", "gpuexp-nvidia-h100-80gb-hbm3__590.48.01.idle.compute-apps.csv"): [],
    ("nvidia-smi-csv", "gpuexp-nvidia-h100-80gb-hbm3__590.48.01.load.compute-apps.csv"): [
        (11327, "/root/tools/memhog", 2566, "00000000:00:09.0"), (11328, "/root/tools/memhog", 1542, "00000000:00:09.0"),
        (11345, "./gpu_burn", 15690, "00000000:00:09.0")],
}
CAPTURED_APPS_FIELDS = ("timestamp", "gpu_name", "gpu_bus_id", "gpu_serial", "gpu_uuid", "pid", "process_name",
                        "used_gpu_memory")


@pytest.mark.parametrize("path", sorted(COMPUTE_APPS_EXPECTED), ids="/".join)
@pytest.mark.parametrize("fields", [None, CAPTURED_APPS_FIELDS], ids=["from-header", "given"])
def test_parse_compute_apps_csv(path, fields):
    rows = _nvsmi.parse_compute_apps_csv(read(*path), fields)
    assert [(r["pid"], r["process_name"], r["used_gpu_memory"], r["gpu_bus_id"]) for r in rows] == \
        COMPUTE_APPS_EXPECTED[path]
    for row in rows:
        assert list(row) == list(CAPTURED_APPS_FIELDS)
        assert row["gpu_uuid"] == "GPU-00000000-0000-0000-0000-000000000000"


def test_compute_apps_noheader_rows():
    # The same real rows as --format=csv,noheader prints them (header line dropped).
    text = read("nvidia-smi-query-compute-apps", "linux-h100-mig-590.48.01-load.csv")
    rows = _nvsmi.parse_compute_apps_csv(text.split("\n", 1)[1], CAPTURED_APPS_FIELDS)
    assert [r["pid"] for r in rows] == [21180, 21181, 21198]
    assert rows[0]["gpu_serial"] == "0000000000000"
    assert rows[0]["timestamp"] == "2026/07/14 09:00:44.742"


def test_compute_apps_wddm_na_memory_and_paths_with_spaces():
    rows = _nvsmi.parse_compute_apps_csv(read("nvidia-smi-query-compute-apps", "windows-wddm-rtx2080s-591.86-load.csv"))
    assert len(rows) == 12
    assert all(r["used_gpu_memory"] is None and r["gpu_serial"] is None for r in rows)
    assert rows[4]["pid"] == 20372
    assert rows[4]["process_name"] == "C:\\Program Files\\NZXT CAM\\NZXT CAM.exe"
    assert [r["pid"] for r in rows if r["process_name"].endswith("ffmpeg.exe")] == [25704, 26660]


def _cmd_fields(name):
    command = read("nvidia-smi-query-gpu", name + ".cmd")
    return re.search(r"--query-gpu=(\S+)", command).group(1).split(",")


@pytest.mark.parametrize("name, expected", [
    ("linux-h200-590.48.01-load", {
        "name": "NVIDIA H200", "pci.bus_id": "00000000:83:00.0", "serial": "0000000000000", "driver_version": "590.48.01",
        "memory.total": 143771, "memory.used": 32362, "memory.free": 110796, "memory.reserved": 614,
        "persistence_mode": "Enabled", "utilization.gpu": 100, "power.draw": 627.4, "temperature.gpu": 52,
        "driver_model.current": None, "mig.mode.current": "Disabled", "pci.bus": "0x83", "count": 1, "index": 0}),
    ("windows-wddm-rtx2080s-591.86-idle", {
        "name": "NVIDIA GeForce RTX 2080 SUPER", "pci.bus_id": "00000000:0C:00.0", "serial": None,
        "driver_version": "591.86", "memory.total": 8192, "memory.used": 702, "persistence_mode": None,
        "driver_model.current": "WDDM", "fan.speed": 37, "power.draw": 38.92, "mig.mode.current": None,
        "display_mode": None}),
])
def test_parse_query_gpu_csv_wide(name, expected):
    fields = _cmd_fields(name)
    rows = _nvsmi.parse_query_gpu_csv(read("nvidia-smi-query-gpu", name + ".csv"), fields)
    assert len(rows) == 1
    assert list(rows[0]) == fields
    assert dict((key, rows[0][key]) for key in expected) == expected


# acceptance query-gpu captures: file -> (name, bus id, memory.total, memory.used, pstate, field count)
QUERY_GPU_EXPECTED = {
    "gpuexp-nvidia-geforce-rtx-2080-super__595.71.05.idle.query-gpu.csv":
        ("NVIDIA GeForce RTX 2080 SUPER", "00000000:0C:00.0", 8192, 214, "P8", 202),
    "gpuexp-nvidia-geforce-rtx-2080-super__595.71.05.load.query-gpu.csv":
        ("NVIDIA GeForce RTX 2080 SUPER", "00000000:0C:00.0", 8192, 819, "P2", 202),
    "gpuexp-nvidia-geforce-rtx-2080-super__610.57.04.idle.query-gpu.csv":
        ("NVIDIA GeForce RTX 2080 SUPER", "00000000:0C:00.0", 8192, 211, "P8", 241),
    "gpuexp-nvidia-geforce-rtx-2080-super__610.57.04.load.query-gpu.csv":
        ("NVIDIA GeForce RTX 2080 SUPER", "00000000:0C:00.0", 8192, 815, "P2", 241),
    "gpuexp-nvidia-geforce-rtx-4080-super__595.71.05.idle.query-gpu.csv":
        ("NVIDIA GeForce RTX 4080 SUPER", "00000000:01:00.0", 16376, 596, "P8", 202),
    "gpuexp-nvidia-geforce-rtx-4080-super__595.71.05.load.query-gpu.csv":
        ("NVIDIA GeForce RTX 4080 SUPER", "00000000:01:00.0", 16376, 1474, "P2", 202),
    "gpuexp-nvidia-h100-80gb-hbm3__590.48.01.idle.query-gpu.csv":
        ("NVIDIA H100 80GB HBM3", "00000000:00:09.0", 81559, 0, "P0", 212),
    "gpuexp-nvidia-h100-80gb-hbm3__590.48.01.load.query-gpu.csv":
        ("NVIDIA H100 80GB HBM3", "00000000:00:09.0", 81559, 19818, "P0", 212),
}


def test_every_query_gpu_acceptance_capture_has_an_expectation():
    names = [n for n in os.listdir(os.path.join(FIXTURES, "nvidia-smi-csv")) if n.endswith(".query-gpu.csv")]
    assert sorted(names) == sorted(QUERY_GPU_EXPECTED)


@pytest.mark.parametrize("name", sorted(QUERY_GPU_EXPECTED))
def test_parse_query_gpu_csv_acceptance(name):
    rows = _nvsmi.parse_query_gpu_csv(read("nvidia-smi-csv", name))
    assert len(rows) == 1
    row = rows[0]
    assert (row["name"], row["pci.bus_id"], row["memory.total"], row["memory.used"], row["pstate"], len(row)) == \
        QUERY_GPU_EXPECTED[name]
    assert row["count"] == 1 and row["index"] == 0
    assert row["uuid"] == "GPU-00000000-0000-0000-0000-000000000000"


def test_csv_row_with_wrong_cell_count_raises():
    with pytest.raises(ValueError):
        _nvsmi.parse_compute_apps_csv("1234, 5 MiB\n", ("pid", "process_name", "used_gpu_memory"))
