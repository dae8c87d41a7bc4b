# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One probe process per snapshot (_deadline.ProbeChild): the driver's probe and the /proc scan in one forked child,
each under its own deadline; a wedged first probe cannot hold the module, and the scan then runs in a child of its
own; the scanning process is never one of the holders it reports."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import types

import pytest

from ansible_collections.gpuops.remediation.plugins.module_utils.probes import _procscan as procscan
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._deadline import ProbeChild, ProbeFailed, ProbeTimeout

from ansible_collections.gpuops.remediation.tests.unit.helpers import bounded


def _gone_or_zombie(pid):
    try:
        with open("/proc/%d/stat" % pid, "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except OSError:
        return True


def _reap(pid):
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass  # reaped by ProbeChild already


@pytest.fixture
def never_written():
    """A pipe nobody writes: a read of it blocks for ever, as a probe of a wedged driver does."""
    read_fd, write_fd = os.pipe()
    yield read_fd
    os.close(read_fd)
    os.close(write_fd)


def test_both_probes_run_in_one_child_each_answering_in_turn():
    child = ProbeChild(os.getpid, lambda request: [os.getpid(), request])
    first = child.first_answer(10)
    assert first == child.pid != os.getpid()
    assert child.second_answer({"memory_maps": True}, 10) == [child.pid, {"memory_maps": True}]
    assert not child.alive
    with pytest.raises(ChildProcessError):
        os.waitpid(child.pid, os.WNOHANG)  # reaped: no child is left behind
    child.close()  # nothing left to do


def test_a_failed_first_probe_keeps_the_child_for_the_second():
    def fails():
        raise RuntimeError("NVML_ERROR_UNINITIALIZED")

    child = ProbeChild(fails, lambda request: os.getpid())
    with pytest.raises(ProbeFailed, match="RuntimeError: NVML_ERROR_UNINITIALIZED"):
        child.first_answer(10)
    assert child.second_answer({}, 10) == child.pid


def test_a_wedged_first_probe_is_killed_and_the_second_runs_in_a_child_of_its_own(never_written):
    child = ProbeChild(lambda: os.read(never_written, 1), lambda request: os.getpid())
    with pytest.raises(ProbeTimeout, match="no answer within 0.5 s"):
        child.first_answer(0.5)
    bounded.until(lambda: _gone_or_zombie(child.pid), "the wedged probe child %d to be killed" % child.pid)
    _reap(child.pid)
    second = child.second_answer({}, 10)
    assert second not in (child.pid, os.getpid())


def test_a_wedged_second_probe_is_killed_and_reported_as_a_timeout(never_written):
    child = ProbeChild(lambda: "driver", lambda request: os.read(never_written, 1))
    assert child.first_answer(10) == "driver"
    with pytest.raises(ProbeTimeout, match="no answer within 0.5 s"):
        child.second_answer({}, 0.5)
    bounded.until(lambda: _gone_or_zombie(child.pid), "the wedged scan child %d to be killed" % child.pid)
    _reap(child.pid)


def test_a_child_never_asked_the_second_probe_leaves_when_closed():
    asked = []
    child = ProbeChild(lambda: "driver", asked.append)
    assert child.first_answer(10) == "driver"
    child.close()
    with pytest.raises(ChildProcessError):
        os.waitpid(child.pid, os.WNOHANG)
    assert not asked


def test_a_child_never_asked_leaves_though_another_fork_of_the_module_holds_its_request_pipe(never_written):
    child = ProbeChild(lambda: "driver", lambda request: None)
    assert child.first_answer(10) == "driver"
    # A probe child the module forks later (a command's deadline child) inherits the request pipe's write end; one
    # wedged in the driver keeps it open, so the probe child must not wait for the pipe's end to leave.
    sibling = os.fork()
    if sibling == 0:
        try:
            os.read(never_written, 1)
        finally:
            os._exit(0)  # pylint: disable=protected-access
    closing = threading.Thread(target=child.close, daemon=True)
    try:
        closing.start()
        bounded.until(lambda: not closing.is_alive(), "close() of probe child %d while fork %d holds its request pipe" % (child.pid, sibling))
    finally:
        os.kill(sibling, signal.SIGKILL)
        _reap(sibling)
        bounded.until(lambda: not closing.is_alive(), "close() of probe child %d to return" % child.pid)
    with pytest.raises(ChildProcessError):
        os.waitpid(child.pid, os.WNOHANG)


def test_closing_a_child_still_in_its_first_probe_kills_it(never_written):
    child = ProbeChild(lambda: os.read(never_written, 1), lambda request: None)
    child.close()
    bounded.until(lambda: _gone_or_zombie(child.pid), "the unanswered probe child %d to be killed" % child.pid)
    _reap(child.pid)


HOLD_OPEN = """
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
print(os.getpid(), flush=True)
os.read(0, 1)
"""


def test_the_scanning_child_is_no_holder_even_with_a_device_its_first_probe_left_open(tmp_path):
    dev_dir = tmp_path / "dev"
    dev_dir.mkdir()
    for name in ("nvidia0", "nvidiactl"):
        (dev_dir / name).write_bytes(b"\0" * 4096)
    layout = types.SimpleNamespace(dev_dir=str(dev_dir), sys_dir="/sys", dri_node_rule=None)
    holder = bounded.start([sys.executable, "-c", HOLD_OPEN, str(dev_dir / "nvidia0")], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           text=True)
    try:
        holder_pid = int(bounded.line(holder, "the holder's pid"))
        kept = []

        def driver_probe():
            # As an NVML library may keep /dev/nvidiactl open after nvmlShutdown.
            kept.append(os.open(str(dev_dir / "nvidiactl"), os.O_RDWR))
            return os.getpid()

        child = ProbeChild(driver_probe, procscan.scan_job(layout))
        scanner = child.first_answer(10)
        holders, report = procscan.scan_processes(layout, 10, memory_maps=True, child=child)
        assert report["ok"] and not report["timed_out"]
        assert holder_pid in holders and holders[holder_pid]["via"] == ["fd"]
        assert scanner not in holders
    finally:
        holder.stdin.close()
        bounded.wait(holder, "the holder to exit")
