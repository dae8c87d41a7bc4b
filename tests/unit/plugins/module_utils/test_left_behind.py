# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""_left_behind (left behind or busy, and why) against real process trees and the real /proc; the leader's identity
against /proc files written as the kernel writes them; and the kill path's refusals that ask it (_protect)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys

import pytest

from ansible_collections.gpuops.remediation.plugins.module_utils.kill._left_behind import (
    BUSY, LEFT_BEHIND, StandingProbe, holder_standing, parse_unit_state, session_of)
from ansible_collections.gpuops.remediation.plugins.module_utils.kill._protect import Policy, refusal
from ansible_collections.gpuops.remediation.plugins.module_utils.probes import _cgroup
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._unit_members import UnitMembers
from ansible_collections.gpuops.remediation.tests.unit.helpers import bounded

CRASH = os.path.join(os.path.dirname(__file__), "..", "..", "..", "integration", "targets", "gpu_left_behind", "files", "crash.py")


@pytest.fixture
def crash(tmp_path, child_env):
    """crash.py's process trees (real leftovers and working programs holding a device file); all ended after."""
    device = tmp_path / "nvidia0"
    device.write_bytes(b"")
    report = tmp_path / "crash.json"
    subprocess.run([sys.executable, CRASH, str(device), str(report)], env=child_env, check=True, timeout=60)
    found = json.loads(report.read_text())
    yield found
    for pair in found["all"]:
        pid, started = (int(part) for part in pair.split(":"))
        if _start_time(pid) == started:
            os.kill(pid, signal.SIGKILL)


def _start_time(pid):
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return int(handle.read().rsplit(")", 1)[1].split()[19])
    except OSError:
        return None


def _standing(found, role):
    return [holder_standing(entry["pid"]) for entry in found[role]]


def test_leftovers_of_crashes_are_left_behind_with_the_kernels_fact(crash):
    for role in ("dataloader", "server_workers"):
        for answer in _standing(crash, role):
            assert answer["standing"] == LEFT_BEHIND
            assert answer["why"].startswith("its process group leader ") and answer["why"].endswith(" has exited while it lives on")
    [answer] = _standing(crash, "reparented")
    assert answer["standing"] == LEFT_BEHIND
    assert answer["why"].startswith("its parent exited: it was re-parented to %d (" % crash["reaper"])


def test_working_programs_are_busy_with_the_fact(crash):
    server = crash["llm_serve"][0]["pid"]
    [answer] = _standing(crash, "llm_serve")
    assert answer["standing"] == BUSY and answer["why"].startswith("it leads its own process group, started by ")
    for answer in _standing(crash, "llm_serve_worker"):
        assert answer == {"standing": BUSY, "why": "its process group leader %d (%s) runs" % (server, _comm(server))}
    [answer] = _standing(crash, "reaper_child")
    assert answer["standing"] == BUSY and answer["why"].startswith("it leads its own process group, started by %d (" % crash["reaper"])
    [answer] = _standing(crash, "daemon")
    assert answer["standing"] == BUSY and answer["why"].startswith("it leads its own session")


def test_the_servers_workers_are_left_behind_once_it_dies(crash, procs):
    server = crash["llm_serve"][0]["pid"]
    os.kill(server, signal.SIGKILL)
    procs.wait_until(lambda: _start_time(server) is None)  # its parent, a shell that reaps, takes it
    for answer in _standing(crash, "llm_serve_worker"):
        assert answer == {"standing": LEFT_BEHIND, "why": "its process group leader %d has exited while it lives on" % server}


def _comm(pid):
    with open("/proc/%d/comm" % pid) as handle:
        return handle.read().strip()


def _stat_line(pid, state, ppid, pgid, sid, start_time, name="python3"):
    fields = [state, ppid, pgid, sid] + [0] * 15 + [start_time] + [0] * 10
    return "%d (%s) %s\n" % (pid, name, " ".join(str(field) for field in fields))


def _fake_proc(tmp_path, *stats):
    root = tmp_path / "proc"
    for line in stats:
        pid = int(line.split()[0])
        (root / str(pid)).mkdir(parents=True)
        (root / str(pid) / "stat").write_text(line)
    return str(root)


def test_a_leader_started_after_the_holder_is_its_leader(tmp_path):
    """The pid of the group is there, leads a group of that id, and started after the holder (which joined its group):
    the kernel never reuses a pid that is still a group's id, so it is the leader (the real processes: below)."""
    root = _fake_proc(tmp_path, _stat_line(600, "S", 1, 600, 600, 1000), _stat_line(500, "S", 600, 500, 600, 5000),
                      _stat_line(700, "S", 600, 500, 600, 2000))
    answer = holder_standing(700, root)
    assert answer == {"standing": BUSY, "why": "its process group leader 500 (python3) runs"}


def test_a_zombie_leader_is_not_the_leader_one_that_left_its_group_still_is(tmp_path):
    zombie = _fake_proc(tmp_path / "z", _stat_line(1, "S", 0, 1, 1, 1), _stat_line(500, "Z", 1, 500, 1, 100),
                        _stat_line(700, "S", 500, 500, 1, 200))
    assert holder_standing(700, zombie)["standing"] == LEFT_BEHIND
    moved = _fake_proc(tmp_path / "m", _stat_line(1, "S", 0, 1, 1, 1), _stat_line(500, "S", 1, 900, 1, 100),
                       _stat_line(700, "S", 500, 500, 1, 200))
    # It moved to group 900 (setpgid) and runs: it has not exited (the real processes: below).
    assert holder_standing(700, moved) == {"standing": BUSY, "why": "its process group leader 500 (python3) runs, in group 900 now"}


def test_the_scheduler_and_the_init_system_come_first(tmp_path):
    root = _fake_proc(tmp_path, _stat_line(1, "S", 0, 1, 1, 1), _stat_line(700, "S", 1, 700, 700, 200))
    ended_job = {"running": False, "why": "its cgroup names Slurm job 7, but slurmd lists no such process of it on this node: a leftover"}
    assert holder_standing(700, root, job=ended_job) == {"standing": LEFT_BEHIND, "why": ended_job["why"]}
    failed = {"active": "failed", "main_pid": 0}
    assert holder_standing(700, root, unit="train.service", unit_state=lambda unit: failed) == {
        "standing": LEFT_BEHIND, "why": "its systemd unit train.service is failed (systemctl show): a leftover of it"}
    assert holder_standing(700, root, unit="session-7.scope", unit_state=lambda unit: None, session="7",
                           session_state=lambda session: "closing")["why"] == (
        "its login session 7 is closing (logind): it outlived the login")
    assert holder_standing(700, root, session="7", session_state=lambda session: "gone")["standing"] == LEFT_BEHIND
    # A forking service's daemon: re-parented to init, not a session leader, but the active unit's main process.
    daemon = _fake_proc(tmp_path / "d", _stat_line(1, "S", 0, 1, 1, 1), _stat_line(800, "S", 1, 790, 790, 300))
    assert holder_standing(800, daemon)["standing"] == LEFT_BEHIND
    assert holder_standing(800, daemon, unit="food.service", unit_state=lambda unit: {"active": "active", "main_pid": 800}) == {
        "standing": BUSY, "why": "it is the main process of systemd unit food.service, which is active"}


def test_unit_and_session_answers_are_parsed_as_systemd_prints_them():
    assert parse_unit_state("LoadState=loaded\nActiveState=failed\nMainPID=0\n") == {"active": "failed", "main_pid": 0}
    assert parse_unit_state("LoadState=not-found\nActiveState=inactive\nMainPID=0\n") is None
    assert session_of("session-c2.scope") == "c2" and session_of("user@1000.service") is None


def test_a_compute_context_in_a_graphical_login_is_no_display_server(procs):
    """Started below the display manager's main process (here: this test process), as a terminal of a lightdm or sddm
    session starts it: a compute context is refused as what it is (busy, its group leader runs), never as a display
    server; selected, it is ended."""
    holder = _below_this_test(procs)
    try:
        _refused_as_what_it_is(procs.target_for(holder))
    finally:
        os.kill(holder, signal.SIGKILL)


def _below_this_test(procs):
    """The pid of a process below this test's, as a graphical login's terminal runs below the display manager's main
    process. Its session and process group are led by a live process of the test's own, its parent: who leads the test
    run's session is not the test's to know (a job started in the background of a shell that has exited has no leader)."""
    _leader, line = procs.python_child("""
        import os, time
        os.setsid()
        child = os.fork()
        if child == 0:
            print(os.getpid(), flush=True)
            time.sleep(60)
            os._exit(0)
        os.waitpid(child, 0)
    """)
    return int(line)


def _refused_as_what_it_is(target):
    members = UnitMembers({"display-manager.service": {"id": "lightdm.service", "active": True, "main_pid": os.getpid(), "control_group": None}})
    standing = StandingProbe(None)
    compute = Policy(members=members, standing=standing)
    compute.compute_contexts = {(target.pid, target.start_time)}
    assert refusal(target, compute).startswith("busy: its process group leader ")
    assert refusal(target, compute).endswith("(end_running_jobs to end it)")
    selected = Policy(members=members, standing=standing, explicit=True)
    selected.compute_contexts = {(target.pid, target.start_time)}
    assert refusal(target, selected) is None
    # Not a compute context (Xorg draws, type G): the display manager's, refused as a display server.
    assert refusal(target, Policy(members=members, standing=standing, explicit=True)) == (
        "display server: lightdm.service (started by its main process; allow_display to end it)")


def _ticks_now():
    with open("/proc/uptime") as handle:
        return float(handle.read().split()[0]) * os.sysconf("SC_CLK_TCK")


def test_a_holder_that_joined_the_group_of_a_leader_started_after_it_is_busy(procs):
    """setpgid(0, leader) into the group of a process started later (a supervisor that groups the workers it found):
    the kernel never gives a pid still in use as a group's id to another process, so the live leader of that id is the
    group's, whatever its start time; the holder works."""
    holder = procs.spawn([sys.executable, "-c", "import os, sys, time\nprint('ready', flush=True)\n"
                          "os.setpgid(0, int(sys.stdin.readline()))\nprint('joined', flush=True)\ntime.sleep(600)"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert bounded.line(holder, "the holder") == "ready"
    procs.wait_until(lambda: _ticks_now() > _start_time(holder.pid) + 2)
    leader = procs.spawn([sys.executable, "-c", "import time\ntime.sleep(600)"], process_group=0)
    assert _start_time(leader.pid) > _start_time(holder.pid)
    holder.stdin.write("%d\n" % leader.pid)
    holder.stdin.flush()
    assert bounded.line(holder, "the holder") == "joined"
    assert os.getpgid(holder.pid) == leader.pid
    assert holder_standing(holder.pid) == {"standing": BUSY, "why": "its process group leader %d (%s) runs" % (leader.pid, _comm(leader.pid))}


class _Node:
    """Runs the node's tools (here a systemctl script that answers as the system manager does for an inactive unit)."""

    def run_command(self, argv):
        run = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=30, check=False)
        return run.returncode, run.stdout, run.stderr


def test_a_users_own_service_is_not_the_system_unit_of_the_same_name(tmp_path):
    """`systemd-run --user --unit=rsync python train.py`: its cgroup's innermost unit is rsync.service, below the user's
    manager (user@1000.service); the system's rsync.service is inactive, and says nothing of the user's: busy. The same
    name in the system manager's own tree is a leftover of that unit."""
    systemctl = tmp_path / "systemctl"
    systemctl.write_text("#!/bin/sh\nprintf 'LoadState=loaded\\nActiveState=inactive\\nMainPID=0\\n'\n")
    systemctl.chmod(0o755)
    user_service = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/rsync.service\n"
    system_service = "0::/system.slice/rsync.service\n"
    for name, cgroup, standing in (("user", user_service, BUSY), ("system", system_service, LEFT_BEHIND)):
        root = _fake_proc(tmp_path / name, _stat_line(1, "S", 0, 1, 1, 1), _stat_line(900, "S", 1, 900, 900, 100),
                          _stat_line(901, "S", 900, 900, 900, 200))
        (tmp_path / name / "proc" / "901" / "cgroup").write_text(cgroup)
        answer = StandingProbe(_Node(), systemctl=str(systemctl)).standing(901, unit="rsync.service", proc_root=root)
        assert answer["standing"] == standing, (name, answer)


MOVING_LEADER = """
import os, sys, time
worker = os.fork()
if worker == 0:
    time.sleep(600)
    os._exit(0)
print(worker, flush=True)
os.setpgid(0, int(sys.stdin.readline()))
print("moved", flush=True)
time.sleep(600)
"""


def test_a_worker_whose_group_leader_moved_to_another_group_is_busy_while_the_leader_runs(procs):
    """The leader of the worker's group calls setpgid later (into another group of its session): it has not exited, it
    is the worker's parent and runs; the kernel keeps its pid for it while the group lives, so that pid is its. Only
    once it exits is the worker left behind."""
    leader = procs.spawn([sys.executable, "-c", MOVING_LEADER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                         process_group=0)
    worker = int(bounded.line(leader, "the leader's worker"))
    worker_started = _start_time(worker)
    try:
        leader.stdin.write("%d\n" % os.getpgrp())
        leader.stdin.flush()
        assert bounded.line(leader, "the leader") == "moved"
        assert os.getpgid(leader.pid) == os.getpgrp() and os.getpgid(worker) == leader.pid
        assert holder_standing(worker) == {
            "standing": BUSY, "why": "its process group leader %d (%s) runs, in group %d now" % (leader.pid, _comm(leader.pid), os.getpgrp())}
        leader.kill()
        procs.wait_until(lambda: procs.state_of(leader.pid) in (None, "Z"))
        assert holder_standing(worker) == {"standing": LEFT_BEHIND, "why": "its process group leader %d has exited while it lives on" % leader.pid}
    finally:
        if _start_time(worker) == worker_started:
            os.kill(worker, signal.SIGKILL)


TMUX_PROGRAM = "import os, signal, sys, time\nsignal.signal(signal.SIGHUP, signal.SIG_IGN)\n" \
               "open(sys.argv[1] + '.tmp', 'w').write(str(os.getpid()))\nos.rename(sys.argv[1] + '.tmp', sys.argv[1])\ntime.sleep(600)"


def test_a_program_in_a_tmux_pane_is_busy_until_its_pane_ends(tmp_path, procs):
    """A real tmux (its server a daemon of its own session): a program a pane's shell started is a working program,
    its group and session led by that shell, which runs. When the server is killed, the shell goes; the program (which
    ignores SIGHUP, as nohup makes it) lives on with its leader gone: left behind."""
    tmux = shutil.which("tmux")
    if tmux is None:
        pytest.skip("not run: tmux is not installed")
    socket = "gpuops-test-%d" % os.getpid()
    pid_file = tmp_path / "program.pid"
    shell_command = "%s -c %s %s; :" % (sys.executable, shlex.quote(TMUX_PROGRAM), shlex.quote(str(pid_file)))
    bounded.run([tmux, "-L", socket, "-f", "/dev/null", "new-session", "-d", "sh", "-c", shell_command], "tmux new-session")
    program = started = None
    try:
        procs.wait_until(pid_file.exists)
        program = int(pid_file.read_text())
        started = _start_time(program)
        shell = int(procs.stat_fields(program)[1])  # its parent: the pane's shell
        assert os.getsid(program) == shell and os.getpgid(program) == shell
        assert holder_standing(program) == {"standing": BUSY, "why": "its process group leader %d (%s) runs" % (shell, _comm(shell))}
        bounded.run([tmux, "-L", socket, "kill-server"], "tmux kill-server")
        procs.wait_until(lambda: procs.state_of(shell) in (None, "Z"))
        assert holder_standing(program) == {"standing": LEFT_BEHIND, "why": "its process group leader %d has exited while it lives on" % shell}
    finally:
        subprocess.run([tmux, "-L", socket, "kill-server"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30, check=False)
        if program is not None and _start_time(program) == started:
            os.kill(program, signal.SIGKILL)


PIPELINE_SHELL = """
import fcntl, os, termios, time
os.setsid()
master, terminal = os.openpty()
fcntl.ioctl(terminal, termios.TIOCSCTTY, 0)  # the session's controlling terminal, as a login's shell has one
go_read, go_write = os.pipe()
leader = os.fork()
if leader == 0:  # the job's first command (cat cfg): leads the job's group, ends at once
    os.setpgid(0, 0)
    os.read(go_read, 1)
    os._exit(0)
os.setpgid(leader, leader)
server = os.fork()
if server == 0:  # the second command (serve): the shell puts it in the job's group, as job control does
    try:
        os.setpgid(0, leader)
    except OSError:
        pass
    time.sleep(600)
    os._exit(0)
os.setpgid(server, leader)
os.write(go_write, b"g")
os.waitpid(leader, 0)
print(leader, server, flush=True)
time.sleep(600)
"""


def test_a_jobs_second_command_works_on_after_the_first_ended(procs):
    """`cat cfg | serve` from a shell with job control on its terminal: the job's group is led by cat, which ends at
    once; serve, the shell's own child, works on in that group while the shell (its session leader) runs: busy. Once
    the shell is gone, serve is re-parented out of its session: left behind."""
    shell, line = procs.python_child(PIPELINE_SHELL)
    leader, server = (int(part) for part in line.split())
    started = _start_time(server)
    try:
        assert procs.state_of(leader) is None and os.getpgid(server) == leader and os.getsid(server) == shell.pid
        assert int(procs.stat_fields(server)[4]) != 0  # tty_nr: on the shell's terminal
        assert holder_standing(server) == {
            "standing": BUSY, "why": "its process group leader %d has exited, but its parent %d (%s), of its session, runs and is busy "
                                     "(it leads its own session (it started itself, as a service or a daemon does))" % (leader, shell.pid, _comm(shell.pid))}
        shell.kill()
        procs.wait_until(lambda: int(procs.stat_fields(server)[1]) != shell.pid)
        assert holder_standing(server) == {"standing": LEFT_BEHIND, "why": "its process group leader %d has exited while it lives on" % leader}
    finally:
        if _start_time(server) == started:
            os.kill(server, signal.SIGKILL)


SAME_SESSION_SUBREAPER = """
import ctypes, os, time
os.setsid()
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
ready_read, ready_write = os.pipe()
launcher = os.fork()
if launcher == 0:  # leads a group of its own, starts the worker and exits
    os.setpgid(0, 0)
    if os.fork() == 0:
        os.write(ready_write, str(os.getpid()).encode())
        time.sleep(600)
    os._exit(0)
os.waitpid(launcher, 0)  # gone: the worker is re-parented to this subreaper, of its own session
print(launcher, os.read(ready_read, 100).decode(), flush=True)
while True:
    try:
        os.wait()
    except ChildProcessError:
        time.sleep(600)
"""


def test_a_worker_a_subreaper_of_its_session_inherited_is_left_behind(procs):
    """A subreaper (prctl PR_SET_CHILD_SUBREAPER) of its own session and no terminal: the launcher it started led a
    group, started a worker and exited; the worker, re-parented to the subreaper (same session, another group, busy),
    was not started by it. No terminal, so no shell's job control put it in that group: left behind."""
    reaper, line = procs.python_child(SAME_SESSION_SUBREAPER)
    launcher, worker = (int(part) for part in line.split())
    started = _start_time(worker)
    try:
        assert int(procs.stat_fields(worker)[1]) == reaper.pid and os.getsid(worker) == reaper.pid and os.getpgid(worker) == launcher
        assert holder_standing(worker) == {"standing": LEFT_BEHIND, "why": "its process group leader %d has exited while it lives on" % launcher}
    finally:
        if _start_time(worker) == started:
            os.kill(worker, signal.SIGKILL)


DOUBLE_FORK = """
import os, sys, time
ready_read, ready_write = os.pipe()
middle = os.fork()
if middle == 0:
    os.setsid()
    if os.fork() == 0:  # the daemon: neither its group's nor its session's leader, re-parented once the middle exits
        worker = os.fork()
        if worker == 0:
            time.sleep(600)
            os._exit(0)
        os.write(ready_write, ("%d %d\\n" % (os.getpid(), worker)).encode())
        time.sleep(600)
    os._exit(0)
os.waitpid(middle, 0)  # the middle is gone: the daemon has been re-parented
print(os.read(ready_read, 100).decode().strip(), flush=True)
time.sleep(600)
"""


def _systemctl_answering(tmp_path, name, active, main_pid):
    script = tmp_path / name
    script.write_text("#!/bin/sh\nprintf 'LoadState=loaded\\nActiveState=%s\\nMainPID=%d\\n'\n" % (active, main_pid))
    script.chmod(0o755)
    return str(script)


def test_a_double_forked_daemon_and_its_workers_are_their_running_units(tmp_path, procs):
    """A classic daemon (fork, setsid, fork: it leads neither its group nor its session, both of a process that exited)
    is its unit's main process; while systemd says the unit runs - active, reloading, activating, deactivating - the
    daemon and the workers it started are the unit's, busy. Inactive, or a main process that is not theirs (a leftover
    of the unit's earlier run): left behind."""
    starter, line = procs.python_child(DOUBLE_FORK)  # its line comes once the daemon's first parent is gone
    daemon, worker = (int(part) for part in line.split())
    pairs = [(pid, _start_time(pid)) for pid in (daemon, worker)]
    try:
        assert int(procs.stat_fields(daemon)[1]) != starter.pid and os.getsid(daemon) not in (daemon, starter.pid)
        assert holder_standing(daemon)["standing"] == LEFT_BEHIND and holder_standing(worker)["standing"] == LEFT_BEHIND
        for active in ("active", "reloading", "activating", "deactivating"):
            probe = StandingProbe(_Node(), systemctl=_systemctl_answering(tmp_path, active, active, daemon))
            assert probe.standing(daemon, unit="food.service") == {
                "standing": BUSY, "why": "it is the main process of systemd unit food.service, which is %s" % active}
            assert probe.standing(worker, unit="food.service") == {
                "standing": BUSY, "why": "it was started by the main process %d of systemd unit food.service, which is %s" % (daemon, active)}
        for name, active, main_pid in (("inactive", "inactive", 0), ("other", "active", os.getpid())):
            probe = StandingProbe(_Node(), systemctl=_systemctl_answering(tmp_path, name, active, main_pid))
            assert probe.standing(worker, unit="food.service")["standing"] == LEFT_BEHIND, name
    finally:
        for pid, started in pairs:
            if _start_time(pid) == started:
                os.kill(pid, signal.SIGKILL)


def test_a_name_that_claims_a_kernel_thread_or_a_zombie_decides_nothing(procs):
    """argv and comm say `[kworker/u8:2] <defunct>` (prctl PR_SET_NAME, exec -a): a live process all the same, no kernel
    thread; busy while its group leader runs, left behind once it is re-parented after that leader died."""
    leader, line = procs.python_child("""
        import ctypes, os, time
        os.setsid()
        ctypes.CDLL(None).prctl(15, b"[kworker/u8:2]", 0, 0, 0)
        worker = os.fork()
        if worker == 0:
            time.sleep(600)
            os._exit(0)
        print(worker, flush=True)
        time.sleep(600)
    """, argv0="[kworker/u8:2] <defunct>")
    worker = int(line)
    started = _start_time(worker)
    try:
        assert _comm(worker) == "[kworker/u8:2]"
        procs.wait_until(lambda: procs.state_of(worker) == "S")  # just forked, it may still run
        assert holder_standing(worker)["standing"] == BUSY
        assert refusal(procs.target_for(worker), Policy(standing=StandingProbe(None))).startswith("busy: its process group leader %d " % leader.pid)
        leader.kill()
        procs.wait_until(lambda: int(procs.stat_fields(worker)[1]) != leader.pid)
        assert holder_standing(worker) == {"standing": LEFT_BEHIND, "why": "its process group leader %d has exited while it lives on" % leader.pid}
        assert refusal(procs.target_for(worker), Policy(standing=StandingProbe(None))) is None
    finally:
        if _start_time(worker) == started:
            os.kill(worker, signal.SIGKILL)


CONTAINER_INIT = """
import ctypes, os, sys, time
if ctypes.CDLL(None, use_errno=True).unshare(0x20000000) != 0:
    print("REFUSED unshare EPERM", flush=True)
    sys.exit(0)
init = os.fork()
if init == 0:  # pid 1 of a new PID namespace, of its own session: a container's init (tini, docker-init)
    ctypes.CDLL(None).prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG SIGKILL: the namespace ends when the test ends this process
    os.setsid()
    if os.fork() == 0:  # the application it starts, leading its own group as tini makes it
        os.setpgid(0, 0)
        if os.fork() == 0:
            os.write(1, ("worker %s\\n" % os.readlink("/proc/self")).encode())  # the host's /proc: the host's pid
            time.sleep(600)
            os._exit(0)
        os.write(1, ("app %s\\n" % os.readlink("/proc/self")).encode())
        time.sleep(600)
        os._exit(0)
    while True:
        try:
            os.wait()
        except ChildProcessError:
            time.sleep(600)
print("init", init, flush=True)
os.waitpid(init, 0)
"""


def test_a_containers_init_keeps_what_it_started_not_what_it_inherited(procs):
    """The init of a PID namespace (a container's tini) of its own session: the application it started leads its own
    group and is busy, its worker too while the application runs. When the application dies, the worker is re-parented
    to that init, of its own session, which did not start it: left behind (a namespace's init is a reaper, never the
    parent that keeps a job's command)."""
    top, first = procs.python_child(CONTAINER_INIT)
    found = dict(line.split() for line in [first, bounded.line(top, "the container"), bounded.line(top, "the container")])
    init, app, worker = (int(found[role]) for role in ("init", "app", "worker"))
    try:
        assert os.getsid(worker) == init and os.getpgid(worker) == app and int(procs.stat_fields(worker)[1]) == app
        assert holder_standing(app) == {"standing": BUSY, "why": "it leads its own process group, started by %d (%s), which runs" % (init, _comm(init))}
        assert holder_standing(worker) == {"standing": BUSY, "why": "its process group leader %d (%s) runs" % (app, _comm(app))}
        os.kill(app, signal.SIGKILL)
        procs.wait_until(lambda: int(procs.stat_fields(worker)[1]) == init)
        assert holder_standing(worker) == {"standing": LEFT_BEHIND, "why": "its process group leader %d has exited while it lives on" % app}
    finally:
        os.kill(init, signal.SIGKILL)  # the namespace ends with its init


PLACE_IN_CGROUP = os.path.join(os.path.dirname(CRASH), "..", "..", "setup_gpuops", "files", "place_in_cgroup.py")


def _script(tmp_path, name, text):
    script = tmp_path / name
    script.write_text("#!/bin/sh\n" + text)
    script.chmod(0o755)
    return str(script)


def test_cgroup_names_a_user_made_say_nothing_of_units_and_sessions(tmp_path, procs):
    """A user names the cgroups of the subtree systemd delegates to them as they like (spaces, unicode, a login
    session's scope, a failed unit's name; the kernel refuses a newline): below user@UID.service, no such name is the
    system's unit or logind's session. The same scope where logind's sessions live is the session's (the control)."""
    if os.geteuid() != 0:
        pytest.skip("not run: placing a process in a cgroup needs root")
    loginctl = _script(tmp_path, "loginctl", 'case "$1" in list-sessions) echo "c926 0 root seat0 tty2";; *) echo closing;; esac\n')
    systemctl = _script(tmp_path, "systemctl", "printf 'LoadState=loaded\\nActiveState=failed\\nMainPID=0\\n'\n")
    delegated = "/user.slice/user-0.slice/user@0.service/app.slice"
    holder, _line = procs.python_child("import os, time\nos.setsid()\nprint('ready', flush=True)\ntime.sleep(600)")
    made = []
    try:
        for path, unit, standing in (("%s/session-c926.scope" % delegated, "session-c926.scope", BUSY),
                                     ("%s/tr ain \u00fc.service" % delegated, "tr ain \u00fc.service", BUSY),
                                     ("/user.slice/user-0.slice/session-c926.scope", "session-c926.scope", LEFT_BEHIND)):
            run = bounded.run([sys.executable, PLACE_IN_CGROUP, "place", path, str(holder.pid)], "place_in_cgroup",
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            if run.returncode != 0:
                pytest.skip("not run: this machine refuses the cgroup %s: %s" % (path, run.stderr.strip()))
            made.append(path)
            assert _cgroup.attribution(holder.pid)["systemd_unit"] == unit
            answer = StandingProbe(_Node(), systemctl=systemctl, loginctl=loginctl).standing(holder.pid, unit=unit)
            assert answer["standing"] == standing, (path, answer)
    finally:
        holder.kill()
        bounded.wait(holder, "the holder")
        for path in made:
            bounded.run([sys.executable, PLACE_IN_CGROUP, "remove", path], "place_in_cgroup remove")


def test_a_session_that_opened_after_logind_was_listed_is_not_gone(tmp_path):
    """A login during the run: the session is not in logind's first listing but is in the next one. It is asked
    again before a session is called gone; one that no listing has is gone, and one logind does not answer for is
    nobody's word (None)."""
    calls = tmp_path / "listings"
    loginctl = _script(tmp_path, "loginctl", 'case "$1" in\n'
                       '  list-sessions) echo x >> %s; [ "$(wc -l < %s)" -gt 1 ] && echo "7 1000 alice seat0 tty2"; echo "3 0 root";;\n'
                       '  *) echo active;;\nesac\n' % (calls, calls))
    probe = StandingProbe(_Node(), loginctl=loginctl)
    assert probe.session_state("7") == "active"
    assert probe.session_state("9") == "gone"
    assert probe.session_state("3") == "active"
    silent = StandingProbe(_Node(), loginctl=_script(tmp_path, "silent", "exit 1\n"))
    assert silent.session_state("7") is None


def test_a_thread_group_whose_leader_exited_is_left_behind_though_its_parent_runs(procs):
    """The main thread called pthread_exit while another thread lives on (the leader's stat says Z): left behind, though
    its parent runs and never reaps it and its group's leader is alive: the thread facts come first."""
    parent, child = procs.leader_exited_group()
    assert _start_time(parent.pid) is not None and os.getsid(child) == os.getsid(parent.pid)
    assert holder_standing(child) == {"standing": LEFT_BEHIND, "why": "its thread group leader %d has exited while its threads live on" % child}


def test_an_online_session_is_no_word_a_closing_one_is(tmp_path):
    """logind's `online` (logged in, not in the foreground) and `active` say nothing: the process facts decide (here: it
    leads its own session, busy); `closing` says it outlived the login."""
    root = _fake_proc(tmp_path, _stat_line(1, "S", 0, 1, 1, 1), _stat_line(700, "S", 1, 700, 700, 200))
    for state, standing in (("online", BUSY), ("active", BUSY), ("closing", LEFT_BEHIND)):
        answer = holder_standing(700, root, unit="session-7.scope", unit_state=lambda unit: {"active": "active", "main_pid": 0},
                                 session="7", session_state=lambda session, state=state: state)
        assert answer["standing"] == standing, (state, answer)


def test_a_display_managers_process_that_draws_stays_its_display_server(procs):
    """Started below the display manager's main process (here: this test process), with a compute and a graphics context
    (type C+G, as an Xorg with a CUDA context has): ending it ends the desktop, so neither ending running programs nor
    its being a compute context ends it without allow_display. A compute context alone (type C) is no display server."""
    holder = _below_this_test(procs)
    target = procs.target_for(holder)
    members = UnitMembers({"display-manager.service": {"id": "sddm.service", "active": True, "main_pid": os.getpid(), "control_group": None}})
    try:
        for process_type, allow_display, refused in (
                ("C+G", False, "display server: sddm.service (started by its main process; allow_display to end it)"),
                ("C+G", True, None), ("C", False, None)):
            policy = Policy(members=members, standing=StandingProbe(None), end_running_jobs=True, allow_display=allow_display)
            policy.know_contexts([{"pid": holder, "start_time": target.start_time, "class": "busy", "process_type": process_type, "gpus": [0]}])
            assert refusal(target, policy) == refused, process_type
    finally:
        os.kill(holder, signal.SIGKILL)
