# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run a driver probe in a child process with a hard deadline.

NVML and nvidia-smi can block for ever in uninterruptible sleep when the driver is wedged. The probe runs
in a forked child; past the deadline the child is SIGKILLed and abandoned (a child in D state cannot be
reaped until the kernel lets go), and the caller gets ProbeTimeout: evidence, never a retry loop.
"""

from __future__ import annotations

import json
import os
import select
import signal
import time
import traceback


class ProbeTimeout(Exception):
    def __init__(self, timeout):
        super().__init__("no answer within %.1f s" % timeout)
        self.timeout = timeout


class ProbeFailed(Exception):
    """The probe raised in the child; error_type is the exception's class name there."""

    def __init__(self, error_type, message):
        super().__init__("%s: %s" % (error_type, message) if message else error_type)
        self.error_type = error_type


def _child(func, write_fd):
    try:
        payload = {"result": func()}
    except BaseException as exc:  # pylint: disable=broad-exception-caught
        payload = {"error_type": type(exc).__name__, "error": str(exc), "traceback": traceback.format_exc()}
    data = json.dumps(payload).encode("utf-8")
    while data:
        written = os.write(write_fd, data)
        data = data[written:]


def _read_until(read_fd, deadline):
    chunks = []
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        ready, dummy, dummy = select.select([read_fd], [], [], remaining)
        if not ready:
            continue
        chunk = os.read(read_fd, 65536)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def run_with_deadline(func, timeout, own_group=False):
    """Return func()'s JSON-serialisable result, computed in a child; raise ProbeTimeout or ProbeFailed.

    own_group: the child leads a process group of its own, killed whole past the deadline (a command it started
    with it, not left running)."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        if own_group:
            os.setpgid(0, 0)
        status = 0
        try:
            _child(func, write_fd)
        except BaseException:  # pylint: disable=broad-exception-caught
            status = 1
        # os._exit: the parent's atexit handlers (AnsiballZ's temp dir cleanup) must not run here.
        os._exit(status)  # pylint: disable=protected-access
    os.close(write_fd)
    if own_group:
        try:
            # Set on both sides of the fork: the group exists whichever runs first, so killpg never misses it.
            os.setpgid(pid, pid)
        except OSError:
            pass
    try:
        data = _read_until(read_fd, time.monotonic() + timeout)
    finally:
        os.close(read_fd)
    if data is None:
        try:
            if own_group:
                os.killpg(pid, signal.SIGKILL)
            else:
                os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, os.WNOHANG)
        except OSError:
            pass
        raise ProbeTimeout(timeout)
    os.waitpid(pid, 0)
    if not data:
        raise ProbeFailed("ChildDied", "the probe process exited without an answer")
    payload = json.loads(data.decode("utf-8"))
    if "error_type" in payload:
        raise ProbeFailed(payload["error_type"], payload["error"])
    return payload["result"]
