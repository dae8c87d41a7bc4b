# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one option checker (_option_check): one value judged where it was written - a task's option, a playbook
variable, a rulebook's option - and the error naming the option and the value in each caller's words."""

from __future__ import annotations

import pytest

from ansible_collections.gpuops.remediation.plugins.module_utils._option_check import (
    MODULE_OPTION, PLAYBOOK_VARIABLE, RULEBOOK_OPTION, kind_error, wrong_kind,
)

# (kind, value, accepted as a module option, as a playbook variable, as a rulebook option)
CASES = [
    ("int", 5, True, True, True),
    ("int", "5", True, True, False),  # text: Ansible converts a task's and -e's; a rulebook's YAML is typed
    ("int", 5.0, True, True, False),
    ("int", 5.5, False, True, False),  # a playbook's numbers are Ansible's validator's
    ("int", True, False, True, False),
    ("float", float("nan"), False, True, False),
    ("float", 2, True, True, True),
    ("bool", "yes", True, True, False),
    ("bool", 1, True, True, False),
    ("bool", 1.0, True, False, False),
    ("bool", "maybe", False, False, False),
    ("bool", [], False, False, False),
    ("list", "a,b", True, False, False),  # Ansible's comma-separated list; never for a playbook variable
    ("list", ("a",), True, True, False),
    ("dict", "A=1", False, False, False),
    ("str", ["a"], False, True, False),
    ("str", "a\x00b", False, True, False),
    ("str", 5, True, True, False),
]


@pytest.mark.parametrize("kind, value, module, variable, rulebook", CASES)
def test_a_value_is_judged_where_it_was_written(kind, value, module, variable, rulebook):
    judged = [wrong_kind(kind, value, given) is None for given in (MODULE_OPTION, PLAYBOOK_VARIABLE, RULEBOOK_OPTION)]
    assert judged == [module, variable, rulebook]


def test_no_value_is_no_wrong_kind_anywhere():
    assert [wrong_kind("int", None, given) for given in (MODULE_OPTION, PLAYBOOK_VARIABLE, RULEBOOK_OPTION)] == [None, None, None]


def test_each_error_names_the_option_and_the_value_as_written():
    assert kind_error("grace", "ten", "float") == "grace: 'ten' is not valid: not a (finite) number"
    assert kind_error("protect_names[1]", ["x"], "str") == "protect_names[1]: ['x'] is not valid: a list is not a string"
    assert kind_error("gpuops_dry_run", "maybe", "bool", PLAYBOOK_VARIABLE) == "gpuops_dry_run=maybe (true or false)"
    assert kind_error("gpu_reclaim_gpus", "0\n1", "list", PLAYBOOK_VARIABLE, shown="'0\\n1'") == "gpu_reclaim_gpus='0\\n1' (a list)"
    assert kind_error("gpu_kernel_log: option throttle_seconds", "5m", "float", RULEBOOK_OPTION) == (
        "gpu_kernel_log: option throttle_seconds must be a float, got '5m'")
    assert kind_error("grace", 10, "float") is None
