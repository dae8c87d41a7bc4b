# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One Platform record per platform (plugin_utils/ladder/_platform.py), read by the walk, the breaker and the filters;
and the booleans the roles read instead of deciding: gpu_ladder's host_fails and needs_controller_step, the breaker's
breaker_on, the guard's guard_refuses."""

from __future__ import annotations

import dataclasses

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.remediation.plugins.action.gpu_ladder import ActionModule as LadderAction
from ansible_collections.gpuops.remediation.plugins.filter.ladder import FilterModule
from ansible_collections.gpuops.remediation.plugins.module_utils import _verdict
from ansible_collections.gpuops.remediation.plugins.plugin_utils._breaker_limits import breaker_limit, breaker_on
from ansible_collections.gpuops.remediation.plugins.plugin_utils.ladder._ladder_decisions import (
    CONTROLLER_STEPS, FAILING_STATUSES, SCHEDULER_FOLLOWUPS, guard_refuses, host_fails, needs_controller_step,
)
from ansible_collections.gpuops.remediation.plugins.plugin_utils.ladder._ladder_options import (
    LADDER_ARGUMENT_SPEC, WalkOptions, platform_args, walk_argument_spec,
)
from ansible_collections.gpuops.remediation.plugins.plugin_utils.ladder._platform import LINUX, PLATFORMS, WINDOWS, platform_rungs

FILTERS = FilterModule().filters()
GHOST = {"gpus": [{"index": 0, "state": "stuck"}], "holders": [], "verdict": {"rung": "reset", "reasons": []}}


def test_each_platform_has_one_frozen_record_of_its_ladder():
    assert PLATFORMS == {"linux": LINUX, "windows": WINDOWS}
    assert LINUX.rungs == _verdict.RUNGS and WINDOWS.rungs == _verdict.WINDOWS_RUNGS
    assert (LINUX.default_max_rung, WINDOWS.default_max_rung) == ("reload", "restart_adapter")
    with pytest.raises(dataclasses.FrozenInstanceError):
        LINUX.default_max_rung = "reboot"


def test_the_walks_spec_takes_its_platforms_and_default_from_the_records():
    assert LADDER_ARGUMENT_SPEC["platform"]["choices"] == list(PLATFORMS)
    assert LADDER_ARGUMENT_SPEC["max_rung"]["default"] == LINUX.default_max_rung
    assert LADDER_ARGUMENT_SPEC["windows"]["options"]["max_rung"]["choices"] == list(WINDOWS.rungs)


@pytest.mark.parametrize("platform", ["linux", "windows"])
def test_the_walk_the_breaker_and_the_guard_filter_read_the_same_default_destructive_rungs(platform):
    record = PLATFORMS[platform]
    spec = walk_argument_spec()
    args = dict((name, value.get("default")) for name, value in spec.items())
    args.update(platform=platform, max_rung=record.default_max_rung, windows=None, destructive_rungs=None)
    walk = WalkOptions(platform_args(args))
    breaker_max, breaker_destructive = platform_rungs({"platform": platform, "max_rung": None, "destructive_rungs": None, "windows": None})
    assert walk.rungs == record.rungs
    assert walk.destructive_rungs == record.destructive_rungs == tuple(breaker_destructive)
    assert breaker_max == record.default_max_rung
    # The guard's filter counts the platform's first destructive rung as destructive, its lightest rung not.
    heavy = dict(GHOST, verdict={"rung": record.destructive_rungs[0], "reasons": []})
    assert FILTERS["needs_destructive_rung"](heavy, None, platform, None) is True
    assert FILTERS["needs_destructive_rung"](dict(GHOST, verdict={"rung": record.rungs[0], "reasons": []}), None, platform, None) is False


def test_a_platforms_own_options_come_from_its_suboption_or_the_top_level():
    args = {"max_rung": "reset", "destructive_rungs": ["reset"], "windows": {"max_rung": "logoff", "destructive_rungs": None}}
    assert LINUX.rungs_of(args) == ("reset", ["reset"])
    assert WINDOWS.rungs_of(args) == ("logoff", list(WINDOWS.destructive_rungs))
    assert WINDOWS.own_options({"windows": None}) == {}


@pytest.mark.parametrize("status", ["failed", "refused", "partly fixed", "clean", "fixed", "planned", "undetermined"])
def test_the_host_fails_on_a_failed_refused_or_partly_fixed_walk_only(status):
    assert host_fails({"status": status, "msg": "m"}) is (status in ("failed", "refused", "partly fixed"))
    assert FAILING_STATUSES == ("failed", "refused", "partly fixed")


def test_a_pending_walk_fails_no_host_yet():
    assert host_fails(None) is False and host_fails({}) is False


def test_the_ladders_result_names_host_fails_in_its_documentation():
    import yaml
    from ansible_collections.gpuops.remediation.plugins.modules import gpu_ladder
    assert yaml.safe_load(gpu_ladder.RETURN)["host_fails"]["type"] == "bool"
    assert LadderAction.FAILURES  # the action exists and is importable without the Windows walk


@pytest.mark.parametrize("percent, count, on", [(0, 0, False), (20, 0, True), (0, 1, True), ("0", "0", False), ("25", 0, True)])
def test_the_breaker_is_on_when_either_limit_is_set(percent, count, on):
    assert FILTERS["breaker_on"](percent, count) is on
    assert (breaker_limit(10, int(percent), int(count)) is not None) is on
    assert breaker_on(int(percent), int(count)) is on


def test_the_breaker_filter_names_the_variable_it_cannot_read():
    with pytest.raises(AnsibleFilterError, match="gpu_remediate_breaker_max_count must be a whole number, got 'many'"):
        FILTERS["breaker_on"](0, "many")
    with pytest.raises(AnsibleFilterError, match="gpu_remediate_breaker_max_percent must be a whole number, got None"):
        FILTERS["breaker_on"](None, 0)


@pytest.mark.parametrize("pending", [None, "drain", "reboot"])
@pytest.mark.parametrize("followup", [None, "resume", "release", "hold"])
def test_the_controller_takes_a_step_for_a_drain_or_reboot_pause_and_for_an_ended_walks_scheduler_followup(pending, followup):
    assert needs_controller_step(pending, followup) is (pending is not None or followup is not None)
    assert (CONTROLLER_STEPS, SCHEDULER_FOLLOWUPS) == (("drain", "reboot"), ("resume", "release", "hold"))


def test_the_ladders_result_names_needs_controller_step_in_its_documentation():
    import yaml
    from ansible_collections.gpuops.remediation.plugins.modules import gpu_ladder
    assert yaml.safe_load(gpu_ladder.RETURN)["needs_controller_step"]["type"] == "bool"


@pytest.mark.parametrize("fleet_refusal", ["", "fleet guard: 2 of 4 hosts would need a destructive rung"])
@pytest.mark.parametrize("breaker_result", [None, {"skipped": True, "changed": False}, {"refuses": False, "refusal": ""},
                                            {"refuses": True, "refusal": "circuit breaker: open"}])
def test_the_guard_refuses_a_host_when_the_fleet_guard_refuses_the_run_or_the_breaker_refuses_the_host(fleet_refusal, breaker_result):
    expected = bool(fleet_refusal) or bool(breaker_result and breaker_result.get("refuses"))
    assert guard_refuses(fleet_refusal, breaker_result) is expected
    assert FILTERS["guard_refuses"](fleet_refusal, breaker_result) is expected
    if breaker_result is None:
        assert FILTERS["guard_refuses"](fleet_refusal) is expected


def test_the_guard_refuses_filter_names_a_breaker_result_that_is_none():
    with pytest.raises(AnsibleFilterError, match="guard_refuses: the circuit breaker's result must be .*got 'str'"):
        FILTERS["guard_refuses"]("", "open")
