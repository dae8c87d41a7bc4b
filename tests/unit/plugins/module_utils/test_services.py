# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""_services against the simulated node's systemctl: real service processes stopped and started again."""

from __future__ import annotations

import subprocess

from ansible_collections.gpuops.remediation.plugins.module_utils.simulation import _sim_build as sim
from ansible_collections.gpuops.remediation.plugins.module_utils.simulation._sim_state import load_state
from ansible_collections.gpuops.remediation.plugins.module_utils.journal._writer import Journal
from ansible_collections.gpuops.remediation.plugins.module_utils._node import NodeLayout
from ansible_collections.gpuops.remediation.plugins.module_utils._services import GpuServices


class Commands:
    """The part of AnsibleModule that GpuServices uses: run an argv list, give (rc, stdout, stderr)."""

    def run_command(self, argv):
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
        return done.returncode, done.stdout, done.stderr

    def fail_json(self, **kwargs):
        raise AssertionError(kwargs)


def test_every_daemon_once_in_stop_order_and_started_again_in_reverse(node_root, tmp_path):
    before = sim.create_node(node_root, {"services": ["nvidia-persistenced", "nvidia-fabricmanager", "nvidia-dcgm"]})
    journal = Journal(str(tmp_path / "journal.jsonl"))
    services = GpuServices(Commands(), NodeLayout(node_root), journal)
    # dcgm.service is an alias of nvidia-dcgm.service: the unit is stopped once, not twice.
    units = services.active()
    assert units == ["nvidia-dcgm.service", "nvidia-fabricmanager.service", "nvidia-persistenced.service"]
    services.stop(units)
    assert services.active() == []
    assert all(not info["active"] for info in load_state(node_root)["services"].values())
    started, errors = services.restore()
    assert (started, errors) == (list(reversed(units)), [])
    after = load_state(node_root)["services"]
    for name in ("nvidia-persistenced", "nvidia-fabricmanager", "nvidia-dcgm"):
        assert after[name]["active"] and after[name]["pid"] != before["services"][name]["pid"]
    assert [e["action"] for e in journal.entries() if e["phase"] == "intent"] == (
        ["systemctl_stop"] * 3 + ["systemctl_start"] * 3)
