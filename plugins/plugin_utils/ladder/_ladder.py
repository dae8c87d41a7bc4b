# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The walk up the ladder, on the controller: inspect, plan, act, inspect again, stop at the first rung that worked.

Pure Python: `execute(module_name, module_args)` runs one of the collection's modules on the node and returns its
result, which is all the walk knows of Ansible (the action plugin gpu_ladder passes ActionBase._execute_module).
The walk pauses where the controller must act itself, a scheduler drain before the first destructive rung and the
reboot, and continues from the state it returned (a WalkState, _walk_state.py; the action plugin hands its JSON form
to the play and back). Every question the walk asks is one named
function here or in module_utils/_verdict.py; the roles only call it.
"""

from __future__ import annotations

import time

from ansible_collections.gpuops.remediation.plugins.module_utils.probes._dcgm import command_text, health_check
from ansible_collections.gpuops.remediation.plugins.module_utils._verdict import entry_floor, kill_targets, memory_held
from ansible_collections.gpuops.remediation.plugins.plugin_utils.ladder._ladder_decisions import (
    drain_followup, drain_outcome, health_gate, health_gate_failed, needs_drain, next_rung, reboot_keeps_mig_layout, undrain_outcome,
    walk_ceiling, walk_reach,
)
from ansible_collections.gpuops.remediation.plugins.plugin_utils.ladder._ladder_options import (
    HEALTH_MODULE, INSPECT_MODULE, KEPT_OPTIONS, LAYOUT_MODULE, RUNG_MODULES, SCOPE_OPTIONS, WalkError,
)
from ansible_collections.gpuops.remediation.plugins.plugin_utils.ladder._ladder_outcome import (
    kill_plan_lines, outcome, reset_plan_lines, step_result, unique_lines,
)
from ansible_collections.gpuops.remediation.plugins.plugin_utils.ladder._progress import ended_line, started_line, step_of
from ansible_collections.gpuops.remediation.plugins.plugin_utils.ladder._walk_state import STATE_VERSION, WalkState, walk_state


class LadderWalk:
    """One host's walk. start() begins it; continue_after() goes on after a controller step. Both return the state."""

    def __init__(self, options, execute, check_mode, host, clock=time.time, say=None):
        self.options = options
        self.host = host
        self.say = say or (lambda line: None)  # the progress lines (_progress.py)
        self.rung = None  # the rung being taken
        self.modules_run = []  # by this call, in order
        self.module_seconds = []  # how long each took, transfer and run on the node (what bench/fleet.py reports)
        self._execute = execute
        self.check_mode = bool(check_mode)
        self.clock = clock

    def execute(self, module_name, module_args):
        self.modules_run.append(module_name)
        module = module_name.rsplit(".", 1)[-1]
        step, gpus = step_of(module, self.rung), self.options.snapshot_args.get("gpus")
        self.say(started_line(self.host, gpus, step, module, self.check_mode))
        started = time.monotonic()
        result = {"failed": True, "msg": "it raised an error"}
        try:
            result = self._execute(module_name, module_args)
            return result
        finally:
            seconds = time.monotonic() - started
            self.module_seconds.append(round(seconds, 4))
            self.say(ended_line(self.host, gpus, step, module, seconds, result, self.check_mode))

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
        floor, refused, beyond = walk_reach(snapshot, self.options)
        state = WalkState(started=self.clock(), first=snapshot, last=snapshot, floor=floor,
                          inspections=[_inspection(snapshot, None)], refused=refused, beyond=beyond, options=self.options.kept)
        if state.refused:
            return self._end(state)
        return self._climb(state)

    def continue_after(self, step, state, controller_result):
        """Go on after the controller took `step` (drain, reboot, undrain), whose result it passes; `state`, what an
        earlier call returned (a WalkState, or its JSON form as the play hands it back)."""
        state = walk_state(state)
        if state.version != STATE_VERSION:
            raise WalkError("continue_after=%s needs state, the state an earlier call of this walk returned" % step)
        expected = "undrain" if state.pending is None and state.scheduler.followup else state.pending
        if step != expected:
            raise WalkError("continue_after=%s, but the walk waits for %s" % (step, expected or "nothing"))
        changed = [name for name in KEPT_OPTIONS if state.options.get(name) != self.options.kept[name]]
        if changed:
            raise WalkError("continue_after=%s: %s must stay as the walk started with them (%s)" % (
                step, ", ".join(changed), ", ".join("%s=%r" % (name, state.options[name]) for name in changed)))
        if step in ("drain", "undrain") and controller_result.get("scheduler") != self.options.drain:
            raise WalkError("controller_result: the result of the %s tasks of scheduler %r (drain=%s), got scheduler=%r" % (
                step, self.options.drain, self.options.drain, controller_result.get("scheduler")))
        state.pending = None
        after_step = {"drain": self._after_drain, "reboot": self._after_reboot, "undrain": self._after_undrain}
        return after_step[step](state, controller_result)

    def _after_drain(self, state, drain):
        rung, state.pending_rung = state.pending_rung, None
        scheduler = state.scheduler
        scheduler.checked = rung
        if scheduler.taken:  # the drain checked again before a later destructive rung: ours stays as it was
            dummy, error, notes = drain_outcome(drain, self.check_mode, label="slurm check before the %s rung" % rung)
            scheduler.notes = scheduler.notes + notes
        else:
            drained, error, notes = drain_outcome(drain, self.check_mode)
            scheduler.taken, scheduler.drained, scheduler.notes = True, drained, scheduler.notes + notes
        if error:
            # No destructive rung without the drain.
            scheduler.error = error
            state.tried.append({"rung": rung, "changed": False, "failed": True, "msg": error, "plan": []})
            return self._end(state)
        return self._climb(state)

    def _before_reboot(self, state):
        """Pause for the reboot, the MIG layout recorded first where a GPU has MIG on (a reboot leaves no instance):
        a layout that could not be recorded fails the rung, and the node is not rebooted."""
        if reboot_keeps_mig_layout(self.options, state.last):
            recorded = self.execute(LAYOUT_MODULE, self._module_args(state="recorded"))
            if recorded.get("failed"):
                state.tried.append(step_result("reboot", recorded, list(recorded.get("plan") or [])))
                return self._end(state)
            state.reboot_layout = list(recorded.get("plan") or [])
        state.pending, state.pending_rung = "reboot", "reboot"
        return state

    def _after_reboot(self, state, reboot):
        state.pending_rung = None
        plan = [] if reboot.get("failed") else ["%s the node" % ("would reboot" if self.check_mode else "rebooted")]
        step = step_result("reboot", reboot, plan + state.reboot_layout)
        if state.reboot_layout and not self.check_mode:
            # After a failed reboot too: what is there of the layout is left as it is, and the record gets its outcome.
            restored = self.execute(LAYOUT_MODULE, self._module_args(state="restored"))
            step["plan"] += list(restored.get("plan") or [])
            step["mig_layouts"] = restored.get("mig_layouts") or []
            step["changed"] = step["changed"] or bool(restored.get("changed"))
            if restored.get("failed"):
                step["failed"] = True
                step["msg"] = "; ".join(part for part in (step["msg"], restored.get("msg")) if part)
        state.tried.append(step)
        if not self.check_mode and not reboot.get("failed"):
            self._inspect(state, "reboot")
        return self._end(state)

    def _after_undrain(self, state, undrain):
        scheduler = state.scheduler
        undrained, notes, error = undrain_outcome(scheduler.followup, undrain)
        scheduler.undrained = undrained
        scheduler.undrain_error = error
        scheduler.notes = scheduler.notes + notes
        scheduler.undrain_taken = True
        return self._end(state)

    def _climb(self, state):
        while memory_held(state.last, self.options.end_running_jobs) and not state.error:
            rung = next_rung(state.floor, state.tried, walk_ceiling(state.beyond, self.options, state.first), self.options.rungs, state.last)
            if rung is None:
                break
            if needs_drain(rung, self.options, state):
                state.pending, state.pending_rung = "drain", rung
                return state
            if rung == "reboot":
                return self._before_reboot(state)
            self._take(state, rung)
            if self.check_mode and not state.tried[-1]["failed"]:
                # The modules only predicted: the node did not change, so only the first rung that would work can be
                # planned. A rung that would fail leaves the node as the real run's would: the plan climbs on as it does.
                break
        return self._end(state)

    def _end(self, state):
        held = memory_held(state.last, self.options.end_running_jobs)
        if not state.ended:  # the health gate once per walk: the end after the undrain has it already
            state.health_check = self._health_gate(state, held)
        followup = drain_followup(self.options.drain, state.scheduler.drained, held, self.check_mode,
                                  health_gate_failed(state.health_check))
        state.scheduler.followup = None if state.scheduler.undrain_taken else followup
        state.outcome = outcome(state, self.options, self.check_mode, self.clock(), self.host)
        state.ended = True
        return state

    def _health_gate(self, state, held):
        """The health check of the GPUs after the rung that got the memory back (health_gate), or None."""
        last = state.tried[-1] if state.tried else {}
        action = health_gate(last.get("rung"), last.get("failed") or bool(state.error), held,
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
                                                  **self._gate_scope(state)))
        gate = result.get("health_check") if not result.get("failed") else None
        if gate is None:
            gate = health_check(level, "fail", "the health check could not run: %s" % (result.get("msg") or "no result"))
        if health_gate_failed(gate) and state.scheduler.drained == "kubernetes":
            state.scheduler.notes = state.scheduler.notes + [
                "kubernetes: left cordoned, the GPUs failed the health check; uncordon the node by hand once they are repaired"]
        return gate

    def _gate_scope(self, state):
        """{"gpus": the GPUs the walk was scoped to, by index (DCGM numbers GPUs as NVML does)}; {} (every GPU: the option
        left out, as an empty list would select none) when it was not scoped."""
        if self.options.snapshot_args.get("gpus") is None:
            return {}
        return {"gpus": [gpu["index"] for gpu in state.first["gpus"]]}

    def rung_takers(self):
        """{rung: the method that takes it}: one per rung of the platform's ladder but the reboot (the controller's)."""
        return {"kill": self._take_kill, "instance": self._take_instance, "reset": self._take_reset, "reload": self._take_reload,
                "graphics": self._take_graphics}

    def _take(self, state, rung):
        self.rung = rung
        try:
            step, after = self.rung_takers()[rung](state.last)
        finally:
            self.rung = None
        state.tried.append(step)
        if not self.check_mode:
            if after and not after.get("failed") and "gpus" in after:
                state.last = after
                state.inspections.append(_inspection(after, rung))
                state.floor = max(state.floor, entry_floor(after["verdict"]["rung"], self.options.rungs))
            else:
                self._inspect(state, rung)

    def _inspect(self, state, after_rung):
        snapshot = self.inspect()
        if snapshot.get("failed"):
            state.error = "the inspection after the %s rung failed: %s" % (after_rung, snapshot.get("msg"))
            return
        state.last = snapshot
        state.inspections.append(_inspection(snapshot, after_rung))
        state.floor = max(state.floor, entry_floor(snapshot["verdict"]["rung"], self.options.rungs))

    def _module_args(self, *parts, **extra):
        args = dict(self.options.snapshot_args)
        args.update(self.options.action_args)
        for part in parts:
            args.update(part)
        args.update(extra)
        return args

    def _kill(self, snapshot, then_inspected=False):
        """gpu_kill on the kill targets of the snapshot, by pid and start time; None when there are none.
        `then_inspected`: the rung's next module takes its own snapshot under the lock, so gpu_kill's node after is read
        only when it fails (it returns it then) and is not taken otherwise."""
        targets = [dict((key, h[key]) for key in ("pid", "start_time"))
                   for h in kill_targets(snapshot, end_running_jobs=self.options.end_running_jobs)]
        if not targets:
            return None
        return self.execute(RUNG_MODULES["kill"], self._module_args(self.options.kill_args, holders=targets,
                                                                    wait_timeout=self.options.kill_wait_timeout,
                                                                    snapshot_after=not then_inspected))

    def _take_kill(self, snapshot):
        killed = self._kill(snapshot)
        if killed is None:
            return {"rung": "kill", "changed": False, "failed": False, "msg": "no holder to end", "plan": []}, snapshot
        return step_result("kill", killed, kill_plan_lines(killed, self.check_mode)), killed.get("snapshot_after")

    def _take_instance(self, snapshot):
        # The leftovers in the instance end first (the kill), then gpu_mig_recreate re-creates each MIG instance whose
        # memory no process in it accounts for; it refuses one someone is still in.
        killed = self._kill(snapshot, then_inspected=True) or {}
        kill_lines = kill_plan_lines(killed, self.check_mode)
        if killed.get("failed"):
            return step_result("instance", killed, kill_lines), killed.get("snapshot_after")
        recreated = self.execute(RUNG_MODULES["instance"], self._module_args())
        step = step_result("instance", recreated, unique_lines(kill_lines + list(recreated.get("plan") or [])))
        step["changed"] = step["changed"] or bool(killed.get("changed"))
        return step, recreated.get("snapshot_after")

    def _take_reset(self, snapshot):
        # A rung includes the lighter ones: the holders of memory end first, then gpu_reset ends what still blocks it
        # (in check mode the same holders again, as nothing ended) and resets.
        killed = self._kill(snapshot, then_inspected=True) or {}
        kill_lines = kill_plan_lines(killed, self.check_mode)
        if killed.get("failed"):
            return step_result("reset", killed, kill_lines), killed.get("snapshot_after")
        reset = self.execute(RUNG_MODULES["reset"], self._module_args(self.options.kill_args, kill_holders=True))
        plan = kill_lines + kill_plan_lines(reset.get("killed") or {}, self.check_mode) + reset_plan_lines(reset, self.check_mode)
        step = step_result("reset", reset, unique_lines(plan))
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
        allow_display = dict((name, self.options.kill_args[name]) for name in ("allow_display",) if name in self.options.kill_args)
        graphics = self.execute(RUNG_MODULES["graphics"], self._module_args(allow_display))
        return step_result("graphics", graphics, list(graphics.get("plan") or [])), graphics.get("snapshot_after")


def _inspection(snapshot, after_rung):
    """What the report keeps of each snapshot of the walk."""
    return {"after_rung": after_rung, "verdict_rung": snapshot["verdict"]["rung"],
            "kernel_log_source": snapshot.get("probes", {}).get("kernel_log", {}).get("source"),
            "held": memory_held(snapshot)}
