# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Left behind or busy for what a command of a systemd unit's start put in the background: any ExecStart= line of a
multi-line oneshot unit (not only the last, whose pid is ExecMainPID), ExecStartPre=, ExecStartPost=; a unit whose
later lines still run; what an earlier start or a failed start left. Real processes in a real cgroup, started the way
systemd runs a unit's commands (each in a session of its own, reaped by its starter); systemctl answers with the lines
systemd prints for those commands (`systemctl show`: one `ExecStart={ ... pid=N ... }` line per command)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from ansible_collections.gpuops.remediation.plugins.module_utils.kill._left_behind import (
    BUSY, LEFT_BEHIND, StandingProbe, parse_unit_state)
from ansible_collections.gpuops.remediation.plugins.module_utils.probes import _cgroup, _process
from ansible_collections.gpuops.remediation.tests.unit.helpers import bounded

PLACE_IN_CGROUP = os.path.join(os.path.dirname(__file__), "..", "..", "..", "integration", "targets", "setup_gpuops", "files",
                               "place_in_cgroup.py")
UNIT = "model-prep.service"
UNIT_CGROUP = "/system.slice/gpuops-test-%d/%s" % (os.getpid(), UNIT)

# systemd's part: each command a process of a session of its own (setsid); a command in the background starts
# `serve` and exits; a command that runs stays (a later start line still working, a main process). Printed: one JSON
# line [[command pid, program pid or 0], ...] once every exiting command is reaped, as systemd reaps them.
STARTER = """
import json, os, sys, time
done = []
for what in json.loads(sys.argv[1]):
    read_end, write_end = os.pipe()
    command = os.fork()
    if command == 0:
        os.setsid()
        program = 0
        if what in ("background", "background_runs"):
            program = os.fork()
            if program == 0:
                time.sleep(600)
                os._exit(0)
        os.write(write_end, str(program).encode())
        if what.endswith("runs"):
            time.sleep(600)
        os._exit(0)
    os.close(write_end)
    program = int(os.read(read_end, 32) or 0)
    if not what.endswith("runs"):
        os.waitpid(command, 0)
    done.append([command, program])
print(json.dumps(done), flush=True)
time.sleep(600)
"""


def exec_line(name, pid, status=0):
    """A command's line as systemctl prints it (systemd's own format)."""
    ended = "code=exited ; status=%d" % status if pid else "code=(null) ; status=0/0"
    return ("%s={ path=/bin/sh ; argv[]=/bin/sh -c serve & ; ignore_errors=no ; start_time=[Sun 2026-12-06 20:40:01 UTC] ; "
            "stop_time=[Sun 2026-12-06 20:40:02 UTC] ; pid=%d ; %s }" % (name, pid, ended))


def systemctl(tmp_path, name, lines):
    """A systemctl that prints these lines for the unit."""
    answer = tmp_path / (name + ".txt")
    answer.write_text("".join(line + "\n" for line in lines))
    script = tmp_path / name
    script.write_text("#!/bin/sh\nexec cat %s\n" % answer)
    script.chmod(0o755)
    return str(script)


def unit_lines(active, sub, main_pid=0, exec_main_pid=0, result="success", commands=()):
    return ["LoadState=loaded", "ActiveState=%s" % active, "SubState=%s" % sub, "Result=%s" % result,
            "MainPID=%d" % main_pid, "ExecMainPID=%d" % exec_main_pid] + [exec_line(*command) for command in commands]


class _Node:
    def run_command(self, argv, **kwargs):
        run = bounded.run(argv, "systemctl", stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        return run.returncode, run.stdout, run.stderr


def standing(tmp_path, name, pid, lines):
    return StandingProbe(_Node(), systemctl=systemctl(tmp_path, name, lines)).standing(pid, unit=UNIT)


@pytest.fixture
def start(procs):
    """start(["background", "runs", ...]): the unit's commands run in order; [(command pid, program pid)], each program
    (and each command that runs) placed in the unit's control group; all ended and the cgroup removed after."""
    if os.geteuid() != 0:
        pytest.skip("not run: placing a process in a cgroup needs root")
    started = []

    def run(commands):
        starter, line = procs.python_child(STARTER.replace("sys.argv[1]", repr(json.dumps(commands))))
        pairs = [tuple(pair) for pair in json.loads(line)]
        started.append(starter)
        for (command, program), what in zip(pairs, commands):
            for pid in ([program] if program else []) + ([command] if what.endswith("runs") else []):
                started.append((pid, _process.start_time(pid)))
                placed = bounded.run([sys.executable, PLACE_IN_CGROUP, "place", UNIT_CGROUP, str(pid)], "place_in_cgroup",
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                if placed.returncode != 0:
                    pytest.skip("not run: this machine refuses the cgroup %s: %s" % (UNIT_CGROUP, placed.stderr.strip()))
        for (command, program), what in zip(pairs, commands):
            if not what.endswith("runs"):
                procs.wait_until(lambda command=command: _process.process_stat(command) is None)
        return pairs

    try:
        yield run
    finally:
        for item in started:
            if isinstance(item, tuple):
                pid, begun = item
                if _process.start_time(pid) == begun:
                    os.kill(pid, signal.SIGKILL)
                    procs.wait_until(lambda pid=pid, begun=begun: _process.start_time(pid) != begun)
            else:
                item.kill()
                bounded.wait(item, "the starter")
        bounded.run([sys.executable, PLACE_IN_CGROUP, "remove", UNIT_CGROUP], "place_in_cgroup remove")


def test_what_any_command_of_an_active_oneshot_units_start_put_in_the_background_is_busy(tmp_path, start):
    """ExecStartPre=, both ExecStart= lines and ExecStartPost= each put a program in the background; the unit is
    "active (exited)", its ExecMainPID the last start line's: every program runs in the session systemd opened for the
    command that started it, in the unit's current start, named with that command."""
    (pre, pre_program), (first, first_program), (last, last_program), (post, post_program) = start(["background"] * 4)
    assert _cgroup.attribution(first_program)["systemd_unit"] == UNIT
    assert os.getsid(first_program) == first
    lines = unit_lines("active", "exited", exec_main_pid=last, commands=(
        ("ExecStartPre", pre), ("ExecStart", first), ("ExecStart", last), ("ExecStartPost", post)))
    for program, command, label in ((pre_program, pre, "ExecStartPre= command"), (first_program, first, "start command"),
                                    (last_program, last, "start command"), (post_program, post, "ExecStartPost= command")):
        assert standing(tmp_path, "active", program, lines) == {
            "standing": BUSY, "why": "it runs in the session systemd unit %s's %s %d opened, and the unit is active (exited)"
                                     % (UNIT, label, command)}


def test_what_an_earlier_line_started_while_a_later_line_still_runs_is_busy(tmp_path, start):
    """A oneshot unit still activating: its first start line put the server in the background, its second (the main
    process now) waits for it; a simple service's ExecStartPost= helper beside its running main process."""
    (first, server), (second, dummy) = start(["background", "runs"])
    activating = unit_lines("activating", "start", main_pid=second, exec_main_pid=second,
                            commands=(("ExecStart", first), ("ExecStart", second)))
    assert standing(tmp_path, "activating", server, activating) == {
        "standing": BUSY, "why": "it runs in the session systemd unit %s's start command %d opened, and the unit is "
                                 "activating (start)" % (UNIT, first)}
    running = unit_lines("active", "running", main_pid=second, exec_main_pid=second,
                         commands=(("ExecStart", second), ("ExecStartPost", first)))
    assert standing(tmp_path, "running", server, running)["standing"] == BUSY


def test_what_a_reload_of_the_running_unit_put_in_the_background_is_busy(tmp_path, start):
    """A running service reloaded: its ExecReload= command put a helper in the background and exited; the helper works
    for the unit's current run (systemd lists the reload's pid until the unit starts again)."""
    (main, dummy), (reload, helper) = start(["runs", "background"])
    running = unit_lines("active", "running", main_pid=main, exec_main_pid=main,
                         commands=(("ExecStart", main), ("ExecReload", reload)))
    assert standing(tmp_path, "reloaded", helper, running) == {
        "standing": BUSY, "why": "it runs in the session systemd unit %s's ExecReload= command %d opened, and the unit is "
                                 "active (running)" % (UNIT, reload)}


def test_what_an_earlier_start_or_a_failed_start_left_is_left_behind(tmp_path, start):
    """The program an earlier start put in the background (systemd lists this start's commands, none of them its
    session's); a unit whose run failed and that waits to restart (activating, auto-restart: the failed run's pids are
    still listed); a unit being stopped after a failed start; a failed unit."""
    (old, old_program), (current, current_program) = start(["background", "background"])
    restarted = unit_lines("active", "exited", exec_main_pid=current, commands=(("ExecStart", current),))
    assert standing(tmp_path, "restarted", current_program, restarted)["standing"] == BUSY
    assert standing(tmp_path, "restarted", old_program, restarted) == {
        "standing": LEFT_BEHIND, "why": "its process group leader %d has exited while it lives on" % old}
    waiting = unit_lines("activating", "auto-restart", exec_main_pid=current, result="exit-code",
                         commands=(("ExecStart", current, 1),))
    assert standing(tmp_path, "waiting", current_program, waiting) == {
        "standing": LEFT_BEHIND, "why": "its systemd unit %s is activating (auto-restart, Result=exit-code): the run it was "
                                        "started by ended, and the unit waits to start again: a leftover of that run" % UNIT}
    stopping = unit_lines("deactivating", "stop-sigterm", exec_main_pid=current, result="exit-code",
                          commands=(("ExecStart", current, 1),))
    assert standing(tmp_path, "stopping", current_program, stopping)["standing"] == LEFT_BEHIND
    failed = unit_lines("failed", "failed", exec_main_pid=current, result="exit-code", commands=(("ExecStart", current, 1),))
    assert standing(tmp_path, "failed", current_program, failed) == {
        "standing": LEFT_BEHIND, "why": "its systemd unit %s is failed (systemctl show): a leftover of it" % UNIT}


def test_a_start_line_whose_failure_the_unit_ignores_still_vouches_for_its_program(tmp_path, start):
    """`ExecStart=-/bin/sh -c 'serve & exit 1'`: the line failed (status 1), the unit ignores it and is active
    (Result success): its program is the unit's."""
    ((command, program),) = start(["background"])
    ignored = unit_lines("active", "exited", exec_main_pid=command, commands=(("ExecStart", command, 1),))
    assert standing(tmp_path, "ignored", program, ignored)["standing"] == BUSY


def test_a_units_start_commands_are_read_from_systemctls_own_fields():
    """The pid is the last `; pid=` of a line (a command line's text that spells one comes before it); a command that
    has not run in this start lists nothing; an answer that says a property twice (a command line with a line break in
    it) is not systemd's word alone; an empty Result says nothing."""
    forged = exec_line("ExecStart", 812).replace("argv[]=/bin/sh -c serve & ", "argv[]=/bin/sh -c serve ; pid=4242 ; x ")
    state = parse_unit_state("\n".join(unit_lines("active", "exited", commands=(("ExecStartPre", 0),))) + "\n" + forged)
    assert state["commands"] == {812: (812, "start command")}
    assert state["result"] == "success"
    assert parse_unit_state("LoadState=loaded\nActiveState=failed\nMainPID=0\nExecStart={ argv[]=x\nActiveState=active\n") is None
    assert parse_unit_state("LoadState=loaded\nActiveState=active\nResult=\nMainPID=0\n") == {"active": "active", "main_pid": 0}
