# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Text from a node (process names, command lines, units, users, messages, Slurm reasons) made safe for where it goes.

One helper per format, and every writer uses them: `printable` (a console line, a log line), `markdown` (Markdown
text: a table cell, a list item, a heading), `markdown_code` (a code span) and `html_text` (HTML text and quoted
attribute values). A name is always text: it never starts a line, never opens a heading, a list, a link, an image, a
table cell or an HTML tag, and its control characters (ESC, CR, NUL, newlines) and the invisible characters that
reorder or hide text (U+202E and the other bidirectional controls, zero-width characters) are shown as escapes
(`\\x1b`, `\\u202e`), never written.
"""

from __future__ import annotations

import html
import unicodedata

# Characters never written as they are, by their Unicode category: controls (C0, C1, DEL: Cc), format characters (Cf:
# the bidirectional controls - an U+202E makes "exe.txt" read "txt.exe" - zero-width characters, the byte-order mark, the
# soft hyphen, tag characters), the line and paragraph separators (Zl, Zp) and lone surrogates (Cs: undecodable bytes).
_INVISIBLE_CATEGORIES = frozenset(("Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"))

# Markdown's inline markup: escaped wherever it stands (a backslash escape, or an entity for what HTML reads).
_MARKDOWN_ALWAYS = {"\\": "\\\\", "`": "\\`", "*": "\\*", "[": "\\[", "]": "\\]", "|": "\\|", "~": "\\~",
                    "<": "&lt;", "&": "&amp;"}  # with no "<", a ">" only matters at the start (a quote)
# What opens a block when it starts the text (the text may follow "- " or "| " in a writer's line): escaped there.
_MARKDOWN_BLOCK_START = "#>+-=:!"


def _escape_char(char):
    code = ord(char)
    if code < 0x100:
        return "\\x%02x" % code
    return "\\u%04x" % code if code < 0x10000 else "\\U%08x" % code


def _invisible(char):
    return not " " <= char <= "~" and unicodedata.category(char) in _INVISIBLE_CATEGORIES


def printable(value):
    """`value` as one line of plain text: every control and invisible character shown as an escape (`\\x1b`, `\\n`
    as `\\x0a`, `\\u202e`); None is the empty string. For the console, log lines and plan lines."""
    if value is None:
        return ""
    text = value if isinstance(value, str) else str(value)
    return "".join(_escape_char(char) if _invisible(char) else char for char in text)


def _word_char(text, at):
    return 0 <= at < len(text) and text[at].isalnum()


def markdown(value):
    """`value` as Markdown text that stays text wherever a writer puts it on a line: printable first, then no inline
    markup (code spans, emphasis, links and images, raw HTML, table pipes) and no block markup at its start."""
    text = printable(value)
    out = []
    for at, char in enumerate(text):
        if char in _MARKDOWN_ALWAYS:
            out.append(_MARKDOWN_ALWAYS[char])
        elif char == "_" and not (_word_char(text, at - 1) and _word_char(text, at + 1)):
            out.append("\\_")  # an underscore inside a word (pt_main_thread) is no emphasis and stays as it is
        else:
            out.append(char)
    escaped = "".join(out)
    stripped = escaped.lstrip(" ")
    lead = "&#32;" * (len(escaped) - len(stripped))  # indentation would make a code block of the rest
    if stripped[:1] and stripped[0] in _MARKDOWN_BLOCK_START:
        stripped = "\\" + stripped
    else:
        digits = len(stripped) - len(stripped.lstrip("0123456789"))
        if digits and stripped[digits:digits + 1] in (".", ")") and stripped[digits + 1:digits + 2] in ("", " ", "\t"):  # "1. " opens a list
            stripped = stripped[:digits] + "\\" + stripped[digits:]
    return lead + stripped


def markdown_code(value):
    """`value` as a Markdown code span (`...`), fenced with more backticks than it holds; printable inside."""
    text = printable(value)
    longest, run = 0, 0
    for char in text:
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return "%s%s%s%s%s" % (fence, pad, text, pad, fence)


def html_text(value):
    """`value` as HTML text or a quoted attribute value: printable, then every <, >, &, " and ' escaped."""
    return html.escape(printable(value), quote=True)
