# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Under WDDM every application that draws on the GPU holds memory on it: only compute processes are the kill rung's.

Through the real snapshot and the real kill on a simulated Windows workstation: a browser and an editor (nvidia-smi
type G) beside a CUDA job (type C)."""

from __future__ import annotations

from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.tools import _nvidia_smi_output
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.rungs import _reset_dispatch
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.simulation import _simulated_node
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows import _node_snapshot
from ansible_collections.gpuops.remediation.plugins.module_utils._verdict import kill_targets
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node._remote_node import SimulatedNode

WORKSTATION = {"hostname": "WS12", "gpus": [{"name": "NVIDIA GeForce RTX 4090", "driver_model": "WDDM"}],
               "processes": [{"name": "chrome.exe", "memory_mib": 900, "graphics": True},
                             {"name": "Code.exe", "memory_mib": 300, "graphics": True},
                             {"name": "python.exe", "memory_mib": 8000}]}


def build(tmp_path, scenario):
    root = str(tmp_path / "ws")
    _simulated_node.write_node(root, _simulated_node.build_state(scenario))
    return root


def by_name(snapshot):
    return dict((holder["name"], holder) for holder in snapshot["holders"])


def test_applications_that_only_draw_are_graphics_holders_and_the_job_is_compute(tmp_path):
    snapshot = _node_snapshot.take(SimulatedNode(build(tmp_path, WORKSTATION)))
    holders = by_name(snapshot)
    assert (holders["chrome.exe"]["class"], holders["chrome.exe"]["nvidia_smi_types"]) == ("graphics_session", ["G"])
    assert holders["Code.exe"]["class"] == "graphics_session"
    assert (holders["python.exe"]["class"], holders["python.exe"]["nvidia_smi_types"]) == ("compute", ["C+G"])
    assert [holder["name"] for holder in kill_targets(snapshot, "windows")] == ["python.exe"]


def test_the_kill_rung_ends_the_job_and_leaves_the_desktop_applications_running(tmp_path):
    root = build(tmp_path, WORKSTATION)
    targets = kill_targets(_node_snapshot.take(SimulatedNode(root)), "windows")
    holders = [{"pid": holder["pid"], "creation_time_ms": holder["creation_time_ms"]} for holder in targets]
    result = _reset_dispatch.run(SimulatedNode(root), {"method": "kill", "holders": holders}, check_mode=False)
    after = by_name(_node_snapshot.take(SimulatedNode(root)))
    assert result["changed"] and len(result["ended_pids"]) == 1
    assert "python.exe" not in after
    assert {"chrome.exe", "Code.exe"} <= set(after)


def test_a_process_nvidia_smi_does_not_list_as_compute_is_left_alone():
    listed_g = [(0, {"pid": 1, "type": "G"})]
    listed_unknown = [(0, {"pid": 1, "type": None})]
    listed_compute = [(0, {"pid": 1, "type": "C"}), (1, {"pid": 1, "type": "G"})]
    assert not _node_snapshot._compute_context(listed_g)
    assert not _node_snapshot._compute_context(listed_unknown)
    assert not _node_snapshot._compute_context([])  # seen by the counters only
    assert _node_snapshot._compute_context(listed_compute)


def test_every_row_of_the_compute_apps_query_is_a_compute_context():
    gpus = [{"pci_bus_id": "00000000:01:00.0", "driver_model": {"current": "WDDM", "pending": "WDDM"}}]
    text = "1234, python.exe, 00000000:01:00.0, GPU-1, [N/A]\n"
    rows = _nvidia_smi_output.parse_compute_apps_csv(text, gpus, fields=("pid", "process_name", "gpu_bus_id", "gpu_uuid", "used_gpu_memory"))
    assert [row["type"] for row in rows] == ["C"]


def test_a_holder_whose_tree_holds_a_process_never_ended_is_left_alone_with_its_tree(tmp_path):
    scenario = dict(WORKSTATION, processes=[{"name": "python.exe", "memory_mib": 8000,
                                             "children": [{"name": "wsmprovhost.exe", "memory_mib": 0}]}])
    root = build(tmp_path, scenario)
    targets = kill_targets(_node_snapshot.take(SimulatedNode(root)), "windows")
    holders = [{"pid": holder["pid"], "creation_time_ms": holder["creation_time_ms"]} for holder in targets]
    result = _reset_dispatch.run(SimulatedNode(root), {"method": "kill", "holders": holders}, check_mode=False)
    assert not result["changed"] and result["ended_pids"] == []
    assert "wsmprovhost.exe" in result["plan"][0] and "as a tree" in result["plan"][0]
    assert "python.exe" in by_name(_node_snapshot.take(SimulatedNode(root)))
    assert not [entry for entry in _simulated_node.snapshot_of_state(root)["command_log"] if entry["argv"][0] == "taskkill"]
    assert not _simulated_node.snapshot_of_state(root).get("script_log")
