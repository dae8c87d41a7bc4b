# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Small scans of node text that a pattern would backtrack over: each reads its input a bounded number of times; and
the patterns of node text's parsers compiled on first use (RegexOnFirstUse)."""

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


class RegexOnFirstUse:
    """A compiled pattern, compiled when first used: compile_it() is the re.compile call (written out, where
    tests/unit/plugins/test_linear_parsers.py finds it). For the parsers of text a snapshot seldom reads (the kernel log's
    NVRM lines, modprobe's errors), whose files every snapshot imports."""

    def __init__(self, compile_it):
        self._compile_it = compile_it
        self._pattern = None

    def __getattr__(self, name):
        if self._pattern is None:
            self._pattern = self._compile_it()
        return getattr(self._pattern, name)
