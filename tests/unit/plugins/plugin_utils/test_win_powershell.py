# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""_powershell_literals: every value stays one literal; the plugins' own work sends only constant scripts and argv lists.

literal() is checked by a model of PowerShell's quote rule (a single-quoted string ends at any of ' U+2018 U+2019
U+201A U+201B, two of them in a row are one literal quote, nothing inside is expanded): tree-sitter-powershell, which
reads the scripts (test_win_scripts.py), knows the ASCII quote only, so it cannot see a typographic quote end a
string. The scripts themselves are read by that grammar, never by a tokenizer of ours.
"""

from __future__ import annotations

import json

import pytest

from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node import _node_journal, _remote_node, _powershell_scripts
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.tools import _pnputil_adapters, _taskkill_tree, _wsl_cli
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.rungs import _reset_dispatch, _wsl_shutdown
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.simulation import _simulated_node
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows import _node_snapshot
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node._powershell_literals import literal

from ansible_collections.gpuops.remediation.tests.unit.helpers.powershell_grammar import Script

QUOTES = "'\u2018\u2019\u201a\u201b"
CODE_CHARACTERS = set(";|&(){}$`\"'#@,<>\n\r") | set(QUOTES) | set("\u201c\u201d\u201e")

HOSTILE = [
    "'; Remove-Item -Recurse C:\\ #", "name\nRemove-Item C:\\", "\u2019; Stop-Computer; \u2019", "\u2018\u2019\u201a\u201b'",
    "$(Stop-Computer)", "`$env:PATH", '"; exit "', "trailing'", "''", "", " spaced out ", "tab\tbed", "\r\n",
    "\u201cdouble\u201d", "#comment", "@{a=1}", "& calc.exe", "x' + (Stop-Computer) + '", "\u2019\u2019\u2019",
]


def tokenize(line):
    """[(kind, value)]: kind "string" (a single-quoted literal's value), "call" (&), "punct" (@( , )), or "code"."""
    tokens, at = [], 0
    while at < len(line):
        char = line[at]
        if char in " \t":
            at += 1
        elif char in QUOTES:
            value, at = _single_quoted(line, at + 1)
            tokens.append(("string", value))
        elif line.startswith("@(", at):
            tokens.append(("punct", "@("))
            at += 2
        elif char in ",)":
            tokens.append(("punct", char))
            at += 1
        elif char == "&" and (at + 1 == len(line) or line[at + 1] in " \t"):
            tokens.append(("call", "&"))
            at += 1
        else:
            end = at
            while end < len(line) and line[end] not in " \t":
                end += 1
            word = line[at:end]
            tokens.append(("code" if CODE_CHARACTERS & set(word) else "word", word))
            at = end
    return tokens


def _single_quoted(line, at):
    value = []
    while at < len(line):
        char = line[at]
        if char in QUOTES:
            if at + 1 < len(line) and line[at + 1] in QUOTES:
                value.append(char)
                at += 2
                continue
            return "".join(value), at + 1
        value.append(char)
        at += 1
    raise AssertionError("unterminated string: %r" % line)


@pytest.mark.parametrize("name", HOSTILE)
def test_a_hostile_name_is_one_literal(name):
    assert tokenize(literal(name)) == [("string", name)]


def test_every_command_builder_gives_an_argv_a_program_reads_back_whole():
    argvs = [_taskkill_tree.taskkill_argv(4242), _wsl_cli.terminate_argv("Ubuntu-18.04"),
             _wsl_cli.shutdown_argv(_wsl_cli.STORE_WSL_PATH), _wsl_cli.list_argv(running=True),
             _pnputil_adapters.restart_device_argv("PCI\\VEN_10DE&DEV_1E93&SUBSYS_12BC1462&REV_A1\\4&443bd0d&0&0008")]
    for argv in argvs:
        assert command_line_to_argv(quote_argv(argv)) == argv


@pytest.mark.parametrize("name", HOSTILE)
def test_builders_refuse_hostile_names_before_any_quoting(name):
    with pytest.raises(ValueError):
        _wsl_cli.terminate_argv(name)
    with pytest.raises(ValueError):
        _pnputil_adapters.restart_device_argv(name)


def test_the_quote_characters_are_doubled_and_integers_quoted():
    assert literal("it's") == "'it''s'"
    assert literal("\u2019") == "'\u2019\u2019'"
    assert literal(4242) == "'4242'"


@pytest.mark.parametrize("value", ["a\x00b", "\x00", True, None, 1.5, ["a"], b"bytes"])
def test_nul_and_other_types_are_refused(value):
    with pytest.raises(ValueError):
        literal(value)


# ---- every script and command the Windows plugins send, for hostile names ----------------------------------------
#
# Not a hand list: the plugins' own code (snapshot, every win_gpu_reset method, wsl_shutdown, the journal) runs against
# the real path (_remote_node.TargetNode), whose module calls are recorded and answered by the simulated node. Each
# recorded call is then read as PowerShell and as a Windows command line would read it.

HOSTILE_PROCESS = "'; Remove-Item -Recurse C:\\ #"
HOSTILE_CHILD = "job\nRemove-Item C:\\\u2019$(Stop-Computer)`\"\u201c\u2018"
HOSTILE_USER = "o'b$(calc)`\"\u2018\u2019\u201c"
HOSTILE_RUN = "'; Remove-Item -Recurse C:\\ #\n$(Stop-Computer)`\"\u2019\u201c\x00"
HOSTILE_JOURNAL = "C:\\gpu'ops$(x)\u2019\u201c`\\journal.jsonl"
HOSTILE_SMI = "C:\\Tools\\it's $(Stop-Computer)\u2018\\nvidia-smi.exe"
HOSTILE_INSTANCE_ID = "PCI\\VEN_10DE&DEV_1E81\\4&x'; Stop-Computer #$(calc)`\u2019 & y"
HOSTILE_DISTRIBUTIONS = ["'; Remove-Item -Recurse C:\\ #", "Ubuntu\n--shutdown", "$(Stop-Computer)", "x\u2019y", "a\x00b", "--help"]


def param_names(text):
    """The names the script's param block declares, as the PowerShell grammar reads them."""
    return Script(text).parameters()


def quote_argv(argv):
    """A Windows command line from argv by the C runtime's rules (what ansible.windows' win_command does with argv)."""
    quoted = []
    for argument in argv:
        if argument and not any(c in argument for c in ' \t\n\v"'):
            quoted.append(argument)
            continue
        out, slashes = ['"'], 0
        for char in argument:
            if char == "\\":
                slashes += 1
                continue
            out.append("\\" * (slashes * 2 + 1) + '"' if char == '"' else "\\" * slashes + char)
            slashes = 0
        out.append("\\" * (slashes * 2) + '"')
        quoted.append("".join(out))
    return " ".join(quoted)


def command_line_to_argv(line):
    """How a program started with `line` reads its argv (CommandLineToArgvW, for the arguments after the first)."""
    argv, current, quoted, at, started = [], [], False, 0, False
    while at < len(line):
        char = line[at]
        if char == "\\":
            end = at
            while end < len(line) and line[end] == "\\":
                end += 1
            count = end - at
            if end < len(line) and line[end] == '"':
                current.append("\\" * (count // 2))
                if count % 2:
                    current.append('"')
                    end += 1
                at, started = end, True
            else:
                current.append("\\" * count)
                at, started = end, True
        elif char == '"':
            if quoted and at + 1 < len(line) and line[at + 1] == '"':
                current.append('"')
                at += 2
            else:
                quoted = not quoted
                at += 1
            started = True
        elif char in " \t" and not quoted:
            if started:
                argv.append("".join(current))
            current, started = [], False
            at += 1
        else:
            current.append(char)
            at, started = at + 1, True
    if started:
        argv.append("".join(current))
    return argv


class RecordingAction:
    """Ansible's ActionBase plumbing for TargetNode: every module call recorded, answered by the simulated node."""

    def __init__(self, root, user):
        self._task = Task()
        self.root, self.user, self.calls = root, user, []

    def _execute_module(self, module_name, module_args, task_vars):
        del task_vars
        self.calls.append((module_name, module_args))
        if module_name == _remote_node.WIN_COMMAND:
            answer = _simulated_node.run_command(self.root, module_args["argv"], self.user)
            return {"rc": answer.rc, "stdout": _simulated_node.transported(answer.stdout), "stderr": _simulated_node.transported(answer.stderr)}
        names = [name for name, text in _powershell_scripts.SCRIPTS.items() if text == module_args["script"]]
        assert len(names) == 1, "a script that is none of _powershell_scripts.SCRIPTS was sent"
        return {"result": _simulated_node.run_script(self.root, names[0], module_args["parameters"], self.user), "changed": False}


class Task:
    check_mode, delegate_to = False, None


@pytest.fixture
def recorded(tmp_path):
    """Every module call of the Windows plugins' work on a node full of hostile names, and the values sent."""
    root = str(tmp_path / "ws12")
    # constrained_language: the terminate script answers that Add-Type is refused, so taskkill (the fallback) runs too
    # oem_code_page 65001 (the "Unicode UTF-8" beta setting): quser, the sessions' fallback, can write the user's quotes
    scenario = {"hostname": "WS12", "default_user": HOSTILE_USER, "administrators": [HOSTILE_USER], "constrained_language": True,
                "oem_code_page": 65001,
                "gpus": [{"ghost_mib": 900, "instance_id": HOSTILE_INSTANCE_ID}], "virtual_display": True, "integrated_gpu": True,
                "sessions": [{"user": HOSTILE_USER, "explorer_memory_mib": 300}],
                "processes": [{"name": HOSTILE_PROCESS, "memory_mib": 2048, "children": [{"name": HOSTILE_CHILD, "memory_mib": 512}]}],
                "distributions": [{"name": "Ubuntu-22.04", "owner": HOSTILE_USER, "memory_mib": 1024}, {"name": "Debian", "owner": HOSTILE_USER}]}
    _simulated_node.write_node(root, _simulated_node.build_state(scenario))
    action = RecordingAction(root, HOSTILE_USER)
    node = _remote_node.TargetNode(action, {})
    journal = {"journal_path": HOSTILE_JOURNAL, "run_id": HOSTILE_RUN}
    snapshot = _node_snapshot.take(node, HOSTILE_SMI, journal_path=HOSTILE_JOURNAL)
    holders = [h for h in snapshot["holders"] if h["class"] == "compute" and h["name"] != "explorer.exe"]
    assert sorted(h["name"] for h in holders) == sorted([HOSTILE_PROCESS, HOSTILE_CHILD])
    # check mode asks what the journal would refuse (journal_check) before it predicts an action
    assert _reset_dispatch.run(node, dict({"method": "kill", "holders": holders}, nvidia_smi=HOSTILE_SMI, **journal), check_mode=True)["changed"]
    for args in ({"method": "kill", "holders": holders}, {"method": "restart_adapter"}, {"method": "restart_explorer", "user": HOSTILE_USER, "allow_dwm": True},
                 {"method": "logoff", "user": HOSTILE_USER, "allow_dwm": True}):
        assert not _reset_dispatch.run(node, dict(args, nvidia_smi=HOSTILE_SMI, **journal), check_mode=False)["failed"]
    assert _wsl_shutdown.stop(node, "Debian", False, **journal)["stopped"] == ["Debian"]
    assert _wsl_shutdown.stop(node, None, False, **journal)["stopped"] == ["Ubuntu-22.04"]
    before = len(action.calls)
    for name in HOSTILE_DISTRIBUTIONS:
        with pytest.raises(ValueError, match="distribution: "):
            _wsl_shutdown.stop(node, name, False, **journal)
    assert len(action.calls) == before  # refused before anything was sent
    lines = _node_journal.read_records(node, HOSTILE_JOURNAL)[0]
    assert [r["run_id"] for r in lines] == [HOSTILE_RUN] * len(lines) and len(lines) >= 10
    assert set(r.get("name") for r in lines if r["action"] == "taskkill") >= {HOSTILE_PROCESS}
    assert [a["instance_id"] for a in snapshot["adapters"] if a["gpu_join"] == "pci_location"] == [HOSTILE_INSTANCE_ID]
    hostile = [HOSTILE_PROCESS, HOSTILE_CHILD, HOSTILE_USER, HOSTILE_RUN, HOSTILE_JOURNAL, HOSTILE_SMI, HOSTILE_INSTANCE_ID]
    return action.calls, hostile


def test_every_script_and_every_tool_was_sent(recorded):
    calls, dummy = recorded
    scripts = set(name for module, args in calls if module == _remote_node.WIN_POWERSHELL
                  for name, text in _powershell_scripts.SCRIPTS.items() if text == args["script"])
    tools = set(_simulated_node._cim_processes.base_name(args["argv"][0].rsplit("\\", 1)[-1]) for module, args in calls
                if module == _remote_node.WIN_COMMAND)
    assert scripts == set(_powershell_scripts.SCRIPTS)  # a new script must be driven here too
    # and so must a new tool; taskkill runs only inside the terminate_held script, never through win_command
    assert tools == set(_simulated_node._TOOLS) - {"taskkill"}
    assert set(module for module, dummy in calls) == {_remote_node.WIN_COMMAND, _remote_node.WIN_POWERSHELL}


def test_every_command_is_an_argv_list_each_value_one_element_of_the_command_line(recorded):
    calls, hostile = recorded
    commands = [args for module, args in calls if module == _remote_node.WIN_COMMAND]
    for args in commands:
        assert set(args) == {"argv", "output_encoding_override"}  # never cmd / _raw_params: no string to split
        argv = args["argv"]
        assert all(isinstance(part, str) and "\x00" not in part for part in argv)
        assert command_line_to_argv(quote_argv(argv)) == argv
        for value in hostile:
            assert all(part == value or value not in part for part in argv), (value, argv)
    assert [args["argv"][0] for args in commands if args["argv"][1:] == ["-q", "-x"]][0] == HOSTILE_SMI
    assert ["pnputil", "/restart-device", HOSTILE_INSTANCE_ID] in [args["argv"] for args in commands]


def test_every_script_is_constant_text_and_every_value_is_a_declared_parameter(recorded):
    calls, hostile = recorded
    for module, args in [call for call in calls if call[0] == _remote_node.WIN_POWERSHELL]:
        script = args["script"]
        assert set(name.lower() for name in args["parameters"]) <= set(param_names(script))
        for value in [item for value in args["parameters"].values() for item in (value if isinstance(value, list) else [value])] + hostile:
            assert isinstance(value, (str, int)) and not isinstance(value, bool)
            assert str(value) not in script or len(str(value)) < 3, value  # no value is ever part of a script
        for value in args["parameters"].values():
            assert "\x00" not in str(value)
    appended = [args["parameters"]["Line"] for module, args in calls
                if module == _remote_node.WIN_POWERSHELL and args["script"] == _powershell_scripts.JOURNAL_APPEND]
    assert appended and all("\n" not in line and "\r" not in line for line in appended)
    assert any(HOSTILE_PROCESS in json.loads(line).get("name", "") for line in appended)


@pytest.mark.parametrize("name", HOSTILE)
def test_a_hostile_name_is_one_string_to_the_powershell_grammar_too(name):
    script = Script(literal(name) + "\n")
    strings = [node for node in script.nodes() if node.type == "string_literal"]
    assert script.errors() == [] and [script.text_of(node) for node in strings] == [literal(name)]
    assert not [node for node in script.nodes() if node.type in ("variable", "command", "expandable_string_literal")]
