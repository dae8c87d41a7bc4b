"""The verdict and GPU states, read from snapshots built out of real nvidia-smi captures and kernel logs."""
import os

import pytest

from ansible_collections.gpuops.remediation.plugins.module_utils.probes._kernel_log import bus_id_to_index, parse_kernel_log
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._nvsmi import parse_query_xml
from ansible_collections.gpuops.remediation.plugins.module_utils._snapshot import SnapshotOptions, _finish_gpu, build_holders
from ansible_collections.gpuops.remediation.plugins.module_utils._verdict import answer_events, gpu_state, kill_targets, memory_held, verdict

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures")

OK_PROBE = {"backend": "nvidia_smi", "ok": True, "timed_out": False, "error": None}


def fixture(*parts):
    with open(os.path.join(FIXTURES, *parts), "rb") as handle:
        return handle.read().decode("utf-8", "replace")


def snapshot_of(xml_name, kernel_log=None, tmp_path=None):
    """A snapshot as take_snapshot joins it, from a capture; no process of the capture is in our /proc."""
    gpus = parse_query_xml(fixture("nvidia-smi-qx", xml_name))["gpus"]
    options = SnapshotOptions()
    holders = build_holders({}, gpus, proc_root=str(tmp_path))
    gpus = [_finish_gpu(gpu, holders, options, OK_PROBE) for gpu in gpus]
    events = parse_kernel_log(fixture("kernel-xid", kernel_log)) if kernel_log else []
    bus_id_to_index(events, gpus)
    answer_events(events, [], None, holders, {})  # no journal, boot time unknown: every dated event is evidence
    snap = {"gpus": gpus, "holders": holders, "xid_events": events, "probes": {"gpu": OK_PROBE}}
    snap["verdict"] = verdict(snap, options.ghost_threshold_mib)
    return snap


def test_memory_in_use_with_no_process_is_ghost_memory_and_asks_for_a_reset(tmp_path):
    snap = snapshot_of("telegraf-rtx-3080-v13.xml", tmp_path=tmp_path)
    gpu = snap["gpus"][0]
    assert gpu["memory_used_mib"] == 9184 and gpu["processes"] == []
    assert gpu["unattributed_mib"] == 9184
    assert gpu["state"] == "stuck"
    assert snap["verdict"]["rung"] == "reset"
    assert "9184 MiB" in snap["verdict"]["reasons"][0]["reason"]


def test_one_process_on_eight_gpus_asks_for_a_kill_and_no_reset(tmp_path):
    snap = snapshot_of("v11-8x-v100s-460.73.01.xml", tmp_path=tmp_path)
    assert [h["pid"] for h in snap["holders"]] == [37305]
    holder = snap["holders"][0]
    assert holder["gpus"] == list(range(8)) and holder["visible"] is False
    assert holder["used_mib"] == 31683 + 29539 + 29533 + 32093 + 29511 + 32135 + 32151 + 29495
    assert all(gpu["state"] == "busy" and gpu["unattributed_mib"] == 6 for gpu in snap["gpus"])
    assert snap["verdict"]["rung"] == "kill"
    assert len(snap["verdict"]["reasons"]) == 8


def test_memory_not_available_per_process_never_counts_as_ghost(tmp_path):
    snap = snapshot_of("telegraf-tesla_p4.xml", tmp_path=tmp_path)
    gpu = snap["gpus"][0]
    assert gpu["unattributed_mib"] is None
    assert all(h["used_mib"] is None for h in snap["holders"])
    assert snap["verdict"]["rung"] == "kill"
    assert not [r for r in snap["verdict"]["reasons"] if r["rung"] == "reset"]


def test_an_idle_mig_gpu_needs_nothing(tmp_path):
    snap = snapshot_of("v12-a100-sxm4-mig-535.54.03.xml", tmp_path=tmp_path)
    assert snap["gpus"][0]["state"] == "ok"
    assert snap["verdict"] == {"rung": "none", "reasons": []}


@pytest.mark.parametrize("log, rung", [
    ("fallen-off-bus-multiline-570.158.01.log", "reboot"),
    ("xid119-gsp-timeout-h100-dmesg-ctime.log", "reset"),
    ("xid13-109-a100-dmesg-ctime.log", "reset"),
    ("xid31-mmu-fault-595.71.05.log", "none"),
])
def test_the_kernel_log_raises_the_entry_rung(tmp_path, log, rung):
    snap = snapshot_of("v12-a100-sxm4-mig-535.54.03.xml", kernel_log=log, tmp_path=tmp_path)
    assert snap["verdict"]["rung"] == rung
    if rung != "none":
        assert any("kernel log" in r["reason"] for r in snap["verdict"]["reasons"])


def test_a_driver_that_does_not_answer_asks_for_a_reboot(tmp_path):
    probe = {"backend": "nvml", "ok": False, "timed_out": True, "error": "nvml probe gave no answer within 2.0 s"}
    gpus = [{"index": 0, "minor_number": 0, "uuid": None, "name": None, "pci_bus_id": None, "processes": []}]
    options = SnapshotOptions()
    gpus = [_finish_gpu(gpu, [], options, probe) for gpu in gpus]
    snap = {"gpus": gpus, "holders": [], "xid_events": [], "probes": {"gpu": probe}}
    assert gpus[0]["state"] == "unresponsive"
    result = verdict(snap, 256)
    assert result["rung"] == "reboot"
    assert "no answer within 2.0 s" in result["reasons"][0]["reason"]


def _busy_snapshot(classes, ghost=0):
    holders = [{"pid": 100 + n, "name": "p%d" % n, "class": c, "gpus": [0], "used_mib": 1024,
                "job": {"why": "Slurm job 7 is RUNNING on this node"} if c == "busy" else None} for n, c in enumerate(classes)]
    gpu = {"index": 0, "pci_bus_id": "00000000:18:00.0", "unattributed_mib": ghost}
    gpu["state"] = gpu_state(gpu, holders, 256, OK_PROBE)
    snap = {"gpus": [gpu], "holders": holders, "xid_events": [], "probes": {"gpu": OK_PROBE}}
    snap["verdict"] = verdict(snap, 256)
    return snap


@pytest.mark.parametrize("classes, ghost, state, rung", [
    (["busy"], 0, "in_use", "none"),
    (["busy", "busy"], 0, "in_use", "none"),
    (["busy", "compute"], 0, "busy", "kill"),
    (["busy", "zombie"], 0, "stuck", "kill"),
    (["busy"], 4096, "stuck", "reset"),
    (["gpu_daemon"], 0, "ok", "none"),
])
def test_a_running_jobs_process_is_busy_not_stuck(classes, ghost, state, rung):
    snap = _busy_snapshot(classes, ghost)
    assert snap["gpus"][0]["state"] == state
    assert snap["verdict"]["rung"] == rung
    assert [h["class"] for h in kill_targets(snap)] == [c for c in classes if c not in ("busy", "gpu_daemon", "unkillable")]
    assert [h["class"] for h in kill_targets(snap, end_running_jobs=True)] == [c for c in classes if c not in ("gpu_daemon", "unkillable")]
    assert memory_held(snap) is (state != "ok" and state != "in_use")
    assert memory_held(snap, end_running_jobs=True) is (state != "ok")
