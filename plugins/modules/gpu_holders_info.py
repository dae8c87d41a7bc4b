#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_holders_info: tell who holds the memory of every GPU of a Linux node, and which rung gets it back."""

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_holders_info
short_description: Tell who holds the memory of every GPU of a Linux node, and which rung gets it back
version_added: 1.0.0
description:
  - Takes one snapshot of an NVIDIA GPU node and changes nothing.
  - Reads the GPUs through NVML (nvidia-ml-py) or C(nvidia-smi -q -x), in a child process with a deadline.
  - Finds every process that holds a GPU device (C(/dev/nvidia*), C(/dev/nvidiactl), C(/dev/nvidia-uvm*),
    C(/dev/nvidia-caps/*), the C(/dev/dri/*) nodes of NVIDIA cards) open, mapped, or in a thread's own file table
    (a live thread whose thread-group leader exited, a thread that unshared its table), by scanning C(/proc)
    directly (what C(lsof) and C(fuser) show, and more). A device is known by its identity (the device number of
    what an fd opened, the device and inode fields of a mapping), never by a path, so a process that opened it
    through another node, a bind mount, another mount namespace or a chroot is found; a descriptor opened with
    C(O_PATH) never opened the device and makes no holder.
  - Attributes each holder to its container (docker, containerd/CRI, CRI-O, podman), Kubernetes pod, Slurm job
    and systemd unit, and identifies it by pid and start time, the identity every later action checks.
  - Reads the loaded kernel modules, the C(nvidia_drm) modeset, the GPU daemons, and the Xid events of the kernel
    log mapped to the action of NVIDIA's Xid catalog.
  - Gives a verdict, the lowest rung of the ladder (V(none), V(kill), V(instance), V(reset), V(reboot)) expected to free the
    memory, with the evidence for it (V(instance) for ghost memory inside a MIG instance, which re-creating that instance
    gets back). No evidence asks for V(reload) or V(graphics) first - the ladder climbs to them when a
    reset did not free the memory.
  - Reads the node's journal back. Kernel log evidence older than a later successful reset of its GPU or a driver
    reload recorded there, or older than the current boot, stays in C(xid_events) with C(answered_by) set and no
    longer chooses the rung.
  - This module was called C(gpuops.remediation.gpu_holders) before; that name still works.
author:
  - gpuops maintainers (@gpuops)
extends_documentation_fragment:
  - gpuops.remediation.attributes
  - gpuops.remediation.attributes.INFO_MODULE
  - gpuops.remediation.attributes.LINUX_GPU
  - gpuops.remediation.snapshot
  - gpuops.remediation.snapshot.MEMORY_MAPS
requirements:
  - nvidia-ml-py on the target for O(backend=nvml); otherwise C(nvidia-smi).
options:
  journal_path:
    description:
      - The journal the remediation modules write on the node (their O(gpuops.remediation.gpu_reset#module:journal_path)),
        read back for the resets and reloads that already answered the kernel log's evidence.
      - Defaults to C(/var/lib/gpuops/journal.jsonl) (under the simulated root on a simulated node).
      - A missing, empty, torn or unreadable journal answers nothing; C(probes.journal) says why.
    type: path
notes:
  - Run it as root to see the holders of every user; a non-root run reports how many processes it could not read
    in C(probes.process_scan.unreadable_pids).
seealso:
  - module: gpuops.remediation.gpu_sim
"""

EXAMPLES = r"""
- name: Who holds the GPUs of this node
  gpuops.remediation.gpu_holders_info:
  register: gpu

- name: Show the verdict
  ansible.builtin.debug:
    msg: "{{ gpu.verdict.rung }}: {{ gpu.verdict.reasons | map(attribute='reason') | list }}"

- name: Only GPU 3, through nvidia-smi, with a short deadline
  gpuops.remediation.gpu_holders_info:
    gpus: ["3"]
    backend: nvidia_smi
    probe_timeout: 5
"""

RETURN = r"""
scope:
  description:
    - What the snapshot is of - the options its verdict depends on (C(gpus), C(ghost_threshold_mib), C(kernel_log_source),
      C(kernel_log_path), C(kernel_log_window)) and C(taken_epoch), when it was taken (seconds since the epoch).
    - C(mig_instances) - the MIG instances (C(GPU:GI) or C(GPU:GI/CI)) that O(gpus) narrows its GPUs to, only when it
      names one.
  returned: always
  type: dict
  sample: {gpus: [], ghost_threshold_mib: 256, kernel_log_source: auto, kernel_log_path: null, kernel_log_window: null, taken_epoch: 1764580000.123}
simulated:
  description: Whether the snapshot was taken of a simulated node (C(GPUOPS_SIM_ROOT) set on the target).
  returned: always
  type: bool
backend:
  description: The backend that read the GPUs, V(nvml) or V(nvidia_smi); null when none could run.
  returned: always
  type: str
  sample: nvml
gpus:
  description: The GPUs selected by O(gpus).
  returned: always
  type: list
  elements: dict
  contains:
    index: {description: "NVML index.", type: int, returned: always}
    uuid: {description: "GPU UUID.", type: str, returned: always}
    serial: {description: "The board's serial number; null where the board has none (N/A) or the driver cannot say it.", type: str, returned: always}
    name: {description: "Product name.", type: str, returned: always}
    identity_from:
      description:
        - Set on a lost GPU whose C(uuid), C(serial), C(name) or C(pci_bus_id) the driver could not say and the watch's state
          file (C(/var/lib/gpuops/watch_state.json), root's) remembers from the last time it saw the GPU - V(watch_state).
          What a vendor takes the GPU back by.
      type: str
      returned: when a lost GPU's identity came from the watch's state
    pci_bus_id:
      description:
        - PCI bus id, normalised to 8 domain digits.
        - For a lost GPU the driver cannot name, the bus id of its "fallen off the bus" or Xid 79 kernel log line
          (C(pci_bus_id_from) is then V(kernel_log)); null when neither gives it.
      type: str
      returned: always
      sample: "00000000:18:00.0"
    pci_bus_id_from:
      description: V(kernel_log) when the driver could not name the bus id of this lost GPU and the kernel log did.
      type: str
      returned: when the bus id of a lost GPU came from the kernel log
    memory_total_mib: {description: "Total memory.", type: int, returned: when the driver answered}
    memory_used_mib: {description: "Used memory.", type: int, returned: when the driver answered}
    memory_free_mib: {description: "Free memory.", type: int, returned: when the driver answered}
    attributed_mib: {description: "Memory the driver attributes to live processes.", type: int, returned: always}
    unattributed_mib:
      description: Used memory that no live process accounts for (ghost memory); null when a process's usage is N/A.
      type: int
      returned: always
    persistence_mode: {description: "Persistence mode.", type: bool, returned: when the driver answered}
    compute_mode: {description: "Compute mode.", type: str, returned: when the driver answered}
    mig_mode: {description: "MIG mode, C(current) and C(pending).", type: dict, returned: when the driver answered}
    gpu_instances:
      description:
        - The MIG GPU instances of a GPU with MIG mode on, as the driver shows them (NVML's MIG device handles, or
          C(nvidia-smi -q -x) with C(nvidia-smi mig -lgi), C(-lci) and C(-L)), in id order.
        - Each has C(id), C(profile) (V(1g.10gb)), C(profile_id), C(placement) (C(start), C(size) in memory slices),
          C(memory_total_mib), C(memory_used_mib), C(compute_instances) (each C(id), C(uuid) - the MIG device UUID -,
          C(profile_id), C(placement)), C(holders) (the pids in it), C(attributed_mib) (what the driver lists in it),
          C(unattributed_mib) (used memory no live process in the instance accounts for - its ghost memory) and
          C(selected) (whether O(gpus) reaches it).
        - On such a GPU, RV(gpus[].unattributed_mib) is the ghost memory of its selected instances.
      type: list
      elements: dict
      returned: when MIG mode is on
    recovery_action: {description: "The recovery action NVML reports (V(none), V(reset), V(reboot), ...).", type: str, returned: when the driver answered}
    nvlink_peers: {description: "Bus ids of the GPUs linked to this one by an active NVLink.", type: list, elements: str, returned: when the driver answered}
    processes: {description: "The processes the driver lists on this GPU.", type: list, elements: dict, returned: always}
    holders: {description: "Pids of the holders of this GPU.", type: list, elements: int, returned: always}
    lost: {description: "The driver reports the GPU lost (fallen off the bus).", type: bool, returned: always}
    state:
      description:
        - V(ok), V(busy), V(in_use), V(stuck), V(lost), V(unresponsive) or V(unknown).
        - V(busy) - processes the kill rung ends hold it; V(in_use) - only working programs do (class V(busy), live
          scheduler jobs' processes and processes no fact shows left behind), which the ladder leaves alone unless told
          to end running jobs.
      type: str
      returned: always
holders:
  description: One entry per process that holds a selected GPU or a node-wide device node.
  returned: always
  type: list
  elements: dict
  contains:
    pid: {description: "Process id.", type: int, returned: always}
    start_time: {description: "Start time in clock ticks since boot: with the pid, the identity later actions check.", type: int, returned: always}
    name: {description: "Process name (comm).", type: str, returned: always}
    cmdline: {description: "Arguments, exactly as the process has them.", type: list, elements: str, returned: when visible}
    user: {description: "Owner.", type: str, returned: when visible}
    state: {description: "V(running), V(sleeping), V(disk-sleep), V(zombie), ...", type: str, returned: always}
    ppid: {description: "Parent pid.", type: int, returned: when visible}
    parent_name: {description: "Parent name.", type: str, returned: when visible}
    gpus:
      description: Indexes of the GPUs it holds; empty when it holds only node-wide nodes such as nvidiactl.
      type: list
      elements: int
      returned: always
    used_mib: {description: "GPU memory the driver attributes to it; null when N/A.", type: int, returned: always}
    used_mib_per_gpu: {description: "The same, per GPU index.", type: dict, returned: always}
    seen_by: {description: "How it was found: V(nvml), V(fd), V(mmap), V(task_fd) (a thread's own file table).", type: list, elements: str,
              returned: always}
    devices: {description: "The device nodes it holds.", type: list, elements: str, returned: always}
    mig_instances:
      description:
        - The MIG instances it is in, each C(gpu), C(gpu_instance_id), C(compute_instance_id) and C(seen_by) -
          V(nvidia-caps) (it holds the instance's C(/dev/nvidia-caps) nodes, known by device number) and V(nvml) (the
          driver lists it in that instance). One entry per compute instance it is in (a process holding two compute
          instances of one GPU instance is in both); C(compute_instance_id) is null when only the GPU instance is known.
      type: list
      elements: dict
      returned: when a GPU of the node has MIG instances
    container:
      description:
        - C(runtime), C(id) and C(main_pid) of its container, when the runtime confirms it (C(docker|podman container
          inspect), C(crictl inspect)) - the container runs, the cgroup of its main process is the container's and in no
          user's delegated subtree, and this process is in that cgroup. Null otherwise, whatever its cgroup path names.
      type: dict
      returned: when visible
    container_claim:
      description:
        - What its cgroup path named (C(runtime), C(id)) when the runtime does not confirm it, with the C(reason) (a
          C(docker-<id>.scope) that anyone can create in their own subtree, a stopped container, no runtime CLI).
      type: dict
      returned: when its cgroup names a container that its runtime does not confirm
    kubernetes_pod_uid: {description: "Kubernetes pod UID.", type: str, returned: when visible}
    slurm_job: {description: "Slurm job id.", type: str, returned: when visible}
    systemd_unit: {description: "systemd unit.", type: str, returned: when visible}
    class:
      description:
        - V(compute), V(graphics_session), V(gpu_daemon), V(busy), V(zombie) or V(unkillable), from what the kernel, the
          driver, the init system and the scheduler say, never from the process name.
        - V(unkillable) is a process in uninterruptible sleep (D), outside a frozen cgroup, that the journal says outlived
          SIGKILL (RV(holders[].outlived_kill)); D alone is not, since SIGKILL ends most of it.
        - V(busy) is a working program, a process of a live scheduler job (see RV(holders[].job)) or a compute process
          that no kernel or runtime fact shows left behind (see RV(holders[].standing)); reported, and never ended unless
          selected or O(gpuops.remediation.gpu_kill#module:end_running_jobs) says so.
        - V(gpu_daemon) is a process the init system runs in a GPU unit (see RV(holders[].unit_role)); a process with a compute
          context (type C) is V(compute) otherwise, and its memory counts toward its GPU's state.
        - V(graphics_session) is a display server (the display manager's, see RV(holders[].unit_role)) or a process with only
          graphics contexts (type G).
      type: str
      returned: always
    standing:
      description:
        - For a compute process, whether a crash or an ended job left it behind, and the fact that says so; null for the
          other classes. C(standing) is V(left_behind) or V(busy), C(why) the fact.
        - Left behind - its thread group leader, process group leader or session leader exited while it lives on; its
          parent exited and it was re-parented to a process of another session (init, a subreaper that did not start it);
          its job, pod or container no longer runs; its systemd unit is inactive or failed; its login session is closing
          or gone (logind). Busy - any other live process, with the fact, for example C(its process group leader 4412
          (python) runs), C(it leads its own session), or a shell job's command whose group leader (the job's first
          command) ended while its parent shell runs.
      type: dict
      returned: when visible
    unit_role:
      description:
        - What the init system says the process is; null for none. C(role) is V(gpu_daemon) or V(display_server),
          C(unit) the unit's id, C(asked_as) the unit name asked, C(by) how it belongs to it (V(main_pid),
          V(control_group), or V(started_by) its main process, for the display manager only).
      type: dict
      returned: when visible
    job:
      description:
        - The scheduler's word on the job the process belongs to; null when no scheduler of the node has anything to say
          of it (no scheduler, or a process outside every job).
        - C(scheduler) (V(slurm), V(kubernetes) or V(container)), C(id), C(state) (Slurm's job state, V(ready) for a
          pod, V(running) or V(not running) for a container), C(running) (a live job, the process is V(busy)), C(why);
          for a container also C(runtime) and C(main_pid) (its main process, null when it is gone).
        - A container is a running job when its runtime confirms it runs with its main process alive and this process is
          one of its (RV(holders[].container)); a holder of a container the runtime says is not running, or whose main
          process is gone, is a leftover (C(running) false). A runtime that cannot be asked gives no job.
        - A cgroup path naming a job is only a hint; a job Slurm does not list this process in is a leftover
          (C(running) false).
      type: dict
      returned: when visible
    outlived_kill:
      description: When a run sent this process SIGKILL and it was still there once the wait ran out (the journal's time).
      type: str
      returned: when the class is unkillable
    frozen_cgroup:
      description:
        - The frozen cgroup that holds it (v1 freezer C(freezer.state) FROZEN or FREEZING, cgroup v2 C(cgroup.freeze) 1, its
          own or an ancestor's), with C(version), C(cgroup) (the outermost one frozen), C(holder_cgroup), C(file),
          C(state) and C(thaw) (what thawing writes); null when none. Its tasks act on no signal until it is thawed.
      type: dict
      returned: always
    leader_exited:
      description: Its thread-group leader exited while other threads live on (the leader's stat says Z); alive, not a zombie.
      type: bool
      returned: when visible
    visible: {description: "False when the driver lists a pid that this /proc does not show (another PID namespace).", type: bool, returned: always}
services:
  description: GPU daemons and the display manager that run or hold a device, with their pids.
  returned: always
  type: list
  elements: dict
  sample: [{unit: nvidia-persistenced.service, active: true, pids: [1234]}]
driver:
  description: Driver version, loaded nvidia kernel modules (size, refcount, used_by) and the nvidia_drm modeset.
  returned: always
  type: dict
xid_events:
  description: Xid and "fallen off the bus" events of the kernel log, each with NVIDIA's catalog entry and its GPU index.
  returned: always
  type: list
  elements: dict
  contains:
    kind: {description: "V(xid) or V(fallen_off_bus).", type: str, returned: always}
    xid: {description: "The Xid code; null for a fallen off the bus message.", type: int, returned: always}
    pci_bus_id: {description: "The bus id the line names.", type: str, returned: always}
    gpu_index: {description: "The GPU of that bus id; null when no GPU of the node has it.", type: int, returned: always}
    gpu_instance_id: {description: "The MIG GPU instance (C(GPU-I:)) the line names; null without MIG.", type: int, returned: always}
    compute_instance_id: {description: "The MIG compute instance (C(GPU-CI:)) the line names.", type: int, returned: always}
    time: {description: "The time as printed.", type: str, returned: always}
    time_epoch: {description: "That time in seconds since the epoch; null when it cannot be known.", type: float, returned: always}
    pid: {description: "The process the line names.", type: int, returned: always}
    process_name: {description: "Its name.", type: str, returned: always}
    message: {description: "The text after the code and the process.", type: str, returned: always}
    line: {description: "The kernel log line(s).", type: str, returned: always}
    catalog: {description: "NVIDIA's catalog entry (name, mnemonic, bucket, action, severity).", type: dict, returned: always}
    answered_by:
      description:
        - Null while the event is evidence; else what already answered it, C(action) (V(gpu_reset),
          V(nvidia_driver_reload), V(reboot) or V(process_exit), the end of the application an Xid asked to restart)
          and C(time) (null for V(process_exit)). An answered event no longer chooses the rung.
      type: dict
      returned: always
      sample: {action: gpu_reset, time: "2026-12-01T08:44:04.123456Z"}
reset_blockers:
  description:
    - Processes that hold C(/dev/nvidiactl) and no GPU device (nv-fabricmanager, nv-hostengine, a monitoring agent, a
      stray NVML client), which keep every GPU of the node from being reset. When a GPU needs a reset, the verdict's
      reasons name them.
  returned: always
  type: list
  elements: dict
  contains:
    pid: {description: "Process id.", type: int, returned: always}
    start_time: {description: "Start time in clock ticks since boot.", type: int, returned: always}
    name: {description: "Process name.", type: str, returned: always}
    class: {description: "Its holder class (V(gpu_daemon), V(compute), ...).", type: str, returned: always}
    devices: {description: "The device nodes it holds.", type: list, elements: str, returned: always}
    systemd_unit: {description: "Its systemd unit, from its cgroup.", type: str, returned: always}
probes:
  description:
    - Health of each probe (backend, ok, timed_out, error, seconds) and of the process scan.
    - C(process_scan.memory_maps) says which tier the scan used. C(scanned) true means every process's memory maps
      were read, with C(reason) saying why; false means only the fds of every process were read (and the maps of the
      C(listed_pids) processes the driver lists), with C(reason) saying why that was enough. See O(scan_memory_maps).
    - C(journal) is the read of the node's journal (path, ok, error, records; C(read) false when the kernel log had no
      evidence for it to answer, so it was not read).
  returned: always
  type: dict
verdict:
  description: The lowest rung expected to free the memory, and the reasons.
  returned: always
  type: dict
  sample: {rung: reset, reasons: [{rung: reset, reason: "GPU 0 (00000000:18:00.0) has 4096 MiB in use that no live process accounts for"}]}
"""

from ansible_collections.gpuops.remediation.plugins.module_utils._payload_imports import compile_each_file_once

compile_each_file_once()  # before the collection's other imports: zipimport compiles each of them once

from ansible_collections.gpuops.remediation.plugins.module_utils._module import GpuModule

from ansible_collections.gpuops.remediation.plugins.module_utils._node import current_layout
from ansible_collections.gpuops.remediation.plugins.module_utils._argument_specs import SNAPSHOT_ARGUMENT_SPEC, validate_snapshot_params
from ansible_collections.gpuops.remediation.plugins.module_utils._snapshot import (
    MEMORY_MAPS_ARGUMENT_SPEC, SnapshotOptions, snapshot_or_fail,
)


def main():
    module = GpuModule(argument_spec=dict(SNAPSHOT_ARGUMENT_SPEC, journal_path=dict(type="path"), **MEMORY_MAPS_ARGUMENT_SPEC),
                       supports_check_mode=True)
    validate_snapshot_params(module)
    snapshot = snapshot_or_fail(module, current_layout(), SnapshotOptions.from_params(module.params))
    module.exit_json(changed=False, **snapshot)


if __name__ == "__main__":
    main()
