# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""PowerShell literals: any value that reaches a script line goes as a single-quoted string, never as code.

Inside '...' PowerShell expands nothing ($, `, " and newlines are plain characters) and ends the string at any of
five single-quote characters: the ASCII one and U+2018..U+201B. Each of them is doubled, which PowerShell reads as
one literal quote. A NUL cannot be passed to a Windows process at all: refused.
"""

from __future__ import annotations

import re

SINGLE_QUOTES = "'\u2018\u2019\u201a\u201b"
_SINGLE_QUOTE_RE = re.compile("([%s])" % SINGLE_QUOTES)


def literal(value):
    """`value` (str or int) as a PowerShell single-quoted literal; ValueError for NUL or another type."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ValueError("only text or an integer can become a PowerShell literal, not %r" % (value,))
    text = str(value)
    if "\x00" in text:
        raise ValueError("a NUL cannot be passed to PowerShell: %r" % (text,))
    return "'" + _SINGLE_QUOTE_RE.sub(r"\1\1", text) + "'"
