#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""wsl_shutdown: stop a WSL distribution, every one and the WSL VM, or only what holds the GPU, so that its memory
comes back. Its documentation only: the action plugin of the same name does the work.
"""

from __future__ import annotations

DOCUMENTATION = r"""
module: wsl_shutdown
short_description: Stop a WSL distribution, every one and the WSL VM, or only what holds the GPU, so that its memory comes back
version_added: 1.0.0
description:
  - An action plugin that runs C(wsl.exe) on a Windows target through C(ansible.windows.win_command).
  - With O(distribution), runs C(wsl --terminate <distribution>); with O(gpu_holders), C(wsl --terminate) of each
    running distribution that holds the GPU, then C(wsl --shutdown) only if the user's WSL VM still holds GPU memory
    that no distribution accounts for; with neither, C(wsl --shutdown), which stops every distribution and the WSL VM
    with them. The distribution name reaches wsl.exe only as one argv element.
  - Changes something only when it runs. What happened is read from facts, never from wsl.exe's exit status or words
    alone - a terminated distribution is absent from C(wsl --list --running --quiet); after C(--shutdown) the user's WSL
    VM processes recorded before (pid and creation time from Win32_Process) are gone and no distribution runs.
    wsl.exe's UTF-16LE (with or without a BOM, or UTF-8 with C(WSL_UTF8=1)) is decoded by evidence.
  - Which VM is the user's WSL VM is a fact - its VM id (the owner SID of its C(vmmem)/C(vmmemWSL) process) is one the
    Host Compute Service lists with owner C(WSL), named by a WSL process (C(wslrelay.exe), C(wslhost.exe)) of that user;
    another VM (a Hyper-V VM's C(vmmem)) is never taken for it.
  - A host without WSL (wsl.exe cannot be started, or C(wsl --status) exits with its "not installed" status) is skipped
    with the reason in RV(skip_reason); nothing fails.
  - Uses C(C:\\Program Files\\WSL\\wsl.exe) (the Store WSL) when it exists, else the inbox C(wsl.exe).
  - Never stops the C(vmcompute) service and never kills C(vmmem) or C(vmmemWSL), which can crash the host.
  - Distributions belong to a user; run the task as the user who owns them (C(become) with C(become_method=runas)
    and C(become_user)), else it sees and stops only the connecting user's.
author:
  - gpuops maintainers (@gpuops)
extends_documentation_fragment:
  - gpuops.remediation.attributes
  - gpuops.remediation.attributes.CONTROLLER_ACTION
  - gpuops.remediation.attributes.WINDOWS
  - gpuops.remediation.win_journal
attributes:
  check_mode:
    support: full
    details:
      - Lists the running distributions and predicts the same C(changed), C(stopped) and C(commands); stops nothing.
      - With O(gpu_holders), a shutdown the real run adds because the VM still holds GPU memory after the terminate
        (memory no attribution gave a distribution) cannot be foreseen; the real run says so in RV(reason).
  diff_mode:
    support: none
options:
  distribution:
    description:
      - The distribution to terminate (letters, digits, C(.), C(_) and C(-), not C(-) first); a name that is not running changes nothing.
      - Unset (and O(gpu_holders) false) shuts WSL down, every distribution of the user and the WSL VM.
      - Mutually exclusive with O(gpu_holders).
    type: str
  gpu_holders:
    description:
      - Stop only what holds the GPU - the plan of the Windows ladder's C(wsl) rung. Each running distribution of the
        user is asked, as its root, whether a process of it has the GPU device C(/dev/dxg) open
        (C(wsl --distribution <name> --user root --exec find /proc ...)); those that do are terminated, those that
        do not are left running.
      - C(wsl --shutdown) follows only when the user's WSL VM holds GPU memory and either a running distribution could
        not be asked (no C(find) in it, say - RV(reason) names it) or none holds the GPU while the VM does, or the VM
        still holds GPU memory after the terminate. A WSL VM whose user is not known is never shut down.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Stop the distribution that holds GPU memory
  gpuops.remediation.wsl_shutdown:
    distribution: Ubuntu-22.04
  become: true
  become_method: ansible.builtin.runas
  become_user: ada

- name: Stop only the distributions that hold the GPU (and the VM if it still holds memory after)
  gpuops.remediation.wsl_shutdown:
    gpu_holders: true

- name: Shut WSL down for that user
  gpuops.remediation.wsl_shutdown:
  become: true
  become_method: ansible.builtin.runas
  become_user: ada
"""

RETURN = r"""
stopped:
  description: The distributions it stopped (or would stop, in check mode).
  returned: always
  type: list
  elements: str
  sample: [Ubuntu-22.04]
running_before:
  description: The running distributions before.
  returned: always
  type: list
  elements: str
running_after:
  description: The running distributions after (predicted in check mode); null when they could not be read after (the run failed).
  returned: always
  type: list
  elements: str
command:
  description: The last argv it ran (or would run); null when nothing runs.
  returned: always
  type: list
  elements: str
  sample: ["C:\\Program Files\\WSL\\wsl.exe", "--terminate", "Ubuntu-22.04"]
commands:
  description: Every argv it ran (or would run), in order - the terminates first, then the shutdown.
  returned: always
  type: list
  elements: list
vms_before:
  description: The VM memory processes before (pid, creation time, C(vm_id), C(vm_kind), C(wsl_owner), C(wsl_mine)).
  returned: always
  type: list
  elements: dict
vms_after:
  description: The VM memory processes after (predicted in check mode); null when they could not be read after.
  returned: always
  type: list
  elements: dict
reason:
  description: With O(gpu_holders), why the WSL VM is (or is not) shut down.
  returned: always
  type: str
left:
  description: With O(gpu_holders), the WSL VMs holding a GPU that this run cannot or may not stop, each with why.
  returned: always
  type: list
  elements: str
skip_reason:
  description: Why nothing was done on a host without WSL.
  returned: when skipped
  type: str
wsl_path:
  description: The wsl.exe used.
  returned: always
  type: str
journal:
  description:
    - The journal lines this run wrote on the host, in order; each has C(ts), C(run_id), C(id), C(phase) (C(intent)
      or C(outcome)), C(action) (C(wsl_terminate), C(wsl_shutdown)) and what it acted on; an outcome has C(ok) (what
      the facts after it say), C(rc) and C(message) (wsl.exe's exit status and words, kept for the report only).
  returned: always
  type: list
  elements: dict
interrupted_actions:
  description:
    - Actions an earlier run wrote the intent of and never the outcome (it was killed or lost the host mid-action),
      each with C(ts), C(run_id), C(action) and what it acted on (C(pid), C(name), C(gpu), C(user), C(distribution)...).
    - Reported once - outside check mode this run writes their missing outcome, marked C(interrupted).
  returned: always
  type: list
  elements: dict
simulated:
  description: Whether the host is a simulated Windows node.
  returned: always
  type: bool
"""
