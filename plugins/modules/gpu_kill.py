#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_kill
short_description: End the processes that hold GPU memory, safely
version_added: 1.0.0
description:
  - Selects holders from a snapshot of M(gpuops.remediation.gpu_holders_info) (by GPU, by explicit pid and start
    time, by user, name, command line, memory and class) and ends them with a signal sequence and a grace period
    (TERM, wait, KILL), then waits, bounded, until the driver no longer lists them, and reports the memory that
    came back per GPU.
  - A zombie cannot be killed; its parent is sent SIGCHLD so it reaps it and, with O(allow_parent_termination),
    the parent is ended so that init reaps it.
  - A holder inside a container is handled by O(containers), by default by stopping its container through the
    runtime its cgroup names (docker, podman, crictl), since a killed process would be restarted.
  - Never signals a pid whose start time no longer matches (a reused pid), PID 1, a kernel thread, this Ansible
    run and its ancestors, a process in uninterruptible sleep (reported as unkillable, the evidence for a heavier
    rung), a protected process, a display server unless O(allow_display), a GPU daemon unless O(allow_daemons).
  - Journals every signal before it is sent and after, under the node lock. A second run finds nothing to end.
author:
  - gpuops maintainers (@gpuops)
extends_documentation_fragment:
  - gpuops.remediation.attributes
  - gpuops.remediation.attributes.ACTION_MODULE
  - gpuops.remediation.attributes.LINUX_GPU
  - gpuops.remediation.snapshot
  - gpuops.remediation.snapshot.ACTION
options:
  holders:
    description:
      - Only these holders, as RV(gpuops.remediation.gpu_holders_info#module:holders) returns them; each needs C(pid) and
        C(start_time) (clock ticks since boot, as the snapshot gave it), other keys are ignored. A holder whose pid now
        belongs to a process with another start time is left alone and reported.
    type: list
    elements: dict
  users:
    description: Only holders owned by these users (names or uids).
    type: list
    elements: str
    default: []
  name_pattern:
    description: Only holders whose name or first argument matches this Python regular expression (searched).
    type: str
  cmdline_pattern:
    description: Only holders whose command line, arguments joined by spaces, matches this Python regular expression.
    type: str
  min_memory_mib:
    description: Only holders that the driver says use at least this much GPU memory.
    type: int
  classes:
    description: Only holders of these classes (RV(gpuops.remediation.gpu_holders_info#module:holders[].class)).
    type: list
    elements: str
    choices: [compute, graphics_session, gpu_daemon, zombie]
    default: [compute, graphics_session, gpu_daemon, zombie]
  orphans_only:
    description: Only holders that no Slurm job, container or Kubernetes pod owns any more.
    type: bool
    default: false
  signals:
    description: The signals to send in turn, waiting O(grace) seconds after each for the process to exit.
    type: list
    elements: str
    default: [TERM, KILL]
  grace:
    description: Seconds to wait after each signal.
    type: float
    default: 10.0
  wait_timeout:
    description: Seconds to wait, after the last signal, for the driver to stop listing the ended processes.
    type: float
    default: 30.0
  containers:
    description:
      - What to do with a holder inside a container. V(stop) stops the container through its runtime (C(docker stop),
        C(podman stop), C(crictl stop) for containerd and CRI-O), V(kill) signals the process like any other, V(skip)
        leaves it and reports it.
      - The kubelet starts a stopped pod container again; drain or cordon the node first (the C(gpu_reclaim) role does
        with C(gpu_reclaim_drain=kubernetes)). Containers that nerdctl started live outside the CRI namespace that
        crictl sees; their stop fails and is reported.
    type: str
    choices: [stop, kill, skip]
    default: stop
  protect_names:
    description: Process names never to signal.
    type: list
    elements: str
    default: []
  protect_users:
    description: Users whose processes are never signalled.
    type: list
    elements: str
    default: []
  protect_units:
    description: systemd units whose processes are never signalled.
    type: list
    elements: str
    default: []
  allow_display:
    description: Allow signalling display servers and desktop sessions (Xorg, gdm, gnome-shell, ...).
    type: bool
    default: false
  allow_daemons:
    description: Allow signalling GPU daemons (nvidia-persistenced, nv-fabricmanager, nv-hostengine).
    type: bool
    default: false
  reap_zombies:
    description: Send SIGCHLD to the parent of a zombie holder so that it reaps it.
    type: bool
    default: true
  allow_parent_termination:
    description: When SIGCHLD does not get a zombie reaped, end its parent (with O(signals)) so that init reaps it.
    type: bool
    default: false
seealso:
  - module: gpuops.remediation.gpu_holders_info
  - module: gpuops.remediation.gpu_reset
"""

EXAMPLES = r"""
- name: End whatever holds GPU 2
  gpuops.remediation.gpu_kill:
    gpus: ["2"]

- name: End exactly the holders a snapshot found, and nothing that took their pids since
  gpuops.remediation.gpu_kill:
    holders: "{{ snapshot.holders | selectattr('class', 'equalto', 'compute') | list }}"

- name: End the orphans of dead jobs of user alice that hold more than 1 GiB, with 30 s to clean up
  gpuops.remediation.gpu_kill:
    users: [alice]
    orphans_only: true
    min_memory_mib: 1024
    grace: 30
"""

RETURN = r"""
signalled:
  description: The processes signalled (in check mode, that would be), with the signals sent and whether they exited.
  returned: always
  type: list
  elements: dict
left_alone:
  description: Selected holders that were not signalled, each with the reason (a reused pid, a protected process, ...).
  returned: always
  type: list
  elements: dict
zombies:
  description: Zombie holders and how each was reaped (C(reaped_by) V(sigchld) or V(parent_terminated)), or why not.
  returned: always
  type: list
  elements: dict
containers:
  description: Containers stopped (runtime, id, ok, message).
  returned: always
  type: list
  elements: dict
gpus:
  description: Used memory per GPU before and after, and the memory that came back.
  returned: always
  type: list
  elements: dict
  sample: [{index: 0, memory_used_mib_before: 4608, memory_used_mib_after: 0, freed_mib: 4608}]
still_listed:
  description: Pids the driver still listed when O(wait_timeout) ran out.
  returned: always
  type: list
  elements: int
journal:
  description: The journal lines this run wrote.
  returned: always
  type: list
  elements: dict
"""

import re
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuops.remediation.plugins.module_utils._action import Remediation, action_argument_spec
from ansible_collections.gpuops.remediation.plugins.module_utils._containers import runtime_cli, stop_container
from ansible_collections.gpuops.remediation.plugins.module_utils._procscan import read_process
from ansible_collections.gpuops.remediation.plugins.module_utils._terminate import Policy, Target, reap_zombie, refusal, signal_number, terminate

POLL_INTERVAL = 0.5


def validate(module):
    params = module.params
    for option in ("grace", "wait_timeout"):
        if params[option] < 0:
            module.fail_json(msg="%s must be 0 or more seconds, got %r" % (option, params[option]))
    if params["min_memory_mib"] is not None and params["min_memory_mib"] < 0:
        module.fail_json(msg="min_memory_mib must be 0 or more, got %r" % params["min_memory_mib"])
    if not params["signals"]:
        module.fail_json(msg="signals must name at least one signal, got []")
    for name in params["signals"]:
        try:
            signal_number(name)
        except (AttributeError, ValueError):
            module.fail_json(msg="signals: %r is not a signal name (TERM, INT, KILL, ...)" % name)
    patterns = {}
    for option in ("name_pattern", "cmdline_pattern"):
        if params[option] is not None:
            try:
                patterns[option] = re.compile(params[option])
            except re.error as exc:
                module.fail_json(msg="%s: %r is not a valid regular expression: %s" % (option, params[option], exc))
    identities = []
    for holder in params["holders"] or []:
        try:
            pid, start_time = int(holder["pid"]), int(holder["start_time"])
        except (KeyError, TypeError, ValueError):
            pid, start_time = 0, -1
        if pid <= 0 or start_time < 0:
            module.fail_json(msg="holders: %r is not a process: each needs an integer pid > 0 and start_time >= 0" % (holder,))
        identities.append({"pid": pid, "start_time": start_time})
    params["holders"] = identities
    return patterns


class HolderSelection:
    """Which holders of the snapshot the options select, and why the others given explicitly are not."""

    def __init__(self, params, patterns):
        self.params = params
        self.patterns = patterns

    def matches(self, holder, gpu_indexes):
        params = self.params
        if params["gpus"] and not set(holder["gpus"]) & gpu_indexes:
            return False
        if holder["class"] not in params["classes"] and holder["class"] != "unkillable":
            return False
        if params["users"] and not set(params["users"]) & set([str(holder.get("user")), str(holder.get("uid"))]):
            return False
        cmdline = holder.get("cmdline") or []
        if "name_pattern" in self.patterns:
            names = [holder.get("name") or ""] + cmdline[:1]
            if not any(self.patterns["name_pattern"].search(name) for name in names):
                return False
        if "cmdline_pattern" in self.patterns and not self.patterns["cmdline_pattern"].search(" ".join(cmdline)):
            return False
        if params["min_memory_mib"] is not None and (holder.get("used_mib") or 0) < params["min_memory_mib"]:
            return False
        if params["orphans_only"] and (holder.get("slurm_job") or holder.get("container") or holder.get("kubernetes_pod_uid")):
            return False
        return True

    def select(self, snapshot, gpu_indexes):
        """(selected holders, skipped entries for explicit holders that are not there any more)."""
        holders = [h for h in snapshot["holders"] if h.get("visible", True) and self.matches(h, gpu_indexes)]
        skipped = []
        explicit = self.params["holders"]
        if explicit:
            wanted = dict((h["pid"], h["start_time"]) for h in explicit)
            holders = [h for h in holders if wanted.get(h["pid"]) == h["start_time"]]
            found = set(h["pid"] for h in holders)
            for pid, start_time in sorted(wanted.items()):
                if pid not in found:
                    skipped.append({"pid": pid, "start_time": start_time, "name": None, "reason": self._why_absent(pid, start_time)})
        return holders, skipped

    @staticmethod
    def _why_absent(pid, start_time):
        info = read_process(pid)
        if info is None:
            return "exited"
        if info["start_time"] != start_time:
            return "pid reused: start time %s, expected %s" % (info["start_time"], start_time)
        return "does not hold a selected GPU, or is not selected by the other options"


class GpuKillWorker:
    def __init__(self, module, patterns):
        self.module = module
        self.params = module.params
        self.run = Remediation(module)
        self.selection = HolderSelection(self.params, patterns)
        self.policy = Policy(protect_names=self.params["protect_names"], protect_users=self.params["protect_users"],
                             protect_units=self.params["protect_units"], allow_display=self.params["allow_display"],
                             allow_daemons=self.params["allow_daemons"], allow_parents=self.params["allow_parent_termination"])
        self.result = {"changed": False, "signalled": [], "left_alone": [], "zombies": [], "containers": [], "gpus": [],
                       "still_listed": [], "journal": []}

    def _triage(self, holders):
        """Split holders into plain targets, zombies, containers to stop; the rest go to skipped."""
        targets, zombies, containers = [], [], {}
        for holder in holders:
            if holder["class"] == "unkillable":
                self.result["left_alone"].append(self._skip(holder, "unkillable: uninterruptible sleep (D); a reset, reload or reboot is needed"))
            elif holder["class"] == "zombie":
                zombies.append(holder)
            elif holder.get("container") and self.params["containers"] != "kill":
                self._container(holder, containers)
            else:
                targets.append(Target(holder["pid"], holder["start_time"], reason="holds GPU %s" % holder["gpus"]))
        return targets, zombies, containers

    def _container(self, holder, containers):
        container = holder["container"]
        if self.params["containers"] == "skip":
            self.result["left_alone"].append(self._skip(holder, "in %s container %s (containers=skip)" % (container["runtime"], container["id"])))
            return
        why_not = refusal(Target(holder["pid"], holder["start_time"]), self.policy)
        if why_not:
            self.result["left_alone"].append(self._skip(holder, why_not))
            return
        containers.setdefault((container["runtime"], container["id"]), []).append(holder["pid"])

    @staticmethod
    def _skip(holder, reason):
        return {"pid": holder["pid"], "start_time": holder.get("start_time"), "name": holder.get("name"), "reason": reason}

    def _act(self, targets, zombies, containers):
        check_mode = self.module.check_mode
        outcome = terminate(targets, self.policy, signals=self.params["signals"], grace=self.params["grace"],
                            journal=self.run.journal, check_mode=check_mode)
        self.result["signalled"] = outcome["signalled"]
        self.result["left_alone"].extend(outcome["skipped"])
        zombies = [{"pid": z["pid"], "start_time": z["start_time"]} for z in zombies] + outcome["zombies"]
        for zombie in zombies:
            if not self.params["reap_zombies"]:
                self.result["zombies"].append(dict(zombie, reaped_by=None, gone=False, reason="reap_zombies=false"))
                continue
            self.result["zombies"].append(reap_zombie(zombie["pid"], zombie["start_time"], self.policy, grace=self.params["grace"],
                                                      journal=self.run.journal, check_mode=check_mode, signals=self.params["signals"]))
        for (runtime, container_id), pids in sorted(containers.items()):
            if check_mode:
                path, why_not = runtime_cli(self.module, runtime)
                ok, message = (True, "would stop") if path else (False, why_not)
            else:
                ok, message = stop_container(self.module, runtime, container_id, self.params["grace"], self.run.journal)
            self.result["containers"].append({"runtime": runtime, "id": container_id, "pids": pids, "ok": ok, "message": message})

    def _acted(self):
        reaped = [z for z in self.result["zombies"] if z.get("reaped_by")]
        stopped = [c for c in self.result["containers"] if c["ok"]]
        return bool(self.result["signalled"] or reaped or stopped)

    def _ended_pids(self):
        pids = set(s["pid"] for s in self.result["signalled"] if s.get("exited"))
        pids |= set(z["pid"] for z in self.result["zombies"] if z.get("gone"))
        pids |= set(pid for c in self.result["containers"] if c["ok"] for pid in c["pids"])
        return pids

    def _wait_driver_release(self, pids):
        """Snapshots until the driver lists none of `pids`, bounded by wait_timeout."""
        deadline = time.monotonic() + self.params["wait_timeout"]
        while True:
            after = self.run.snapshot(gpus=[], kernel_log_source="none")
            listed = set(p["pid"] for g in after["gpus"] for p in g.get("processes", [])) & pids
            if not listed or time.monotonic() >= deadline:
                self.result["still_listed"] = sorted(listed)
                return after
            time.sleep(POLL_INTERVAL)

    def execute(self):
        snapshot = self.run.snapshot(gpus=[])
        gpu_indexes = set(self.run.selected_gpus(snapshot))
        holders, self.result["left_alone"] = self.selection.select(snapshot, gpu_indexes)
        targets, zombies, containers = self._triage(holders)
        if self.module.check_mode:
            self._act(targets, zombies, containers)
            after = None
        else:
            with self.run.locked():
                self._act(targets, zombies, containers)
            after = self._wait_driver_release(self._ended_pids()) if self._acted() else None
        self.result["changed"] = self._acted()
        self._report(snapshot, after, gpu_indexes)
        self.result["journal"] = self.run.journal.entries()
        self.module.exit_json(**self.result)

    def _report(self, before, after, gpu_indexes):
        ended = self._ended_pids()
        gone_before = dict((h["pid"], h) for h in before["holders"])
        predicted = dict((g["index"], sum((h.get("used_mib_per_gpu") or {}).get(g["index"]) or 0 for pid, h in gone_before.items() if pid in ended))
                         for g in before["gpus"])
        after_gpus = dict((g["index"], g) for g in (after or {}).get("gpus", []))
        for gpu in before["gpus"]:
            if gpu["index"] not in gpu_indexes:
                continue
            used_before = gpu.get("memory_used_mib")
            if gpu["index"] in after_gpus:
                used_after = after_gpus[gpu["index"]].get("memory_used_mib")
            else:
                used_after = None if used_before is None else max(used_before - predicted[gpu["index"]], 0)
            freed = None if used_before is None or used_after is None else max(used_before - used_after, 0)
            self.result["gpus"].append({"index": gpu["index"], "memory_used_mib_before": used_before,
                                        "memory_used_mib_after": used_after, "freed_mib": freed})
        label = dict((h["pid"], "%s (%s)" % (h["pid"], h.get("name"))) for h in before["holders"])
        self.result["diff"] = {"before": {"holders": sorted(label.values())},
                               "after": {"holders": sorted(text for pid, text in label.items() if pid not in ended)}}


def main():
    module = AnsibleModule(
        argument_spec=action_argument_spec(
            holders=dict(type="list", elements="dict"),
            users=dict(type="list", elements="str", default=[]),
            name_pattern=dict(type="str"),
            cmdline_pattern=dict(type="str"),
            min_memory_mib=dict(type="int"),
            classes=dict(type="list", elements="str", choices=["compute", "graphics_session", "gpu_daemon", "zombie"],
                         default=["compute", "graphics_session", "gpu_daemon", "zombie"]),
            orphans_only=dict(type="bool", default=False),
            signals=dict(type="list", elements="str", default=["TERM", "KILL"]),
            grace=dict(type="float", default=10.0),
            wait_timeout=dict(type="float", default=30.0),
            containers=dict(type="str", choices=["stop", "kill", "skip"], default="stop"),
            protect_names=dict(type="list", elements="str", default=[]),
            protect_users=dict(type="list", elements="str", default=[]),
            protect_units=dict(type="list", elements="str", default=[]),
            allow_display=dict(type="bool", default=False),
            allow_daemons=dict(type="bool", default=False),
            reap_zombies=dict(type="bool", default=True),
            allow_parent_termination=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    GpuKillWorker(module, validate(module)).execute()


if __name__ == "__main__":
    main()
