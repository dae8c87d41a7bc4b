# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Counted words in messages for people: "1 host", "3 hosts"."""

from __future__ import annotations


def plural(count, word):
    """The count and the word, in the plural unless it is one."""
    return "%d %s%s" % (count, word, "" if count == 1 else "s")
