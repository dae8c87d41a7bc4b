# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Real processes for the kill path's tests (test_terminate, test_protect, test_zombies): started, read from the
real /proc, and killed and reaped at the end of each test; and the directory of a simulated node, removed after."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time

import pytest

from ansible_collections.gpuops.remediation.plugins.module_utils.probes import _process
from ansible_collections.gpuops.remediation.plugins.module_utils.kill._terminate import Target

from ansible_collections.gpuops.remediation.tests.unit.helpers import bounded

# The parent forks the group and never reaps; in the child the main thread (the leader) exits while a second
# thread lives on, so /proc/<child>/stat says Z. argv[1] "ignores_term": the group ignores SIGTERM.
LEADER_EXITED_PARENT = """
import ctypes, os, signal, sys, threading, time
child = os.fork()
if child == 0:
    if sys.argv[1] == "ignores_term":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    threading.Thread(target=time.sleep, args=(600,)).start()
    ctypes.CDLL(None).pthread_exit(None)
def leader_state():
    with open("/proc/%d/stat" % child) as handle:
        return handle.read().rsplit(")", 1)[1].split()[0]
while leader_state() != "Z":
    time.sleep(0.01)
print(child, flush=True)
while True:
    time.sleep(60)
"""


@pytest.fixture
def spawn(child_env):
    """Start real processes; whatever is left at the end of the test is killed and reaped."""
    started = []

    def _spawn(argv, **kwargs):
        proc = bounded.start(argv, env=child_env, **kwargs)
        started.append(proc)
        return proc

    yield _spawn
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        bounded.wait(proc, "proc")


class Processes:
    """What the kill path's tests ask of real processes."""

    def __init__(self, spawn):
        self.spawn = spawn

    @staticmethod
    def stat_fields(pid):
        """Fields 3.. of /proc/<pid>/stat (state first), or None when the pid is gone."""
        try:
            with open("/proc/%d/stat" % pid, "rb") as handle:
                data = handle.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return None
        return data[data.rindex(")") + 2:].split()

    def state_of(self, pid):
        fields = self.stat_fields(pid)
        return fields[0] if fields else None

    @staticmethod
    def target_for(pid, reason="test"):
        return Target(pid, _process.start_time(pid), reason)

    @staticmethod
    def wait_until(predicate, timeout=bounded.DEADLINE):
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise AssertionError("condition not met within %ss" % timeout)
            time.sleep(0.01)

    @staticmethod
    def ignore_term():
        signal.signal(signal.SIGTERM, signal.SIG_IGN)

    @staticmethod
    def block_term():
        """For preexec_fn: TERM blocked (sigprocmask), which exec keeps."""
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})

    def python_child(self, code, argv0=None):
        """A Python child that prints one line when it is ready; returns (proc, that line)."""
        argv = [argv0 or sys.executable, "-c", textwrap.dedent(code)]
        proc = self.spawn(argv, executable=sys.executable, stdout=subprocess.PIPE, text=True)
        line = bounded.line(proc, "proc")
        return proc, line

    def leader_exited_group(self, mode="plain"):
        """(the never-reaping parent's Popen, the pid of its leader-exited child)."""
        parent = self.spawn([sys.executable, "-c", textwrap.dedent(LEADER_EXITED_PARENT), mode], stdout=subprocess.PIPE,
                            text=True)
        child = int(bounded.line(parent, "parent"))
        assert self.state_of(child) == "Z"  # the leader's stat
        # The group's state is its live thread's: wait until it sleeps (just started, it may still run, state R).
        self.wait_until(lambda: _process.read_process(child)["state"] == "S")
        return parent, child


@pytest.fixture
def procs(spawn):
    return Processes(spawn)
