# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Signals predicted from the kernel's signal state, against real processes (issue 17 rule 4): a stopped process with
a TERM handler gets CONT and runs it; the init of a PID namespace without a handler gets KILL at once; a process its
tracer stopped gets KILL at once; check mode predicts what the run does."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading

import pytest

from ansible_collections.gpuops.remediation.plugins.module_utils.kill._protect import Policy, terminate_permitted

from ansible_collections.gpuops.remediation.tests.unit.helpers import bounded

KEYS = ("pid", "signals", "exited", "expected", "kill_follows", "not_sent")


def _same(predicted, real):
    assert [[e[k] for k in KEYS] for e in real["signalled"]] == [[e[k] for k in KEYS] for e in predicted["signalled"]]


def _predicted_and_real(target, grace):
    """What terminate_permitted (TERM, then KILL after the grace) predicts in check mode, and what it then does."""
    predicted = terminate_permitted([target], Policy(), signals=["TERM", "KILL"], grace=grace, check_mode=True)
    return predicted, terminate_permitted([target], Policy(), signals=["TERM", "KILL"], grace=grace)


def _stopped(proc, procs):
    """The target of `proc` once SIGSTOP has stopped it (state T), its exit reaped in the background."""
    os.kill(proc.pid, signal.SIGSTOP)
    procs.wait_until(lambda: procs.state_of(proc.pid) == "T")
    threading.Thread(target=proc.wait, daemon=True).start()
    return procs.target_for(proc.pid)


def test_a_stopped_process_gets_cont_and_its_term_handler_runs(procs, tmp_path):
    marker = tmp_path / "checkpoint"
    proc, line = procs.python_child("""
        import signal, sys, time
        def checkpoint(*_):
            open(%r, "w").write("saved")
            sys.exit(0)
        signal.signal(signal.SIGTERM, checkpoint)
        print("ready", flush=True)
        while True:
            time.sleep(1)
    """ % str(marker))
    assert line == "ready"
    target = _stopped(proc, procs)
    predicted, real = _predicted_and_real(target, 5.0)
    [entry] = real["signalled"]
    assert entry["signals"] == ["TERM", "CONT"] and entry["exited"] is True and entry["expected"] == "handler"
    assert marker.read_text() == "saved"
    _same(predicted, real)


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="needs root and unshare(1)")
def test_the_init_of_a_pid_namespace_without_a_handler_gets_kill_at_once(spawn, procs):
    bounded.require_unshare("pid")
    outer = spawn(["unshare", "--fork", "--pid", "sleep", "60"])
    procs.wait_until(lambda: os.path.exists("/proc/%d/task/%d/children" % (outer.pid, outer.pid))
                     and open("/proc/%d/task/%d/children" % (outer.pid, outer.pid)).read().split() != []
                     and procs.state_of(int(open("/proc/%d/task/%d/children" % (outer.pid, outer.pid)).read().split()[0])) == "S")
    init = int(open("/proc/%d/task/%d/children" % (outer.pid, outer.pid)).read().split()[0])
    procs.wait_until(lambda: os.readlink("/proc/%d/exe" % init).endswith("sleep"))  # exec'd: no handler of unshare's
    target = procs.target_for(init)
    predicted, real = _predicted_and_real(target, 5.0)
    [entry] = real["signalled"]
    assert entry["expected"] == "kill_needed" and entry["signals"] == ["KILL"] and entry["exited"] is True
    _same(predicted, real)


TRACER = """
import ctypes, errno, os, signal, sys, time
libc = ctypes.CDLL(None, use_errno=True)
pid = int(sys.argv[1])
if libc.ptrace(16, pid, None, None) != 0:  # PTRACE_ATTACH: the tracee stops (t)
    print("REFUSED ptrace", errno.errorcode.get(ctypes.get_errno(), "?"), flush=True)
    sys.exit(0)
os.waitpid(pid, 0x40000000)  # __WALL
print("attached", flush=True)
time.sleep(60)
"""


def test_a_process_its_tracer_stopped_gets_kill_at_once(spawn, procs):
    tracee = spawn(["sleep", "60"])
    threading.Thread(target=tracee.wait, daemon=True).start()
    tracer = spawn([sys.executable, "-c", TRACER, str(tracee.pid)], stdout=subprocess.PIPE, text=True)
    assert bounded.line(tracer, "the tracer's attach") == "attached"
    procs.wait_until(lambda: procs.state_of(tracee.pid) == "t")
    target = procs.target_for(tracee.pid)
    predicted, real = _predicted_and_real(target, 5.0)
    tracer.kill()  # the tracee's exit goes to its tracer first: end the tracer so that its parent can reap it
    bounded.wait(tracer, "tracer")
    [entry] = real["signalled"]
    assert entry["expected"] == "kill_needed" and entry["signals"] == ["KILL"] and entry["exited"] is True
    _same(predicted, real)


def test_a_stopped_process_that_blocks_term_gets_cont_then_kill_after_the_grace(spawn, procs):
    proc = spawn(["sleep", "60"], preexec_fn=procs.block_term)
    target = _stopped(proc, procs)
    predicted, real = _predicted_and_real(target, 0.5)
    [entry] = real["signalled"]
    assert entry["expected"] == "pending" and entry["signals"] == ["TERM", "CONT", "KILL"] and entry["exited"] is True
    _same(predicted, real)
