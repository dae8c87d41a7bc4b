#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""win_gpu_reset: get GPU memory back on a Windows node - end holders, restart a GPU's adapter, log a session off,
restart the shell. Its documentation only: the action plugin of the same name does the work.
"""

from __future__ import annotations

DOCUMENTATION = r"""
module: win_gpu_reset
short_description: Get GPU memory back on a Windows node - end holders, restart a GPU's adapter, log a session off, restart the shell
version_added: 1.0.0
description:
  - An action plugin that runs stock Windows tools on the target through C(ansible.windows.win_command) and
    C(ansible.windows.win_powershell), one O(method) a run; the Windows rungs of the ladder that act on the node itself
    (the WSL rung is M(gpuops.remediation.wsl_shutdown), the reboot C(ansible.windows.win_reboot)).
  - "V(kill) - ends each of O(holders) that is still the same process, with its tree: its creation time is checked
    against a fresh C(Win32_Process) list (Windows reuses pids quickly; a pid whose creation time changed is another
    process, left alone as reused), then one constant PowerShell script opens each process of the tree by pid, compares
    its creation time on that handle and terminates that same handle, so a pid reused in between is never ended. Where
    C(Add-Type) is refused (Constrained Language Mode, AppLocker), each process of the tree read before is held by its
    handle while its creation time is compared and ended alone with C(taskkill /F /PID <pid>) (never C(/T), which would
    take children born since), and the plan says so. Never a protected system process (csrss, wininit,
    winlogon, services, lsass, smss, System, Idle, Registry, Memory Compression, Secure System, LsaIso), the WSL VM
    (C(vmmemWSL), C(vmmem) - use M(gpuops.remediation.wsl_shutdown)), the user's shell (the process whose image path is
    Winlogon's C(Shell), C(%SystemRoot%\\explorer.exe) by default - use V(restart_explorer)), a remote connection's host
    process (C(wsmprovhost), C(winrshost), C(sshd)), nor C(dwm.exe) unless O(allow_dwm), nor a Windows service's process
    (C(Win32_Service.ProcessId)) unless O(allow_daemons), nor a process of O(protect_names) or O(protect_users), nor one
    whose tree holds any of these.
    A process counts as ended only when it is gone by pid and creation time, whatever a tool printed."
  - "V(restart_adapter) - C(pnputil /restart-device <instance id>) on the one adapter of each GPU chosen (O(gpu)) that
    needs it (ghost memory beyond O(ghost_threshold_mib), or NVML's recovery action), or of every GPU chosen with
    O(force). Never C(/class Display), which restarts every adapter. Exit 3010 means the restart waits for a reboot -
    RV(reboot_required); the run is changed, not failed. Afterwards the adapter's C(ConfigManagerErrorCode) and
    C(Present) (C(Get-PnpDevice)) decide, never pnputil's status words. Needs Windows 10 2004 or later."
  - "V(logoff) - C(logoff <id>) for the sessions of O(user) (from C(WTSEnumerateSessions), or C(quser)'s columns where
    C(Add-Type) is refused); never session 0, the services' session. No session of that user changes nothing."
  - "V(restart_explorer) - ends the C(explorer.exe) of O(user)'s session alone (the same script, without its tree,
    which would end every program started from it) when it holds GPU memory (or with O(force)), and waits up to
    O(shell_timeout) for Windows to start it again (Winlogon's C(AutoRestartShell), on by default). It is not started
    from here - a process started over WinRM or SSH runs in that network logon, not on the user's desktop."
  - "Restarting the adapter of the GPU that drives the display, or logging off the connection's own session, can drop
    the connection (WinRM, RDP). The module then reopens the connection, as C(ansible.windows.win_reboot) does, waits
    up to O(reconnect_timeout) for the host to answer again, and decides by the node's state afterwards."
  - Check mode reads the node and returns the same RV(plan) and C(changed), with C(would ...) lines; it changes nothing.
    A second run changes nothing - the processes are gone, the GPU no longer needs a restart, the session is gone, the
    new shell holds no GPU memory.
  - There is no journal on Windows nodes yet; RV(plan) is the record of what was done.
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
      - Reads the node and predicts the same RV(plan) and C(changed); acts on nothing.
  diff_mode:
    support: none
options:
  method:
    description: What to do.
    type: str
    required: true
    choices: [kill, restart_adapter, logoff, restart_explorer]
  holders:
    description:
      - With V(kill), the processes to end, as M(gpuops.remediation.win_gpu_holders_info) reports them (its
        C(holders), or a selection of them) - each a mapping with C(pid) and C(creation_time_ms) (or C(creation_time), the
        same milliseconds since 1970); other keys are ignored.
      - An empty list ends nothing.
    type: list
    elements: dict
    default: []
  allow_dwm:
    description:
      - With V(kill), allow ending C(dwm.exe) (Windows starts it again; the screen flickers).
      - With V(logoff) and V(restart_explorer), required to end a user's desktop (its display server C(dwm.exe) and its
        shell); without it each session the method would act on is left, and the module fails naming the session's
        C(dwm.exe) and this option (check mode too). The Windows twin of C(allow_display) (C(gpu_reclaim_allow_display)
        through the roles).
    type: bool
    default: false
  allow_daemons:
    description:
      - With V(kill), allow ending a Windows service's process (the C(ProcessId) of a C(Win32_Service), such as
        C(NVDisplay.Container.exe) as SYSTEM), as a Linux GPU daemon is ended only with allow_daemons. Without it such a
        process is left, the refusal naming the service; where C(Win32_Service) could not be read, a process of
        session 0 is left the same way.
    type: bool
    default: false
  protect_names:
    description:
      - With V(kill) and V(restart_explorer), process names never ended (any case, with or without C(.exe)); a
        selected process whose tree holds one is left alone with its tree. A name with a backslash is an
        executable's path (C(C:\\Apps\\render.exe), any case), matched against the process's image path.
      - With V(restart_adapter), a GPU that a process of these (or of O(protect_users)) holds, in any role, is not
        restarted; with V(logoff), a session of a user in O(protect_users), or in which one of these runs, is not
        logged off.
      - The same rule as the walk's C(gpu_reclaim_protect_names) (C(plugins/plugin_utils/windows/protect/_who_may_end.py)).
    type: list
    elements: str
    default: []
  protect_users:
    description:
      - With V(kill) and V(restart_explorer), users whose processes are never ended (any case, with or without the
        C(DOMAIN\\) prefix or a C(@domain) suffix); a tree holding one of their processes is left alone.
      - While it is set, a process whose owner Windows does not give (a session that is not elevated, an owner denied)
        is never ended either, and V(restart_adapter) and V(logoff) refuse when one would lose the GPU - the refusal
        names its pid and says to run elevated.
    type: list
    elements: str
    default: []
  gpu:
    description:
      - With V(restart_adapter), the GPU whose adapter to restart - its index, UUID or PCI bus id. Unset means every GPU
        that needs it; an empty list (a filter that matched nothing) selects none, and nothing is restarted.
    type: raw
  force:
    description:
      - With V(restart_adapter), restart the adapter of the GPUs chosen whether or not they need it; with
        V(restart_explorer), restart the shell whether or not it holds GPU memory.
    type: bool
    default: false
  user:
    description:
      - With V(logoff) and V(restart_explorer), required - the user whose sessions it acts on, as C(quser) lists it
        (case-insensitive; a C(DOMAIN\\) prefix is ignored).
    type: str
  nvidia_smi:
    description: The nvidia-smi executable on the target, for the snapshots.
    type: str
    default: nvidia-smi
  ghost_threshold_mib:
    description: Memory in use on a GPU beyond what its processes account for, above which the GPU needs an adapter restart.
    type: int
    default: 256
  reconnect_timeout:
    description: Seconds to wait for the host to answer again after a step dropped the connection.
    type: int
    default: 600
  shell_timeout:
    description: With V(restart_explorer), seconds to wait for Windows to start C(explorer.exe) again.
    type: int
    default: 30
seealso:
  - module: gpuops.remediation.win_gpu_holders_info
  - module: gpuops.remediation.wsl_shutdown
  - module: ansible.windows.win_reboot
"""

EXAMPLES = r"""
- name: Read who holds GPU memory
  gpuops.remediation.win_gpu_holders_info:
  register: snapshot

- name: End the compute processes that hold it
  gpuops.remediation.win_gpu_reset:
    method: kill
    holders: "{{ snapshot.holders | selectattr('class', 'equalto', 'compute') | list }}"

- name: Restart the adapter of the GPU that keeps ghost memory
  gpuops.remediation.win_gpu_reset:
    method: restart_adapter
  register: restart

- name: Reboot when the restart waits for one
  ansible.windows.win_reboot:
  when: restart.reboot_required

- name: Log ada's session off
  gpuops.remediation.win_gpu_reset:
    method: logoff
    user: ada
"""

RETURN = r"""
method:
  description: The method run.
  returned: always
  type: str
  sample: kill
plan:
  description: One line per thing done (C(would ...) in check mode), or left and why.
  returned: always
  type: list
  elements: str
  sample:
    - ended pid 1036 python.exe (ada, session 1)
    - "left pid 1028 dwm.exe: pid 1028 (dwm.exe) is the Desktop Window Manager: killing it is allowed only with allow_dwm"
connection_dropped:
  description: Whether the connection dropped during a step and the outcome was read from the node afterwards.
  returned: always
  type: bool
processes:
  description:
    - With V(kill), one entry per holder given, with C(pid), C(creation_time_ms), C(name), C(user), C(session_id),
      C(outcome) (V(ended), V(would_end), V(gone), V(pid_reused), V(refused), V(failed)), C(reason), C(tree_of) (the
      selected pid whose tree took it), C(also_ended) (its tree's processes gone afterwards by pid and creation time),
      C(taskkill) (how it was ended - C(method) V(terminate) or V(taskkill), C(outcome), C(message), C(by_pid)), C(line).
  returned: with method=kill
  type: list
  elements: dict
ended_pids:
  description: With V(kill), the pids ended (or, in check mode, that would be), children included.
  returned: with method=kill
  type: list
  elements: int
adapters:
  description:
    - With V(restart_adapter), one entry per GPU chosen, with C(gpu), C(name), C(instance_id), C(adapter_join) (how the
      adapter was joined to the GPU - V(pci_location), by the PnP BusNumber and Address, or V(name), only where no
      location came back), C(display) (it carries
      dwm), C(reason), C(argv), C(rc), C(outcome) (V(restart) in check mode, V(restarted), V(reboot_required),
      V(not_needed), V(no_adapter), V(unsupported), V(failed)), C(reboot_required), C(connection_dropped), C(message), C(line).
    - Two identical GPUs cannot be told apart by name - without a PCI location their adapters are V(no_adapter), never
      guessed.
  returned: with method=restart_adapter
  type: list
  elements: dict
reboot_required:
  description:
    - With V(restart_adapter), whether pnputil exited 3010 for an adapter (the restart waits for a reboot).
  returned: with method=restart_adapter
  type: bool
sessions:
  description:
    - With V(logoff), the user's sessions as quser lists them, each with C(outcome) (V(logoff) in check mode,
      V(logged_off), V(refused), V(failed)), C(argv), C(rc), C(message), C(line).
    - With V(restart_explorer), one entry per session, with C(id), C(user), C(explorer_before) and C(explorer_after)
      (pid and creation time), C(gpu_memory_mib) (what the old shell held), C(outcome) (V(restart) in check mode,
      V(restarted), V(not_needed), V(no_shell), V(failed)), C(message), C(line).
  returned: with method=logoff or restart_explorer
  type: list
  elements: dict
snapshot_after:
  description: A fresh snapshot of the node after acting, as M(gpuops.remediation.win_gpu_holders_info) returns it.
  returned: when not in check mode
  type: dict
journal:
  description:
    - The journal lines this run wrote on the host, in order; each has C(ts), C(run_id), C(id), C(phase) (C(intent)
      or C(outcome)), C(action) (C(terminate), C(taskkill), C(restart_adapter), C(logoff)) and what it acted on; an
      outcome has C(ok).
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
