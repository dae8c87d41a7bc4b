# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""_output_encoding: the encoding of a Windows tool's output chosen by evidence (captures in fixtures/windows/wsl)."""

from __future__ import annotations

import codecs
import re

import pytest

from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node._output_encoding import decode_output

VERBOSE = ("windows", "wsl", "list-verbose-mixed-v1-v2.txt")
JAPANESE = "実行中のディストリビューションはありません。"


def crlf(text):
    return text.replace("\n", "\r\n")


def test_the_raw_old_wsl_bytes_are_utf16le_without_bom_and_cr_cr_lf_becomes_one_newline(captures):
    decoded = decode_output(captures.bytes("windows", "wsl", "l-old-build-usage-fr-utf16le-truncated.bin"))
    assert decoded.encoding == "utf-16-le" and not decoded.lossy
    assert decoded.text.startswith("\nCopyright (c) Microsoft Corporation. Tous droits réservés.\n\nUtilisation\xa0: wsl.exe")
    assert "\r" not in decoded.text and "\x00" not in decoded.text


def test_the_go_quoted_capture_unescaped_is_the_raw_bytes(captures):
    quoted = captures.text("windows", "wsl", "l-old-build-usage-fr-utf16le-go-quoted-truncated.txt")
    body = re.sub(r"\\x[0-9a-f]?$", "", quoted.split(': "', 1)[1].rstrip("\n"))  # cut where the issue text was cut
    unescaped = codecs.escape_decode(body)[0]
    raw = captures.bytes("windows", "wsl", "l-old-build-usage-fr-utf16le-truncated.bin")
    assert unescaped[:len(raw)] == raw and raw.count(b"\r\x00\r\x00\n\x00") >= 4


@pytest.mark.parametrize("encode, encoding", [
    (lambda text: codecs.BOM_UTF16_LE + crlf(text).encode("utf-16-le"), "utf-16-le-bom"),
    (lambda text: crlf(text).encode("utf-16-le"), "utf-16-le"),
    (lambda text: text.encode("utf-8"), "utf-8"),  # WSL_UTF8=1
    (lambda text: codecs.BOM_UTF8 + crlf(text).encode("utf-8"), "utf-8-bom"),
])
def test_a_capture_round_trips_through_each_encoding_wsl_writes(captures, encode, encoding):
    text = captures.text(*VERBOSE)
    decoded = decode_output(encode(text))
    assert decoded.text == text and decoded.encoding == encoding and not decoded.lossy


def test_utf16_read_as_bytes_into_text_keeps_its_nuls_and_is_recovered(captures):
    text = captures.text(*VERBOSE)
    as_latin1 = crlf(text).encode("utf-16-le").decode("latin-1")
    assert "\x00" in as_latin1
    decoded = decode_output(as_latin1)
    assert decoded.text == text and decoded.encoding == "utf-16-le (read as text)" and not decoded.lossy


def test_utf16_read_as_utf8_with_replacement_loses_only_its_non_ascii(captures):
    sentence = "Es werden keine Distributionen ausgeführt.\r\n"
    mangled = sentence.encode("utf-16-le").decode("utf-8", "replace")
    decoded = decode_output(mangled)
    assert decoded.lossy and decoded.text.startswith("Es werden keine Distributionen ausgef")


@pytest.mark.parametrize("with_newline", [True, False])
def test_a_sentence_without_any_ascii_is_still_found_to_be_utf16le(with_newline):
    sentence = JAPANESE + ("\r\n" if with_newline else "")
    decoded = decode_output(sentence.encode("utf-16-le"))
    assert decoded.text.strip() == JAPANESE and decoded.encoding == "utf-16-le"


def test_the_same_sentence_in_utf8_stays_utf8():
    assert decode_output(JAPANESE.encode("utf-8")) == (JAPANESE, "utf-8", False)


def test_an_odd_length_utf16_output_is_decoded_and_marked_lossy(captures):
    raw = captures.bytes("windows", "wsl", "l-old-build-usage-fr-utf16le-truncated.bin") + b"\x4c"
    decoded = decode_output(raw)
    assert decoded.encoding == "utf-16-le" and decoded.lossy and "Copyright" in decoded.text


def test_bytes_that_are_neither_take_the_given_code_page():
    german_cp850 = "FEHLER: Argument/Option ungültig".encode("cp850")
    assert decode_output(german_cp850, fallback_encoding="cp850") == ("FEHLER: Argument/Option ungültig", "cp850", False)


def test_nothing_decodes_to_nothing():
    assert decode_output(b"") == ("", "utf-8", False)
    assert decode_output("") == ("", "text", False)
