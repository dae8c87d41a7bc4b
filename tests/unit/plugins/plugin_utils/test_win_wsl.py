# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""_wsl_cli: wsl.exe's lists (captures in fixtures/windows/wsl, as UTF-16LE bytes) and its stop commands."""

from __future__ import annotations

import codecs

import pytest

from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.tools import _wsl_cli
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node._output_encoding import decode_output


def as_wsl_writes(text, bom=False):
    """The bytes wsl.exe writes for `text`: UTF-16LE, CR LF, a BOM or not."""
    raw = text.replace("\n", "\r\n").encode("utf-16-le")
    return codecs.BOM_UTF16_LE + raw if bom else raw


def no_running_sentences(captures):
    lines = captures.text("windows", "wsl", "no-running-distributions-message-by-locale-resw.tsv").splitlines()[1:]
    return dict(line.split("\t") for line in lines)


def test_an_old_wsl_that_prints_its_usage_is_not_a_list(captures):
    text = decode_output(captures.bytes("windows", "wsl", "l-old-build-usage-fr-utf16le-truncated.bin")).text
    assert _wsl_cli.parse_list(text, 1).status == "unrecognised"
    assert _wsl_cli.parse_list(text, 0).status == "unrecognised"  # not names, whatever the exit status


@pytest.mark.parametrize("rc", [-1, 0xFFFFFFFF])
def test_nothing_running_in_every_language_wsl_ships_is_decided_by_the_exit_and_the_process_list(captures, rc):
    sentences = no_running_sentences(captures)
    assert len(sentences) == 13
    for locale, sentence in sentences.items():
        for bom in (True, False):
            text = decode_output(as_wsl_writes(sentence + "\n", bom)).text
            assert _wsl_cli.parse_list(text, rc, vm_running=False) == (_wsl_cli.WslList("ok", [], sentence)), locale
            # the same words while a WSL VM runs conclude nothing: the words never decide
            assert _wsl_cli.parse_list(text, rc, vm_running=True).status == "unrecognised", locale
            assert _wsl_cli.parse_list(text, rc).status == "unrecognised", locale


def test_a_sentence_in_a_language_no_table_has_is_read_by_the_exit_and_the_process_list():
    assert _wsl_cli.parse_list("Il n'y a rien.\n", -1, vm_running=False) == ("ok", [], "Il n'y a rien.")
    listing = _wsl_cli.parse_list("Il n'y a rien.\n", -1, vm_running=True)
    assert listing.status == "unrecognised" and "Il n'y a rien." in listing.message


def test_an_old_wsl_printing_its_usage_with_no_vm_running_is_nothing_running(captures):
    text = decode_output(captures.bytes("windows", "wsl", "l-old-build-usage-fr-utf16le-truncated.bin")).text
    assert _wsl_cli.parse_list(text, 1, vm_running=False).distributions == []


def test_the_quiet_running_list_is_names_or_nothing_with_exit_0():
    assert _wsl_cli.parse_list(decode_output(as_wsl_writes("Ubuntu\ndocker-desktop\n")).text, 0) == (
        "ok", ["Ubuntu", "docker-desktop"], None)
    assert _wsl_cli.parse_list("", 0) == ("ok", [], None)


def test_a_non_quiet_list_with_its_localized_header_is_not_taken_for_names():
    assert _wsl_cli.parse_list("Windows Subsystem for Linux Distributions:\nUbuntu (Default)\n", 0).status == "unrecognised"


def test_list_argv_is_the_language_neutral_quiet_form():
    assert _wsl_cli.list_argv() == ["wsl.exe", "--list", "--quiet"]
    assert _wsl_cli.list_argv(_wsl_cli.STORE_WSL_PATH, running=True) == [
        "C:\\Program Files\\WSL\\wsl.exe", "--list", "--running", "--quiet"]


def test_terminate_one_distribution_and_shutdown_all():
    assert _wsl_cli.terminate_argv("Ubuntu-18.04") == ["wsl.exe", "--terminate", "Ubuntu-18.04"]
    assert _wsl_cli.shutdown_argv(_wsl_cli.STORE_WSL_PATH) == ["C:\\Program Files\\WSL\\wsl.exe", "--shutdown"]


@pytest.mark.parametrize("name", ["--shutdown", "-u", "", "Ubuntu; wsl --shutdown", "a b", "Ubuntu\n", "x\x00",
                                  "'; Remove-Item -Recurse C:\\ #", None, 3])
def test_terminate_refuses_what_is_no_distribution_name(name):
    with pytest.raises(ValueError, match="not a WSL distribution name"):
        _wsl_cli.terminate_argv(name)


def test_wsl_exe_s_exit_and_words_are_kept_for_the_report_only():
    # what a stop did is read from the facts after it (_wsl_shutdown); the exit and the words only go in the report
    assert _wsl_cli.exit_report(0, "") is None
    assert _wsl_cli.exit_report(0, "The operation completed successfully.\n") == "wsl.exe exited 0: The operation completed successfully."
    assert _wsl_cli.exit_report(-1, "There is no distribution with the supplied name.\n").startswith("wsl.exe exited -1: ")
