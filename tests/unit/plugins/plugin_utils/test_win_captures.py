# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every Windows capture has its source line and is read by a test of its parser."""

from __future__ import annotations

import glob
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def windows_captures(captures):
    root = captures.path("windows")
    return sorted(os.path.relpath(path, root) for path in glob.glob(os.path.join(root, "*", "*")))


def test_every_capture_has_a_source_line(captures):
    sources = captures.text("windows", "SOURCES.md")
    missing = [name for name in windows_captures(captures) if "- `%s` |" % name not in sources]
    assert windows_captures(captures) and missing == []


def test_every_capture_is_read_by_a_test(captures):
    tests = ""
    for path in glob.glob(os.path.join(HERE, "test_win_*.py")):
        with open(path, encoding="utf-8") as handle:
            tests += handle.read()
    unread = [name for name in windows_captures(captures) if os.path.basename(name) not in tests]
    assert unread == []
