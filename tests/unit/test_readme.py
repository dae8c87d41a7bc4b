# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The README agrees with the code: its module table names exactly the modules of plugins/modules, and it says
what has never met real hardware, pointing to docs/windows.md and the device check."""

import glob
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _readme():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as handle:
        return handle.read()


def _section(text, title):
    return text.split("\n## %s\n" % title, 1)[1].split("\n## ", 1)[0]


def test_the_module_table_is_plugins_modules():
    rows = [line for line in _section(_readme(), "Modules").splitlines() if line.startswith("| `")]
    named = [re.match(r"\| `([a-z_0-9]+)`", row).group(1) for row in rows]
    modules = sorted(os.path.basename(path)[:-3] for path in glob.glob(os.path.join(ROOT, "plugins", "modules", "*.py"))
                     if not path.endswith("__init__.py"))
    assert len(named) == len(set(named)), "a module named twice"
    assert sorted(named) == modules


def test_the_readme_says_what_never_met_real_hardware():
    section = _section(_readme(), "What has never met real hardware")
    assert "docs/windows.md" in section and "tests/device/README.md" in section
    for rung in ("reset", "reload", "graphics", "reboot"):
        assert rung in section


def test_d_state_is_said_one_way():
    """Uninterruptible sleep is no reason to leave a process alone (docs/safety.md); no doc says it is never signalled."""
    texts = [_readme()] + [open(path, encoding="utf-8").read() for path in glob.glob(os.path.join(ROOT, "docs", "*.md"))]
    texts += [open(os.path.join(ROOT, "plugins", "modules", "gpu_kill.py"), encoding="utf-8").read()]
    for text in texts:
        flat = " ".join(text.split())
        assert not re.search(r"uninterruptible sleep[^.]{0,200}(are|is) never signalled", flat)
        assert not re.search(r"in uninterruptible sleep \(reported as unkillable", flat)
        assert "a process in D state: reboot" not in flat
