# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The instance rung through real ansible-playbook runs of gpu_mig_recreate on a simulated A100 split in seven: ghost
memory in one instance is got back by creating that instance again with its profile and placement, the six neighbours'
jobs (their processes, start times and memory) untouched; check mode plans exactly that; a second run changes nothing;
an instance someone is in is left alone, named."""

from __future__ import annotations

import json
import os


from ansible_collections.gpuops.remediation.plugins.module_utils.simulation import _sim_build as sim
from ansible_collections.gpuops.remediation.plugins.module_utils.simulation import _sim_state as sim_state
from ansible_collections.gpuops.remediation.tests.unit.helpers.mig_play import play

A100 = "NVIDIA A100-SXM4-80GB"


def seven_way_node(root, ghost_in=3, held_too=None):
    """GPU 0 as seven 1g.10gb instances (ids 1..7 at placements 0..6), a running job in each but `ghost_in`, which holds
    4096 MiB no process accounts for; `held_too`: an instance with both a job and 2048 MiB of ghost memory."""
    instances = [{"profile": "1g.10gb", "ghost_mib": 4096 if gi == ghost_in else (2048 if gi == held_too else 0)} for gi in range(1, 8)]
    holders = [{"gpus": [0], "mig_instance": gi, "memory_mib": 1024 + gi, "name": "team%d-job" % gi, "running": True}
               for gi in range(1, 8) if gi != ghost_in]
    sim.create_node(root, {"gpus": [{"name": A100, "memory_mib": 81920, "mig_mode": True, "mig_instances": instances}], "holders": holders})


def jobs(root):
    """{pid: (start time, instance)} of the node's live jobs, from /proc and the simulation's record."""
    state = sim_state.load_state(root)
    found = {}
    for holder in state["holders"]:
        if os.path.exists("/proc/%d" % holder["pid"]):
            with open("/proc/%d/stat" % holder["pid"], encoding="ascii") as handle:
                start = int(handle.read().rsplit(")", 1)[1].split()[19])
            found[holder["pid"]] = (start, ((holder.get("mig") or {}).get("0") or [None])[0])
    return found


def placements(root):
    gpu = sim_state.load_state(root)["gpus"][0]
    return sorted((gi["start"], gi["profile_id"], len(gi["compute_instances"]), gi.get("ghost_mib", 0)) for gi in gpu["gpu_instances"])


def test_ghost_memory_in_one_instance_is_got_back_by_recreating_it_alone(tmp_path, node_root, collections_root):
    seven_way_node(node_root)
    neighbours, layout_before = jobs(node_root), placements(node_root)
    assert len(neighbours) == 6 and (2, 19, 1, 4096) in layout_before
    results = play(tmp_path, collections_root, node_root, [
        "gpuops.remediation.gpu_holders_info: {gpus: [0]}",
        "gpuops.remediation.gpu_mig_recreate: {gpus: [0]}\n      check_mode: true",
        "gpuops.remediation.gpu_mig_recreate: {gpus: [0]}",
        "gpuops.remediation.gpu_mig_recreate: {gpus: [0]}",
    ], ["before", "plan", "real", "again"])
    plan, real, again = results["plan"], results["real"], results["again"]
    line = "re-create MIG instance 0:3 (1g.10gb, profile 19, placement 2:1) with compute instance profile 0: 4096 MiB in it that no process accounts for"
    assert plan["changed"] is True and plan["plan"] == [line] and real["plan"] == [line]
    assert [entry["gi"] for entry in real["instances"]] == [3] and real["instances"][0]["recreated"] is True
    assert real["changed"] is True and real["refused"] == []
    # the neighbours' jobs run on: the same processes, start times and memory; the instance is back in its place, empty
    assert jobs(node_root) == neighbours
    seen_before, seen_after = (dict((h["pid"], (h["start_time"], h["used_mib"], [i["gpu_instance_id"] for i in h["mig_instances"]]))
                                    for h in snapshot["holders"]) for snapshot in (results["before"], real["snapshot_after"]))
    assert seen_after == seen_before and sorted(seen_before) == sorted(neighbours)
    assert sorted(mib for dummy, mib, dummy_gi in seen_before.values()) == [1025, 1026, 1028, 1029, 1030, 1031]
    assert placements(node_root) == [entry[:3] + (0,) for entry in layout_before]
    after = real["snapshot_after"]["gpus"][0]
    assert after["unattributed_mib"] == 0 and real["snapshot_after"]["verdict"]["rung"] in ("none",)
    # journaled: the layout first, then only instance 3 destroyed, then created again
    destroyed = [entry["argv"][4:] for entry in real["journal"] if entry["action"] == "mig_destroy" and entry["phase"] == "intent"]
    assert destroyed == [["-dci", "-gi", "3", "-ci", "0"], ["-dgi", "-gi", "3"]]
    assert real["journal"][0]["action"] == "mig_layout" and real["mig_layout"][0]["ok"] is True
    assert again["changed"] is False and again["instances"] == [] and again["journal"] == []


def test_an_instance_someone_is_in_is_left_alone_and_named(tmp_path, node_root, collections_root):
    seven_way_node(node_root, held_too=5)
    neighbours = jobs(node_root)
    held = [pid for pid, (dummy, gi) in neighbours.items() if gi == 5]
    results = play(tmp_path, collections_root, node_root, [
        "gpuops.remediation.gpu_mig_recreate: {gpus: [\"0:5\"]}\n      ignore_errors: true",
        "gpuops.remediation.gpu_mig_recreate: {gpus: [\"0:5\"]}\n      check_mode: true\n      ignore_errors: true",
    ], ["real", "plan"])
    for name in ("real", "plan"):
        result = results[name]
        assert result["failed"] is True and result["changed"] is False and result["instances"] == []
        assert [entry["gi"] for entry in result["refused"]] == [5]
        assert "MIG instance 0:5 (1g.10gb, profile 19, placement 4:1): held by pid %d" % held[0] in result["msg"]
    assert jobs(node_root) == neighbours
    assert (2, 19, 1, 4096) in placements(node_root)  # instance 3 was outside the selection


def test_the_ladder_takes_the_instance_rung_and_no_reset(tmp_path, node_root, collections_root):
    """reset_gpu.yml, as an operator runs it, on the seven-way node: check mode plans the instance rung, the real run
    takes it and stops there (the reset is not needed), the neighbours run on, a second run finds the node clean."""
    from ansible_collections.gpuops.remediation.tests.unit.helpers.reset_run import reset_gpu, resets
    seven_way_node(node_root)
    neighbours = jobs(node_root)
    checked, dummy, dummy_commands = reset_gpu(str(tmp_path), node_root, collections_root, extra=["--check"])
    assert checked.returncode == 0, checked.stdout[-4000:]
    with open(os.path.join(str(tmp_path), "reports-node", "latest-plan.json"), encoding="utf-8") as handle:
        plan = json.load(handle)["hosts"][0]
    assert plan["status"] == "planned" and plan["entry_rung"] == "instance"
    assert [step["rung"] for step in plan["rungs_tried"]] == ["instance"]
    assert any("re-create MIG instance 0:3 (1g.10gb, profile 19, placement 2:1)" in line for line in plan["rungs_tried"][0]["plan"])
    assert (2, 19, 1, 4096) in placements(node_root)
    run, report, commands = reset_gpu(str(tmp_path), node_root, collections_root)
    assert run.returncode == 0, run.stdout[-3000:]
    assert report["status"] == "fixed" and report["fixed_by"] == "instance"
    assert [step["rung"] for step in report["rungs_tried"]] == ["instance"]
    assert resets(commands) == []
    assert jobs(node_root) == neighbours
    assert (2, 19, 1, 0) in placements(node_root)
    dummy, again, dummy_commands = reset_gpu(str(tmp_path), node_root, collections_root)
    assert again["status"] == "clean" and again["rungs_tried"] == []
