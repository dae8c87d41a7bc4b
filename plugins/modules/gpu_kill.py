#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_kill: end the processes that hold GPU memory, safely."""

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
    the parent is ended so that init reaps it, waited for up to O(kill_grace) since init reaps on its own schedule.
  - A holder inside a container is handled by O(containers), by default by stopping its container through the
    runtime its cgroup names (docker, podman, crictl), since a killed process would be restarted. The runtime must
    confirm the container first; a cgroup name alone makes a plain process.
  - Never signals a pid whose start time no longer matches (a reused pid), PID 1, a kernel thread, this Ansible
    run and its ancestors, a process the node journal says outlived SIGKILL (class unkillable, the evidence for a
    heavier rung; uninterruptible sleep alone is no reason to leave a process alone), a protected process, a display
    server unless O(allow_display), a GPU daemon unless O(allow_daemons).
  - Takes the node lock, then its snapshot, so that a run that waited for another sees the node as that one left it.
    Journals every signal before it is sent and after. A second run finds nothing to end.
  - A container stop that fails fails the module (with everything else it did reported), and so does a holder of a
    stopped container that still runs after the stop.
  - With O(gpus) set, the run ends nothing outside those GPUs. Before any signal it computes every process it would
    end (the selected holders, the parent of a zombie when O(allow_parent_termination) may end it, every holder of a
    container to stop) and refuses, naming each, when one holds another GPU or is a client of the whole driver (holds
    only node-wide device files such as C(/dev/nvidiactl) or C(/dev/nvidia-uvm), or is listed by the driver on no GPU).
    Check mode refuses alike.
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
  holders:
    description:
      - Only these holders, as RV(gpuops.remediation.gpu_holders_info#module:holders) returns them; each needs C(pid) and
        C(start_time) (whole numbers; clock ticks since boot, as the snapshot gave it), other keys are ignored. A holder
        whose pid now belongs to a process with another start time is left alone and reported.
      - An empty list selects nothing (it is what C(selectattr(...) | list) gives when nothing matched); leave the option
        out to select by the other options alone.
    type: list
    elements: dict
  users:
    description:
      - Only holders owned by these users (names or uids). Left out (or null), any user; an empty list selects no holder.
      - A name the node's user database does not know, a number larger than any uid (4294967294), or an empty or padded
        entry, is refused (it could select no holder).
    type: list
    elements: str
  name_pattern:
    description:
      - Only holders whose name or first argument matches this Python regular expression (searched).
      - It reads the first 4096 characters of each (a command line is its owner's text, of any length).
      - An empty pattern is refused (it would match every name).
    type: str
  cmdline_pattern:
    description:
      - Only holders whose command line, arguments joined by spaces, matches this Python regular expression.
      - It reads the first 4096 characters of the command line.
      - An empty pattern is refused (it would match every command line).
    type: str
  min_memory_mib:
    description: Only holders that the driver says use at least this much GPU memory.
    type: int
  classes:
    description:
      - Only holders of these classes (RV(gpuops.remediation.gpu_holders_info#module:holders[].class)).
      - Holders of class V(unkillable) and V(busy) (a working program) are selected whatever this says, and left
        alone with the reason (V(busy) ones unless O(end_running_jobs), or named by O(holders), O(name_pattern),
        O(cmdline_pattern) or O(users)).
      - An empty list selects no holder, those included.
    type: list
    elements: str
    choices: [compute, graphics_session, gpu_daemon, zombie]
    default: [compute, graphics_session, gpu_daemon, zombie]
  orphans_only:
    description:
      - Only holders that no Slurm job, container or Kubernetes pod owns any more.
      - Where the node's scheduler answered (RV(gpuops.remediation.gpu_holders_info#module:holders[].job)), its word
        decides (a job that no longer runs owns nothing); elsewhere the holder's cgroup.
    type: bool
    default: false
  wait_timeout:
    description: Seconds to wait, after the last signal, for the driver to stop listing the ended processes.
    type: float
    default: 30.0
  snapshot_after:
    description:
      - Whether to inspect the node again after ending and return it as RV(snapshot_after).
      - V(false) leaves that inspection out when the run succeeds, for a caller that inspects the node itself right
        after (the ladder walk at the reset rung, where M(gpuops.remediation.gpu_reset) takes its own snapshot under the
        lock); RV(gpus) then gives the memory after as the driver reports it once it lists none of the ended
        processes. Where the driver gives no answer, the node is inspected all the same, and the memory after is what
        that inspection knows (null where the driver still does not answer). A run that fails still returns
        RV(snapshot_after).
    type: bool
    default: true
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
  description:
    - The processes signalled (in check mode, that would be), with the signals sent and whether they exited.
    - Each also says what its kernel signal state predicted, in check mode and in the run alike - C(expected) (V(term)
      its default action ends it, V(handler) its handler runs, V(pending) it blocks the signal, V(kill_needed) the
      signal cannot act), C(why) (the kernel fact), C(kill_follows) (V(at_once), V(after_grace) if it still runs, V(no)),
      C(not_sent) (signals skipped because they cannot act, each with C(why)) and C(state) (its State letter).
  returned: always
  type: list
  elements: dict
  sample: [{pid: 4242, start_time: 73695, name: trainer, signals: [TERM, CONT], exited: true, seconds: 0.21,
            expected: handler, kill_follows: after_grace, not_sent: [], state: T,
            why: "TERM has a handler (SigCgt); it is stopped (T): SIGCONT follows so that it acts"}]
thawed:
  description:
    - Frozen cgroups thawed (in check mode, that would be) before their processes were signalled, with O(thaw_frozen)
      (C(cgroup), C(file), C(version), C(pids), C(ok), C(message)).
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
  description:
    - Containers stopped (in check mode, that would be), each with C(runtime), C(id), C(pids) (its holders), C(ok) (the runtime's CLI
      succeeded), C(message), C(ended) (the holders gone after the stop, by pid and start time) and C(survivors) (those
      still running, each a failure of the run).
  returned: always
  type: list
  elements: dict
unconfirmed_containers:
  description:
    - Holders whose cgroup path names a container that its runtime does not confirm (C(pid), C(start_time), C(name),
      C(claimed) runtime and id, C(reason)); each is a plain process, never a container stop.
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
  returned: not in check mode; on success only with O(snapshot_after=true) (the default)
  type: dict
beyond_selection:
  description:
    - When O(gpus) is set and the run is refused for it, the processes it would have ended outside the selection
      (C(pid), C(start_time), C(name), C(gpus), C(devices), C(mig_instances), C(why) it would end, C(outside) the GPUs,
      the MIG instances the selection leaves out, or the whole driver).
  returned: when refused for it
  type: list
  elements: dict
mig_scope:
  description:
    - When O(gpus) narrows a GPU to MIG instances (a MIG device UUID or C(GPU:GI[/CI])), what the run reaches - only the
      holders in those instances - and what it leaves alone; the same in check mode.
  returned: when O(gpus) names a MIG instance
  type: str
  sample: "the selection is MIG instance 0:3: only holders in it are ended; nothing outside it is ended, reset or re-created"
journal:
  description: The journal lines this run wrote.
  returned: always
  type: list
  elements: dict
"""

import time

from ansible_collections.gpuops.remediation.plugins.module_utils._payload_imports import compile_each_file_once

compile_each_file_once()  # before the collection's other imports: zipimport compiles each of them once

from ansible_collections.gpuops.remediation.plugins.module_utils._action import Remediation, action_argument_spec
from ansible_collections.gpuops.remediation.plugins.module_utils._argument_specs import KILL_ARGUMENT_SPEC
from ansible_collections.gpuops.remediation.plugins.module_utils.kill._kill import (
    SELECTION_ARGUMENT_SPEC, HolderKiller, HolderSelection, ended_pids, failures, refuse_beyond_selection,
    validate_kill_params, validate_selection_params,
)
from ansible_collections.gpuops.remediation.plugins.module_utils._mig_selection import narrowed_instances, scope_words
from ansible_collections.gpuops.remediation.plugins.module_utils._module import GpuModule

POLL_INTERVAL = 0.5


class GpuKillWorker:
    def __init__(self, module, patterns):
        self.module = module
        self.params = module.params
        self.run = Remediation(module)
        self.selection = HolderSelection(self.params, patterns)
        self.result = {"changed": False, "signalled": [], "left_alone": [], "zombies": [], "containers": [], "unconfirmed_containers": [], "thawed": [],
                       "gpus": [],
                       "still_listed": [], "journal": []}

    def _wait_driver_release(self, pids):
        """Polls the driver's process list (not a whole snapshot) until it lists none of `pids`, bounded by wait_timeout.
        Returns the driver's last answer; None when it gave none (a probe that failed or outlasted its deadline): that is
        no word that the processes are gone, and the caller inspects the node instead; waiting on would only repeat the
        probe's deadline on a driver that does not answer."""
        deadline = time.monotonic() + self.params["wait_timeout"]
        while True:
            after = self.run.driver_view()
            listed = set(p["pid"] for g in (after or {}).get("gpus", []) for p in g.get("processes", [])) & pids
            if after is None or not listed or time.monotonic() >= deadline:
                self.result["still_listed"] = sorted(listed)
                return after
            time.sleep(POLL_INTERVAL)

    def _end_selected(self):
        """Snapshot, select and end; under the node lock outside check mode, so that the plan is the node's now."""
        snapshot = self.run.snapshot(gpus=None)
        gpu_indexes = set(self.run.selected_gpus(snapshot))
        holders, left_alone = self.selection.select(snapshot, gpu_indexes)
        instances = narrowed_instances(snapshot["gpus"], self.params["gpus"])
        if instances:
            self.result["mig_scope"] = scope_words(instances)
        empty = [name for name in ("holders", "gpus", "users", "classes") if self.params[name] == []]
        if empty:
            self.result["msg"] = "%s=[]: no holder selected, nothing to end" % "=[], ".join(empty)
        killer = HolderKiller(self.module, self.run.journal, probed=self.run.probed)
        refuse_beyond_selection(self.module, killer, holders, snapshot, gpu_indexes)
        outcome = killer.end(holders)
        self.result.update((key, outcome[key]) for key in ("signalled", "zombies", "containers", "unconfirmed_containers", "thawed", "changed"))
        self.result["left_alone"] = left_alone + outcome["left_alone"]
        return snapshot, gpu_indexes

    def execute(self):
        with self.run.acting():
            snapshot, gpu_indexes = self._end_selected()
        self.run.report_restored(self.result)
        failed = failures(self.result)
        inspect_after = self.params["snapshot_after"] or bool(failed)
        after = None
        if self.result["changed"] and not self.module.check_mode:
            released = self._wait_driver_release(ended_pids(self.result))
            # Taken with the gpus option, so that it is snapshot_after as well: the report reads only the selected GPUs.
            # Also when the driver never answered the wait: the memory after is then the snapshot's word (unknown), not
            # the memory before less what the ended processes held.
            after = self.run.snapshot() if inspect_after or released is None else released
        self._report(snapshot, after, gpu_indexes)
        if inspect_after and not self.module.check_mode:
            self.result["snapshot_after"] = self.run.snapshot_after(after or snapshot)
        self.result["journal"] = self.run.journal.entries()
        if failed:
            self.module.fail_json(msg="gpu_kill failed: %s" % "; ".join(failed), **self.result)
        self.module.exit_json(**self.result)

    def _report(self, before, after, gpu_indexes):
        ended = ended_pids(self.result)
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
    spec = dict(SELECTION_ARGUMENT_SPEC, wait_timeout=dict(type="float", default=30.0), snapshot_after=dict(type="bool", default=True))
    spec.update(KILL_ARGUMENT_SPEC)
    module = GpuModule(argument_spec=action_argument_spec(**spec), supports_check_mode=True)
    validate_kill_params(module, on_node=True)
    if module.params["wait_timeout"] < 0:
        module.fail_json(msg="wait_timeout must be 0 or more seconds, got %r" % module.params["wait_timeout"])
    GpuKillWorker(module, validate_selection_params(module)).execute()


if __name__ == "__main__":
    main()
