# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A desktop is a destructive step too: a rung that would stop the display manager (the driver reload) or the whole
graphics stack (the graphics restart) ends the display server and logs its users' sessions off, so it runs only with
allow_display; without it, it refuses before anything changes, naming the display server and the option."""

from __future__ import annotations

from ansible_collections.gpuops.remediation.plugins.module_utils._gpu_names import DISPLAY_MANAGER


def display_servers(snapshot):
    """What ending the desktop would end, as the init system and the snapshot name it: the display manager's unit (as
    systemd resolves display-manager.service: gdm3.service, sddm.service) when it runs, and its processes and every
    process of the graphics stack that holds a GPU (class graphics_session), each by pid and name; "" when none."""
    names = dict((holder["pid"], holder.get("name") or "") for holder in snapshot.get("holders") or [])
    units = [service for service in snapshot.get("services") or [] if service["unit"] == DISPLAY_MANAGER and service.get("active")]
    pids = [pid for service in units for pid in service.get("pids") or []]
    pids += [holder["pid"] for holder in snapshot.get("holders") or [] if holder.get("class") == "graphics_session" and holder["pid"] not in pids]
    processes = ", ".join(("pid %s %s" % (pid, names.get(pid, ""))).strip() for pid in pids)
    unit = ""
    if units:
        resolved = units[0].get("id") or DISPLAY_MANAGER
        unit = DISPLAY_MANAGER if resolved == DISPLAY_MANAGER else "%s (%s)" % (DISPLAY_MANAGER, resolved)
    return "%s: %s" % (unit, processes) if unit and processes else unit or processes


def display_refusal(module_name, step, snapshot, allow_display):
    """Why `module_name` refuses `step` (which ends the desktop: the display manager stopped, the graphics stack
    isolated away), or None when allow_display allows it or there is no desktop to end."""
    if allow_display:
        return None
    servers = display_servers(snapshot)
    if not servers:
        return None
    return ("%s refused: %s would end the display server %s and log its users' sessions off; allow_display=true "
            "(gpu_reclaim_allow_display through the roles) allows it" % (module_name, step, servers))
