# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The reboot rung keeps the MIG layout, through real ansible-playbook runs of gpu_ladder on simulated MIG nodes (the
simulated reboot, gpu_sim state=rebooted, standing in for ansible.builtin.reboot as the role gpu_reclaim takes it): the
layout is journaled before the reboot, created again after it and read back; check mode says so and changes nothing; a
second run changes nothing; a run that died between the reboot and the restore is restored by the next run; a failed
restore fails the rung naming what is missing."""

from __future__ import annotations

import json
import os

from ansible_collections.gpuops.remediation.plugins.module_utils.simulation import _sim_build as sim
from ansible_collections.gpuops.remediation.plugins.module_utils.simulation import _sim_state as sim_state
from ansible_collections.gpuops.remediation.plugins.module_utils.simulation._sim_state import SimError
from ansible_collections.gpuops.remediation.tests.unit.helpers.mig_play import play
from ansible_collections.gpuops.remediation.tests.unit.plugins.plugin_utils.test_mig_layout_restore import A100, journal, layout_of, smi

import pytest

WALK = "gpuops.remediation.gpu_ladder: {max_rung: reboot, allow_reboot: true, run_id: %s}"
AFTER = ("gpuops.remediation.gpu_ladder: {max_rung: reboot, allow_reboot: true, continue_after: reboot, state: \"{{ %s.state }}\", "
         "controller_result: {changed: true, rebooted: true}}")
REBOOT = "gpuops.remediation.gpu_sim: {root: %s, state: rebooted}"
CREATED = ["GPU 0: 4g.40gb (profile 5) at placement 0 with compute instance of profile 3",
           "GPU 0: 2g.20gb (profile 14) at placement 4 with compute instance of profile 1",
           "GPU 0: 1g.10gb (profile 19) at placement 6 with compute instance of profile 0"]


def lost_gpu_node(root):
    """GPU 0 an A100 split 4g+2g+1g, GPU 1 fallen off the bus: only a reboot brings it back."""
    sim.create_node(root, {"gpus": [{"name": A100, "memory_mib": 81920, "mig_mode": True}, {"lost": True}]})
    assert smi(root, "mig", "-i", "0", "-cgi", "5:0,14:4,19:6", "-C").returncode == 0
    return layout_of(root)


def layout_lines(root):
    return [(record["phase"], record.get("run_id"), record.get("ok")) for record in journal(root) if record["action"] == "mig_layout"]


def test_the_simulated_reboot_keeps_mig_mode_and_leaves_no_instance(node_root):
    lost_gpu_node(node_root)
    sim_state.update_state(node_root, lambda state: state["gpus"][0].update(mig_mode={"current": True, "pending": False}))
    sim.reboot_node(node_root)
    state = sim_state.load_state(node_root)
    assert state["gpus"][0]["mig_mode"] == {"current": False, "pending": False}  # the pending change took effect
    assert layout_of(node_root) == [] and state["gpus"][1]["lost"] is False
    assert smi(node_root, "mig", "-lgi").returncode == 6  # Not Found: no instance
    sim_state.update_state(node_root, lambda state: state["gpus"][0].update(mig_mode={"current": True, "pending": True}))
    assert smi(node_root, "mig", "-i", "0", "-cgi", "19", "-C").returncode == 0
    sim.reboot_node(node_root)
    assert sim_state.load_state(node_root)["gpus"][0]["mig_mode"] == {"current": True, "pending": True}
    assert layout_of(node_root) == []


def test_the_simulated_reboot_refuses_while_a_holder_runs(node_root):
    sim.create_node(node_root, {"gpus": [{"name": A100, "memory_mib": 81920, "mig_mode": True, "mig_instances": [{"profile": "1g.10gb"}]}],
                                "holders": [{"mig_instance": 1}]})
    with pytest.raises(SimError, match="the simulated reboot ends no process: holders"):
        sim.reboot_node(node_root)
    assert len(layout_of(node_root)) == 1


def test_the_reboot_rung_records_the_layout_and_creates_it_again(tmp_path, node_root, collections_root):
    before = lost_gpu_node(node_root)
    results = play(tmp_path, collections_root, node_root, [
        WALK % "plan" + "\n      check_mode: true", AFTER % "plan" + "\n      check_mode: true",
        WALK % "run-1", REBOOT % node_root, AFTER % "walk",
        WALK % "run-2",
    ], ["plan", "plan_after", "walk", "reboot", "after", "again"])
    plan, plan_after, walk, after, again = (results[name] for name in ("plan", "plan_after", "walk", "after", "again"))
    # the walk paused for the reboot with the layout of GPU 0 journaled; check mode read it, wrote nothing
    recorded_line = "recorded the MIG layout of GPU 0, to create again after the reboot: " + "; ".join(CREATED)
    assert walk["pending"] == "reboot" and walk["state"]["reboot_layout"] == [recorded_line]
    assert walk["modules_run"] == ["gpuops.remediation.gpu_holders_info", "gpuops.remediation.gpu_mig_layout"]
    assert plan["pending"] == "reboot" and plan["state"]["reboot_layout"] == [recorded_line.replace("recorded", "would record", 1)]
    # after the reboot: every instance created again at its placement, read back, the record answered
    assert layout_of(node_root) == before
    assert sim_state.load_state(node_root)["reboots"] == 1
    step = after["outcome"]["rungs_tried"][-1] if "rungs_tried" in after["outcome"] else after["state"]["tried"][-1]
    assert step["rung"] == "reboot" and step["failed"] is False and step["changed"] is True
    assert step["plan"] == ["rebooted the node", recorded_line, "created again: " + "; ".join(CREATED)]
    assert [report["ok"] for report in step["mig_layouts"]] == [True] and step["mig_layouts"][0]["missing"] == []
    assert after["outcome"]["status"] == "fixed"
    run_lines = [line for line in layout_lines(node_root) if line[1] == "run-1"]
    assert run_lines == [("intent", "run-1", None), ("intent", "run-1", None), ("outcome", "run-1", True)]
    # check mode planned the reboot and the layout, and changed nothing: the plan's continuation wrote no journal line
    plan_step = plan_after["state"]["tried"][-1]
    assert plan_step["plan"] == ["would reboot the node", recorded_line.replace("recorded", "would record", 1)]
    assert "mig_layouts" not in plan_step
    assert [line for line in layout_lines(node_root) if line[1] == "plan"] == []
    # a second run finds nothing to do and changes nothing
    assert again["changed"] is False and again["pending"] is None and layout_of(node_root) == before


def test_a_run_that_died_after_the_reboot_is_restored_by_the_next_run(tmp_path, node_root, collections_root):
    before = lost_gpu_node(node_root)
    # the walk paused for the reboot, the node rebooted, and the run ended there (no continue_after)
    play(tmp_path, collections_root, node_root, [WALK % "died", REBOOT % node_root], ["walk", "reboot"])
    assert layout_of(node_root) == [] and layout_lines(node_root) == [("intent", "died", None)]
    (tmp_path / "next").mkdir()
    results = play(tmp_path / "next", collections_root, node_root, [
        WALK % "next" + "\n      check_mode: true", WALK % "next", WALK % "third"], ["check", "next", "third"])
    check, nxt, third = results["check"], results["next"], results["third"]
    # the snapshot names the layout left unrestored; the instance rung's module restores it first, under the lock
    assert check["outcome"]["rungs_tried"][0]["rung"] == "instance"
    assert check["outcome"]["rungs_tried"][0]["plan"][0].startswith("restore the MIG layout of GPU 0 that run died ")
    assert nxt["outcome"]["rungs_tried"][0]["rung"] == "instance" and nxt["outcome"]["rungs_tried"][0]["failed"] is False
    assert layout_of(node_root) == before
    assert layout_lines(node_root)[-1] == ("outcome", "next", True)
    assert third["changed"] is False and third["outcome"]["rungs_tried"] == []


def test_a_layout_that_cannot_be_restored_fails_the_reboot_rung_naming_it(tmp_path, node_root, collections_root):
    lost_gpu_node(node_root)
    out = tmp_path / "first"
    out.mkdir()
    play(out, collections_root, node_root, [WALK % "run-1", REBOOT % node_root], ["walk", "reboot"])
    # after the reboot someone takes slices 6-7 first: the recorded 1g.10gb at 6 has no room
    assert smi(node_root, "mig", "-i", "0", "-cgi", "15:6", "-C").returncode == 0
    with open(os.path.join(str(out), "out.json"), encoding="utf-8") as handle:
        walk = json.load(handle)["walk"]
    (tmp_path / "after").mkdir()
    state_file = tmp_path / "after" / "state.json"
    state_file.write_text(json.dumps(walk["state"]))
    results = play(tmp_path / "after", collections_root, node_root, [
        ("gpuops.remediation.gpu_ladder: {max_rung: reboot, allow_reboot: true, continue_after: reboot, "
         "state: \"{{ lookup('file', '%s') | from_json }}\", controller_result: {changed: true}}" % state_file)], ["after"])
    step = results["after"]["state"]["tried"][-1]
    assert step["rung"] == "reboot" and step["failed"] is True
    assert "the MIG layout was not restored: missing GPU 0: 1g.10gb (profile 19) at placement 6" in step["msg"]
    assert "Insufficient Resources" in step["msg"]
    assert results["after"]["outcome"]["status"] != "fixed"
    assert layout_of(node_root) == [(5, 0, [3]), (14, 4, [1]), (15, 6, [0])]


def test_a_pending_mig_mode_change_fails_the_reboot_rung_in_check_mode_as_in_the_real_run(tmp_path, node_root, collections_root):
    before = lost_gpu_node(node_root)
    sim_state.update_state(node_root, lambda state: state["gpus"][0].update(mig_mode={"current": True, "pending": False}))
    results = play(tmp_path, collections_root, node_root, [WALK % "plan" + "\n      check_mode: true", WALK % "run-1"], ["plan", "walk"])
    for name in ("plan", "walk"):
        walk = results[name]
        assert walk["pending"] is None, name  # no reboot
        step = walk["outcome"]["rungs_tried"][-1]
        assert step["rung"] == "reboot" and step["failed"] is True, name
        assert "the reboot refused: it resets every GPU, and GPU 0: its MIG mode change is pending (now on, off after a reset)" in step["msg"], name
    assert results["plan"]["outcome"]["rungs_tried"][-1]["msg"] == results["walk"]["outcome"]["rungs_tried"][-1]["msg"]
    assert layout_of(node_root) == before
    assert not os.path.exists(os.path.join(node_root, "var", "lib", "gpuops", "journal.jsonl"))  # nothing journaled
    assert sim_state.load_state(node_root).get("reboots") is None


def remove_instance_at(root, start):
    """What an operator does by hand: destroy the GPU instance at `start` of GPU 0 and its compute instances."""
    gi = next(gi["id"] for gi in sim_state.load_state(root)["gpus"][0]["gpu_instances"] if gi["start"] == start)
    assert smi(root, "mig", "-i", "0", "-dci", "-gi", str(gi)).returncode == 0
    assert smi(root, "mig", "-i", "0", "-dgi", "-gi", str(gi)).returncode == 0


def test_a_layout_recorded_for_a_reboot_that_never_came_is_not_created_again(tmp_path, node_root, collections_root):
    """The walk recorded the layout and the run died before the reboot; the operator then removed an instance on purpose.
    The node is still in the boot the record was made in, so the layout was never lost: the next run creates nothing,
    check mode alike, and answers the record."""
    lost_gpu_node(node_root)
    play(tmp_path, collections_root, node_root, [WALK % "died"], ["walk"])
    assert layout_lines(node_root) == [("intent", "died", None)]
    remove_instance_at(node_root, 6)
    kept = layout_of(node_root)
    assert kept == [(5, 0, [3]), (14, 4, [1])]
    (tmp_path / "next").mkdir()
    results = play(tmp_path / "next", collections_root, node_root, [
        "gpuops.remediation.gpu_mig_layout: {state: restored, run_id: died}\n      check_mode: true",
        "gpuops.remediation.gpu_mig_layout: {state: restored, run_id: died}",
        WALK % "third"], ["check", "restored", "third"])
    check, restored, third = results["check"], results["restored"], results["third"]
    not_lost = "the node has not rebooted since the layout was recorded, so it was never lost"
    assert check["plan"] == ["would create again: nothing (%s)" % not_lost]
    assert restored["plan"] == ["created again: nothing (%s)" % not_lost]
    assert restored["changed"] is False and restored["mig_layouts"][0]["ok"] is True
    assert layout_of(node_root) == kept
    assert ("outcome", "died", True) in layout_lines(node_root)
    # answered: the next walk (GPU 1 is still lost: it goes for the reboot) has no layout of that run left to restore,
    # and leaves the operator's layout as it is
    assert third["pending"] == "reboot" and "instance" not in [step["rung"] for step in third["state"]["tried"]]
    assert layout_of(node_root) == kept


def test_the_simulated_reboot_is_a_new_boot(node_root):
    lost_gpu_node(node_root)
    with open(os.path.join(node_root, "boot_id"), encoding="utf-8") as handle:
        first = handle.read()
    sim.reboot_node(node_root)
    with open(os.path.join(node_root, "boot_id"), encoding="utf-8") as handle:
        assert handle.read() != first
