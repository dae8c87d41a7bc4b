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
    # Its session and process group are led by a live process of the test's own, its parent: who leads the test run's
    # session is not the test's to know (a job started in the background of a shell that has exited has no leader).
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
    holder = int(line)
    try:
        _refused_as_what_it_is(procs.target_for(holder))
    finally:
        os.kill(holder, signal.SIGKILL)


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
