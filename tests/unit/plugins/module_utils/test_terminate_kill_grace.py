# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The wait after SIGKILL has a floor of its own (kill_grace): a process that SIGKILL cannot end at once - here a real
process in a real frozen v1 freezer cgroup, as a CUDA teardown in uninterruptible sleep stands - is waited for until it
is gone, bounded by kill_grace, and only one still there after it outlived SIGKILL."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from ansible_collections.gpuops.remediation.plugins.module_utils.probes import _process
from ansible_collections.gpuops.remediation.plugins.module_utils.kill._freezer import frozen_cgroup, parse_mountinfo
from ansible_collections.gpuops.remediation.plugins.module_utils.kill._terminate import KILL_GRACE, Target, _wait_after, terminate
from ansible_collections.gpuops.remediation.tests.unit.helpers import bounded


def _write(path, text):
    with open(path, "w") as handle:
        handle.write(text)


@pytest.fixture
def frozen_sleep(spawn, procs):
    mounted = parse_mountinfo(open("/proc/self/mountinfo").read())["v1"].get("freezer")
    if not mounted or not os.access(mounted[0], os.W_OK):
        pytest.skip("this host has no writable v1 freezer (needs root and the mount)")
    cgroup = os.path.join(mounted[0], "gpuops-test-kill-grace-%d" % os.getpid())
    os.makedirs(cgroup)
    proc = spawn(["sleep", "60"])
    try:
        _write(os.path.join(cgroup, "cgroup.procs"), str(proc.pid))
        _write(os.path.join(cgroup, "freezer.state"), "FROZEN")
        procs.wait_until(lambda: frozen_cgroup(proc.pid) is not None)
        yield proc, cgroup
    finally:
        _write(os.path.join(cgroup, "freezer.state"), "THAWED")
        proc.kill()
        proc.wait(timeout=30)
        bounded.remove_cgroup(cgroup)


def _thaw_later(proc, cgroup, after_pending_s):
    """Thaw the cgroup once SIGKILL has been pending for after_pending_s (a deadline from the kernel's fact, bounded)."""
    def run():
        deadline = time.monotonic() + 20
        while not bounded.signal_pending(proc.pid, signal.SIGKILL):
            if time.monotonic() > deadline:
                return  # never sent: the test's assertions say so
            time.sleep(0.01)
        bounded.hold(after_pending_s, "SIGKILL pending in a frozen cgroup")
        _write(os.path.join(cgroup, "freezer.state"), "THAWED")
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_the_wait_after_sigkill_is_at_least_kill_grace_and_only_what_is_never_gone_by_then_outlived_it():
    assert _wait_after("TERM", 10.0) == 10.0
    assert _wait_after("KILL", 1.0) == KILL_GRACE == 30.0
    assert _wait_after("SIGKILL", 1.0, kill_grace=5.0) == 5.0
    assert _wait_after("KILL", 40.0, kill_grace=5.0) == 40.0  # never shorter than the grace


def test_a_process_sigkill_ends_only_after_the_grace_is_waited_for_up_to_kill_grace(frozen_sleep):
    proc, cgroup = frozen_sleep
    target = Target(proc.pid, _process.start_time(proc.pid))
    thread = _thaw_later(proc, cgroup, after_pending_s=1.0)
    started = time.monotonic()
    outcome = terminate([(target, "sleep")], signals=("KILL",), grace=0.2, kill_grace=15.0)
    thread.join(20)
    [entry] = outcome["signalled"]
    assert entry["signals"] == ["KILL"] and entry["exited"], entry
    assert 1.0 <= entry["seconds"] < 15.0 and time.monotonic() - started < 15.0


def test_without_the_floor_the_same_process_would_have_been_called_a_survivor(frozen_sleep):
    proc, cgroup = frozen_sleep
    target = Target(proc.pid, _process.start_time(proc.pid))
    thread = _thaw_later(proc, cgroup, after_pending_s=1.0)
    outcome = terminate([(target, "sleep")], signals=("KILL",), grace=0.2, kill_grace=0.2)
    [entry] = outcome["signalled"]
    assert entry["signals"] == ["KILL"] and not entry["exited"], entry
    thread.join(20)


def test_the_floor_is_bounded_a_process_never_gone_is_given_up_after_kill_grace(frozen_sleep):
    proc, dummy = frozen_sleep
    target = Target(proc.pid, _process.start_time(proc.pid))
    started = time.monotonic()
    outcome = terminate([(target, "sleep")], signals=("KILL",), grace=0.1, kill_grace=0.5)
    [entry] = outcome["signalled"]
    assert not entry["exited"] and 0.5 <= time.monotonic() - started < 10.0
    assert frozen_cgroup(proc.pid) is not None
