# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A GPU whose evidence asks for a reset (ghost memory) while a working program holds it beside that evidence (state
stuck, not in_use) is refused before any rung, naming the program and the option that ends running programs, unless
that option is given; the kill rung still helps the other GPUs (partly fixed). The walk, the fleet guard, the breaker
and the report's triage answer alike, check mode as the real run. The same walk through ansible-playbook:
tests/integration/targets/gpu_left_behind/tasks/busy_ghost.yml."""

from __future__ import annotations

import pytest

from ansible_collections.gpuops.remediation.plugins.plugin_utils._breaker import counted_rung
from ansible_collections.gpuops.remediation.plugins.plugin_utils.ladder._ladder import LadderWalk
from ansible_collections.gpuops.remediation.plugins.plugin_utils.ladder._ladder_decisions import busy_evidence, destructive_entry
from ansible_collections.gpuops.remediation.plugins.plugin_utils.report._run_report import host_entry
from ansible_collections.gpuops.remediation.plugins.plugin_utils.report._triage import HELD_BACK, triage
from ansible_collections.gpuops.remediation.tests.unit.helpers.ladder_node import BUSY, ORPHAN, Node
from ansible_collections.gpuops.remediation.tests.unit.helpers.ladder_walk import walk_options

NAMES = {"max_rung": "gpu_reclaim_max_rung", "end_running_jobs": "gpu_reclaim_end_running_jobs"}
DESTRUCTIVE = ["reset", "reload", "graphics", "reboot"]


def _walk(node, check_mode=False, **overrides):
    options = walk_options(option_names=NAMES, **overrides)
    return LadderWalk(options, lambda module, args: node.execute(module, args, check_mode), check_mode, "node07",
                      clock=iter(range(100, 10000, 2)).__next__)


def _modules(node):
    return [name for name, dummy in node.calls]


@pytest.mark.parametrize("check_mode", [True, False])
def test_ghost_memory_beside_a_working_program_is_refused_before_any_rung_naming_it_and_the_option(check_mode):
    node = Node([{"ghost": 3072}], holders=[BUSY])
    snap = node.snapshot()
    assert snap["gpus"][0]["state"] == "stuck" and snap["verdict"]["rung"] == "reset"
    outcome = _walk(node, check_mode).start(snap)["outcome"]
    assert _modules(node) == [] and outcome["rungs_tried"] == []
    assert outcome["status"] == "refused"
    assert outcome["msg"] == (
        "GPU 0: the evidence needs the reset rung (GPU 0 (00000000:18:00.0) has 3072 MiB in use that no live process "
        "accounts for (ghost memory)), which would end the working programs that hold it: pid 5353 (llm-serve) holds GPU 0 "
        "with 8192 MiB and runs (its unit llm-serve.service is active): busy, not stuck; ended only with end_running_jobs; "
        "gpu_reclaim_end_running_jobs would allow it")
    grade = triage({"status": outcome["status"], "msg": outcome["msg"], "held_by": [BUSY]})
    assert (grade["group"], grade["outcome"], grade["next"]) == (HELD_BACK, "busy", "gpu_reclaim_end_running_jobs would allow it")
    # Nothing destructive to count: the fleet guard and the breaker count it as the walk does
    assert destructive_entry(snap, walk_options()) is None
    assert counted_rung(snap, "linux", DESTRUCTIVE, "reload", False) is None


def test_with_end_running_jobs_the_walk_ends_the_program_and_resets_counted_as_destructive():
    node = Node([{"ghost": 3072}], holders=[BUSY])
    snap = node.snapshot()
    assert busy_evidence(snap, walk_options(end_running_jobs=True)) == []
    outcome = _walk(node, end_running_jobs=True).start(snap)["outcome"]
    # the reset rung ends the holders of memory first (the program too, with the option), then resets
    assert _modules(node)[:2] == ["gpu_kill", "gpu_reset"] and [step["rung"] for step in outcome["rungs_tried"]] == ["reset"]
    assert outcome["status"] == "fixed" and outcome["fixed_by"] == "reset"
    assert node.holders == [] and node.gpus[0]["ghost"] == 0
    assert destructive_entry(snap, walk_options(end_running_jobs=True)) == "reset"
    assert counted_rung(snap, "linux", DESTRUCTIVE, "reload", False, end_running_jobs=True) == "reset"


@pytest.mark.parametrize("check_mode", [True, False])
def test_the_kill_rung_still_ends_the_leftover_on_the_other_gpu_and_the_busy_gpu_is_named(check_mode):
    """GPU 0: ghost memory and a working program; GPU 1: a crash's leftover. The kill rung ends the leftover and the walk
    never climbs to the reset (its next inspection still sees GPU 0's ghost memory): partly fixed."""
    node = Node([{"ghost": 3072}, {"ghost": 0}], holders=[BUSY, dict(ORPHAN, gpus=[1])])
    outcome = _walk(node, check_mode).start(node.snapshot())["outcome"]
    assert [step["rung"] for step in outcome["rungs_tried"]] == ["kill"]
    assert "gpu_reset" not in _modules(node) and "nvidia_driver_reload" not in _modules(node)
    assert [h["pid"] for h in node.calls[0][1]["holders"]] == [ORPHAN["pid"]]
    named = ("GPU 0 needs the reset rung (GPU 0 (00000000:18:00.0) has 3072 MiB in use that no live process accounts for "
             "(ghost memory)), which would end the working programs that hold it: pid 5353 (llm-serve) holds GPU 0 with 8192 MiB "
             "and runs (its unit llm-serve.service is active): busy, not stuck; ended only with end_running_jobs; "
             "gpu_reclaim_end_running_jobs would allow it")
    if check_mode:
        assert outcome["status"] == "planned" and outcome["msg"] == "check mode: would take the kill rung for GPU 1; " + named
    else:
        assert outcome["status"] == "partly fixed" and outcome["msg"] == "partly fixed: GPU 1 by kill (4096 MiB back); " + named
        assert [h["pid"] for h in node.holders] == [BUSY["pid"]]
        grade = triage({"status": outcome["status"], "msg": outcome["msg"], "held_by": []})
        assert (grade["group"], grade["outcome"]) == (HELD_BACK, "busy")
    assert [(need["index"], need["rung"], need["allow"]) for need in outcome["needs"]] == [(0, "reset", "gpu_reclaim_end_running_jobs")]


def test_a_gpu_needing_a_reset_beside_the_busy_one_is_held_too_the_reset_would_reach_both():
    """GPU 0: ghost memory beside a working program; GPU 1: ghost memory alone. The walk's reset rung resets every GPU
    that needs it, so it is not taken for GPU 1 alone: refused whole, naming the program; GPU 1 named as held by it."""
    node = Node([{"ghost": 3072}, {"ghost": 2048}], holders=[BUSY])
    outcome = _walk(node).start(node.snapshot())["outcome"]
    assert _modules(node) == [] and outcome["status"] == "refused"
    assert outcome["msg"].startswith("GPU 0: the evidence needs the reset rung (") and "pid 5353 (llm-serve)" in outcome["msg"]
    assert outcome["msg"].endswith("gpu_reclaim_end_running_jobs would allow it")


def test_a_program_on_another_gpu_does_not_hold_back_the_reset_of_a_gpu_it_does_not_share():
    node = Node([{"ghost": 3072}, {"ghost": 0}], holders=[dict(BUSY, gpus=[1])])
    snap = node.snapshot()
    assert busy_evidence(snap, walk_options()) == []
    outcome = _walk(node).start(snap)["outcome"]
    assert _modules(node)[0] == "gpu_reset" and outcome["status"] == "fixed"


def test_a_leftover_beside_a_working_program_on_the_same_gpu_is_still_the_kill_rungs():
    node = Node([{"ghost": 0}], holders=[BUSY, ORPHAN])
    snap = node.snapshot()
    assert busy_evidence(snap, walk_options()) == []  # the kill is no rung above the kill: nothing held back
    outcome = _walk(node).start(snap)["outcome"]
    assert _modules(node) == ["gpu_kill"] and outcome["status"] == "fixed" and [h["pid"] for h in node.holders] == [BUSY["pid"]]


def test_a_read_only_report_grades_such_a_gpu_as_the_walk_would_held_back_not_fixed():
    """gpu_report.yml only inspects: its triage reads the walk's own refusal (host_entry's held_back), never 'would be
    fixed by reset' for a GPU the walk would refuse; a GPU the program does not share is still graded by its verdict."""
    entry = host_entry("node07", snapshot=Node([{"ghost": 3072}], holders=[BUSY]).snapshot())
    assert entry["status"] == "inspected" and entry["entry_rung"] == "reset"
    assert entry["held_back"].endswith("gpu_reclaim_end_running_jobs would allow it") and "pid 5353 (llm-serve)" in entry["held_back"]
    grade = triage(entry)
    assert (grade["group"], grade["outcome"], grade["next"]) == (HELD_BACK, "busy", "gpu_reclaim_end_running_jobs would allow it")
    apart = host_entry("node08", snapshot=Node([{"ghost": 3072}, {"ghost": 0}], holders=[dict(BUSY, gpus=[1])]).snapshot())
    assert "held_back" not in apart and triage(apart)["outcome"] == "would be fixed by reset"
