# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""_signal_state: what TERM and KILL do, predicted from /proc/<pid>/status as real processes left it (fixtures), and
read_facts against live processes."""

from __future__ import annotations

import os
import signal

import pytest

from ansible_collections.gpuops.remediation.plugins.module_utils.kill._signal_state import effect, parse_status, plan, read_facts

from ansible_collections.gpuops.remediation.tests.unit.helpers import bounded

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "proc-status")
TERM_KILL = [signal.SIGTERM, signal.SIGKILL]


def facts(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return parse_status(handle.read())


@pytest.mark.parametrize("name, expected, signals, kill_follows, not_sent", [
    ("handler-running.txt", "handler", ["TERM"], "after_grace", []),
    ("handler-stopped.txt", "handler", ["TERM", "CONT"], "after_grace", []),
    ("ignores-term.txt", "kill_needed", ["KILL"], "at_once", ["TERM"]),
    ("blocks-term.txt", "pending", ["TERM", "KILL"], "after_grace", []),
    ("blocks-term-pending.txt", "pending", ["TERM", "KILL"], "after_grace", []),
    ("traced-stopped.txt", "kill_needed", ["KILL"], "at_once", ["TERM"]),
    ("pidns-init.txt", "kill_needed", ["KILL"], "at_once", ["TERM"]),
    ("frozen-v1.txt", "term", ["TERM"], "after_grace", []),
])
def test_plan_of_term_then_kill(name, expected, signals, kill_follows, not_sent):
    planned = plan(facts(name), TERM_KILL)
    assert planned["expected"] == expected
    assert planned["signals"] == signals
    assert planned["kill_follows"] == kill_follows
    assert [skip["signal"] for skip in planned["not_sent"]] == not_sent
    assert [step["send"] for step in planned["steps"]] == [expected != "kill_needed", True]


def test_the_reasons_name_the_kernel_fact():
    assert plan(facts("ignores-term.txt"), TERM_KILL)["why"] == "TERM is ignored (SigIgn): the kernel discards it"
    assert "NSpid 8551 1" in plan(facts("pidns-init.txt"), TERM_KILL)["why"]
    assert "tracer, pid 8400" in plan(facts("traced-stopped.txt"), TERM_KILL)["why"]
    assert "SigBlk" in plan(facts("blocks-term.txt"), TERM_KILL)["why"]
    assert "SIGCONT follows" in plan(facts("handler-stopped.txt"), TERM_KILL)["why"]
    assert "uninterruptible sleep (D)" in plan(facts("frozen-v1.txt"), TERM_KILL)["why"]


def test_a_namespace_init_with_a_handler_runs_it():
    init = dict(facts("pidns-init.txt"), caught=1 << (signal.SIGTERM - 1))
    assert plan(init, TERM_KILL)["expected"] == "handler"


def test_our_own_init_is_no_namespace_init():
    # NSpid with one entry: the init of our own namespace is pid 1, which _protect never signals.
    assert effect(dict(facts("pidns-init.txt"), nspid=[1]), signal.SIGTERM)[0] == "ends"


def test_stopped_default_action_also_gets_cont():
    # A stopped process acts on no signal but KILL until SIGCONT, its default action included.
    stopped = dict(facts("handler-stopped.txt"), caught=0)
    planned = plan(stopped, TERM_KILL)
    assert planned["expected"] == "term" and planned["signals"] == ["TERM", "CONT"]
    assert plan(stopped, [signal.SIGKILL])["signals"] == ["KILL"]


def test_no_kill_in_the_sequence():
    planned = plan(facts("ignores-term.txt"), [signal.SIGTERM])
    assert planned["signals"] == [] and planned["kill_follows"] == "no" and planned["expected"] == "kill_needed"
    assert plan(facts("handler-running.txt"), [signal.SIGTERM])["kill_follows"] == "no"


def test_a_longer_sequence_skips_what_cannot_act():
    ignores_both = dict(facts("ignores-term.txt"), ignored=facts("ignores-term.txt")["ignored"] | (1 << (signal.SIGINT - 1)))
    planned = plan(ignores_both, [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
    assert planned["signals"] == ["KILL"] and [s["signal"] for s in planned["not_sent"]] == ["INT", "TERM"]
    assert plan(facts("handler-running.txt"), [signal.SIGHUP, signal.SIGTERM, signal.SIGKILL])["signals"] == ["HUP"]
    assert effect(facts("handler-running.txt"), signal.SIGCHLD)[0] == "none"
    assert effect(facts("handler-running.txt"), signal.SIGTSTP)[0] == "none"


def test_frozen_then_thawed_reads_past_the_freezers_d():
    assert "uninterruptible" not in plan(facts("frozen-v1.txt"), TERM_KILL, frozen=True)["why"]


def test_read_facts_of_live_processes(procs):
    proc, line = procs.python_child("""
        import signal, threading, time
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
        print("ready", flush=True)
        time.sleep(60)
    """)
    assert line == "ready"
    procs.wait_until(lambda: read_facts(proc.pid)["state"] == "S")
    live = read_facts(proc.pid)
    assert live["blocked"] & (1 << (signal.SIGTERM - 1)) and live["nspid"] == [proc.pid]
    proc.kill()
    bounded.wait(proc, "proc")
    assert read_facts(proc.pid) is None


def test_a_thread_that_does_not_block_term_takes_it(procs):
    # A process-directed signal goes to any thread that does not block it: blocked only when every thread blocks it.
    proc, line = procs.python_child("""
        import signal, threading, time
        threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
        print("ready", flush=True)
        time.sleep(60)
    """)
    assert line == "ready"
    assert not read_facts(proc.pid)["blocked"] & (1 << (signal.SIGTERM - 1))
    proc.kill()
    bounded.wait(proc, "proc")
