#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: wsl_shutdown
short_description: Stop a WSL distribution, or every one and the WSL VM, so that the VM's GPU memory comes back
version_added: 1.0.0
description:
  - An action plugin that runs C(wsl.exe) on a Windows target through C(ansible.windows.win_command).
  - With O(distribution), runs C(wsl --terminate <distribution>); without it, C(wsl --shutdown), which stops every
    distribution and the WSL VM (C(vmmemWSL)) with them.
  - Changes something only when it runs; reads C(wsl --list --running --quiet) before and after, decoding wsl.exe's
    UTF-16LE (with or without a BOM, or UTF-8 with C(WSL_UTF8=1)) by evidence.
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
      - Lists the running distributions and predicts the same C(changed) and C(stopped); stops nothing.
  diff_mode:
    support: none
options:
  distribution:
    description:
      - The distribution to terminate (letters, digits, C(.), C(_) and C(-), not first); a name that is not running changes nothing.
      - Unset shuts WSL down, every distribution of the user and the WSL VM.
    type: str
"""

EXAMPLES = r"""
- name: Stop the distribution that holds GPU memory
  gpuops.remediation.wsl_shutdown:
    distribution: Ubuntu-22.04
  become: true
  become_method: ansible.builtin.runas
  become_user: ada

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
  description: The running distributions after (predicted in check mode).
  returned: always
  type: list
  elements: str
command:
  description: The argv it ran (or would run); null when nothing runs.
  returned: always
  type: list
  elements: str
  sample: ["C:\\Program Files\\WSL\\wsl.exe", "--terminate", "Ubuntu-22.04"]
wsl_path:
  description: The wsl.exe used.
  returned: always
  type: str
rc:
  description: wsl.exe's exit status.
  returned: when it ran
  type: int
message:
  description: What wsl.exe said when it failed.
  returned: when it ran
  type: str
journal:
  description:
    - The journal lines this run wrote on the host, in order; each has C(ts), C(run_id), C(id), C(phase) (C(intent)
      or C(outcome)), C(action) (C(wsl_terminate), C(wsl_shutdown)) and what it acted on; an outcome has C(ok).
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
