# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run a driver probe in a child process with a hard deadline.

NVML and nvidia-smi can block for ever in uninterruptible sleep when the driver is wedged. The probe runs
in a forked child; past the deadline the child is SIGKILLed and abandoned (a child in D state cannot be
reaped until the kernel lets go), and the caller gets ProbeTimeout: evidence, never a retry loop.

A snapshot runs its two probes, the driver's and the /proc scan, in one such child (ProbeChild): the scan's
options depend on the driver's answer, so the child answers the first, then waits for the second's request.
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


def _answer(data):
    if not data:
        raise ProbeFailed("ChildDied", "the probe process exited without an answer")
    payload = json.loads(data.decode("utf-8"))
    if "error_type" in payload:
        raise ProbeFailed(payload["error_type"], payload["error"])
    return payload["result"]


def _kill(pid, own_group=False):
    try:
        if own_group:
            os.killpg(pid, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, os.WNOHANG)
    except OSError:
        pass


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
        _kill(pid, own_group)
        raise ProbeTimeout(timeout)
    os.waitpid(pid, 0)
    return _answer(data)


NO_REQUEST = b"null\n"


def _read_request(read_fd):
    """The request, one line of JSON; None when the parent sent NO_REQUEST or closed the pipe without one."""
    chunks = []
    chunk = os.read(read_fd, 65536)
    while chunk:
        chunks.append(chunk)
        if chunk.endswith(b"\n"):
            return json.loads(b"".join(chunks).decode("utf-8"))
        chunk = os.read(read_fd, 65536)
    return None


class ProbeChild:
    """One child process for two probes, each under its own deadline: first() at once, then second(request) when
    asked (second_answer). A first probe that outruns its deadline or kills the child leaves no child: the second
    then runs in a child of its own (run_with_deadline), as it would alone. The child leaves without an answer
    when the second is never asked for (close)."""

    def __init__(self, first, second):
        self.second = second
        first_read, first_write = os.pipe()
        request_read, request_write = os.pipe()
        second_read, second_write = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:
            status = 1
            try:
                for fd in (first_read, request_write, second_read):
                    os.close(fd)
                _child(first, first_write)
                os.close(first_write)
                request = _read_request(request_read)
                if request is not None:
                    _child(lambda: second(request), second_write)
                status = 0
            finally:
                # os._exit: the parent's atexit handlers (AnsiballZ's temp dir cleanup) must not run here.
                os._exit(status)  # pylint: disable=protected-access
        for fd in (first_write, request_read, second_write):
            os.close(fd)
        self.first_fd, self.request_fd, self.second_fd = first_read, request_write, second_read
        self.alive = True
        self.answered_first = False

    def _close(self, *fds):
        for fd in fds:
            if fd is not None:
                os.close(fd)
        self.first_fd = self.request_fd = self.second_fd = None

    def _lost(self):
        """The child is of no more use: killed (a wedged probe cannot hold the module), its pipes closed."""
        _kill(self.pid)
        self.alive = False
        self._close(self.first_fd, self.request_fd, self.second_fd)

    def first_answer(self, timeout):
        """first()'s result; raises ProbeTimeout (the child is then killed) or ProbeFailed (it waits for a request)."""
        data = _read_until(self.first_fd, time.monotonic() + timeout)
        if data is None:
            self._lost()
            raise ProbeTimeout(timeout)
        self.answered_first = True
        if not data:
            self._lost()
        return _answer(data)

    def second_answer(self, request, timeout):
        """second(request)'s result, from this child while it lives, else from a child of its own."""
        if not self.alive:
            return run_with_deadline(lambda: self.second(request), timeout)
        os.close(self.first_fd)
        self.first_fd = None
        data = json.dumps(request).encode("utf-8") + b"\n"
        try:
            while data:
                data = data[os.write(self.request_fd, data):]
        except OSError:
            pass  # the child died: its answer is empty
        os.close(self.request_fd)
        self.request_fd = None
        answer = _read_until(self.second_fd, time.monotonic() + timeout)
        if answer is None:
            self._lost()
            raise ProbeTimeout(timeout)
        self._close(self.second_fd)
        self.alive = False
        os.waitpid(self.pid, 0)
        return _answer(answer)

    def close(self):
        """Let a child that was never asked the second probe leave (its request pipe closed), and reap it; one still in
        its first probe (which may be wedged in the driver) is killed."""
        if not self.alive:
            return
        if not self.answered_first:
            self._lost()
            return
        self.alive = False
        try:
            # Said, not left to the pipe's end: a child the module forked since holds a copy of the pipe's write end.
            os.write(self.request_fd, NO_REQUEST)
        except OSError:
            pass  # the child died: nothing waits for the request
        self._close(self.first_fd, self.request_fd, self.second_fd)
        os.waitpid(self.pid, 0)
