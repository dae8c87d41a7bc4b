# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Stop the GPU daemons that run, and start again exactly those, whatever happened in between."""

from __future__ import annotations

from ansible_collections.gpuops.remediation.plugins.module_utils._command import CommandRunner
from ansible_collections.gpuops.remediation.plugins.module_utils._gpu_names import GPU_SERVICE_UNITS


class ServiceError(Exception):
    pass


def unit_states(module, systemctl, units):
    """{unit: {"id", "loaded", "active", "main_pid", "control_group"}} from one `systemctl show`.

    systemctl prints one block per unit asked, in the order asked, and names an alias by what it points to
    (display-manager.service shows as Id=gdm3.service): blocks are matched by position, not by Id.
    """
    if not systemctl or not units:
        return {}
    dummy, out, dummy = CommandRunner(module).probe([systemctl, "show", "--property=Id,LoadState,ActiveState,MainPID,ControlGroup"] + list(units))
    blocks = [dict(line.split("=", 1) for line in block.splitlines() if "=" in line) for block in out.strip().split("\n\n")]
    states = {}
    for unit, fields in zip(units, blocks):
        states[unit] = {"id": fields.get("Id") or unit, "loaded": fields.get("LoadState", "loaded") != "not-found",
                        "active": fields.get("ActiveState") == "active",
                        "main_pid": int(fields.get("MainPID") or 0), "control_group": fields.get("ControlGroup") or None}
    return states


class GpuServices:
    """systemctl on the node's GPU units; every stop and start is journaled."""

    def __init__(self, module, layout, journal):
        self.module = module
        self.systemctl = layout.command(module, "systemctl")
        self.journal = journal
        self.runner = CommandRunner(module, journal)
        self.stopped = []

    def active(self, units=GPU_SERVICE_UNITS):
        """The units among `units` that run now, in the order given, each once (an alias names its unit's Id)."""
        states = unit_states(self.module, self.systemctl, units)
        running, ids = [], set()
        for unit in units:
            state = states.get(unit, {})
            if state.get("active") and state["id"] not in ids:
                ids.add(state["id"])
                running.append(unit)
        return running

    def start_left_stopped(self, units):
        """Start, in reverse stop order, the units an interrupted run left stopped (those not running now).
        Returns (started, errors); never raises."""
        started, errors = [], []
        # The unit that is there now: one no longer installed (or masked since) is not started.
        states = unit_states(self.module, self.systemctl, units)
        still_down = [unit for unit in units if unit not in self.active(units) and states.get(unit, {}).get("loaded", True)]
        for unit in reversed(still_down):
            try:
                self._systemctl("start", unit, reason="left stopped by an interrupted run")
                started.append(unit)
            except ServiceError as exc:
                errors.append(str(exc))
        return started, errors

    def isolate_back(self, target):
        """Isolate `target` again (an interrupted graphics restart left the node below it) unless it is active now.
        Returns (target when it was isolated, else None; errors); never raises."""
        rc, out, dummy = self.runner.probe([self.systemctl, "is-active", target])
        if out.strip() == "active":
            return None, []
        rc, out, err = self.runner.act([self.systemctl, "isolate", target], "systemctl_isolate", journal_argv=False,
                                       target=target, reason="left below it by an interrupted run")
        if rc != 0:
            return None, ["systemctl isolate %s failed (rc %d): %s" % (target, rc, (err or out).strip())]
        return target, []

    def _systemctl(self, verb, unit, **details):
        rc, out, err = self.runner.act([self.systemctl, verb, unit], "systemctl_%s" % verb, journal_argv=False,
                                       outcome={"unit": unit}, unit=unit, **details)
        if rc != 0:
            raise ServiceError("systemctl %s %s failed (rc %d): %s" % (verb, unit, rc, (err or out).strip()))

    def stop(self, units):
        """Stop `units` in order; remembers each one stopped so restore() starts exactly those."""
        for unit in units:
            self._systemctl("stop", unit)
            self.stopped.append(unit)

    def restore(self):
        """Start again, in reverse order, what stop() stopped. Returns (started, errors); never raises."""
        started, errors = [], []
        while self.stopped:
            unit = self.stopped.pop()
            try:
                self._systemctl("start", unit)
                started.append(unit)
            except ServiceError as exc:
                errors.append(str(exc))
        return started, errors


def probe_services(members, holders):
    """GPU daemons and the display manager: whether each unit runs, and its pids (its main process and the holders
    the init system puts in it: UnitMembers, never a process name)."""
    pids_by_unit = {}
    for holder in holders:
        role = holder.get("unit_role")
        if role:
            pids_by_unit.setdefault(role["asked_as"], []).append(holder["pid"])
    services = []
    for unit in GPU_SERVICE_UNITS:
        state = members.states.get(unit, {})
        active = state.get("active", False)
        pids = sorted(set(pids_by_unit.get(unit, []) + ([state["main_pid"]] if active and state.get("main_pid") else [])))
        if active or pids:
            services.append({"unit": unit, "id": state.get("id", unit), "active": active, "pids": pids})
    return services
