# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The verdict: the lowest rung of the ladder expected to give the memory back, read only from a snapshot."""

from __future__ import annotations

import datetime
import time

from ansible_collections.gpuops.remediation.plugins.module_utils._mig_selection import instance_label
from ansible_collections.gpuops.remediation.plugins.module_utils._mig_layout import pending_mig_change
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._pci import normalize_bus_id
from ansible_collections.gpuops.remediation.plugins.module_utils._xid_policy import event_rung

# The ladder, lightest rung first: the only definition of it. Everything else (the walk, the roles' argument specs,
# the playbooks' checks) reads it or is checked equal to it (tests/unit/plugins/module_utils/test_ladder_definition.py).
RUNGS = ("kill", "instance", "reset", "reload", "graphics", "reboot")
# The Windows ladder, lightest rung first: its only definition (win_gpu_holders_info's verdict picks among them).
WINDOWS_RUNGS = ("kill", "wsl", "restart_adapter", "logoff", "reboot")
# The verdict's rung when the evidence asks for none.
NO_RUNG = "none"
# The rungs evidence on a Linux node can ask for. The reload and graphics rungs are climbed to when a reset did not
# free the memory, never entered: no evidence points at them first. The instance rung answers ghost memory inside one
# MIG instance (re-creating that instance alone).
ENTRY_RUNGS = ("kill", "instance", "reset", "reboot")
# GPU states (gpu_state) in which the GPU still holds memory that the ladder is there to get back.
HELD_STATES = ("busy", "stuck", "lost", "unresponsive")
RECOVERY_RUNGS = {"reset": "reset", "drain_and_reset": "reset", "reboot": "reboot"}
# An Xid's rung: _xid_policy.event_rung (NVIDIA's catalog, or the site's policy). restart_app (kill): the application
# the Xid hit must end; once it has (see answer_events), the event asks for nothing.
# What answered earlier evidence (answer_events), as the verdict's reasons say it.
ANSWER_TEXT = {"gpu_reset": "a later GPU reset", "nvidia_driver_reload": "a later driver reload",
               "reboot": "the reboot since", "process_exit": "the end of the application it hit"}
# Slack for kernel log times printed to the second (dmesg -T, syslog) against process start times.
_CLOCK_SLACK_S = 1.0
# How far ahead of the node's clock a kernel line may be dated and still be placed in time (the journal's own slack).
AHEAD_SLACK_SECONDS = 300
STUCK_CLASSES = ("zombie", "unkillable")
# A working program (a live scheduler job's process, or one that kernel and runtime facts do not show left behind:
# _left_behind.holder_standing): reported, never ended unless the kill option end_running_jobs says so or the operator
# selects it. A GPU held only by such processes is in_use, not a held state.
BUSY_CLASS = "busy"
IN_USE = "in_use"
# Present on a healthy node: they hold the GPU by design, and the rungs that need them gone stop them.
EXPECTED_CLASSES = ("gpu_daemon", "graphics_session")
# Windows: another virtual machine's memory process (a Hyper-V VM's vmmem, _wsl_vm_identity): a running workload, as a live
# job's process is - its hold is in use, not stuck, and only end_running_jobs lets a rung take the GPU from it.
VM_CLASS = "vm"
# A GPU's state when the evidence cannot say whether it holds memory the ladder should get back (gpu_state): never
# counted as held (nothing destructive is chosen on it alone), never reported clean (_ladder_outcome: undetermined).
UNKNOWN = "unknown"
# What a snapshot, a walk and the modules say when the gpus option is an empty list: it selects no GPU (only the option
# left out means every GPU).
NO_GPU_SELECTED = "gpus: [] selects no GPU: nothing is inspected or changed (leave gpus out for every GPU)"


def rung_index(rung, rungs=RUNGS):
    """The rung's place on the ladder (`rungs`), 0 for the lightest; NO_RUNG is below every rung (-1)."""
    return -1 if rung == NO_RUNG else rungs.index(rung)


def memory_held(snapshot, end_running_jobs=False):
    """Whether the node still holds GPU memory the ladder should get back: a GPU in a held state, evidence that only a
    reboot answers (a lost GPU may be missing from the GPU list altogether), unanswered kernel evidence asking for a
    reset (evidence_to_act_on), or a MIG layout an interrupted run never restored (no instance: nothing can use the
    memory); with end_running_jobs, a GPU that running jobs hold (in_use) too."""
    held = HELD_STATES + ((IN_USE,) if end_running_jobs else ())
    return (any(gpu.get("state") in held for gpu in snapshot["gpus"]) or snapshot["verdict"]["rung"] == "reboot"
            or bool(evidence_to_act_on(snapshot, end_running_jobs)) or bool(snapshot.get("mig_layouts_unrestored")))


def evidence_to_act_on(snapshot, end_running_jobs=False):
    """The unanswered evidence (unanswered_evidence) the walk may act on: on a GPU that working programs hold (in_use),
    only with end_running_jobs - without it such a GPU is refused naming them (the ladder's busy_evidence_refusal), its
    reset never taken silently; evidence naming no GPU, only where no GPU is in use."""
    in_use = set(gpu["index"] for gpu in snapshot["gpus"] if gpu.get("state") == IN_USE)
    if end_running_jobs or not in_use:
        return unanswered_evidence(snapshot)
    return [event for event in unanswered_evidence(snapshot) if event.get("gpu_index") is not None and event["gpu_index"] not in in_use]


def unanswered_evidence(snapshot):
    """The kernel's Xid events on the snapshot's GPUs that ask for a reset or more and that nothing answered since
    (no later reset, reload or reboot: answer_events). Such an Xid is evidence on its own, memory held or not - a row
    remap takes effect only at a reset, and an Xid 119 on an idle GPU still asks for one; an answered (older) line
    asks for nothing."""
    indexes = set(gpu["index"] for gpu in snapshot["gpus"])
    return [event for event in snapshot.get("xid_events") or []
            if not event.get("answered_by") and rung_index(event_rung(event) or NO_RUNG) >= rung_index("reset")
            and (event.get("gpu_index") is None or event["gpu_index"] in indexes)]


def entry_floor(verdict_rung, rungs=RUNGS):
    """The lowest rung the walk may take given the verdict: the verdict's rung, or the first rung when it names none."""
    return max(0, rung_index(verdict_rung, rungs))


def ceiling_index(max_rung, allow_reboot, rungs=RUNGS):
    """The heaviest rung allowed: max_rung, except that reboot needs allow_reboot (without it, the rung below)."""
    index = rung_index(max_rung, rungs)
    return index - 1 if max_rung == "reboot" and not allow_reboot else index


def entry_rung(snapshot, rungs=RUNGS, end_running_jobs=False):
    """The rung a walk of this snapshot would start with, or NO_RUNG when no memory is held."""
    return rungs[entry_floor(snapshot["verdict"]["rung"], rungs)] if memory_held(snapshot, end_running_jobs) else NO_RUNG


def kill_targets(snapshot, platform="linux", end_running_jobs=False):
    """The holders the kill rung ends: those holding a GPU, except GPU daemons (the reset and reload rungs stop and
    start them), processes that outlived SIGKILL (no signal ends them; the verdict asks for a reboot) and, unless
    end_running_jobs, the processes of live scheduler jobs (busy). On Windows only compute contexts: the WSL VM, dwm,
    applications that only draw and system processes have rungs of their own (wsl, restart_adapter, logoff). Who among
    them may be ended is the protect rules' (_protect.refusal, plugin_utils/windows/protect/_who_may_end.refusal)."""
    if platform == "windows":
        return [h for h in snapshot["holders"] if h["gpus"] and h["class"] == "compute"]
    spared = ("gpu_daemon", "unkillable") + (() if end_running_jobs else (BUSY_CLASS,))
    return [h for h in snapshot["holders"] if h["gpus"] and h["class"] not in spared]


def running_job_holders(snapshot):
    """The holders that belong to a live scheduler job, or (Windows) a running virtual machine other than WSL's: a rung
    that ends them or takes their GPU ends a running workload (destructive)."""
    return [h for h in snapshot["holders"] if h["class"] in (BUSY_CLASS, VM_CLASS)]


def wsl_targets(snapshot):
    """What the Windows wsl rung gets back: the WSL VM processes holding a GPU. None, and the rung has nothing to do:
    a running distribution whose VM holds no GPU memory (someone's idle shell) is left running. Which VM is WSL's is
    the snapshot's fact (class wsl_vm: HCS's owner, not the name vmmem), so another VM's memory never counts."""
    return [h for h in snapshot["holders"] if h["gpus"] and h["class"] == "wsl_vm"]


def wsl_still_held(snapshot, vms):
    """The second half of wsl_plan, asked after the terminates: the WSL VMs of `vms` (pid and creation time recorded
    before) that hold a GPU in `snapshot`, taken then - each one the plan shuts down."""
    known = set((vm["pid"], vm.get("creation_time_ms")) for vm in vms)
    return [h for h in wsl_targets(snapshot) if (h["pid"], h.get("creation_time_ms")) in known]


def wsl_plan(snapshot):
    """The wsl rung's plan, decided here only (the walk and wsl_shutdown gpu_holders ask it):
    {"terminate": [distribution], "shutdown": bool, "reason": why the shutdown or why nothing, "left": [line]}.

    wsl.exe stops only the distributions and the VM of the user it runs as (snapshot["wsl"]["user"]). Terminated: exactly
    the running distributions of that user that hold the GPU (holds_gpu: a process of theirs has /dev/dxg open); one
    holding nothing is never stopped. Shut down, after them: that user's WSL VM (wsl_mine) when it holds GPU memory
    that no attribution gives a distribution - a running distribution whose hold is not known, or none holding while
    the VM does. Another user's WSL VM is left (wsl.exe as this user cannot stop it), and one whose owner is not known
    is never shut down (only its user's holding distributions, which are facts, are terminated)."""
    wsl = snapshot.get("wsl") or {}
    user = wsl.get("user") or "the connecting user"
    holding = wsl_targets(snapshot)
    left = ["pid %s (%s) is %s's WSL VM: wsl.exe as %s cannot stop it (run the task as that user)" % (
        vm["pid"], vm.get("name"), vm.get("wsl_owner"), user) for vm in holding if vm.get("wsl_mine") is False]
    ours = [vm for vm in holding if vm.get("wsl_mine")]
    unknown = [vm for vm in holding if vm.get("wsl_mine") is None]
    plan = {"terminate": [], "shutdown": False, "reason": None, "left": left}
    if not ours and not unknown:
        plan["reason"] = "no WSL VM of %s holds a GPU: nothing to stop" % user
        return plan
    distributions = wsl.get("distributions") or []
    if wsl.get("status", "ok") != "ok":
        # the running distributions themselves are not known: none can be attributed
        distributions = [{"name": "(the running distributions)", "holds_gpu": None,
                          "error": "wsl --list --running could not be read: %s" % wsl.get("message")}]
    plan["terminate"] = [d["name"] for d in distributions if d.get("holds_gpu")]
    not_known = [d for d in distributions if d.get("holds_gpu") is None]
    if ours:
        vm = ours[0]
        memory = " (%s MiB)" % vm["used_mib"] if vm.get("used_mib") is not None else ""
        if not_known:
            plan["shutdown"] = True
            plan["reason"] = "no per-distribution attribution for %s (%s): WSL VM pid %s%s is shut down" % (
                ", ".join(d["name"] for d in not_known), "; ".join(d.get("error") or "not known" for d in not_known), vm["pid"], memory)
        elif not plan["terminate"]:
            plan["shutdown"] = True
            plan["reason"] = "WSL VM pid %s holds GPU memory%s that no running distribution's process holds" % (vm["pid"], memory)
        else:
            plan["reason"] = "the distributions holding the GPU are terminated; the VM is shut down only if it still holds GPU memory after"
    else:
        plan["left"] += ["pid %s (%s): whose WSL VM it is is not known (no WSL process names its VM id): never shut down" % (
            vm["pid"], vm.get("name")) for vm in unknown]
        plan["reason"] = ("the distributions of %s holding the GPU are terminated" % user) if plan["terminate"] else (
            "no distribution of %s is known to hold the GPU, and the WSL VM's owner is not known: nothing is stopped" % user)
    return plan


def beyond_reset(gpu):
    """Why no reset can bring this GPU back (only a reboot can), or None."""
    if gpu.get("lost"):
        return "the GPU is lost to the driver: only a reboot brings it back"
    if RECOVERY_RUNGS.get(gpu.get("recovery_action")) == "reboot":
        return "NVML asks for a reboot"
    return None


def _gpu_label(gpu):
    return "GPU %s (%s)" % (gpu["index"], gpu.get("pci_bus_id") or "bus id unknown")


def _memory_holders(gpu, holders):
    return [h for h in holders if gpu["index"] in h["gpus"] and h["class"] not in EXPECTED_CLASSES]


def driver_model(gpu):
    """The GPU's current Windows driver model (WDDM, TCC, MCDM), or None (a Linux GPU has none): nvidia-smi's
    {"current", "pending"} or the model itself."""
    model = gpu.get("driver_model")
    return model.get("current") if isinstance(model, dict) else model


def ghost_unknown(gpu, ghost_threshold_mib):
    """Whether this Windows GPU's ghost memory is not known and could exceed the threshold: the driver counts more than
    ghost_threshold_mib used and no figure says how much of it live processes hold (WDDM gives no per-process figure
    and no GPU Adapter Memory figure came back). Unknown is not 0: such a GPU is neither ok nor stuck. A Linux GPU
    (no driver model) is never asked: its state stays what it was."""
    used = gpu.get("memory_used_mib")
    # A Windows GPU: nvidia-smi names its driver model, or the Windows snapshot said where its ghost figure comes from
    # (ghost_source, null with ghost_reason where none) - also where the model is N/A.
    windows = driver_model(gpu) is not None or "ghost_source" in gpu
    return windows and gpu.get("unattributed_mib") is None and used is not None and used > ghost_threshold_mib


def gpu_state(gpu, holders, ghost_threshold_mib, probe_report):
    """ok, busy, in_use (held only by live scheduler jobs' processes), stuck, lost, unresponsive (the driver did not
    answer) or unknown (no driver answer at all; on Windows also: memory in use whose ghost share is not known,
    ghost_unknown)."""
    if gpu.get("lost"):
        return "lost"
    if not probe_report.get("ok"):
        return "unresponsive" if probe_report.get("timed_out") else "unknown"
    mine = _memory_holders(gpu, holders)
    ghost = gpu.get("unattributed_mib") or 0
    if any(h["class"] in STUCK_CLASSES for h in mine) or ghost > ghost_threshold_mib or gpu.get("recovery_action") in RECOVERY_RUNGS:
        return "stuck"
    if [h for h in mine if h["class"] not in (BUSY_CLASS, VM_CLASS)]:
        return "busy"
    if mine:
        return IN_USE
    return UNKNOWN if ghost_unknown(gpu, ghost_threshold_mib) else "ok"


class _Finding:
    """The heaviest rung the evidence needs so far, on `rungs`; `aliases` names a Linux rung's counterpart there."""

    def __init__(self, rungs=RUNGS, aliases=None):
        self.rungs = rungs
        self.aliases = aliases or {}
        self.rung = NO_RUNG
        self.reasons = []

    def need(self, rung, reason):
        rung = self.aliases.get(rung, rung)
        if rung_index(rung, self.rungs) > rung_index(self.rung, self.rungs):
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
    pending = pending_mig_change(gpu)
    if pending:  # named, never applied as a side effect (gpu_reset and nvidia_driver_reload refuse the GPU)
        finding.reasons.append({"rung": NO_RUNG, "reason": "%s: %s" % (label, pending)})
    if gpu.get("gpu_instances"):
        _instance_ghost_findings(finding, gpu, label, ghost_threshold_mib)
        return
    ghost = gpu.get("unattributed_mib")
    if ghost is not None and ghost > ghost_threshold_mib:
        finding.need("reset", "%s has %d MiB in use that no live process accounts for (ghost memory)" % (label, ghost))


def _instance_ghost_findings(finding, gpu, label, ghost_threshold_mib):
    """A MIG GPU's ghost memory is judged per instance: memory used in a (selected) instance that no live process in
    that instance accounts for, named with the instance."""
    for gi in gpu["gpu_instances"]:
        ghost = gi.get("unattributed_mib")
        if gi.get("selected", True) and ghost is not None and ghost > ghost_threshold_mib:
            uuids = ", ".join(ci["uuid"] for ci in gi["compute_instances"] if ci.get("uuid")) or "no MIG UUID"
            finding.need("instance", "%s MIG instance %s:%s (%s, %s) has %d MiB in use that no live process in that instance "
                                     "accounts for (ghost memory)" % (label, gpu["index"], gi["id"], gi.get("profile") or "profile unknown",
                                                                      uuids, ghost))


def _holder_findings(finding, gpu, holders):
    for holder in _memory_holders(gpu, holders):
        what = "pid %s (%s)" % (holder["pid"], holder.get("name"))
        where = _holder_where(gpu, holder)
        memory = " with %s MiB" % holder["used_mib"] if holder.get("used_mib") is not None else ""
        if holder["class"] == "unkillable":
            finding.need("reboot", "%s holds GPU %s%s and outlived SIGKILL (journal, %s): no signal ends it"
                         % (what, where, memory, holder.get("outlived_kill")))
        elif holder["class"] == BUSY_CLASS:
            finding.reasons.append({"rung": NO_RUNG, "reason": "%s holds GPU %s%s and runs (%s): busy, not stuck; "
                                    "ended only with end_running_jobs" % (what, where, memory, busy_why(holder))})
        elif holder["class"] == "zombie":
            finding.need("kill", "%s holds GPU %s%s as a zombie: its parent pid %s (%s) must reap it"
                         % (what, where, memory, holder.get("ppid"), holder.get("parent_name")))
        else:
            left = (holder.get("standing") or {}).get("why")
            finding.need("kill", "%s holds GPU %s%s (%s%s)%s" % (what, where, memory, holder["class"],
                                                                 ", left behind: " + left if left else "", _held_by(holder)))


def _holder_where(gpu, holder):
    """The GPU a holder holds, with its MIG instance(s) on that GPU when it is in one: "0 (MIG instance 0:4/0)"."""
    inside = [instance_label(gpu["index"], item["gpu_instance_id"], item["compute_instance_id"])
              for item in holder.get("mig_instances") or [] if item["gpu"] == gpu["index"]]
    return "%s (MIG instance %s)" % (gpu["index"], ", ".join(inside)) if inside else str(gpu["index"])


def busy_why(holder):
    """The fact that makes a busy holder busy: its live job's, or what _left_behind.holder_standing found."""
    return (holder.get("standing") or {}).get("why") or (holder.get("job") or {}).get("why")


def _held_by(holder):
    """What keeps a signal from acting at once: a frozen cgroup, or uninterruptible sleep (D), which is no evidence
    for a reboot until the process outlives SIGKILL."""
    frozen = holder.get("frozen_cgroup")
    if frozen:
        return ": its cgroup %s is frozen (%s): it acts on no signal until thawed (thaw_frozen)" % (frozen["cgroup"], frozen["file"])
    if holder.get("state") == "disk-sleep":
        return ": in uninterruptible sleep (D), which SIGKILL ends unless it never wakes; only outliving SIGKILL calls for a reboot"
    return ""


def _event_what(event):
    if event["kind"] == "fallen_off_bus":
        return "the GPU fell off the bus"
    return "Xid %s (%s)" % (event["xid"], event["catalog"]["name"])


def _event_where(event):
    where = event.get("pci_bus_id") or "an unnamed GPU"
    if event.get("gpu_instance_id") is not None:
        where += " GPU instance %s" % event["gpu_instance_id"]
        if event.get("compute_instance_id") is not None:
            where += " compute instance %s" % event["compute_instance_id"]
    return where


def _xid_findings(finding, events, indexes):
    answered = []
    for event in events:
        if event.get("gpu_index") is not None and event["gpu_index"] not in indexes:
            continue
        rung = event_rung(event)
        if not rung:
            continue
        text = "kernel log: %s on %s" % (_event_what(event), _event_where(event))
        by = event.get("answered_by")
        if by:
            when = " at %s" % by["time"] if by.get("time") else ""
            line = "%s was already answered by %s%s: it no longer chooses the rung" % (
                text, ANSWER_TEXT.get(by["action"], by["action"]), when)
            if line not in answered:
                answered.append(line)
        elif rung == "kill":
            name = ", " + event["process_name"] if event.get("process_name") else ""
            who = " (pid %s%s)" % (event["pid"], name) if event.get("pid") else ""
            finding.need(rung, "%s: the application it hit%s must end" % (text, who))
        else:
            finding.need(rung, text)
    finding.reasons.extend({"rung": NO_RUNG, "reason": line} for line in answered)


def _reset_blocker_reasons(finding, blockers):
    if not any(reason["rung"] == "reset" for reason in finding.reasons):
        return
    for blocker in blockers:
        devices = ", ".join(blocker.get("devices") or [])
        what = "pid %s (%s, %s) holds only %s" % (blocker["pid"], blocker.get("name"), blocker.get("class"), devices)
        finding.reasons.append({"rung": "reset", "reason": what + ", which blocks every GPU reset until it ends or its service stops"})


def verdict(snapshot, ghost_threshold_mib):
    """{"rung": one of RUNGS or NO_RUNG, "reasons": [{"rung", "reason"}]}: the entry rung and the evidence for it."""
    finding = _Finding()
    probe_report = snapshot["probes"]["gpu"]
    if not snapshot["gpus"] and not probe_report.get("ok"):
        finding.reasons.append({"rung": NO_RUNG, "reason": "no GPU could be read: %s" % probe_report.get("error")})
    for gpu in snapshot["gpus"]:
        _gpu_findings(finding, gpu, probe_report, ghost_threshold_mib)
        _holder_findings(finding, gpu, snapshot["holders"])
    _xid_findings(finding, snapshot["xid_events"], set(gpu["index"] for gpu in snapshot["gpus"]))
    _reset_blocker_reasons(finding, snapshot.get("reset_blockers") or [])
    for left in snapshot.get("mig_layouts_unrestored") or []:
        finding.need("instance", "the MIG layout of GPU %s that run %s recorded at %s before a reset or a reload was never created "
                                 "again (that run was interrupted): the instance rung restores it" % (
                                     ", ".join(str(gpu) for gpu in left["gpus"]), left["run_id"], left["ts"]))
    return {"rung": finding.rung, "reasons": finding.reasons}


def reset_evidence(gpu, xid_events, ghost_threshold_mib):
    """Why this GPU needs a reset (ghost memory, NVML's recovery action, an Xid), or None."""
    ghost = gpu.get("unattributed_mib")
    if ghost is not None and ghost > ghost_threshold_mib:
        return "%d MiB of ghost memory on GPU %s" % (ghost, gpu["index"])
    if RECOVERY_RUNGS.get(gpu.get("recovery_action")) == "reset":
        return "NVML asks GPU %s for recovery action %s" % (gpu["index"], gpu["recovery_action"])
    for event in xid_events:
        if event.get("gpu_index") == gpu["index"] and (event.get("catalog") or {}).get("action") == "reset_gpu" \
                and not event.get("answered_by"):
            return "Xid %s on GPU %s asks for a reset" % (event.get("xid"), gpu["index"])
    return None


def node_reset_evidence(snapshot, ghost_threshold_mib, indexes=None):
    """The first reason (reset_evidence) a GPU of the snapshot, or of the GPUs `indexes` when given, has memory that
    only a reset or more gives back; or None."""
    for gpu in snapshot["gpus"]:
        if indexes is not None and gpu["index"] not in indexes:
            continue
        reason = reset_evidence(gpu, snapshot["xid_events"], ghost_threshold_mib)
        if reason:
            return reason
    return None


def _device_key(bus_id):
    """"00000000:3B:00.0" -> "00000000:3B:00" (kernel lines name the device, not the function); None if unreadable."""
    normalized = normalize_bus_id(bus_id)
    return normalized.rsplit(".", 1)[0] if normalized else None


def _covers(done, event):
    """Whether a completed reset or reload answers the GPU the event is about."""
    if done["gpus"] is None:
        return True
    if event.get("gpu_index") is not None and event["gpu_index"] in done["gpus"]:
        return True
    key = _device_key(event.get("pci_bus_id"))
    return key is not None and key in set(_device_key(bus) for bus in done["bus_ids"])


def _app_still_there(event, holders, start_epochs):
    """A live holder of the event's GPU (its pid when the line names one) that started before the event."""
    for holder in holders:
        if holder["class"] in EXPECTED_CLASSES or event.get("gpu_index") not in holder["gpus"]:
            continue
        if event.get("pid") is not None and holder["pid"] != event["pid"]:
            continue
        started = start_epochs.get(holder["pid"])
        if event.get("time_epoch") is None or started is None or started <= event["time_epoch"] + _CLOCK_SLACK_S:
            return True
    return False


def _iso(epoch):
    stamp = datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).isoformat(timespec="seconds")
    return stamp.replace("+00:00", "Z")


def answer_events(events, completed, boot_epoch, holders, start_epochs, now=None):
    """Set "answered_by" on every event (in place): None while it is still evidence, else what answered it.

    An event older than the current boot was answered by the reboot; one older than a successful reset of its
    GPU or a driver reload (`completed`, from the node's journal) by that action; an Xid asking that the
    application it hit be restarted, by the end of that application. Events of unknown time stay evidence.
    An event dated ahead of `now` by more than AHEAD_SLACK_SECONDS was written while the clock ran ahead: no reset
    could come after it, and it would ask for one at every run for ever; its time says nothing, and the first reset
    or reload of its GPU since the boot (any, when the boot time is unknown) answers it.
    """
    latest = (time.time() if now is None else now) + AHEAD_SLACK_SECONDS
    for event in events:
        event["answered_by"] = None
        epoch = event.get("time_epoch")
        if epoch is not None and epoch > latest:
            epoch = boot_epoch if boot_epoch is not None else float("-inf")
        elif epoch is not None and boot_epoch is not None and epoch < boot_epoch:
            event["answered_by"] = {"action": "reboot", "time": _iso(boot_epoch)}
            continue
        later = [done for done in completed if epoch is not None and done["epoch"] > epoch and _covers(done, event)]
        if later:
            event["answered_by"] = {"action": later[-1]["action"], "time": later[-1]["time"]}
        elif (event.get("catalog") or {}).get("action") == "restart_app" and not _app_still_there(event, holders, start_epochs):
            event["answered_by"] = {"action": "process_exit", "time": None}
    return events


# Windows holder classes -> the rung that ends their hold: a process is killed; the WSL VM (vmmemWSL) gives its
# memory back when its distributions stop; a protected system process of a user session goes with a logoff of it,
# one of session 0 only with a reboot. dwm ("graphics_session") is expected, like a Linux display server.
WINDOWS_HOLDER_RUNGS = {"compute": "kill", "wsl_vm": "wsl"}
# The Windows counterpart of a Linux rung the GPU evidence asks for: restarting the adapter is Windows' GPU reset.
WINDOWS_ALIASES = {"reset": "restart_adapter"}


def _windows_holder_rung(holder):
    rung = WINDOWS_HOLDER_RUNGS.get(holder["class"])
    if rung is None and holder["class"] == "system":
        rung = "logoff" if holder.get("session_id") else "reboot"
    return rung


def _windows_holder_findings(finding, gpu, holders):
    for holder in _memory_holders(gpu, holders):
        rung = _windows_holder_rung(holder)
        if rung is None:
            continue
        memory = " with %s MiB" % holder["used_mib"] if holder.get("used_mib") is not None else ""
        what = "pid %s (%s, session %s)" % (holder["pid"], holder.get("name"), holder.get("session_id"))
        if rung == "wsl":
            finding.need(rung, "%s holds GPU %s%s: it is the WSL VM, which lets go when its distributions stop" % (what, gpu["index"], memory))
        else:
            finding.need(rung, "%s holds GPU %s%s (%s)" % (what, gpu["index"], memory, holder["class"]))


# What would tell how much of a WDDM GPU's memory no live process holds (the undetermined verdict's hint).
WDDM_WHAT_WOULD_TELL = ("the driver's per-process view (nvidia-smi --query-compute-apps=pid,used_memory, which gives "
                        "figures only in TCC or MCDM mode: nvidia-smi -dm TCC on a GPU without a display) or the GPU Adapter "
                        "Memory counters of its adapter (Get-CimInstance Win32_PerfFormattedData_GPUPerformanceCounters_"
                        "GPUAdapterMemory, joined by the adapter's LUID)")


def _unknown_findings(finding, gpu, ghost_threshold_mib):
    """The line of a GPU whose ghost memory is not known (ghost_unknown): rung none - no rung is chosen on it alone."""
    if gpu.get("state") != UNKNOWN or not ghost_unknown(gpu, ghost_threshold_mib):
        return None
    model = driver_model(gpu) or "an unknown"
    why = gpu.get("ghost_reason") or "the driver gives no per-process memory figure and no adapter figure came back"
    line = ("%s has %s MiB in use and how much of it no live process holds is unknown (%s driver model: %s): unknown is "
            "not 0, so its state is unknown, and nothing is ended on it alone. What would tell: %s" % (
                _gpu_label(gpu), gpu["memory_used_mib"], model, why, WDDM_WHAT_WOULD_TELL))
    finding.reasons.append({"rung": NO_RUNG, "reason": line})
    return line


def windows_verdict(snapshot, ghost_threshold_mib):
    """The Windows ladder's verdict: {"rung": one of WINDOWS_RUNGS or NO_RUNG, "reasons": [{"rung", "reason"}],
    "undetermined": [line]}.

    The same evidence as verdict() read with the Windows rungs: a lost or silent GPU needs a reboot, NVML's recovery
    action and ghost memory the adapter restart (the Windows GPU reset), a holder the rung that ends its hold.
    "undetermined": a line per GPU whose state is unknown (ghost_unknown), naming it, its memory in use, why no figure
    and what would tell; the walk's outcome is then undetermined, never clean.
    """
    finding = _Finding(WINDOWS_RUNGS, WINDOWS_ALIASES)
    probe_report = snapshot["probes"]["gpu"]
    if not snapshot["gpus"] and not probe_report.get("ok"):
        finding.reasons.append({"rung": NO_RUNG, "reason": "no GPU could be read: %s" % probe_report.get("error")})
    undetermined = []
    for gpu in snapshot["gpus"]:
        _gpu_findings(finding, gpu, probe_report, ghost_threshold_mib)
        _windows_holder_findings(finding, gpu, snapshot["holders"])
        line = _unknown_findings(finding, gpu, ghost_threshold_mib)
        if line:
            undetermined.append(line)
    return {"rung": finding.rung, "reasons": finding.reasons, "undetermined": undetermined}


def undetermined(snapshot):
    """The lines of the GPUs whose state the evidence cannot tell (windows_verdict's "undetermined"; none on Linux)."""
    return list(snapshot["verdict"].get("undetermined") or [])
