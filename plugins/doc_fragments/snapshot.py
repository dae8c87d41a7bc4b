# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The options of every module that takes a snapshot of a Linux GPU node (module_utils._argument_specs.SNAPSHOT_ARGUMENT_SPEC)."""

from __future__ import annotations


class ModuleDocFragment:

    # The options of every module that takes a snapshot of the node (module_utils._argument_specs.SNAPSHOT_ARGUMENT_SPEC).
    DOCUMENTATION = r"""
options:
  gpus:
    description:
      - The GPUs to look at, each by index (V(0)), UUID (V(GPU-5e1c...)) or PCI bus id (V(00000000:18:00.0)).
      - Left out (or null), every GPU of the node. An empty list (what a filter that matched nothing gives) selects no
        GPU - the module says so and changes nothing.
      - A name that matches no GPU fails the module, naming it.
      - Any of these names followed by C(@) and a GPU UUID (V(00000000:18:00.0@GPU-5e1c...), what an alert naming its GPU
        by both gives) selects that GPU (or instance) only when its GPU has that UUID; else the module fails naming both
        names and every GPU of the node, and changes nothing.
      - "On a GPU with MIG mode on, a MIG instance: its MIG device UUID (V(MIG-4f7c...)) or V(GPU:GI) / V(GPU:GI/CI), the
        GPU index and the GPU (and compute) instance ids, as an Xid line names them (C(GPU-I:05 GPU-CI:00) is V(0:5/0) on
        GPU 0); a text that is also a short PCI bus id of a GPU of the node (V(1:0) is C(01:00.0)) fails the module, asking
        for the bus id in full or the MIG device UUID. Such a selection reaches only the holders in that
        instance; a reset or a driver reload, which reach the whole GPU, are refused for it. An instance the GPU lacks fails
        the module, listing the node's instances."
    type: list
    elements: str
  backend:
    description:
      - How to read the GPUs.
      - V(nvml) uses nvidia-ml-py on the target and fails when it is not installed.
      - V(nvidia_smi) parses C(nvidia-smi -q -x); it gives the same snapshot.
      - V(auto) uses V(nvml) when nvidia-ml-py is importable, else V(nvidia_smi).
    type: str
    choices: [auto, nvml, nvidia_smi]
    default: auto
  probe_timeout:
    description:
      - Seconds the driver probe may take. NVML and nvidia-smi run in a child process that is killed at this
        deadline; a driver that does not answer makes the GPUs V(unresponsive) instead of hanging the play.
    type: float
    default: 10.0
  kernel_log_source:
    description:
      - Where to read Xid events and "fallen off the bus" messages.
      - V(auto) reads the journal (C(journalctl -k)) when journalctl exists, else C(dmesg -T); on a simulated
        node, its kernel log file.
      - V(file) reads O(kernel_log_path) (a syslog or kern.log file). V(none) skips the kernel log.
    type: str
    choices: [auto, journal, dmesg, file, none]
    default: auto
  kernel_log_path:
    description:
      - The file to read with O(kernel_log_source=file).
    type: path
  kernel_log_window:
    description:
      - Only the last this many minutes of the journal. Unset reads the whole current boot.
    type: int
  ghost_threshold_mib:
    description:
      - Memory in use on a GPU beyond what its live processes account for, above which the GPU counts as
        holding ghost memory (a reset is needed to get it back).
    type: int
    default: 256
  xid_policy:
    description:
      - The site's Xid policy, over NVIDIA's Xid catalog - a mapping of Xid code to the rung that Xid asks for,
        one of V(none), V(kill), V(reset), V(reboot). Codes not named keep the catalog's action.
      - The roles pass C(gpuops_xid_policy), which an operator can keep in the inventory
        (C(group_vars/all/gpuops_xid_policy.yml)); the event sources of C(extensions/eda) read the same file.
        See docs/eda.md.
    type: dict
    default: {}
"""

    # gpu_holders_info's choice of scan tier (module_utils._snapshot.MEMORY_MAPS_ARGUMENT_SPEC).
    MEMORY_MAPS = r"""
options:
  scan_memory_maps:
    description:
      - Whether the scan of C(/proc) reads the memory maps (C(/proc/<pid>/maps)) of every process, which finds a
        process that holds a GPU only through a mapping of a device node, its file descriptor closed. The file
        descriptors of every process are always read, and the maps of the processes the driver lists.
      - Reading every process's maps is most of the cost of a scan on a busy node.
      - V(auto) reads them when they can change the answer, when a GPU has more memory in use than the processes the
        driver lists account for (beyond O(ghost_threshold_mib)), when the driver does not say how much each process
        uses, or when it does not answer; otherwise a healthy node costs the fd scan alone.
      - V(always) reads them on every run. V(never) reads only the fds (and the listed processes' maps).
      - The modules that act (M(gpuops.remediation.gpu_kill), M(gpuops.remediation.gpu_reset),
        M(gpuops.remediation.nvidia_driver_reload)) always read every process's maps.
      - C(probes.process_scan.memory_maps) in the result says which tier ran, and why.
    type: str
    choices: [auto, always, never]
    default: auto
"""

    # The options of the modules that act (module_utils._argument_specs.ACTION_ARGUMENT_SPEC).
    ACTION = r"""
options:
  journal_path:
    description:
      - The journal on the node, one JSON line per action, written and fsync'd before the action and again with its
        outcome, so that a run killed at any point leaves a record of what it attempted.
      - Defaults to C(/var/lib/gpuops/journal.jsonl) (under the simulated root on a simulated node).
    type: path
  lock_timeout:
    description:
      - Seconds to wait for the node lock that keeps two remediation runs from acting on one node at once.
        When it stays held, the module fails and names the holder.
    type: float
    default: 60.0
  run_id:
    description:
      - An identifier written into every journal line of this run (for example the AWX job id), to trace a leak
        back to the run that acted on it.
    type: str
"""
