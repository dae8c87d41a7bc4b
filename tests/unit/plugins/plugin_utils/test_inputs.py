# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The playbooks' input check (plugin_utils/_inputs.py) on the roles' real argument specs."""

from __future__ import annotations

import pytest

from ansible_collections.gpuops.remediation.plugins.plugin_utils._inputs import PLAYBOOK_OPTIONS, input_errors, role_options

RESET_GPU_ROLES = ("gpu_inspect", "gpu_reclaim", "gpu_remediate")


@pytest.fixture(name="options")
def reset_gpu_options():
    options = dict(PLAYBOOK_OPTIONS)
    options.update(role_options(RESET_GPU_ROLES))
    return options


def test_every_variable_of_the_roles_is_declared_and_windows_ones_included(options):
    assert "gpu_reclaim_windows_journal_path" in options
    assert "gpu_reclaim_windows_max_rung" in options
    assert "gpu_remediate_max_destructive_percent" in options
    assert "gpu_inspect_probe_timeout" in options


@pytest.mark.parametrize("values", [
    {},
    {"gpu_reclaim_allow_reboot": "false", "gpu_reclaim_allow_daemons": "yes", "gpuops_dry_run": "1"},
    {"gpu_reclaim_allow_reboot": True, "gpu_reclaim_max_rung": "reset", "gpu_reclaim_kill_grace": "2.5"},
    {"gpuops_serial": "25%", "gpuops_max_fail_percentage": "0", "gpu_remediate_max_destructive_percent": "100"},
    {"gpuops_serial": 3, "gpuops_environment": {"GPUOPS_SIM_ROOT": "/x"}},
    {"gpu_reclaim_protect_names": ["slurmd"], "gpu_reclaim_windows_journal_path": "D:\\gpuops\\journal.jsonl"},
    {"some_other_variable": "anything"},
])
def test_what_operators_send_passes(options, values):
    assert input_errors(values, options) == []


@pytest.mark.parametrize("values, says", [
    ({"gpuops_max_fail_percentage": "150"}, "gpuops_max_fail_percentage=150 (0..100)"),
    ({"gpuops_max_fail_percentage": "-1"}, "gpuops_max_fail_percentage=-1 (0..100)"),
    ({"gpuops_serial": "0"}, "gpuops_serial=0 (hosts per batch: N >= 1, or a percentage 1%..100%)"),
    ({"gpuops_serial": "150%"}, "gpuops_serial=150% (hosts per batch: N >= 1, or a percentage 1%..100%)"),
    ({"gpuops_serial": True}, "gpuops_serial=True (hosts per batch"),
    ({"gpu_remediate_max_destructive_percent": "101"}, "gpu_remediate_max_destructive_percent=101 (0..100)"),
    ({"gpu_reclaim_protect_names": "foo"}, "gpu_reclaim_protect_names=foo (a list)"),
    ({"gpu_reclaim_protect_names": {"a": 1}}, "gpu_reclaim_protect_names={'a': 1} (a list)"),
    ({"gpu_reclaim_allow_reboot": "maybe"}, "gpu_reclaim_allow_reboot=maybe (true or false)"),
    ({"gpu_reclaim_allow_daemons": []}, "gpu_reclaim_allow_daemons=[] (true or false)"),
    ({"gpuops_dry_run": "maybe"}, "gpuops_dry_run=maybe (true or false)"),
    ({"gpuops_environment": "GPUOPS_SIM_ROOT=/x"}, "gpuops_environment=GPUOPS_SIM_ROOT=/x (a mapping)"),
    ({"gpu_reclaim_windows_journal_path": "journal.jsonl"}, "gpu_reclaim_windows_journal_path=journal.jsonl (an absolute Windows path"),
    ({"gpu_reclaim_windows_journal_path": "C:\\gpuops\\CON"}, "gpu_reclaim_windows_journal_path=C:\\gpuops\\CON (an absolute Windows path"),
    ({"gpu_reclaim_max_rung": "all"}, "value of gpu_reclaim_max_rung must be one of"),
    ({"gpu_reclaim_windows_max_rung": "reload"}, "value of gpu_reclaim_windows_max_rung must be one of"),
    ({"gpu_reclaim_kill_grace": "soon"}, "gpu_reclaim_kill_grace"),
    ({"gpu_reclaim_drain_reason": "gpuops\nmaintenance"}, "gpu_reclaim_drain_reason='gpuops\\nmaintenance' (one line without a line break"),
    ({"gpu_reclaim_drain_reason": "gpuops\tmaintenance"}, "found '\\t'"),
    ({"gpu_reclaim_drain_reason": "  "}, "gpu_reclaim_drain_reason=   (a non-empty text)"),
])
def test_each_wrong_variable_is_named_alone_with_its_value(options, values, says):
    errors = input_errors(dict(values, gpu_reclaim_allow_reboot_ok=1), options)
    assert len(errors) == 1, errors
    assert says in errors[0]
    assert list(values)[0] in errors[0]


def test_a_drain_reason_on_one_line_passes(options):
    assert input_errors({"gpu_reclaim_drain_reason": "gpuops: maintenance (ticket 42)"}, options) == []


def test_several_wrong_variables_each_named_once(options):
    errors = input_errors({"gpuops_serial": "0", "gpu_reclaim_allow_reboot": "maybe", "gpu_reclaim_max_rung": "all"}, options)
    assert len(errors) == 3
    assert sum("gpu_reclaim_allow_reboot" in error for error in errors) == 1


def test_a_range_is_checked_only_on_a_number(options):
    errors = input_errors({"gpu_remediate_max_destructive_percent": "lots"}, options)
    assert len(errors) == 1 and "gpu_remediate_max_destructive_percent" in errors[0] and "0..100" not in errors[0]


def test_none_is_no_answer_for_an_optional_input():
    """AWX writes an empty survey answer as !unsafe '', which ansible-core 2.19 reads as None (ansible/awx#16205):
    no answer, the default applies; a wrong answer beside it is still refused, naming it."""
    from ansible_collections.gpuops.remediation.plugins.plugin_utils._inputs import input_errors
    options = {"gpu_reclaim_allow_reboot": {"type": "bool"}, "gpu_reclaim_gpus": {"type": "list", "elements": "str"},
               "gpuops_environment": {"type": "dict"}, "gpuops_serial": {"type": "raw"},
               "gpu_remediate_max_destructive_percent": {"type": "int"}, "needed": {"type": "str", "required": True}}
    values = dict((name, None) for name in options if name != "needed")
    assert input_errors(dict(values, needed="x"), options) == []
    assert input_errors(dict(values, needed="x", gpu_reclaim_allow_reboot="maybe"), options) == [
        "gpu_reclaim_allow_reboot=maybe (true or false)"]


@pytest.mark.parametrize("values, says", [
    ({"gpu_watch_samples": "0"}, "gpu_watch_samples=0 (at least 1)"),
    ({"gpu_watch_high_usage_percent": 120}, "gpu_watch_high_usage_percent=120 (more than 0 and at most 100)"),
    ({"gpu_watch_interval": "-1"}, "gpu_watch_interval=-1 (0 or more seconds)"),
    ({"gpu_watch_state_max_age_minutes": 0}, "gpu_watch_state_max_age_minutes=0 (more than 0 minutes)"),
])
def test_the_watchs_ranges_are_the_modules_own(values, says):
    errors = input_errors(values, role_options(["gpu_watch"]))
    assert errors == [says]


def test_none_for_every_watch_input_is_no_answer():
    """The watch job template's survey defaults as AWX sends them: the empty Webhook URL (and any other empty answer)
    is None, which the input check takes as no answer."""
    options = role_options(["gpu_watch"])
    assert input_errors(dict((name, None) for name in options), options) == []
