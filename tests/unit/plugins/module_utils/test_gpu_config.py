# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_config's decisions, and its setters through pynvml's own wrappers on a simulated node (real NVML return codes)."""

from __future__ import annotations

import importlib
import os
import stat
import tempfile

import pytest

from ansible_collections.gpuops.remediation.plugins.module_utils.simulation import _sim_build as sim
from ansible_collections.gpuops.remediation.plugins.module_utils.simulation import _sim_state as sim_state
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._deadline import ProbeFailed, run_with_deadline
from ansible_collections.gpuops.remediation.plugins.module_utils._gpu_config import (
    apply_changes, busy_message, busy_reason, changes_for, compute_mode_problem, unsupported, wanted_settings,
)
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._gpu_probe import nvml_snapshot
from ansible_collections.gpuops.remediation.plugins.module_utils._node import NodeLayout


def gpu(index=0, compute_mode="Default", persistence_mode=False, processes=(), mig=None, lost=False):
    return {"index": index, "uuid": "GPU-%d" % index, "compute_mode": compute_mode, "persistence_mode": persistence_mode,
            "mig_mode": {"current": mig, "pending": mig}, "processes": list(processes), "lost": lost}


def proc(pid, kind="C", name=None):
    return {"pid": pid, "type": kind, "name": name or "p%d" % pid}


@pytest.mark.parametrize("value", ["EXCLUSIVE_PROCESS", "exclusive_process", "Exclusive_Process", " DEFAULT ", "Prohibited"])
def test_compute_modes_are_taken_in_any_case(value):
    assert compute_mode_problem(value) is None
    assert wanted_settings(value, None)["compute_mode"] in ("Exclusive_Process", "Default", "Prohibited")


def test_exclusive_thread_is_refused_as_deprecated_and_a_typo_is_named():
    assert "deprecated" in compute_mode_problem("Exclusive_Thread") and "EXCLUSIVE_PROCESS" in compute_mode_problem("Exclusive_Thread")
    assert compute_mode_problem("exclusive") == (
        "compute_mode: 'exclusive' is not one of DEFAULT, EXCLUSIVE_PROCESS, PROHIBITED")


def test_only_what_differs_changes_persistence_first():
    wanted = wanted_settings("EXCLUSIVE_PROCESS", True)
    assert list(changes_for(gpu(), wanted).items()) == [("persistence_mode", True), ("compute_mode", "Exclusive_Process")]
    assert changes_for(gpu(compute_mode="Exclusive_Process", persistence_mode=True), wanted) == {}
    assert changes_for(gpu(persistence_mode=True), wanted_settings(None, False)) == {"persistence_mode": False}


def test_busy_gpu_refuses_only_what_its_processes_contradict():
    two = gpu(processes=[proc(10), proc(11, "C+G")])
    assert busy_reason(two, {"compute_mode": "Exclusive_Process"}) == "2 compute processes share it, and Exclusive_Process allows one"
    assert busy_reason(gpu(processes=[proc(10)]), {"compute_mode": "Exclusive_Process"}) is None
    assert busy_reason(gpu(processes=[proc(10), proc(12, "G")]), {"compute_mode": "Exclusive_Process"}) is None
    assert busy_reason(gpu(processes=[proc(10)]), {"compute_mode": "Prohibited"}) == "compute processes run on it, and Prohibited allows none"
    assert busy_reason(two, {"compute_mode": "Default", "persistence_mode": True}) is None
    message = busy_message([(two, busy_reason(two, {"compute_mode": "Exclusive_Process"}))])
    assert "pid 10 (p10), pid 11 (p11)" in message and "allow_busy=true" in message and "nothing changed" in message


def test_what_nvml_cannot_set_is_refused_before_anything_changes():
    assert "NVML_ERROR_NOT_SUPPORTED" in unsupported(gpu(persistence_mode=None), {"persistence_mode": True})
    assert "MIG" in unsupported(gpu(mig=True), {"compute_mode": "Exclusive_Process"})
    assert unsupported(gpu(mig=True), {"persistence_mode": True}) is None
    assert "fallen off the bus" in unsupported(gpu(lost=True), {"persistence_mode": True})


@pytest.fixture
def node_root():
    # World-readable, so that a child running as nobody can read the node's state (tmp_path is mode 700).
    scratch = tempfile.mkdtemp(prefix="gpuops-config-")
    os.chmod(scratch, 0o755)
    root = os.path.join(scratch, "node")
    yield root
    sim.destroy_node(root)
    os.rmdir(scratch)


def settings_of(root):
    return [(g["compute_mode"], g["persistence_mode"]) for g in nvml_snapshot(NodeLayout(root))["gpus"]]


def test_the_setters_change_the_node_and_nvml_reads_them_back(node_root):
    state = sim.create_node(node_root, {"gpus": [{}, {}]})
    layout = NodeLayout(node_root)
    plan = [{"index": 1, "uuid": state["gpus"][1]["uuid"], "changes": {"persistence_mode": True, "compute_mode": "Exclusive_Process"}}]
    done = run_with_deadline(lambda: apply_changes(layout, plan), 10)
    assert [(d["setting"], d["ok"]) for d in done] == [("persistence_mode", True), ("compute_mode", True)]
    assert settings_of(node_root) == [("Default", False), ("Exclusive_Process", True)]


def test_nvml_answers_not_supported_where_the_gpu_cannot(node_root):
    state = sim.create_node(node_root, {"gpus": [{"mig_mode": True}, {}]})

    def no_persistence(data):
        sim_state.find_gpu(data, 1)["persistence_mode"] = None
    sim_state.update_state(node_root, no_persistence)
    layout = NodeLayout(node_root)
    mig = [{"index": 0, "uuid": state["gpus"][0]["uuid"], "changes": {"compute_mode": "Prohibited"}}]
    assert run_with_deadline(lambda: apply_changes(layout, mig), 10)[0]["error"] == "NVML_ERROR_NOT_SUPPORTED"
    wddm = [{"index": 1, "uuid": state["gpus"][1]["uuid"], "changes": {"persistence_mode": True}}]
    assert run_with_deadline(lambda: apply_changes(layout, wddm), 10)[0]["error"] == "NVML_ERROR_NOT_SUPPORTED"
    assert settings_of(node_root) == [("Default", False), ("Default", None)]


def test_nvml_answers_no_permission_to_a_user_who_is_not_root(node_root):
    state = sim.create_node(node_root, {"gpus": [{}]})
    os.chmod(sim_state.state_path(node_root), stat.S_IRUSR | stat.S_IWUSR | stat.S_IRGRP | stat.S_IROTH)
    layout = NodeLayout(node_root)
    plan = [{"index": 0, "uuid": state["gpus"][0]["uuid"], "changes": {"compute_mode": "Exclusive_Process"}}]

    # Load NVML's wrapper (and what it imports) before dropping to nobody: on a node where the interpreter and the
    # checkout sit in a directory only root can read (root's home, mktemp's folders), nobody could not import them.
    layout.load_nvml()
    importlib.import_module("ctypes.util")

    def as_nobody():
        if os.geteuid() == 0:  # root drops to nobody in the child; anyone else is already not root
            os.setgid(65534)
            os.setuid(65534)
        return apply_changes(layout, plan)
    try:
        done = run_with_deadline(as_nobody, 10)
    except ProbeFailed as exc:  # the child could not read the node as nobody: say why rather than pass
        pytest.fail(str(exc))
    assert (done[0]["ok"], done[0]["error"], done[0]["message"]) == (False, "NVML_ERROR_NO_PERMISSION", "Insufficient Permissions")
    assert settings_of(node_root) == [("Default", False)]
