# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""PCI bus ids, which NVML, nvidia-smi, the kernel log and sysfs each write their own way."""

from __future__ import annotations

import re

_BUS_ID_RE = re.compile(
    r"^(?:PCI:)?(?:(?P<domain>[0-9A-Fa-f]{1,8}):)?(?P<bus>[0-9A-Fa-f]{1,2}):(?P<device>[0-9A-Fa-f]{1,2})"
    r"(?:\.(?P<function>[0-7]))?$")


def normalize_bus_id(text):
    """Return a PCI bus id as "00000000:18:00.0" (8 hex domain digits, upper case), or None.

    Accepts "0000:18:00.0", "00000000:18:00.0", lower case, "18:00.0", the kernel's "0000:3b:00" (function 0
    assumed) and a "PCI:" prefix. Anything else (None, "N/A", garbage) gives None.
    """
    if text is None:
        return None
    match = _BUS_ID_RE.match(str(text).strip())
    if not match:
        return None
    domain = int(match.group("domain") or "0", 16)
    return "%08X:%02X:%02X.%s" % (domain, int(match.group("bus"), 16), int(match.group("device"), 16),
                                  match.group("function") or "0")
