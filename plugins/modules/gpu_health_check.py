#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_health_check: run DCGM's diagnostic on a Linux GPU node and tell whether its GPUs may go back into service."""

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_health_check
short_description: Run DCGM's diagnostic on a Linux GPU node and tell whether its GPUs may go back into service
version_added: 1.0.0
description:
  - Runs C(dcgmi diag -r <level> -j) (NVIDIA DCGM) on the node and reads its JSON result (DCGM 3 and DCGM 4 shapes).
    This is the health gate the ladder (M(gpuops.remediation.gpu_ladder)) runs after a reset or a driver reload
    that got the memory back, before the node goes back into its scheduler.
  - RV(health_check.result) is V(pass) when the diagnostic ran, no test failed and at least one test passed (a
    test that only warned passes, and its warning is in RV(health_check.reason)); V(fail) when a test failed, the
    diagnostic could not run (for example C(nv-hostengine) is not running, so dcgmi cannot reach DCGM's host
    engine), it printed no result, it exited non-zero, or it did not finish within O(timeout) seconds - in each
    case the GPUs' health is not confirmed, and RV(health_check.reason) says why.
  - V(not_installed) when C(dcgmi) is not on the node (no DCGM, no gate); V(not_run) in check mode, which runs
    nothing (a diagnostic of level 2 or more loads the GPUs for minutes).
  - Never fails the task because of the diagnostic's result; the caller decides (the ladder keeps a node whose
    gate failed out of service).
author:
  - gpuops maintainers (@gpuops)
extends_documentation_fragment:
  - gpuops.remediation.attributes
  - gpuops.remediation.attributes.INFO_MODULE
  - gpuops.remediation.attributes.LINUX_GPU
requirements:
  - NVIDIA DCGM (C(dcgmi), and C(nv-hostengine) running) on the target; without it the result is V(not_installed).
options:
  level:
    description:
      - The diagnostic level (C(dcgmi diag -r)). V(1) takes seconds and checks the software stack (deployment);
        V(2) adds memory and PCIe tests (about two minutes); V(3) and V(4) stress the GPUs for much longer.
    type: int
    choices: [1, 2, 3, 4]
    default: 1
  timeout:
    description:
      - Seconds to wait for the diagnostic; past it the result is V(fail) (the health is not confirmed) and dcgmi
        is left to its host engine. Raise it with O(level).
    type: float
    default: 300.0
  gpus:
    description:
      - DCGM GPU ids to test (C(dcgmi diag -i)). DCGM numbers GPUs as NVML does.
      - Left out (or null), every GPU of the node. An empty list (what a filter that matched nothing gives) selects no
        GPU, so nothing runs; RV(health_check.result) is V(not_run) and RV(health_check.reason) says so.
    type: list
    elements: int
  run_id:
    description: The run's identifier, written into the node journal with the check's intent and outcome.
    type: str
  journal_path:
    description:
      - The node journal (see M(gpuops.remediation.gpu_kill)); defaults to the node's. The check's start is written
        there before dcgmi runs, and its result after, so that a later run knows a check that never finished (a run
        killed during it) and does not resume a Slurm drain over it (M(gpuops.remediation.slurm_drain)).
    type: path
seealso:
  - module: gpuops.remediation.gpu_ladder
  - name: DCGM diagnostics
    description: NVIDIA's description of the diagnostic levels and their tests.
    link: https://docs.nvidia.com/datacenter/dcgm/latest/user-guide/dcgm-diagnostics.html
"""

EXAMPLES = r"""
- name: Check the GPUs after the reset
  gpuops.remediation.gpu_health_check:
    level: 1
  register: gate

- name: Keep the node out of service when the gate failed
  ansible.builtin.fail:
    msg: "{{ gate.health_check.reason }}"
  when: gate.health_check.result == 'fail'
"""

RETURN = r"""
health_check:
  description: The gate's result, as the ladder's outcome and the run report carry it.
  returned: always
  type: dict
  contains:
    tool:
      description: The tool, C(dcgmi).
      type: str
      sample: dcgmi
    level:
      description: The diagnostic level run.
      type: int
      sample: 1
    result:
      description: V(pass), V(fail), V(not_installed) or V(not_run) (check mode, or O(gpus) an empty list).
      type: str
      sample: fail
    tests:
      description: Each test DCGM reported, by name, with its result (C(Pass), C(Fail), C(Warn), C(Skip)).
      type: list
      elements: dict
      sample: [{"name": "software", "result": "Fail"}]
    reason:
      description: Why, in one line, with DCGM's own words for a failed or warning test.
      type: str
      sample: "dcgmi diag -r 1 failed: software Fail (GPU 0: Persistence Mode: Persistence mode for GPU 0 is disabled...)"
    dcgm_version:
      description: The DCGM version the diagnostic reported, when it printed a result.
      type: str
      returned: when dcgmi printed a result
      sample: 4.2.3
    seconds:
      description: How long the diagnostic ran.
      type: float
      returned: when dcgmi ran
      sample: 12.4
"""

import time

from ansible_collections.gpuops.remediation.plugins.module_utils._payload_imports import compile_each_file_once

compile_each_file_once()  # before the collection's other imports: zipimport compiles each of them once

from ansible_collections.gpuops.remediation.plugins.module_utils._command import CommandRunner
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._dcgm import (
    TOOL, command_text, diag_argv, health_check, judge, not_installed, timed_out,
)
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._deadline import ProbeFailed, ProbeTimeout
from ansible_collections.gpuops.remediation.plugins.module_utils.journal._writer import Journal
from ansible_collections.gpuops.remediation.plugins.module_utils._module import GpuModule
from ansible_collections.gpuops.remediation.plugins.module_utils._node import current_layout
from ansible_collections.gpuops.remediation.plugins.module_utils._verdict import NO_GPU_SELECTED
from ansible_collections.gpuops.remediation.plugins.module_utils.scheduler._slurm import GATE_ACTION

ARGUMENT_SPEC = dict(
    level=dict(type="int", choices=[1, 2, 3, 4], default=1),
    timeout=dict(type="float", default=300.0),
    gpus=dict(type="list", elements="int"),
    run_id=dict(type="str"),
    journal_path=dict(type="path"),
)


def run_diag(module, dcgmi, level, gpus, timeout):
    """The health check of one run of dcgmi diag, bounded by timeout (the run waits in a child, like every probe)."""
    argv = diag_argv(dcgmi, level, gpus)
    started = time.monotonic()
    try:
        rc, out, err = CommandRunner(module).probe(argv, timeout=timeout)
    except ProbeTimeout:
        check = timed_out(level, timeout)
    except ProbeFailed as exc:
        check = health_check(level, "fail", "%s could not be run: %s" % (command_text(level), exc))
    else:
        check = judge(level, rc, out, err)
    check["seconds"] = round(time.monotonic() - started, 1)
    return check


def main():
    module = GpuModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    level, timeout, gpus = module.params["level"], module.params["timeout"], module.params["gpus"]
    if timeout <= 0:
        module.fail_json(msg="timeout must be more than 0 seconds, got %r" % timeout)
    negative = [gpu for gpu in gpus or [] if gpu < 0]
    if negative:
        module.fail_json(msg="gpus: %s not a GPU id (0 or more)" % ", ".join(map(str, negative)))
    if gpus == []:
        module.exit_json(changed=False, health_check=health_check(level, "not_run", NO_GPU_SELECTED))
    dcgmi = current_layout().command(module, TOOL)
    if dcgmi is None:
        check = not_installed(level)
    elif module.check_mode:
        check = health_check(level, "not_run", "check mode: would run %s" % command_text(level))
    else:
        journal = Journal(module.params["journal_path"] or current_layout().journal_file, run_id=module.params["run_id"])
        entry = journal.intent(GATE_ACTION, level=level, gpus=gpus, command=command_text(level))
        check = run_diag(module, dcgmi, level, gpus, timeout)
        journal.outcome(entry, check["result"] == "pass", result=check["result"], reason=check.get("reason"))
    module.exit_json(changed=False, health_check=check)


if __name__ == "__main__":
    main()
