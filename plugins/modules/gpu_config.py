#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_config: set the compute mode and persistence mode of GPUs through NVML, idempotently."""

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_config
short_description: Set the compute mode and persistence mode of GPUs through NVML, idempotently
version_added: 1.0.0
description:
  - Sets, per GPU, the compute mode and the persistence mode through NVML (C(nvmlDeviceSetComputeMode),
    C(nvmlDeviceSetPersistenceMode)), reading both first and changing only what differs. A second run with the same
    options changes nothing.
  - V(EXCLUSIVE_PROCESS) keeps two jobs from sharing a GPU (and fragmenting its memory); the mode takes effect at once
    and, on Linux, lasts until the driver is reloaded or the node reboots (NVML resets it to C(Default)), so run this
    at every boot or from the C(gpu_node_prep) role.
  - The driver applies a compute mode at once and keeps the contexts that exist (NVML documents no idle requirement
    for either setter), so a change made under running jobs would not do what it says. This module refuses, before it
    changes anything and naming each process (pid, name), to set V(EXCLUSIVE_PROCESS) on a GPU where more than one
    compute process runs, or V(PROHIBITED) on a GPU where any compute process runs, unless O(allow_busy=true).
    V(DEFAULT) and persistence mode are set whoever runs.
  - Refuses, naming the GPU, a setting NVML cannot make there - persistence mode on a GPU that reports none (Windows,
    WDDM), the compute mode of a GPU in MIG mode (NVML sets it per MIG device), a GPU that fell off the bus - and any
    change when not run as root (NVML's setters answer C(NVML_ERROR_NO_PERMISSION)). Check mode refuses alike.
  - Takes the node lock (the lock of the remediation modules) for the read, the change and the read-back, and journals
    each setting before and after it is made. The result is what NVML reads back after the change.
author:
  - gpuops maintainers (@gpuops)
requirements:
  - nvidia-ml-py (C(import pynvml)) on the target; the C(gpu_node_prep) role installs it
extends_documentation_fragment:
  - gpuops.remediation.attributes
  - gpuops.remediation.attributes.ACTION_MODULE
  - gpuops.remediation.attributes.LINUX_GPU
  - gpuops.remediation.snapshot.ACTION
options:
  gpus:
    description:
      - The GPUs to set, each by index, UUID or PCI bus id. Left out (or null), every GPU of the node; an empty list
        selects none, and nothing is set.
    type: list
    elements: str
  compute_mode:
    description:
      - The compute mode to set, one of V(DEFAULT) (any number of processes), V(EXCLUSIVE_PROCESS) (one process at a
        time) or V(PROHIBITED) (no compute process), in any case (V(Exclusive_Process), as the snapshot spells it, is the
        same). V(EXCLUSIVE_THREAD) is deprecated by NVIDIA and refused with a message.
      - Unset leaves the compute mode as it is.
    type: str
  persistence_mode:
    description:
      - Enable or disable persistence mode (the driver keeps the GPU initialised with no client). Unset leaves it as it
        is. NVIDIA recommends the C(nvidia-persistenced) daemon over this legacy setting where it runs.
    type: bool
  allow_busy:
    description:
      - Set V(EXCLUSIVE_PROCESS) or V(PROHIBITED) on a GPU where compute processes run that the mode does not allow.
        They keep running; only new processes are held to the mode.
    type: bool
    default: false
  probe_timeout:
    description:
      - Seconds each NVML call (the read, the change, the read-back) may take before it is abandoned (a wedged driver
        blocks for ever); the module then fails, saying so.
    type: float
    default: 10.0
seealso:
  - module: gpuops.remediation.gpu_holders_info
  - module: gpuops.remediation.gpu_kill
  - name: NVML device commands (nvmlDeviceSetComputeMode, nvmlDeviceSetPersistenceMode)
    description: What each setter does, and that each needs root.
    link: https://docs.nvidia.com/deploy/nvml-api/group__nvmlDeviceCommands.html
"""

EXAMPLES = r"""
- name: One process per GPU, persistence mode on, on every GPU
  gpuops.remediation.gpu_config:
    compute_mode: EXCLUSIVE_PROCESS
    persistence_mode: true
  become: true

- name: Back to the default compute mode on GPU 2 only
  gpuops.remediation.gpu_config:
    gpus: ["2"]
    compute_mode: DEFAULT
  become: true
"""

RETURN = r"""
gpus:
  description: One entry per selected GPU.
  returned: always
  type: list
  elements: dict
  contains:
    index: {description: "GPU index.", type: int, returned: always}
    uuid: {description: "GPU UUID.", type: str, returned: always}
    pci_bus_id: {description: "PCI bus id.", type: str, returned: always}
    before:
      description: The settings read before (C(compute_mode) as the snapshot spells it, C(persistence_mode)).
      type: dict
      returned: always
      sample: {"compute_mode": "Default", "persistence_mode": false}
    after:
      description: The settings NVML reads back after the change (in check mode, the prediction).
      type: dict
      returned: always
      sample: {"compute_mode": "Exclusive_Process", "persistence_mode": true}
    changed: {description: "Whether a setting of this GPU was changed (in check mode, would be).", type: bool, returned: always}
settings:
  description: Each setting made (in check mode, that would be made), in order, with C(ok) and, on failure, the NVML error.
  returned: always
  type: list
  elements: dict
  sample: [{"index": 0, "setting": "compute_mode", "value": "Exclusive_Process", "ok": true, "error": null, "message": null}]
journal:
  description: The journal lines this run wrote.
  returned: always
  type: list
  elements: dict
"""

import os

from ansible.module_utils.basic import missing_required_lib

from ansible_collections.gpuops.remediation.plugins.module_utils._payload_imports import compile_each_file_once

compile_each_file_once()  # before the collection's other imports: zipimport compiles each of them once

from ansible_collections.gpuops.remediation.plugins.module_utils._argument_specs import ACTION_ARGUMENT_SPEC
from ansible_collections.gpuops.remediation.plugins.module_utils._action import node_locked
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._deadline import ProbeFailed, ProbeTimeout, run_with_deadline
from ansible_collections.gpuops.remediation.plugins.module_utils._gpu_config import (
    apply_changes, busy_message, busy_reason, changes_for, compute_mode_problem, current_settings, failure_hint, unsupported,
    wanted_settings,
)
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._gpu_probe import BackendUnavailable, probe_gpus
from ansible_collections.gpuops.remediation.plugins.module_utils.journal._files import path_failure
from ansible_collections.gpuops.remediation.plugins.module_utils.journal._writer import Journal
from ansible_collections.gpuops.remediation.plugins.module_utils._module import GpuModule
from ansible_collections.gpuops.remediation.plugins.module_utils._node import current_layout
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._process import read_process
from ansible_collections.gpuops.remediation.plugins.module_utils._snapshot import UnknownGpu, select_gpus, unknown_gpu_message
from ansible_collections.gpuops.remediation.plugins.module_utils._verdict import NO_GPU_SELECTED

ARGUMENT_SPEC = dict(
    ACTION_ARGUMENT_SPEC,
    gpus=dict(type="list", elements="str"),
    compute_mode=dict(type="str"),
    persistence_mode=dict(type="bool"),
    allow_busy=dict(type="bool", default=False),
    probe_timeout=dict(type="float", default=10.0),
)


def validate_params(module):
    params = module.params
    problem = compute_mode_problem(params["compute_mode"])
    if problem:
        module.fail_json(msg=problem, changed=False)
    if params["probe_timeout"] <= 0:
        module.fail_json(msg="probe_timeout must be greater than 0, got %r" % params["probe_timeout"], changed=False)
    if params["lock_timeout"] < 0:
        module.fail_json(msg="lock_timeout must be 0 or more seconds, got %r" % params["lock_timeout"], changed=False)


class GpuConfigWorker:
    def __init__(self, module):
        self.module = module
        self.params = module.params
        self.layout = current_layout()
        self.journal = Journal(self.params["journal_path"] or self.layout.journal_file, run_id=self.params["run_id"])
        failure = path_failure(self.journal.path, bool(self.params["journal_path"]))
        if failure:
            module.fail_json(msg=failure, changed=False)
        self.wanted = wanted_settings(self.params["compute_mode"], self.params["persistence_mode"])
        self.result = {"changed": False, "gpus": [], "settings": [], "journal": []}

    def fail(self, msg):
        self.result["journal"] = self.journal.entries()
        self.module.fail_json(msg=msg, **self.result)

    def read_gpus(self):
        """The GPUs as NVML reads them now, each compute process named from /proc."""
        try:
            probed, report = probe_gpus(self.module, self.layout, "nvml", self.params["probe_timeout"])
        except BackendUnavailable:
            self.module.fail_json(msg=missing_required_lib("nvidia-ml-py (import pynvml)"), **self.result)
        if probed is None:
            self.fail("NVML did not answer: %s" % report["error"])
        for gpu in probed["gpus"]:
            for proc in gpu.get("processes") or []:
                proc["name"] = proc.get("name") or (read_process(proc["pid"]) or {}).get("name")
        return probed["gpus"]

    def select(self, gpus):
        try:
            indexes = select_gpus(gpus, self.params["gpus"])
        except UnknownGpu as exc:
            self.fail(unknown_gpu_message(exc))
        return [gpu for gpu in gpus if gpu["index"] in indexes]

    def plan(self, selected):
        """[(gpu, changes)] for the selected GPUs; fails, changing nothing, on what the driver or the policy refuses."""
        plan = [(gpu, changes_for(gpu, self.wanted)) for gpu in selected]
        problems = [unsupported(gpu, changes) for gpu, changes in plan if changes]
        problems = [problem for problem in problems if problem]
        if problems:
            self.fail("gpu_config refused, nothing changed: %s" % "; ".join(problems))
        if any(changes for gpu, changes in plan) and os.geteuid() != 0:
            self.fail("gpu_config refused, nothing changed: changing GPU settings needs root (NVML's setters answer "
                      "NVML_ERROR_NO_PERMISSION otherwise); run the task with become: true")
        busy = [(gpu, busy_reason(gpu, changes)) for gpu, changes in plan]
        busy = [(gpu, reason) for gpu, reason in busy if reason]
        if busy and not self.params["allow_busy"]:
            self.fail(busy_message(busy))
        return plan

    def apply(self, plan):
        """Set the changes through NVML in the deadline child, journaled as one intent and one outcome per GPU."""
        for gpu, changes in plan:
            if not changes:
                continue
            item = {"index": gpu["index"], "uuid": gpu["uuid"], "changes": changes}
            try:
                entry = self.journal.intent("gpu_config", gpu=gpu["index"], uuid=gpu["uuid"], settings=changes)
            except OSError as exc:
                self.fail("journal_path: %r cannot be written: %s; nothing changed on GPU %s" % (self.journal.path, exc, gpu["index"]))
            try:
                outcomes = run_with_deadline(lambda item=item: apply_changes(self.layout, [item]), self.params["probe_timeout"])
            except (ProbeTimeout, ProbeFailed) as exc:
                self.journal.outcome(entry, False, error=str(exc))
                self.result["changed"] = True  # the driver may have made part of it
                self.fail("GPU %s: NVML gave no result for %s: %s" % (gpu["index"], changes, exc))
            self.result["settings"].extend(outcomes)
            failed = [outcome for outcome in outcomes if not outcome["ok"]]
            self.journal.outcome(entry, not failed, settings=outcomes)
            self.result["changed"] = self.result["changed"] or any(outcome["ok"] for outcome in outcomes)
            if failed:
                bad = failed[0]
                self.fail("GPU %s: setting %s to %r failed: %s (%s); %s" % (
                    gpu["index"], bad["setting"], bad["value"], bad["message"], bad["error"], failure_hint(bad["error"])))

    def report(self, plan, after):
        """The per-GPU result and the diff; after: {index: settings} read back (or predicted in check mode)."""
        before_diff, after_diff = {}, {}
        for gpu, changes in plan:
            entry = {"index": gpu["index"], "uuid": gpu["uuid"], "pci_bus_id": gpu["pci_bus_id"], "before": current_settings(gpu),
                     "after": after[gpu["index"]], "changed": bool(changes)}
            self.result["gpus"].append(entry)
            label = "GPU %s (%s)" % (gpu["index"], gpu["uuid"])
            before_diff[label], after_diff[label] = entry["before"], entry["after"]
        self.result["diff"] = {"before": before_diff, "after": after_diff}

    def read_back(self, plan):
        """The settings NVML reads now for the planned GPUs; fails when one is not what was set."""
        now = dict((gpu["index"], current_settings(gpu)) for gpu in self.read_gpus())
        for gpu, changes in plan:
            wrong = dict((setting, now[gpu["index"]][setting]) for setting, value in changes.items() if now[gpu["index"]][setting] != value)
            if wrong:
                self.fail("GPU %s reads %s after it was set to %s" % (gpu["index"], wrong, changes))
        return now

    def run(self):
        if self.params["gpus"] == []:
            self.result["msg"] = NO_GPU_SELECTED  # an empty selection selects nothing: nothing is set
        plan = self.plan(self.select(self.read_gpus()))
        if self.module.check_mode:
            self.result["changed"] = any(changes for gpu, changes in plan)
            self.result["settings"] = [{"index": gpu["index"], "setting": setting, "value": value, "ok": True, "error": None,
                                        "message": None} for gpu, changes in plan for setting, value in changes.items()]
            after = dict((gpu["index"], dict(current_settings(gpu), **changes)) for gpu, changes in plan)
        else:
            self.apply(plan)
            after = self.read_back(plan)
        self.report(plan, after)

    def execute(self):
        if self.module.check_mode:
            self.run()
        else:
            with node_locked(self.module, self.layout):
                self.run()
        self.result["journal"] = self.journal.entries()
        self.module.exit_json(**self.result)


def main():
    module = GpuModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True, required_one_of=[("compute_mode", "persistence_mode")])
    validate_params(module)
    GpuConfigWorker(module).execute()


if __name__ == "__main__":
    main()
