#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_mig_recreate: the instance rung - destroy a MIG instance holding ghost memory and create it again in its place."""

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_mig_recreate
short_description: Get a MIG instance's stuck memory back by creating the instance again, its neighbours untouched
version_added: 1.0.0
description:
  - The instance rung of the ladder, between kill and reset. On a GPU with MIG mode on, a GPU instance whose memory no
    live process in it accounts for (ghost memory, judged per instance by M(gpuops.remediation.gpu_holders_info)) is
    destroyed (its compute instances, then the GPU instance, C(nvidia-smi mig -dci) and C(-dgi)) and created again with
    the same profile and placement and the same compute instance profiles (C(-cgi <profile>:<placement>), then C(-cci)),
    argv only. The other instances of the GPU, and the jobs in them, are not touched.
  - Only when nothing holds the instance (no process has its C(/dev/nvidia-caps) node open, none is listed in it by the
    driver); an instance with a holder is refused, naming it. An instance whose profile or placement is unknown is
    refused too (it could not be put back exactly), and so is one whose compute instances O(gpus) names only in part
    (V(0:3/0) when GPU instance 3 also has compute instance 1), since re-creating it would destroy them all.
  - Under the node lock. The GPU's layout is journaled first (action C(mig_layout), as M(gpuops.remediation.gpu_reset)
    journals it), every command after it; the instance is then created from that record and the layout read back, so a
    run killed between the destroy and the create is restored by the next run that acts on the node. A failure names
    what is missing. Check mode names each instance, its profile and its placement, and changes nothing. A second run
    finds no ghost memory and changes nothing.
  - Linux only (Windows has no MIG).
author:
  - gpuops maintainers (@gpuops)
extends_documentation_fragment:
  - gpuops.remediation.attributes
  - gpuops.remediation.attributes.ACTION_MODULE
  - gpuops.remediation.attributes.LINUX_GPU
  - gpuops.remediation.snapshot
  - gpuops.remediation.snapshot.ACTION
options: {}
"""

EXAMPLES = r"""
- name: Create again the MIG instances of GPU 0 that hold ghost memory
  gpuops.remediation.gpu_mig_recreate:
    gpus: [0]

- name: Only instance 3 of GPU 0 (as an Xid line names it, GPU-I:03)
  gpuops.remediation.gpu_mig_recreate:
    gpus: ["0:3"]
"""

RETURN = r"""
instances:
  description:
    - The instances re-created (in check mode, that would be), each with C(gpu), C(gi) (its id before), C(label),
      C(profile), C(profile_id), C(start), C(size), C(compute) (compute instance profile ids), C(ghost_mib) (before) and,
      after a real run, C(recreated).
  returned: always
  type: list
  elements: dict
refused:
  description: Instances with ghost memory left alone, each as in RV(instances) with C(why) (a holder in it, an unknown placement).
  returned: always
  type: list
  elements: dict
plan:
  description: One line per instance, what the run does (in check mode, would do).
  returned: always
  type: list
  elements: str
mig_layout:
  description: Per GPU acted on, the layout journaled and read back, as M(gpuops.remediation.gpu_reset) returns it.
  returned: when an instance was re-created
  type: list
  elements: dict
error:
  description: Why the rung failed (a command refused, an instance not back, an instance refused).
  returned: on failure
  type: str
snapshot_after:
  description: The node after this run, as M(gpuops.remediation.gpu_holders_info) returns it.
  returned: not in check mode
  type: dict
interrupted_actions:
  description: Actions an earlier run announced in the journal and never finished, as M(gpuops.remediation.gpu_reset) reports them.
  returned: when there were any
  type: list
  elements: dict
restored_mig_layouts:
  description: The MIG layouts an interrupted run recorded and never restored, which this run restored.
  returned: when there were any
  type: list
  elements: dict
journal:
  description: The journal lines this run wrote.
  returned: always
  type: list
  elements: dict
"""

from ansible_collections.gpuops.remediation.plugins.module_utils._payload_imports import compile_each_file_once

compile_each_file_once()  # before the collection's other imports: zipimport compiles each of them once

from ansible_collections.gpuops.remediation.plugins.module_utils._action import Remediation, action_argument_spec
from ansible_collections.gpuops.remediation.plugins.module_utils._command import CommandRunner
from ansible_collections.gpuops.remediation.plugins.module_utils._mig_keeper import MigLayoutError, MigLayoutKeeper, failure_message
from ansible_collections.gpuops.remediation.plugins.module_utils._mig_recreate import destroy_argvs, layout_line, plan_line, recreate_plan, with_listed_compute
from ansible_collections.gpuops.remediation.plugins.module_utils._mig_selection import narrowed_instances
from ansible_collections.gpuops.remediation.plugins.module_utils._module import GpuModule


class InstanceRecreator:
    def __init__(self, module):
        self.module = module
        self.run = Remediation(module)
        self.result = {"changed": False, "instances": [], "refused": [], "plan": [], "journal": []}
        self._after = None

    def execute(self):
        with self.run.acting():
            self._plan_and_act()
        self.run.report_restored(self.result)
        self.result["plan"] = [layout_line(report["gpus"], report["of_run"]) for report in self.result.get("restored_mig_layouts") or []] \
            + self.result["plan"]
        self.result["journal"] = self.run.journal.entries()
        if not self.module.check_mode:
            self.result["snapshot_after"] = self.run.snapshot_after(self._after)
        if self.result["refused"]:
            self._fail_with("left alone: " + "; ".join("%s: %s" % (entry["label"], entry["why"]) for entry in self.result["refused"]))
        if "error" in self.result:
            details = dict((key, value) for key, value in self.result.items() if key != "msg")
            self.module.fail_json(msg="gpu_mig_recreate failed: %s" % self.result["error"], **details)
        self.module.exit_json(**self.result)

    def _plan_and_act(self):
        snapshot = self._after = self.run.snapshot()
        # What an interrupted run left unrestored: the real run restored it under the lock already (report_restored).
        left = snapshot.get("mig_layouts_unrestored") or []
        self.result["plan"] = [layout_line(each["gpus"], each["run_id"]) for each in left]
        self.result["changed"] = bool(left)
        to_recreate, self.result["refused"] = recreate_plan(snapshot, self.module.params["ghost_threshold_mib"],
                                                            narrowed_instances(snapshot["gpus"], self.module.params["gpus"]))
        if to_recreate:
            gpus = sorted(set(entry["gpu"] for entry in to_recreate))
            try:
                with_listed_compute(to_recreate, MigLayoutKeeper(self.module, self.run.layout, self.run.journal, gpus).read(gpus))
            except MigLayoutError as exc:
                self.module.fail_json(msg="gpu_mig_recreate failed: %s; no instance was destroyed" % exc, changed=False)
        self.result["instances"] = to_recreate
        self.result["plan"] += [plan_line(entry) for entry in to_recreate]
        if not to_recreate:
            return
        self.result["changed"] = True
        if self.module.check_mode:
            return
        for gpu in sorted(set(entry["gpu"] for entry in to_recreate)):
            self._recreate_on(gpu, [entry for entry in to_recreate if entry["gpu"] == gpu])
        self._after = self.run.snapshot(gpus=None)

    def _recreate_on(self, gpu, entries):
        """Journal the GPU's layout, destroy the instances, create them again from the record, read it back."""
        keeper = MigLayoutKeeper(self.module, self.run.layout, self.run.journal, [gpu])
        try:
            keeper.record([gpu])
        except MigLayoutError as exc:
            self._fail_with("GPU %s: %s; no instance was destroyed" % (gpu, exc))
            return
        runner = CommandRunner(self.module, self.run.journal)
        failed = set()
        for entry in entries:
            for argv in destroy_argvs(keeper.nvidia_smi, entry):
                rc, out, err = runner.act(argv, "mig_destroy", keep_stdout=True, gpu=gpu, gpu_instance=entry["gi"])
                if rc != 0:
                    failed.add(entry["gi"])
                    self._fail_with("%s: %s" % (entry["label"], ((out or err).strip().splitlines() or ["exit %d" % rc])[-1]))
                    break
        report = keeper.restore()
        self.result.setdefault("mig_layout", []).append(report)
        for entry in entries:
            entry["recreated"] = entry["gi"] not in failed and report["ok"]
        if not report["ok"]:
            self._fail_with(failure_message(report))

    def _fail_with(self, why):
        self.result["error"] = "; ".join(part for part in (self.result.get("error"), why) if part)


def main():
    module = GpuModule(argument_spec=action_argument_spec(), supports_check_mode=True)
    InstanceRecreator(module).execute()


if __name__ == "__main__":
    main()
