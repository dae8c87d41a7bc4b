# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""An acting module imports nvidia-ml-py's Python module once, in its own process, before its probe children fork
(_action.import_nvml_before_forks): each child inherits it, and still binds the node's NVML and asks it under its own
deadline. Each case runs in a fresh Python (the test process may have imported pynvml already), against a simulated
node whose NVML the probe child answers from."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ansible_collections.gpuops.remediation.plugins.module_utils.simulation import _sim_build as sim
from ansible_collections.gpuops.remediation.tests.unit.helpers import bounded

pynvml = pytest.importorskip("pynvml", reason="nvidia-ml-py is not installed: the NVML probe is not run here")

# In the fresh Python: whether pynvml is loaded before any probe, then two probes, each child saying whether it found
# pynvml loaded when it started, and the GPUs NVML gave it.
PROBE_TWICE = """
import json, sys
from ansible_collections.gpuops.remediation.plugins.module_utils._action import import_nvml_before_forks
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._deadline import run_with_deadline
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._gpu_probe import nvml_snapshot
from ansible_collections.gpuops.remediation.plugins.module_utils._node import current_layout

import_nvml_before_forks(sys.argv[1], 30)
layout = current_layout()
parent = "pynvml" in sys.modules

def probe():
    inherited = "pynvml" in sys.modules
    return {"inherited": inherited, "gpus": [gpu["index"] for gpu in nvml_snapshot(layout)["gpus"]]}

print(json.dumps({"parent": parent, "children": [run_with_deadline(probe, 30) for dummy in range(2)]}))
"""


@pytest.mark.parametrize("backend, imported", [("auto", True), ("nvml", True), ("nvidia_smi", False)])
def test_each_probe_child_inherits_nvml_and_still_asks_the_node(tmp_path, child_env, backend, imported):
    root = str(tmp_path / "node")
    sim.create_node(root, {"gpus": [{}, {}]})
    try:
        env = dict(child_env, GPUOPS_SIM_ROOT=root)
        run = bounded.run([sys.executable, "-c", PROBE_TWICE, backend], "two NVML probes with backend=%s" % backend,
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
        assert run.returncode == 0, run.stderr
        seen = json.loads(run.stdout)
        assert seen["parent"] is imported
        # nvidia_smi: nothing loaded it before the fork, each child imports it for itself, as before.
        assert [child["inherited"] for child in seen["children"]] == [imported, imported]
        assert [child["gpus"] for child in seen["children"]] == [[0, 1], [0, 1]]
    finally:
        sim.destroy_node(root)
