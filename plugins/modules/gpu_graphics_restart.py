#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_graphics_restart: restart the graphics stack (isolate multi-user.target, then graphical.target) to free GPU memory."""

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_graphics_restart
short_description: Restart the graphics stack (isolate multi-user.target, then graphical.target) to free GPU memory
version_added: 1.0.0
description:
  - The graphics rung of the ladder. Runs C(systemctl isolate multi-user.target), which stops the display manager
    and the display servers and sessions it started, then C(systemctl isolate graphical.target), which starts them
    again, and verifies with a new snapshot.
  - Runs only when the graphics stack holds a GPU (a display server or another graphics process, class
    V(graphics_session) in the snapshot) and the snapshot says memory is stuck on a GPU it holds (ghost memory, or
    a recovery action or Xid asking for a reset), or with O(force=true). A display server holding the GPU is
    expected on a desktop node and is no reason by itself. A second run changes nothing.
  - Does nothing, saying why, on a node whose C(graphical.target) is not active or where nothing holds a GPU through
    the graphics stack (a headless node), also with O(force=true).
  - Processes that do not hold a GPU through the graphics stack are left alone. A graphics process that outlives
    the restart (one that no unit of C(graphical.target) started) fails the module, naming it.
  - When the isolation of C(multi-user.target) fails, or the module is interrupted after it, goes back to
    C(graphical.target) all the same, and reports the state the node is left in (RV(node_state)).
  - Takes the node lock before its snapshot, so that a run that waited for another plans from the node as that one
    left it. Journals every isolation.
author:
  - gpuops maintainers (@gpuops)
extends_documentation_fragment:
  - gpuops.remediation.attributes
  - gpuops.remediation.attributes.ACTION_MODULE
  - gpuops.remediation.attributes.LINUX_GPU
  - gpuops.remediation.snapshot
  - gpuops.remediation.snapshot.ACTION
options:
  force:
    description:
      - Restart even when the snapshot shows no stuck memory on a GPU the graphics stack holds. Still does nothing on
        a node without an active C(graphical.target) or without a graphics process holding a GPU.
    type: bool
    default: false
  allow_display:
    description:
      - The restart ends the display server and logs its users' sessions off. Without O(allow_display=true), the module
        refuses (check mode too), naming the display manager and the graphics processes it would end, before anything
        changes.
    type: bool
    default: false
notes:
  - O(gpus) narrows the evidence to those GPUs; the restart itself is of the whole node's graphics stack, so with O(gpus)
    set it refuses, naming them, when a graphics holder that the restart ends holds a GPU outside those or is a client of
    the whole driver (only node-wide device files, such as an X server's C(/dev/nvidiactl)). Check mode refuses alike.
seealso:
  - module: gpuops.remediation.gpu_holders_info
  - module: gpuops.remediation.nvidia_driver_reload
  - module: gpuops.remediation.gpu_kill
"""

EXAMPLES = r"""
- name: Restart the graphics stack when the memory it holds is stuck
  gpuops.remediation.gpu_graphics_restart:
  register: graphics

- name: Show what a restart would do, although nothing asks for it
  gpuops.remediation.gpu_graphics_restart:
    force: true
  check_mode: true
  register: plan

- name: Restart the graphics stack, tracing the run in the journal
  gpuops.remediation.gpu_graphics_restart:
    force: true
    run_id: "{{ tower_job_id | default('manual') }}"
"""

RETURN = r"""
beyond_selection:
  description:
    - When O(gpus) is set and the restart is refused because it would end a graphics holder outside those GPUs, those
      holders (C(pid), C(start_time), C(name), C(gpus), C(devices), C(why) it would end, C(outside) the GPUs or the whole
      driver).
  returned: when refused for it
  type: list
  elements: dict
plan:
  description: The steps, in order, as argv lists joined for reading (in check mode, what would run); empty when nothing is needed.
  returned: always
  type: list
  elements: str
  sample: ["systemctl isolate multi-user.target", "systemctl isolate graphical.target"]
reason:
  description: Why the restart was needed, or why nothing was done.
  returned: always
  type: str
  sample: "3072 MiB of ghost memory on GPU 0"
node_state:
  description:
    - V(restarted), V(unchanged), or after a failure V(restored) (back on C(graphical.target)) or V(degraded) (see C(msg)).
  returned: always
  type: str
graphics_holders:
  description: The processes that held a GPU through the graphics stack before the restart.
  returned: always
  type: list
  elements: dict
  contains:
    pid: {description: "Process id.", type: int, returned: always}
    start_time: {description: "Start time in clock ticks since boot (its identity with the pid).", type: int, returned: always}
    name: {description: "Command name.", type: str, returned: always}
    gpus: {description: "Indexes of the GPUs it held.", type: list, elements: int, returned: always}
survivors:
  description: Graphics holders of before the restart that still ran after it (the same pid and start time).
  returned: when the restart ran
  type: list
  elements: dict
gpus:
  description: Used memory per GPU before and after.
  returned: always
  type: list
  elements: dict
  contains:
    index: {description: "GPU index.", type: int, returned: always}
    memory_used_mib_before: {description: "Used memory before.", type: int, returned: always}
    memory_used_mib_after: {description: "Used memory after (null in check mode and when nothing ran).", type: int, returned: always}
error:
  description: What failed (a systemctl isolate, a graphics process that outlived the restart).
  returned: on failure
  type: str
interrupted_actions:
  description:
    - Actions an earlier run announced in the journal and never finished (it was killed or its connection cut), each
      with C(ts), C(run_id), C(action) and, where the intent named them, C(unit), C(target), C(gpu). Reported once - this
      run writes their missing outcome, marked C(interrupted).
  returned: when there were any
  type: list
  elements: dict
restored_target:
  description: The systemd target an interrupted graphics restart left the node below, which this run isolated again.
  returned: when it did
  type: str
  sample: graphical.target
restored_units:
  description: GPU services an earlier, interrupted run had stopped and never started again, which this run started.
  returned: when there were any
  type: list
  elements: str
service_errors:
  description: The services of an earlier, interrupted run that could not be started again.
  returned: when one could not
  type: list
  elements: str
snapshot_after:
  description:
    - The node after this run, as M(gpuops.remediation.gpu_holders_info) with the same options returns it (its
      C(gpus), C(holders), C(verdict) and the rest), so that a caller walking the ladder need not inspect again.
  returned: success, not in check mode
  type: dict
journal:
  description: The journal lines this run wrote.
  returned: always
  type: list
  elements: dict
"""

from ansible_collections.gpuops.remediation.plugins.module_utils._payload_imports import compile_each_file_once

compile_each_file_once()  # before the collection's other imports: zipimport compiles each of them once

from ansible_collections.gpuops.remediation.plugins.module_utils._action import Remediation, action_argument_spec, memory_before_after
from ansible_collections.gpuops.remediation.plugins.module_utils._command import CommandRunner
from ansible_collections.gpuops.remediation.plugins.module_utils.kill._display import display_refusal
from ansible_collections.gpuops.remediation.plugins.module_utils._gpu_names import DISPLAY_MANAGER
from ansible_collections.gpuops.remediation.plugins.module_utils.kill._kill import beyond_selection, refuse_outside
from ansible_collections.gpuops.remediation.plugins.module_utils._module import GpuModule
from ansible_collections.gpuops.remediation.plugins.module_utils._verdict import NO_GPU_SELECTED, node_reset_evidence

GRAPHICAL = "graphical.target"
MULTI_USER = "multi-user.target"


def graphics_holders(snapshot):
    """The processes that hold a GPU through the graphics stack, as the result names them."""
    return [{"pid": h["pid"], "start_time": h["start_time"], "name": h.get("name"), "gpus": h["gpus"]}
            for h in snapshot["holders"] if h["class"] == "graphics_session"]


def restart_reason(snapshot, holders, selected, ghost_threshold_mib, force):
    """(why the restart is needed, None) or (None, why nothing is done), for a node on graphical.target."""
    if not holders:
        return None, "nothing to do: nothing holds a GPU through the graphics stack"
    held = set(index for holder in holders for index in holder["gpus"]) & set(selected)
    if force:
        return "force=true", None
    reason = node_reset_evidence(snapshot, ghost_threshold_mib, indexes=held)
    if reason:
        return reason, None
    return None, "nothing to do: the snapshot shows no stuck memory on a GPU the graphics stack holds (GPU %s)" % (
        ", ".join(str(index) for index in sorted(held)) or "none selected")


def survivors(before, after):
    """The holders of `before` that are still the same processes in the snapshot `after`."""
    alive = set((h["pid"], h["start_time"]) for h in after["holders"])
    return [holder for holder in before if (holder["pid"], holder["start_time"]) in alive]


class GraphicsRestartWorker:
    def __init__(self, module):
        self.module = module
        self.params = module.params
        self.run = Remediation(module)
        self.result = {"changed": False, "plan": [], "node_state": "unchanged", "graphics_holders": [], "gpus": [],
                       "journal": []}

    def execute(self):
        with self.run.acting():
            self._plan_and_act()
        self.run.report_restored(self.result)
        self.result["journal"] = self.run.journal.entries()
        if "error" in self.result:
            self.module.fail_json(msg="gpu_graphics_restart failed: %s; node state: %s" % (
                self.result["error"], self.result["node_state"]), **self.result)
        self.module.exit_json(**self.result)

    def _plan_and_act(self):
        snapshot = self.run.snapshot(gpus=None)
        holders = self.result["graphics_holders"] = graphics_holders(snapshot)
        self.result["gpus"] = memory_before_after(snapshot, None)
        systemctl = self.run.layout.command(self.module, "systemctl", required=True)
        # An empty selection selects nothing, force or not: the restart of the whole graphics stack is for no GPU.
        reason, why_not = (None, NO_GPU_SELECTED) if self.params["gpus"] == [] else self._reason(systemctl, snapshot, holders)
        self.result["reason"] = reason or why_not
        if self.params["gpus"] == []:
            self.result["msg"] = NO_GPU_SELECTED
        if not reason:
            if not self.module.check_mode:
                self.result["snapshot_after"] = self.run.snapshot_after(snapshot)
            return
        if self.params["gpus"] is not None:
            # The isolation ends the whole graphics stack: a run narrowed to some GPUs may not end a part of it elsewhere.
            # The display manager's main process is started again with graphical.target; what runs under it is not.
            restarted = set(pid for service in snapshot["services"] if service["unit"] == DISPLAY_MANAGER for pid in service["pids"])
            ended = [dict(h, why="ended with the graphics stack (systemctl isolate %s)" % MULTI_USER)
                     for h in snapshot["holders"] if h["class"] == "graphics_session" and h["pid"] not in restarted]
            refuse_outside(self.module, beyond_selection(ended, self.run.selected_gpus(snapshot)), self.run.selected_gpus(snapshot))
        refused = display_refusal("gpu_graphics_restart", "systemctl isolate %s" % MULTI_USER, snapshot, self.params["allow_display"])
        if refused:
            self.module.fail_json(msg=refused, changed=False, graphics_holders=holders, journal=self.run.journal.entries())
        self.result["changed"] = True
        self.result["plan"] = ["systemctl isolate %s" % MULTI_USER, "systemctl isolate %s" % GRAPHICAL]
        self.result["diff"] = {"before": {"graphics_holders": [h["pid"] for h in holders]}, "after": {"graphics_holders": []}}
        if self.module.check_mode:
            self.result["node_state"] = "restarted"
            return
        self._restart(systemctl)
        self._verify(snapshot, holders)

    def _reason(self, systemctl, snapshot, holders):
        rc, out, dummy = CommandRunner(self.module).probe([systemctl, "is-active", GRAPHICAL])
        if out.strip() != "active":
            return None, "nothing to do: %s is not active (systemctl is-active said %r, rc %d), there is no graphics stack " \
                         "to restart" % (GRAPHICAL, out.strip(), rc)
        return restart_reason(snapshot, holders, self.run.selected_gpus(snapshot), self.params["ghost_threshold_mib"],
                              self.params["force"])

    def _isolate(self, systemctl, target):
        """Whether `systemctl isolate target` went through; journalled, and its failure kept as the run's error."""
        rc, dummy, err = CommandRunner(self.module, self.run.journal).act([systemctl, "isolate", target], "systemctl_isolate",
                                                                          journal_argv=False, target=target)
        if rc != 0:
            self.result.setdefault("error", "systemctl isolate %s failed (rc %d): %s" % (target, rc, err.strip()))
        return rc == 0

    def _restart(self, systemctl):
        """Down to multi-user.target and back; back to graphical.target also after a failure or an interruption."""
        went_down = False
        try:
            went_down = self._isolate(systemctl, MULTI_USER)
        finally:
            back = self._isolate(systemctl, GRAPHICAL)
        if went_down and back:
            self.result["node_state"] = "restarted"
        else:
            self.result["node_state"] = "restored" if back else "degraded"
            # The isolation may have stopped part of the stack before it failed: the node was touched.
            self.result["changed"] = went_down or back

    def _verify(self, before, holders):
        after = self.run.snapshot(gpus=None)
        self.result["snapshot_after"] = self.run.snapshot_after(after)
        self.result["gpus"] = memory_before_after(before, after)
        left = self.result["survivors"] = survivors(holders, after)
        if left and "error" not in self.result:
            self.result["node_state"] = "degraded"
            self.result["error"] = "the restart did not end %s: no unit of %s started it" % (
                ", ".join("pid %s (%s)" % (h["pid"], h["name"]) for h in left), GRAPHICAL)


def main():
    module = GpuModule(
        argument_spec=action_argument_spec(
            force=dict(type="bool", default=False),
            allow_display=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    GraphicsRestartWorker(module).execute()


if __name__ == "__main__":
    main()
