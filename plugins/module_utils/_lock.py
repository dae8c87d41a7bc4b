# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One run acts on a node at a time: an flock(2) on a lock file.

The kernel drops an flock when the last descriptor of its holder closes, so a run that is SIGKILLed never
leaves a stale lock (the file stays; nobody holds it). Every lock file is the product's own (open_lock), every wait
bounded (flock_within). The holder writes its pid and start time into the file so that a run that times out
can say who holds the node.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import stat
import time

try:
    from ansible_collections.gpuops.remediation.plugins.module_utils.probes import _process
    from ansible_collections.gpuops.remediation.plugins.module_utils._safe_files import open_dir, open_in
except ImportError:  # copied flat into a simulated node's lib/: its state lock is a lock like the product's
    import _process  # type: ignore[no-redef] # pylint: disable=import-error
    from _safe_files import open_dir, open_in  # type: ignore[no-redef] # pylint: disable=import-error

DEFAULT_LOCK_PATH = "/run/gpuops.lock"
RETRY_INTERVAL = 0.1


class LockTimeout(Exception):
    """The lock stayed held by another process for the whole timeout."""

    def __init__(self, path, timeout, holder, what="node lock"):
        self.path = path
        self.timeout = timeout
        self.holder = holder
        super().__init__("%s %s is still held by %s after waiting %.1fs" % (what, path, describe_holder(holder), timeout))


def describe_holder(holder):
    """'pid 1234 (ansible-playbook, start time 5678)' from what the holder wrote, for messages."""
    if not holder or not holder.get("pid"):
        return "another process (it has not written its pid yet)"
    pid = holder["pid"]
    details = []
    start = holder.get("start_time")
    if start is not None and _process.same_process(pid, start):
        info = _process.read_process(pid)
        if info and info.get("name"):
            details.append(info["name"])
    if start is not None:
        details.append("start time %s" % start)
    return "pid %s (%s)" % (pid, ", ".join(details)) if details else "pid %s" % pid


def read_holder(path):
    """What the holder of the lock at path wrote: {"pid", "start_time", "acquired"} or None. Never through a link."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        return _holder_of_fd(fd)
    finally:
        os.close(fd)


def _holder_of_fd(fd):
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        text = os.pread(fd, 4096, 0).decode("utf-8", "replace")
    except OSError:
        return None
    try:
        holder = json.loads(text)
    except ValueError:
        return None
    return holder if isinstance(holder, dict) else None


def lock_holders(fd, proc_locks="/proc/locks"):
    """The pids that the kernel lists as holding a lock (not waiting for one) on the file open as fd: /proc/locks names
    each lock's file by device and inode ("08:01:1234"), whoever opened it and by whatever name."""
    info = os.fstat(fd)
    wanted = "%02x:%02x:%d" % (os.major(info.st_dev), os.minor(info.st_dev), info.st_ino)
    pids = []
    try:
        with open(proc_locks, "r", encoding="ascii", errors="replace") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return pids
    for line in lines:
        fields = line.split()
        if len(fields) < 6 or fields[1] == "->":  # "->": a process blocked waiting for the lock, not its holder
            continue
        if fields[5] == wanted and fields[4].isdigit() and int(fields[4]) not in pids:
            pids.append(int(fields[4]))
    return pids


def holder_of(fd):
    """Who holds the lock open as fd: what its holder wrote, when the kernel agrees that pid holds it; else the pid
    the kernel lists (a process that took the lock without writing, or wrote something else)."""
    written = _holder_of_fd(fd) or {}
    pids = [pid for pid in lock_holders(fd) if pid != os.getpid()]
    if not pids or written.get("pid") in pids:
        return written or None
    return {"pid": pids[0], "start_time": _process.start_time(pids[0])}


def flock_within(fd, operation, timeout, path, what="node lock"):
    """flock(fd, operation) within timeout seconds, polling without blocking (a lock held for ever never keeps the run
    past its timeout); LockTimeout names `what`, path and the process holding it."""
    deadline = time.monotonic() + max(0.0, timeout)
    pause = 0.01
    while True:
        try:
            fcntl.flock(fd, operation | fcntl.LOCK_NB)
            return
        except OSError as error:
            if error.errno not in (errno.EAGAIN, errno.EWOULDBLOCK, errno.EACCES):
                raise
        left = deadline - time.monotonic()
        if left <= 0:
            raise LockTimeout(path, timeout, holder_of(fd), what)
        time.sleep(min(pause, left))
        pause = min(pause * 2, RETRY_INTERVAL)


def open_lock(path, option, create=True):
    """A descriptor of the lock file at path: made by the run (O_CREAT, mode 0600, so that nobody else can open it to
    hold it) in a directory only root and the run can write, never through a link; an existing one must be a regular
    file of the run's (or root's) own with one link (_safe_files.open_in). create=False: FileNotFoundError when it or
    its directory is missing."""
    directory, name = os.path.split(os.path.abspath(path))
    dir_fd = open_dir(directory, option, create=create, mode=0o750, holds_trusted=True, shown=path)
    try:
        fd = open_in(dir_fd, name, os.O_RDWR | (os.O_CREAT if create else 0), option, path, 0o600)
    finally:
        os.close(dir_fd)
    if stat.S_IMODE(os.fstat(fd).st_mode) & 0o077:
        os.fchmod(fd, 0o600)  # a lock file of an older version: nobody else may open it from now on
    return fd


class NodeLock:
    """Context manager: hold an exclusive flock on path, waiting at most timeout seconds for it. option: what names
    the path in an error (the option the user gave it by)."""

    def __init__(self, path=DEFAULT_LOCK_PATH, timeout=60.0, option="lock"):
        self.path = path
        self.timeout = timeout
        self.option = option
        self._fd = None

    def __enter__(self):
        self.acquire()
        return self

    def __exit__(self, exc_type, exc, traceback):
        self.release()
        return False

    def acquire(self):
        fd = open_lock(self.path, self.option)
        try:
            flock_within(fd, fcntl.LOCK_EX, self.timeout, self.path)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        self._write_holder()

    def _write_holder(self):
        pid = os.getpid()
        holder = {"pid": pid, "start_time": _process.start_time(pid),
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
