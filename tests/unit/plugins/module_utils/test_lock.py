# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""_lock with a real holder process, real flock and SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from ansible_collections.gpuops.remediation.plugins.module_utils.probes import _process
from ansible_collections.gpuops.remediation.plugins.module_utils._lock import LockTimeout, NodeLock, read_holder

from ansible_collections.gpuops.remediation.tests.unit.helpers import bounded

HOLDER = """
    import sys, time
    from ansible_collections.gpuops.remediation.plugins.module_utils._lock import NodeLock
    with NodeLock(sys.argv[1], timeout=5):
        print("locked", flush=True)
        time.sleep(60)
"""


@pytest.fixture
def holder(tmp_path, child_env):
    path = str(tmp_path / "run" / "node.lock")
    proc = bounded.start([sys.executable, "-c", textwrap.dedent(HOLDER), path], env=child_env,
                         stdout=subprocess.PIPE, text=True)
    assert bounded.line(proc, "proc") == "locked"
    yield proc, path
    if proc.poll() is None:
        proc.kill()
    bounded.wait(proc, "proc")


def test_second_process_waits_then_times_out_naming_the_holder(holder):
    proc, path = holder
    began = time.monotonic()
    with pytest.raises(LockTimeout) as raised:
        with NodeLock(path, timeout=0.5):
            pytest.fail("the lock was granted while another process holds it")
    waited = time.monotonic() - began
    assert 0.5 <= waited < 1.5
    message = str(raised.value)
    assert path in message and "pid %d" % proc.pid in message
    assert raised.value.holder["pid"] == proc.pid
    assert raised.value.holder["start_time"] == _process.start_time(proc.pid)


def test_sigkilled_holder_releases_the_lock(holder):
    proc, path = holder
    os.kill(proc.pid, signal.SIGKILL)
    bounded.wait(proc, "proc")
    began = time.monotonic()
    with NodeLock(path, timeout=2.0) as lock:
        assert lock.held
        assert time.monotonic() - began < 0.5
        assert read_holder(path)["pid"] == os.getpid()


def test_holder_record_and_release(tmp_path):
    path = str(tmp_path / "node.lock")
    with NodeLock(path, timeout=1.0):
        with open(path) as handle:
            record = json.load(handle)
        assert record["pid"] == os.getpid()
        assert record["start_time"] == _process.start_time(os.getpid())
    assert read_holder(path) is None  # emptied on release
    with NodeLock(path, timeout=0.0) as lock:  # free again at once
        assert lock.held
    assert not lock.held
