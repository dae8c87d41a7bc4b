# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Text out of a Windows tool's output bytes, the encoding chosen by evidence in the bytes, never assumed.

wsl.exe writes UTF-16LE, with or without a BOM, and UTF-8 when WSL_UTF8=1; old inbox builds write every newline
as CR CR LF. Output that somebody already decoded as UTF-8 or Latin-1 arrives as text with a NUL after every
ASCII character: it is turned back into its bytes first.
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


def decode_transported(text):
    """DecodedText of a tool's output that win_command read as TRANSPORT_ENCODING.

    Without a BOM the text is the bytes, one character each: UTF-16LE shows by its NULs and is decoded by evidence,
    UTF-8 by decoding cleanly. A BOM made the reader decode the output itself: such text holds a character beyond
    U+00FF, or its bytes are no UTF-8, and it is kept as it is.
    """
    try:
        raw = text.encode(TRANSPORT_ENCODING)
    except UnicodeEncodeError:
        return DecodedText(normalize_newlines(text), "as win_command read it", False)
    if b"\x00" in raw:
        return decode_output(raw)
    try:
        return DecodedText(normalize_newlines(raw.decode("utf-8")), "utf-8", False)
    except UnicodeDecodeError:
        return DecodedText(normalize_newlines(text), "as win_command read it", False)
