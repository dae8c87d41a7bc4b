# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Names of the processes and units that make up a node's GPU stack."""

from __future__ import annotations

# Daemon process name -> the systemd unit that runs it.
GPU_DAEMONS = {
    "nvidia-persistenced": "nvidia-persistenced.service",
    "nv-fabricmanager": "nvidia-fabricmanager.service",
    "nv-hostengine": "nvidia-dcgm.service",
    "dcgm-exporter": "dcgm-exporter.service",
}

DISPLAY_PROCESSES = frozenset((
    "Xorg", "X", "Xwayland", "gdm", "gdm3", "gdm-x-session", "gdm-wayland-session", "sddm", "lightdm",
    "gnome-shell", "kwin_x11", "kwin_wayland", "Xvnc",
))

# Units stopped before a reset or a driver reload and started again afterwards, in stop order.
GPU_SERVICE_UNITS = (
    "display-manager.service",
    "nvidia-dcgm.service",
    "dcgm.service",
    "nvidia-fabricmanager.service",
    "nvidia-persistenced.service",
)

PROCESS_STATES = {
    "R": "running", "S": "sleeping", "D": "disk-sleep", "Z": "zombie", "T": "stopped", "t": "tracing-stop",
    "X": "dead", "I": "idle", "P": "parked", "W": "waking", "K": "wakekill",
}
