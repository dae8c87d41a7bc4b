#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_mig_layout: keep a node's MIG layout across a reboot - record it in the journal before, create it again after."""

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_mig_layout
short_description: Keep the MIG layout of a node's GPUs across a reboot
version_added: 1.0.0
description:
  - A reboot leaves MIG mode on (A100, H100 and H200 keep it) and no MIG instance at all. The reboot rung of the ladder
    (M(gpuops.remediation.gpu_ladder)) runs this module before the reboot with O(state=recorded) and after it with
    O(state=restored).
  - O(state=recorded) reads the layout of every GPU of the node with MIG mode on (per GPU, its GPU instances with their
    profiles and placements and their compute instances) and journals it (action C(mig_layout)), as
    M(gpuops.remediation.gpu_reset) does before a reset. A GPU whose MIG listing fails is refused (an empty layout recorded
    and then "restored" would lose it), and so is a GPU whose MIG mode change is pending (the reboot would apply it as a
    side effect). Check mode reads the layout, says what would be recorded and created again, writes nothing, and fails
    where the real run would.
  - O(state=restored) creates again, under the node lock, what is missing of each layout this run (O(run_id)) recorded
    and has not restored yet, on the GPU with the recorded UUID, reads it back and journals the outcome; the module fails
    naming each instance that is missing. A run that died between the reboot and the restore leaves its record in the
    journal, and the next run that acts on the node restores it (M(gpuops.remediation.gpu_mig_recreate) reports it as
    C(restored_mig_layouts)).
  - A node without a GPU in MIG mode has nothing to record; the module then changes nothing.
  - Linux only (Windows has no MIG).
author:
  - gpuops maintainers (@gpuops)
extends_documentation_fragment:
  - gpuops.remediation.attributes
  - gpuops.remediation.attributes.ACTION_MODULE
  - gpuops.remediation.attributes.LINUX_GPU
  - gpuops.remediation.snapshot
  - gpuops.remediation.snapshot.ACTION
options:
  state:
    description:
      - V(recorded) before the reboot, V(restored) after it (with the same O(run_id)).
    type: str
    choices: [recorded, restored]
    required: true
"""

EXAMPLES = r"""
- name: Record the MIG layout before the reboot
  gpuops.remediation.gpu_mig_layout:
    state: recorded
    run_id: "{{ run_id }}"

- name: Reboot the node
  ansible.builtin.reboot:

- name: Create the recorded MIG layout again
  gpuops.remediation.gpu_mig_layout:
    state: restored
    run_id: "{{ run_id }}"
"""

RETURN = r"""
mig_layout:
  description:
    - O(state=recorded), the layout read, as M(gpuops.remediation.gpu_reset) returns it (C(gpus), C(recorded), in check
      mode C(would_restore)); null when no GPU has MIG mode on.
  returned: with O(state=recorded)
  type: dict
mig_layouts:
  description:
    - O(state=restored), per layout this run recorded, the report of its restore (C(gpus), C(recorded), C(now),
      C(created), C(missing), C(errors), C(ok)); in check mode C(gpus), C(recorded) and C(would_restore) instead.
  returned: with O(state=restored)
  type: list
  elements: dict
plan:
  description: One line per GPU, what the run does (in check mode, would do).
  returned: always
  type: list
  elements: str
error:
  description: Why the module failed (a listing that failed, a pending MIG mode change, an instance not back).
  returned: on failure
  type: str
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
from ansible_collections.gpuops.remediation.plugins.module_utils._mig_keeper import (
    MigLayoutError, failure_message, keeper_for, planned, refuse_pending, restore_left_layout, restore_plan,
)
from ansible_collections.gpuops.remediation.plugins.module_utils._mig_layout import reboot_plan_line
from ansible_collections.gpuops.remediation.plugins.module_utils._module import GpuModule
from ansible_collections.gpuops.remediation.plugins.module_utils.journal._evidence import own_unrestored_layouts
from ansible_collections.gpuops.remediation.plugins.module_utils.journal._reader import recent_records


class LayoutAcrossReboot:
    def __init__(self, module):
        self.module = module
        self.run = Remediation(module)
        self.result = {"changed": False, "plan": [], "journal": []}

    def execute(self):
        with self.run.acting():
            if self.module.params["state"] == "recorded":
                self._record()
            else:
                self._restore()
        self.run.report_restored(self.result)
        self.result["journal"] = self.run.journal.entries()
        if "error" in self.result:
            details = dict((key, value) for key, value in self.result.items() if key != "msg")
            self.module.fail_json(msg="gpu_mig_layout failed: %s" % self.result["error"], **details)
        self.module.exit_json(**self.result)

    def _record(self):
        snapshot = self.run.snapshot(gpus=None)  # a reboot reaches every GPU of the node
        refuse_pending(self.module, snapshot, "the reboot")
        keeper = keeper_for(self.module, self.run.layout, self.run.journal, snapshot, [gpu["index"] for gpu in snapshot["gpus"]])
        self.result["mig_layout"] = None
        if keeper is None:
            return
        try:
            if self.module.check_mode:
                self.result["mig_layout"] = planned(keeper)
            else:
                self.result["mig_layout"] = {"gpus": keeper.gpus, "recorded": keeper.record(keeper.gpus, reboot=True)}
        except MigLayoutError as exc:
            self.result["error"] = "%s; nothing was recorded, and the reboot would lose the layout" % exc
            return
        self.result["plan"] = [reboot_plan_line(self.result["mig_layout"]["recorded"], self.module.check_mode)]

    def _restore(self):
        records, error = recent_records(self.run.journal.path)
        if error:
            self.module.fail_json(msg=error, changed=False)
        mine = own_unrestored_layouts(records, self.run.journal.run_id)
        if self.module.check_mode:
            try:
                self.result["mig_layouts"] = [restore_plan(self.module, self.run.layout, self.run.journal, record) for record in mine]
            except MigLayoutError as exc:
                self.result["error"] = str(exc)
                return
            self.result["plan"] = [planned_line(report) for report in self.result["mig_layouts"]]
            return
        reports = [restore_left_layout(self.module, self.run.layout, self.run.journal, record) for record in mine]
        self.result["mig_layouts"] = reports
        self.result["changed"] = any(report["created"] for report in reports)
        self.result["plan"] = [restored_line(report) for report in reports]
        failed = "; ".join(failure_message(report) for report in reports if not report["ok"])
        if failed:
            self.result["error"] = failed


NOT_REBOOTED = "the node has not rebooted since the layout was recorded, so it was never lost"


def restored_line(report):
    if report.get("not_rebooted"):
        return "created again: nothing (%s)" % NOT_REBOOTED
    return "created again: %s" % ("; ".join(report["created"]) or "nothing (the layout was there)")


def planned_line(report):
    if report.get("not_rebooted"):
        return "would create again: nothing (%s)" % NOT_REBOOTED
    return "would create again: %s" % ("; ".join(report["would_restore"]) or "nothing")


def main():
    module = GpuModule(argument_spec=action_argument_spec(state=dict(type="str", choices=["recorded", "restored"], required=True)),
                       supports_check_mode=True)
    LayoutAcrossReboot(module).execute()


if __name__ == "__main__":
    main()
