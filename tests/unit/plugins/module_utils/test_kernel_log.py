# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""_kernel_log against real kernel log excerpts (fixtures/kernel-xid, sources in SOURCES.md)."""

from __future__ import annotations

import os
import time

import pytest

from ansible_collections.gpuops.remediation.plugins.module_utils.probes import _kernel_log
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._kernel_log import parse_kernel_log

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "kernel-xid")
EVENT_KEYS = {"kind", "xid", "pci_bus_id", "gpu_instance_id", "compute_instance_id", "time", "time_epoch", "pid",
              "process_name", "message", "line", "catalog"}


def events_of(name):
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as handle:
        return parse_kernel_log(handle.read())


def summary(events):
    return [(e["kind"], e["xid"], e["pci_bus_id"], e["time"], e["pid"], e["process_name"], e["catalog"]["action"])
            for e in events]


# file -> [(kind, xid, bus id, time as printed, pid, process name, catalog action)]
EXPECTED = {
    "fallen-off-bus-multiline-570.158.01.log": [
        ("fallen_off_bus", None, "00000000:B3:00.0", "1843.308145", None, None, "reboot")],
    "xid119-gsp-timeout-h100-dmesg-ctime.log": [
        ("xid", 119, "00000000:9B:00.0", "Sun Feb 23 16:24:18 2025", 2024380, "nvidia-smi", "reset_gpu"),
        ("xid", 119, "00000000:9B:00.0", "Sun Feb 23 16:24:24 2025", 2024380, "nvidia-smi", "reset_gpu"),
        ("xid", 119, "00000000:9B:00.0", "Sun Feb 23 16:24:30 2025", 2024380, "nvidia-smi", "reset_gpu"),
        ("xid", 119, "00000000:9B:00.0", "Sun Feb 23 16:27:12 2025", 1263500, "cache_mgr_main", "reset_gpu"),
        ("xid", 119, "00000000:9B:00.0", "Sun Feb 23 16:30:13 2025", 1240590, "gpud", "reset_gpu")],
    "xid120-62-154-45-journal-blackwell-595.58.03.log": [
        ("xid", 120, "00000000:01:00.0", "Mar 29 15:38:59", None, None, "reset_gpu"),
        ("xid", 154, "00000000:01:00.0", "Mar 29 15:38:59", None, None, "reset_gpu"),
        ("xid", 62, "00000000:01:00.0", "Mar 27 17:40:36", None, None, "reset_gpu"),
        ("xid", 154, "00000000:01:00.0", "Mar 27 17:40:36", None, None, "reset_gpu"),
        ("xid", 45, "00000000:01:00.0", "Mar 27 17:40:36", 12542, "VLLM::Worker", "none")],
    "xid13-109-a100-dmesg-ctime.log": [
        ("xid", 13, "00000000:CB:00.0", "Fri Aug 30 11:43:09 2024", None, None, "restart_app"),
        ("xid", 13, "00000000:CB:00.0", "Fri Aug 30 11:43:09 2024", None, None, "restart_app"),
        ("xid", 13, "00000000:CB:00.0", "Fri Aug 30 11:43:09 2024", None, None, "restart_app"),
        ("xid", 109, "00000000:CB:00.0", "Fri Aug 30 11:43:14 2024", 1797828, "pt_main_thread", "reset_gpu")],
    "xid13-syslog-old-format.log": [
        ("xid", 13, "00000000:41:00.0", "Feb 15 17:37:45", None, None, "restart_app")] * 8,
    "xid154-gsp-heartbeat-595.71.05.log": [
        ("xid", 154, "00000000:01:00.0", None, None, None, "reset_gpu")],
    "xid31-13-32-old-driver-no-pid.log": [
        ("xid", 31, "00000000:01:00.0", "31543.449443", None, None, "restart_app"),
        ("xid", 13, "00000000:01:00.0", "31609.615230", None, None, "restart_app"),
        ("xid", 13, "00000000:01:00.0", "31609.615231", None, None, "restart_app"),
        ("xid", 13, "00000000:01:00.0", "31609.615232", None, None, "restart_app"),
        ("xid", 13, "00000000:01:00.0", "31609.615374", None, None, "restart_app"),
        ("xid", 32, "00000000:01:00.0", "31609.615516", None, None, "restart_app")],
    "xid31-mmu-fault-595.71.05.log": [
        ("xid", 31, "00000000:01:00.0", "365.969681", 13705, "UnrealEditor", "restart_app")],
    "xid43-31-94-multi-gpu-dmesg-T.log": [
        ("xid", 43, "00000000:00:05.0", "Wed Jul 31 23:14:18 2024", 1045242, "pt_main_thread", "none"),
        ("xid", 43, "00000000:00:05.0", "Wed Jul 31 23:15:26 2024", 1084984, "pt_main_thread", "none"),
        ("xid", 31, "00000000:00:07.0", "Mon Aug  5 03:54:13 2024", 2512125, "python3.10", "restart_app"),
        ("xid", 94, "00000000:00:08.0", "Fri Aug  9 13:32:56 2024", None, None, "restart_app")],
    "xid45-after-149-145-journal-kernel.log": [
        ("xid", 45, "00000000:%s:00.0" % bus, None, pid, "python3", "none") for bus, pid in (
            ("DC", 1818990), ("ED", 1818992), ("BA", 1818989), ("97", 1818987), ("DC", 1818990), ("BA", 1818989),
            ("ED", 1818992))],
    "xid94-95-error-containment-mig.log": [
        ("xid", 94, "00000000:01:00.0", None, 7194, None, "restart_app"),
        ("xid", 94, "00000000:01:00.0", None, 7062, None, "restart_app"),
        ("xid", 95, "00000000:01:00.0", None, 7062, None, "reset_gpu")],
    "xid48-63-94-dbe-row-remap-dmesg.log": [
        ("xid", 48, "00000000:52:00.0", "430954.509105", None, None, "reset_gpu"),
        ("xid", 63, "00000000:52:00.0", "430954.532443", None, None, "none"),
        ("xid", 94, "00000000:52:00.0", "430954.533994", None, None, "restart_app")],
}


def test_every_fixture_has_an_expectation():
    assert sorted(os.listdir(FIXTURES)) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_events(name):
    events = events_of(name)
    assert summary(events) == EXPECTED[name]
    for event in events:
        assert set(event) == EVENT_KEYS
        assert event["catalog"]["action"] in _kernel_log.ACTIONS
        assert "NVRM:" in event["line"]


def test_fallen_off_bus_multiline_is_one_event():
    (event,) = events_of("fallen-off-bus-multiline-570.158.01.log")
    assert event["message"] == ("The NVIDIA GPU 0000:b3:00.0 (PCI ID: 10de:26b5) installed in this system has "
                                "fallen off the bus and is not responding to commands.")
    assert event["line"].count("\n") == 2
    assert event["catalog"]["severity"] == "fatal"


def test_messages_without_pid_prefix():
    events = events_of("xid13-109-a100-dmesg-ctime.log")
    assert events[0]["message"] == "Graphics SM Warp Exception on (GPC 7, TPC 7, SM 0): Illegal Instruction Parameter"
    assert events[3]["message"] == "Ch 00000008, errorString CTX SWITCH TIMEOUT, Info 0x58005"
    old = events_of("xid31-13-32-old-driver-no-pid.log")
    assert old[0]["message"].startswith("Ch 0000003a, intr 10000000. MMU Fault:")
    assert old[-1]["message"] == "Channel ID 00000052 intr 02000000"


def test_xid154_names_the_recovery_action():
    events = events_of("xid120-62-154-45-journal-blackwell-595.58.03.log")
    xid154 = events[1]["catalog"]
    assert xid154["recovery_action"] == "reset"
    assert xid154["severity"] == "critical"
    assert events[2]["message"].startswith("223b6a66 00002100")
    assert events[0]["catalog"]["name"] == "GSP Error"


@pytest.mark.parametrize("target, action, recovery", [
    ("0x2 (Node Reboot Required)", "reboot", "reboot"),
    ("0x1 (GPU Reset Required)", "reset_gpu", "reset"),
    ("0x4 (Drain and Reset)", "reset_gpu", "drain_and_reset"),
    ("0x3 (Drain P2P)", "report", "drain_p2p"),
    ("0x0 (None)", "none", "none"),
])
def test_xid154_recovery_targets(target, action, recovery):
    # The real Xid 154 line from the heartbeat capture with its target action varied.
    with open(os.path.join(FIXTURES, "xid154-gsp-heartbeat-595.71.05.log"), encoding="utf-8") as handle:
        line = [text for text in handle.read().splitlines() if "Xid" in text][0]
    assert line.endswith("to 0x1 (GPU Reset Required)")
    (event,) = parse_kernel_log(line.replace("0x1 (GPU Reset Required)", target))
    assert (event["catalog"]["action"], event["catalog"]["recovery_action"]) == (action, recovery)


@pytest.mark.parametrize("xid, name, action", [
    (8, "GPU stopped processing", "restart_app"), (13, "Graphics Engine Exception", "restart_app"),
    (31, "GPU memory page fault", "restart_app"), (32, "Invalid or corrupted push buffer stream", "restart_app"),
    (43, "GPU stopped processing", "none"), (45, "Preemptive cleanup, due to previous errors", "none"),
    (48, "Double Bit ECC Error", "reset_gpu"), (61, "Internal micro-controller breakpoint/warning", "report"),
    (62, "Internal micro-controller halt", "reset_gpu"), (63, "GPU memory remapping event", "none"),
    (64, "GPU memory remapping failure", "reset_gpu"), (68, "NVDEC0 Exception", "restart_app"),
    (69, "Graphics Engine class error", "restart_app"), (74, "NVLINK Error", "reset_gpu"),
    (79, "GPU has fallen off the bus", "reboot"), (92, "High single-bit ECC error rate", "none"),
    (94, "Contained memory error", "restart_app"), (95, "Uncontained memory error", "reset_gpu"),
    (109, "Context Switch Timeout Error", "reset_gpu"), (119, "GSP RPC Timeout", "reset_gpu"),
    (120, "GSP Error", "reset_gpu"), (121, "C2C Error", "none"), (140, "ECC Unrecovered Error", "reset_gpu"),
    (143, "GPU Initialization Error", "reset_gpu"), (144, "NVLINK: SAW Error", "report"),
    (150, "NVLINK: MSE Error", "report"), (154, "GPU Recovery Action Changed", "report"),
    (155, "NVLINK: SW Defined Error", "reset_gpu"), (54, "Auxiliary power is not connected to the GPU board", "check_hw"),
])
def test_catalog(xid, name, action):
    entry = _kernel_log.XID_CATALOG[xid]
    assert (entry["name"], entry["action"]) == (name, action)
    assert entry["severity"] in ("info", "warning", "critical", "fatal")


def test_catalog_covers_144_to_150():
    assert all(_kernel_log.XID_CATALOG[xid]["mnemonic"].startswith("NVLINK_") for xid in range(144, 151))


def test_unknown_xid():
    line = "[ 12.000001] NVRM: Xid (PCI:0000:3b:00): 999, pid=42, name=python, something new"
    (event,) = parse_kernel_log(line)
    assert (event["xid"], event["catalog"]["name"], event["catalog"]["action"]) == (999, "unknown", "report")


def test_noise_lines_give_no_events():
    # The GSP RPC history, stack trace and serial number lines of the Xid 119 capture are not events.
    with open(os.path.join(FIXTURES, "xid119-gsp-timeout-h100-dmesg-ctime.log"), encoding="utf-8") as handle:
        lines = handle.read().splitlines()
    noise = "\n".join(line for line in lines if "Xid" not in line)
    assert parse_kernel_log(noise) == []
    assert parse_kernel_log("") == []


def test_crlf_and_bytes():
    with open(os.path.join(FIXTURES, "xid43-31-94-multi-gpu-dmesg-T.log"), "rb") as handle:
        raw = handle.read()
    assert summary(parse_kernel_log(raw.replace(b"\n", b"\r\n"))) == EXPECTED["xid43-31-94-multi-gpu-dmesg-T.log"]


def test_bus_id_to_index():
    events = events_of("xid43-31-94-multi-gpu-dmesg-T.log")
    gpus = [{"index": 0, "pci_bus_id": "00000000:00:05.0"}, {"index": 1, "pci_bus_id": "0000:00:07.0"},
            {"index": 2, "pci_bus_id": "00000000:00:1E.0"}]
    mapped = _kernel_log.bus_id_to_index(events, gpus)
    assert mapped is events  # filled in place (the snapshot relies on it)
    assert [e["gpu_index"] for e in events] == [0, 0, 1, None]
    fallen = _kernel_log.bus_id_to_index(events_of("fallen-off-bus-multiline-570.158.01.log"),
                                         [{"index": 3, "pci_bus_id": "00000000:B3:00.0"}])
    assert fallen[0]["gpu_index"] == 3


def test_kernel_log_argv():
    assert _kernel_log.kernel_log_argv("journal", 30, journalctl="/usr/bin/journalctl") == [
        "/usr/bin/journalctl", "-k", "-o", "short-iso", "--no-pager", "--since", "-30min"]
    assert _kernel_log.kernel_log_argv("journal", None) == ["journalctl", "-k", "-o", "short-iso", "--no-pager"]
    assert _kernel_log.kernel_log_argv("dmesg", 30, dmesg="/usr/bin/dmesg") == ["/usr/bin/dmesg", "-T"]
    with pytest.raises(ValueError):
        _kernel_log.kernel_log_argv("syslog", 30)


def test_short_iso_prefix():
    # journalctl -o short-iso (what kernel_log_argv asks for) on the real Blackwell journal lines.
    with open(os.path.join(FIXTURES, "xid120-62-154-45-journal-blackwell-595.58.03.log"), encoding="utf-8") as handle:
        text = handle.read()
    iso = text.replace("Mar 29 15:38:59 kernel:", "2026-03-29T15:38:59+0000 gpu-node-7 kernel:")
    events = parse_kernel_log(iso)
    assert [e["time"] for e in events[:2]] == ["2026-03-29T15:38:59+0000"] * 2
    assert summary(events)[2:] == EXPECTED["xid120-62-154-45-journal-blackwell-595.58.03.log"][2:]


def test_mig_lines_keep_the_gpu_and_compute_instance():
    events = events_of("xid94-95-error-containment-mig.log")
    assert [(e["gpu_instance_id"], e["compute_instance_id"]) for e in events] == [(5, None), (None, None), (None, None)]
    assert events[0]["message"] == "Contained: CE User Channel (0x9). RST: No, D-RST: No"
    # The line: the driver's format "PCI:%04x:%02x:%02x GPU-I:%02u GPU-CI:%02u" with a process.
    line = ("[ 7461.120341] NVRM: Xid (PCI:0000:01:00 GPU-I:05 GPU-CI:00): 94, pid=7194, name=python3, "
            "Contained: CE User Channel (0x9). RST: No, D-RST: No")
    (event,) = parse_kernel_log(line)
    assert (event["xid"], event["pci_bus_id"], event["gpu_instance_id"], event["compute_instance_id"]) == (94, "00000000:01:00.0", 5, 0)
    assert (event["pid"], event["process_name"], event["time"]) == (7194, "python3", "7461.120341")


def test_rst_yes_asks_for_a_reset():
    events = events_of("xid94-95-error-containment-mig.log")
    assert events[2]["catalog"]["recovery_action"] == "reset"
    contained = events[0]["line"].replace("RST: No, D-RST: No", "RST: No, D-RST: Yes")
    (event,) = parse_kernel_log(contained)
    assert (event["catalog"]["action"], event["catalog"]["recovery_action"]) == ("reset_gpu", "drain_and_reset")
    assert "recovery_action" not in events[0]["catalog"]


@pytest.mark.parametrize("line, pid, name, message", [
    # ml-engineering (stas00) compute/accelerator/nvidia/debug.md: pid followed by other fields, no name=.
    ("NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper: New row marked for remapping, reset gpu to activate.",
     1896, None, "Row Remapper: New row marked for remapping, reset gpu to activate."),
    # journal line quoted in a public test: pid=0 with no name=.
    ("2026-09-14T20:30:27-0400 Farttop kernel: NVRM: Xid (PCI:0000:01:00): 79, pid=0, GPU has fallen off the bus.",
     0, None, "GPU has fallen off the bus."),
    # The real Xid 45 line of the fixture with the padding some drivers print after "pid=N,".
    ("kernel: NVRM: Xid (PCI:0000:dc:00): 45, pid=8494,   name=python3, Ch 00000001 caused by previous Xid 149",
     8494, "python3", "Ch 00000001 caused by previous Xid 149"),
    ("NVRM: Xid (PCI:0000:01:00): 48, pid='<unknown>', name='<unknown>', An uncorrectable double bit error",
     None, None, "An uncorrectable double bit error"),
])
def test_pid_and_name_variants(line, pid, name, message):
    (event,) = parse_kernel_log(line)
    assert (event["pid"], event["process_name"], event["message"]) == (pid, name, message)


@pytest.mark.parametrize("xid", [14, 37, 38, 43, 44, 63, 66, 67, 92, 93, 106, 107, 108, 121, 137, 141, 152, 153, 157, 160, 161])
def test_every_code_the_catalog_marks_ignore_gets_that_action(xid):
    assert _kernel_log.catalog_for(xid)["bucket"] == "IGNORE"
    assert _kernel_log.catalog_for(xid)["action"] == "none"


def test_copy_engines_10_to_19_restart_the_application():
    assert [_kernel_log.catalog_for(xid)["name"] for xid in (126, 135)] == ["CE10: Unknown Error", "CE19: Unknown Error"]
    assert set(_kernel_log.catalog_for(xid)["action"] for xid in range(126, 136)) == {"restart_app"}


def test_times_since_the_epoch():
    boot = 1700000000.0
    (uptime,) = parse_kernel_log("[  365.969681] NVRM: Xid (PCI:0000:01:00): 31, pid=1, name=x, y", boot_time=boot)
    assert uptime["time_epoch"] == pytest.approx(boot + 365.969681)
    (unknown_boot,) = parse_kernel_log("[  365.969681] NVRM: Xid (PCI:0000:01:00): 31, pid=1, name=x, y")
    assert unknown_boot["time_epoch"] is None
    assert _kernel_log.time_epoch("2026-03-29T15:38:59+0000", "iso") == 1774798739.0
    assert _kernel_log.time_epoch("2024-01-15T03:00:00,500000+00:00", "iso") == 1705287600.5
    assert _kernel_log.time_epoch("2026-09-14T20:30:27-0400", "iso") == 1789432227.0
    ctime = _kernel_log.time_epoch("Mon Aug  5 03:54:13 2024", "ctime")
    assert time.localtime(ctime)[:6] == (2024, 8, 5, 3, 54, 13)
    # syslog prints no year: the latest that is not in the future.
    now = time.mktime((2026, 1, 10, 12, 0, 0, 0, 0, -1))
    assert time.localtime(_kernel_log.time_epoch("Jan  9 08:00:00", "syslog", now=now))[:3] == (2026, 1, 9)
    assert time.localtime(_kernel_log.time_epoch("Dec 31 23:00:00", "syslog", now=now))[:3] == (2025, 12, 31)
    assert _kernel_log.time_epoch("Feb 30 10:00:00", "syslog", now=now) is None
    (dated,) = parse_kernel_log("Feb 15 17:37:45 Gipfeli kernel: [82659.755847] NVRM: Xid (PCI:0000:41:00): 13, x", boot_time=boot, now=now)
    assert time.localtime(dated["time_epoch"])[:6] == (2025, 2, 15, 17, 37, 45)
