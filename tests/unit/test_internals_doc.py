# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""docs/internals.md names every private file of the collection, and only files that exist."""

import glob
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PRIVATE = sorted(os.path.basename(path) for pattern in ("plugins/module_utils/**/_*.py", "plugins/plugin_utils/**/_*.py")
                 for path in glob.glob(os.path.join(ROOT, pattern), recursive=True) if not path.endswith("__init__.py"))


def internals():
    with open(os.path.join(ROOT, "docs", "internals.md")) as handle:
        return handle.read()


def test_every_private_file_is_named():
    text = internals()
    assert [name for name in PRIVATE if "`%s`" % name not in text and "%s`" % name not in text] == []


def test_every_file_named_exists():
    named = set(os.path.basename(name) for name in re.findall(r"`(?:[\w/]*/)?(_[a-z0-9_]+\.py)`", internals()))
    assert sorted(named - set(PRIVATE)) == []
