# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The graphics rung's decisions: when a restart is needed, and who outlived it."""

from ansible_collections.gpuops.remediation.plugins.module_utils._action import memory_before_after
from ansible_collections.gpuops.remediation.plugins.module_utils._verdict import node_reset_evidence
from ansible_collections.gpuops.remediation.plugins.modules.gpu_graphics_restart import graphics_holders, restart_reason, survivors


def gpu(index, used=1000, ghost=0):
    return {"index": index, "memory_used_mib": used, "unattributed_mib": ghost, "recovery_action": None}


def holder(pid, cls, gpus, start_time=None):
    return {"pid": pid, "start_time": start_time or pid * 10, "name": "p%d" % pid, "class": cls, "gpus": gpus}


def snapshot(gpus, holders=(), xid_events=()):
    return {"gpus": list(gpus), "holders": list(holders), "xid_events": list(xid_events)}


def test_ghost_memory_on_the_display_servers_gpu_asks_for_a_restart():
    node = snapshot([gpu(0, ghost=3072), gpu(1)], [holder(10, "graphics_session", [0]), holder(11, "compute", [1])])
    held = graphics_holders(node)
    assert [h["pid"] for h in held] == [10]
    assert restart_reason(node, held, [0, 1], 256, force=False) == ("3072 MiB of ghost memory on GPU 0", None)


def test_ghost_memory_on_a_gpu_the_graphics_stack_does_not_hold_is_no_reason():
    node = snapshot([gpu(0), gpu(1, ghost=3072)], [holder(10, "graphics_session", [0])])
    reason, why_not = restart_reason(node, graphics_holders(node), [0, 1], 256, force=False)
    assert reason is None
    assert "no stuck memory on a GPU the graphics stack holds (GPU 0)" in why_not


def test_the_gpus_option_narrows_the_evidence():
    node = snapshot([gpu(0, ghost=3072), gpu(1)], [holder(10, "graphics_session", [0, 1])])
    reason, why_not = restart_reason(node, graphics_holders(node), [1], 256, force=False)
    assert reason is None and "(GPU 1)" in why_not


def test_force_restarts_a_healthy_desktop_but_not_a_headless_node():
    desktop = snapshot([gpu(0)], [holder(10, "graphics_session", [0])])
    assert restart_reason(desktop, graphics_holders(desktop), [0], 256, force=True) == ("force=true", None)
    headless = snapshot([gpu(0, ghost=4096)], [holder(11, "compute", [0]), holder(12, "gpu_daemon", [])])
    assert graphics_holders(headless) == []
    assert restart_reason(headless, [], [0], 256, force=True) == (
        None, "nothing to do: nothing holds a GPU through the graphics stack")


def test_a_survivor_is_the_same_pid_with_the_same_start_time():
    before = graphics_holders(snapshot([gpu(0)], [holder(10, "graphics_session", [0]), holder(20, "graphics_session", [0])]))
    after = snapshot([gpu(0)], [holder(10, "graphics_session", [0]), holder(20, "graphics_session", [0], start_time=999)])
    assert [h["pid"] for h in survivors(before, after)] == [10]


def test_node_reset_evidence_reads_every_gpu_or_those_named():
    node = snapshot([gpu(0), gpu(1, ghost=512)])
    assert node_reset_evidence(node, 256) == "512 MiB of ghost memory on GPU 1"
    assert node_reset_evidence(node, 256, indexes={0}) is None
    assert node_reset_evidence(node, 1024) is None


def test_memory_before_after_leaves_after_null_without_a_second_snapshot():
    before = snapshot([gpu(0, used=900)])
    assert memory_before_after(before, None) == [{"index": 0, "memory_used_mib_before": 900, "memory_used_mib_after": None}]
    assert memory_before_after(before, snapshot([gpu(0, used=100)]))[0]["memory_used_mib_after"] == 100
