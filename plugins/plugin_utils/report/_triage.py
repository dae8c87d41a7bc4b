# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What needs a human: every host of a report graded into one group (needs a human, held back, fixed, clean) with its
outcome, one line why and what would allow the next step. A read-only report and a plan are graded by what the ladder
would do (the verdict), in the conditional. Every format of the report starts with these groups (_run_report.py,
_report_html.py)."""

from __future__ import annotations

from ansible_collections.gpuops.remediation.plugins.module_utils._verdict import BUSY_CLASS, IN_USE, NO_RUNG
from ansible_collections.gpuops.remediation.plugins.plugin_utils.ladder._ladder_decisions import BUSY_EVIDENCE

NEEDS_A_HUMAN, HELD_BACK, FIXED, CLEAN = "needs a human", "held back", "fixed", "clean"
GROUPS = (NEEDS_A_HUMAN, HELD_BACK, FIXED, CLEAN)
# The rungs a run takes with the defaults (gpu_reclaim_max_rung=reload, no reboot): a verdict above them is held back.
DEFAULT_RUNGS = ("kill", "instance", "reset", "reload", "wsl", "restart_adapter")
LOST_NEXT = ("a reboot (gpu_reclaim_max_rung=reboot and gpu_reclaim_allow_reboot=true); if the GPU stays lost, send it back "
             "by the identity the report keeps (bus id, UUID)")
UNKILLABLE_NEXT = "a process in uninterruptible sleep waits on the kernel: a reboot (gpu_reclaim_max_rung=reboot, gpu_reclaim_allow_reboot=true)"
FLEET_GUARD = "fleet guard:"
BUSY_NEXT = "gpu_reclaim_end_running_jobs=true (a destructive step), or end the working program its owner's way"
FLEET_NEXT = "narrow the run with --limit, or raise gpu_remediate_max_destructive_percent"


def _gpu_states(entry):
    return [gpu.get(key) for gpu in entry.get("gpus") or [] for key in ("state", "state_before", "state_after") if gpu.get(key)]


def _allowing(msg):
    """The part of the ladder's message that names what would allow the next step ("...; X would allow it"), or ""."""
    parts = [part.strip() for part in (msg or "").split("; ") if "would allow" in part]
    return parts[-1] if parts else ""


def _lost(entry):
    lost = [gpu for gpu in entry.get("gpus") or [] if "lost" in (gpu.get("state"), gpu.get("state_before"), gpu.get("state_after"))]
    return ", ".join("GPU %s (%s)" % (gpu.get("index"), ", ".join(_known_identity(gpu))) for gpu in lost)


def _known_identity(gpu):
    """Bus id, UUID and serial as far as known, and from where when the driver could not say them."""
    known = [gpu.get("pci_bus_id") or "bus id unknown"]
    known += ["%s %s" % (label, gpu[field]) for field, label in (("uuid", "UUID"), ("serial", "serial")) if gpu.get(field)]
    if gpu.get("identity_from") == "watch_state":
        known.append("as the watch last saw it")
    return known


def _grade(outcome, group, why, allow=""):
    return {"group": group, "outcome": outcome, "why": why or "", "next": allow or ""}


def _by_verdict(entry):
    """A host the run only inspected: what the ladder would do, by its verdict."""
    rung, why = entry.get("entry_rung") or NO_RUNG, "; ".join(entry.get("reasons") or []) or entry.get("msg") or ""
    if _lost(entry):
        return _grade("lost GPU", NEEDS_A_HUMAN, "%s fell off the bus: %s" % (_lost(entry), why), LOST_NEXT)
    if entry.get("held_back"):
        return _grade("busy", HELD_BACK, entry["held_back"], _allowing(entry["held_back"]))
    if rung == NO_RUNG:
        busy = IN_USE in _gpu_states(entry) or "busy" in _gpu_states(entry)
        return _grade("in use" if busy else "clean", CLEAN, "working programs hold its memory" if busy else "no GPU memory held")
    if rung not in DEFAULT_RUNGS:
        return _grade("above max rung", HELD_BACK, "the evidence needs the %s rung: %s" % (rung, why),
                      "gpu_reclaim_max_rung=%s%s" % (rung, " and gpu_reclaim_allow_reboot=true" if rung == "reboot" else ""))
    return _grade("would be fixed by %s" % rung, FIXED, "the ladder would take the %s rung: %s" % (rung, why))


def triage(entry):
    """The grade of one host of the report (host_entry's shape)."""
    status, msg = entry.get("status"), entry.get("msg") or ""
    holders = entry.get("held_by") or []
    if status == "inspected":
        return _by_verdict(entry)
    if status == "refused" and msg.startswith(FLEET_GUARD):
        return _grade("refused", NEEDS_A_HUMAN, msg.split(". ")[0], FLEET_NEXT)
    if _lost(entry) and status != "fixed":
        return _grade("lost GPU", NEEDS_A_HUMAN, "%s fell off the bus: %s" % (_lost(entry), msg), LOST_NEXT)
    if status == "fixed":
        return _grade("fixed", FIXED, msg)
    if status == "clean":
        return _grade("clean", CLEAN, msg)
    if status == "planned":
        return _grade("would be fixed", FIXED, msg)
    if status == "partly fixed":
        return _grade("busy" if BUSY_EVIDENCE in msg else "above max rung", HELD_BACK, msg, _allowing(msg))
    if status == "refused":
        allow = _allowing(msg)
        refused = "busy" if BUSY_EVIDENCE in msg else "above max rung" if "heaviest rung allowed" in msg else "refused"
        return _grade(refused, HELD_BACK if allow else NEEDS_A_HUMAN, msg, allow)
    if status == "failed" and any(holder.get("class") == "unkillable" for holder in holders):
        return _grade("unkillable", NEEDS_A_HUMAN, msg, UNKILLABLE_NEXT)
    if status == "failed" and any(holder.get("class") == BUSY_CLASS for holder in holders):
        return _grade("busy", HELD_BACK, msg, _allowing(msg) or BUSY_NEXT)
    if status == "failed" and IN_USE in _gpu_states(entry) and _allowing(msg):
        return _grade("in use", HELD_BACK, msg, _allowing(msg))
    if status == "not_reached":
        return _grade("not reached", NEEDS_A_HUMAN, msg, "reach the host (its connection, its Python) and run again")
    return _grade(status or "failed", NEEDS_A_HUMAN, msg, _allowing(msg))


WOULD_BE_FIXED = "would be fixed"


def fleet_triage(entries, conditional=False):
    """[{group, hosts: [{host, outcome, why, next}]}] in GROUPS order, only the groups that have hosts. conditional: a plan
    or a read-only report, where nothing was fixed: the group says "would be fixed" (in each host's grade too)."""
    for entry in entries:
        if conditional and entry["triage"]["group"] == FIXED:
            entry["triage"]["group"] = WOULD_BE_FIXED
    groups = []
    for group in (GROUPS if not conditional else tuple(WOULD_BE_FIXED if name == FIXED else name for name in GROUPS)):
        hosts = [dict(entry["triage"], host=entry["host"]) for entry in entries if entry["triage"]["group"] == group]
        if hosts:
            groups.append({"group": group, "hosts": [dict((key, host[key]) for key in ("host", "outcome", "why", "next")) for host in hosts]})
    return groups
