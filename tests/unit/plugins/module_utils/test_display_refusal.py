# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A desktop is a destructive step on every display manager: the reload and the graphics rung refuse without
allow_display whatever display-manager.service points to (gdm, lightdm, sddm), naming the manager systemd resolves and
the option, from `systemctl show` as systemd prints it (here a script that answers as it does) and the real process
tree (the display manager's Xorg, started by its main process)."""

from __future__ import annotations

import os
import subprocess

import pytest

from ansible_collections.gpuops.remediation.plugins.module_utils._gpu_names import DISPLAY_MANAGER, GPU_SERVICE_UNITS
from ansible_collections.gpuops.remediation.plugins.module_utils._services import probe_services, unit_states
from ansible_collections.gpuops.remediation.plugins.module_utils.kill._display import display_refusal
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._unit_members import DISPLAY, UnitMembers


class _Node:
    def run_command(self, argv):
        run = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=30, check=False)
        return run.returncode, run.stdout, run.stderr


def _systemctl(tmp_path, manager, active, main_pid):
    """systemctl show of the GPU units: one block per unit asked, in order; display-manager.service names its target."""
    script = tmp_path / "systemctl"
    script.write_text(
        "#!/bin/sh\nshift 2\nfirst=1\nfor unit in \"$@\"; do\n  [ $first = 1 ] || echo\n  first=0\n"
        "  if [ \"$unit\" = %s ]; then printf 'Id=%s\\nLoadState=loaded\\nActiveState=%s\\nMainPID=%d\\nControlGroup=/system.slice/%s\\n'\n"
        "  else printf 'Id=%%s\\nLoadState=not-found\\nActiveState=inactive\\nMainPID=0\\nControlGroup=\\n' \"$unit\"; fi\ndone\n"
        % (DISPLAY_MANAGER, manager, active, main_pid, manager))
    script.chmod(0o755)
    return str(script)


@pytest.mark.parametrize("manager", ["gdm3.service", "lightdm.service", "sddm.service"])
def test_the_reload_and_the_graphics_rung_refuse_every_display_manager_without_allow_display(tmp_path, procs, manager):
    xorg, _line = procs.python_child("print('ready', flush=True)\nimport time\ntime.sleep(600)", argv0="Xorg")
    states = unit_states(_Node(), _systemctl(tmp_path, manager, "active", os.getpid()), list(GPU_SERVICE_UNITS))
    members = UnitMembers(states)
    role = members.role(xorg.pid)
    assert role["role"] == DISPLAY and role["by"] == "started_by"
    holders = [{"pid": xorg.pid, "name": "Xorg", "class": "graphics_session", "unit_role": role}]
    snapshot = {"services": probe_services(members, holders), "holders": holders}
    for module_name, step in (("nvidia_driver_reload", "stopping display-manager.service"),
                              ("gpu_graphics_restart", "systemctl isolate multi-user.target")):
        refused = display_refusal(module_name, step, snapshot, allow_display=False)
        assert refused == ("%s refused: %s would end the display server %s (%s): pid %d, pid %d Xorg and log its users' sessions "
                           "off; allow_display=true (gpu_reclaim_allow_display through the roles) allows it"
                           % (module_name, step, DISPLAY_MANAGER, manager, os.getpid(), xorg.pid)), refused
        assert display_refusal(module_name, step, snapshot, allow_display=True) is None


def test_a_display_manager_that_does_not_run_ends_no_desktop(tmp_path):
    states = unit_states(_Node(), _systemctl(tmp_path, "sddm.service", "inactive", 0), list(GPU_SERVICE_UNITS))
    snapshot = {"services": probe_services(UnitMembers(states), []), "holders": []}
    assert display_refusal("nvidia_driver_reload", "the reload", snapshot, allow_display=False) is None
