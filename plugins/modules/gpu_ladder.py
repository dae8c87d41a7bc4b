#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_ladder: walk the escalation ladder on a Linux GPU node, from the controller, until the stuck memory is back.
Its documentation only: the action plugin of the same name does the work.
"""

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_ladder
short_description: Helper of the gpu_reclaim role - walks the escalation ladder from the controller; call the role, not this module
version_added: 1.0.0
description:
  - A helper of role C(gpuops.remediation.gpu_reclaim), which calls it, drains and reboots where it pauses, and
    undrains after it. Operators call the role, or the playbook that runs it; a walk started from this module
    alone stops at its first pause, with the drain or the reboot left to the caller.
  - Runs on the controller and calls the collection's modules on the node, in the way of C(ansible.windows.win_updates),
    one rung at a time - V(kill) (M(gpuops.remediation.gpu_kill)), V(reset) (the kill, then
    M(gpuops.remediation.gpu_reset)), V(reload) (M(gpuops.remediation.nvidia_driver_reload)), V(graphics)
    (M(gpuops.remediation.gpu_graphics_restart)) and V(reboot).
  - Enters at the rung the snapshot's verdict names (never below it), takes it, reads the node again (from the
    module's C(snapshot_after), so nothing inspects for nothing), and goes one rung up only while GPU memory is
    still held. Stops at the first rung that worked, and never goes above O(max_rung). When the evidence needs a rung
    above O(max_rung), refuses before any action and says which rung and what would allow it. A GPU whose evidence needs
    a rung above the kill while working programs hold it (class V(busy)) is refused the same way, naming them and
    O(end_running_jobs); the walk then takes no rung that would reach that GPU.
  - Pauses where the controller must act between two rungs, and says so in RV(pending) - V(drain) before the first
    of O(destructive_rungs) when O(drain) is not V(none), V(reboot) before the reboot rung. The caller drains (or
    reboots) and calls again with O(continue_after), the RV(state) the last call returned in O(state), and that step's
    result in O(controller_result). The role gpuops.remediation.gpu_reclaim does exactly that.
  - In check mode, the first rung that would work is planned (its modules predict what they would do) and the walk stops
    there, since nothing changed on the node; a rung that would fail changes nothing, so the plan climbs past it as the
    real run does, and where the real run would fail the plan fails alike, with the same status and message.
  - Where the evidence needs a rung above O(max_rung) for some GPUs only, the walk takes the allowed rungs for the GPUs
    they help and names each other GPU with the rung it needs and the option that would allow it (status
    V(partly fixed)); it is refused whole only when no allowed rung helps any GPU.
  - The options of the modules it runs (the snapshot, journal and lock options, the kill options) are passed to them,
    and checked first with the modules' own checks, so that bad input fails the walk before any rung or drain.
author:
  - gpuops maintainers (@gpuops)
extends_documentation_fragment:
  - gpuops.remediation.attributes
  - gpuops.remediation.attributes.CONTROLLER_ACTION
  - gpuops.remediation.snapshot
  - gpuops.remediation.snapshot.ACTION
  - gpuops.remediation.kill
options:
  platform:
    description:
      - The node's ladder. V(linux) - V(kill), V(reset), V(reload), V(graphics), V(reboot). V(windows) - V(kill)
        (M(gpuops.remediation.win_gpu_reset) O(gpuops.remediation.win_gpu_reset#module:method=kill)), V(wsl)
        (M(gpuops.remediation.wsl_shutdown)), V(restart_adapter), V(logoff), V(reboot); the Windows node is inspected
        with M(gpuops.remediation.win_gpu_holders_info).
    type: str
    choices: [linux, windows]
    default: linux
  max_rung:
    description: The heaviest rung allowed, one of the platform's ladder. V(reboot) also needs O(allow_reboot).
    type: str
    choices: [kill, instance, reset, reload, graphics, reboot, wsl, restart_adapter, logoff]
    default: reload
  allow_reboot:
    description: Allow the reboot rung. Without it, a node that needs a reboot is refused, saying so.
    type: bool
    default: false
  destructive_rungs:
    description:
      - The rungs that take the node out of service; with O(drain), the walk pauses for the drain before the first of them.
      - Unset means V([reset, reload, graphics, reboot]) on Linux, V([restart_adapter, logoff, reboot]) on Windows.
    type: list
    elements: str
    choices: [kill, instance, reset, reload, graphics, reboot, wsl, restart_adapter, logoff]
  drain:
    description: The scheduler the caller drains the node from before the first destructive rung; V(none) never pauses for a drain.
    type: str
    choices: [none, slurm, kubernetes]
    default: none
  snapshot:
    description:
      - A snapshot of this node taken just before (a result of M(gpuops.remediation.gpu_holders_info)); empty takes one.
      - It is used only when it was taken for the same O(gpus) and at most O(snapshot_max_age) seconds ago (its
        C(scope)); otherwise the walk takes a new one.
    type: dict
    default: {}
  snapshot_max_age:
    description: Seconds after which a given O(snapshot) is too old to start the walk from.
    type: float
    default: 300.0
  kill_wait_timeout:
    description: Seconds the kill rung waits for the driver to stop listing the processes it ended (O(gpuops.remediation.gpu_kill#module:wait_timeout)).
    type: float
    default: 30.0
  reload_grace:
    description: Seconds the reload rung gives the processes of a stopped service to go.
    type: float
    default: 10.0
  health_check:
    description:
      - The health gate - after a reset or a reload rung that got the memory back, the walk runs
        M(gpuops.remediation.gpu_health_check) (C(dcgmi diag)) before the node goes back into service. A node whose
        GPUs fail it ends the walk V(failed) and stays out of service (RV(drain_followup) V(hold)).
      - V(auto) runs it where DCGM is installed (without C(dcgmi) the gate passes - no DCGM, no gate); V(never) never.
      - In check mode the plan says the gate would run; nothing runs.
    type: str
    choices: [auto, never]
    default: auto
  health_check_level:
    description: The level of the gate's diagnostic (O(gpuops.remediation.gpu_health_check#module:level)).
    type: int
    choices: [1, 2, 3, 4]
    default: 1
  health_check_timeout:
    description: Seconds the gate's diagnostic may take; past them the gate fails (O(gpuops.remediation.gpu_health_check#module:timeout)).
    type: float
    default: 300.0
  continue_after:
    description:
      - Continue the walk in O(state) after the controller step it paused for (V(drain), V(reboot)), or after the
        caller acted on RV(drain_followup) at the end (V(undrain)), with that step's result in O(controller_result).
        Unset starts a new walk.
      - O(max_rung), O(allow_reboot), O(destructive_rungs), O(drain) and O(gpus) must stay as the walk started.
    type: str
    choices: [drain, reboot, undrain]
  state:
    description: With O(continue_after), the RV(state) the previous call of this walk returned.
    type: dict
    default: {}
  controller_result:
    description:
      - The result of the step named by O(continue_after).
      - For V(drain) and V(undrain) - C(scheduler) (equal to O(drain)); C(slurm), the result of
        M(gpuops.remediation.slurm_drain) (C(ours) tells whether the drain is ours; C(msg) goes into the report);
        C(kubernetes), the result of the cordon (uncordon) task of C(kubernetes.core.k8s_drain), skipped when the node
        was already cordoned; and C(failure), the result of the task that failed, if one did. A failure fails the rung
        the drain was for, and the walk ends - no destructive rung runs on a node that could not be drained.
      - For V(reboot) - the result of the reboot task (C(failed), C(msg)).
    type: dict
    default: {}
  windows:
    description:
      - On a Windows host (O(platform=windows)), the values that replace the walk's own O(max_rung),
        O(destructive_rungs) and C(journal_path); an unset one keeps the walk's. On Linux they are not used, so a
        caller passes both platforms' settings and the walk takes its host's.
      - In O(option_names), C(windows.max_rung) (and so on) names the Windows variable for the messages.
    type: dict
    suboptions:
      max_rung:
        description: The heaviest rung allowed on a Windows host.
        type: str
        choices: [kill, wsl, restart_adapter, logoff, reboot]
      destructive_rungs:
        description: The rungs that take a Windows host out of service.
        type: list
        elements: str
        choices: [kill, wsl, restart_adapter, logoff, reboot]
      journal_path:
        description: The Windows host's journal (M(gpuops.remediation.win_gpu_reset) O(gpuops.remediation.win_gpu_reset#module:journal_path)).
        type: str
  option_names:
    description:
      - What the caller calls these options, for the messages (in the role, C(max_rung) is C(gpu_reclaim_max_rung)),
        so that a refusal names the variable to change. An option not named here is called by its own name.
    type: dict
    default: {}
attributes:
  check_mode:
    support: full
    details:
      - Plans the first rung with the same code that acts - its modules run in check mode and predict.
  diff_mode:
    support: none
  platform:
    support: full
    platforms: posix
    description: Target OS/families that can be operated against.
notes:
  - The walk's decisions live in the collection's C(plugins/module_utils/_verdict.py) and C(plugins/plugin_utils/ladder/_ladder_decisions.py)
    (see docs/internals.md).
seealso:
  - module: gpuops.remediation.gpu_holders_info
  - module: gpuops.remediation.gpu_kill
  - module: gpuops.remediation.gpu_reset
  - module: gpuops.remediation.nvidia_driver_reload
  - module: gpuops.remediation.gpu_graphics_restart
"""

EXAMPLES = r"""
- name: Walk the ladder up to the driver reload
  gpuops.remediation.gpu_ladder:
    max_rung: reload
    protect_names: [sshd]
  register: walk

- name: Show what happened
  ansible.builtin.debug:
    msg: "{{ walk.outcome.summary }}"
  when: walk.pending is none
"""

RETURN = r"""
module_seconds:
  description: The wall time of each module of RV(modules_run), in the same order (the module's transfer and its run).
  returned: always
  type: list
  elements: float
  sample: [0.52, 0.61]
run_id:
  description:
    - The run id every module of the walk named, and the scheduler steps must name - O(run_id) when given; else, on a
      call that continues a walk, the one it started with; else a new one, C(gpu_reclaim-<UTC time>).
  returned: always
  type: str
  sample: gpu_reclaim-20261202T010000.123456Z
pending:
  description: The controller step the walk waits for (V(drain), V(reboot)), or null when the walk has ended.
  returned: always
  type: str
  sample: drain
pending_rung:
  description: The rung the walk takes once the pending step is done.
  returned: always
  type: str
  sample: reset
drain_followup:
  description:
    - Once the walk has ended, what the scheduler needs - V(resume) (the memory is back; for Slurm also when the drain
      is another run's, left behind), V(release) (our Slurm drain stays, since the memory is still held), V(hold) (the
      GPUs failed the health gate - the Slurm node stays drained with a reason that names it, which no later run
      resumes), or null.
  returned: always
  type: str
needs_controller_step:
  description:
    - Whether the controller must take a step for the walk before it is done - the RV(pending) drain or reboot, or the
      RV(drain_followup) once it has ended; the roles reach their controller steps on it and decide nothing themselves.
  returned: always
  type: bool
slurm_state:
  description: With RV(drain_followup), the O(gpuops.remediation.slurm_drain#module:state) that does it - V(resumed), V(released) or V(held).
  returned: always
  type: str
slurm_drain_state:
  description:
    - With RV(pending) V(drain), the O(gpuops.remediation.slurm_drain#module:state) of the pause - V(drained) before the
      walk's first destructive rung, V(confirmed) before each later one (the drain checked again - an administrator's
      resume, or a job on the node, stops the walk).
  returned: always
  type: str
hold_reason:
  description: With RV(drain_followup) V(hold), why the node stays out of service (the health gate's reason); else null.
  returned: always
  type: str
modules_run:
  description: The modules this call ran on the node, in order.
  returned: always
  type: list
  elements: str
  sample: [gpuops.remediation.gpu_kill, gpuops.remediation.gpu_reset]
outcome:
  description:
    - Once the walk has ended, its outcome - C(status) (V(fixed), V(partly fixed), V(clean), V(planned), V(failed), V(refused),
      V(undetermined) - no memory known held, but a Windows GPU's ghost memory unknown - see docs/windows.md),
      C(msg), C(entry_rung), C(reasons), C(fixed_by), C(rungs_tried) (each with C(rung), C(changed), C(failed), C(msg),
      C(plan)), C(held_by), C(gpus) (memory before and after and C(freed_mib) per GPU), C(memory_freed_mib),
      C(seconds), C(drained), C(undrained), C(drain_notes), C(inspections), C(needs) (the GPUs left for a heavier rung,
      each with C(index), C(rung), C(reasons) and C(allow), the option that would allow it) and C(summary) (the lines to print).
    - C(health_check), when a reset or reload rung got the memory back (or would, in check mode) - the health gate's
      C(tool), C(level), C(result) (V(pass), V(fail), V(not_installed), V(not_run)), C(tests) and C(reason).
    - Null while a step is pending.
  returned: always
  type: dict
host_fails:
  description:
    - Whether the outcome fails the host - its C(status) V(failed), V(refused) or V(partly fixed) - as memory is still
      held or no allowed rung helped; the roles fail the host on it (with the outcome's C(msg)) and decide nothing themselves.
    - False while a step is pending.
  returned: always
  type: bool
state:
  description: The walk's state (plain JSON) - what a later call with O(continue_after) passes back in O(state).
  returned: always
  type: dict
"""
