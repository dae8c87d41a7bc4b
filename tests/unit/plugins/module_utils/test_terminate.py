# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""_terminate (signals, grace, pidfd, reused pids) against real processes, real signals and the real /proc, through
the protected path every module takes (_protect.terminate_permitted)."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from ansible_collections.gpuops.remediation.plugins.module_utils.probes import _process
from ansible_collections.gpuops.remediation.plugins.module_utils.journal._writer import Journal
from ansible_collections.gpuops.remediation.plugins.module_utils.journal._reader import read_journal
from ansible_collections.gpuops.remediation.plugins.module_utils.kill import _terminate
from ansible_collections.gpuops.remediation.plugins.module_utils.kill._protect import Policy, terminate_permitted
from ansible_collections.gpuops.remediation.plugins.module_utils.kill._terminate import Target, send_checked

from ansible_collections.gpuops.remediation.tests.unit.helpers import bounded


def test_sleeper_killed_by_term(spawn, tmp_path, procs):
    proc = spawn(["sleep", "60"])
    target = procs.target_for(proc.pid, "holds GPU 0")
    journal = Journal(str(tmp_path / "log" / "journal.jsonl"), run_id="run1")
    result = terminate_permitted([target], Policy(), grace=5.0, journal=journal)
    assert result["skipped"] == []
    [entry] = result["signalled"]
    assert entry["pid"] == proc.pid and entry["start_time"] == target.start_time and entry["name"] == "sleep"
    assert entry["signals"] == ["TERM"] and entry["exited"] is True and entry["seconds"] < 2.0
    # We never reaped it, so it is our zombie, and it is reported with us as its parent.
    assert [(z["pid"], z["parent"]["pid"]) for z in result["zombies"]] == [(proc.pid, os.getpid())]
    assert bounded.wait(proc, "proc") == -signal.SIGTERM
    records = read_journal(journal.path)
    assert [(r["phase"], r["action"], r.get("signal")) for r in records] == [
        ("intent", "signal", "TERM"), ("outcome", "signal", "TERM")]
    assert records[0]["pid"] == proc.pid and records[0]["reason"] == "holds GPU 0"
    assert records[1]["ok"] is True and records[1]["exited"] is True
    assert records == journal.entries()


def test_term_ignored_gets_kill_at_once_without_the_grace(spawn, tmp_path, procs):
    proc = spawn(["sleep", "60"], preexec_fn=procs.ignore_term)
    threading.Thread(target=proc.wait, daemon=True).start()
    journal = Journal(str(tmp_path / "journal.jsonl"))
    grace = 5.0
    began = time.monotonic()
    result = terminate_permitted([procs.target_for(proc.pid)], Policy(), grace=grace, journal=journal)
    waited = time.monotonic() - began
    [entry] = result["signalled"]
    assert entry["signals"] == ["KILL"] and entry["exited"] is True
    assert entry["expected"] == "kill_needed" and entry["kill_follows"] == "at_once"
    assert entry["not_sent"] == [{"signal": "TERM", "why": "TERM is ignored (SigIgn): the kernel discards it"}]
    assert waited < grace
    procs.wait_until(lambda: proc.returncode is not None)
    assert proc.returncode == -signal.SIGKILL
    assert [r.get("signal") for r in read_journal(journal.path)] == ["KILL", "KILL"]


def test_term_blocked_stays_pending_through_the_grace_then_kill(spawn, procs):
    proc = spawn(["sleep", "60"], preexec_fn=procs.block_term)
    threading.Thread(target=proc.wait, daemon=True).start()
    grace = 1.0
    predicted = terminate_permitted([procs.target_for(proc.pid)], Policy(), grace=grace, check_mode=True)
    began = time.monotonic()
    result = terminate_permitted([procs.target_for(proc.pid)], Policy(), grace=grace)
    waited = time.monotonic() - began
    [entry] = result["signalled"]
    assert entry["expected"] == "pending" and entry["kill_follows"] == "after_grace"
    assert entry["signals"] == ["TERM", "KILL"] and entry["exited"] is True and grace <= waited < grace + 1.0
    assert [(e["signals"], e["expected"], e["exited"]) for e in predicted["signalled"]] == [(["TERM", "KILL"], "pending", True)]
    procs.wait_until(lambda: proc.returncode is not None)
    assert proc.returncode == -signal.SIGKILL


def test_check_mode_sends_nothing(spawn, tmp_path, procs):
    plain = spawn(["sleep", "60"])
    stubborn = spawn(["sleep", "60"], preexec_fn=procs.ignore_term)
    journal = Journal(str(tmp_path / "journal.jsonl"))
    targets = [procs.target_for(plain.pid), procs.target_for(stubborn.pid), Target(plain.pid + 100000, 1, "gone")]
    result = terminate_permitted(targets, Policy(), grace=0.5, journal=journal, check_mode=True)
    assert [(e["pid"], e["signals"], e["exited"], e["expected"]) for e in result["signalled"]] == [
        (plain.pid, ["TERM"], True, "term"), (stubborn.pid, ["KILL"], True, "kill_needed")]
    assert [s["reason"] for s in result["skipped"]] == ["exited"]
    bounded.settle(0.2, "check mode signalling nobody")
    assert plain.poll() is None and stubborn.poll() is None
    assert procs.state_of(plain.pid) == "S" and procs.state_of(stubborn.pid) == "S"
    assert not os.path.exists(journal.path)
    # The real run does what check mode predicted.
    real = terminate_permitted(targets, Policy(), grace=0.5)
    keys = ("pid", "signals", "exited", "expected", "why", "kill_follows", "not_sent")
    assert [[e[k] for k in keys] for e in real["signalled"]] == [[e[k] for k in keys] for e in result["signalled"]]


def test_shell_metacharacters_in_the_name_reach_no_shell(tmp_path, procs):
    marker = "/tmp/pwned"
    if os.path.exists(marker):
        os.unlink(marker)
    evil = "x; touch /tmp/pwned #"
    proc, line = procs.python_child("""
        import ctypes, time
        ctypes.CDLL(None).prctl(15, b"x; touch /tmp/pwned #", 0, 0, 0)
        print("ready", flush=True)
        time.sleep(60)
    """, argv0=evil)
    assert line == "ready"
    info = _process.read_process(proc.pid)
    assert info["name"] == evil[:15] and info["cmdline"][0] == evil
    journal = Journal(str(tmp_path / "journal.jsonl"))
    result = terminate_permitted([procs.target_for(proc.pid, evil)], Policy(), grace=5.0, journal=journal)
    assert result["signalled"][0]["exited"] is True
    assert bounded.wait(proc, "proc") == -signal.SIGTERM
    assert read_journal(journal.path)[0]["reason"] == evil
    assert not os.path.exists(marker)


def spawn_with_pid(spawn, pid, argv, attempts=50):
    """Start argv as a process with exactly this pid (a real pid reuse), through ns_last_pid; None if not possible.

    On a busy machine another process may take the pid between the write and the fork: try again (the pid stays
    free while nothing has it), so that the test skips only where ns_last_pid cannot be written (not root)."""
    for dummy in range(attempts):
        try:
            with open("/proc/sys/kernel/ns_last_pid", "w") as handle:
                handle.write(str(pid - 1))
        except OSError:
            return None
        proc = spawn(argv)
        if proc.pid == pid:
            return proc
        proc.kill()
        bounded.wait(proc, "proc")
        if os.path.exists("/proc/%d" % pid):
            return None  # someone else holds the pid now: it cannot be reused
    return None


def test_pid_reused_before_the_kill_is_never_signalled(spawn, procs):
    first = spawn(["sleep", "60"])
    target = procs.target_for(first.pid)
    first.kill()
    bounded.wait(first, "first")
    # Start times count clock ticks since boot: a reuse within the same tick would be indistinguishable.
    ticks = os.sysconf("SC_CLK_TCK")
    bounded.until(lambda: time.clock_gettime(time.CLOCK_BOOTTIME) * ticks > target.start_time + 1, "the next clock tick")
    second = spawn_with_pid(spawn, target.pid, ["sleep", "60"])
    if second is None:
        pytest.skip("cannot steer pid allocation here (needs root and ns_last_pid)")
    assert send_checked(target.pid, target.start_time, signal.SIGKILL).startswith("pid reused: start time ")
    result = terminate_permitted([target], Policy(), grace=0.5)
    assert result["signalled"] == [] and result["skipped"][0]["reason"].startswith("pid reused")
    bounded.settle(0.1, "no signal reaching the process that reused the pid")
    assert second.poll() is None and procs.state_of(second.pid) == "S"


def test_pid_reused_during_the_grace_is_not_sent_the_next_signal(spawn, procs):
    stubborn = spawn(["sleep", "60"], preexec_fn=procs.block_term)
    target = procs.target_for(stubborn.pid)
    outcome = {}
    worker = threading.Thread(target=lambda: outcome.update(terminate_permitted([target], Policy(), grace=1.5)))
    worker.start()
    procs.wait_until(lambda: bounded.signal_pending(stubborn.pid, signal.SIGTERM))  # TERM has been sent and is blocked; the grace is running
    stubborn.kill()
    bounded.wait(stubborn, "stubborn")
    second = spawn_with_pid(spawn, target.pid, ["sleep", "60"])
    worker.join(bounded.DEADLINE)
    assert not worker.is_alive(), "terminate_permitted did not return within %ss" % bounded.DEADLINE
    if second is None:
        pytest.skip("cannot steer pid allocation here (needs root and ns_last_pid)")
    [entry] = outcome["signalled"]
    assert entry["signals"] == ["TERM"] and entry["exited"] is True
    bounded.settle(0.1, "no KILL reaching the process that reused the pid")
    assert second.poll() is None and procs.state_of(second.pid) == "S"


def test_os_kill_path_when_pidfd_is_unavailable(spawn, monkeypatch, procs):
    monkeypatch.setattr(_terminate, "_open_pidfd", lambda pid: None)
    proc = spawn(["sleep", "60"])
    result = terminate_permitted([procs.target_for(proc.pid)], Policy(), grace=5.0)
    assert result["signalled"][0]["signals"] == ["TERM"]
    assert bounded.wait(proc, "proc") == -signal.SIGTERM


def test_leader_exited_group_is_ended_by_term_and_its_parent_is_left_alone(procs):
    parent, child = procs.leader_exited_group()
    target = procs.target_for(child)
    result = terminate_permitted([target], Policy(allow_parents=True), grace=3.0)
    assert result["skipped"] == []
    [entry] = result["signalled"]
    assert entry["pid"] == child and entry["signals"] == ["TERM"] and entry["exited"] is True
    # Now a real zombie of a parent that never reaps: only then is it reported as one.
    assert procs.state_of(child) == "Z" and _process.live_thread(child) is None
    assert [(z["pid"], z["parent"]["pid"]) for z in result["zombies"]] == [(child, parent.pid)]
    assert parent.poll() is None


def test_leader_exited_group_that_ignores_term_gets_kill(procs):
    parent, child = procs.leader_exited_group("ignores_term")
    target = procs.target_for(child)
    predicted = terminate_permitted([target], Policy(), grace=0.5, check_mode=True)
    assert predicted["signalled"][0]["signals"] == ["KILL"]
    assert _process.read_process(child)["leader_exited"] is True  # check mode sent nothing
    result = terminate_permitted([target], Policy(), grace=0.5)
    [entry] = result["signalled"]
    assert entry["signals"] == ["KILL"] and entry["exited"] is True
    assert parent.poll() is None


def test_a_signal_during_an_action_raises_so_that_finally_blocks_run():
    from ansible_collections.gpuops.remediation.plugins.module_utils._action import Interrupted, _signals_raise  # pylint: disable=import-outside-toplevel
    ran_finally = []
    with pytest.raises(Interrupted, match="SIGTERM"):
        with _signals_raise():
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                pytest.fail("SIGTERM to this process did not raise Interrupted")
            finally:
                ran_finally.append(True)
    assert ran_finally == [True]
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
