#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""nvidia_driver_reload: unload and reload the NVIDIA kernel modules to free stuck GPU memory."""

from __future__ import annotations

DOCUMENTATION = r"""
module: nvidia_driver_reload
short_description: Unload and reload the NVIDIA kernel modules to free stuck GPU memory
version_added: 1.0.0
description:
  - Plans from a snapshot and the full module table (C(/proc/modules), read under the
    O(probe_timeout) deadline), then stops the display manager and the GPU daemons that run, waits (up to
    O(grace), each scan of C(/proc) under the O(probe_timeout) deadline) until no process holds the devices,
    unloads every loaded module that uses an NVIDIA module (such as C(gdrdrv), C(nvidia_fs)), users of users
    first, then C(nvidia_peermem), C(nvidia_drm), C(nvidia_modeset), C(nvidia_uvm) and C(nvidia) (those loaded),
    loads them all back in reverse order with the C(nvidia_drm) modeset that was set before, starts again
    exactly the services that ran before, and verifies with a new snapshot.
  - Stopping the display manager ends the display server and logs its users' sessions off, so while
    C(display-manager.service) runs, refuses, naming it and O(allow_display), unless O(allow_display=true)
    (check mode refuses alike).
  - Refuses, naming them, while processes other than the daemons and the display server hold the devices, unless
    O(kill_holders=true), which ends them through the same safe path as M(gpuops.remediation.gpu_kill).
  - On any failure, loads back what it unloaded and starts what it stopped, and reports the state the node is
    left in (RV(node_state)). A failed run that changed the node (stopped a service, unloaded a module, ended a
    holder) reports C(changed=true), even when everything was restored.
  - To restart the graphics stack instead (C(systemctl isolate multi-user.target), then back), use
    M(gpuops.remediation.gpu_graphics_restart).
  - Takes the node lock before its snapshot, so that a run that waited for another plans from the node as that one
    left it.
  - Runs only when the snapshot says a reload is needed (ghost memory, or a recovery action or Xid asking for a
    reset), unless O(force=true); a display server holding the GPU is expected on a desktop node and is no reason by
    itself. A second run changes nothing.
author:
  - gpuops maintainers (@gpuops)
extends_documentation_fragment:
  - gpuops.remediation.attributes
  - gpuops.remediation.attributes.ACTION_MODULE
  - gpuops.remediation.attributes.LINUX_GPU
  - gpuops.remediation.snapshot
  - gpuops.remediation.snapshot.ACTION
  - gpuops.remediation.kill
options:
  force:
    description:
      - Reload even when the snapshot says nothing needs it.
    type: bool
    default: false
  kill_holders:
    description:
      - End the processes that hold the devices first, through the same path and with the same options as
        M(gpuops.remediation.gpu_kill) (O(signals), O(grace), O(containers), the protect lists, zombies through their
        parent). Without it, the module refuses while they run; it also refuses, naming them, when a holder cannot
        be ended.
      - O(grace) is also how long to wait for a stopped service's processes to go.
      - With O(gpus) set, the run is narrowed to those GPUs, and it refuses, naming them, to end a holder that holds none of
        them or holds another GPU too (a job on another GPU or an NVLink peer, a client of the whole driver, the parent
        of a zombie, a process of a container to stop). Leave O(gpus) out (every GPU) to allow it.
    type: bool
    default: false
seealso:
  - module: gpuops.remediation.gpu_holders_info
  - module: gpuops.remediation.gpu_reset
  - module: gpuops.remediation.gpu_graphics_restart
"""

EXAMPLES = r"""
- name: Reload the driver when a reset did not free the memory
  gpuops.remediation.nvidia_driver_reload:

- name: Show what a reload would do
  gpuops.remediation.nvidia_driver_reload:
    force: true
  check_mode: true
  register: plan
"""

RETURN = r"""
beyond_selection:
  description:
    - When O(gpus) is set and the run is refused because ending what blocks it would end a process outside those GPUs,
      those processes (C(pid), C(start_time), C(name), C(gpus), C(devices), C(why) it would end, C(outside) the GPUs or
      the whole driver).
  returned: when refused for it
  type: list
  elements: dict
plan:
  description: The steps, in order, as argv lists joined for reading (in check mode, what would run).
  returned: always
  type: list
  elements: str
  sample: ["systemctl stop nvidia-persistenced.service", "modprobe -r nvidia_uvm", "modprobe nvidia_uvm"]
reason:
  description: Why the reload was needed, or why nothing was done.
  returned: always
  type: str
modules_unloaded:
  description: Modules unloaded, in order.
  returned: always
  type: list
  elements: str
modules_loaded:
  description: Modules loaded back, in order.
  returned: always
  type: list
  elements: str
services_stopped:
  description: Units stopped.
  returned: always
  type: list
  elements: str
services_started:
  description: Units started again.
  returned: always
  type: list
  elements: str
killed:
  description:
    - What O(kill_holders) did, as M(gpuops.remediation.gpu_kill) reports it (C(signalled), C(left_alone), C(zombies),
      C(containers), C(unconfirmed_containers), C(thawed)).
  returned: when kill_holders is true
  type: dict
node_state:
  description: "V(reloaded), V(unchanged), or after a failure V(restored) (everything as before) or V(degraded) (see C(msg))."
  returned: always
  type: str
gpus:
  description: Used memory per GPU before and after.
  returned: always
  type: list
  elements: dict
error:
  description: What failed (a modprobe, a service that would not stop).
  returned: on failure
  type: str
recovery_problems:
  description: The modules that could not be loaded back after a failure, with modprobe's message.
  returned: after a failed module reload
  type: list
  elements: str
service_errors:
  description: The services that could not be started again.
  returned: when one could not
  type: list
  elements: str
mig_layout:
  description:
    - The MIG layout of the GPUs with MIG mode on, which a reload loses (MIG stays on, no instance is left); journaled
      before, created again after the modules are loaded, read back, as M(gpuops.remediation.gpu_reset) returns it. A
      layout not restored makes the node state C(degraded) and fails the module, naming what is missing. A GPU whose
      MIG mode change is pending refuses the reload (it would apply the change).
  returned: when a GPU has MIG mode on
  type: dict
restored_mig_layouts:
  description: The MIG layouts an interrupted run recorded and never restored, which this run restored.
  returned: when there were any
  type: list
  elements: dict
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
snapshot_after:
  description:
    - The node after this run, as M(gpuops.remediation.gpu_holders_info) with the same options returns it (its
      C(gpus), C(holders), C(verdict) and the rest), so that a caller walking the ladder need not inspect again.
  returned: not in check mode, also when the reload failed after it began
  type: dict
journal:
  description: The journal lines this run wrote.
  returned: always
  type: list
  elements: dict
"""

from ansible_collections.gpuops.remediation.plugins.module_utils._payload_imports import compile_each_file_once

compile_each_file_once()  # before the collection's other imports: zipimport compiles each of them once

from ansible_collections.gpuops.remediation.plugins.module_utils._mig_selection import refuse_whole_gpu_action
from ansible_collections.gpuops.remediation.plugins.module_utils._action import Remediation, action_argument_spec, memory_before_after
from ansible_collections.gpuops.remediation.plugins.module_utils._command import CommandRunner
from ansible_collections.gpuops.remediation.plugins.module_utils._gpu_names import DISPLAY_MANAGER, GPU_SERVICE_UNITS
from ansible_collections.gpuops.remediation.plugins.module_utils.kill._display import display_refusal
from ansible_collections.gpuops.remediation.plugins.module_utils._mig_keeper import MigLayoutError, keeper_for, planned, refuse_pending, restore_into
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._deadline import ProbeFailed, ProbeTimeout, run_with_deadline
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._kmod import parse_modprobe_error, parse_proc_modules, unload_plan
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._procscan import scan_processes
from ansible_collections.gpuops.remediation.plugins.module_utils._services import GpuServices, ServiceError
from ansible_collections.gpuops.remediation.plugins.module_utils._argument_specs import KILL_ARGUMENT_SPEC
from ansible_collections.gpuops.remediation.plugins.module_utils.kill._kill import (
    KILL_RESULT_KEYS, HolderKiller, acted, refuse_beyond_selection, still_holding, validate_kill_params,
)
from ansible_collections.gpuops.remediation.plugins.module_utils._module import GpuModule
from ansible_collections.gpuops.remediation.plugins.module_utils._verdict import NO_GPU_SELECTED, node_reset_evidence


class ReloadFailed(Exception):
    pass


def read_module_table(path):
    """Every loaded module of the kernel (parse_proc_modules of `path`, /proc/modules on a real node)."""
    with open(path) as handle:
        return parse_proc_modules(handle.read())


def load_argv(modprobe, name, modeset):
    argv = [modprobe, name]
    if name == "nvidia_drm" and modeset in ("Y", "1"):
        argv.append("modeset=1")
    return argv


class DriverReloadWorker:
    def __init__(self, module):
        self.module = module
        self.params = module.params
        self.run = Remediation(module)
        self.layout = self.run.layout
        self._snapshot = None
        self.result = {"changed": False, "plan": [], "modules_unloaded": [], "modules_loaded": [], "services_stopped": [],
                       "services_started": [], "node_state": "unchanged", "gpus": [], "journal": []}

    def _blockers(self, snapshot, units):
        """Holders that stopping `units` will not end."""
        display_stopped = DISPLAY_MANAGER in units
        return [h for h in snapshot["holders"]
                if not (h["class"] == "gpu_daemon" or (h["class"] == "graphics_session" and display_stopped))]

    def _refuse_held(self, blockers):
        if blockers and not self.params["kill_holders"]:
            names = ", ".join("pid %s (%s, %s)" % (h["pid"], h.get("name"), h["class"]) for h in blockers)
            self.module.fail_json(msg="nvidia_driver_reload refused: the devices are held by %s; end them first "
                                      "(gpuops.remediation.gpu_kill) or set kill_holders=true" % names, changed=False)

    def _refuse_or_kill(self, blockers):
        if not blockers:
            return
        self._refuse_held(blockers)
        killer = HolderKiller(self.module, self.run.journal)
        refuse_beyond_selection(self.module, killer, blockers, self._snapshot, self.run.selected_gpus(self._snapshot))
        # Refuse before any signal when some holder would survive: ending the others would be for nothing.
        self._refuse_survivors(killer.end(blockers, predict_only=True), blockers, changed=False)
        if not self.module.check_mode:
            killed = killer.end(blockers)
            self._refuse_survivors(killed, blockers, changed=killed["changed"])

    def _refuse_survivors(self, killed, blockers, changed):
        self.result["killed"] = dict((key, killed[key]) for key in KILL_RESULT_KEYS)
        left = still_holding(killed, blockers)
        if left:
            self.result["changed"] = changed
            self.module.fail_json(msg="nvidia_driver_reload refused: these holders cannot be ended safely: %s" % ", ".join(
                "pid %s (%s)" % (h["pid"], h["reason"]) for h in left), **self.result)

    def execute(self):
        with self.run.acting():
            self._plan_and_act()
        self.run.report_restored(self.result)
        self.result["journal"] = self.run.journal.entries()
        if not self.module.check_mode and "snapshot_after" not in self.result:
            self.result["snapshot_after"] = self.run.snapshot_after(self._snapshot)
        self.module.exit_json(**self.result)

    def _plan_and_act(self):
        snapshot = self._snapshot = self.run.snapshot(gpus=None)
        refuse_whole_gpu_action(self.module, snapshot["gpus"], "a driver reload")
        if self.params["gpus"] == []:
            # An empty selection selects nothing: the reload of the whole driver is for no GPU.
            self.result["msg"] = self.result["reason"] = NO_GPU_SELECTED
            return
        reason = node_reset_evidence(snapshot, self.params["ghost_threshold_mib"])
        if self.params["force"]:
            reason = "force=true"
        self.result["reason"] = reason or "nothing to do: the snapshot shows no memory a driver reload would free"
        if reason:
            self.result["changed"] = True
            self._modules(snapshot)

    def _systemctl_plan(self, verb, units):
        return ["systemctl %s %s" % (verb, unit) for unit in units]

    def _module_table(self):
        """The full module table, read in a child under the probe deadline; fails the module, changing nothing."""
        path = self.layout.modules_file
        try:
            return run_with_deadline(lambda: read_module_table(path), self.params["probe_timeout"])
        except (ProbeTimeout, ProbeFailed) as exc:
            self.module.fail_json(msg="nvidia_driver_reload: cannot read the module table %s: %s" % (path, exc), changed=False)
        return None

    def _modules(self, snapshot):
        driver = snapshot["driver"]
        unload = unload_plan(self._module_table())
        load = list(reversed(unload))
        services = GpuServices(self.module, self.layout, self.run.journal)
        units = services.active(GPU_SERVICE_UNITS)
        modprobe = self.layout.command(self.module, "modprobe", required=True)
        unload_steps = ["modprobe -r %s" % name for name in unload]
        load_steps = [" ".join(load_argv("modprobe", name, driver.get("nvidia_drm_modeset"))) for name in load]
        self.result["plan"] = self._systemctl_plan("stop", units) + unload_steps + load_steps + self._systemctl_plan("start", reversed(units))
        self.result["diff"] = {"before": {"modules": sorted(unload), "ghost_mib": self._ghost(snapshot)},
                               "after": {"modules": sorted(unload), "ghost_mib": dict((k, 0) for k in self._ghost(snapshot))}}
        blockers = self._blockers(snapshot, units)
        self._refuse_held(blockers)
        refuse_pending(self.module, snapshot, "nvidia_driver_reload")
        keeper = keeper_for(self.module, self.layout, self.run.journal, snapshot, [gpu["index"] for gpu in snapshot["gpus"]])
        # A display server without a display manager (startx: a graphics-only context) would be ended with the holders.
        graphics = [h for h in blockers if h["class"] == "graphics_session"]
        if DISPLAY_MANAGER in units or graphics:
            step = "stopping %s" % DISPLAY_MANAGER if DISPLAY_MANAGER in units else "ending the graphics processes that hold the devices"
            refused = display_refusal("nvidia_driver_reload", step, snapshot, self.params["allow_display"])
            if refused:
                self.module.fail_json(msg=refused, changed=False, plan=self.result["plan"])
        self._refuse_or_kill(blockers)
        if self.module.check_mode:
            self.result.update(modules_unloaded=unload, modules_loaded=load, services_stopped=units,
                               services_started=list(reversed(units)), node_state="reloaded")
            if keeper:
                self.result["mig_layout"] = self._mig_or_fail(planned, keeper)
            return
        if keeper:
            self._mig_or_fail(lambda each: each.record(each.gpus), keeper)
        try:
            services.stop(units)
            self._wait_devices_free()
            self._unload(modprobe, unload)
            self._load(modprobe, load, driver.get("nvidia_drm_modeset"))
            self.result["node_state"] = "reloaded"
        except (ReloadFailed, ServiceError) as exc:
            self._recover(modprobe, driver.get("nvidia_drm_modeset"), services, str(exc))
        finally:
            report = restore_into(keeper, self.result)
            if report and not report["ok"]:
                self.result["node_state"] = "degraded"
            self.result["services_stopped"] = list(services.stopped)
            started, errors = services.restore()
            self.result["services_started"] = started
            if errors:
                self.result["node_state"] = "degraded"
                self.result["service_errors"] = errors
        self._verify(snapshot)

    def _mig_or_fail(self, step, keeper):
        """step(keeper) (reading the MIG layout before the reload), or the module failed, changing nothing."""
        try:
            return step(keeper)
        except MigLayoutError as exc:
            self.module.fail_json(msg="nvidia_driver_reload refused: %s; without the MIG layout it could not be restored" % exc,
                                  changed=bool(self.result.get("killed") and acted(self.result["killed"])))
        return None

    def _ghost(self, snapshot):
        return dict(("GPU %s" % g["index"], g.get("unattributed_mib")) for g in snapshot["gpus"])

    def _wait_devices_free(self):
        """Until no process holds a device, for up to grace seconds; each scan is the snapshot's, under its deadline."""
        import time  # pylint: disable=import-outside-toplevel
        deadline = time.monotonic() + self.params["grace"]
        while True:
            holders, report = scan_processes(self.layout, self.params["probe_timeout"])
            if not report["ok"]:
                raise ReloadFailed("after stopping the services, the scan of /proc failed: %s" % report["error"])
            if not holders:
                return
            if time.monotonic() > deadline:
                raise ReloadFailed("after stopping the services, still holding the devices: %s" % ", ".join(
                    "pid %s (%s)" % (pid, h["name"]) for pid, h in sorted(holders.items())))
            time.sleep(0.2)

    def _modprobe(self, action, argv, name):
        return CommandRunner(self.module, self.run.journal).act(argv, action, module=name)

    def _unload(self, modprobe, names):
        for name in names:
            rc, dummy, err = self._modprobe("module_unload", [modprobe, "-r", name], name)
            if rc != 0:
                error = parse_modprobe_error(err)
                raise ReloadFailed("modprobe -r %s failed (%s): %s" % (name, error["reason"], error["message"] or err.strip()))
            self.result["modules_unloaded"].append(name)

    def _load(self, modprobe, names, modeset):
        for name in names:
            rc, dummy, err = self._modprobe("module_load", load_argv(modprobe, name, modeset), name)
            if rc != 0:
                raise ReloadFailed("modprobe %s failed: %s" % (name, err.strip()))
            self.result["modules_loaded"].append(name)

    def _recover(self, modprobe, modeset, services, error):
        """Load back what was unloaded; the caller starts the services again."""
        missing = [name for name in reversed(self.result["modules_unloaded"]) if name not in self.result["modules_loaded"]]
        problems = []
        for name in missing:
            rc, dummy, err = self._modprobe("module_load", load_argv(modprobe, name, modeset), name)
            if rc == 0:
                self.result["modules_loaded"].append(name)
            else:
                problems.append("modprobe %s: %s" % (name, err.strip()))
        self.result["node_state"] = "degraded" if problems else "restored"
        self.result["error"] = error
        self.result["recovery_problems"] = problems

    def _verify(self, before):
        after = self.run.snapshot(gpus=None)
        self.result["snapshot_after"] = self.run.snapshot_after(after)
        self.result["gpus"] = memory_before_after(before, after)
        if self.result["node_state"] != "reloaded":
            # Failed, but what it stopped, unloaded or ended changed the node, restored or not.
            self.result["changed"] = bool(self.result["services_stopped"] or self.result["modules_unloaded"]
                                          or acted(self.result.get("killed") or {"signalled": [], "zombies": [], "containers": []}))
            self.result["journal"] = self.run.journal.entries()
            self.module.fail_json(msg="nvidia_driver_reload failed: %s; node state: %s (modules loaded back: %s; services started "
                                      "again: %s)" % (self.result["error"], self.result["node_state"],
                                                      ", ".join(self.result["modules_loaded"]) or "none needed",
                                                      ", ".join(self.result["services_started"]) or "none had been stopped"),
                                  **self.result)


def main():
    module = GpuModule(
        argument_spec=action_argument_spec(
            force=dict(type="bool", default=False),
            kill_holders=dict(type="bool", default=False),
            **KILL_ARGUMENT_SPEC
        ),
        supports_check_mode=True,
    )
    validate_kill_params(module, on_node=True)
    DriverReloadWorker(module).execute()


if __name__ == "__main__":
    main()
