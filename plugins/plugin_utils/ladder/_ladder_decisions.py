# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ladder's decisions, one pure function each: the next rung, the drain and its followup, the refusal, the health
gate, the fleet guard. The walk (_ladder.py) and the filters ask them; nothing else answers them."""

from __future__ import annotations

import re

from ansible_collections.gpuops.remediation.plugins.module_utils._verdict import (
    HELD_STATES, IN_USE, NO_RUNG, RUNGS, entry_floor, memory_held, rung_index, running_job_holders, verdict, VM_CLASS, windows_verdict,
)
from ansible_collections.gpuops.remediation.plugins.module_utils._mig_layout import mig_layout_at_stake
from ansible_collections.gpuops.remediation.plugins.plugin_utils.ladder._ladder_options import GATED_RUNGS
from ansible_collections.gpuops.remediation.plugins.plugin_utils.ladder._platform import LINUX
from ansible_collections.gpuops.remediation.plugins.plugin_utils.ladder._walk_state import walk_state
from ansible_collections.gpuops.remediation.plugins.plugin_utils._words import plural


# The decisions of the walk, one function each.


def next_rung(floor, tried, ceiling, rungs=RUNGS, snapshot=None):
    """The next rung to take: above every rung tried, at or above the floor the evidence sets, at most the ceiling, and
    one with work on this snapshot (rung_has_work)."""
    start = max(floor, rung_index(tried[-1]["rung"], rungs) + 1 if tried else 0)
    for index in range(start, ceiling + 1):
        if index < len(rungs) and rung_has_work(rungs[index], snapshot):
            return rungs[index]
    return None


def rung_has_work(rung, snapshot):
    """Whether taking `rung` can do anything on this snapshot: the instance rung only when the verdict names a MIG
    instance whose memory no process in it accounts for (it re-creates such instances, nothing else); every other rung
    always. A node without MIG never sees the instance rung."""
    if rung != "instance":
        return True
    return snapshot is not None and any(reason.get("rung") == "instance" for reason in (snapshot.get("verdict") or {}).get("reasons") or [])


def needs_drain(rung, options, state):
    """Whether the walk pauses for the scheduler before this rung: the first destructive rung of a walk that drains (the
    drain) - a rung that would end a running job's processes (end_running_jobs) is destructive, the kill rung too - and
    with Slurm every later destructive rung too (the drain checked again: an administrator's resume stops the walk)."""
    state = walk_state(state)
    if options.drain == "none" or state.scheduler.checked == rung:
        return False
    return destructive(rung, state.last, options) and (not state.scheduler.taken or options.drain == "slurm")


def destructive(rung, snapshot, options):
    """Whether taking `rung` on this snapshot is destructive: one of destructive_rungs, or any rung that would end a
    running job's processes (end_running_jobs)."""
    return rung in options.destructive_rungs or ends_running_jobs(snapshot, options.end_running_jobs)


def slurm_drain_state(state):
    """What slurm_drain does at the pause before a destructive rung: V(drained) the first time, then V(confirmed)."""
    return "confirmed" if walk_state(state).scheduler.taken else "drained"


def ends_running_jobs(snapshot, end_running_jobs):
    """Whether a rung on this snapshot would end a live scheduler job's processes: destructive, whatever the rung."""
    return bool(end_running_jobs and running_job_holders(snapshot))


def refusal(snapshot, floor, options):
    """Why the walk refuses before any action (a GPU that working programs share needs a rung above the kill:
    busy_evidence_refusal; the evidence needs a rung above the ceiling), or ""."""
    busy = busy_evidence_refusal(snapshot, options)
    if not memory_held(snapshot, options.end_running_jobs) or floor <= options.ceiling:
        return busy
    rungs = options.rungs
    allow = _allow(rungs[floor], options)
    above = "the evidence needs the %s rung (%s), but the heaviest rung allowed is %s (%s); %s would allow it" % (
        rungs[floor], "; ".join(r["reason"] for r in snapshot["verdict"]["reasons"]), rungs[options.ceiling],
        options.limits_text(), allow)
    return "; ".join(part for part in (busy, above) if part)


def _alone(snapshot, gpu, options):
    """The snapshot narrowed to one GPU, with the verdict of that GPU alone (its holders, its Xid events, its state)."""
    judge = windows_verdict if options.platform == "windows" else verdict
    threshold = (snapshot.get("scope") or {}).get("ghost_threshold_mib", options.snapshot_args.get("ghost_threshold_mib", 256))
    alone = dict(snapshot, gpus=[gpu])
    alone["verdict"] = judge(alone, threshold)
    return alone


# What a refusal (or a partly fixed walk) says of a GPU busy_evidence finds; the report's triage reads it.
BUSY_EVIDENCE = "which would end the working programs that hold it"


# The rungs that never reach a working program: the kill spares them, and the instance rung (Linux, MIG) re-creates only
# an instance nobody is in.
SPARING_RUNGS = ("kill", "instance")


def busy_evidence(snapshot, options):
    """The GPUs whose own evidence (an Xid, NVML's recovery action, ghost memory) needs a rung above the kill while
    working programs hold them - only they (in_use), or beside that evidence (a held GPU): that rung would end them, so
    it is never taken silently. -> [{"index", "rung", "reasons", "allow", "busy"}] (busy: the programs, each with the
    fact that makes it busy). [] without them, and with end_running_jobs (the walk then takes the rung, and it counts
    as destructive)."""
    if options.end_running_jobs:
        return []
    found = []
    for gpu in snapshot["gpus"]:
        working = [holder for holder in running_job_holders(snapshot) if gpu["index"] in (holder.get("gpus") or ())]
        if not working or gpu.get("state") not in HELD_STATES + (IN_USE,):
            continue
        judged = _alone(snapshot, gpu, options)["verdict"]
        if rung_index(judged["rung"], options.rungs) <= max(rung_index(rung, options.rungs) for rung in SPARING_RUNGS
                                                            if rung in options.rungs):
            continue
        found.append({"index": gpu["index"], "rung": judged["rung"],
                      "reasons": [reason["reason"] for reason in judged["reasons"] if reason["rung"] != NO_RUNG],
                      "busy": [_working_program(holder, judged["reasons"]) for holder in working],
                      "allow": options.option_names.get("end_running_jobs", "end_running_jobs")})
    return found


def _working_program(holder, reasons):
    """A working program as the verdict names it (with the fact that makes it busy), or a running VM by its id."""
    named = "pid %s (%s)" % (holder["pid"], holder.get("name"))
    said = [reason["reason"] for reason in reasons if reason["rung"] == NO_RUNG and reason["reason"].startswith(named + " ")]
    if said:
        return said[0]
    if holder["class"] == VM_CLASS:
        return "pid %s (%s, VM %s): a running virtual machine" % (holder["pid"], holder.get("name"), holder.get("vm_id") or "id not known")
    return named


def busy_evidence_refusal(snapshot, options):
    """Why the walk refuses the GPUs of busy_evidence, naming the working programs and the option that would allow it,
    or ""."""
    found = busy_evidence(snapshot, options)
    if not found:
        return ""
    named = ["GPU %s: the evidence needs the %s rung (%s), %s: %s" % (
        need["index"], need["rung"], "; ".join(need["reasons"]), BUSY_EVIDENCE, "; ".join(need["busy"])) for need in found]
    return "%s; %s would allow it" % ("; ".join(named), found[0]["allow"])


def gpu_needs(snapshot, options):
    """Each GPU of the snapshot that holds memory the ladder should get back, with the rung its own evidence needs: the
    verdict of the snapshot narrowed to that GPU (its holders, its Xid events, its state). -> [{"index", "rung",
    "reasons"}], by index."""
    needs = []
    for gpu in snapshot["gpus"]:
        alone = _alone(snapshot, gpu, options)
        if memory_held(alone, options.end_running_jobs):
            rung = options.rungs[entry_floor(alone["verdict"]["rung"], options.rungs)]
            needs.append({"index": gpu["index"], "rung": rung, "reasons": [r["reason"] for r in alone["verdict"]["reasons"]]})
    return needs


def walk_reach(snapshot, options):
    """reach() from the floor the snapshot's evidence sets: what a walk starting on this snapshot may do."""
    return reach(snapshot, entry_floor(snapshot["verdict"]["rung"], options.rungs), options)


def reach(snapshot, floor, options):
    """What the walk may do for this snapshot: (floor, refusal, beyond). Where the evidence needs a rung above the
    ceiling, or above the kill on a GPU working programs share (busy_evidence), the walk is refused whole (refusal)
    only when no held GPU is helped by an allowed rung; else it takes the allowed rungs for the GPUs they help (floor:
    the heaviest rung one of them needs, below the rung of every busy GPU: walk_ceiling) and names each other GPU
    (beyond: [{"index", "rung", "reasons", "allow"}], the rung it needs and the option that would allow it; "busy" too
    where working programs hold it)."""
    refused = refusal(snapshot, floor, options)
    if not refused:
        return floor, "", []
    busy = busy_evidence(snapshot, options)
    ceiling = walk_ceiling(busy, options, snapshot)
    needs = [need for need in gpu_needs(snapshot, options) if need["index"] not in set(gpu["index"] for gpu in busy)]
    helped = [need for need in needs if rung_index(need["rung"], options.rungs) <= ceiling]
    if not helped:
        return floor, refused, []
    beyond = [dict(need, allow=_allow(need["rung"], options) if rung_index(need["rung"], options.rungs) > options.ceiling
                   else busy[0]["allow"]) for need in needs if need not in helped]
    return max(rung_index(need["rung"], options.rungs) for need in helped), "", sorted(beyond + busy, key=lambda need: need["index"])


def walk_ceiling(beyond, options, snapshot=None):
    """The heaviest rung (its index) the walk may take: the ceiling, below the rung every GPU of `beyond` that working
    programs hold needs (busy_evidence: a rung that would reach them is never taken while they run), and no higher than
    the instance rung where the snapshot's selection narrows a GPU to MIG instances (instance_cap)."""
    cap = instance_cap(snapshot, options)
    return min([options.ceiling] + [rung_index(need["rung"], options.rungs) - 1 for need in beyond if need.get("busy")]
               + ([] if cap is None else [cap]))


def instance_cap(snapshot, options):
    """The instance rung's index when the snapshot's selection narrows a GPU to MIG instances, else None: every rung
    above it (a reset, a reload, the graphics restart, a reboot) reaches the whole GPU or the node, every other
    instance's jobs with it."""
    if not ((snapshot or {}).get("scope") or {}).get("mig_instances") or "instance" not in options.rungs:
        return None
    return rung_index("instance", options.rungs)


def _allow(rung, options):
    allow = options.named("max_rung", rung)
    if rung == "reboot" and not options.allow_reboot:
        allow += " and %s" % options.named("allow_reboot", "true")
    return allow


def health_gate(rung_taken, rung_failed, held, setting, check_mode):
    """What the health gate does at the end of a walk whose last rung was `rung_taken`: "run" after a reset or a reload
    that got the memory back, "plan" for such a rung in check mode (its modules only predicted: the plan says the gate
    would run), "off" when the gate is turned off (setting "never"), None when there is nothing to check (no rung,
    a kill-only fix, a rung that failed, the memory still held)."""
    if rung_taken not in GATED_RUNGS or rung_failed or (held and not check_mode):
        return None
    if setting == "never":
        return "off"
    return "plan" if check_mode else "run"


def health_gate_failed(gate):
    """Whether the GPUs failed the health gate (a gate not installed, off or planned did not fail)."""
    return bool(gate) and gate.get("result") == "fail"


def drain_followup(drain, drained, held, check_mode, gate_failed=False):
    """What the scheduler needs once the walk has ended: "resume" when the memory is back (for Slurm always, so
    that a drain an interrupted run of ours left is put back too; for Kubernetes only our own cordon), "release"
    when our Slurm drain must stay because the memory is still held, "hold" when the GPUs failed the health gate (the
    Slurm node stays out of service with a reason that names it, which no later run resumes; a Kubernetes cordon of
    ours simply stays), else None. Nothing in check mode."""
    if check_mode:
        return None
    if gate_failed:
        return "hold" if drain == "slurm" else None
    if not held:
        return "resume" if drain == "slurm" or drained == "kubernetes" else None
    return "release" if drained == "slurm" else None


def drain_outcome(result, check_mode=False, label="slurm drain"):
    """(drained, error, notes) from what the drain tasks returned: `scheduler`, the `slurm` (slurm_drain) or `kubernetes`
    (the cordon task) result, and `failure`, the result of the task that failed. A drain is ours when we took it (a
    Slurm drain kept while the jobs still ran, too, with keep_drain: the next run hands it on); an error fails the rung
    it was for. In check mode a drain of ours also says that the node would be resumed after."""
    scheduler = result.get("scheduler")
    failure = result.get("failure") or {}
    if scheduler == "slurm":
        slurm = failure or result.get("slurm") or {}
        drained = "slurm" if slurm.get("ours") else ""
        notes = ["%s: %s" % (label, slurm.get("msg"))] if slurm.get("msg") else []
        if check_mode and drained and not failure and label == "slurm drain":
            notes.append("slurm resume: would resume the node once the memory is back and the GPUs pass the health check, "
                         "or keep it drained if they do not")
    else:
        cordon = result.get("kubernetes") or {}
        drained = "kubernetes" if not failure and cordon and not cordon.get("skipped") else ""
        notes = []
    error = (failure.get("msg") or "the %s drain failed" % scheduler) if failure else ""
    return ("" if check_mode else drained), error, notes


def undrain_outcome(followup, result):
    """(undrained, notes, error) from what the tasks of the drain followup (resume, release, hold) returned; `failure`,
    the result of the task that failed (slurmctld gone, say): the error the run fails with, its report written."""
    failure = result.get("failure") or {}
    if result.get("scheduler") == "slurm":
        slurm = failure or result.get("slurm") or {}
        undrained = "slurm" if followup == "resume" and slurm.get("changed") and not failure and not slurm.get("held") else ""
        error = ("the Slurm %s failed: %s" % (followup, slurm.get("msg") or "no message")) if failure else ""
        if not failure and followup == "resume" and slurm.get("held"):
            # A drain whose health check never finished (a run killed during it) is held, not resumed unchecked.
            error = "the Slurm node stays out of service: %s" % slurm.get("msg")
        return undrained, ["slurm %s: %s" % (followup, slurm.get("msg"))] if slurm.get("msg") else [], error
    uncordon = result.get("kubernetes") or {}
    error = ("the uncordon failed: %s" % (failure.get("msg") or "no message")) if failure else ""
    return ("kubernetes" if uncordon.get("changed") and not failure else ""), [], error


SLURM_STATES = {"resume": "resumed", "release": "released", "hold": "held"}


def hold_reason(state):
    """Why the node stays out of service after the walk (the scheduler's hold), or None when it is not held: one line
    (a reason is read back whole, and slurm_drain refuses line breaks and control characters)."""
    state = walk_state(state)
    if state.scheduler.followup != "hold":
        return None
    return re.sub(r"[\x00-\x20\x7f]+", " ", state.health_check["reason"] or "").strip()


def cordon_is_ours(node_resources, annotation, reason):
    """Whether the Kubernetes node (the resources of kubernetes.core.k8s_info) carries our mark, `annotation` set to
    `reason`: only then is its cordon ours to lift."""
    marks = [((item.get("metadata") or {}).get("annotations") or {}).get(annotation) for item in node_resources or []]
    return marks == [reason]


def first_rung(snapshot, options):
    """The rung a walk of this snapshot under `options` takes first, or None when it takes none (no memory held, or
    refused whole). Where only some GPUs are helped by the allowed rungs (partly fixed), the rung the walk takes for
    them: the walk's own answers (walk_reach, next_rung), never a node-wide verdict."""
    if not memory_held(snapshot, options.end_running_jobs):
        return None
    floor, refused, beyond = walk_reach(snapshot, options)
    return None if refused else next_rung(floor, [], walk_ceiling(beyond, options, snapshot), options.rungs, snapshot)


def destructive_entry(snapshot, options):
    """The destructive rung the walk of this snapshot under `options` (the run's max_rung, allow_reboot, destructive
    rungs and end_running_jobs) starts with, or None: what the fleet guard and the circuit breaker count. A host the
    walk refuses, or will fix only partly with light rungs, takes no destructive one."""
    rung = first_rung(snapshot, options)
    return rung if rung is not None and destructive(rung, snapshot, options) else None


def fleet_guard(destructive_hosts, host_count, max_percent):
    """The refusal of the whole run when more hosts would need a destructive rung than the share allowed, or ""."""
    allowed = max(1, int(host_count * max_percent / 100))
    if len(destructive_hosts) <= allowed:
        return ""
    return ("fleet guard: %d of %s would need a destructive rung (%s), more than the %s%% allowed (%s, "
            "gpu_remediate_max_destructive_percent). Nothing was done. Narrow the run with --limit, or raise the percentage."
            % (len(destructive_hosts), plural(host_count, "host"), ", ".join(destructive_hosts), max_percent, plural(allowed, "host")))


# The outcomes that leave memory held or nothing done although memory is held: the host fails (undetermined fails none).
FAILING_STATUSES = ("failed", "refused", "partly fixed")


def host_fails(outcome):
    """Whether the walk's outcome fails the host: memory still held after the allowed rungs, the walk refused, or only
    some GPUs helped. Every role that fails a host reads this answer (gpu_ladder's host_fails), none repeats it."""
    return bool(outcome) and outcome.get("status") in FAILING_STATUSES


# The steps a paused walk asks of the controller, and the scheduler follow-ups an ended walk asks for.
CONTROLLER_STEPS = ("drain", "reboot")
SCHEDULER_FOLLOWUPS = ("resume", "release", "hold")


def needs_controller_step(pending, followup):
    """Whether the controller must take a step for the walk before it is done: the drain or the reboot it paused for, or
    the scheduler's follow-up (resume, release, hold) once it has ended. The roles reach their controller steps on this
    answer (gpu_ladder's needs_controller_step), none joins the walk's answers again."""
    return pending in CONTROLLER_STEPS or followup in SCHEDULER_FOLLOWUPS


def guard_refuses(fleet_refusal, breaker_result=None):
    """Whether the guard refuses this host before its walk: the fleet guard refuses the whole run (its refusal, "" when
    it lets the run go), or the circuit breaker (gpu_breaker's result, None or a skipped task's when it did not run)
    refuses this host. The roles reach their refusal on this answer (the filter guard_refuses)."""
    return bool(fleet_refusal) or bool((breaker_result or {}).get("refuses"))


def reboot_keeps_mig_layout(options, snapshot):
    """Whether the walk records the MIG layout before the reboot rung (gpu_mig_layout) and creates it again after: on
    Linux (Windows has no MIG) when a reboot may lose one (mig_layout_at_stake; a walk scoped to some GPUs does not see
    the others, which the reboot reaches too)."""
    return options.platform == LINUX.name and mig_layout_at_stake(snapshot, options.snapshot_args.get("gpus") is not None)
