#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""win_gpu_sim: create or remove a simulated Windows GPU node on the controller, for rehearsal and tests. Its
documentation only: the action plugin of the same name does the work.
"""

from __future__ import annotations

DOCUMENTATION = r"""
module: win_gpu_sim
short_description: Create or remove a simulated Windows GPU node on the controller, for rehearsal and tests
version_added: 1.0.0
description:
  - An action plugin that writes the state of a simulated Windows GPU node under O(root) on the controller, from a
    scenario. A host whose variable C(gpuops_windows_sim_root) names O(root) is that node for the Windows modules
    (see RV(host_vars)); the tools it answers are those the real path runs, with outputs of the real shapes.
  - "The node has the system processes of session 0 (System, smss, csrss, wininit, services, lsass), each session's
    csrss, winlogon, dwm (which holds 128 MiB of GPU 0) and explorer, the scenario's processes, and a C(vmmemWSL) per
    user with a running distribution, which holds its distributions' GPU memory."
  - "Rules it keeps - a process's GPU memory is freed when it is killed; C(wsl --terminate) and C(--shutdown) stop the
    user's distributions, and the user's WSL VM with the last one; taskkill refuses critical system processes and the
    WSL VM with the real messages; a session's C(explorer.exe) ended by force comes back as a new process (see
    O(auto_restart_shell)); C(logoff) ends a session and its processes; C(pnputil /restart-device) exits 3010 for a GPU
    with O(gpus[].restart_needs_reboot)."
  - Running it again with the same scenario changes nothing; another scenario replaces the node.
  - See C(docs/windows.md) in the collection.
author:
  - gpuops maintainers (@gpuops)
extends_documentation_fragment:
  - gpuops.remediation.attributes
  - gpuops.remediation.attributes.CONTROLLER_ACTION
attributes:
  check_mode:
    support: full
    details:
      - Reports the same C(changed) as the real run and writes nothing.
  diff_mode:
    support: none
  platform:
    support: full
    platforms: posix
    description: Runs on the controller.
options:
  root:
    description: Directory of the node on the controller; it must be empty or hold a simulated Windows node.
    type: path
    required: true
  state:
    description: Whether the node should exist. V(absent) removes O(root).
    type: str
    choices: [present, absent]
    default: present
  hostname:
    description: The host's name, the domain part of its local users.
    type: str
    default: WS01
  default_user:
    description: Whom the tools run as when the task names no user (no become user, no C(ansible_user)).
    type: str
    default: ada
  administrators:
    description: Users who may end other users' processes. Unset means O(default_user).
    type: list
    elements: str
  store_wsl:
    description: Whether C(C:\\Program Files\\WSL\\wsl.exe) (the Store WSL) exists.
    type: bool
    default: true
  wsl:
    description:
      - V(installed), V(absent) (no wsl.exe can be started) or V(not_installed) (wsl.exe answers every command with the
        exit status 0x8007019E - the optional component is not enabled).
    type: str
    choices: [installed, absent, not_installed]
    default: installed
  wsl_vm_name:
    description:
      - The name of each user's WSL VM memory process - V(vmmemWSL) (newer builds) or V(vmmem) (older builds, the name
        every Hyper-V VM's has). It runs as C(NT VIRTUAL MACHINE\\<vm id>), and the snapshot script's Host Compute
        Service list names its id with owner C(WSL).
    type: str
    choices: [vmmemWSL, vmmem]
    default: vmmemWSL
  wsl_relay:
    description:
      - Whether a C(wslrelay.exe) of the user, in the user's session, names the user's WSL VM id on its command line
        (C(--vm-id)) while it runs - what tells whose WSL VM it is. V(false) leaves the owner unknown.
    type: bool
    default: true
  auto_restart_shell:
    description:
      - Whether Windows starts a session's C(explorer.exe) again when it is ended by force (Winlogon's
        C(AutoRestartShell), on by default on Windows). With V(false), an ended explorer stays gone.
    type: bool
    default: true
  integrated_gpu:
    description:
      - Whether the node has an integrated Intel GPU besides the NVIDIA ones - a DirectX adapter with its own LUID and
        PCI location (C(00:02.0)), listed by pnputil, never by nvidia-smi.
    type: bool
    default: false
  virtual_display:
    description:
      - Whether the node has a virtual display (an indirect display driver's adapter, C(ROOT\\DISPLAY\\0000)) - listed
        by pnputil, not on the PCI bus, so C(Get-PnpDeviceProperty) gives it no location.
    type: bool
    default: false
  pnp_properties:
    description:
      - Whether the snapshot's C(Get-PnpDevice) / C(Get-PnpDeviceProperty) read answers. With V(false) it fails as on a
        host without the PnpDevice module, so the adapters are joined to the GPUs by name only.
    type: bool
    default: true
  adapter_memory_counters:
    description:
      - Whether the snapshot's read of the GPU Adapter Memory counters (C(Win32_PerfFormattedData_GPUPerformanceCounters_GPUAdapterMemory))
        answers. With V(false) it fails as on a host whose performance counters are missing or disabled, so a WDDM
        GPU's ghost memory is unknown (its state V(unknown), the walk's outcome V(undetermined)).
    type: bool
    default: true
  services_readable:
    description:
      - Whether the processes script's C(Win32_Service) read answers. With V(false) every process's services are not
        known (null), as on a host where the query fails.
    type: bool
    default: true
  winlogon_shell:
    description:
      - Winlogon's C(Shell) value (C(HKLM\\SOFTWARE\\Microsoft\\Windows NT\\CurrentVersion\\Winlogon)) - the user's shell is the
        process whose image path is it, resolved under C(%SystemRoot%) (C(C:\\Windows)); a program of the same name
        elsewhere is no shell.
    type: str
    default: explorer.exe
  constrained_language:
    description:
      - Whether PowerShell runs in Constrained Language Mode (or AppLocker refuses C(Add-Type)) - the scripts that
        compile Windows API calls (terminate, sessions, the adapter address) answer that they cannot, and the plugins
        take their fallbacks (C(taskkill) one process at a time, C(quser)'s columns, the PnP location).
    type: bool
    default: false
  oem_code_page:
    description:
      - The console's OEM code page (the registry's C(OEMCP)) - C(quser) writes user names in it (V(850) Western
        European, V(866) Russian, V(932) Japanese).
    type: int
    default: 437
  gpus:
    description: The GPUs, index by position. Unset means one NVIDIA GeForce RTX 2080 SUPER under WDDM.
    type: list
    elements: dict
    suboptions:
      name:
        description: Product name.
        type: str
      memory_mib:
        description: Total memory, MiB.
        type: int
      reserved_mib:
        description: Memory the driver reserves, MiB.
        type: int
      driver_model:
        description: The driver model; under WDDM nvidia-smi reports no per-process memory.
        type: str
        choices: [WDDM, TCC, MCDM]
      ghost_mib:
        description: Used memory no process accounts for; it stays until the adapter restarts.
        type: int
      recovery_action:
        description: What nvidia-smi reports as the GPU recovery action.
        type: str
        choices: [None, Reset, Reboot]
      pci_bus_id:
        description: PCI bus id; a distinct one is chosen when unset.
        type: str
      uuid:
        description: GPU UUID; one is made up when unset.
        type: str
      restart_needs_reboot:
        description:
          - Whether C(pnputil /restart-device) of this GPU's adapter exits 3010 (a reboot is needed); its ghost memory
            and recovery action then stay.
        type: bool
        default: false
      problem_after_restart:
        description:
          - The device problem code (C(ConfigManagerErrorCode)) the adapter has after C(pnputil /restart-device) - V(43),
            the driver stopped it. pnputil still exits 0 and lists it V(Started); V(0) means it works.
        type: int
        default: 0
      luid:
        description:
          - The adapter's LUID (the DirectX key's C(AdapterLuid) QWORD, the counters' C(luid_0x<high>_0x<low>)). Unset -
            V(0xFA7A) plus 4096 per index, in nvidia-smi's order; set it to give the LUIDs another order.
        type: int
      instance_id:
        description:
          - The PnP instance id of its display adapter (what C(pnputil /restart-device) is given). Unset - one made from
            the device id and the index. pnputil lists the adapters in instance-id order, so these can give another order
            than nvidia-smi's.
        type: str
  processes:
    description: Processes that hold GPU memory.
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description:
          - Image name (any text but NUL). V(vmmem) with O(processes[].user) C(NT VIRTUAL MACHINE\\<guid>) is a Hyper-V
            VM's memory process, which the Host Compute Service lists under that id with owner C(VMMS).
        type: str
        required: true
      gpus:
        description: Indexes of the GPUs it holds.
        type: list
        elements: int
        default: [0]
      memory_mib:
        description: Dedicated memory on each of them, MiB.
        type: int
        default: 1024
      user:
        description: Owner; unset means O(default_user).
        type: str
      session_id:
        description: Session id.
        type: int
        default: 1
      image_path:
        description: Executable path; one under the user's profile when unset.
        type: str
      graphics:
        description:
          - A desktop application that only draws on the GPU (a browser, an editor) - nvidia-smi lists it as type C(G),
            not as a compute process, and the ladder leaves it alone.
        type: bool
        default: false
      igpu_memory_mib:
        description: Memory it holds on the integrated GPU (needs O(integrated_gpu)), MiB - never an NVIDIA GPU's.
        type: int
        default: 0
      counter_mib:
        description:
          - What its GPU Process Memory counter reports on its first GPU, MiB, instead of what it holds - the counters
            are not additive (a real capture shows dwm.exe at 9.4 GB on an adapter using 0.99 GB). V(-1) is the sample
            of a process that has exited. Unset means what it holds. The adapter's own figure and nvidia-smi are not changed.
        type: int
      critical:
        description:
          - Windows marks it critical (ending it bugchecks the host), whatever its name (a service host can be) -
            taskkill refuses it, and the terminate script finds it so (C(IsProcessCritical)) and leaves it.
        type: bool
        default: false
      owner_known:
        description:
          - Whether C(Get-Process -IncludeUserName) names its owner. V(false) - no owner, as for a session that is not
            elevated or a process Windows denies; with C(protect_users) set it is never ended.
        type: bool
        default: true
      runs_ansible:
        description:
          - The process Ansible's module runs in (C($PID) of the processes script). It and its ancestors are the run's
            own connection - M(gpuops.remediation.win_gpu_reset) never ends them, nor a tree that holds them.
        type: bool
        default: false
      service:
        description:
          - The Windows service this process runs (C(Win32_Service.Name) whose C(ProcessId) it is), for example
            C(NVDisplay.ContainerLocalSystem) with O(processes[].session_id=0) and O(processes[].user=NT AUTHORITY\\SYSTEM).
            Ended only with C(allow_daemons).
        type: str
      children:
        description: Child processes (same options but O(processes[].children)), ended with it as its tree.
        type: list
        elements: dict
        default: []
  sessions:
    description: Interactive sessions. Unset means one console session of O(default_user); V([]) means nobody is logged on.
    type: list
    elements: dict
    suboptions:
      user:
        description: User name.
        type: str
        required: true
      id:
        description: Session id; the next one when unset.
        type: int
      session_name:
        description: Session name (C(console), C(rdp-tcp#0)).
        type: str
        default: console
      state:
        description: State as quser prints it.
        type: str
        default: Active
      explorer_memory_mib:
        description: GPU memory the session's C(explorer.exe) holds on GPU 0, MiB; a restarted explorer holds none.
        type: int
        default: 0
  distributions:
    description: WSL distributions.
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: Distribution name.
        type: str
        required: true
      owner:
        description: The user it belongs to; unset means O(default_user).
        type: str
      running:
        description: Whether it runs.
        type: bool
        default: true
      version:
        description: WSL version.
        type: int
        default: 2
      default:
        description: Whether it is the user's default; the first one when unset.
        type: bool
      gpus:
        description: The GPUs its processes use.
        type: list
        elements: int
        default: [0]
      memory_mib:
        description:
          - GPU memory its processes hold while it runs (the WSL VM holds it on the Windows side), MiB. A distribution
            with some has processes with C(/dev/dxg) open, as the C(find) probe of M(gpuops.remediation.wsl_shutdown) sees.
        type: int
        default: 0
      gpu_probe:
        description: Whether C(find) runs in it (V(false) - the C(/dev/dxg) probe fails, and its hold is not known).
        type: bool
        default: true
      held_after_stop:
        description:
          - Whether its GPU memory stays with the WSL VM after it stops (memory of the guest, not of a process), until
            the VM stops.
        type: bool
        default: false
"""

EXAMPLES = r"""
- name: A workstation whose WSL VM holds 3 GiB of GPU memory
  gpuops.remediation.win_gpu_sim:
    root: /tmp/ws12
    processes:
      - {name: python.exe, memory_mib: 2048}
    distributions:
      - {name: Ubuntu-22.04, memory_mib: 3072}
  register: ws12

- name: Make it a host of the inventory
  ansible.builtin.add_host:
    name: ws12
    ansible_connection: local
    gpuops_windows_sim_root: "{{ ws12.root }}"
"""

RETURN = r"""
root:
  description: The node's directory.
  returned: always
  type: str
host_vars:
  description: The host variables that make a host this node.
  returned: when state=present
  type: dict
  sample: {gpuops_windows_sim_root: /tmp/ws12}
processes:
  description: The node's processes (pid, name, creation_time_ms, session_id).
  returned: when state=present
  type: list
  elements: dict
"""
