# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The modules' numeric limits their argument specs cannot say: one table, read by the modules (the snapshot's and the
kill's option checks, the walk's) and by the playbooks' input check (plugin_utils/_inputs.py), which names each limit
by the role variable that feeds the option."""

from __future__ import annotations

# {option: (within(value), what it must be)}
RANGES = {
    "probe_timeout": (lambda value: value > 0, "more than 0 seconds"),
    "kernel_log_window": (lambda value: value > 0, "a positive number of minutes"),
    "ghost_threshold_mib": (lambda value: value >= 0, "0 or more"),
    "grace": (lambda value: value > 0, "more than 0 seconds"),
    "kill_grace": (lambda value: value > 0, "more than 0 seconds"),
    "wait_timeout": (lambda value: value >= 0, "0 or more seconds"),
    "lock_timeout": (lambda value: value >= 0, "0 or more seconds"),
    "reload_grace": (lambda value: value >= 0, "0 or more seconds"),
    "snapshot_max_age": (lambda value: value >= 0, "0 or more seconds"),
    "health_check_timeout": (lambda value: value > 0, "more than 0 seconds"),
    "reboot_timeout": (lambda value: value > 0, "more than 0 seconds"),
    "job_timeout": (lambda value: value >= 0, "0 or more seconds"),
    "stale_drain_after": (lambda value: value >= 0, "0 or more seconds"),
    "max_percent": (lambda value: 0 <= value <= 100, "0..100"),
    "max_count": (lambda value: value >= 0, "0 or more"),
    "window_minutes": (lambda value: value >= 1, "1 or more"),
    "webhook_timeout": (lambda value: value > 0, "more than 0 seconds"),
}


def within(option, value):
    """Whether the number `value` is inside `option`'s range (an option without one always is)."""
    check = RANGES.get(option)
    return check is None or check[0](value)


def range_of(option):
    """What `option` must be, in words."""
    return RANGES[option][1]
