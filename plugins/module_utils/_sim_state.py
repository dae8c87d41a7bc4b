# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The read side of a simulated GPU node: its state file and the rules that derive what NVML reports.

Split from _sim_node.py so that the simulated NVML, which a module loads on every snapshot of a simulated node,
imports only this; _sim_node.py (building nodes, spawning their processes) imports it too.
"""

from __future__ import annotations

import json
import os


class SimError(Exception):
    """A simulated-node operation that cannot be done; the message names the culprit."""


def state_path(root):
    return os.path.join(root, "state.json")


def load_state(root):
    """The node's state, or raise SimError when root holds no simulated node."""
    try:
        with open(state_path(root)) as handle:
            return json.load(handle)
    except (IOError, OSError) as exc:
        raise SimError("no simulated GPU node at %s: %s" % (root, exc))


def proc_stat(pid, proc_root="/proc"):
    """(state letter, start_time ticks, ppid) of a process or thread, or None when it does not exist."""
    try:
        with open(os.path.join(proc_root, str(pid), "stat"), "rb") as handle:
            data = handle.read()
    except (IOError, OSError):
        return None
    rest = data[data.rfind(b")") + 2:].split()
    return rest[0].decode(), int(rest[19]), int(rest[1])


def start_time_of(pid):
    stat = proc_stat(pid)
    return stat[1] if stat else None


def process_exists(pid, start_time):
    """True while a process with this pid and this start time exists (a zombie still exists)."""
    return bool(pid) and pid > 0 and start_time_of(pid) == start_time


def find_gpu(state, index):
    for gpu in state["gpus"]:
        if gpu["index"] == index:
            return gpu
    raise SimError("no GPU with index %s on this node" % index)


def live_holders(state, index=None):
    """Holders whose process (pid and start time) still exists; on GPU `index` when given."""
    result = []
    for holder in state.get("holders", []):
        if index is not None and str(index) not in holder.get("gpus", {}):
            continue
        if process_exists(holder["pid"], holder["start_time"]):
            result.append(holder)
    return result


def gpu_memory(state, index):
    """Memory of one GPU in MiB, the way nvidia-smi -q and NVML's v2 struct split it.

    used = live holders' memory + ghost (memory nobody alive accounts for); reserved is apart from used;
    free = total - reserved - used; attributed = what live processes account for.
    """
    gpu = find_gpu(state, index)
    attributed = sum(int(h["gpus"][str(index)]) for h in live_holders(state, index))
    used = attributed + int(gpu.get("ghost_mib", 0))
    total = int(gpu["memory_total_mib"])
    reserved = int(gpu.get("memory_reserved_mib", 0))
    return {"total_mib": total, "reserved_mib": reserved, "used_mib": used,
            "free_mib": max(total - reserved - used, 0), "attributed_mib": attributed,
            "ghost_mib": int(gpu.get("ghost_mib", 0))}


def driver_loaded(state):
    return bool(state["modules"].get("nvidia", {}).get("loaded"))


def normalize_bus_id(text):
    """'18:00.0', '0000:18:00.0', '00000000:18:00.0' (any case) -> '00000000:18:00.0'."""
    value = str(text).strip()
    parts = value.split(":")
    if len(parts) == 2:
        parts = ["0"] + parts
    if len(parts) != 3 or "." not in parts[2]:
        raise SimError("pci_bus_id %r is not a PCI bus id like 00000000:18:00.0" % (text,))
    device, _sep, function = parts[2].partition(".")
    try:
        return "%08X:%02X:%02X.%X" % (int(parts[0], 16), int(parts[1], 16), int(device, 16), int(function, 16))
    except ValueError:
        raise SimError("pci_bus_id %r is not a PCI bus id like 00000000:18:00.0" % (text,))
