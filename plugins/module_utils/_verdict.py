# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The verdict: the lowest rung of the ladder expected to give the memory back, read only from a snapshot."""

from __future__ import annotations

RUNGS = ("none", "kill", "reset", "reload", "reboot")
RECOVERY_RUNGS = {"reset": "reset", "drain_and_reset": "reset", "reboot": "reboot"}
XID_RUNGS = {"reset_gpu": "reset", "reboot": "reboot"}
STUCK_CLASSES = ("zombie", "unkillable")
# Present on a healthy node: they hold the GPU by design, and the rungs that need them gone stop them.
EXPECTED_CLASSES = ("gpu_daemon", "graphics_session")


def rung_index(rung):
    return RUNGS.index(rung)


def _gpu_label(gpu):
    return "GPU %s (%s)" % (gpu["index"], gpu.get("pci_bus_id") or "bus id unknown")


def _memory_holders(gpu, holders):
    return [h for h in holders if gpu["index"] in h["gpus"] and h["class"] not in EXPECTED_CLASSES]


def gpu_state(gpu, holders, ghost_threshold_mib, probe_report):
    """ok, busy, stuck, lost, unresponsive (the driver did not answer) or unknown (no driver answer at all)."""
    if gpu.get("lost"):
        return "lost"
    if not probe_report.get("ok"):
        return "unresponsive" if probe_report.get("timed_out") else "unknown"
    mine = _memory_holders(gpu, holders)
    ghost = gpu.get("unattributed_mib") or 0
    if any(h["class"] in STUCK_CLASSES for h in mine) or ghost > ghost_threshold_mib or gpu.get("recovery_action") in RECOVERY_RUNGS:
        return "stuck"
    return "busy" if mine else "ok"


class _Finding:
    def __init__(self):
        self.rung = "none"
        self.reasons = []

    def need(self, rung, reason):
        if rung_index(rung) > rung_index(self.rung):
            self.rung = rung
        self.reasons.append({"rung": rung, "reason": reason})


def _gpu_findings(finding, gpu, probe_report, ghost_threshold_mib):
    label = _gpu_label(gpu)
    if gpu.get("lost"):
        finding.need("reboot", "%s is lost to the driver: only a reboot brings it back" % label)
    elif gpu.get("state") == "unresponsive":
        finding.need("reboot", "the driver did not answer for %s (%s)" % (label, probe_report.get("error")))
    action = gpu.get("recovery_action")
    if action in RECOVERY_RUNGS:
        finding.need(RECOVERY_RUNGS[action], "NVML asks for recovery action '%s' on %s" % (action, label))
    ghost = gpu.get("unattributed_mib")
    if ghost is not None and ghost > ghost_threshold_mib:
        finding.need("reset", "%s has %d MiB in use that no live process accounts for (ghost memory)" % (label, ghost))


def _holder_findings(finding, gpu, holders):
    for holder in _memory_holders(gpu, holders):
        what = "pid %s (%s)" % (holder["pid"], holder.get("name"))
        memory = " with %s MiB" % holder["used_mib"] if holder.get("used_mib") is not None else ""
        if holder["class"] == "unkillable":
            finding.need("reboot", "%s holds GPU %s%s in uninterruptible sleep (D): no signal ends it" % (what, gpu["index"], memory))
        elif holder["class"] == "zombie":
            finding.need("kill", "%s holds GPU %s%s as a zombie: its parent pid %s (%s) must reap it"
                         % (what, gpu["index"], memory, holder.get("ppid"), holder.get("parent_name")))
        else:
            finding.need("kill", "%s holds GPU %s%s (%s)" % (what, gpu["index"], memory, holder["class"]))


def _xid_findings(finding, events, indexes):
    for event in events:
        if event.get("gpu_index") is not None and event["gpu_index"] not in indexes:
            continue
        rung = XID_RUNGS.get((event.get("catalog") or {}).get("action"))
        if rung:
            what = "the GPU fell off the bus" if event["kind"] == "fallen_off_bus" else "Xid %s (%s)" % (event["xid"], event["catalog"]["name"])
            finding.need(rung, "kernel log: %s on %s" % (what, event.get("pci_bus_id") or "an unnamed GPU"))


def verdict(snapshot, ghost_threshold_mib):
    """{"rung": one of RUNGS, "reasons": [{"rung", "reason"}]}: the entry rung and the evidence for it."""
    finding = _Finding()
    probe_report = snapshot["probes"]["gpu"]
    if not snapshot["gpus"] and not probe_report.get("ok"):
        finding.reasons.append({"rung": "none", "reason": "no GPU could be read: %s" % probe_report.get("error")})
    for gpu in snapshot["gpus"]:
        _gpu_findings(finding, gpu, probe_report, ghost_threshold_mib)
        _holder_findings(finding, gpu, snapshot["holders"])
    _xid_findings(finding, snapshot["xid_events"], set(gpu["index"] for gpu in snapshot["gpus"]))
    return {"rung": finding.rung, "reasons": finding.reasons}


def reset_evidence(gpu, xid_events, ghost_threshold_mib):
    """Why this GPU needs a reset (ghost memory, NVML's recovery action, an Xid), or None."""
    ghost = gpu.get("unattributed_mib")
    if ghost is not None and ghost > ghost_threshold_mib:
        return "%d MiB of ghost memory on GPU %s" % (ghost, gpu["index"])
    if RECOVERY_RUNGS.get(gpu.get("recovery_action")) == "reset":
        return "NVML asks GPU %s for recovery action %s" % (gpu["index"], gpu["recovery_action"])
    for event in xid_events:
        if event.get("gpu_index") == gpu["index"] and (event.get("catalog") or {}).get("action") == "reset_gpu":
            return "Xid %s on GPU %s asks for a reset" % (event.get("xid"), gpu["index"])
    return None
