#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_reset: reset the GPUs that hold ghost memory, with nvidia-smi --gpu-reset."""

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_reset
short_description: Reset the GPUs that hold ghost memory, with nvidia-smi --gpu-reset
version_added: 1.0.0
description:
  - Resets, with C(nvidia-smi --gpu-reset), the GPUs that need it. A GPU needs it when memory is in use that no live
    process accounts for (ghost memory over O(ghost_threshold_mib)), when NVML reports a recovery action asking for a
    reset, or when the kernel log has an Xid whose catalog action is a GPU reset. With O(force=true), every selected GPU.
  - Refuses before it changes anything, naming every process (pid, name, user, devices), while a process other than
    a GPU daemon holds a GPU it would reset, or holds C(/dev/nvidiactl) without any GPU device (a monitoring
    agent, a stray NVML client, since a client of the whole driver blocks every reset); end them first with
    M(gpuops.remediation.gpu_kill).
  - Stops every GPU daemon that runs, since each holds C(/dev/nvidiactl) and so blocks every reset, not only the
    daemons that hold the GPUs to reset; the DCGM exporter and C(nv-hostengine) (DCGM) first, then
    C(nv-fabricmanager), then C(nvidia-persistenced). Starts again exactly those it stopped, in reverse order,
    also when the reset fails. Persistence mode is saved first and restored afterwards whatever happened.
  - The display manager is never stopped here; a display server on a GPU to reset makes the module refuse.
  - Resets GPUs joined by NVLink together, in one call, when O(reset_nvlink_peers=true).
  - Takes the node lock before its snapshot, so that a run that waited for another plans from the node as that one
    left it (two runs at once reset a GPU once). Journals every step. A second run finds nothing to reset and
    changes nothing.
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
  kill_holders:
    description:
      - End the processes that would block the reset first, through the same path and with the same options as
        M(gpuops.remediation.gpu_kill) (O(signals), O(grace), O(containers), the protect lists, zombies through their
        parent), then take the snapshot again and reset. Refuses before any signal, naming them, when one of them could
        not be ended. Check mode predicts the kill and the reset that follows it.
      - Without it, the module refuses while they run.
      - With O(gpus) set, the run is narrowed to those GPUs, and it refuses, naming them, to end a holder that holds none of
        them or holds another GPU too (a job on another GPU or an NVLink peer, a client of the whole driver, the parent
        of a zombie, a process of a container to stop). Leave O(gpus) out (every GPU) to allow it.
    type: bool
    default: false
  force:
    description:
      - Reset every selected GPU, whether or not the snapshot says it needs it.
    type: bool
    default: false
  reset_nvlink_peers:
    description:
      - Reset a GPU together with the GPUs linked to it by an active NVLink (required on NVLink and NVSwitch
        systems, where a GPU cannot be reset alone). With V(false), only the selected GPUs are named.
    type: bool
    default: true
  stop_services:
    description:
      - Stop the GPU daemons that run (they hold C(/dev/nvidiactl), which blocks every reset), and start them again
        afterwards. With V(false), a running GPU daemon makes the module refuse.
    type: bool
    default: true
seealso:
  - module: gpuops.remediation.gpu_holders_info
  - module: gpuops.remediation.gpu_kill
  - module: gpuops.remediation.nvidia_driver_reload
"""

EXAMPLES = r"""
- name: Reset the GPUs that hold ghost memory
  gpuops.remediation.gpu_reset:
  register: reset

- name: Reset GPU 3 even if it looks healthy
  gpuops.remediation.gpu_reset:
    gpus: ["3"]
    force: true
    run_id: "{{ tower_job_id | default('manual') }}"
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
gpus:
  description: One entry per GPU considered.
  returned: always
  type: list
  elements: dict
  contains:
    index: {description: "GPU index.", type: int, returned: always}
    pci_bus_id: {description: "PCI bus id.", type: str, returned: always}
    reset: {description: "Whether the GPU was reset (in check mode, would be).", type: bool, returned: always}
    reason: {description: "Why it was reset, or why not.", type: str, returned: always}
    memory_used_mib_before: {description: "Used memory before.", type: int, returned: always}
    memory_used_mib_after: {description: "Used memory after (the prediction in check mode).", type: int, returned: always}
    freed_mib: {description: "Memory given back.", type: int, returned: always}
services_stopped:
  description: The units stopped for the reset (and started again afterwards).
  returned: always
  type: list
  elements: str
services_started:
  description: The units started again.
  returned: always
  type: list
  elements: str
killed:
  description:
    - What O(kill_holders) did (in check mode, would do), as M(gpuops.remediation.gpu_kill) reports it (C(signalled),
      C(left_alone), C(zombies), C(containers), C(unconfirmed_containers), C(thawed)).
  returned: when kill_holders is true and something blocked the reset
  type: dict
persistence_restored:
  description: Indexes of the GPUs whose persistence mode was enabled again after the reset (it was on before).
  returned: when a reset ran
  type: list
  elements: int
service_errors:
  description: What failed while starting the stopped daemons again or restoring persistence mode.
  returned: when something failed there
  type: list
  elements: str
error:
  description: Why the run stopped before it reset (a daemon that would not stop).
  returned: on such a failure
  type: str
mig_layout:
  description:
    - The MIG layout of the GPUs reset with MIG mode on, which a reset loses (MIG stays on, no instance is left). The
      layout is journaled (action C(mig_layout)) before the reset and created again after it (C(nvidia-smi mig -cgi
      <profile>:<placement>), then C(-cci)), then read back. C(gpus), C(recorded) (per GPU index, its GPU instances, each
      with C(profile_id), C(name), C(start), C(size), C(gi), C(compute) profile ids), C(now) (read back), C(created),
      C(missing) and C(errors) (each instance named with its profile and placement), C(ok). A layout not restored fails
      the module, naming what is missing; an interrupted run's layout is restored by the next run (C(restored_mig_layouts)).
    - In check mode C(gpus), C(recorded) and C(would_restore).
  returned: when a GPU to reset has MIG mode on
  type: dict
restored_mig_layouts:
  description: The MIG layouts an interrupted run recorded and never restored, which this run restored (as C(mig_layout)).
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
  returned: not in check mode, also when the reset failed
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
from ansible_collections.gpuops.remediation.plugins.module_utils._action import Remediation, action_argument_spec
from ansible_collections.gpuops.remediation.plugins.module_utils._command import CommandRunner
from ansible_collections.gpuops.remediation.plugins.module_utils._argument_specs import KILL_ARGUMENT_SPEC
from ansible_collections.gpuops.remediation.plugins.module_utils.kill._kill import (
    KILL_RESULT_KEYS, HolderKiller, ended_pids, refuse_beyond_selection, still_holding, validate_kill_params,
)
from ansible_collections.gpuops.remediation.plugins.module_utils._module import GpuModule
from ansible_collections.gpuops.remediation.plugins.module_utils._gpu_names import DISPLAY_MANAGER
from ansible_collections.gpuops.remediation.plugins.module_utils._mig_keeper import MigLayoutError, keeper_for, planned, restore_into
from ansible_collections.gpuops.remediation.plugins.module_utils._mig_layout import pending_mig_change
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._reset_output import parse_gpu_reset, reset_succeeded
from ansible_collections.gpuops.remediation.plugins.module_utils._services import GpuServices, ServiceError
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._procscan import scan_processes
from ansible_collections.gpuops.remediation.plugins.module_utils._snapshot import device_minors, holds_control_only
from ansible_collections.gpuops.remediation.plugins.module_utils._verdict import NO_GPU_SELECTED, beyond_reset, reset_evidence


def _describe_holder(holder):
    if holder["gpus"]:
        where = "on GPU %s" % ",".join(str(index) for index in holder["gpus"])
    else:
        where = "on no GPU, a client of the whole driver"
    devices = ", ".join(holder.get("devices") or []) or "devices the driver lists"
    return "pid %s (%s, user %s, %s) %s, holding %s" % (
        holder["pid"], holder.get("name"), holder.get("user"), holder["class"], where, devices)


def reset_blockers(snapshot, indexes):
    """The holders that keep a reset of the GPUs `indexes` from running: those on one of them, and the clients of the
    whole driver (only /dev/nvidiactl) that the snapshot lists as reset blockers, which block every GPU's reset."""
    control_only = set(blocker["pid"] for blocker in snapshot.get("reset_blockers") or [])
    return [h for h in snapshot["holders"] if set(h["gpus"]) & set(indexes) or h["pid"] in control_only]


def daemon_units(services):
    """The GPU daemon units that run, in stop order (the snapshot lists them in GPU_SERVICE_UNITS order), each
    unit once: an alias (dcgm.service) shows with the Id of the unit it names."""
    units, ids = [], set()
    for service in services:
        if service["active"] and service["unit"] != DISPLAY_MANAGER and service.get("id", service["unit"]) not in ids:
            ids.add(service.get("id", service["unit"]))
            units.append(service["unit"])
    return units


def nvlink_groups(indexes, gpus, with_peers):
    """Lists of GPU indexes to reset together: each wanted GPU with its NVLink peers, transitively."""
    by_bus = dict((gpu.get("pci_bus_id"), gpu["index"]) for gpu in gpus)
    peers = dict((gpu["index"], set(by_bus[bus] for bus in gpu.get("nvlink_peers") or [] if bus in by_bus)) for gpu in gpus)
    groups, seen = [], set()
    for index in indexes:
        if index in seen:
            continue
        group, todo = set(), [index]
        while todo:
            current = todo.pop()
            if current not in group:
                group.add(current)
                todo.extend(peers.get(current, ()) if with_peers else ())
        seen |= group
        groups.append(sorted(group))
    return groups


class GpuResetWorker:
    def __init__(self, module):
        self.module = module
        self.run = Remediation(module)
        self.params = module.params
        self.result = {"changed": False, "gpus": [], "services_stopped": [], "services_started": [], "journal": []}
        self._to_reset = set()
        self._latest = None  # the newest whole-node snapshot, the base of snapshot_after

    def plan(self, snapshot):
        """(groups to reset, {index: reason}, {index: why not}) for the selected GPUs."""
        refuse_whole_gpu_action(self.module, snapshot["gpus"], "a GPU reset")
        selected = self.run.selected_gpus(snapshot)
        reasons, skipped = {}, {}
        for gpu in snapshot["gpus"]:
            if gpu["index"] not in selected:
                continue
            blocker = beyond_reset(gpu)
            reason = "force=true" if self.params["force"] else reset_evidence(gpu, snapshot["xid_events"], self.params["ghost_threshold_mib"])
            if blocker:
                skipped[gpu["index"]] = blocker
            elif reason:
                reasons[gpu["index"]] = reason
            else:
                skipped[gpu["index"]] = "nothing to reset: no ghost memory, no recovery action, no Xid asking for it"
        groups = nvlink_groups(sorted(reasons), snapshot["gpus"], self.params["reset_nvlink_peers"])
        groups = self._without_pending_mig(groups, snapshot, reasons, skipped)
        for group in groups:
            for index in group:
                reasons.setdefault(index, "NVLink peer of GPU %s" % group[0])
        return groups, reasons, skipped

    @staticmethod
    def _without_pending_mig(groups, snapshot, reasons, skipped):
        """The groups less those with a GPU whose MIG mode change is pending: a reset would apply it, so such a GPU
        (and its NVLink group) is never reset as a side effect; it is named in `skipped`."""
        by_index = dict((gpu["index"], gpu) for gpu in snapshot["gpus"])
        kept = []
        for group in groups:
            pending = [(index, pending_mig_change(by_index[index])) for index in group if pending_mig_change(by_index[index])]
            if not pending:
                kept.append(group)
                continue
            for index in group:
                reasons.pop(index, None)
                skipped[index] = "not reset: " + "; ".join("GPU %s: %s" % (i, why) for i, why in pending) + \
                    "; apply it by hand (nvidia-smi --gpu-reset) when its jobs allow"
        return kept

    def blockers(self, snapshot, groups):
        """(the holders that would block the reset of groups, the daemon units to stop for it)."""
        indexes = set(index for group in groups for index in group)
        units = daemon_units(snapshot["services"]) if self.params["stop_services"] else []
        stoppable = set(pid for s in snapshot["services"] if s["unit"] in units for pid in s["pids"])
        blocking = [h for h in reset_blockers(snapshot, indexes)
                    if h["class"] != "gpu_daemon" or h["pid"] not in stoppable]
        return blocking, units

    def refuse(self, blocking, why="in use by"):
        names = ", ".join(_describe_holder(h) + (": %s" % h["reason"] if h.get("reason") else "") for h in blocking)
        hint = "end them first with gpuops.remediation.gpu_kill, or set kill_holders=true"
        if any(h["class"] == "gpu_daemon" for h in blocking):
            hint += "; a GPU daemon is stopped only with stop_services=true and when its systemd unit is known"
        if self.params["kill_holders"] and why != "in use by":
            hint = "they cannot be ended safely"
        details = dict((key, value) for key, value in self.result.items() if key != "msg")
        self.module.fail_json(msg="gpu_reset refused: the GPUs to reset are %s %s; %s" % (why, names, hint), **details)

    def clear(self, snapshot):
        """Plan, and end what blocks the plan when kill_holders allows it; refuse, naming them, what is still there.

        Returns (the snapshot the reset works from, groups, reasons, skipped, units). Check mode plans the reset as if
        the kill it predicts had happened: the real run kills first, then takes its snapshot again.
        """
        groups, reasons, skipped = self.plan(snapshot)
        if not groups:
            return snapshot, groups, reasons, skipped, []
        blocking, units = self.blockers(snapshot, groups)
        if blocking and self.params["kill_holders"]:
            killer = HolderKiller(self.module, self.run.journal, probed=self.run.probed)
            refuse_beyond_selection(self.module, killer, blocking, snapshot, self.run.selected_gpus(snapshot))
            killed = killer.end(blocking, predict_only=True)
            self._keep_kill(killed)
            survivors = still_holding(killed, blocking)
            if survivors:
                self.refuse([dict(h, **s) for h in blocking for s in survivors if s["pid"] == h["pid"]], why="blocked by")
            if self.module.check_mode:
                ended = ended_pids(killed)
                blocking = [h for h in blocking if h["pid"] not in ended]
            else:
                killed = killer.end(blocking)
                self._keep_kill(killed)
                self.result["changed"] = killed["changed"]
                snapshot = self.run.snapshot(gpus=None)
                groups, reasons, skipped = self.plan(snapshot)
                blocking, units = self.blockers(snapshot, groups) if groups else ([], [])
        if blocking:
            self.refuse(blocking)
        return snapshot, groups, reasons, skipped, units

    def _keep_kill(self, killed):
        self.result["killed"] = dict((key, killed[key]) for key in KILL_RESULT_KEYS)

    def _reset_argv(self, nvidia_smi, group, snapshot):
        bus_ids = [gpu["pci_bus_id"] for gpu in snapshot["gpus"] if gpu["index"] in group]
        return [nvidia_smi, "--gpu-reset", "-i", ",".join(bus_ids)]

    def _reset(self, groups, snapshot):
        nvidia_smi = self.run.layout.command(self.module, "nvidia-smi", required=True)
        outcome = {}
        for group in groups:
            argv = self._reset_argv(nvidia_smi, group, snapshot)
            rc, out, err = CommandRunner(self.module, self.run.journal).act(argv, "gpu_reset", keep_stdout=True, succeeded=reset_succeeded,
                                                                            gpus=group)
            parsed = parse_gpu_reset(out, err, rc)
            by_bus = dict((gpu["pci_bus_id"], gpu["index"]) for gpu in snapshot["gpus"])
            for bus, result in parsed.items():
                if bus in by_bus:
                    outcome[by_bus[bus]] = result
            for index in group:
                outcome.setdefault(index, {"reset": rc == 0, "reason": None if rc == 0 else "other",
                                           "message": (err or out).strip()})
            if any(outcome[index].get("reason") == "in_use" for index in group):
                still = self._still_blocking(group, snapshot)
                for index in group:
                    outcome[index]["message"] = "%s; %s" % (outcome[index].get("message"), still)
        return outcome

    def _still_blocking(self, group, snapshot):
        """Who holds the devices now, with the daemons stopped: the /proc scan, under the probe deadline."""
        holders, report = scan_processes(self.run.layout, self.params["probe_timeout"])
        if not report["ok"]:
            return "the scan of /proc to name who still holds it failed: %s" % report["error"]
        minors = set(gpu.get("minor_number", gpu["index"]) for gpu in snapshot["gpus"] if gpu["index"] in group)
        named = []
        for pid, holder in sorted(holders.items()):
            if device_minors(holder["devices"]) & minors or holds_control_only(holder["devices"]):
                named.append("pid %s (%s) holding %s" % (pid, holder["name"], ", ".join(holder["devices"])))
        return "still held, with the GPU daemons stopped, by %s" % (", ".join(named) or "no process this scan can see")

    def _restore_persistence(self, before, after_snapshot):
        """Enable persistence mode again where it was on before and is off now; the GPUs it was restored on."""
        nvidia_smi = self.run.layout.command(self.module, "nvidia-smi", required=True)
        restored = []
        for gpu in after_snapshot["gpus"]:
            if before.get(gpu["index"]) and gpu.get("persistence_mode") is False:
                argv = [nvidia_smi, "-pm", "1", "-i", str(gpu["index"])]
                rc, dummy, err = CommandRunner(self.module, self.run.journal).act(argv, "persistence_mode", gpu=gpu["index"])
                if rc == 0:
                    restored.append(gpu["index"])
                else:
                    self.result.setdefault("service_errors", []).append(
                        "nvidia-smi -pm 1 -i %s failed (rc %d): %s" % (gpu["index"], rc, err.strip()))
        return restored

    def _act(self, groups, snapshot, units, persistence_before):
        """Stop, reset, start again; whatever happens, the services stopped are started and persistence restored."""
        services = GpuServices(self.module, self.run.layout, self.run.journal)
        keeper = self._mig_keeper(groups, snapshot)
        outcome = {}
        try:
            if keeper:
                keeper.record(keeper.gpus)
            services.stop(units)
            outcome = self._reset(groups, snapshot)
        except MigLayoutError as exc:
            # The layout could not be recorded: no GPU is reset (each says why).
            self.result["error"] = str(exc)
            outcome = dict((index, {"reset": False, "message": "not reset: %s" % exc}) for group in groups for index in group)
        except ServiceError as exc:
            self.result["error"] = str(exc)
        finally:
            restore_into(keeper, self.result)
            self.result["services_stopped"] = list(services.stopped)
            started, errors = services.restore()
            self.result["services_started"] = started
            if errors:
                self.result["service_errors"] = errors
            after = self.run.snapshot(gpus=None)
            self.result["persistence_restored"] = self._restore_persistence(persistence_before, after)
        return outcome, after

    def _mig_keeper(self, groups, snapshot):
        """A MigLayoutKeeper when a GPU to reset has MIG on (its instances are gone after the reset), else None."""
        return keeper_for(self.module, self.run.layout, self.run.journal, snapshot, [index for group in groups for index in group])

    def execute(self):
        with self.run.acting():
            self._plan_and_act()
        self.run.report_restored(self.result)
        self.result["journal"] = self.run.journal.entries()
        if not self.module.check_mode:
            self.result["snapshot_after"] = self.run.snapshot_after(self._latest)
        failed = [g for g in self.result["gpus"] if g["reset"] is False and g["index"] in self._to_reset]
        if failed or "error" in self.result:
            details = dict((key, value) for key, value in self.result.items() if key != "msg")
            self.module.fail_json(msg="gpu_reset failed: %s; services were restored: %s" % (
                "; ".join("GPU %s: %s" % (g["index"], g["reason"]) for g in failed) or self.result.get("error"),
                ", ".join(self.result["services_started"]) or "none had been stopped"), **details)
        self.module.exit_json(**self.result)

    def _plan_and_act(self):
        """Everything from the snapshot on; outside check mode under the node lock, so the plan is the node's now."""
        first = self.run.snapshot(gpus=None)
        if self.params["gpus"] == []:
            self.result["msg"] = NO_GPU_SELECTED
        snapshot, groups, reasons, skipped, units = self.clear(first)
        self._latest = snapshot
        to_reset = self._to_reset = set(index for group in groups for index in group)
        before = dict((gpu["index"], gpu) for gpu in first["gpus"])
        outcome, after = {}, None
        if to_reset and not self.module.check_mode:
            outcome, after = self._act(groups, snapshot, units, dict((i, g.get("persistence_mode")) for i, g in before.items()))
            self._latest = after
            # What this run did to the node, a failed run included: a kill, a stop, a reset, a persistence mode set.
            self.result["changed"] = bool(self.result["changed"] or self.result["services_stopped"]
                                          or self.result["persistence_restored"] or any(o.get("reset") for o in outcome.values()))
        elif to_reset:
            self._plan_mig(groups, snapshot)
            self.result["changed"] = True
            self.result["services_stopped"] = units
            self.result["services_started"] = list(reversed(units))
            outcome = dict((index, {"reset": True, "reason": None}) for index in to_reset)
        self._report(before, after, reasons, skipped, outcome)

    def _plan_mig(self, groups, snapshot):
        """Check mode: the MIG layout the reset would lose and the run would create again, read now."""
        keeper = self._mig_keeper(groups, snapshot)
        if keeper is not None:
            try:
                self.result["mig_layout"] = planned(keeper)
            except MigLayoutError as exc:
                self.module.fail_json(msg="gpu_reset would fail: %s; no GPU would be reset" % exc, changed=False)

    def _report(self, before, after, reasons, skipped, outcome):
        after_gpus = dict((gpu["index"], gpu) for gpu in (after or {}).get("gpus", []))
        diff = {"before": {}, "after": {}}
        for index, gpu in sorted(before.items()):
            if index not in reasons and index not in skipped:
                continue
            done = outcome.get(index, {}).get("reset", False)
            used_before = gpu.get("memory_used_mib")
            if index in after_gpus:
                used_after = after_gpus[index].get("memory_used_mib")
            else:
                used_after = used_before - (gpu.get("unattributed_mib") or 0) if done and used_before is not None else used_before
            reason = reasons.get(index) if done else (skipped.get(index) or outcome.get(index, {}).get("message"))
            self.result["gpus"].append({
                "index": index, "pci_bus_id": gpu.get("pci_bus_id"), "reset": done, "reason": reason,
                "memory_used_mib_before": used_before, "memory_used_mib_after": used_after,
                "freed_mib": max((used_before or 0) - (used_after or 0), 0),
            })
            if index in reasons:
                diff["before"]["GPU %s" % index] = {"unattributed_mib": gpu.get("unattributed_mib"), "state": gpu.get("state")}
                diff["after"]["GPU %s" % index] = {"unattributed_mib": 0, "state": "reset"}
        self.result["diff"] = diff


def main():
    module = GpuModule(
        argument_spec=action_argument_spec(
            force=dict(type="bool", default=False),
            reset_nvlink_peers=dict(type="bool", default=True),
            stop_services=dict(type="bool", default=True),
            kill_holders=dict(type="bool", default=False),
            **KILL_ARGUMENT_SPEC
        ),
        supports_check_mode=True,
    )
    validate_kill_params(module, on_node=True)
    GpuResetWorker(module).execute()


if __name__ == "__main__":
    main()
