# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Plain JSON data out of what Ansible hands an action plugin, the same on every supported ansible-core (2.16 to 2.19):
the one place that knows how they differ. 2.19 hands out tagged containers and reads AWX's empty survey answer
(`!unsafe ''`) as None; 2.16 to 2.18 hand out AnsibleUnsafeText, '' for that answer, which becomes None here too."""

from __future__ import annotations

from collections.abc import Mapping


def _unsafe(value):
    # ansible-core 2.16 to 2.18 mark a !unsafe string by its class (ansible.utils.unsafe_proxy.AnsibleUnsafe).
    return bool(getattr(type(value), "__UNSAFE__", False))


def plain(value):
    """Task arguments and host variables as plain dicts, lists and str (Ansible hands out templated, tagged containers);
    an empty !unsafe string, AWX's empty answer, as None, as ansible-core 2.19 reads it."""
    if isinstance(value, Mapping):
        return dict((_text(key), plain(item)) for key, item in value.items())
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    if isinstance(value, str):
        return None if value == "" and _unsafe(value) else _text(value)
    return value


def _text(value):
    # str() of 2.16's AnsibleUnsafeText is itself; str.__str__ gives the plain str of any subclass.
    return str.__str__(value) if isinstance(value, str) else str(value)


def templated(action, value):
    """value (host variables an action plugin reads itself) templated by the action's templar, as plain data."""
    return plain(action._templar.template(value))
