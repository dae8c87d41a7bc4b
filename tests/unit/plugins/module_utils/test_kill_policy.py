# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""kill_policy on a simulated node: the check before the lock resolves the protect entries alone; the Policy that ends
holders reads the GPU units' members from the node's own systemctl (real processes, the commands it ran recorded)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from ansible_collections.gpuops.remediation.plugins.module_utils._gpu_names import GPU_SERVICE_UNITS
from ansible_collections.gpuops.remediation.plugins.module_utils._node import SIM_ROOT_ENV
from ansible_collections.gpuops.remediation.plugins.module_utils.kill._kill import kill_policy, validate_kill_params
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._unit_members import DAEMON
from ansible_collections.gpuops.remediation.plugins.module_utils.simulation import _sim_build as sim

from ansible_collections.gpuops.remediation.tests.unit.helpers import bounded


class Failed(Exception):
    pass


class RecordingModule:
    """The part of AnsibleModule kill_policy uses; every command it runs is run for real and recorded."""

    def __init__(self, **params):
        self.params = dict({"protect_names": [], "protect_users": [], "protect_units": [], "allow_display": False,
                            "allow_daemons": False, "allow_parent_termination": False, "end_running_jobs": False,
                            "holders": None, "name_pattern": None, "cmdline_pattern": None, "users": None,
                            "grace": 5.0, "kill_grace": 5.0, "signals": ["TERM", "KILL"]}, **params)
        self.ran = []

    def run_command(self, argv):
        self.ran.append(list(argv))
        done = subprocess.run(argv, capture_output=True, text=True, timeout=bounded.DEADLINE, check=False)
        return done.returncode, done.stdout, done.stderr

    @staticmethod
    def get_bin_path(name, required=False):
        return shutil.which(name)

    def fail_json(self, **kwargs):
        raise Failed(kwargs["msg"])

    def systemctl_shows(self):
        """The units of each `systemctl show` run, in order."""
        return [list(argv[3:]) for argv in self.ran if argv[0].endswith("/systemctl") and argv[1] == "show"]


@pytest.fixture
def daemon_node(node_root, monkeypatch):
    state = sim.create_node(str(node_root), {"services": ["nvidia-persistenced"]})
    monkeypatch.setenv(SIM_ROOT_ENV, str(node_root))
    return state["services"]["nvidia-persistenced"]["pid"]


def test_the_check_before_the_lock_asks_systemd_only_of_the_protected_units(daemon_node):
    module = RecordingModule()
    validate_kill_params(module, on_node=True)
    assert module.systemctl_shows() == []
    module = RecordingModule(protect_units=["nvidia-persistenced.service"])
    validate_kill_params(module, on_node=True)
    assert module.systemctl_shows() == [["nvidia-persistenced.service"]]


def test_the_check_before_the_lock_still_refuses_a_unit_systemd_does_not_know(daemon_node):
    module = RecordingModule(protect_units=["no-such-thing.service"])
    with pytest.raises(Failed, match="no-such-thing.service"):
        validate_kill_params(module, on_node=True)


def test_the_policy_that_ends_holders_knows_the_daemons_from_one_systemctl_show(daemon_node):
    module = RecordingModule()
    policy = kill_policy(module)
    assert module.systemctl_shows() == [list(GPU_SERVICE_UNITS)]
    assert policy.members.role(daemon_node)["role"] == DAEMON
    assert policy.jobs is not None and policy.standing is not None
