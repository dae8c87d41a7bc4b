# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""_zombies (getting a zombie reaped through its parent) against real processes, real signals and the real /proc."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading

from ansible_collections.gpuops.remediation.plugins.module_utils.probes import _process
from ansible_collections.gpuops.remediation.plugins.module_utils.journal._writer import Journal
from ansible_collections.gpuops.remediation.plugins.module_utils.journal._reader import read_journal
from ansible_collections.gpuops.remediation.plugins.module_utils.kill._protect import Policy
from ansible_collections.gpuops.remediation.plugins.module_utils.kill._zombies import reap_zombie

from ansible_collections.gpuops.remediation.tests.unit.helpers import bounded


ZOMBIE_PARENT = """
    import os, signal, sys, time
    child = os.fork()
    if child == 0:
        os._exit(0)
    def state():
        with open("/proc/%d/stat" % child) as handle:
            return handle.read().rsplit(")", 1)[1].split()[0]
    while state() != "Z":
        time.sleep(0.01)
    if sys.argv[1] == "reaps":
        # Installed only now, so the child stays a zombie until someone sends SIGCHLD.
        signal.signal(signal.SIGCHLD, lambda signum, frame: os.waitpid(-1, os.WNOHANG))
    print(child, flush=True)
    while True:
        time.sleep(60)
"""


def zombie_with_parent(procs, mode):
    proc = procs.spawn([sys.executable, "-c", textwrap.dedent(ZOMBIE_PARENT), mode], stdout=subprocess.PIPE, text=True)
    zombie = int(bounded.line(proc, "proc"))
    assert procs.state_of(zombie) == "Z"
    return proc, zombie


def test_zombie_reaped_by_sigchld_to_its_parent(tmp_path, procs):
    parent, zombie = zombie_with_parent(procs, "reaps")
    journal = Journal(str(tmp_path / "journal.jsonl"))
    result = reap_zombie(zombie, _process.start_time(zombie), Policy(), grace=3.0, journal=journal)
    assert result["reaped_by"] == "sigchld" and result["gone"] is True and result["parent_signalled"] is True
    assert result["parent"]["pid"] == parent.pid
    assert procs.state_of(zombie) is None
    assert parent.poll() is None
    assert [(r["phase"], r["signal"]) for r in read_journal(journal.path)] == [("intent", "CHLD"), ("outcome", "CHLD")]


def test_zombie_of_a_parent_that_never_reaps(procs):
    parent, zombie = zombie_with_parent(procs, "never")
    born = _process.start_time(zombie)
    kept = reap_zombie(zombie, born, Policy(), grace=0.5)
    assert kept["reaped_by"] is None and kept["gone"] is False
    assert kept["parent_signalled"] is True  # SIGCHLD was sent: the run did something, though it stays
    assert "SIGCHLD did not reap it" in kept["reason"]
    assert procs.state_of(zombie) == "Z" and parent.poll() is None

    predicted = reap_zombie(zombie, born, Policy(allow_parents=True), grace=0.5, check_mode=True)
    assert predicted["reaped_by"] == "parent_terminated" and predicted["parent_signalled"] is True
    assert procs.state_of(zombie) == "Z" and parent.poll() is None

    # init reaps orphans on its own schedule (up to ~2 s on some VMs), hence the longer grace.
    done = reap_zombie(zombie, born, Policy(allow_parents=True), grace=4.0)
    assert done["reaped_by"] == "parent_terminated" and done["gone"] is True
    assert done["parent_result"]["signalled"][0]["pid"] == parent.pid
    assert done["parent_result"]["signalled"][0]["signals"] == ["TERM"]
    assert bounded.wait(parent, "parent") == -signal.SIGTERM
    assert procs.state_of(zombie) is None


def test_zombie_whose_parent_is_this_run_is_left_alone(spawn, procs):
    proc = spawn(["true"])
    procs.wait_until(lambda: procs.state_of(proc.pid) == "Z")
    result = reap_zombie(proc.pid, _process.start_time(proc.pid), Policy(allow_parents=True), grace=0.2)
    assert result["reaped_by"] is None
    assert result["reason"] == "parent refused: ancestor of this Ansible run"
    assert result["parent_signalled"] is False
    assert result["parent"]["pid"] == os.getpid()
    assert procs.state_of(proc.pid) == "Z"


def test_reap_zombie_refuses_a_leader_exited_group_and_never_touches_its_parent(tmp_path, procs):
    parent, child = procs.leader_exited_group()
    born = _process.start_time(child)
    journal = Journal(str(tmp_path / "journal.jsonl"))
    for check_mode in (True, False):
        result = reap_zombie(child, born, Policy(allow_parents=True), grace=0.5, journal=journal, check_mode=check_mode)
        assert result["reaped_by"] is None and result["gone"] is False and result["parent_result"] is None
        assert result["parent_signalled"] is False
        assert result["reason"].startswith("not a zombie: its leader exited")
    assert read_journal(journal.path) == []
    assert parent.poll() is None and _process.read_process(child)["leader_exited"] is True
    os.kill(child, signal.SIGKILL)


def _parent_of_a_zombie(spawn, name, live_child):
    parent = spawn([sys.executable, "-c", textwrap.dedent("""
        import os, subprocess, sys, time
        with open("/proc/self/comm", "w") as handle:
            handle.write(%r)
        worker = subprocess.Popen(["sleep", "60"]) if %r else None
        child = os.fork()
        if child == 0:
            os._exit(0)
        print(child, worker.pid if worker else 0, flush=True)
        time.sleep(60)
    """ % (name, live_child))], stdout=subprocess.PIPE, text=True)
    zombie, worker = (int(field) for field in bounded.line(parent, "parent").split())
    return parent, zombie, worker


def test_a_zombie_whose_parent_supervises_others_never_gets_that_parent_ended(spawn, procs):
    # What a zombie rank of a Slurm step has for a parent: slurmstepd, with the step's other ranks alive.
    parent, zombie, worker = _parent_of_a_zombie(spawn, "any-name", True)
    procs.wait_until(lambda: procs.state_of(zombie) == "Z")
    born = _process.start_time(zombie)
    predicted = reap_zombie(zombie, born, Policy(allow_parents=True), grace=0.5, check_mode=True)
    assert predicted["reaped_by"] is None
    real = reap_zombie(zombie, born, Policy(allow_parents=True), grace=0.5)
    assert real["reaped_by"] is None and real["parent_result"] is None
    assert "its parent any-name supervises others (1 other live process (pid %d)) and is never ended" % worker in real["reason"]
    assert parent.poll() is None and procs.state_of(zombie) == "Z"
    os.kill(worker, signal.SIGKILL)


def test_a_name_alone_makes_no_supervisor(spawn, procs):
    """A parent that calls itself slurmstepd and supervises nothing is ended when allow_parents says so."""
    parent, zombie, dummy = _parent_of_a_zombie(spawn, "slurmstepd", False)
    procs.wait_until(lambda: procs.state_of(zombie) == "Z")
    born = _process.start_time(zombie)
    predicted = reap_zombie(zombie, born, Policy(allow_parents=True), grace=0.5, check_mode=True)
    # init reaps orphans on its own schedule (up to ~2 s on some VMs), hence the longer grace.
    real = reap_zombie(zombie, born, Policy(allow_parents=True), grace=4.0)
    assert predicted["reaped_by"] == real["reaped_by"] == "parent_terminated"
    assert real["gone"] is True and real["parent_result"]["signalled"][0]["pid"] == parent.pid
    assert parent.wait(timeout=5) == -signal.SIGTERM


# A subreaper (as a node's init is to an orphan) that adopts the zombie when its parent is ended, and reaps only when
# told on stdin: an init that reaps on its own schedule, whatever the machine's speed.
LATE_ADOPTER = """
    import ctypes, os, sys, time
    ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    parent = os.fork()
    if parent == 0:
        child = os.fork()
        if child == 0:
            os._exit(0)
        print(os.getpid(), child, flush=True)
        while True:
            time.sleep(60)
    sys.stdin.readline()
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            break
    print("reaped", flush=True)
"""


def test_a_zombie_handed_to_a_slow_init_is_waited_for_as_long_as_after_sigkill(spawn, procs):
    """Once its parent is ended, the zombie's reaping is its adopter's: the wait for it is kill_grace, not the parent's
    TERM grace, so a loaded node's late reaping is not reported as a zombie that stayed."""
    adopter = spawn([sys.executable, "-c", textwrap.dedent(LATE_ADOPTER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    parent, zombie = (int(field) for field in bounded.line(adopter, "adopter").split())
    procs.wait_until(lambda: procs.state_of(zombie) == "Z", timeout=bounded.DEADLINE)
    born = _process.start_time(zombie)
    results = []
    reaper = threading.Thread(target=lambda: results.append(
        reap_zombie(zombie, born, Policy(allow_parents=True), grace=0.2, kill_grace=bounded.DEADLINE)))
    reaper.start()
    # The parent is ended and its zombie handed to the adopter, which does not reap it yet.
    procs.wait_until(lambda: (procs.stat_fields(zombie) or ["", "0"])[1] == str(adopter.pid), timeout=bounded.DEADLINE)
    bounded.settle(1.0, "reap_zombie giving up on the zombie")
    assert reaper.is_alive(), "gave up on the zombie within 1 s of its parent's end (TERM grace 0.2 s): %r" % results
    adopter.stdin.write("reap\n")
    adopter.stdin.flush()
    assert bounded.line(adopter, "adopter reaping") == "reaped"
    reaper.join(timeout=bounded.DEADLINE)
    assert not reaper.is_alive(), "reap_zombie still waiting after the adopter reaped"
    assert results[0]["reaped_by"] == "parent_terminated" and results[0]["gone"] is True
    assert [(entry["pid"], entry["signals"]) for entry in results[0]["parent_result"]["signalled"]] == [(parent, ["TERM"])]
    assert procs.state_of(zombie) is None
