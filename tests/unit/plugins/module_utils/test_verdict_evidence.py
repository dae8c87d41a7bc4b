# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which kernel log evidence still chooses the rung: MIG Xids, evidence a reset, reload or reboot answered,
the processes that block every reset, a lost GPU named by its kernel log line. Snapshots are joined as
take_snapshot joins them, from real nvidia-smi captures, real kernel log lines and this test's own process."""

from __future__ import annotations

import os
import time

from ansible_collections.gpuops.remediation.plugins.module_utils.probes._kernel_log import bus_id_to_index, parse_kernel_log
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._nvsmi import parse_query_xml
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._process import boot_time, read_process, start_time_epoch
from ansible_collections.gpuops.remediation.plugins.module_utils._snapshot import (
    SnapshotOptions, _finish_gpu, _lost_bus_ids, build_holders, reset_blockers,
)
from ansible_collections.gpuops.remediation.plugins.module_utils._verdict import answer_events, reset_evidence, verdict

from ansible_collections.gpuops.remediation.tests.unit.helpers import bounded

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures")

OK_PROBE = {"backend": "nvidia_smi", "ok": True, "timed_out": False, "error": None}
MIG_XML = "v12-a100-sxm4-mig-535.54.03.xml"  # one A100 in MIG mode at 00000000:01:00.0


def fixture(*parts):
    with open(os.path.join(FIXTURES, *parts), "rb") as handle:
        return handle.read().decode("utf-8", "replace")


def mig_lines():
    return [line for line in fixture("kernel-xid", "xid94-95-error-containment-mig.log").splitlines() if line]


def snapshot(kernel_log, xml=MIG_XML, devices=None, completed=(), boot=None, gpus=None):
    """A snapshot of the capture; with devices, this test's process holds them (a real, live holder)."""
    gpus = gpus if gpus is not None else parse_query_xml(fixture("nvidia-smi-qx", xml))["gpus"]
    scan = {}
    if devices:
        me = read_process(os.getpid())
        scan[me["pid"]] = dict(me, via=["fd"], devices=devices)
    holders = build_holders(scan, gpus)
    options = SnapshotOptions()
    events = parse_kernel_log(kernel_log, boot_time=boot)
    _lost_bus_ids(gpus, events)
    bus_id_to_index(events, gpus)
    starts = dict((h["pid"], start_time_epoch(h["start_time"])) for h in holders if h.get("start_time") is not None)
    answer_events(events, list(completed), boot, holders, starts)
    gpus = [_finish_gpu(gpu, holders, options, OK_PROBE) for gpu in gpus]
    snap = {"gpus": gpus, "holders": holders, "xid_events": events, "probes": {"gpu": OK_PROBE},
            "reset_blockers": reset_blockers(holders)}
    snap["verdict"] = verdict(snap, options.ghost_threshold_mib)
    return snap


def reasons(snap, rung=None):
    return [r["reason"] for r in snap["verdict"]["reasons"] if rung is None or r["rung"] == rung]


def test_an_uncontained_error_on_a_mig_gpu_asks_for_a_reset():
    # The driver's Xid 95 line, attributed to GPU instance 5 as it is on a MIG GPU.
    line = mig_lines()[2].replace("(PCI:0000:01:00)", "(PCI:0000:01:00 GPU-I:05 GPU-CI:00)")
    snap = snapshot(line)
    (event,) = snap["xid_events"]
    assert (event["gpu_index"], event["gpu_instance_id"], event["compute_instance_id"]) == (0, 5, 0)
    assert snap["verdict"]["rung"] == "reset"
    assert reasons(snap, "reset") == [
        "kernel log: Xid 95 (Uncontained memory error) on 00000000:01:00.0 GPU instance 5 compute instance 0"]
    assert reset_evidence(snap["gpus"][0], snap["xid_events"], 256) == "Xid 95 on GPU 0 asks for a reset"


def test_a_contained_error_on_a_mig_gpu_ends_the_application_it_hit():
    # The driver's MIG Xid 94 line, naming this (live) process, which holds GPU 0.
    line = "[ %.6f] %s" % (time.time() - boot_time() + 5, mig_lines()[0].replace("pid=7194", "pid=%d" % os.getpid()))
    snap = snapshot(line, devices=["/dev/nvidia0", "/dev/nvidiactl"], boot=boot_time())
    assert snap["xid_events"][0]["answered_by"] is None
    assert snap["verdict"]["rung"] == "kill"
    assert ("kernel log: Xid 94 (Contained memory error) on 00000000:01:00.0 GPU instance 5: the application it hit "
            "(pid %d) must end" % os.getpid()) in reasons(snap, "kill")
    # Once that application is gone, the contained error asks for nothing more.
    gone = snapshot(mig_lines()[0])
    assert gone["xid_events"][0]["answered_by"] == {"action": "process_exit", "time": None}
    assert gone["verdict"]["rung"] == "none"
    # "RST: Yes": the driver marked the GPU for a reset.
    marked = snapshot(mig_lines()[0].replace("RST: No,", "RST: Yes,"))
    assert marked["verdict"]["rung"] == "reset"


XID119 = ("[  100.000000] NVRM: Xid (PCI:0000:01:00): 119, pid=2024380, name=nvidia-smi, Timeout after 6s of waiting for RPC "
          "response from GPU4 GSP! Expected function 103 (GSP_RM_ALLOC) (0x2081 0x4).")


def reset_done(epoch, gpus=(0,), bus_ids=("00000000:01:00.0",), action="gpu_reset"):
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime(epoch))
    return {"action": action, "time": stamp, "epoch": epoch, "gpus": None if gpus is None else list(gpus), "bus_ids": list(bus_ids)}


def test_an_xid_a_later_reset_answered_no_longer_chooses_the_rung():
    boot = time.time() - 1000  # the Xid at uptime 100 s: 900 s ago
    assert snapshot(XID119, boot=boot)["verdict"]["rung"] == "reset"
    snap = snapshot(XID119, boot=boot, completed=[reset_done(boot + 500)])
    (event,) = snap["xid_events"]
    assert event["answered_by"] == {"action": "gpu_reset", "time": reset_done(boot + 500)["time"]}
    assert snap["verdict"]["rung"] == "none"
    assert reasons(snap) == ["kernel log: Xid 119 (GSP RPC Timeout) on 00000000:01:00.0 was already answered by a later GPU "
                             "reset at %s: it no longer chooses the rung" % event["answered_by"]["time"]]
    assert reset_evidence(snap["gpus"][0], snap["xid_events"], 256) is None


def test_only_a_later_reset_of_that_gpu_or_a_reload_answers():
    boot = time.time() - 1000
    earlier = snapshot(XID119, boot=boot, completed=[reset_done(boot + 50)])
    other_gpu = snapshot(XID119, boot=boot, completed=[reset_done(boot + 500, gpus=(1,), bus_ids=("00000000:3B:00.0",))])
    by_bus = snapshot(XID119, boot=boot, completed=[reset_done(boot + 500, gpus=(7,))])
    reload = snapshot(XID119, boot=boot, completed=[reset_done(boot + 500, gpus=None, bus_ids=(), action="nvidia_driver_reload")])
    assert [s["verdict"]["rung"] for s in (earlier, other_gpu, by_bus, reload)] == ["reset", "reset", "none", "none"]
    assert reload["xid_events"][0]["answered_by"]["action"] == "nvidia_driver_reload"


def test_evidence_from_before_the_boot_was_answered_by_the_reboot():
    # A syslog line (kern.log keeps earlier boots) dated before this boot.
    line = "Feb 15 17:37:45 gpu-node kernel: [82659.755847] NVRM: Xid (PCI:0000:01:00): 79, pid=0, GPU has fallen off the bus."
    (event,) = parse_kernel_log(line)
    snap = snapshot(line, boot=event["time_epoch"] + 3600)
    assert snap["xid_events"][0]["answered_by"]["action"] == "reboot"
    assert snap["verdict"]["rung"] == "none"
    assert "answered by the reboot since" in reasons(snap)[0]
    assert snapshot(line, boot=event["time_epoch"] - 3600)["verdict"]["rung"] == "reboot"


def test_a_holder_of_nvidiactl_alone_blocks_every_reset_and_the_verdict_names_it():
    # Ghost memory on the RTX 3080 asks for a reset; this process holding nvidiactl (and no GPU) blocks it.
    snap = snapshot("", xml="telegraf-rtx-3080-v13.xml", devices=["/dev/nvidiactl", "/dev/nvidia-uvm"])
    (blocker,) = snap["reset_blockers"]
    assert (blocker["pid"], blocker["devices"]) == (os.getpid(), ["/dev/nvidiactl", "/dev/nvidia-uvm"])
    assert snap["verdict"]["rung"] == "reset"
    blocking = [r for r in reasons(snap, "reset") if "blocks every GPU reset" in r]
    assert blocking == ["pid %d (%s, compute) holds only /dev/nvidiactl, /dev/nvidia-uvm, which blocks every GPU reset until "
                        "it ends or its service stops" % (os.getpid(), blocker["name"])]
    # A holder of a GPU device blocks that GPU only; without a reset to do, nobody is named.
    assert snapshot("", xml="telegraf-rtx-3080-v13.xml", devices=["/dev/nvidiactl", "/dev/nvidia0"])["reset_blockers"] == []
    idle = snapshot("", devices=["/dev/nvidiactl"])
    assert idle["reset_blockers"] and not [r for r in reasons(idle) if "blocks every GPU reset" in r]


def test_a_lost_gpu_is_named_by_its_kernel_log_line():
    gpus = [{"index": 0, "lost": True, "processes": []},
            {"index": 1, "pci_bus_id": "00000000:18:00.0", "uuid": "GPU-1", "name": "x", "processes": [], "memory_used_mib": 0}]
    snap = snapshot(fixture("kernel-xid", "fallen-off-bus-multiline-570.158.01.log"), gpus=gpus)
    lost = snap["gpus"][0]
    assert (lost["pci_bus_id"], lost["pci_bus_id_from"], lost["state"]) == ("00000000:B3:00.0", "kernel_log", "lost")
    assert snap["xid_events"][0]["gpu_index"] == 0
    assert "GPU 0 (00000000:B3:00.0) is lost to the driver: only a reboot brings it back" in reasons(snap, "reboot")
    # Two lost GPUs, one line: which is which cannot be told, so neither is named.
    two = [{"index": 0, "lost": True, "processes": []}, {"index": 1, "lost": True, "processes": []}]
    assert [g["pci_bus_id"] for g in snapshot(fixture("kernel-xid", "fallen-off-bus-multiline-570.158.01.log"), gpus=two)["gpus"]] == [None, None]


# --- uninterruptible sleep is evidence only once SIGKILL failed ---------------------------------------------

def _d_holder(**extra):
    holder = {"pid": 4242, "start_time": 777, "name": "trainer", "class": "compute", "state": "disk-sleep", "gpus": [0],
              "used_mib": 4096, "frozen_cgroup": None}
    holder.update(extra)
    return holder


def _gpu_snapshot(holder):
    gpus = [{"index": 0, "pci_bus_id": "00000000:01:00.0", "memory_used_mib": 4096, "unattributed_mib": 0}]
    return {"gpus": gpus, "holders": [holder], "xid_events": [], "probes": {"gpu": OK_PROBE}, "reset_blockers": []}


def test_a_holder_in_d_asks_for_the_kill_rung_not_a_reboot():
    found = verdict(_gpu_snapshot(_d_holder()), 256)
    assert found["rung"] == "kill"
    assert "uninterruptible sleep (D)" in found["reasons"][0]["reason"] and "outliving SIGKILL" in found["reasons"][0]["reason"]


def test_only_a_holder_that_outlived_sigkill_asks_for_a_reboot():
    found = verdict(_gpu_snapshot(_d_holder(**{"class": "unkillable", "outlived_kill": "2026-12-01T22:00:00.000000Z"})), 256)
    assert found["rung"] == "reboot"
    assert "outlived SIGKILL (journal, 2026-12-01T22:00:00.000000Z)" in found["reasons"][0]["reason"]


def test_a_frozen_cgroup_is_named_and_asks_for_the_kill_rung():
    frozen = {"cgroup": "/sys/fs/cgroup/freezer/job", "file": "/sys/fs/cgroup/freezer/job/freezer.state"}
    found = verdict(_gpu_snapshot(_d_holder(frozen_cgroup=frozen)), 256)
    assert found["rung"] == "kill"
    assert "/sys/fs/cgroup/freezer/job is frozen" in found["reasons"][0]["reason"] and "thaw_frozen" in found["reasons"][0]["reason"]


def test_the_snapshot_classes_unkillable_from_the_journal_a_live_d_process(tmp_path, spawn, procs):
    """A real process in D (a vfork parent's killable wait) that the journal says outlived SIGKILL, and one it does
    not name: only the first is unkillable."""
    import shutil  # pylint: disable=import-outside-toplevel
    import subprocess  # pylint: disable=import-outside-toplevel
    from ansible_collections.gpuops.remediation.plugins.module_utils.journal._writer import Journal  # pylint: disable=import-outside-toplevel
    from ansible_collections.gpuops.remediation.plugins.module_utils._snapshot import mark_unkillable  # pylint: disable=import-outside-toplevel
    compiler = shutil.which("cc") or shutil.which("gcc")
    if not compiler:
        import pytest  # pylint: disable=import-outside-toplevel
        pytest.skip("no C compiler to build a vfork parent")
    source = tmp_path / "vfork_parent.c"
    source.write_text("#include <unistd.h>\n#include <sys/prctl.h>\n#include <signal.h>\n"
                      "int main(void) { if (vfork() == 0) { prctl(PR_SET_PDEATHSIG, SIGKILL); sleep(60); _exit(0); } return 0; }\n")
    binary = str(tmp_path / "vfork_parent")
    subprocess.run([compiler, "-o", binary, str(source)], check=True, timeout=120)
    named, other = spawn([binary]), spawn([binary])
    procs.wait_until(lambda: procs.state_of(named.pid) == "D" and procs.state_of(other.pid) == "D")
    journal = Journal(str(tmp_path / "journal.jsonl"))
    entry = journal.intent("signal", pid=named.pid, start_time=procs.target_for(named.pid).start_time, signal="KILL")
    journal.outcome(entry, True, pid=named.pid, signal="KILL", exited=False, outlived_kill=True, state="D")
    holders = [_d_holder(pid=proc.pid, start_time=procs.target_for(proc.pid).start_time) for proc in (named, other)]
    mark_unkillable(holders, journal.path)
    assert [h["class"] for h in holders] == ["unkillable", "compute"]
    assert holders[0]["outlived_kill"] == journal.entries()[1]["ts"] and holders[0]["frozen_cgroup"] is None
    for proc in (named, other):
        proc.kill()
        bounded.wait(proc, "proc")


# ---------------------------------------------------------------- clock skew: a line dated ahead of the node's clock

def _xid119_at(epoch):
    """The kernel's Xid 119 line on the capture's GPU (00000000:01:00.0) in a syslog file, dated `epoch`."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(epoch))
    return "%s node7 kernel: NVRM: Xid (PCI:0000:01:00): 119, pid=4242, name=python3, Timeout after 6s of waiting for RPC response" % stamp


def _reset_at(epoch):
    return {"action": "gpu_reset", "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch)), "epoch": epoch, "gpus": [0],
            "bus_ids": ["00000000:01:00.0"]}


def test_an_xid_dated_ahead_of_the_clock_is_answered_by_the_first_reset_of_its_gpu_since_the_boot():
    """A line written while the clock ran a day ahead: no reset can come "later" than it, so it would ask for a reset
    at every run for ever. Its time says nothing: the first reset of its GPU since the boot answers it."""
    now = time.time()
    snap = snapshot(_xid119_at(now + 86400), completed=[_reset_at(now - 60)], boot=now - 3600)
    assert snap["xid_events"][0]["answered_by"] == {"action": "gpu_reset", "time": _reset_at(now - 60)["time"]}
    assert snap["verdict"]["rung"] != "reset"


def test_an_xid_dated_ahead_of_the_clock_is_evidence_until_a_reset_since_the_boot():
    now = time.time()
    snap = snapshot(_xid119_at(now + 86400), completed=[_reset_at(now - 7200)], boot=now - 3600)  # the reset was before the boot
    assert snap["xid_events"][0]["answered_by"] is None
    assert snap["verdict"]["rung"] == "reset"


def test_a_reset_dated_ahead_of_the_clock_answers_nothing():
    """A journal outcome written while the clock ran ahead is no reset that came after the Xid (completed_resets)."""
    from ansible_collections.gpuops.remediation.plugins.module_utils.journal._evidence import completed_resets

    now = time.time()
    ahead = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime(now + 86400))
    records = [{"ts": ahead, "run_id": "r", "id": "r-1", "phase": "intent", "action": "gpu_reset", "gpus": [0],
                "argv": ["nvidia-smi", "--gpu-reset", "-i", "00000000:01:00.0"]},
               {"ts": ahead, "run_id": "r", "id": "r-1", "phase": "outcome", "action": "gpu_reset", "ok": True}]
    snap = snapshot(_xid119_at(now - 600), completed=completed_resets(records, now), boot=now - 3600)
    assert snap["xid_events"][0]["answered_by"] is None
    assert snap["verdict"]["rung"] == "reset"
