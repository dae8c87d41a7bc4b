# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Console lines for humans (each through _escape.printable): a snapshot's (the role gpu_inspect's gpu_inspect_summary) and the holder lines the ladder's
outcome summary shares with it (_ladder_outcome.summary_lines)."""

from __future__ import annotations

from ansible_collections.gpuops.remediation.plugins.module_utils._escape import printable
from ansible_collections.gpuops.remediation.plugins.module_utils._gpu_names import holder_command


def _mib(value):
    """0 MiB is a value: only an unknown one prints as ?."""
    return "?" if value is None else value


def holder_line(holder):
    """"  held by pid 4242 trainer (alice, compute) on GPU 0: 4096 MiB", a zombie's parent named."""
    where = "GPU " + ",".join(str(index) for index in holder["gpus"]) if holder.get("gpus") else "no GPU (node-wide device files only)"
    zombie = ", zombie of pid %s %s" % (holder.get("ppid"), holder.get("parent_name") or "") if holder.get("state") == "zombie" else ""
    return printable("  held by pid %s %s (%s, %s%s) on %s: %s MiB" % (
        holder["pid"], holder.get("command") or holder_command(holder), holder.get("user") or "?", holder["class"], zombie.rstrip(), where,
        holder["used_mib"] if holder.get("used_mib") is not None else "N/A"))


def snapshot_lines(snapshot):
    """A snapshot (gpu_holders_info or win_gpu_holders_info) as lines: each GPU with its holders, then the verdict."""
    lines = []
    for gpu in snapshot["gpus"]:
        lines.append("GPU %s %s (%s): %s/%s MiB used, ghost %s MiB, state %s" % (
            gpu["index"], gpu.get("name") or "(name unknown)", gpu.get("pci_bus_id") or "bus id unknown",
            _mib(gpu.get("memory_used_mib")), _mib(gpu.get("memory_total_mib")), _mib(gpu.get("unattributed_mib")), gpu.get("state")))
        lines += [holder_line(holder) for holder in snapshot["holders"] if gpu["index"] in (holder.get("gpus") or [])]
    lines.append("verdict: %s" % snapshot["verdict"]["rung"])
    lines += ["  - %s: %s" % (reason["rung"], reason["reason"]) for reason in snapshot["verdict"]["reasons"]]
    return [printable(line) for line in lines]  # names from the node: one console line each, no ESC reaching a terminal
