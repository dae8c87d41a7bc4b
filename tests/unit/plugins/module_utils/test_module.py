# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Strict input kinds (_module) and process identities (_kill): values Ansible would convert are refused."""

from __future__ import annotations

import pytest

from ansible_collections.gpuops.remediation.plugins.module_utils._argument_specs import KILL_ARGUMENT_SPEC
from ansible_collections.gpuops.remediation.plugins.module_utils.kill._kill import SELECTION_ARGUMENT_SPEC, process_identities
from ansible_collections.gpuops.remediation.plugins.module_utils._module import input_errors
from ansible_collections.gpuops.remediation.plugins.module_utils._option_check import wrong_kind

SPEC = dict(SELECTION_ARGUMENT_SPEC, **KILL_ARGUMENT_SPEC)


@pytest.mark.parametrize("kind, value", [
    ("int", True), ("int", False), ("int", 1.5), ("int", "ten"), ("int", [1]), ("int", ""),
    ("float", True), ("float", "soon"), ("float", {"a": 1}), ("float", " "), ("float", "nan"), ("float", "inf"),
    ("float", float("nan")), ("float", float("-inf")), ("int", "1e999"),
    ("str", ["a", "b"]), ("str", {"a": 1}), ("path", ["/tmp"]),
    ("bool", "maybe"), ("bool", [True]), ("bool", 2), ("bool", "false-ish"),
    ("dict", 123), ("dict", "pid=1"),
])
def test_wrong_kinds_are_named(kind, value):
    assert wrong_kind(kind, value)


@pytest.mark.parametrize("kind, value", [
    ("int", 3), ("int", 3.0), ("int", "3"), ("float", 2), ("float", 2.5), ("float", "2.5"), ("float", " 10 "),
    ("str", "trainer"), ("str", 0), ("path", "/tmp/x"), ("bool", True), ("bool", "false"), ("bool", "No"),
    ("bool", "1"), ("bool", 0), ("dict", {"pid": 1}), ("int", None), ("str", None),
])
def test_right_kinds_pass(kind, value):
    assert wrong_kind(kind, value) is None


def test_input_errors_name_the_option_and_the_value():
    errors = input_errors(SPEC, {"name_pattern": ["a", "b"], "grace": "ten", "min_memory_mib": True,
                                 "protect_names": ["ok", ["nested"]], "signals": ["TERM"]})
    assert errors == {
        "name_pattern": "name_pattern: ['a', 'b'] is not valid: a list is not a string",
        "grace": "grace: 'ten' is not valid: not a (finite) number",
        "min_memory_mib": "min_memory_mib: True is not valid: a boolean is not a number",
        "protect_names": "protect_names[1]: ['nested'] is not valid: a list is not a string",
    }


def test_input_errors_leave_unknown_and_absent_options_to_ansible():
    assert input_errors(SPEC, {"not_an_option": [1], "_ansible_check_mode": True}) == {}


@pytest.mark.parametrize("holder", [
    {"pid": 123.5, "start_time": 5}, {"pid": True, "start_time": 5}, {"pid": 123, "start_time": 7.5},
    {"pid": 123, "start_time": False}, {"pid": 123}, {"start_time": 5}, {"pid": 0, "start_time": 5},
    {"pid": -4, "start_time": 5}, {"pid": "12a", "start_time": 5}, {"pid": 123, "start_time": -1}, 123, "123", None,
])
def test_malformed_holders_are_refused_naming_the_element(holder):
    identities, error = process_identities("holders", [{"pid": 7, "start_time": 1}, holder])
    assert identities is None
    assert error.startswith("holders[1]: %r is not a process" % (holder,))


def test_whole_numbers_as_ints_or_digit_strings_are_identities():
    identities, error = process_identities("holders", [{"pid": 7, "start_time": 0, "name": "x"}, {"pid": "8", "start_time": " 99 "}])
    assert error is None
    assert identities == [{"pid": 7, "start_time": 0}, {"pid": 8, "start_time": 99}]


def test_an_empty_list_is_an_empty_selection():
    assert process_identities("holders", []) == ([], None)


def test_an_empty_string_is_no_answer_for_an_option_that_is_not_text(tmp_path):
    """ansible-core 2.16 to 2.18 template a role's None (`gpus: "{{ gpu_inspect_gpus }}"`) as '': for a list, a number,
    a mapping, a boolean or a path that is no answer, as None is; for a string it stays the empty string."""
    import json
    import subprocess
    import sys
    import textwrap
    script = tmp_path / "mod.py"
    script.write_text(textwrap.dedent("""\
        import json, sys
        sys.argv = ["mod", sys.argv[1]]
        from ansible_collections.gpuops.remediation.plugins.module_utils._module import GpuModule
        module = GpuModule(dict(gpus=dict(type="list", elements="str"), window=dict(type="int", default=5),
                                where=dict(type="path"), name=dict(type="str", default="x")))
        module.exit_json(params=module.params)
        """))
    args = tmp_path / "args.json"
    args.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": {"gpus": "", "window": "", "where": "", "name": ""}}))
    done = subprocess.run([sys.executable, str(script), str(args)], check=False, capture_output=True, text=True, timeout=120,
                          env=dict(__import__("os").environ, PYTHONPATH=":".join(sys.path)))
    params = json.loads(done.stdout)["params"]
    assert params == {"gpus": None, "window": 5, "where": None, "name": ""}, done.stderr
