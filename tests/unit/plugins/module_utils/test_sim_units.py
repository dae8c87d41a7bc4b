# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulated init system's units (gpu_sim `units`, holders[].unit and unit_command): the node's systemctl answers
`systemctl show` for them as systemd does, with the pids of the commands that put the holders in the background (each
the holder's session id, as systemd's setsid makes it); a bad scenario is refused naming the option and the value."""

from __future__ import annotations

import os
import subprocess

import pytest

from ansible_collections.gpuops.remediation.plugins.module_utils.kill._left_behind import UNIT_PROPERTIES, parse_unit_state
from ansible_collections.gpuops.remediation.plugins.module_utils.probes import _cgroup
from ansible_collections.gpuops.remediation.plugins.module_utils.simulation import _sim_build as sim
from ansible_collections.gpuops.remediation.plugins.module_utils.simulation._sim_state import SimError
from ansible_collections.gpuops.remediation.tests.unit.helpers import bounded


def show(root, unit):
    run = bounded.run([os.path.join(root, "bin", "systemctl"), "show", UNIT_PROPERTIES, "--", unit], "systemctl show",
                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert run.returncode == 0, run.stderr
    return run.stdout


def test_the_nodes_systemctl_lists_the_commands_of_a_units_start_with_their_pids(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("not run: a unit's control group needs root")
    root = str(tmp_path / "node")
    state = sim.create_node(root, {"gpus": [{}], "units": [{"name": "prep.service"}, {
        "name": "retry.service", "active_state": "activating", "sub_state": "auto-restart", "result": "exit-code"}],
        "holders": [{"name": "first", "unit": "prep.service", "unit_command": "ExecStart"},
                    {"name": "last", "unit": "prep.service", "unit_command": "ExecStart"},
                    {"name": "post", "unit": "prep.service", "unit_command": "ExecStartPost"},
                    {"name": "old", "unit": "prep.service"},
                    {"name": "retry", "unit": "retry.service", "unit_command": "ExecStart"}]})
    try:
        holders = dict((holder["name"], holder["pid"]) for holder in state["holders"])
        sessions = dict((name, os.getsid(pid)) for name, pid in holders.items())
        assert all(sessions[name] != pid for name, pid in holders.items())  # each a program its command left running
        assert set(_cgroup.attribution(pid)["systemd_unit"] for pid in holders.values()) == {"prep.service", "retry.service"}
        assert parse_unit_state(show(root, "prep.service")) == {
            "active": "active", "sub": "exited", "result": "success", "main_pid": 0, "exec_main_pid": sessions["last"],
            "commands": {sessions["first"]: (sessions["first"], "start command"),
                         sessions["last"]: (sessions["last"], "start command"),
                         sessions["post"]: (sessions["post"], "ExecStartPost= command")}}
        assert parse_unit_state(show(root, "retry.service")) == {
            "active": "activating", "sub": "auto-restart", "result": "exit-code", "main_pid": 0,
            "exec_main_pid": sessions["retry"], "commands": {sessions["retry"]: (sessions["retry"], "start command")}}
        assert parse_unit_state(show(root, "other.service")) is None
    finally:
        sim.destroy_node(root)
    assert not any(os.path.exists(holder["cgroup"]["dir"]) for holder in state["holders"])


@pytest.mark.parametrize("spec, message", [
    ({"units": [{"name": "prep"}]}, "units[0].name 'prep' is not a service unit's name (NAME.service)"),
    ({"units": [{"name": "a/b.service"}]}, "units[0].name 'a/b.service' is not a service unit's name (NAME.service)"),
    ({"units": [{"name": "a\nb.service"}]}, "units[0].name 'a\\nb.service' is not a service unit's name (NAME.service)"),
    ({"units": [{"name": "p.service"}, {"name": "p.service"}]}, "units[1].name 'p.service' names a unit twice"),
    ({"units": [{"name": "gdm.service"}]}, "units[0].name 'gdm.service' names a unit twice"),
    ({"units": [{"name": "p.service", "active_state": "running"}]},
     "units[0].active_state 'running' is not one of active, activating, reloading, deactivating, inactive, failed"),
    ({"holders": [{"unit": "p.service"}]}, "holders[0].unit 'p.service' is not one of the node's units (none)"),
    ({"holders": [{"unit_command": "ExecStart"}]}, "holders[0].unit_command 'ExecStart' needs holders[0].unit"),
    ({"units": [{"name": "p.service"}], "holders": [{"unit": "p.service", "unit_command": "ExecStop"}]},
     "holders[0].unit_command 'ExecStop' is not one of ExecStartPre, ExecStart, ExecStartPost"),
    ({"units": [{"name": "p.service"}], "holders": [{"unit": "p.service", "running": True}]},
     "holders[0].unit: a holder a unit's command put in the background is not running (its command exited)"),
    ({"units": [{"name": "p.service"}], "holders": [{"unit": "p.service", "freezer": "v2"}]},
     "holders[0].unit: a holder with a freezer runs in a cgroup of its own, not in unit p.service's"),
])
def test_a_bad_unit_scenario_is_refused_naming_the_option_and_the_value(tmp_path, spec, message):
    with pytest.raises(SimError) as refused:
        sim.validate_spec(str(tmp_path / "node"), dict({"gpus": [{}]}, **spec))
    assert str(refused.value) == message
    assert not os.path.exists(tmp_path / "node")
