# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:

    # The options of every module that takes a snapshot of the node (module_utils._snapshot.SNAPSHOT_ARGUMENT_SPEC).
    DOCUMENTATION = r"""
options:
  gpus:
    description:
      - The GPUs to look at, each by index (V(0)), UUID (V(GPU-5e1c...)) or PCI bus id (V(00000000:18:00.0)).
      - Empty means every GPU of the node.
      - A name that matches no GPU fails the module, naming it.
    type: list
    elements: str
    default: []
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
"""

    # The options of the modules that act (module_utils._action.ACTION_ARGUMENT_SPEC).
    ACTION = r"""
options:
  journal_path:
    description:
      - The journal on the node, one JSON line per action, written and fsync'd before the action and again with its
        outcome, so that a run killed at any point leaves a record of what it attempted.
      - Defaults to C(/var/log/gpuops/journal.jsonl) (under the simulated root on a simulated node).
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
