# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Compute instance placements: the simulated driver places compute instances as the real one does (1c.7g.80gb at any
of 0..6, 2c at 0, 2, 4, 3c at 0, 4, each new one at the lowest free slot); the snapshot shows each compute instance's
placement by either backend; the layout records them, a reset creates them again in the recorded order and reads them
back equal (through real ansible-playbook), and one the driver put elsewhere fails the restore naming it."""

from __future__ import annotations

from ansible_collections.gpuops.remediation.plugins.module_utils._mig_layout import build_layout, placement_mismatches
from ansible_collections.gpuops.remediation.plugins.module_utils.probes import _mig_instances as mig
from ansible_collections.gpuops.remediation.plugins.module_utils.simulation import _sim_build as sim
from ansible_collections.gpuops.remediation.plugins.module_utils.simulation import _sim_mig as sim_mig
from ansible_collections.gpuops.remediation.plugins.module_utils.simulation import _sim_state as sim_state
from ansible_collections.gpuops.remediation.tests.unit.helpers.mig_play import play
from ansible_collections.gpuops.remediation.tests.unit.plugins.plugin_utils.test_mig_layout_restore import A100, smi


def ci_placements(root, index=0):
    """{(GI profile, GI start): [(CI profile, CI start, CI size)]} as the simulated driver holds them."""
    gpu = sim_state.load_state(root)["gpus"][index]
    return dict(((gi["profile_id"], gi["start"]), sorted((ci["profile_id"],) + sim_mig.ci_placement(gpu, gi, ci) for ci in gi["compute_instances"]))
                for gi in gpu.get("gpu_instances", []))


def split_node(root):
    """GPU 0 an A100 with one 7g.80gb GPU instance split into 2c + 1c + 1c compute instances, and a 3g.40gb at 4 split
    1c + 2c in the order the H200 capture lists them (nvidia-smi-L/linux-h200-mig-590.48.01.txt)."""
    sim.create_node(root, {"gpus": [{"name": A100, "memory_mib": 81920, "mig_mode": True}]})
    assert smi(root, "mig", "-i", "0", "-cgi", "9:0,9:4").returncode == 0
    assert smi(root, "mig", "-i", "0", "-cci", "1,0", "-gi", "1").returncode == 0  # 2c at 0:2, 1c at 2:1
    assert smi(root, "mig", "-i", "0", "-cci", "0,0", "-gi", "2").returncode == 0  # 1c at 0:1, 1c at 1:1
    return ci_placements(root)


def test_the_simulated_driver_places_compute_instances_as_the_real_one():
    assert sim_mig.compute_starts(7, 1) == [0, 1, 2, 3, 4, 5, 6]
    assert sim_mig.compute_starts(7, 2) == [0, 2, 4]
    assert sim_mig.compute_starts(7, 3) == [0, 4]
    assert sim_mig.compute_starts(7, 4) == [0] and sim_mig.compute_starts(7, 7) == [0]
    assert sim_mig.compute_starts(3, 1) == [0, 1, 2] and sim_mig.compute_starts(3, 2) == [0]
    assert sim_mig.compute_starts(4, 2) == [0, 2] and sim_mig.compute_starts(4, 3) == [0]


def test_compute_instances_are_listed_with_their_placements(node_root):
    assert split_node(node_root) == {(9, 0): [(0, 2, 1), (1, 0, 2)], (9, 4): [(0, 0, 1), (0, 1, 1)]}
    listed = smi(node_root, "mig", "-lci").stdout
    assert "MIG 2c.3g.40gb" in listed and "MIG 1c.3g.40gb" in listed
    cis = mig.parse_lci(listed)
    assert sorted((key[1], value["profile_id"], value["placement"]["start"], value["placement"]["size"]) for key, value in cis.items()) == [
        (1, 0, 2, 1), (1, 1, 0, 2), (2, 0, 0, 1), (2, 0, 1, 1)]
    # no room left for a 2c in GPU instance 1, a profile bigger than the instance is refused
    full = smi(node_root, "mig", "-i", "0", "-cci", "1", "-gi", "1")
    assert full.returncode != 0 and full.stdout.splitlines()[-1] == "Failed to create compute instances: Insufficient Resources"
    too_big = smi(node_root, "mig", "-i", "0", "-cci", "4", "-gi", "2")
    assert too_big.returncode != 0 and too_big.stdout.splitlines()[-1] == "Failed to create compute instances: Invalid Argument"


def test_the_layout_records_placements_and_a_mismatch_names_the_compute_instance(node_root):
    split_node(node_root)
    layout = build_layout(mig.parse_lgi(smi(node_root, "mig", "-lgi").stdout), mig.parse_lci(smi(node_root, "mig", "-lci").stdout), [0])
    first = layout["0"][0]
    assert first["compute"] == [0, 1]
    assert first["compute_placements"] == [{"profile_id": 1, "start": 0, "size": 2}, {"profile_id": 0, "start": 2, "size": 1}]
    assert placement_mismatches(layout, layout) == []
    moved = {"0": [dict(first, compute_placements=[{"profile_id": 1, "start": 0, "size": 2}, {"profile_id": 0, "start": 1, "size": 1}])]}
    assert placement_mismatches(moved, layout) == [
        "GPU 0: 3g.40gb (profile 9) at placement 0: compute instance of profile 0 at 1:1, read back at 2:1"]
    older = {"0": [dict((key, value) for key, value in first.items() if key != "compute_placements")]}
    assert placement_mismatches(older, layout) == []  # an older run's record has no placements to compare


def test_a_reset_restores_the_compute_placements_and_both_backends_show_them(tmp_path, node_root, collections_root):
    before = split_node(node_root)
    results = play(tmp_path, collections_root, node_root, [
        "gpuops.remediation.gpu_holders_info: {backend: nvidia_smi}",
        "gpuops.remediation.gpu_holders_info: {backend: nvml}",
        "gpuops.remediation.gpu_reset: {gpus: [0], force: true}",
    ], ["smi", "nvml", "reset"])
    for name in ("smi", "nvml"):
        shown = sorted((gi["placement"]["start"], ci["profile_id"], ci["placement"]["start"], ci["placement"]["size"])
                       for gi in results[name]["gpus"][0]["gpu_instances"] for ci in gi["compute_instances"])
        assert shown == [(0, 0, 2, 1), (0, 1, 0, 2), (4, 0, 0, 1), (4, 0, 1, 1)], name
    reset = results["reset"]
    assert reset["mig_layout"]["ok"] is True and reset["mig_layout"]["missing"] == []
    assert reset["mig_layout"]["recorded"]["0"][0]["compute_placements"] == [
        {"profile_id": 1, "start": 0, "size": 2}, {"profile_id": 0, "start": 2, "size": 1}]
    assert ci_placements(node_root) == before


def test_a_compute_instance_the_driver_places_elsewhere_fails_the_restore_naming_it(tmp_path, node_root, collections_root):
    sim.create_node(node_root, {"gpus": [{"name": A100, "memory_mib": 81920, "mig_mode": True}]})
    assert smi(node_root, "mig", "-i", "0", "-cgi", "0").returncode == 0
    assert smi(node_root, "mig", "-i", "0", "-cci", "0,0", "-gi", "1").returncode == 0  # 1c at 0:1 and 1:1
    assert smi(node_root, "mig", "-i", "0", "-dci", "-ci", "0", "-gi", "1").returncode == 0  # only 1c at 1:1 is left
    results = play(tmp_path, collections_root, node_root, ["gpuops.remediation.gpu_reset: {gpus: [0], force: true}\n      ignore_errors: true"],
                   ["reset"])
    reset = results["reset"]
    assert reset["failed"] is True and reset["mig_layout"]["ok"] is False
    assert reset["mig_layout"]["missing"] == [
        "GPU 0: 7g.80gb (profile 0) at placement 0: compute instance of profile 0 at 1:1, read back at 0:1"]
    assert "the MIG layout was not restored: missing GPU 0: 7g.80gb (profile 0) at placement 0: compute instance of profile 0 at 1:1" in reset["msg"]
    assert ci_placements(node_root) == {(0, 0): [(0, 0, 1)]}
