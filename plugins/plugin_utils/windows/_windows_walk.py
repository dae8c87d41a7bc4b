# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Windows ladder: the same walk (_ladder.LadderWalk: plan, pause, outcome, report), the Windows rungs and probes.

kill (win_gpu_reset method=kill on the compute holders, by pid and creation time), wsl (wsl_shutdown gpu_holders: the
connecting user's distributions that hold the GPU, then their WSL VM only if it still holds GPU memory; _verdict.wsl_plan),
restart_adapter (win_gpu_reset
method=restart_adapter on the stuck GPUs' adapters), logoff (win_gpu_reset method=logoff of the users whose session's
system processes hold the GPU), reboot (the controller's: ansible.windows.win_reboot in the role). The modules are the
collection's Windows action plugins; on the controller their work is plain functions of a Windows node (_remote_node),
which windows_executor() offers the walk under the modules' names.
"""

from __future__ import annotations

from ansible_collections.gpuops.remediation.plugins.module_utils._verdict import VM_CLASS, kill_targets, wsl_plan, wsl_targets
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node import _node_journal
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.tools import _cim_processes
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.protect import _who_may_end
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows import _node_snapshot
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.rungs import _wsl_shutdown
from ansible_collections.gpuops.remediation.plugins.plugin_utils.ladder._ladder import LadderWalk
from ansible_collections.gpuops.remediation.plugins.plugin_utils.ladder._ladder_outcome import step_result
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node._remote_node import WindowsNodeError

INSPECT_MODULE = "gpuops.remediation.win_gpu_holders_info"
RESET_MODULE = "gpuops.remediation.win_gpu_reset"
WSL_MODULE = "gpuops.remediation.wsl_shutdown"


def logoff_users(snapshot):
    """The users whose session's system processes hold a GPU (a logoff ends them); session 0 only a reboot answers."""
    # DOMAIN\user where the session API named the domain: CORP\ada's session is not the local ada's
    by_session = dict((session.get("id"), "%s\\%s" % (session["domain"], session.get("user")) if session.get("domain") and session.get("user")
                       else session.get("user")) for session in snapshot.get("sessions") or [])
    users = []
    for holder in snapshot["holders"]:
        user = by_session.get(holder.get("session_id"))
        if holder["gpus"] and holder["class"] == "system" and holder.get("session_id") and user and user not in users:
            users.append(user)
    return users


def windows_executor(node, check_mode, ghost_threshold_mib):
    """execute(module_name, module_args) for the walk: the Windows modules' work, run on `node`; a failure is a result.
    execute.node is the node (the walk writes the reboot's journal lines there)."""
    def reset(args):
        from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.rungs import _reset_dispatch  # the kill, adapter and logoff rungs
        return _reset_dispatch.run(node, args, check_mode)

    runners = {
        INSPECT_MODULE: lambda args: _node_snapshot.take(node, ghost_threshold_mib=args.get("ghost_threshold_mib", ghost_threshold_mib),
                                                         journal_path=args.get("journal_path")),
        RESET_MODULE: reset,
        WSL_MODULE: lambda args: _wsl_shutdown.stop(node, args.get("distribution"), check_mode, args.get("journal_path"), args.get("run_id"),
                                                    gpu_holders=bool(args.get("gpu_holders"))),
    }

    def execute(module_name, module_args):
        try:
            return runners[module_name](module_args)
        except (ValueError, WindowsNodeError) as exc:
            return {"failed": True, "changed": False, "msg": "%s: %s" % (module_name.rsplit(".", 1)[-1], exc)}
    execute.node = node
    return execute


def protected_split(holders, kill_args):
    """(holders the kill may end, [(holder, why) left alone]) by _who_may_end.refusal, the one rule of who may be
    ended (the shell is the kill rung's through restart_explorer, so it is not refused here)."""
    policy = _who_may_end.Policy.from_args(kill_args, allow_shell=True)
    ends, left = [], []
    for holder in holders:
        why = _who_may_end.refusal(holder, policy)
        if why:
            left.append((holder, why))
        else:
            ends.append(holder)
    return ends, left


def is_shell(holder):
    """Whether the kill rung hands this holder to restart_explorer: the user's shell by its image path
    (_cim_processes.is_shell); one that cannot be told (None) goes there too, where the one refusal leaves it."""
    return _cim_processes.is_shell(holder) is not False


def merged_step(rung, steps):
    """One rung's record from several module runs ((step, snapshot_after) each), and the last snapshot after them."""
    failed = [step for step, dummy in steps if step["failed"]]
    merged = {"rung": rung, "changed": any(step["changed"] for step, dummy in steps), "failed": bool(failed),
              "msg": "; ".join(step["msg"] for step in failed), "plan": [line for step, dummy in steps for line in step["plan"]]}
    return merged, steps[-1][1]


class WindowsWalk(LadderWalk):
    """The walk on the Windows ladder."""

    def _journal_args(self):
        """The node journal's options of the walk (journal_path, run_id), for every Windows module it runs."""
        return dict((name, self.options.action_args[name]) for name in ("journal_path", "run_id") if name in self.options.action_args)

    def _journal(self):
        return _node_journal.WindowsJournal(self._execute.node, **self._journal_args())

    def inspect(self):
        return self.execute(INSPECT_MODULE, dict(self._journal_args(), ghost_threshold_mib=self.options.snapshot_args.get("ghost_threshold_mib", 256)))

    def _climb(self, state):
        # The reboot is the controller's (ansible.windows.win_reboot in the role): its intent line is written here, when
        # the walk pauses for it, and its outcome when the walk goes on after it.
        state = super()._climb(state)
        if state.pending == "reboot" and not self.check_mode:
            journal = self._journal()
            journal.intent("reboot", reason="the walk reached the reboot rung", gpus=[g["index"] for g in state.last["gpus"]])
            state.reboot_journal = journal.entries()[-1]
        return state

    def _after_reboot(self, state, reboot):
        intent, state.reboot_journal = state.reboot_journal, None
        if intent is not None:
            journal = self._journal()
            journal.resume(intent)
            journal.outcome(intent["id"], not reboot.get("failed"), rebooted=bool(reboot.get("rebooted")),
                            error=reboot.get("msg") if reboot.get("failed") else None)
        return super()._after_reboot(state, reboot)

    def _reset(self, rung, method, **args):
        result = self.execute(RESET_MODULE, dict(args, method=method, **self._journal_args()))
        return step_result(rung, result, list(result.get("plan") or [])), result.get("snapshot_after")

    def rung_takers(self):
        return {"kill": self._take_kill, "wsl": self._take_wsl, "restart_adapter": self._take_restart_adapter, "logoff": self._take_logoff}

    def _take_kill(self, snapshot):
        # explorer.exe is the user's shell: ending it with /T would end everything started from it, so its hold is
        # ended by restarting the shell alone (win_gpu_reset method=restart_explorer), the others with their trees.
        holders, left = protected_split(kill_targets(snapshot, "windows"), self.options.kill_args)
        left_lines = ["left pid %s %s: %s" % (h["pid"], h.get("name") or "", why) for h, why in left]
        protect = dict((name, self.options.kill_args[name]) for name in ("protect_names", "protect_users", "allow_daemons")
                       if self.options.kill_args.get(name))
        targets = [{"pid": h["pid"], "creation_time_ms": h["creation_time_ms"]} for h in holders if not is_shell(h)]
        shells = sorted(set(h.get("user") for h in holders if is_shell(h) and h.get("user")))
        if not targets and not shells:
            return {"rung": "kill", "changed": False, "failed": False, "msg": "no holder to end", "plan": left_lines}, snapshot
        steps = ([self._reset("kill", "kill", holders=targets, **protect)] if targets else [])
        steps += [self._reset("kill", "restart_explorer", user=user, allow_dwm=self._allow_desktop(), **protect) for user in shells]
        step, after = merged_step("kill", steps)
        step["plan"] = left_lines + step["plan"]
        return step, after

    def _lighter_first(self, snapshot, rungs):
        """A rung includes the lighter ones, as on Linux (the reset ends the holders first): the walk can enter above
        them (a WSL VM makes the verdict wsl while a job holds the GPU too), and what they would end must not be left
        to a heavier rung. -> [(step, snapshot_after)] of those that did or planned something, the failed one last."""
        steps = []
        for take in rungs:
            step, after = take(snapshot)
            if step["changed"] or step["failed"] or step["plan"]:
                steps.append((step, after))
            if step["failed"]:
                break
        return steps

    def _wsl_step(self, snapshot):
        # Only what holds the GPU is stopped (_verdict.wsl_plan, the one decision): a distribution holding nothing gives
        # nothing back, and stopping it would end someone's work for nothing; another VM's memory is never WSL's.
        decided = wsl_plan(snapshot)
        if not decided["terminate"] and not decided["shutdown"]:
            return {"rung": "wsl", "changed": False, "failed": False, "msg": decided["reason"], "plan": list(decided["left"])}, snapshot
        result = self.execute(WSL_MODULE, dict(self._journal_args(), gpu_holders=True))
        verb = "would stop" if self.check_mode else "stopped"
        plan = list(result.get("left") or decided["left"])
        plan += ["%s WSL distribution %s" % (verb, name) for name in result.get("stopped") or []]
        plan += ["%s: %s" % ("would run" if self.check_mode else "ran", " ".join(argv)) for argv in result.get("commands") or []]
        if result.get("skipped"):
            plan.append("skipped: %s" % result.get("skip_reason"))  # the plan keeps it: a merged step keeps failed msgs only
            result = dict(result, msg=result.get("skip_reason"))
        elif result.get("reason") and result.get("commands"):
            plan.append(result["reason"])
        return step_result("wsl", result, plan), result.get("snapshot_after")

    def _wsl_refusal(self, snapshot):
        """The wsl rung takes the GPU from the user whose WSL VM it stops: refused, naming them, where the caller
        protects that user (_who_may_end.caller_refusal, the one rule), before any lighter step runs."""
        policy = _who_may_end.Policy.from_args(self.options.kill_args)
        user = (snapshot.get("wsl") or {}).get("user")
        for vm in wsl_targets(snapshot):
            if vm.get("wsl_mine") is False:
                continue
            why = _who_may_end.caller_refusal(dict(vm, user=vm.get("wsl_owner") or user), policy)
            if why:
                return {"rung": "wsl", "changed": False, "failed": True, "plan": [],
                        "msg": "refused: the wsl rung would stop the WSL distributions of a protected user: pid %s (%s, %s)" % (
                            vm["pid"], vm.get("name"), why)}, snapshot
        return None

    def _take_wsl(self, snapshot):
        refused = self._wsl_refusal(snapshot)
        if refused:
            return refused
        steps = self._lighter_first(snapshot, [self._take_kill])
        if steps and steps[-1][0]["failed"]:
            return merged_step("wsl", steps)
        return merged_step("wsl", steps + [self._wsl_step(snapshot)])

    def _refused_for_protected(self, rung, snapshot):
        """A heavier rung would take the GPU from a protected process too: refused, naming it, as on Linux. An adapter
        restart takes it from every holder, so a holder the caller protects is counted whatever its class (an
        application that only draws, too); the system's own processes (dwm, csrss) are that rung's business."""
        dummy, left = protected_split(kill_targets(snapshot, "windows"), self.options.kill_args)
        if rung == "restart_adapter":
            policy = _who_may_end.Policy.from_args(self.options.kill_args)
            seen = set(h["pid"] for h, dummy in left)
            # a WSL VM's hold is its user's (the VM process runs as the VM's own account)
            left += [(h, why) for h, why in ((h, _who_may_end.caller_refusal(dict(h, user=h.get("wsl_owner") or h.get("user")), policy))
                                             for h in snapshot["holders"] if h["gpus"] and h["pid"] not in seen) if why]
        if not left:
            return None
        names = ", ".join("pid %s (%s, %s)" % (h["pid"], h.get("name"), why) for h, why in left)
        return {"rung": rung, "changed": False, "failed": True, "plan": [],
                "msg": "refused: the %s rung would take the GPU from protected processes too: %s" % (rung, names)}, snapshot

    def _refused_for_running_vms(self, snapshot):
        """An adapter restart takes the GPU from a running virtual machine (a Hyper-V VM's vmmem, class vm) too: a
        running workload, refused unless end_running_jobs, naming it, before any lighter step runs."""
        vms = [h for h in snapshot["holders"] if h["gpus"] and h["class"] == VM_CLASS]
        if not vms or self.options.end_running_jobs:
            return None
        names = ", ".join("pid %s (%s, VM %s)" % (h["pid"], h.get("name"), h.get("vm_id") or "id not known") for h in vms)
        return {"rung": "restart_adapter", "changed": False, "failed": True, "plan": [],
                "msg": "refused: the restart_adapter rung would take the GPU from running virtual machines too: %s; "
                       "end_running_jobs would allow it" % names}, snapshot

    def _take_restart_adapter(self, snapshot):
        refused = self._refused_for_protected("restart_adapter", snapshot) or self._refused_for_running_vms(snapshot)
        if refused:
            return refused
        steps = self._lighter_first(snapshot, [self._take_kill, self._wsl_step])
        if steps and steps[-1][0]["failed"]:
            return merged_step("restart_adapter", steps)
        return merged_step("restart_adapter", steps + [self._reset("restart_adapter", "restart_adapter")])

    def _take_logoff(self, snapshot):
        refused = self._refused_for_protected("logoff", snapshot)
        if refused:
            return refused
        users = logoff_users(snapshot)
        if not users:
            return {"rung": "logoff", "changed": False, "failed": False, "msg": "no user session holds a GPU", "plan": []}, snapshot
        protect = dict((name, self.options.kill_args[name]) for name in ("protect_names", "protect_users") if self.options.kill_args.get(name))
        return merged_step("logoff", [self._reset("logoff", "logoff", user=user, allow_dwm=self._allow_desktop(), **protect) for user in users])

    def _allow_desktop(self):
        """allow_display (gpu_reclaim_allow_display): what lets a logoff or a restart of the shell end a user's desktop,
        win_gpu_reset's allow_dwm."""
        return bool(self.options.kill_args.get("allow_display"))
