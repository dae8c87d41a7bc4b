# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The event sources' throttle: one event per key within its window, and bounded memory however many keys the lines a
source reads may name (a file source reads lines that may name any GPU, MIG instance or Xid)."""

from __future__ import annotations

from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda._source_shared import Throttle
from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda._kernel_log_source import KernelLines

XID_LINE = "2026-11-30T10:00:00+00:00 node7 kernel: NVRM: Xid (PCI:0000:%02x:00 GPU-I:%02d GPU-CI:00): 31, pid=4242, name=train"


def test_a_repeat_within_the_window_is_dropped_and_one_after_it_is_taken():
    throttle = Throttle(300.0)
    assert throttle.allow(("node7", 31, "0000:18:00.0:3/0"), 1000.0)
    assert not throttle.allow(("node7", 31, "0000:18:00.0:3/0"), 1299.0)
    assert throttle.allow(("node7", 31, "0000:18:00.0:3/0"), 1300.0)


def test_keys_whose_window_passed_are_forgotten():
    throttle = Throttle(300.0)
    for number in range(50):
        assert throttle.allow(("node7", 31, number), 1000.0 + number)
    assert throttle.allow(("node7", 31, "late"), 1000.0 + 49 + 300.0)
    assert throttle.remembered() == 1


def test_a_flood_of_distinct_keys_within_the_window_stays_bounded_and_still_throttles_the_newest():
    throttle = Throttle(300.0, most_keys=100)
    for number in range(5000):
        assert throttle.allow(("node7", 31, number), 1000.0)
    assert throttle.remembered() == 100
    assert not throttle.allow(("node7", 31, 4999), 1001.0)
    # the oldest were forgotten first: a repeat of one of them is taken again
    assert throttle.allow(("node7", 31, 0), 1001.0)


def test_kernel_lines_naming_many_instances_keep_the_throttle_bounded():
    throttle = Throttle(300.0, most_keys=64)
    lines_of = KernelLines("node7", {}, throttle)
    lines = [XID_LINE % (bus, instance) for bus in range(1, 33) for instance in range(0, 14)]
    events = lines_of.feed(lines, 1796032800.0)
    assert len(events) == len(lines)
    assert throttle.remembered() == 64
    assert lines_of.feed([lines[-1]], 1796032801.0) == []
