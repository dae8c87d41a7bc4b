# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""_powershell_scripts: every constant PowerShell script read by a real PowerShell grammar (tree-sitter-powershell): it
parses without an ERROR or MISSING node, uses its parameters only as variables (never inside a string that expands,
never as a command to call), and runs no text as code (no Invoke-Expression, no [scriptblock]::Create, no & or . on
data, Add-Type only from a literal)."""

from __future__ import annotations

import pytest

from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node import _powershell_scripts

from ansible_collections.gpuops.remediation.tests.unit.helpers.powershell_grammar import DYNAMIC_COMMANDS, Script

NAMES = sorted(_powershell_scripts.SCRIPTS)


@pytest.mark.parametrize("name", NAMES)
def test_every_script_parses_without_an_error_or_a_missing_node(name):
    assert Script(_powershell_scripts.SCRIPTS[name]).errors() == []


@pytest.mark.parametrize("name", NAMES)
def test_parameters_are_used_as_variables_only(name):
    script = Script(_powershell_scripts.SCRIPTS[name])
    for parameter in script.parameters():
        uses = script.variables(parameter)
        assert uses, "%s declares $%s and never uses it" % (name, parameter)
        # every $Name in the text is a variable node of the grammar: none hides in a string or a comment
        assert len(uses) + 1 == script.mentions(parameter), (name, parameter)
        for chain in uses:
            assert "expandable_string_literal" not in chain and "expandable_here_string_literal" not in chain, (name, parameter)
            assert "command_name_expr" not in chain, "%s calls $%s" % (name, parameter)


@pytest.mark.parametrize("name", NAMES)
def test_no_text_runs_as_code(name):
    script = Script(_powershell_scripts.SCRIPTS[name])
    assert not DYNAMIC_COMMANDS & set(script.command_names()), name
    assert script.invocation_operators() == [], name
    assert not [call for call in script.static_calls() if call.endswith("::create") and "scriptblock" in call], name
    assert not [s for s in script.expandable_strings() if "$(" in script.text_of(s)], "%s runs code inside a string" % name
    for argument in script.command_arguments("Add-Type", "TypeDefinition"):
        assert argument.type in ("string_literal", "array_literal_expression") and "$" not in script.text_of(argument), name


@pytest.mark.parametrize("text, kind", [
    ("param([string]$Path)\nInvoke-Expression $Path\n", "command"),
    ("param([string]$Path)\n& $Path\n", "operator"),
    ("param([string]$Path)\n. $Path\n", "operator"),
    ("param([string]$Path)\n[scriptblock]::Create($Path)\n", "create"),
    ("param([string]$Path)\nWrite-Output \"$($Path)\"\n", "string"),
    ("param([string]$Path)\nWrite-Output \"x $Path\"\n", "string"),
    ("param([string]$Path)\nif ($Path -eq 'a' {\n", "syntax"),
])
def test_the_grammar_sees_what_the_rules_forbid(text, kind):
    script = Script(text)
    found = {
        "command": bool(DYNAMIC_COMMANDS & set(script.command_names())),
        "operator": bool(script.invocation_operators()),
        "create": "scriptblock::create" in script.static_calls(),
        "string": any("expandable_string_literal" in chain for chain in script.variables("path")),
        "syntax": bool(script.errors()),
    }
    assert found[kind], (kind, found)
    assert [k for k, v in found.items() if v and k != "syntax"] in ([kind], []) or kind == "syntax"
