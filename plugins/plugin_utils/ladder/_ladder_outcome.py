# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a walk did, for people and the report: each rung's plan lines, the status, the memory back per GPU, the summary."""

from __future__ import annotations

from ansible_collections.gpuops.remediation.plugins.module_utils.probes._dcgm import command_text
from ansible_collections.gpuops.remediation.plugins.module_utils._escape import printable
from ansible_collections.gpuops.remediation.plugins.module_utils._gpu_names import holder_command
from ansible_collections.gpuops.remediation.plugins.module_utils._verdict import HELD_STATES, IN_USE, NO_GPU_SELECTED, memory_held, undetermined
from ansible_collections.gpuops.remediation.plugins.plugin_utils.ladder._ladder_decisions import BUSY_EVIDENCE, health_gate_failed, instance_cap
from ansible_collections.gpuops.remediation.plugins.plugin_utils.ladder._walk_state import walk_state
from ansible_collections.gpuops.remediation.plugins.plugin_utils.report._summary import holder_line

_HOLDER_FIELDS = ("pid", "name", "user", "class", "state", "gpus", "used_mib", "ppid", "parent_name")


# What a rung did, as the lines of the report.


def kill_plan_lines(killed, check_mode):
    """The kill section of gpu_kill, gpu_reset or nvidia_driver_reload, one line per process or container."""
    lines = []
    for item in killed.get("signalled") or []:
        lines.append("%s pid %s %s with %s" % ("would end" if check_mode else "ended", item["pid"], item.get("name"),
                                               ", ".join(item.get("signals") or [])))
    for zombie in killed.get("zombies") or []:
        verb = "would reap" if check_mode else "reaped" if zombie.get("gone") else "could not reap"
        line = "%s zombie pid %s %s" % (verb, zombie["pid"], zombie.get("name") or "")
        if zombie.get("parent"):
            line += " (parent pid %s %s)" % (zombie["parent"]["pid"], zombie["parent"].get("name"))
        if zombie.get("reaped_by"):
            line += " by %s" % zombie["reaped_by"]
        if zombie.get("reason"):
            line += ": %s" % zombie["reason"]
        lines.append(line)
    for item in killed.get("left_alone") or []:
        lines.append("left pid %s %s: %s" % (item["pid"], item.get("name") or "", item.get("reason")))
    for container in killed.get("containers") or []:
        if container.get("ok"):
            lines.append("%s %s container %s" % ("would stop" if check_mode else "stopped", container["runtime"], container["id"]))
        else:
            lines.append("could not stop %s container %s: %s" % (container["runtime"], container["id"], container.get("message")))
    return lines


def reset_plan_lines(reset, check_mode):
    lines = ["%s GPU %s (%s): %s" % ("would reset" if check_mode else "reset", gpu["index"], gpu.get("pci_bus_id"), gpu.get("reason"))
             for gpu in reset.get("gpus") or [] if gpu.get("reset")]
    lines += ["%s %s" % ("would stop and start again" if check_mode else "stopped and started again", unit)
              for unit in reset.get("services_stopped") or []]
    return lines


def unique_lines(lines):
    seen = set()
    return [line for line in lines if not (line in seen or seen.add(line))]


def rung_result(step, check_mode):
    """What a rung did, or in a plan would do, in words: every format of the report says it this way."""
    if step.get("failed"):
        return "%s: %s" % ("would fail" if check_mode else "failed", step.get("msg"))
    if step.get("changed"):
        return "would change" if check_mode else "changed"
    return "would do nothing" if check_mode else "nothing to do"


def step_result(rung, result, plan):
    return {"rung": rung, "changed": bool(result.get("changed")), "failed": bool(result.get("failed")),
            "msg": result.get("msg") or "", "plan": plan}


# The outcome: status, memory back per GPU, the report's lines.

def gpu_outcomes(first, last, check_mode):
    """Per GPU of the first snapshot: state and memory before and after, and the memory back."""
    after = dict((gpu["index"], gpu) for gpu in last["gpus"])
    gpus = []
    for gpu in first["gpus"]:
        before_mib = gpu.get("memory_used_mib")
        later = after.get(gpu["index"], {})
        used_after = (before_mib or 0) if check_mode else later.get("memory_used_mib")
        freed = (before_mib or 0) - (used_after or 0) if used_after is not None else 0
        gpus.append({
            "index": gpu["index"], "name": gpu.get("name"), "pci_bus_id": gpu.get("pci_bus_id"),
            "state_before": gpu.get("state") or "unknown",
            "state_after": gpu.get("state") if check_mode else later.get("state") or "unknown",
            "memory_used_mib_before": before_mib, "memory_used_mib_after": used_after,
            "ghost_mib_before": gpu.get("unattributed_mib"), "freed_mib": freed,
        })
    return gpus


PARTLY_FIXED = "partly fixed"


def partly_fixed(state, options, check_mode):
    """(status, message) of a walk that took the allowed rungs for the GPUs they help and named the others (the walk's
    "beyond", from _ladder_decisions.reach): "partly fixed" once every GPU it helped holds nothing more (in check mode
    too, which fails the host as the real run would), saying both - which GPU the rung fixed and how much came back, which GPU needs which rung and what
    would allow it; None for any other walk (and for one whose last rung failed or left a helped GPU held)."""
    state = walk_state(state)
    beyond = state.beyond
    if not beyond or not state.tried or state.tried[-1]["failed"] or state.error:
        return None
    outside = set(need["index"] for need in beyond)
    held = HELD_STATES + ((IN_USE,) if options.end_running_jobs else ())
    if not check_mode and any(gpu["index"] not in outside and gpu.get("state") in held for gpu in state.last["gpus"]):
        return None
    rung = state.tried[-1]["rung"]
    named = "; ".join(_beyond_line(need) for need in beyond)
    helped = [gpu for gpu in gpu_outcomes(state.first, state.last, check_mode)
              if gpu["index"] not in outside and gpu["state_before"] in held]
    if check_mode:
        return PARTLY_FIXED, "check mode: would take the %s rung for GPU %s; %s" % (rung, ", ".join(str(g["index"]) for g in helped), named)
    fixed = ", ".join("GPU %s by %s (%d MiB back)" % (gpu["index"], rung, gpu["freed_mib"]) for gpu in helped)
    return PARTLY_FIXED, "%s: %s; %s" % (PARTLY_FIXED, fixed or "nothing more held where the %s rung helps" % rung, named)


def _beyond_line(need):
    """A GPU the walk left (partly fixed): the rung it needs and what would allow it; the working programs that rung
    would end, where they hold it."""
    if need.get("busy"):
        return "GPU %s needs the %s rung (%s), %s: %s; %s would allow it" % (
            need["index"], need["rung"], "; ".join(need["reasons"]), BUSY_EVIDENCE, "; ".join(need["busy"]), need["allow"])
    return "GPU %s needs the %s rung (%s), which %s would allow" % (need["index"], need["rung"], "; ".join(need["reasons"]), need["allow"])


def outcome_status(state, options, check_mode, freed_mib):
    """(status, message) of the walk: refused, clean, planned, fixed, failed or undetermined (no memory known held,
    but a GPU's state is unknown: never clean, never fixed). In check mode the same as the real run's wherever the plan
    fails (the node did not change, so the real run would end the same way): planned only when a rung would work."""
    state = walk_state(state)
    tried = [step["rung"] for step in state.tried]
    held = memory_held(state.last, options.end_running_jobs)
    unknown = undetermined(state.last) if not held else []
    if state.refused and not tried:
        return "refused", state.refused
    if state.error:
        return "failed", state.error
    if not tried and unknown:
        return "undetermined", "undetermined: no GPU memory is known to be held, but %s" % "; ".join(unknown)
    if not tried and ((state.first or state.last).get("scope") or {}).get("gpus") == []:
        return "clean", NO_GPU_SELECTED
    if not tried:
        return ("failed", "memory held but no rung was allowed") if held else ("clean", "no GPU memory held: nothing to do")
    if state.scheduler.error:
        before = ", ".join(tried[:-1])
        return "failed", "no %s rung ran, the walk stopped at the scheduler: %s%s" % (
            tried[-1], state.scheduler.error, "; after the %s rung(s), GPU memory is still held" % before if before and held else "")
    partial = partly_fixed(state, options, check_mode)
    if partial:
        return partial
    if check_mode and not state.tried[-1]["failed"]:
        # The plan's outcome is the real run's: a rung that would fail is the real run's failure (below), not a plan.
        failing = ["the %s rung, which would fail: %s" % (step["rung"], step["msg"]) for step in state.tried[:-1]]
        return "planned", "check mode: would take %s" % "; then ".join(failing + ["the %s rung" % tried[-1]])
    if unknown:
        return "undetermined", "undetermined after the %s rung(s): no GPU memory is known to be held, but %s" % (
            ", ".join(tried), "; ".join(unknown))
    if not held and not any(step["changed"] for step in state.tried):
        return "clean", "the memory was given back before any rung changed anything (%d MiB)" % freed_mib
    if not held and health_gate_failed(state.health_check):
        return "failed", "the %s rung got the memory back (%d MiB), but the GPUs failed the health check, so the node stays " \
            "out of service: %s" % (tried[-1], freed_mib, state.health_check["reason"])
    if not held:
        return "fixed", "the %s rung got the memory back (%d MiB)" % (tried[-1], freed_mib)
    return "failed", "GPU memory still held after the %s rung(s); the heaviest rung allowed is %s: %s" % (
        ", ".join(tried), _allowed_text(state, options), "; ".join(r["reason"] for r in state.last["verdict"]["reasons"]))


def _allowed_text(state, options):
    """The heaviest rung the walk was allowed, and what set it (the limits, or a selection narrowed to MIG instances)."""
    cap = instance_cap(state.first, options)
    if cap is None or cap >= options.ceiling:
        return "%s (%s)" % (options.rungs[options.ceiling], options.limits_text())
    labels = state.first["scope"]["mig_instances"]
    return ("%s (%s narrows the run to MIG instance %s: a heavier rung reaches the whole GPU or the node, every other "
            "instance's jobs with it; name the whole GPU (%s) to allow it)" % (
                options.rungs[cap], options.named("gpus", state.first["scope"]["gpus"]), ", ".join(labels),
                ", ".join(sorted(set(label.split(":")[0] for label in labels)))))


def held_by(snapshot):
    return [dict([(key, holder.get(key)) for key in _HOLDER_FIELDS] + [("command", holder_command(holder))])
            for holder in snapshot["holders"] if holder["class"] != "gpu_daemon"]


def summary_lines(host, status, msg, holders, gpus, tried, check_mode, gate=None, drain_notes=()):
    lines = ["%s: %s - %s" % (host, status, msg)]
    lines += [holder_line(holder) for holder in holders]
    lines += ["  ghost memory on GPU %s: %s MiB" % (gpu["index"], gpu["ghost_mib_before"]) for gpu in gpus if gpu["ghost_mib_before"]]
    for step in tried:
        lines.append("  rung %s: %s" % (step["rung"], rung_result(step, check_mode)))
        lines += ["    " + line for line in step["plan"]]
    for gpu in gpus:
        before = gpu["memory_used_mib_before"] if gpu["memory_used_mib_before"] is not None else "?"
        if check_mode:
            lines.append("  GPU %s: %s MiB used, %s (check mode: nothing changed)" % (gpu["index"], before, gpu["state_before"]))
        else:
            after = gpu["memory_used_mib_after"] if gpu["memory_used_mib_after"] is not None else "?"
            lines.append("  GPU %s: %s -> %s MiB used, %s MiB back (%s -> %s)" % (
                gpu["index"], before, after, gpu["freed_mib"], gpu["state_before"], gpu["state_after"]))
    if gate:
        lines.append("  health check (%s): %s - %s" % (command_text(gate["level"]), gate["result"], gate["reason"]))
    lines += ["  scheduler: %s" % note for note in drain_notes]
    return [printable(line) for line in lines]  # names and messages from the node: one console line each


def outcome(state, options, check_mode, now, host):
    """The walk's outcome as the roles publish it (gpu_reclaim_outcome) and the run report reads it."""
    state = walk_state(state)
    scheduler = state.scheduler
    gpus = gpu_outcomes(state.first, state.last, check_mode)
    freed = sum(gpu["freed_mib"] for gpu in gpus)
    status, msg = outcome_status(state, options, check_mode, freed)
    if scheduler.undrain_error:
        status, msg = "failed", "%s; then %s" % (msg, scheduler.undrain_error)
    holders = held_by(state.first)
    gate = state.health_check
    entry = {
        "host": host, "status": status, "msg": msg, "check_mode": check_mode,
        "entry_rung": state.first["verdict"]["rung"],
        "reasons": [reason["reason"] for reason in state.first["verdict"]["reasons"]],
        "fixed_by": state.tried[-1]["rung"] if status in ("fixed", PARTLY_FIXED) else None,
        "needs": [dict(need) for need in state.beyond],
        "rungs_tried": state.tried, "held_by": holders, "gpus": gpus, "memory_freed_mib": freed,
        "seconds": round(now - state.started, 1), "drained": scheduler.drained or None,
        "undrained": scheduler.undrained or None, "drain_notes": scheduler.notes, "inspections": state.inspections,
        "summary": summary_lines(host, status, msg, holders, gpus, state.tried, check_mode, gate, scheduler.notes),
    }
    if gate:
        entry["health_check"] = gate
    return entry
