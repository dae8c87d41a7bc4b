# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Issue 18 defect 3, the rest of it: unknown ghost memory is not 0. A WDDM GPU using more than the threshold with no
figure for how much of it live processes hold (no per-process figure from the driver, no GPU Adapter Memory figure) is
in state "unknown"; the verdict says why and chooses nothing on it alone; the walk's outcome is "undetermined", never
"clean". A Linux GPU (no driver model) is judged as before.

The walk runs on the simulated node and through the real-host path (TargetNode whose module calls the simulated node
answers; the snapshot script's counter read failing as the script's catch records it), check mode first."""

from __future__ import annotations

import pytest

from ansible_collections.gpuops.remediation.plugins.module_utils import _verdict
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.simulation import _simulated_node
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows import _node_snapshot
from ansible_collections.gpuops.remediation.plugins.plugin_utils.ladder._ladder_outcome import outcome_status
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node._remote_node import SimulatedNode

from ansible_collections.gpuops.remediation.tests.unit.helpers.ladder_walk import walk_options as linux_options
from ansible_collections.gpuops.remediation.tests.unit.helpers.win_host import target
from ansible_collections.gpuops.remediation.tests.unit.helpers.win_walk import wsl_walk as walk, wsl_walk_options as windows_options

BUS = "00000000:01:00.0"


def wddm_gpu(used=6000, **extra):
    gpu = dict({"index": 0, "pci_bus_id": BUS, "memory_used_mib": used, "driver_model": "WDDM", "processes": [], "luid": None},
               **extra)
    ghost = _node_snapshot.ghost_memory(gpu, extra.get("adapter_bytes"))
    gpu.update(unattributed_mib=ghost["ghost_mib"], ghost_reason=ghost["reason"])
    gpu["state"] = _verdict.gpu_state(gpu, [], 256, {"ok": True})
    return gpu


def windows_snapshot(gpu, holders=()):
    snap = {"gpus": [gpu], "holders": list(holders), "probes": {"gpu": {"ok": True}}}
    snap["verdict"] = _verdict.windows_verdict(snap, 256)
    return snap


# ---- the rule, on the functions that own it -------------------------------------------------------------------------

def test_the_reviewers_repro_is_unknown_with_a_reason_and_no_rung():
    gpu = wddm_gpu()
    assert gpu["unattributed_mib"] is None and gpu["state"] == "unknown"
    verdict = _verdict.windows_verdict(windows_snapshot(gpu), 256)
    assert verdict["rung"] == "none"
    [line] = verdict["undetermined"]
    assert [r["reason"] for r in verdict["reasons"]] == [line]
    for words in ("GPU 0 (%s)" % BUS, "6000 MiB", "WDDM", "per-process", "--query-compute-apps", "TCC", "GPU Adapter Memory"):
        assert words in line, words


@pytest.mark.parametrize("model", ["WDDM", {"current": "WDDM", "pending": "WDDM"}])
def test_the_driver_model_as_nvidia_smi_gives_it_or_as_a_word(model):
    gpu = wddm_gpu(driver_model=model)
    assert gpu["state"] == "unknown"


def test_memory_within_the_threshold_cannot_hide_ghost_memory_above_it():
    assert wddm_gpu(used=256)["state"] == "ok"
    assert wddm_gpu(used=257)["state"] == "unknown"


def test_an_adapter_figure_makes_it_known_either_way():
    assert wddm_gpu(luid="0x0_0x1", adapter_bytes=6000 * 1024 * 1024)["state"] == "ok"
    stuck = wddm_gpu(luid="0x0_0x1", adapter_bytes=1000 * 1024 * 1024)
    assert stuck["state"] == "stuck" and stuck["unattributed_mib"] == 5000
    assert _verdict.windows_verdict(windows_snapshot(stuck), 256)["undetermined"] == []


def test_a_holder_the_ladder_ends_still_decides_and_unknown_ghost_adds_no_rung():
    holder = {"pid": 7, "name": "python.exe", "class": "compute", "session_id": 1, "used_mib": None, "gpus": [0]}
    gpu = wddm_gpu()
    gpu["state"] = _verdict.gpu_state(gpu, [holder], 256, {"ok": True})
    assert gpu["state"] == "busy"
    verdict = _verdict.windows_verdict(windows_snapshot(gpu, [holder]), 256)
    assert verdict["rung"] == "kill" and verdict["undetermined"] == []


def test_dwm_alone_on_an_unknown_gpu_leaves_it_unknown_not_ok():
    dwm = {"pid": 2056, "name": "dwm.exe", "class": "graphics_session", "session_id": 1, "used_mib": None, "gpus": [0]}
    gpu = wddm_gpu()
    assert _verdict.gpu_state(gpu, [dwm], 256, {"ok": True}) == "unknown"
    assert not _verdict.memory_held(windows_snapshot(gpu, [dwm]))  # nothing destructive is chosen on it


def test_the_outcome_of_a_walk_that_took_no_rung_is_undetermined_never_clean():
    snap = windows_snapshot(wddm_gpu())
    status, msg = outcome_status({"tried": [], "last": snap, "refused": None, "error": None}, windows_options(), False, 0)
    assert status == "undetermined" and "clean" not in msg and "GPU 0" in msg and "6000 MiB" in msg


def test_after_a_rung_an_unknown_gpu_is_undetermined_never_fixed():
    snap = windows_snapshot(wddm_gpu())
    step = {"rung": "kill", "changed": True, "failed": False, "msg": "", "plan": []}
    status, msg = outcome_status({"tried": [step], "last": snap, "refused": None, "error": None}, windows_options(), False, 2048)
    assert status == "undetermined" and msg.startswith("undetermined after the kill rung(s)")


# ---- Linux is judged as before --------------------------------------------------------------------------------------

def linux_snapshot(gpu_report_ok=True):
    gpu = {"index": 0, "pci_bus_id": BUS, "memory_used_mib": 6000, "unattributed_mib": None, "recovery_action": None,
           "processes": [{"pid": 1, "used_mib": None}]}
    gpu["state"] = _verdict.gpu_state(gpu, [], 256, {"ok": gpu_report_ok})
    snap = {"gpus": [gpu], "holders": [], "xid_events": [], "reset_blockers": [], "probes": {"gpu": {"ok": gpu_report_ok}}}
    snap["verdict"] = _verdict.verdict(snap, 256)
    return snap


def test_a_linux_gpu_without_a_ghost_figure_is_judged_as_before():
    snap = linux_snapshot()
    assert snap["gpus"][0]["state"] == "ok" and snap["verdict"] == {"rung": "none", "reasons": []}
    assert _verdict.undetermined(snap) == []
    assert outcome_status({"tried": [], "last": snap, "refused": None, "error": None}, linux_options(), False, 0) == (
        "clean", "no GPU memory held: nothing to do")


def test_a_linux_gpu_the_driver_did_not_answer_for_keeps_its_outcome():
    snap = linux_snapshot(gpu_report_ok=False)
    assert snap["gpus"][0]["state"] == "unknown" and "undetermined" not in snap["verdict"]
    assert outcome_status({"tried": [], "last": snap, "refused": None, "error": None}, linux_options(), False, 0)[0] == "clean"


# ---- the walk, on the simulated node and through the real-host path -------------------------------------------------

SCENARIO = {"hostname": "WS12", "adapter_memory_counters": False, "gpus": [{"ghost_mib": 4096}],
            "sessions": [{"user": "ada"}], "administrators": ["ada"]}


def node(tmp_path, real_host):
    root = str(tmp_path / "ws12")
    _simulated_node.write_node(root, _simulated_node.build_state(dict(SCENARIO)))
    return target(root) if real_host else SimulatedNode(root, "ada")


@pytest.mark.parametrize("real_host", [False, True])
def test_the_walk_on_a_wddm_gpu_without_counters_says_undetermined_and_changes_nothing(tmp_path, real_host):
    host = node(tmp_path, real_host)
    root = str(tmp_path / "ws12")
    before = _simulated_node.snapshot_of_state(root)
    snapshot = _node_snapshot.take(host)
    [gpu] = snapshot["gpus"]
    assert gpu["state"] == "unknown" and gpu["unattributed_mib"] is None and not snapshot["probes"]["adapter_memory"]["ok"]
    planned = walk(host, check_mode=True, max_rung="reboot", allow_reboot=True)
    done = walk(host, max_rung="reboot", allow_reboot=True)
    again = walk(host, max_rung="reboot", allow_reboot=True)
    for outcome in (planned, done, again):
        assert outcome["status"] == "undetermined" and outcome["rungs_tried"] == [] and outcome["entry_rung"] == "none"
        assert "clean" not in outcome["msg"] and "GPU Adapter Memory" in outcome["msg"]
    assert (planned["msg"], planned["reasons"]) == (done["msg"], done["reasons"])
    after = _simulated_node.snapshot_of_state(root)
    assert after["gpus"] == before["gpus"] and after["processes"] == before["processes"]
    assert [e for e in after["command_log"] if e["argv"][0].lower().endswith(("taskkill.exe", "pnputil.exe", "wsl.exe"))
            and len(e["argv"]) > 1 and e["argv"][1].lower() in ("/pid", "/restart-device", "--shutdown", "--terminate")] == []


def test_with_the_counters_the_same_node_is_stuck_and_the_walk_acts(tmp_path):
    root = str(tmp_path / "ws12")
    _simulated_node.write_node(root, _simulated_node.build_state(dict(SCENARIO, adapter_memory_counters=True)))
    snapshot = _node_snapshot.take(SimulatedNode(root, "ada"))
    assert snapshot["gpus"][0]["state"] == "stuck" and snapshot["verdict"]["rung"] == "restart_adapter"


def test_a_windows_gpu_whose_driver_model_is_na_is_still_judged_unknown_not_0():
    # nvidia-smi's driver model N/A (normalized to None); a process listed without a figure and no adapter figure
    gpu = {"index": 0, "pci_bus_id": BUS, "memory_used_mib": 6000, "driver_model": {"current": None, "pending": None},
           "processes": [{"pid": 7, "used_mib": None}], "luid": None}
    ghost = _node_snapshot.ghost_memory(gpu, None)
    gpu.update(unattributed_mib=ghost["ghost_mib"], ghost_source=ghost["source"], ghost_reason=ghost["reason"])
    assert ghost["ghost_mib"] is None
    gpu["state"] = _verdict.gpu_state(gpu, [], 256, {"ok": True})
    assert gpu["state"] == "unknown"
    [line] = _verdict.windows_verdict(windows_snapshot(gpu), 256)["undetermined"]
    assert "6000 MiB" in line and "an unknown driver model" in line
