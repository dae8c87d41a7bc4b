# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""When the snapshot reads every process's memory maps (_snapshot.memory_maps_tier)."""

from __future__ import annotations

import pytest

from ansible_collections.gpuops.remediation.plugins.module_utils._snapshot import memory_maps_tier

OK = {"ok": True}


def _gpu(index, used, *processes):
    return {"index": index, "memory_used_mib": used,
            "processes": [{"pid": 100 + number, "type": "C", "used_mib": mib} for number, mib in enumerate(processes)]}


def test_a_healthy_node_skips_the_maps_and_says_why():
    scanned, why = memory_maps_tier("auto", [_gpu(0, 2048 + 100, 2048), _gpu(1, 0)], OK, 256)
    assert not scanned
    assert "account for the memory in use on every GPU" in why


def test_ghost_memory_beyond_the_threshold_reads_every_map_naming_the_gpu():
    scanned, why = memory_maps_tier("auto", [_gpu(0, 100), _gpu(1, 4096 + 1024, 1024)], OK, 256)
    assert scanned
    assert why == "GPU 1 has 4096 MiB in use that no process the driver lists accounts for"


def test_ghost_memory_at_the_threshold_is_not_ghost():
    assert not memory_maps_tier("auto", [_gpu(0, 256)], OK, 256)[0]


@pytest.mark.parametrize("gpus, report, words", [
    ([_gpu(0, 1024, None)], OK, "does not say how much memory each of its processes uses"),
    ([_gpu(0, None)], OK, "does not say how much memory"),
    ([], {"ok": False}, "the driver did not answer"),
])
def test_unknown_memory_reads_every_map(gpus, report, words):
    scanned, why = memory_maps_tier("auto", gpus, report, 256)
    assert scanned
    assert words in why


def test_asked_for_and_acting_read_every_map_never_reads_none():
    ghost = [_gpu(0, 8192)]
    assert memory_maps_tier("always", [_gpu(0, 0)], OK, 256) == (True, "asked for (scan_memory_maps=always)")
    assert memory_maps_tier("acting", [_gpu(0, 0)], OK, 256)[0]
    assert memory_maps_tier("never", ghost, OK, 256) == (False, "not asked for (scan_memory_maps=never)")
