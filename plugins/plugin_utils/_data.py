# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Plain JSON data out of what Ansible hands an action plugin."""

from __future__ import annotations

from collections.abc import Mapping


def plain(value):
    """Task arguments and host variables as plain dicts, lists and str (Ansible hands out templated, tagged containers)."""
    if isinstance(value, Mapping):
        return dict((str(key), plain(item)) for key, item in value.items())
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    if isinstance(value, str):
        return str(value)
    return value
