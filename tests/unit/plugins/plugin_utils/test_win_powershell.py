# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""_win_powershell: every value stays one literal, proved with a tokenizer of PowerShell's quoting rules.

The tokenizer knows what PowerShell's own does with quotes: a single-quoted string ends at any of ' U+2018 U+2019
U+201A U+201B, two of them in a row are one literal quote, and nothing inside is expanded. Anything outside a
string that is not a plain word is code.
"""

from __future__ import annotations

import pytest

from ansible_collections.gpuops.remediation.plugins.plugin_utils import _win_pnputil, _win_taskkill, _win_wsl
from ansible_collections.gpuops.remediation.plugins.plugin_utils._win_powershell import array_literal, call_line, literal

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


@pytest.mark.parametrize("name", HOSTILE)
def test_a_hostile_name_in_a_call_line_and_an_array_stays_one_literal(name):
    assert tokenize(call_line(["tasklist.exe", "/FI", "IMAGENAME eq %s" % name])) == [
        ("call", "&"), ("string", "tasklist.exe"), ("string", "/FI"), ("string", "IMAGENAME eq %s" % name)]
    assert tokenize(array_literal([name, name])) == [("punct", "@("), ("string", name), ("punct", ","),
                                                     ("string", name), ("punct", ")")]


def test_every_command_builder_gives_a_line_of_literals_only():
    argvs = [_win_taskkill.taskkill_argv(4242), _win_wsl.terminate_argv("Ubuntu-18.04"),
             _win_wsl.shutdown_argv(_win_wsl.STORE_WSL_PATH), _win_wsl.list_argv(running=True),
             _win_pnputil.restart_device_argv("PCI\\VEN_10DE&DEV_1E93&SUBSYS_12BC1462&REV_A1\\4&443bd0d&0&0008")]
    for argv in argvs:
        assert tokenize(call_line(argv)) == [("call", "&")] + [("string", argument) for argument in argv]


@pytest.mark.parametrize("name", HOSTILE)
def test_builders_refuse_hostile_names_before_any_quoting(name):
    with pytest.raises(ValueError):
        _win_wsl.terminate_argv(name)
    with pytest.raises(ValueError):
        _win_pnputil.restart_device_argv(name)


def test_the_quote_characters_are_doubled_and_integers_quoted():
    assert literal("it's") == "'it''s'"
    assert literal("\u2019") == "'\u2019\u2019'"
    assert literal(4242) == "'4242'"


@pytest.mark.parametrize("value", ["a\x00b", "\x00", True, None, 1.5, ["a"], b"bytes"])
def test_nul_and_other_types_are_refused(value):
    with pytest.raises(ValueError):
        literal(value)


def test_an_empty_argv_is_refused():
    with pytest.raises(ValueError, match="empty argv"):
        call_line([])
