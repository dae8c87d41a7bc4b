# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A selection naming no GPU of the node says what the node has: every GPU's index, UUID and bus id, through a real
ansible-playbook run of gpu_holders_info and gpu_reset against a simulated node with GPUs 0 and 1."""

from __future__ import annotations

import os

from ansible_collections.gpuops.remediation.tests.unit.helpers.playbook_run import localhost_play

TASKS = """
        - gpuops.remediation.gpu_sim: {root: %(root)s, gpus: [{}, {}]}
        - gpuops.remediation.gpu_holders_info: {}
          environment: {GPUOPS_SIM_ROOT: %(root)s}
          register: node
        - gpuops.remediation.gpu_holders_info: {gpus: ["7"]}
          environment: {GPUOPS_SIM_ROOT: %(root)s}
          register: info
          ignore_errors: true
        - gpuops.remediation.gpu_reset: {gpus: ["0000:99:00.0"]}
          environment: {GPUOPS_SIM_ROOT: %(root)s}
          register: reset
          ignore_errors: true
"""


def test_an_unknown_gpu_is_answered_with_the_gpus_there_are(tmp_path, collections_root):
    result = localhost_play(tmp_path, TASKS, ["node", "info", "reset"], collections_root)
    gpus = result["node"]["gpus"]
    assert [gpu["index"] for gpu in gpus] == [0, 1]
    there = "; ".join("%d (%s, %s)" % (gpu["index"], gpu["uuid"], gpu["pci_bus_id"]) for gpu in gpus)
    assert result["info"]["failed"] and result["info"]["msg"].startswith("gpus: no GPU on this node is named '7'")
    assert result["info"]["msg"].endswith("this node has: " + there)
    assert result["reset"]["failed"] and "named '0000:99:00.0'" in result["reset"]["msg"]
    assert result["reset"]["msg"].endswith("this node has: " + there)
    assert not os.path.exists(str(tmp_path / "node"))
