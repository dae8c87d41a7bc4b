"""The filters the playbooks ask the ladder's questions through (plugins/filter/ladder.py)."""

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.remediation.plugins.filter.ladder import FilterModule

FILTERS = FilterModule().filters()
GHOST = {"gpus": [{"index": 0, "state": "stuck"}], "holders": [], "verdict": {"rung": "reset", "reasons": []}}
BUSY = {"gpus": [{"index": 0, "state": "busy"}], "holders": [], "verdict": {"rung": "none", "reasons": []}}
HEALTHY = {"gpus": [{"index": 0, "state": "ok"}], "holders": [], "verdict": {"rung": "none", "reasons": []}}


def test_the_entry_rung_is_the_verdicts_or_the_first_while_memory_is_held():
    assert FILTERS["ladder_entry_rung"](GHOST) == "reset"
    assert FILTERS["ladder_entry_rung"](BUSY) == "kill"
    assert FILTERS["ladder_entry_rung"](HEALTHY) == "none"


@pytest.mark.parametrize("rungs, expected", [
    (None, True), (["reset"], True), ("reset,reload", True), ("reload", False), ([], False), (["kill"], False),
])
def test_destructive_rungs_are_read_as_the_walk_reads_them(rungs, expected):
    assert FILTERS["needs_destructive_rung"](GHOST, rungs) is expected


def test_a_busy_node_counts_when_its_kill_rung_is_destructive():
    assert FILTERS["needs_destructive_rung"](BUSY, ["kill"]) is True
    assert FILTERS["needs_destructive_rung"](HEALTHY, ["kill"]) is False


@pytest.mark.parametrize("rungs, message", [
    (["reset", "rebooot"], "names no rung 'rebooot'"),
    ({"reset": 1}, "must be a list of rungs"),
])
def test_unknown_destructive_rungs_name_the_variable(rungs, message):
    with pytest.raises(AnsibleFilterError, match=message):
        FILTERS["needs_destructive_rung"](GHOST, rungs)


def test_a_non_snapshot_is_refused():
    with pytest.raises(AnsibleFilterError, match="must be a result of gpuops.remediation.gpu_holders_info"):
        FILTERS["ladder_entry_rung"]({"gpus": []})


def test_the_fleet_guard_checks_its_percentage():
    assert FILTERS["fleet_guard_refusal"](["a"], 4, "25") == ""
    assert FILTERS["fleet_guard_refusal"](["a", "b"], 4, 25).startswith("fleet guard: 2 of 4 hosts")
    with pytest.raises(AnsibleFilterError, match="gpu_remediate_max_destructive_percent must be 0..100, got 150"):
        FILTERS["fleet_guard_refusal"](["a"], 4, 150)
    with pytest.raises(AnsibleFilterError, match="must be whole numbers, got 4 and 'many'"):
        FILTERS["fleet_guard_refusal"](["a"], 4, "many")


@pytest.mark.parametrize("annotations, expected", [
    ({"gpuops.io/cordoned-by": "gpuops: reclaiming"}, True),
    ({"gpuops.io/cordoned-by": "someone else"}, False),
    ({}, False),
    (None, False),
])
def test_a_cordon_is_ours_only_while_our_mark_is_on_the_node(annotations, expected):
    info = {"resources": [{"metadata": {"name": "gpunode1", "annotations": annotations}}]}
    assert FILTERS["kubernetes_cordon_is_ours"](info, "gpuops.io/cordoned-by", "gpuops: reclaiming") is expected


def test_no_node_no_cordon_of_ours():
    assert FILTERS["kubernetes_cordon_is_ours"]({"resources": []}, "a", "b") is False
    with pytest.raises(AnsibleFilterError, match="must be a result of kubernetes.core.k8s_info"):
        FILTERS["kubernetes_cordon_is_ours"]("gpunode1", "a", "b")


def test_breaker_slurm_to_confirm_names_the_drains_scontrol_shows_as_ours_and_refuses_bad_input():
    ours = ("NodeName=n1 Arch=x86_64 State=IDLE+DRAIN ThreadsPerCore=1 Reason=gpuops: reclaiming stuck GPU memory (run r1: reset rung)"
            " [root@2026-12-01T23:14:46]\n")
    other = "NodeName=n2 Arch=x86_64 State=IDLE+DRAIN ThreadsPerCore=1 Reason=PSU swap [root@2026-12-01T23:14:46]\n"
    assert FILTERS["breaker_slurm_to_confirm"](ours + other) == ["n1"]
    assert FILTERS["breaker_slurm_to_confirm"](ours + other, "site: other marker") == []
    with pytest.raises(AnsibleFilterError, match="breaker_slurm_to_confirm: .*got 'list' and"):
        FILTERS["breaker_slurm_to_confirm"]([ours])
    with pytest.raises(AnsibleFilterError, match="gpu_reclaim_drain_reason"):
        FILTERS["breaker_slurm_to_confirm"](ours, "")
