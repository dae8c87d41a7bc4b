# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The circuit breaker's limits: whether it is on, and how many nodes may be out at once. Apart from _breaker.py so that
the roles' question "is the breaker on?" (the breaker_on filter) costs no import of the breaker's readers."""

from __future__ import annotations


def breaker_on(max_percent, max_count):
    """Whether the circuit breaker is on: either limit above 0. The roles read this answer, never the limits."""
    return max_percent > 0 or max_count > 0


def breaker_limit(fleet_size, max_percent, max_count):
    """How many nodes may be out at once (this one included), or None when the breaker is off (both limits 0).
    A share rounds down, and allows one node at least, as the fleet guard's does."""
    if not breaker_on(max_percent, max_count):
        return None
    limits = []
    if max_percent:
        limits.append(max(1, int(fleet_size * max_percent / 100)))
    if max_count:
        limits.append(max_count)
    return min(limits)
