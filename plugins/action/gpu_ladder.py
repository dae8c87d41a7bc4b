# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_ladder: the walk up the ladder on the controller (plugin_utils/ladder/_ladder.py), running the modules on the node."""

from __future__ import annotations

import datetime

from ansible.errors import AnsibleActionFail
from ansible.utils.display import Display

from ansible_collections.gpuops.remediation.plugins.plugin_utils._action_base import ControllerAction
from ansible_collections.gpuops.remediation.plugins.plugin_utils.ladder._ladder import LadderWalk
from ansible_collections.gpuops.remediation.plugins.plugin_utils.ladder._ladder_decisions import (
    SLURM_STATES, hold_reason, host_fails, needs_controller_step, slurm_drain_state,
)
from ansible_collections.gpuops.remediation.plugins.plugin_utils.ladder._ladder_options import (
    WalkError, WalkOptions, check_options, platform_args, walk_argument_spec,
)

REQUIRED_SNAPSHOT_KEYS = ("gpus", "holders", "verdict")
display = Display()


def walk_run_id(given, state, now):
    """The run id every module of one walk names (the Slurm drain and its resume must name the same run): the given one;
    on a call that continues a walk, the one it started with; else a new one, gpu_reclaim-<UTC time>."""
    if given:
        return given
    if state and state.get("run_id"):
        return state["run_id"]
    return "gpu_reclaim-" + now.strftime("%Y%m%dT%H%M%S.%fZ")


class ActionModule(ControllerAction):
    FAILURES = (WalkError,)

    def argument_spec(self):
        return walk_argument_spec()

    def act(self, args, task_vars):
        args = platform_args(args)
        snapshot = args["snapshot"]
        missing = [key for key in REQUIRED_SNAPSHOT_KEYS if key not in snapshot]
        if snapshot and missing:
            raise AnsibleActionFail("snapshot: not a result of gpuops.remediation.gpu_holders_info (it has no %s)" % ", ".join(missing))

        args["run_id"] = walk_run_id(args.get("run_id"), args["state"] if args["continue_after"] else None,
                                     datetime.datetime.now(datetime.timezone.utc))
        walk_class, execute = self._platform(args, task_vars)
        # Each step's progress, as it starts and as it ends: Ansible's display (default verbosity; a job event under AWX).
        walk = walk_class(WalkOptions(args), execute, self._task.check_mode, task_vars.get("inventory_hostname"), say=display.display)
        steps_before = len(args["state"].get("tried") or []) if args["continue_after"] else 0  # changed: this call's own
        check_options(args)
        if args["continue_after"]:
            state = walk.continue_after(args["continue_after"], args["state"], args["controller_result"])
        else:
            state = walk.start(snapshot)
        state.run_id = args["run_id"]
        ended = state.pending is None
        followup = state.scheduler.followup if ended else None
        return dict(
            run_id=args["run_id"],
            changed=any(step["changed"] for step in state.tried[steps_before:]),
            pending=state.pending, pending_rung=state.pending_rung, modules_run=walk.modules_run,
            module_seconds=walk.module_seconds,
            slurm_drain_state=slurm_drain_state(state) if state.pending == "drain" else None,
            drain_followup=followup,
            needs_controller_step=needs_controller_step(state.pending, followup),
            slurm_state=SLURM_STATES.get(followup),
            hold_reason=hold_reason(state) if ended else None,
            outcome=state.outcome if ended else None,
            host_fails=host_fails(state.outcome) if ended else False,
            state=state.to_json(),
        )

    def _platform(self, args, task_vars):
        """The walk and how it runs a module: on Linux the collection's modules on the node; on Windows the Windows
        modules' work, from the controller, on the node the Windows switch gives (a real host or a simulated one)."""
        if args["platform"] == "windows":
            # only a Windows host walks the Windows ladder
            from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows._windows_walk import (  # pylint: disable=import-outside-toplevel
                WindowsWalk, windows_executor,
            )
            from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node._remote_node import (  # pylint: disable=import-outside-toplevel
                windows_node,
            )
            node = windows_node(self, task_vars)
            return WindowsWalk, windows_executor(node, self._task.check_mode, args["ghost_threshold_mib"])

        def execute(module_name, module_args):
            return self._execute_module(module_name=module_name, module_args=module_args, task_vars=task_vars)
        return LadderWalk, execute
