# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One run acts on a node at a time: an flock(2) on a lock file.

The kernel drops an flock when the last descriptor of its holder closes, so a run that is SIGKILLed never
leaves a stale lock. The holder writes its pid and start time into the file so that a run that times out
can say who holds the node.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import time

from ansible_collections.gpuops.remediation.plugins.module_utils import _procscan

DEFAULT_LOCK_PATH = "/run/gpuops.lock"
RETRY_INTERVAL = 0.1


class LockTimeout(Exception):
    """The lock stayed held by another process for the whole timeout."""

    def __init__(self, path, timeout, holder):
        self.path = path
        self.timeout = timeout
        self.holder = holder
        super().__init__("node lock %s is still held by %s after waiting %.1fs" % (path, describe_holder(holder), timeout))


def describe_holder(holder):
    """'pid 1234 (ansible-playbook, start time 5678)' from what the holder wrote, for messages."""
    if not holder or not holder.get("pid"):
        return "another process (it has not written its pid yet)"
    pid = holder["pid"]
    details = []
    start = holder.get("start_time")
    if start is not None and _procscan.same_process(pid, start):
        info = _procscan.read_process(pid)
        if info and info.get("name"):
            details.append(info["name"])
    if start is not None:
        details.append("start time %s" % start)
    return "pid %s (%s)" % (pid, ", ".join(details)) if details else "pid %s" % pid


def read_holder(path):
    """What the holder of the lock at path wrote: {"pid", "start_time", "acquired"} or None."""
    try:
        with open(path, "r", encoding="utf-8") as handle:
            text = handle.read()
    except OSError:
        return None
    try:
        holder = json.loads(text)
    except ValueError:
        return None
    return holder if isinstance(holder, dict) else None


class NodeLock:
    """Context manager: hold an exclusive flock on path, waiting at most timeout seconds for it."""

    def __init__(self, path=DEFAULT_LOCK_PATH, timeout=60.0):
        self.path = path
        self.timeout = timeout
        self._fd = None

    def __enter__(self):
        self.acquire()
        return self

    def __exit__(self, exc_type, exc, traceback):
        self.release()
        return False

    def acquire(self):
        parent = os.path.dirname(os.path.abspath(self.path))
        if not os.path.isdir(parent):
            os.makedirs(parent, 0o750, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o640)
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as error:
                if error.errno not in (errno.EAGAIN, errno.EWOULDBLOCK, errno.EACCES):
                    os.close(fd)
                    raise
            if time.monotonic() >= deadline:
                os.close(fd)
                raise LockTimeout(self.path, self.timeout, read_holder(self.path))
            time.sleep(RETRY_INTERVAL)
        self._fd = fd
        self._write_holder()

    def _write_holder(self):
        pid = os.getpid()
        holder = {"pid": pid, "start_time": _procscan.start_time(pid),
                  "acquired": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, json.dumps(holder).encode("utf-8"), 0)

    def release(self):
        if self._fd is None:
            return
        try:
            os.ftruncate(self._fd, 0)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        finally:
            os.close(self._fd)
            self._fd = None

    @property
    def held(self):
        return self._fd is not None
