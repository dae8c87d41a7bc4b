# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""_terminate against real processes, real signals and the real /proc."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from ansible_collections.gpuops.remediation.plugins.module_utils import _procscan
from ansible_collections.gpuops.remediation.plugins.module_utils._journal import Journal, read_journal
from ansible_collections.gpuops.remediation.plugins.module_utils import _terminate
from ansible_collections.gpuops.remediation.plugins.module_utils._terminate import (
    Policy, Target, reap_zombie, refusal, send_checked, terminate)


def stat_fields(pid):
    """Fields 3.. of /proc/<pid>/stat (state first), or None when the pid is gone."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as handle:
            data = handle.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return None
    return data[data.rindex(")") + 2:].split()


def state_of(pid):
    fields = stat_fields(pid)
    return fields[0] if fields else None


def target_for(pid, reason="test"):
    return Target(pid, _procscan.start_time(pid), reason)


def wait_until(predicate, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met within %ss" % timeout)
        time.sleep(0.01)


@pytest.fixture
def spawn(child_env):
    """Start real processes; whatever is left at the end of the test is killed and reaped."""
    started = []

    def _spawn(argv, **kwargs):
        proc = subprocess.Popen(argv, env=child_env, **kwargs)
        started.append(proc)
        return proc

    yield _spawn
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def python_child(spawn, code, argv0=None):
    """A Python child that prints one line when it is ready; returns (proc, that line)."""
    argv = [argv0 or sys.executable, "-c", textwrap.dedent(code)]
    proc = spawn(argv, executable=sys.executable, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline().strip()
    return proc, line


def ignore_term():
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


# --- refusal -------------------------------------------------------------------------------------------

def test_pid_1_refused():
    assert refusal(target_for(1), Policy()) == "pid 1"
    result = terminate([target_for(1)], Policy(), grace=0.2)
    assert result["signalled"] == []
    assert result["skipped"][0]["pid"] == 1 and result["skipped"][0]["reason"] == "pid 1"


def test_kernel_thread_refused():
    fields = stat_fields(2)
    if not fields or not int(fields[6]) & 0x00200000:
        pytest.skip("pid 2 is not a visible kernel thread here")
    assert refusal(target_for(2), Policy()) == "kernel thread"


def test_our_parent_and_ourselves_refused():
    parent = target_for(os.getppid())
    assert refusal(parent, Policy()) == "ancestor of this Ansible run"
    assert refusal(target_for(os.getpid()), Policy()) == "ancestor of this Ansible run"
    result = terminate([parent], Policy(), grace=0.2)
    assert result["signalled"] == []
    assert result["skipped"] == [{"pid": parent.pid, "start_time": parent.start_time,
                                  "name": _procscan.read_process(parent.pid)["name"],
                                  "reason": "ancestor of this Ansible run"}]
    assert _procscan.same_process(parent.pid, parent.start_time)


def test_exited_process_refused(spawn):
    proc = spawn(["sleep", "60"])
    target = target_for(proc.pid)
    proc.kill()
    proc.wait()
    assert refusal(target, Policy()) == "exited"


def test_uninterruptible_sleep_refused(spawn, tmp_path):
    compiler = shutil.which("cc") or shutil.which("gcc")
    if not compiler:
        pytest.skip("no C compiler to build a vfork parent")
    # A vfork parent waits in TASK_KILLABLE, which /proc shows as D, until its child execs or exits.
    source = tmp_path / "vfork_parent.c"
    source.write_text("#include <unistd.h>\nint main(void) { if (vfork() == 0) { sleep(30); _exit(0); } return 0; }\n")
    binary = str(tmp_path / "vfork_parent")
    subprocess.run([compiler, "-o", binary, str(source)], check=True)
    proc = spawn([binary])
    wait_until(lambda: state_of(proc.pid) == "D")
    result = terminate([target_for(proc.pid)], Policy(), grace=0.2)
    assert result["skipped"][0]["reason"] == "unkillable: uninterruptible sleep (D)"
    assert state_of(proc.pid) == "D"
    child = int(open("/proc/%d/task/%d/children" % (proc.pid, proc.pid)).read().split()[0])
    os.kill(child, signal.SIGKILL)


def test_protected_names_users_and_display_servers(spawn):
    proc, _line = python_child(spawn, """
        import ctypes, time
        ctypes.CDLL(None).prctl(15, b"Xorg", 0, 0, 0)
        print("ready", flush=True)
        time.sleep(60)
    """)
    target = target_for(proc.pid)
    assert refusal(target, Policy()) == "display server: Xorg"
    assert refusal(target, Policy(protect_names=["Xorg"])) == "protected name: Xorg"
    assert refusal(target, Policy(allow_display=True, protect_users=["root", str(os.getuid())])).startswith(
        "protected user: ")
    assert refusal(target, Policy(allow_display=True)) is None


def test_gpu_daemon_matched_through_the_15_byte_command_name(spawn):
    proc, _line = python_child(spawn, """
        import ctypes, time
        ctypes.CDLL(None).prctl(15, b"nvidia-persistenced", 0, 0, 0)
        print("ready", flush=True)
        time.sleep(60)
    """)
    assert _procscan.read_process(proc.pid)["name"] == "nvidia-persiste"
    assert refusal(target_for(proc.pid), Policy()) == "GPU daemon: nvidia-persistenced"
    assert refusal(target_for(proc.pid), Policy(allow_daemons=True)) is None


# --- terminate -----------------------------------------------------------------------------------------

def test_sleeper_killed_by_term(spawn, tmp_path):
    proc = spawn(["sleep", "60"])
    target = target_for(proc.pid, "holds GPU 0")
    journal = Journal(str(tmp_path / "log" / "journal.jsonl"), run_id="run1")
    result = terminate([target], Policy(), grace=5.0, journal=journal)
    assert result["skipped"] == []
    [entry] = result["signalled"]
    assert entry["pid"] == proc.pid and entry["start_time"] == target.start_time and entry["name"] == "sleep"
    assert entry["signals"] == ["TERM"] and entry["exited"] is True and entry["seconds"] < 2.0
    # We never reaped it, so it is our zombie, and it is reported with us as its parent.
    assert [(z["pid"], z["parent"]["pid"]) for z in result["zombies"]] == [(proc.pid, os.getpid())]
    assert proc.wait() == -signal.SIGTERM
    records = read_journal(journal.path)
    assert [(r["phase"], r["action"], r.get("signal")) for r in records] == [
        ("intent", "signal", "TERM"), ("outcome", "signal", "TERM")]
    assert records[0]["pid"] == proc.pid and records[0]["reason"] == "holds GPU 0"
    assert records[1]["ok"] is True and records[1]["exited"] is True
    assert records == journal.entries()


def test_term_ignored_then_kill_after_grace(spawn):
    proc = spawn(["sleep", "60"], preexec_fn=ignore_term)
    threading.Thread(target=proc.wait, daemon=True).start()
    grace = 1.0
    began = time.monotonic()
    result = terminate([target_for(proc.pid)], Policy(), grace=grace)
    waited = time.monotonic() - began
    [entry] = result["signalled"]
    assert entry["signals"] == ["TERM", "KILL"] and entry["exited"] is True
    assert grace <= waited < grace + 1.0
    assert grace <= entry["seconds"] < grace + 1.0
    wait_until(lambda: proc.returncode is not None)
    assert proc.returncode == -signal.SIGKILL


def test_wrong_start_time_survives_as_reused(spawn):
    proc = spawn(["sleep", "60"])
    real = _procscan.start_time(proc.pid)
    result = terminate([Target(proc.pid, real - 1, "stale snapshot")], Policy(), grace=0.5)
    assert result["signalled"] == []
    assert result["skipped"][0]["reason"] == "pid reused: start time %d, expected %d" % (real, real - 1)
    time.sleep(0.1)
    assert proc.poll() is None and state_of(proc.pid) == "S"


def test_check_mode_sends_nothing(spawn, tmp_path):
    plain = spawn(["sleep", "60"])
    stubborn = spawn(["sleep", "60"], preexec_fn=ignore_term)
    journal = Journal(str(tmp_path / "journal.jsonl"))
    targets = [target_for(plain.pid), target_for(stubborn.pid), Target(plain.pid + 100000, 1, "gone")]
    result = terminate(targets, Policy(), grace=0.5, journal=journal, check_mode=True)
    assert [(e["pid"], e["signals"], e["exited"]) for e in result["signalled"]] == [
        (plain.pid, ["TERM"], True), (stubborn.pid, ["TERM", "KILL"], True)]
    assert [s["reason"] for s in result["skipped"]] == ["exited"]
    time.sleep(0.2)
    assert plain.poll() is None and stubborn.poll() is None
    assert state_of(plain.pid) == "S" and state_of(stubborn.pid) == "S"
    assert not os.path.exists(journal.path)
    # The real run does what check mode predicted.
    real = terminate(targets, Policy(), grace=0.5)
    assert [(e["pid"], e["signals"]) for e in real["signalled"]] == [
        (e["pid"], e["signals"]) for e in result["signalled"]]


def test_shell_metacharacters_in_the_name_reach_no_shell(spawn, tmp_path):
    marker = "/tmp/pwned"
    if os.path.exists(marker):
        os.unlink(marker)
    evil = "x; touch /tmp/pwned #"
    proc, line = python_child(spawn, """
        import ctypes, time
        ctypes.CDLL(None).prctl(15, b"x; touch /tmp/pwned #", 0, 0, 0)
        print("ready", flush=True)
        time.sleep(60)
    """, argv0=evil)
    assert line == "ready"
    info = _procscan.read_process(proc.pid)
    assert info["name"] == evil[:15] and info["cmdline"][0] == evil
    journal = Journal(str(tmp_path / "journal.jsonl"))
    result = terminate([target_for(proc.pid, evil)], Policy(), grace=5.0, journal=journal)
    assert result["signalled"][0]["exited"] is True
    assert proc.wait() == -signal.SIGTERM
    assert read_journal(journal.path)[0]["reason"] == evil
    assert not os.path.exists(marker)


def spawn_with_pid(spawn, pid, argv):
    """Start argv as a process with exactly this pid (a real pid reuse), through ns_last_pid; None if not possible."""
    try:
        with open("/proc/sys/kernel/ns_last_pid", "w") as handle:
            handle.write(str(pid - 1))
    except OSError:
        return None
    proc = spawn(argv)
    return proc if proc.pid == pid else None


def test_pid_reused_before_the_kill_is_never_signalled(spawn):
    first = spawn(["sleep", "60"])
    target = target_for(first.pid)
    first.kill()
    first.wait()
    time.sleep(0.05)  # start times count clock ticks (10 ms): a reuse within one tick is indistinguishable
    second = spawn_with_pid(spawn, target.pid, ["sleep", "60"])
    if second is None:
        pytest.skip("cannot steer pid allocation here (needs root and ns_last_pid)")
    assert send_checked(target.pid, target.start_time, signal.SIGKILL).startswith("pid reused: start time ")
    result = terminate([target], Policy(), grace=0.5)
    assert result["signalled"] == [] and result["skipped"][0]["reason"].startswith("pid reused")
    time.sleep(0.1)
    assert second.poll() is None and state_of(second.pid) == "S"


def test_pid_reused_during_the_grace_is_not_sent_the_next_signal(spawn):
    stubborn = spawn(["sleep", "60"], preexec_fn=ignore_term)
    target = target_for(stubborn.pid)
    outcome = {}
    worker = threading.Thread(target=lambda: outcome.update(terminate([target], Policy(), grace=1.5)))
    worker.start()
    wait_until(lambda: _signal_mask_has_pending_or_ignored(stubborn.pid))
    time.sleep(0.2)  # TERM has been sent and ignored; the grace is running
    stubborn.kill()
    stubborn.wait()
    second = spawn_with_pid(spawn, target.pid, ["sleep", "60"])
    worker.join()
    if second is None:
        pytest.skip("cannot steer pid allocation here (needs root and ns_last_pid)")
    [entry] = outcome["signalled"]
    assert entry["signals"] == ["TERM"] and entry["exited"] is True
    time.sleep(0.1)
    assert second.poll() is None and state_of(second.pid) == "S"


def _signal_mask_has_pending_or_ignored(pid):
    with open("/proc/%d/status" % pid) as handle:
        return any(line.startswith("SigIgn:") and int(line.split()[1], 16) & (1 << (signal.SIGTERM - 1))
                   for line in handle)


def test_os_kill_path_when_pidfd_is_unavailable(spawn, monkeypatch):
    monkeypatch.setattr(_terminate, "_open_pidfd", lambda pid: None)
    proc = spawn(["sleep", "60"])
    result = terminate([target_for(proc.pid)], Policy(), grace=5.0)
    assert result["signalled"][0]["signals"] == ["TERM"]
    assert proc.wait() == -signal.SIGTERM


# --- zombies -------------------------------------------------------------------------------------------

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


def zombie_with_parent(spawn, mode):
    proc = spawn([sys.executable, "-c", textwrap.dedent(ZOMBIE_PARENT), mode], stdout=subprocess.PIPE, text=True)
    zombie = int(proc.stdout.readline())
    assert state_of(zombie) == "Z"
    return proc, zombie


def test_zombie_reaped_by_sigchld_to_its_parent(spawn, tmp_path):
    parent, zombie = zombie_with_parent(spawn, "reaps")
    journal = Journal(str(tmp_path / "journal.jsonl"))
    result = reap_zombie(zombie, _procscan.start_time(zombie), Policy(), grace=3.0, journal=journal)
    assert result["reaped_by"] == "sigchld" and result["gone"] is True and result["parent_signalled"] is True
    assert result["parent"]["pid"] == parent.pid
    assert state_of(zombie) is None
    assert parent.poll() is None
    assert [(r["phase"], r["signal"]) for r in read_journal(journal.path)] == [("intent", "CHLD"), ("outcome", "CHLD")]


def test_zombie_of_a_parent_that_never_reaps(spawn):
    parent, zombie = zombie_with_parent(spawn, "never")
    born = _procscan.start_time(zombie)
    kept = reap_zombie(zombie, born, Policy(), grace=0.5)
    assert kept["reaped_by"] is None and kept["gone"] is False
    assert kept["parent_signalled"] is True  # SIGCHLD was sent: the run did something, though it stays
    assert "SIGCHLD did not reap it" in kept["reason"]
    assert state_of(zombie) == "Z" and parent.poll() is None

    predicted = reap_zombie(zombie, born, Policy(allow_parents=True), grace=0.5, check_mode=True)
    assert predicted["reaped_by"] == "parent_terminated" and predicted["parent_signalled"] is True
    assert state_of(zombie) == "Z" and parent.poll() is None

    # init reaps orphans on its own schedule (up to ~2 s on some VMs), hence the longer grace.
    done = reap_zombie(zombie, born, Policy(allow_parents=True), grace=4.0)
    assert done["reaped_by"] == "parent_terminated" and done["gone"] is True
    assert done["parent_result"]["signalled"][0]["pid"] == parent.pid
    assert done["parent_result"]["signalled"][0]["signals"] == ["TERM"]
    assert parent.wait() == -signal.SIGTERM
    assert state_of(zombie) is None


def test_zombie_whose_parent_is_this_run_is_left_alone(spawn):
    proc = spawn(["true"])
    wait_until(lambda: state_of(proc.pid) == "Z")
    result = reap_zombie(proc.pid, _procscan.start_time(proc.pid), Policy(allow_parents=True), grace=0.2)
    assert result["reaped_by"] is None
    assert result["reason"] == "parent refused: ancestor of this Ansible run"
    assert result["parent_signalled"] is False
    assert result["parent"]["pid"] == os.getpid()
    assert state_of(proc.pid) == "Z"


def test_terminate_reports_a_target_that_already_is_a_zombie(spawn):
    proc = spawn(["true"])
    wait_until(lambda: state_of(proc.pid) == "Z")
    result = terminate([target_for(proc.pid)], Policy(), grace=0.2)
    assert result["signalled"] == []
    assert result["skipped"][0]["reason"].startswith("zombie")
    assert result["zombies"][0]["pid"] == proc.pid and result["zombies"][0]["parent"]["pid"] == os.getpid()


# --- a thread group whose leader exited: alive, not a zombie ----------------------------------------------

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


def leader_exited_group(spawn, mode="plain"):
    """(the never-reaping parent's Popen, the pid of its leader-exited child)."""
    parent = spawn([sys.executable, "-c", textwrap.dedent(LEADER_EXITED_PARENT), mode], stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    assert state_of(child) == "Z"  # the leader's stat
    return parent, child


def test_leader_exited_group_is_running_not_a_zombie(spawn):
    parent, child = leader_exited_group(spawn)
    try:
        info = _procscan.read_process(child)
        assert info["leader_exited"] is True and info["state"] == "S"
        assert refusal(target_for(child), Policy()) is None
        assert _terminate._exit_state(child, info["start_time"]) is None  # pylint: disable=protected-access
    finally:
        os.kill(child, signal.SIGKILL)
    assert parent.poll() is None


def test_leader_exited_group_is_ended_by_term_and_its_parent_is_left_alone(spawn):
    parent, child = leader_exited_group(spawn)
    target = target_for(child)
    result = terminate([target], Policy(allow_parents=True), grace=3.0)
    assert result["skipped"] == []
    [entry] = result["signalled"]
    assert entry["pid"] == child and entry["signals"] == ["TERM"] and entry["exited"] is True
    # Now a real zombie of a parent that never reaps: only then is it reported as one.
    assert state_of(child) == "Z" and _procscan.live_thread(child) is None
    assert [(z["pid"], z["parent"]["pid"]) for z in result["zombies"]] == [(child, parent.pid)]
    assert parent.poll() is None


def test_leader_exited_group_that_ignores_term_gets_kill(spawn):
    parent, child = leader_exited_group(spawn, "ignores_term")
    target = target_for(child)
    predicted = terminate([target], Policy(), grace=0.5, check_mode=True)
    assert predicted["signalled"][0]["signals"] == ["TERM", "KILL"]
    assert _procscan.read_process(child)["leader_exited"] is True  # check mode sent nothing
    result = terminate([target], Policy(), grace=0.5)
    [entry] = result["signalled"]
    assert entry["signals"] == ["TERM", "KILL"] and entry["exited"] is True
    assert parent.poll() is None


def test_reap_zombie_refuses_a_leader_exited_group_and_never_touches_its_parent(spawn, tmp_path):
    parent, child = leader_exited_group(spawn)
    born = _procscan.start_time(child)
    journal = Journal(str(tmp_path / "journal.jsonl"))
    for check_mode in (True, False):
        result = reap_zombie(child, born, Policy(allow_parents=True), grace=0.5, journal=journal, check_mode=check_mode)
        assert result["reaped_by"] is None and result["gone"] is False and result["parent_result"] is None
        assert result["parent_signalled"] is False
        assert result["reason"].startswith("not a zombie: its leader exited")
    assert read_journal(journal.path) == []
    assert parent.poll() is None and _procscan.read_process(child)["leader_exited"] is True
    os.kill(child, signal.SIGKILL)


def test_a_zombie_whose_parent_supervises_others_never_gets_that_parent_ended(spawn):
    # What a zombie rank of a Slurm step has for a parent: slurmstepd, which never reaps it here.
    parent = spawn([sys.executable, "-c", textwrap.dedent("""
        import os, time
        with open("/proc/self/comm", "w") as handle:
            handle.write("slurmstepd")
        child = os.fork()
        if child == 0:
            os._exit(0)
        print(child, flush=True)
        time.sleep(60)
    """)], stdout=subprocess.PIPE, text=True)
    zombie = int(parent.stdout.readline())
    wait_until(lambda: state_of(zombie) == "Z")
    born = _procscan.start_time(zombie)
    predicted = reap_zombie(zombie, born, Policy(allow_parents=True), grace=0.5, check_mode=True)
    assert predicted["reaped_by"] is None
    real = reap_zombie(zombie, born, Policy(allow_parents=True), grace=0.5)
    assert real["reaped_by"] is None and real["parent_result"] is None
    assert "its parent slurmstepd supervises others and is never ended" in real["reason"]
    assert parent.poll() is None and state_of(zombie) == "Z"


def test_a_process_this_run_may_not_signal_is_refused_alike_in_check_mode_and_for_real(spawn, child_env, collections_root):
    if os.geteuid() == 0:
        # As root every process may be signalled; drop to nobody in a child to ask as an unprivileged run would.
        code = textwrap.dedent("""
            import os, sys
            sys.path.insert(0, sys.argv[2])
            from ansible_collections.gpuops.remediation.plugins.module_utils._terminate import Target, refusal, Policy
            from ansible_collections.gpuops.remediation.plugins.module_utils import _procscan
            os.setgid(65534); os.setuid(65534)
            pid = int(sys.argv[1])
            print(refusal(Target(pid, _procscan.start_time(pid)), Policy()))
        """)
        sleeper = spawn(["sleep", "30"])
        out = subprocess.run([sys.executable, "-c", code, str(sleeper.pid), collections_root], env=child_env,
                             capture_output=True, text=True, check=True).stdout.strip()
        assert out == "not permitted: this run (uid 65534) may not signal it"
    else:
        init_like = [p for p in os.listdir("/proc") if p.isdigit() and os.stat("/proc/" + p).st_uid == 0 and p != "1"]
        pid = int(init_like[0])
        assert refusal(Target(pid, _procscan.start_time(pid)), Policy()).startswith("not permitted")


def test_a_signal_during_an_action_raises_so_that_finally_blocks_run():
    from ansible_collections.gpuops.remediation.plugins.module_utils._action import Interrupted, _signals_raise  # pylint: disable=import-outside-toplevel
    ran_finally = []
    with pytest.raises(Interrupted, match="SIGTERM"):
        with _signals_raise():
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(5)
            finally:
                ran_finally.append(True)
    assert ran_finally == [True]
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
