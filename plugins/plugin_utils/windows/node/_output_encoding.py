# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Text out of a Windows tool's output bytes, the encoding chosen by evidence in the bytes and the host's OEM code page.

wsl.exe writes UTF-16LE, with or without a BOM, and UTF-8 when WSL_UTF8=1; old inbox builds write every newline
as CR CR LF. Output that somebody already decoded as UTF-8 or Latin-1 arrives as text with a NUL after every
ASCII character: it is turned back into its bytes first. quser, taskkill, pnputil and tasklist write the console's
OEM code page (850 on a Western European host, 866 Russian, 932 Japanese): decode_transported is given the host's
(TargetNode reads it once, from the registry's OEMCP). What the text says is kept for the report; exit codes and CIM
properties decide.
"""

from __future__ import annotations

import codecs
from collections import namedtuple

DecodedText = namedtuple("DecodedText", "text encoding lossy")


def decode_output(data, fallback_encoding=None):
    """DecodedText(text, encoding, lossy) of `data` (bytes or already-decoded str), newlines made "\\n".

    `encoding` names what the evidence showed: "utf-16-le-bom", "utf-16-le", "utf-8-bom", "utf-8" or the
    `fallback_encoding` (the target's code page) for bytes that are neither; without one, such bytes are tried as
    UTF-16LE without a single ASCII character (a Japanese sentence with its newline cut). `lossy` is True when
    characters could not be recovered (replaced by U+FFFD).
    """
    if isinstance(data, str):
        return _redecode_text(data, fallback_encoding)
    text, encoding, lossy = _decode_bytes(bytes(data), fallback_encoding)
    return DecodedText(normalize_newlines(text), encoding, lossy)


def normalize_newlines(text):
    """CR CR LF (old wsl.exe), CR LF and lone CR all become LF."""
    return text.replace("\r\r\n", "\n").replace("\r\n", "\n").replace("\r", "\n")


def _redecode_text(text, fallback_encoding):
    if "\x00" not in text:
        return DecodedText(normalize_newlines(text), "text", False)
    try:
        raw = text.encode("latin-1")
    except UnicodeEncodeError:
        # Read as UTF-8 with replacement: the non-ASCII characters are gone, the ASCII ones remain between the NULs.
        return DecodedText(normalize_newlines(text.replace("\x00", "")), "utf-16-le (read as text)", True)
    decoded = decode_output(raw, fallback_encoding)
    return DecodedText(decoded.text, decoded.encoding + " (read as text)", decoded.lossy)


def _decode_bytes(data, fallback_encoding):
    if data.startswith(codecs.BOM_UTF16_LE):
        return _utf16le(data[len(codecs.BOM_UTF16_LE):], "utf-16-le-bom")
    if data.startswith(codecs.BOM_UTF8):
        return _strict_or_replaced(data[len(codecs.BOM_UTF8):], "utf-8", "utf-8-bom")
    if _looks_utf16le(data):
        return _utf16le(data, "utf-16-le")
    try:
        return data.decode("utf-8"), "utf-8", False
    except UnicodeDecodeError:
        pass
    if fallback_encoding:
        return _strict_or_replaced(data, fallback_encoding, fallback_encoding)
    if len(data) % 2 == 0:
        try:
            # Text without a single ASCII character (a Japanese sentence): not UTF-8, but valid UTF-16LE.
            return data.decode("utf-16-le"), "utf-16-le", False
        except UnicodeDecodeError:
            pass
    return _strict_or_replaced(data, "utf-8", "utf-8")


def _looks_utf16le(data):
    """NULs, mostly at odd offsets: no text in UTF-8 or a code page has a NUL, UTF-16LE has one per ASCII character
    (its newline included)."""
    odd_nuls = data[1::2].count(0)
    return odd_nuls > 0 and odd_nuls > data[0::2].count(0)


def _utf16le(data, name):
    lossy = len(data) % 2 == 1
    text = data[:len(data) - len(data) % 2].decode("utf-16-le", "replace")
    return text, name, lossy or "\ufffd" in text


def _strict_or_replaced(data, codec, name):
    try:
        return data.decode(codec), name, False
    except UnicodeDecodeError:
        return data.decode(codec, "replace"), name, True


# win_command's reader decodes with output_encoding_override, and switches on a BOM: ISO-8859-1 maps each byte to one
# character, so the bytes come back whole and are decoded here by evidence.
TRANSPORT_ENCODING = "iso-8859-1"
# The OEM code page of an English (United States) Windows: what console tools write where the host's own is not known.
DEFAULT_OEM_CODE_PAGE = 437


def oem_codec(code_page):
    """The Python codec of a Windows code page number (the registry's OEMCP, "850" or 850), or None when Python has none."""
    try:
        number = int(str(code_page).strip())
    except (TypeError, ValueError):
        return None
    name = "utf-8" if number == 65001 else "cp%d" % number
    try:
        return codecs.lookup(name).name
    except LookupError:
        return None


# Tools that write no code page: wsl.exe writes UTF-16LE (or UTF-8 with WSL_UTF8=1; with a BOM win_command has
# decoded it already, and its text may hold U+0080..U+00FF characters that are no code page's bytes); nvidia-smi's XML
# is UTF-8 (its declaration names no other encoding).
UNICODE_TOOLS = frozenset(("wsl", "nvidia-smi"))


def writes_code_page(program):
    """Whether `program` (argv[0]: a name or a path, any case, with or without .exe) writes the OEM code page."""
    base = str(program).replace("/", "\\").rsplit("\\", 1)[-1].lower()
    return (base[:-4] if base.endswith(".exe") else base) not in UNICODE_TOOLS


def needs_code_page(text):
    """Whether transported output is text in a code page: bytes beyond ASCII and no NUL (UTF-16). Only then is the
    host's OEM code page asked for (some code pages' bytes happen to be valid UTF-8: "\u0442\u0438\u0431" in 866)."""
    try:
        raw = text.encode(TRANSPORT_ENCODING)
    except UnicodeEncodeError:
        return False
    return b"\x00" not in raw and max(raw or b"\x00") >= 0x80


def decode_transported(text, oem_code_page=None, unicode_only=False):
    """DecodedText of a tool's output that win_command read as TRANSPORT_ENCODING.

    Without a BOM the text is the bytes, one character each: UTF-16LE shows by its NULs and is decoded by evidence;
    any other bytes beyond ASCII are the console tools' own encoding, the host's OEM code page (`oem_code_page`, as
    the registry's OEMCP gives it). Where it is not known, bytes that decode as UTF-8 are taken for it, others for code
    page 437 (which the encoding then says). A BOM made the reader decode the output itself: such text holds a
    character beyond U+00FF and is kept as it is; for a tool that writes no code page (`unicode_only`: wsl.exe,
    nvidia-smi), text that is neither UTF-16 nor UTF-8 is such text too.
    """
    try:
        raw = text.encode(TRANSPORT_ENCODING)
    except UnicodeEncodeError:
        return DecodedText(normalize_newlines(text), "as win_command read it", False)
    if b"\x00" in raw:
        return decode_output(raw)
    codec = oem_codec(oem_code_page) if oem_code_page is not None and not unicode_only else None
    if codec is None or max(raw or b"\x00") < 0x80:
        try:
            return DecodedText(normalize_newlines(raw.decode("utf-8")), "utf-8", False)
        except UnicodeDecodeError:
            if unicode_only:
                return DecodedText(normalize_newlines(text), "as win_command read it", False)
    name = "cp%s (OEM code page)" % str(oem_code_page).strip()
    if codec is None:
        codec = oem_codec(DEFAULT_OEM_CODE_PAGE)
        name = "cp%d (the host's OEM code page not known%s)" % (
            DEFAULT_OEM_CODE_PAGE, "" if oem_code_page is None else ": %r has no codec" % (oem_code_page,))
    decoded, dummy, lossy = _strict_or_replaced(raw, codec, name)
    return DecodedText(normalize_newlines(decoded), name, lossy)
