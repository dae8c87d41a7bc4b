# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The walk up the ladder, on the controller: inspect, plan, act, inspect again, stop at the first rung that worked.

Pure Python: `execute(module_name, module_args)` runs one of the collection's modules on the node and returns its
result, which is all the walk knows of Ansible (the action plugin gpu_ladder passes ActionBase._execute_module).
The walk pauses where the controller must act itself, a scheduler drain before the first destructive rung and the
reboot, and continues from the state it returned (a plain JSON dict). Every question the walk asks is one named
function here or in module_utils/_verdict.py; the roles only call it.
"""

from __future__ import annotations

import re
import time

from ansible_collections.gpuops.remediation.plugins.module_utils._dcgm import LEVELS as HEALTH_CHECK_LEVELS
from ansible_collections.gpuops.remediation.plugins.module_utils._dcgm import command_text, health_check
from ansible_collections.gpuops.remediation.plugins.module_utils._gpu_names import holder_command
from ansible_collections.gpuops.remediation.plugins.module_utils._verdict import (
    NO_RUNG, RUNGS, WINDOWS_RUNGS, ceiling_index, entry_floor, entry_rung, kill_targets, memory_held, rung_index, running_job_holders,
)
from ansible_collections.gpuops.remediation.plugins.plugin_utils._summary import holder_line

INSPECT_MODULE = "gpuops.remediation.gpu_holders_info"
RUNG_MODULES = {
    "kill": "gpuops.remediation.gpu_kill",
    "reset": "gpuops.remediation.gpu_reset",
    "reload": "gpuops.remediation.nvidia_driver_reload",
    "graphics": "gpuops.remediation.gpu_graphics_restart",
}
HEALTH_MODULE = "gpuops.remediation.gpu_health_check"
# The rungs after which the GPUs are checked (the health gate) before the node goes back into service: the ones that
# reset the GPUs' state. A kill leaves the GPUs as they were; a reboot starts them afresh.
GATED_RUNGS = ("reset", "reload")
HEALTH_CHECKS = ("auto", "never")
# Steps the controller takes between two calls of the walk.
CONTROLLER_STEPS = ("drain", "reboot", "undrain")
DRAINS = ("none", "slurm", "kubernetes")
STATE_VERSION = 1
# The walk's own options; the options of the modules it runs (snapshot, journal and lock, kill) pass through to them.
# Each platform's ladder (rungs from _verdict) and the rungs that take its node out of service by default.
LADDERS = {"linux": RUNGS, "windows": WINDOWS_RUNGS}
DEFAULT_DESTRUCTIVE = {"linux": ["reset", "reload", "graphics", "reboot"], "windows": ["restart_adapter", "logoff", "reboot"]}
ALL_RUNGS = list(RUNGS) + [rung for rung in WINDOWS_RUNGS if rung not in RUNGS]
LADDER_ARGUMENT_SPEC = dict(
    platform=dict(type="str", choices=list(LADDERS), default="linux"),
    max_rung=dict(type="str", choices=ALL_RUNGS, default="reload"),
    allow_reboot=dict(type="bool", default=False),
    destructive_rungs=dict(type="list", elements="str", choices=ALL_RUNGS),
    drain=dict(type="str", choices=list(DRAINS), default="none"),
    snapshot=dict(type="dict", default={}),
    snapshot_max_age=dict(type="float", default=300.0),
    kill_wait_timeout=dict(type="float", default=30.0),
    reload_grace=dict(type="float", default=10.0),
    health_check=dict(type="str", choices=list(HEALTH_CHECKS), default="auto"),
    health_check_level=dict(type="int", choices=list(HEALTH_CHECK_LEVELS), default=1),
    health_check_timeout=dict(type="float", default=300.0),
    continue_after=dict(type="str", choices=list(CONTROLLER_STEPS)),
    state=dict(type="dict", default={}),
    controller_result=dict(type="dict", default={}),
    option_names=dict(type="dict", default={}),
    windows=dict(type="dict", options=dict(
        max_rung=dict(type="str", choices=list(WINDOWS_RUNGS)),
        destructive_rungs=dict(type="list", elements="str", choices=list(WINDOWS_RUNGS)),
        journal_path=dict(type="str"),
    )),
)


def module_specs():
    """(snapshot, journal and lock, kill) argument specs of the modules the walk runs, which pass through to them.
    Imported when a walk needs them: the filters, which only ask the ladder's questions, do without."""
    from ansible_collections.gpuops.remediation.plugins.module_utils._action import ACTION_ARGUMENT_SPEC
    from ansible_collections.gpuops.remediation.plugins.module_utils._kill import KILL_ARGUMENT_SPEC
    from ansible_collections.gpuops.remediation.plugins.module_utils._snapshot import SNAPSHOT_ARGUMENT_SPEC
    return SNAPSHOT_ARGUMENT_SPEC, ACTION_ARGUMENT_SPEC, KILL_ARGUMENT_SPEC


def walk_argument_spec():
    spec = {}
    for part in module_specs():
        spec.update(part)
    spec.update(LADDER_ARGUMENT_SPEC)
    return spec


_HOLDER_FIELDS = ("pid", "name", "user", "class", "state", "gpus", "used_mib", "ppid", "parent_name")


class WalkError(Exception):
    """The walk cannot go on: the first inspection failed, or a call does not continue the walk it names."""


class WalkOptions:
    """The walk's settings, from the gpu_ladder task's arguments (already checked against its argument spec)."""

    def __init__(self, args):
        self.platform = args.get("platform") or "linux"
        self.rungs = LADDERS[self.platform]
        self.max_rung = args["max_rung"]
        self.allow_reboot = args["allow_reboot"]
        given = args.get("destructive_rungs")
        self.destructive_rungs = tuple(DEFAULT_DESTRUCTIVE[self.platform] if given is None else given)
        self.drain = args["drain"]
        self.kill_wait_timeout = args["kill_wait_timeout"]
        self.reload_grace = args["reload_grace"]
        self.option_names = args.get("option_names") or {}
        self.health_check = args.get("health_check") or "auto"
        self.health_check_level = args.get("health_check_level") or 1
        self.health_check_timeout = args.get("health_check_timeout") or 300.0
        self.snapshot_max_age = args.get("snapshot_max_age", 300.0)
        self.kept = dict((name, args.get(name)) for name in KEPT_OPTIONS)
        snapshot_spec, action_spec, kill_spec = module_specs()
        self.snapshot_args = _present(args, snapshot_spec)
        self.action_args = _present(args, action_spec)
        self.kill_args = _present(args, kill_spec)
        # Ending a live scheduler job's processes (busy) is asked for: the kill rung then ends a running job.
        self.end_running_jobs = bool(args.get("end_running_jobs"))

    @property
    def ceiling(self):
        return ceiling_index(self.max_rung, self.allow_reboot, self.rungs)

    def named(self, option, value):
        """An option as the caller set it, for messages: gpu_reclaim_max_rung=reload through the role."""
        return "%s=%s" % (self.option_names.get(option, option), value)

    def limits_text(self):
        return "%s, %s" % (self.named("max_rung", self.max_rung), self.named("allow_reboot", self.allow_reboot))


def platform_args(args):
    """The walk's arguments for its platform: on a Windows host the `windows` option's values replace the walk's own
    (each named, in messages, as the caller named the Windows one: option_names["windows.max_rung"])."""
    resolved = dict((name, value) for name, value in args.items() if name != "windows")
    if args.get("platform") != "windows":
        return resolved
    names = dict(args.get("option_names") or {})
    for name, value in (args.get("windows") or {}).items():
        if value is not None:
            resolved[name] = value
            if "windows." + name in names:
                names[name] = names["windows." + name]
    resolved["option_names"] = names
    return resolved


def _present(args, names):
    return dict((name, args[name]) for name in names if args.get(name) is not None)


# The options a snapshot's verdict depends on (its "scope"): a given snapshot starts the walk only when they match.
SCOPE_OPTIONS = ("gpus", "ghost_threshold_mib", "kernel_log_source", "kernel_log_path", "kernel_log_window")
# What a walk keeps from its start: a call that continues it must not change them.
KEPT_OPTIONS = ("platform", "max_rung", "allow_reboot", "destructive_rungs", "drain", "gpus")


class _OptionCheck:
    """What the modules' option validators need of a module: the walk checks its options with the modules' own code,
    on the controller, before the first rung, so that bad input never climbs the ladder or drains the node."""

    def __init__(self, params):
        self.params = params

    def fail_json(self, msg, **kwargs):
        raise WalkError(msg)


def check_options(args):
    """Fail, naming the option and the value, when a module of the walk would refuse it, or a rung is not of the
    platform's ladder."""
    rungs = LADDERS[args["platform"]]
    if args["max_rung"] not in rungs:
        raise WalkError("max_rung: %r is not a rung of the %s ladder (%s)" % (args["max_rung"], args["platform"], ", ".join(rungs)))
    unknown = [rung for rung in args.get("destructive_rungs") or [] if rung not in rungs]
    if unknown:
        raise WalkError("destructive_rungs: %s not a rung of the %s ladder (%s)" % (
            ", ".join(map(repr, unknown)), args["platform"], ", ".join(rungs)))
    from ansible_collections.gpuops.remediation.plugins.module_utils._kill import validate_kill_params
    from ansible_collections.gpuops.remediation.plugins.module_utils._snapshot import validate_snapshot_params
    check = _OptionCheck(args)
    validate_snapshot_params(check)
    validate_kill_params(check)
    for name in ("kill_wait_timeout", "reload_grace", "lock_timeout", "snapshot_max_age"):
        if args.get(name) is not None and args[name] < 0:
            raise WalkError("%s must be 0 or more seconds, got %r" % (name, args[name]))
    if args.get("health_check_timeout") is not None and args["health_check_timeout"] <= 0:
        raise WalkError("health_check_timeout must be more than 0 seconds, got %r" % args["health_check_timeout"])


# The decisions of the walk, one function each.

def next_rung(floor, tried, ceiling, rungs=RUNGS):
    """The next rung to take: above every rung tried, at or above the floor the evidence sets, at most the ceiling."""
    start = max(floor, rung_index(tried[-1]["rung"], rungs) + 1 if tried else 0)
    return rungs[start] if start <= ceiling else None


def needs_drain(rung, options, state):
    """Whether the walk pauses for the scheduler before this rung: the first destructive rung of a walk that drains (the
    drain) - a rung that would end a running job's processes (end_running_jobs) is destructive, the kill rung too - and
    with Slurm every later destructive rung too (the drain checked again: an administrator's resume stops the walk)."""
    if options.drain == "none" or state.get("drain_checked") == rung:
        return False
    destructive = rung in options.destructive_rungs or ends_running_jobs(state["last"], options.end_running_jobs)
    return destructive and (not state["drain_taken"] or options.drain == "slurm")


def slurm_drain_state(state):
    """What slurm_drain does at the pause before a destructive rung: V(drained) the first time, then V(confirmed)."""
    return "confirmed" if state.get("drain_taken") else "drained"


def ends_running_jobs(snapshot, end_running_jobs):
    """Whether a rung on this snapshot would end a live scheduler job's processes: destructive, whatever the rung."""
    return bool(end_running_jobs and running_job_holders(snapshot))


def refusal(snapshot, floor, options):
    """Why the walk refuses before any action (the evidence needs a rung above the ceiling), or ""."""
    if not memory_held(snapshot, options.end_running_jobs) or floor <= options.ceiling:
        return ""
    rungs = options.rungs
    allow = options.named("max_rung", rungs[floor])
    if rungs[floor] == "reboot" and not options.allow_reboot:
        allow += " and %s" % options.named("allow_reboot", "true")
    return "the evidence needs the %s rung (%s), but the heaviest rung allowed is %s (%s); %s would allow it" % (
        rungs[floor], "; ".join(r["reason"] for r in snapshot["verdict"]["reasons"]), rungs[options.ceiling],
        options.limits_text(), allow)


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
    if state.get("drain_followup") != "hold":
        return None
    return re.sub(r"[\x00-\x20\x7f]+", " ", state["health_check"]["reason"] or "").strip()


def cordon_is_ours(node_resources, annotation, reason):
    """Whether the Kubernetes node (the resources of kubernetes.core.k8s_info) carries our mark, `annotation` set to
    `reason`: only then is its cordon ours to lift."""
    marks = [((item.get("metadata") or {}).get("annotations") or {}).get(annotation) for item in node_resources or []]
    return marks == [reason]


def destructive_entry(snapshot, destructive_rungs, platform="linux", end_running_jobs=False):
    """Whether walking this snapshot would start with a destructive rung (what the fleet guard counts): one of
    destructive_rungs, or any rung that would end a running job's processes (end_running_jobs)."""
    rung = entry_rung(snapshot, LADDERS[platform], end_running_jobs)
    return rung in destructive_rungs or (rung != NO_RUNG and ends_running_jobs(snapshot, end_running_jobs))


def fleet_guard(destructive_hosts, host_count, max_percent):
    """The refusal of the whole run when more hosts would need a destructive rung than the share allowed, or ""."""
    allowed = max(1, int(host_count * max_percent / 100))
    if len(destructive_hosts) <= allowed:
        return ""
    return ("fleet guard: %d of %d hosts would need a destructive rung (%s), more than the %s%% allowed (%d hosts, "
            "gpu_remediate_max_destructive_percent). Nothing was done. Narrow the run with --limit, or raise the percentage."
            % (len(destructive_hosts), host_count, ", ".join(destructive_hosts), max_percent, allowed))


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


def _unique(lines):
    seen = set()
    return [line for line in lines if not (line in seen or seen.add(line))]


def step_result(rung, result, plan):
    return {"rung": rung, "changed": bool(result.get("changed")), "failed": bool(result.get("failed")),
            "msg": result.get("msg") or "", "plan": plan}


class LadderWalk:
    """One host's walk. start() begins it; continue_after() goes on after a controller step. Both return the state."""

    def __init__(self, options, execute, check_mode, host, clock=time.time):
        self.options = options
        self.host = host
        self.modules_run = []  # by this call, in order
        self._execute = execute
        self.check_mode = bool(check_mode)
        self.clock = clock

    def execute(self, module_name, module_args):
        self.modules_run.append(module_name)
        return self._execute(module_name, module_args)

    def usable(self, snapshot):
        """Whether a snapshot the caller gave can start the walk: taken with the same options its verdict depends on,
        not older than snapshot_max_age (a later batch of a serial run must not walk on what the first play saw)."""
        if not snapshot:
            return False
        scope = snapshot.get("scope") or {}
        if any(scope.get(name) != self.options.snapshot_args.get(name) for name in SCOPE_OPTIONS):
            return False
        taken = scope.get("taken_epoch")
        return taken is not None and 0 <= self.clock() - taken <= self.options.snapshot_max_age

    def inspect(self):
        return self.execute(INSPECT_MODULE, dict(self.options.snapshot_args))

    def start(self, snapshot=None):
        if not self.usable(snapshot):
            snapshot = self.inspect()
            if snapshot.get("failed"):
                raise WalkError("the first inspection failed: %s" % snapshot.get("msg"))
        floor = entry_floor(snapshot["verdict"]["rung"], self.options.rungs)
        state = {
            "version": STATE_VERSION, "started": self.clock(), "first": snapshot, "last": snapshot, "floor": floor,
            "tried": [], "inspections": [_inspection(snapshot, None)], "pending": None, "pending_rung": None,
            "refused": refusal(snapshot, floor, self.options), "error": "", "drain_taken": False, "drained": "",
            "drain_notes": [], "undrained": "", "undrain_taken": False, "options": self.options.kept,
        }
        if state["refused"]:
            return self._end(state)
        return self._climb(state)

    def continue_after(self, step, state, controller_result):
        """Go on after the controller took `step` (drain, reboot, undrain), whose result it passes."""
        if not state or state.get("version") != STATE_VERSION:
            raise WalkError("continue_after=%s needs state, the state an earlier call of this walk returned" % step)
        expected = "undrain" if state["pending"] is None and state.get("drain_followup") else state["pending"]
        if step != expected:
            raise WalkError("continue_after=%s, but the walk waits for %s" % (step, expected or "nothing"))
        changed = [name for name in KEPT_OPTIONS if state["options"].get(name) != self.options.kept[name]]
        if changed:
            raise WalkError("continue_after=%s: %s must stay as the walk started with them (%s)" % (
                step, ", ".join(changed), ", ".join("%s=%r" % (name, state["options"][name]) for name in changed)))
        if step in ("drain", "undrain") and controller_result.get("scheduler") != self.options.drain:
            raise WalkError("controller_result: the result of the %s tasks of scheduler %r (drain=%s), got scheduler=%r" % (
                step, self.options.drain, self.options.drain, controller_result.get("scheduler")))
        state["pending"] = None
        after_step = {"drain": self._after_drain, "reboot": self._after_reboot, "undrain": self._after_undrain}
        return after_step[step](state, controller_result)

    def _after_drain(self, state, drain):
        rung, state["pending_rung"] = state["pending_rung"], None
        state["drain_checked"] = rung
        if state["drain_taken"]:  # the drain checked again before a later destructive rung: ours stays as it was
            dummy, error, notes = drain_outcome(drain, self.check_mode, label="slurm check before the %s rung" % rung)
            state["drain_notes"] = state["drain_notes"] + notes
        else:
            drained, error, notes = drain_outcome(drain, self.check_mode)
            state.update(drain_taken=True, drained=drained, drain_notes=state["drain_notes"] + notes)
        if error:
            # No destructive rung without the drain.
            state["drain_error"] = error
            state["tried"].append({"rung": rung, "changed": False, "failed": True, "msg": error, "plan": []})
            return self._end(state)
        return self._climb(state)

    def _after_reboot(self, state, reboot):
        state["pending_rung"] = None
        plan = [] if reboot.get("failed") else ["%s the node" % ("would reboot" if self.check_mode else "rebooted")]
        state["tried"].append(step_result("reboot", reboot, plan))
        if not self.check_mode and not reboot.get("failed"):
            self._inspect(state, "reboot")
        return self._end(state)

    def _after_undrain(self, state, undrain):
        undrained, notes, error = undrain_outcome(state["drain_followup"], undrain)
        state["undrained"] = undrained
        state["undrain_error"] = error
        state["drain_notes"] = state["drain_notes"] + notes
        state["undrain_taken"] = True
        return self._end(state)

    def _climb(self, state):
        while memory_held(state["last"], self.options.end_running_jobs) and not state["error"]:
            rung = next_rung(state["floor"], state["tried"], self.options.ceiling, self.options.rungs)
            if rung is None:
                break
            if needs_drain(rung, self.options, state) or rung == "reboot":
                state["pending"] = "drain" if needs_drain(rung, self.options, state) else "reboot"
                state["pending_rung"] = rung
                return state
            self._take(state, rung)
            if self.check_mode:
                break  # the modules only predicted: the node did not change, so only the first rung can be planned
        return self._end(state)

    def _end(self, state):
        held = memory_held(state["last"], self.options.end_running_jobs)
        if "health_check" not in state:  # once per walk: the end after the undrain has it already
            state["health_check"] = self._health_gate(state, held)
        followup = drain_followup(self.options.drain, state["drained"], held, self.check_mode,
                                  health_gate_failed(state["health_check"]))
        state["drain_followup"] = None if state.get("undrain_taken") else followup
        state["outcome"] = outcome(state, self.options, self.check_mode, self.clock(), self.host)
        return state

    def _health_gate(self, state, held):
        """The health check of the GPUs after the rung that got the memory back (health_gate), or None."""
        last = state["tried"][-1] if state["tried"] else {}
        action = health_gate(last.get("rung"), last.get("failed") or bool(state["error"]), held,
                             self.options.health_check, self.check_mode)
        level = self.options.health_check_level
        if action is None:
            return None
        if action == "off":
            return health_check(level, "not_run", "the health check is off (%s)" % self.options.named("health_check", "never"))
        if action == "plan":
            return health_check(level, "not_run", "check mode: after the %s rung, would run %s where dcgmi is installed, "
                                "and keep the node out of service if it fails" % (last["rung"], command_text(level)))
        # The journal too: the module writes the check's start before dcgmi runs (slurm_drain reads it before a resume).
        journaled = dict((name, self.options.action_args[name]) for name in ("run_id", "journal_path") if name in self.options.action_args)
        result = self.execute(HEALTH_MODULE, dict(journaled, level=level, timeout=self.options.health_check_timeout,
                                                  gpus=self._gate_gpus(state)))
        gate = result.get("health_check") if not result.get("failed") else None
        if gate is None:
            gate = health_check(level, "fail", "the health check could not run: %s" % (result.get("msg") or "no result"))
        if health_gate_failed(gate) and state["drained"] == "kubernetes":
            state["drain_notes"] = state["drain_notes"] + [
                "kubernetes: left cordoned, the GPUs failed the health check; uncordon the node by hand once they are repaired"]
        return gate

    def _gate_gpus(self, state):
        """The GPUs the walk was scoped to, by index (DCGM numbers GPUs as NVML does); all when it was not scoped."""
        if not self.options.snapshot_args.get("gpus"):
            return []
        return [gpu["index"] for gpu in state["first"]["gpus"]]

    def rung_takers(self):
        """{rung: the method that takes it}: one per rung of the platform's ladder but the reboot (the controller's)."""
        return {"kill": self._take_kill, "reset": self._take_reset, "reload": self._take_reload, "graphics": self._take_graphics}

    def _take(self, state, rung):
        step, after = self.rung_takers()[rung](state["last"])
        state["tried"].append(step)
        if not self.check_mode:
            if after and not after.get("failed") and "gpus" in after:
                state["last"] = after
                state["inspections"].append(_inspection(after, rung))
                state["floor"] = max(state["floor"], entry_floor(after["verdict"]["rung"], self.options.rungs))
            else:
                self._inspect(state, rung)

    def _inspect(self, state, after_rung):
        snapshot = self.inspect()
        if snapshot.get("failed"):
            state["error"] = "the inspection after the %s rung failed: %s" % (after_rung, snapshot.get("msg"))
            return
        state["last"] = snapshot
        state["inspections"].append(_inspection(snapshot, after_rung))
        state["floor"] = max(state["floor"], entry_floor(snapshot["verdict"]["rung"], self.options.rungs))

    def _module_args(self, *parts, **extra):
        args = dict(self.options.snapshot_args)
        args.update(self.options.action_args)
        for part in parts:
            args.update(part)
        args.update(extra)
        return args

    def _kill(self, snapshot):
        """gpu_kill on the kill targets of the snapshot, by pid and start time; None when there are none."""
        targets = [dict((key, h[key]) for key in ("pid", "start_time"))
                   for h in kill_targets(snapshot, end_running_jobs=self.options.end_running_jobs)]
        if not targets:
            return None
        return self.execute(RUNG_MODULES["kill"], self._module_args(self.options.kill_args, holders=targets,
                                                                    wait_timeout=self.options.kill_wait_timeout))

    def _take_kill(self, snapshot):
        killed = self._kill(snapshot)
        if killed is None:
            return {"rung": "kill", "changed": False, "failed": False, "msg": "no holder to end", "plan": []}, snapshot
        return step_result("kill", killed, kill_plan_lines(killed, self.check_mode)), killed.get("snapshot_after")

    def _take_reset(self, snapshot):
        # A rung includes the lighter ones: the holders of memory end first, then gpu_reset ends what still blocks it
        # (in check mode the same holders again, as nothing ended) and resets.
        killed = self._kill(snapshot) or {}
        kill_lines = kill_plan_lines(killed, self.check_mode)
        if killed.get("failed"):
            return step_result("reset", killed, kill_lines), killed.get("snapshot_after")
        reset = self.execute(RUNG_MODULES["reset"], self._module_args(self.options.kill_args, kill_holders=True))
        plan = kill_lines + kill_plan_lines(reset.get("killed") or {}, self.check_mode) + reset_plan_lines(reset, self.check_mode)
        step = step_result("reset", reset, _unique(plan))
        step["changed"] = step["changed"] or bool(killed.get("changed"))
        return step, reset.get("snapshot_after")

    def _take_reload(self, snapshot):
        del snapshot  # the module takes its own, under the node lock
        reload = self.execute(RUNG_MODULES["reload"], self._module_args(self.options.kill_args, kill_holders=True,
                                                                        grace=self.options.reload_grace))
        plan = kill_plan_lines(reload.get("killed") or {}, self.check_mode) + list(reload.get("plan") or [])
        return step_result("reload", reload, plan), reload.get("snapshot_after")

    def _take_graphics(self, snapshot):
        del snapshot
        graphics = self.execute(RUNG_MODULES["graphics"], self._module_args())
        return step_result("graphics", graphics, list(graphics.get("plan") or [])), graphics.get("snapshot_after")


def _inspection(snapshot, after_rung):
    """What the report keeps of each snapshot of the walk."""
    return {"after_rung": after_rung, "verdict_rung": snapshot["verdict"]["rung"],
            "kernel_log_source": snapshot.get("probes", {}).get("kernel_log", {}).get("source"),
            "held": memory_held(snapshot)}


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


def outcome_status(state, options, check_mode, freed_mib):
    """(status, message) of the walk: refused, clean, planned, fixed or failed."""
    tried = [step["rung"] for step in state["tried"]]
    held = memory_held(state["last"], options.end_running_jobs)
    if state["refused"] and not tried:
        return "refused", state["refused"]
    if state["error"]:
        return "failed", state["error"]
    if not tried:
        return ("failed", "memory held but no rung was allowed") if held else ("clean", "no GPU memory held: nothing to do")
    if check_mode:
        first = state["tried"][0]
        if first["failed"]:
            return "planned", "check mode: would take the %s rung, which would fail: %s" % (tried[0], first["msg"])
        return "planned", "check mode: would take the %s rung" % tried[0]
    if state.get("drain_error"):
        before = ", ".join(tried[:-1])
        return "failed", "no %s rung ran, the walk stopped at the scheduler: %s%s" % (
            tried[-1], state["drain_error"], "; after the %s rung(s), GPU memory is still held" % before if before and held else "")
    if not held and not any(step["changed"] for step in state["tried"]):
        return "clean", "the memory was given back before any rung changed anything (%d MiB)" % freed_mib
    if not held and health_gate_failed(state.get("health_check")):
        return "failed", "the %s rung got the memory back (%d MiB), but the GPUs failed the health check, so the node stays " \
            "out of service: %s" % (tried[-1], freed_mib, state["health_check"]["reason"])
    if not held:
        return "fixed", "the %s rung got the memory back (%d MiB)" % (tried[-1], freed_mib)
    return "failed", "GPU memory still held after the %s rung(s); the heaviest rung allowed is %s (%s): %s" % (
        ", ".join(tried), options.rungs[options.ceiling], options.limits_text(),
        "; ".join(r["reason"] for r in state["last"]["verdict"]["reasons"]))


def held_by(snapshot):
    return [dict([(key, holder.get(key)) for key in _HOLDER_FIELDS] + [("command", holder_command(holder))])
            for holder in snapshot["holders"] if holder["class"] != "gpu_daemon"]


def summary_lines(host, status, msg, holders, gpus, tried, check_mode, gate=None, drain_notes=()):
    lines = ["%s: %s - %s" % (host, status, msg)]
    lines += [holder_line(holder) for holder in holders]
    lines += ["  ghost memory on GPU %s: %s MiB" % (gpu["index"], gpu["ghost_mib_before"]) for gpu in gpus if gpu["ghost_mib_before"]]
    for step in tried:
        done = ": failed - " + step["msg"] if step["failed"] else ": changed" if step["changed"] else ": nothing to do"
        lines.append("  rung %s%s" % (step["rung"], done))
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
    return lines


def outcome(state, options, check_mode, now, host):
    """The walk's outcome as the roles publish it (gpu_reclaim_outcome) and the run report reads it."""
    gpus = gpu_outcomes(state["first"], state["last"], check_mode)
    freed = sum(gpu["freed_mib"] for gpu in gpus)
    status, msg = outcome_status(state, options, check_mode, freed)
    if state.get("undrain_error"):
        status, msg = "failed", "%s; then %s" % (msg, state["undrain_error"])
    holders = held_by(state["first"])
    gate = state.get("health_check")
    entry = {
        "host": host, "status": status, "msg": msg, "check_mode": check_mode,
        "entry_rung": state["first"]["verdict"]["rung"],
        "reasons": [reason["reason"] for reason in state["first"]["verdict"]["reasons"]],
        "fixed_by": state["tried"][-1]["rung"] if status == "fixed" else None,
        "rungs_tried": state["tried"], "held_by": holders, "gpus": gpus, "memory_freed_mib": freed,
        "seconds": round(now - state["started"], 1), "drained": state["drained"] or None,
        "undrained": state["undrained"] or None, "drain_notes": state["drain_notes"], "inspections": state["inspections"],
        "summary": summary_lines(host, status, msg, holders, gpus, state["tried"], check_mode, gate, state["drain_notes"]),
    }
    if gate:
        entry["health_check"] = gate
    return entry
