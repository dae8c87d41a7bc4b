# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Small scans of node text that a pattern would backtrack over: each reads its input a bounded number of times."""

from __future__ import annotations


def without_trailing_brackets(text):
    """`text` less a trailing "[...]" and the whitespace before it ("used_gpu_memory [MiB]" -> "used_gpu_memory", a
    kernel line's head "kernel: [ 123.456]" -> "kernel:"), else `text` as it is. The "[...]" is the one from the first
    "[" after the last "]" before the closing one, as the pattern r"\\s*\\[[^\\]]*\\]\\s*$" reads it; a pattern takes time
    quadratic in a run of "[" (each one a new start), this takes two scans."""
    stripped = text.rstrip()
    if not stripped.endswith("]"):
        return text
    opening = stripped.find("[", stripped.rfind("]", 0, len(stripped) - 1) + 1, len(stripped) - 1)
    return stripped[:opening].rstrip() if opening >= 0 else text
