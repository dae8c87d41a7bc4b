# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The real reset_gpu.yml (ansible-playbook in a child, bounded) against simulated nodes of a test's own whose GPU 0 is
idle and whose kernel log holds one Xid on it: its report and the commands the node ran."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import tempfile

from ansible_collections.gpuops.remediation.plugins.module_utils.simulation import _sim_build
from ansible_collections.gpuops.remediation.tests.unit.helpers import bounded, playbook

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


@contextlib.contextmanager
def idle_xid_nodes():
    """(directory, make): make(xid) builds a node of two idle GPUs with that Xid on GPU 0 (make(xid, gpus): these GPUs,
    as _sim_build takes them); all removed at the end."""
    directory = tempfile.mkdtemp(prefix="gpuops-xid-node-")
    made = []

    def make(xid, gpus=({}, {})):
        root = os.path.join(directory, "node%d" % len(made))
        _sim_build.create_node(root, {"gpus": [dict(gpu) for gpu in gpus], "xid": [{"xid": xid, "gpu": 0}]})
        made.append(root)
        return root

    try:
        yield directory, make
    finally:
        for root in made:
            _sim_build.destroy_node(root)
        shutil.rmtree(directory)


def resets(commands):
    return [argv for argv in commands if "--gpu-reset" in argv]


def reset_gpu(directory, root, collections_root, policy=None, extra=()):
    """reset_gpu.yml on the node (policy: the host's gpuops_xid_policy; extra: more ansible-playbook arguments); its run,
    its report's host entry (None when the run wrote no report) and the commands the node ran."""
    reports = os.path.join(directory, "reports-%s" % os.path.basename(root))
    inventory = os.path.join(directory, "inventory-%s.json" % os.path.basename(root))
    host = {"gpuops_environment": {"GPUOPS_SIM_ROOT": root}, "ansible_connection": "local",
            "ansible_python_interpreter": sys.executable, "gpu_remediate_report_dir": reports,
            "gpu_reclaim_health_check": "never", "gpu_remediate_max_destructive_percent": 100}
    if policy is not None:
        host["gpuops_xid_policy"] = policy
    with open(inventory, "w") as handle:
        json.dump({"gpu_nodes": {"hosts": {"gpunode": host}}}, handle)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collections_root, ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCAL_TEMP=os.path.join(directory, "ansible-local"))
    env.pop("GPUOPS_SIM_ROOT", None)
    argv = playbook.ANSIBLE_PLAYBOOK + ["-i", inventory, os.path.join(ROOT, "playbooks", "reset_gpu.yml")] + list(extra)
    run = bounded.run(argv, "reset_gpu.yml", timeout=300, env=env, capture_output=True, text=True)
    report = None
    if os.path.exists(os.path.join(reports, "latest.json")):
        with open(os.path.join(reports, "latest.json")) as handle:
            report = json.load(handle)["hosts"][0]
    commands = []
    if os.path.exists(os.path.join(root, "commands.jsonl")):  # none before the node's first command
        with open(os.path.join(root, "commands.jsonl")) as handle:
            commands = [json.loads(line)["argv"] for line in handle if line.strip()]
    return run, report, commands
