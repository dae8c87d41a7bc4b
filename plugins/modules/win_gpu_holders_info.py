#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""win_gpu_holders_info: One snapshot of a Windows GPU node - GPUs, who holds their memory, adapters, sessions, WSL.
Its documentation only: the action plugin of the same name does the work.
"""

from __future__ import annotations

DOCUMENTATION = r"""
module: win_gpu_holders_info
short_description: One snapshot of a Windows GPU node - GPUs, who holds their memory, adapters, sessions, WSL
version_added: 1.0.0
description:
  - An action plugin that runs stock Windows tools on the target through C(ansible.windows.win_command) and
    C(ansible.windows.win_powershell), and joins what they print on the controller.
  - "GPUs come from C(nvidia-smi -q -x) with their driver model (WDDM, MCDM, TCC). Under WDDM NVML cannot report a
    process's GPU memory - nvidia-smi prints N/A, kept null (never 0) with the reason."
  - Per-process GPU memory comes from the language-neutral CIM class
    C(Win32_PerfFormattedData_GPUPerformanceCounters_GPUProcessMemory) (else the English counter paths), summed per pid
    over LUIDs and C(phys); each LUID is joined to its DirectX adapter in the registry and by name to the nvidia-smi GPU.
  - Processes come from C(Win32_Process) (pid and creation time are the identity later actions check), with their
    owners; C(vmmemWSL) or C(vmmem) is marked as the WSL VM, to be stopped through its distributions, never killed.
  - Adapters come from C(pnputil /enum-devices /class Display), sessions from C(quser), running WSL distributions
    from C(wsl.exe --list --running --quiet) (UTF-16LE, decoded by evidence).
  - The verdict names the lowest rung of the Windows ladder (V(kill), V(wsl), V(restart_adapter), V(logoff),
    V(reboot)) the evidence asks for, with the reasons.
  - The probes change nothing and run in check mode too.
author:
  - gpuops maintainers (@gpuops)
extends_documentation_fragment:
  - gpuops.remediation.attributes
  - gpuops.remediation.attributes.CONTROLLER_ACTION
  - gpuops.remediation.attributes.INFO_MODULE
  - gpuops.remediation.attributes.WINDOWS
options:
  journal_path:
    description:
      - The journal on the Windows host that the acting modules write, read here for the earlier runs' actions.
      - An absolute path on a drive. Defaults to C(C:\\ProgramData\\gpuops\\journal.jsonl) (under the root of a simulated node).
    type: str
  nvidia_smi:
    description: The nvidia-smi executable on the target, a name on its C(PATH) or a full path.
    type: str
    default: nvidia-smi
  ghost_threshold_mib:
    description: Memory in use on a GPU beyond what its processes' counters account for, above which the GPU holds ghost memory.
    type: int
    default: 256
"""

EXAMPLES = r"""
- name: Read who holds GPU memory on a Windows workstation
  gpuops.remediation.win_gpu_holders_info:
  register: gpu_snapshot

- name: Show the verdict
  ansible.builtin.debug:
    msg: "{{ gpu_snapshot.verdict.rung }}: {{ gpu_snapshot.verdict.reasons | map(attribute='reason') | list }}"
"""

RETURN = r"""
gpus:
  description: One per GPU nvidia-smi lists, in its order.
  returned: always
  type: list
  elements: dict
  contains:
    index:
      description: Position in nvidia-smi's list.
      type: int
    name:
      description: Product name.
      type: str
    pci_bus_id:
      description: PCI bus id, normalised.
      type: str
    driver_model:
      description: Current and pending driver model (C(WDDM), C(MCDM), C(TCC), null when not reported).
      type: dict
    memory_used_mib:
      description: Used framebuffer memory, MiB.
      type: int
    attributed_mib:
      description:
        - Used memory the live processes account for, MiB - the adapter-level GPU Adapter Memory figure under WDDM, the
          sum of nvidia-smi's per-process memory under TCC or MCDM; null when unknown. Never the sum of the per-process
          counters, which are not additive.
      type: int
    unattributed_mib:
      description:
        - Used memory no live process accounts for (ghost memory), MiB; null (unknown, not 0) where WDDM gives N/A and no
          adapter figure exists or the GPU's LUID is not joined.
      type: int
    ghost_source:
      description: Where C(unattributed_mib) comes from - C(adapter_counter), C(nvidia_smi_processes), or null.
      type: str
    ghost_reason:
      description: Why C(unattributed_mib) is null, or null.
      type: str
    luid:
      description: The adapter's LUID (C(0x<high>_0x<low>)), null when it could not be joined.
      type: str
    state:
      description:
        - ok, busy, stuck, lost, unresponsive or unknown.
        - V(unknown) also when more than O(ghost_threshold_mib) is in use and the ghost memory is null (WDDM, no adapter
          figure) - not 0, not ok; the verdict's reasons say what would tell.
      type: str
    processes:
      description: What nvidia-smi lists, C(used_mib) null under WDDM with C(used_mib_reason).
      type: list
      elements: dict
holders:
  description: One per process that holds memory of an NVIDIA GPU.
  returned: always
  type: list
  elements: dict
  contains:
    pid:
      description: Process id.
      type: int
    creation_time_ms:
      description: Creation time, milliseconds since 1970 UTC; with the pid, the process's identity.
      type: int
    name:
      description: Image name.
      type: str
    user:
      description: Owner (C(DOMAIN\\user)), null when the session could not read it.
      type: str
    session_id:
      description: Session id.
      type: int
    image_path:
      description: Executable path.
      type: str
    shell:
      description:
        - Whether it is the user's shell - its image path is Winlogon's C(Shell) resolved under C(%SystemRoot%), never
          decided by its name; null when that cannot be told (image path not known).
      type: bool
    services:
      description:
        - The Windows services it runs (C(Win32_Service.ProcessId)); such a process is ended only with C(allow_daemons).
          Null when C(Win32_Service) could not be read.
      type: list
      elements: str
    gpus:
      description: Indexes of the GPUs it holds.
      type: list
      elements: int
    used_mib:
      description:
        - GPU memory the process holds, MiB - the sum of RV(holders[].used_mib_by_gpu) (C(used_mib_source) V(counter)), else
          nvidia-smi's per-process figure (V(nvidia-smi)); null with C(used_mib_reason) when unknown.
        - A per-process counter larger than the memory its GPU uses (nvidia-smi's C(memory.used), else the adapter's
          GPU Adapter Memory figure) is not taken as memory held - it counts committed and shared surfaces too -
          and C(used_mib_reason) names both figures.
      type: int
    used_mib_by_gpu:
      description: Memory held per GPU index (a string), MiB - the GPU Process Memory C(Dedicated Usage) counter where it is no larger than what the GPU uses.
      type: dict
    counter_dedicated_mib_by_gpu:
      description:
        - The GPU Process Memory C(Dedicated Usage) counter per GPU index, summed over LUIDs and C(phys), MiB, as read -
          a figure of the process's allocations, not of memory held.
      type: dict
    used_mib_source:
      description: Which figure RV(holders[].used_mib) is - V(counter), V(nvidia-smi), or null when none.
      type: str
    class:
      description:
        - C(compute) (a compute context by nvidia-smi, type C or C+G - the kill rung's), C(wsl_vm) (the WSL VM),
          C(vm) (another virtual machine's memory process - a Hyper-V VM's, or a C(vmmem) not known to be WSL's; a
          running workload - no rung acts on it, and a GPU only it holds is C(in_use)), C(graphics_session) (dwm, or an
          application that only draws on the GPU - type G, or seen by the counters alone) or C(system) (a protected
          system process).
      type: str
    nvidia_smi_types:
      description: The process types nvidia-smi listed it with (C(C), C(G), C(C+G)); empty when it did not list it.
      type: list
      elements: str
    wsl_vm:
      description:
        - Whether it is the WSL VM. A fact, not the name - its VM's id (the owner SID of the C(vmmem)/C(vmmemWSL)
          process, C(S-1-5-83-1-...)) is a compute system the Host Compute Service lists with owner C(WSL); where HCS
          cannot be asked (Constrained Language Mode, no elevation) C(vmmemWSL) is, a plain C(vmmem) is not.
      type: bool
    vm_id:
      description: For a VM memory process, its virtual machine's id (GUID, lower case); null when not known.
      type: str
    vm_kind:
      description: For a VM memory process, V(wsl), V(other) or null (not known); C(vm_kind_source) says how (V(hcs), V(name)).
      type: str
    wsl_owner:
      description: For the WSL VM, the Windows user whose VM it is (the user of the WSL process naming its VM id); null when not known.
      type: str
    wsl_mine:
      description: For the WSL VM, whether it is the connecting user's (the one wsl.exe acts for); null when not known.
      type: bool
    earlier_kills:
      description: How many times the journal shows a process of this name ended by an earlier run (a leak that comes back).
      type: int
adapters:
  description:
    - The display adapters C(Get-PnpDevice -Class Display) lists (pnputil's listing where it does not answer) - instance
      id, description, C(status) (for the report only), C(problem_code) (C(ConfigManagerErrorCode), null when 0 -
      working), C(state_known), C(started) (from those numbers and C(present), never from a status word; null where
      only pnputil answered), C(state_source) (V(cim) or V(pnputil)), C(is_nvidia) - with C(pci_location)
      (C([bus, device, function]) from C(Get-PnpDeviceProperty) DEVPKEY_Device_BusNumber and DEVPKEY_Device_Address, null
      when none came back - a virtual display), C(pci_domain) (the PCI segment the bus number carries), C(present),
      C(gpu) (the nvidia-smi index when joined) and C(gpu_join).
    - C(gpu_join) is V(pci_location) (the nvidia-smi GPU whose C(pci.bus_id) has that bus, device and function) or
      V(name), only where no NVIDIA adapter's location came back, and then never for GPUs that share a name; the same
      method is in C(probes.adapter_join).
  returned: always
  type: list
  elements: dict
sessions:
  description:
    - The interactive sessions (user, domain, session name, id, state) from the session API (C(WTSEnumerateSessions)),
      or from C(quser)'s columns where C(Add-Type) is refused (C(probes.sessions.source)); empty when nobody is logged on.
  returned: always
  type: list
  elements: dict
wsl:
  description:
    - C(running) (the names of the running distributions of the connecting user), C(status), C(message), C(path) (the
      wsl.exe used), C(user) (whom wsl.exe runs as), C(vms) (every VM memory process - pid, creation time, C(vm_id),
      C(vm_kind), C(wsl_owner), C(wsl_mine)).
    - C(distributions), asked only while a WSL VM holds a GPU - each running distribution's C(name), C(holds_gpu) (a
      process of it has C(/dev/dxg) open, read by C(find) over C(/proc) as its root; null when that cannot be known,
      with C(error)) and C(pids).
  returned: always
  type: dict
journal:
  description:
    - What the host's journal (written by M(gpuops.remediation.win_gpu_reset), M(gpuops.remediation.wsl_shutdown) and
      the reboot of the Windows ladder) says of earlier runs, so that a leak that comes back can be traced.
    - C(path), C(ok), C(error), C(records) (how many were read, of its last 4 MiB), C(recent_actions) (the last 20
      outcomes - C(ts), C(run_id), C(action), C(ok), what it acted on), C(interrupted_actions) (intents without an
      outcome - an action a run started and never finished), C(kills_by_name) (how often each process name was ended).
  returned: always
  type: dict
probes:
  description:
    - Each probe's health (C(ok), C(error)), and how wsl.exe's output was decoded.
    - C(luid_join) and C(adapter_join) also say how the GPUs were joined (C(method) V(pci_location) or V(name)) to their
      DirectX adapters and to their pnputil adapters; C(pnp_locations) is the read of the PnP devices' locations.
  returned: always
  type: dict
verdict:
  description: C(rung) (one of V(none), V(kill), V(wsl), V(restart_adapter), V(logoff), V(reboot)) and C(reasons) (C(rung), C(reason)).
  returned: always
  type: dict
simulated:
  description: Whether the host is a simulated Windows node (host variable C(gpuops_windows_sim_root)).
  returned: always
  type: bool
"""
