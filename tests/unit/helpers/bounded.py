# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one way the unit tests wait on a helper process: every read of its output, every wait for its end and
every run has a deadline, and hitting it kills the helper and fails naming what was waited for, with the
helper's stderr. tests/unit/test_bounded_waits.py scans the tests so that none waits any other way.

A helper whose case needs a call the kernel or a seccomp profile may refuse (unshare, kcmp, ptrace, mknod)
prints ``REFUSED <call> <errno name>`` as its line and exits: line() then skips the test as
``not run: <call> refused (<errno>)``, which pytest's -r summary (make units, ansible-test units) lists."""

from __future__ import annotations

import asyncio
import errno
import os
import subprocess
import sys
import tempfile
import threading
import time

import pytest

DEADLINE = 30.0
REFUSED = "REFUSED "


def start(argv, **kwargs):
    """Popen(argv); its stderr goes to a file that a failed wait shows, unless the caller routes it."""
    if "stderr" not in kwargs:
        kwargs["stderr"] = tempfile.TemporaryFile()  # pylint: disable=consider-using-with
    proc = subprocess.Popen(argv, **kwargs)  # pylint: disable=consider-using-with
    proc.bounded_stderr = kwargs["stderr"] if hasattr(kwargs["stderr"], "seek") else None
    return proc


def stderr_of(proc):
    """What the helper wrote on stderr so far, when start() kept it ('' otherwise)."""
    kept = getattr(proc, "bounded_stderr", None)
    if kept is None:
        return ""
    kept.seek(0)
    return kept.read().decode("utf-8", "replace")[-4000:]


def _fail(proc, message):
    if proc.poll() is None:
        proc.kill()
        try:
            proc.wait(timeout=DEADLINE)
        except subprocess.TimeoutExpired:
            message += " (and it did not die of SIGKILL)"
    pytest.fail("%s; argv %r, exit %r, its stderr: %r" % (message, proc.args, proc.returncode, stderr_of(proc)), pytrace=False)


def not_run(call, code):
    """Skip the test: the kernel refused a call (errno code) its case needs; the -r summary lists it."""
    pytest.skip("not run: %s refused (%s)" % (call, errno.errorcode.get(code, code) if isinstance(code, int) else code))


def make_cgroup(path):
    """mkdir of a cgroup, or the test not run where the kernel refuses it (a read-only cgroup mount, no root)."""
    try:
        os.makedirs(path)
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.EACCES, errno.EROFS):
            raise
        not_run("cgroup mkdir", exc.errno)


# unshare(2) flags of the namespaces and tables the tests make their cases in.
UNSHARE_FLAGS = {"files": 0x400, "mount": 0x20000, "pid": 0x20000000}
UNSHARE_PROBE = """
import ctypes, errno, sys
libc = ctypes.CDLL(None, use_errno=True)
if libc.unshare(int(sys.argv[1])) != 0:
    print("REFUSED unshare " + errno.errorcode.get(ctypes.get_errno(), "?"), flush=True)
else:
    print("allowed", flush=True)
"""


def require_unshare(what):
    """Skip the test as not run where the kernel refuses unshare() of what (a key of UNSHARE_FLAGS)."""
    refusal = unshare_refusal(what)
    if refusal:
        not_run("unshare", refusal)


def unshare_refusal(what):
    """The errno name with which this machine refuses unshare() of what (a key of UNSHARE_FLAGS), None where it allows
    it: for a test that keeps its other cases where a container's profile refuses the call."""
    argv = [sys.executable, "-c", UNSHARE_PROBE, str(UNSHARE_FLAGS[what])]
    answer = run(argv, "the unshare(%s) probe" % what, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    words = answer.stdout.split()
    if answer.returncode != 0 or not words:
        pytest.fail("the unshare(%s) probe failed: exit %r, stderr %r" % (what, answer.returncode, answer.stderr), pytrace=False)
    return words[2] if words[0] == REFUSED.strip() else None


def line(proc, what, timeout=DEADLINE):
    """The next line of the helper's stdout, stripped; a REFUSED line skips the test as not run."""
    got = []
    reader = threading.Thread(target=lambda: got.append(proc.stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    if reader.is_alive():
        _fail(proc, "no line from %s within %ss" % (what, timeout))
    text = got[0].decode("utf-8", "replace") if isinstance(got[0], bytes) else got[0]
    if not text:
        wait_quietly(proc)
        _fail(proc, "%s ended its output without the line awaited" % what)
    text = text.strip()
    if text.startswith(REFUSED):
        wait_quietly(proc)
        call, name = (text[len(REFUSED):].split() + ["?"])[:2]
        not_run(call, name)
    return text


def wait(proc, what, timeout=DEADLINE):
    """The helper's exit status once it ended; it must end within timeout."""
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        _fail(proc, "%s did not end within %ss" % (what, timeout))
    return None  # not reached: _fail raises


def wait_quietly(proc, timeout=DEADLINE):
    """Reap a helper at teardown: killed when it has not ended within timeout."""
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait(timeout=timeout)


def communicate(proc, what, data=None, timeout=DEADLINE):
    """(stdout, stderr) of the helper, data written to its stdin; it must end within timeout."""
    try:
        return proc.communicate(data, timeout=timeout)
    except subprocess.TimeoutExpired:
        _fail(proc, "%s did not end within %ss" % (what, timeout))
    return None  # not reached: _fail raises


def run(argv, what, timeout=DEADLINE, **kwargs):
    """subprocess.run with a deadline; hitting it fails naming what ran, with what it wrote."""
    kwargs.setdefault("check", False)
    try:
        return subprocess.run(argv, timeout=timeout, **kwargs)  # pylint: disable=subprocess-run-check
    except subprocess.TimeoutExpired as exc:
        pytest.fail("%s did not end within %ss; argv %r, its output: %r, its stderr: %r"
                    % (what, timeout, argv, exc.output, exc.stderr), pytrace=False)
    return None  # not reached: pytest.fail raises


def until(predicate, what, timeout=DEADLINE, interval=0.01):
    """Poll predicate() until it holds; past the deadline the test fails naming what it waited for."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail("waited %ss for %s" % (timeout, what), pytrace=False)
        time.sleep(interval)


# The longest window a test may wait for something NOT to happen.
SETTLE_MAX = 1.0


def settle(seconds, absence):
    """Wait a short fixed window in which `absence` must hold (nothing more comes, nobody is signalled): an absence has
    no fact to wait on. Never a wait for something to happen (that is until() on its fact): on a loaded machine the
    window only lets a wrong result pass unseen, it never fails a right one."""
    assert 0 < seconds <= SETTLE_MAX, "a settle window of %ss for %s" % (seconds, absence)
    time.sleep(seconds)


async def settle_async(seconds, absence):
    """settle() inside an event loop: the other tasks run meanwhile."""
    assert 0 < seconds <= SETTLE_MAX, "a settle window of %ss for %s" % (seconds, absence)
    await asyncio.sleep(seconds)


def hold(seconds, case):
    """Keep a case's condition in place for a fixed time: for a case that is about a duration (a process that SIGKILL
    cannot end for 2 s), never a wait for something to happen."""
    time.sleep(seconds)


def signal_pending(pid, signum):
    """Whether signum is pending for pid (SigPnd/ShdPnd of /proc/<pid>/status): the kernel's fact that it was sent
    and has not been taken yet (blocked, or the task cannot run: frozen, in D state)."""
    with open("/proc/%d/status" % pid) as handle:
        fields = dict(line.split(":", 1) for line in handle if ":" in line)
    return any(int(fields.get(key, "0").strip(), 16) & (1 << (signum - 1)) for key in ("SigPnd", "ShdPnd"))


def remove_cgroup(path, timeout=DEADLINE):
    """rmdir a test's cgroup once the kernel says it holds no process (a killed member leaves it asynchronously)."""
    def removed():
        try:
            os.rmdir(path)
        except FileNotFoundError:
            return True
        except OSError as exc:
            if exc.errno != errno.EBUSY:
                raise
            return False
        return True
    until(removed, "cgroup %s to empty and be removed" % path, timeout, interval=0.05)
