# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The watch's numbers that its argument spec cannot bound: one table, read by the module gpu_watch and by the
playbooks' input check (plugin_utils/_inputs.py), which names them as the role gpu_watch's variables."""

from __future__ import annotations

# (option, within(value), what it must be)
RANGES = (
    ("samples", lambda value: value >= 1, "at least 1"),
    ("interval", lambda value: value >= 0, "0 or more seconds"),
    ("high_usage_percent", lambda value: 0 < value <= 100, "more than 0 and at most 100"),
    ("high_usage_minutes", lambda value: value > 0, "more than 0 minutes"),
    ("ghost_samples", lambda value: value >= 1, "at least 1"),
    ("state_max_age_minutes", lambda value: value > 0, "more than 0 minutes"),
    ("lock_timeout", lambda value: value >= 0, "0 or more seconds"),
)
RANGED_OPTIONS = tuple(option for option, dummy_within, dummy_what in RANGES)


def out_of_range(option, value):
    """What `option` must be when the number `value` is outside its range; None when it is inside (or has no range)."""
    for name, within, what in RANGES:
        if name == option and not within(value):
            return what
    return None
