# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which processes belong to the node's GPU units, as the init system says: never from a process name.

A GPU daemon is the main process of its systemd unit (MainPID) or a process in the unit's control group
(ControlGroup, compared with the process's own /proc/<pid>/cgroup path in the systemd hierarchy). A display server
is the display manager's: its main process, in its control group, or started by its main process (GDM runs Xorg in
the session scope it opens, below gdm's main process in the process tree). Any process can call itself
nvidia-persistenced or Xorg (prctl, exec -a): such a name protects nothing and hides no memory.
"""

from __future__ import annotations

from ansible_collections.gpuops.remediation.plugins.module_utils.probes import _process
from ansible_collections.gpuops.remediation.plugins.module_utils._gpu_names import DISPLAY_MANAGER, GPU_SERVICE_UNITS

DAEMON = "gpu_daemon"
DISPLAY = "display_server"


def systemd_cgroup(text):
    """The process's path in the systemd hierarchy: the cgroup v2 line (0::), or name=systemd on v1; None if neither."""
    fallback = None
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3 or not parts[2].startswith("/"):
            continue
        if parts[0] == "0" and parts[1] == "":
            fallback = fallback or parts[2]
        elif parts[1] == "name=systemd":
            return parts[2]
    return fallback


def in_control_group(path, control_group):
    """Whether the cgroup `path` is the unit's control group or one below it (not a sibling sharing a prefix)."""
    if not path or not control_group or control_group == "/":
        return False
    return path == control_group or path.startswith(control_group.rstrip("/") + "/")


def member_of(pid, state, cgroup_path, ancestors=()):
    """How pid belongs to the unit whose `state` unit_states() gave ("main_pid", "control_group", "started_by"), or None.

    `ancestors` (parent first) count only for the display manager, whose sessions run below its main process.
    """
    if not state or not state.get("active"):
        return None
    main_pid = state.get("main_pid") or 0
    if main_pid > 1 and pid == main_pid:
        return "main_pid"
    if in_control_group(cgroup_path, state.get("control_group")):
        return "control_group"
    if main_pid > 1 and main_pid in ancestors:
        return "started_by"
    return None


def by_text(role):
    """How a role was established, as a refusal says it: "main process", "in the control group", "started by"."""
    if role["by"] == "graphics_context":
        return "a graphics context (type G) on GPU %s, in no unit of the init system" % role.get("gpus")
    return {"main_pid": "its main process", "control_group": "in its control group",
            "started_by": "started by its main process"}.get(role["by"], role["by"])


class UnitMembers:
    """The GPU units as one `systemctl show` gave them, and the role of a pid in them."""

    def __init__(self, states, proc_root="/proc"):
        self.states = states or {}
        self.proc_root = proc_root

    @property
    def known(self):
        """Whether the init system answered at all (no systemctl: no process is a daemon or a display server)."""
        return bool(self.states)

    def role(self, pid):
        """{"role": DAEMON or DISPLAY, "unit", "by"} for pid, or None: what the init system says pid is."""
        if not self.states or not pid:
            return None
        cgroup = systemd_cgroup(read_text("%s/%d/cgroup" % (self.proc_root, pid)))
        ancestors = None
        for unit in GPU_SERVICE_UNITS:
            state = self.states.get(unit)
            if unit == DISPLAY_MANAGER:
                if ancestors is None:
                    ancestors = _process.ancestors(pid, self.proc_root)
                by = member_of(pid, state, cgroup, ancestors)
            else:
                by = member_of(pid, state, cgroup)
            if by:
                return {"role": DISPLAY if unit == DISPLAY_MANAGER else DAEMON, "unit": state.get("id") or unit, "by": by,
                        "asked_as": unit}
        return None


def read_text(path):
    try:
        with open(path, "rb") as handle:
            return handle.read().decode("utf-8", "replace")
    except OSError:
        return ""


def probe_unit_members(module, layout, proc_root="/proc"):
    """UnitMembers from one `systemctl show` of the GPU units (empty where the node has no systemctl)."""
    from ansible_collections.gpuops.remediation.plugins.module_utils._services import unit_states

    return UnitMembers(unit_states(module, layout.command(module, "systemctl"), GPU_SERVICE_UNITS), proc_root)
