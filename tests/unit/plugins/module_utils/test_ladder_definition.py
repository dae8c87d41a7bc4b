"""The ladder is defined once (_verdict.RUNGS); every other place that lists its rungs is checked equal to it."""

import os
import re

import yaml

from ansible_collections.gpuops.remediation.plugins.module_utils import _verdict
from ansible_collections.gpuops.remediation.plugins.module_utils._xid_policy import XID_RUNGS
from ansible_collections.gpuops.remediation.plugins.modules import gpu_holders_info, gpu_ladder
from ansible_collections.gpuops.remediation.plugins.plugin_utils.ladder._ladder_options import ALL_RUNGS, LADDER_ARGUMENT_SPEC, RUNG_MODULES
from ansible_collections.gpuops.remediation.plugins.plugin_utils.ladder._platform import LINUX, PLATFORMS, WINDOWS

# Each platform's ladder and its default destructive rungs, as its record (plugin_utils/ladder/_platform.py) has them.
LADDERS = {name: platform.rungs for name, platform in PLATFORMS.items()}
DEFAULT_DESTRUCTIVE = {name: list(platform.destructive_rungs) for name, platform in PLATFORMS.items()}

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))


def load(*parts):
    with open(os.path.join(ROOT, *parts)) as handle:
        return yaml.safe_load(handle)


def test_the_ladder_has_the_six_rungs_lightest_first():
    assert _verdict.RUNGS == ("kill", "instance", "reset", "reload", "graphics", "reboot")
    assert _verdict.NO_RUNG not in _verdict.RUNGS


def test_the_walks_options_choose_among_the_rungs_of_both_ladders():
    assert LADDERS == {"linux": _verdict.RUNGS, "windows": _verdict.WINDOWS_RUNGS}
    assert set(ALL_RUNGS) == set(_verdict.RUNGS) | set(_verdict.WINDOWS_RUNGS) and len(ALL_RUNGS) == len(set(ALL_RUNGS))
    assert LADDER_ARGUMENT_SPEC["max_rung"]["choices"] == ALL_RUNGS
    assert LADDER_ARGUMENT_SPEC["destructive_rungs"]["choices"] == ALL_RUNGS
    for platform, rungs in LADDERS.items():
        assert set(DEFAULT_DESTRUCTIVE[platform]) <= set(rungs)
    # Every rung but the reboot (the controller's) has its module.
    assert tuple(RUNG_MODULES) == _verdict.RUNGS[:-1]


def test_the_doc_only_module_documents_the_same_options_as_the_action_plugin_checks():
    doc = yaml.safe_load(gpu_ladder.DOCUMENTATION)["options"]
    for name, spec in LADDER_ARGUMENT_SPEC.items():
        assert doc[name].get("choices") == spec.get("choices"), name
        assert doc[name].get("default") == spec.get("default"), name
        assert doc[name]["type"] == spec["type"], name


def test_the_role_argument_specs_and_defaults_list_the_same_rungs():
    options = load("roles", "gpu_reclaim", "meta", "argument_specs.yml")["argument_specs"]["main"]["options"]
    defaults = load("roles", "gpu_reclaim", "defaults", "main.yml")
    assert options["gpu_reclaim_max_rung"]["choices"] == list(_verdict.RUNGS)
    assert options["gpu_reclaim_destructive_rungs"]["choices"] == list(_verdict.RUNGS)
    assert options["gpu_reclaim_windows_max_rung"]["choices"] == list(_verdict.WINDOWS_RUNGS)
    assert options["gpu_reclaim_windows_destructive_rungs"]["choices"] == list(_verdict.WINDOWS_RUNGS)
    assert options["gpu_reclaim_windows_destructive_rungs"]["default"] == DEFAULT_DESTRUCTIVE["windows"]
    assert options["gpu_reclaim_platform"]["choices"] == list(LADDERS)
    assert options["gpu_reclaim_max_rung"]["default"] == LADDER_ARGUMENT_SPEC["max_rung"]["default"]
    assert options["gpu_reclaim_destructive_rungs"]["default"] == DEFAULT_DESTRUCTIVE["linux"]
    # Each platform's default max_rung is its record's: the role's and the walk's.
    assert options[LINUX.max_rung_variable]["default"] == LINUX.default_max_rung
    assert options[WINDOWS.max_rung_variable]["default"] == WINDOWS.default_max_rung
    for platform in PLATFORMS.values():
        assert options[platform.max_rung_variable]["choices"] == list(platform.rungs)
        assert options[platform.destructive_rungs_variable]["choices"] == list(platform.rungs)
        assert options[platform.destructive_rungs_variable]["default"] == list(platform.destructive_rungs)
        assert platform.default_max_rung in platform.rungs
    for name, spec in options.items():
        assert defaults.get(name) == spec.get("default"), name


def test_the_role_passes_every_option_of_the_walk_it_documents():
    tasks = load("roles", "gpu_reclaim", "tasks", "main.yml")
    passed = next(t for t in tasks if "module_defaults" in t)["module_defaults"]["gpuops.remediation.gpu_ladder"]
    assert set(passed) >= {"max_rung", "allow_reboot", "destructive_rungs", "drain", "kill_wait_timeout", "reload_grace"}
    assert all(name in gpu_ladder_options() for name in passed)


def gpu_ladder_options():
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.ladder._ladder_options import walk_argument_spec
    return walk_argument_spec()


def test_the_verdicts_rungs_are_the_ones_its_docs_name():
    doc = " ".join(yaml.safe_load(gpu_holders_info.DOCUMENTATION)["description"])
    listed = re.search(r"the lowest rung of the ladder \((.*?)\) expected", doc).group(1)
    assert re.findall(r"V\((\w+)\)", listed) == [_verdict.NO_RUNG] + list(_verdict.ENTRY_RUNGS)
    with open(_verdict.__file__) as handle:
        source = handle.read()
    linux = source[:source.index("\ndef _windows")]
    asked = set(re.findall(r"\bneed\(\"(\w+)\"", linux)) | set(XID_RUNGS.values()) | set(_verdict.RECOVERY_RUNGS.values())
    assert asked == set(_verdict.ENTRY_RUNGS)
    assert set(_verdict.ENTRY_RUNGS) <= set(_verdict.RUNGS)
