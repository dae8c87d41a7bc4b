# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Names of the units that make up a node's GPU stack, and how a process name is matched (protect_names)."""

from __future__ import annotations

import os

# The kernel keeps only the first 15 bytes of a command name (TASK_COMM_LEN - 1).
COMM_LEN = 15

# Which process is a GPU daemon or a display server is the init system's word (_unit_members.py), never a name.
DISPLAY_MANAGER = "display-manager.service"

# Units stopped before a reset or a driver reload and started again afterwards (in reverse), in stop order.
# Every one of these daemons holds /dev/nvidiactl, and a process holding it blocks every GPU reset (nvidia-smi:
# "Please first kill all processes using this device", naming "Fabric Manager" and "a monitoring application").
# The clients go first (the exporter, then DCGM's nv-hostengine), then nv-fabricmanager, then
# nvidia-persistenced; they start again the other way round, persistenced first.
GPU_SERVICE_UNITS = (
    DISPLAY_MANAGER,
    "dcgm-exporter.service",
    "nvidia-dcgm.service",
    "dcgm.service",
    "nvidia-fabricmanager.service",
    "nvidia-persistenced.service",
)

PROCESS_STATES = {
    "R": "running", "S": "sleeping", "D": "disk-sleep", "Z": "zombie", "T": "stopped", "t": "tracing-stop",
    "X": "dead", "I": "idle", "P": "parked", "W": "waking", "K": "wakekill",
}


def process_names(name, cmdline):
    """The names a process goes by: its command name and the base name of its argv[0]."""
    names = set()
    if name:
        names.add(name)
    if cmdline and cmdline[0]:
        names.add(os.path.basename(cmdline[0].split(" ")[0]))
    return names


def first_name_match(names, candidates):
    """The first candidate one of `names` stands for, allowing for the kernel's 15-byte cut; or None."""
    for candidate in candidates:
        for name in names:
            if name == candidate or (len(name) == COMM_LEN and candidate.startswith(name)):
                return candidate
    return None
