# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""roles/gpu_watch: its defaults are its argument spec's, and it passes the module every threshold with the module's
own defaults; the rungs it may remediate up to are the ladder's."""

import os

import yaml

from ansible_collections.gpuops.remediation.plugins.module_utils._verdict import RUNGS
from ansible_collections.gpuops.remediation.plugins.modules.gpu_watch import ARGUMENT_SPEC
from ansible_collections.gpuops.remediation.plugins.module_utils.watch._watch import FINDING_KINDS

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def load(*parts):
    with open(os.path.join(ROOT, *parts)) as handle:
        return yaml.safe_load(handle)


OPTIONS = load("roles", "gpu_watch", "meta", "argument_specs.yml")["argument_specs"]["main"]["options"]


def test_the_defaults_are_the_argument_specs():
    assert load("roles", "gpu_watch", "defaults", "main.yml") == dict((name, spec.get("default")) for name, spec in OPTIONS.items())


def test_the_role_passes_the_module_its_options_with_the_modules_defaults():
    task = load("roles", "gpu_watch", "tasks", "main.yml")[1]["gpuops.remediation.gpu_watch"]
    for option, value in task.items():
        assert option in ARGUMENT_SPEC, option
        variable = "gpu_watch_" + option
        if variable in OPTIONS and ARGUMENT_SPEC[option].get("default") is not None:
            assert value == "{{ %s }}" % variable, option
            assert OPTIONS[variable]["default"] == ARGUMENT_SPEC[option]["default"], option


def test_the_remediation_choices_are_the_ladders_rungs_and_the_watchs_kinds():
    assert OPTIONS["gpu_watch_remediate_max_rung"]["choices"] == list(RUNGS)
    assert OPTIONS["gpu_watch_remediate_on"]["choices"] == list(FINDING_KINDS)
    assert OPTIONS["gpu_watch_remediate"]["default"] is False
