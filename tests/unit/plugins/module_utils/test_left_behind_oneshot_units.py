# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Left behind or busy for what a systemd unit's start command put in the background (`Type=oneshot`,
`RemainAfterExit=yes`, `ExecStart=/bin/sh -c 'serve &'`): the unit is "active (exited)", MainPID 0, its ExecStart
process gone, the program it started still in the unit's control group. Real processes in a real cgroup; systemctl
answers as systemd prints a oneshot unit's properties."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from ansible_collections.gpuops.remediation.plugins.module_utils.kill._left_behind import (
    BUSY, LEFT_BEHIND, StandingProbe, holder_standing, parse_unit_state)
from ansible_collections.gpuops.remediation.plugins.module_utils.probes import _cgroup, _process
from ansible_collections.gpuops.remediation.tests.unit.helpers import bounded

PLACE_IN_CGROUP = os.path.join(os.path.dirname(__file__), "..", "..", "..", "integration", "targets", "setup_gpuops", "files",
                               "place_in_cgroup.py")
UNIT = "serve-once.service"
UNIT_CGROUP = "/system.slice/gpuops-test-%d/%s" % (os.getpid(), UNIT)

# What systemd does for ExecStart: a process of a session of its own (setsid) that runs the command; here the command
# puts `serve` in the background and exits, and systemd (this starter) reaps it: serve is re-parented.
EXEC_START = """
import os, time
exec_start = os.fork()
if exec_start == 0:
    os.setsid()
    serve = os.fork()
    if serve == 0:
        time.sleep(600)
        os._exit(0)
    print(serve, os.getpid(), flush=True)
    os._exit(0)
os.waitpid(exec_start, 0)
time.sleep(600)
"""


def _systemctl(tmp_path, name, active, sub, main_pid, exec_main_pid):
    script = tmp_path / name
    script.write_text("#!/bin/sh\nprintf 'ExecMainPID=%d\\nExecMainStatus=0\\nMainPID=%d\\nLoadState=loaded\\nActiveState=%s\\n"
                      "SubState=%s\\n'\n" % (exec_main_pid, main_pid, active, sub))
    script.chmod(0o755)
    return str(script)


class _Node:
    def run_command(self, argv, **kwargs):
        run = bounded.run(argv, "systemctl", stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        return run.returncode, run.stdout, run.stderr


@pytest.fixture
def backgrounded(procs):
    """(serve's pid, its ExecStart's pid): serve placed in the unit's control group; ended and the cgroup removed after."""
    if os.geteuid() != 0:
        pytest.skip("not run: placing a process in a cgroup needs root")
    starter, line = procs.python_child(EXEC_START)
    serve, exec_start = (int(part) for part in line.split())
    started = _process.start_time(serve)
    placed = bounded.run([sys.executable, PLACE_IN_CGROUP, "place", UNIT_CGROUP, str(serve)], "place_in_cgroup",
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        if placed.returncode != 0:
            pytest.skip("not run: this machine refuses the cgroup %s: %s" % (UNIT_CGROUP, placed.stderr.strip()))
        procs.wait_until(lambda: _process.process_stat(exec_start) is None)  # reaped by its starter, as systemd does
        yield serve, exec_start
    finally:
        if _process.start_time(serve) == started:
            os.kill(serve, signal.SIGKILL)
            procs.wait_until(lambda: _process.start_time(serve) != started)
        starter.kill()
        bounded.wait(starter, "the starter")
        bounded.run([sys.executable, PLACE_IN_CGROUP, "remove", UNIT_CGROUP], "place_in_cgroup remove")


def test_what_an_active_oneshot_units_start_left_running_is_busy(tmp_path, backgrounded):
    """Its session is the one the unit's ExecStart process opened (the kernel's session id is systemd's ExecMainPID),
    and systemd says the unit is active: the unit's program, working (as an operator who wrote the unit expects)."""
    serve, exec_start = backgrounded
    assert _cgroup.attribution(serve)["systemd_unit"] == UNIT
    assert os.getsid(serve) == exec_start and _process.process_stat(serve)["ppid"] != exec_start
    assert holder_standing(serve)["standing"] == LEFT_BEHIND  # the process facts alone: its session leader exited
    for active, sub in (("active", "exited"), ("reloading", "exited"), ("deactivating", "stop")):
        probe = StandingProbe(_Node(), systemctl=_systemctl(tmp_path, active, active, sub, 0, exec_start))
        assert probe.standing(serve, unit=UNIT) == {
            "standing": BUSY, "why": "it runs in the session systemd unit %s's start command %d opened, and the unit is %s (%s)"
                                     % (UNIT, exec_start, active, sub)}


def test_what_an_earlier_start_or_a_stopped_unit_left_is_left_behind(tmp_path, backgrounded):
    """The unit started again since (its ExecMainPID is another process: KillMode=none or process kept the old one), or
    the unit is inactive or failed with the program still in its control group: left behind, by the init system's word."""
    serve, exec_start = backgrounded
    restarted = StandingProbe(_Node(), systemctl=_systemctl(tmp_path, "restarted", "active", "exited", 0, os.getpid()))
    assert restarted.standing(serve, unit=UNIT) == {
        "standing": LEFT_BEHIND, "why": "its process group leader %d has exited while it lives on" % exec_start}
    running = StandingProbe(_Node(), systemctl=_systemctl(tmp_path, "running", "active", "running", os.getpid(), exec_start))
    assert running.standing(serve, unit=UNIT)["standing"] == LEFT_BEHIND  # a main process runs, and it started none of this
    for active, sub in (("inactive", "dead"), ("failed", "failed")):
        probe = StandingProbe(_Node(), systemctl=_systemctl(tmp_path, active, active, sub, 0, exec_start))
        assert probe.standing(serve, unit=UNIT) == {
            "standing": LEFT_BEHIND, "why": "its systemd unit %s is %s (systemctl show): a leftover of it" % (UNIT, active)}


def test_a_oneshot_units_properties_are_read_as_systemd_prints_them():
    """In any order; the properties systemd did not print are not in the answer (an older systemd, a unit that never ran)."""
    assert parse_unit_state("ExecMainPID=812\nMainPID=0\nSubState=exited\nActiveState=active\nLoadState=loaded\n") == {
        "active": "active", "sub": "exited", "main_pid": 0, "exec_main_pid": 812}
    assert parse_unit_state("LoadState=loaded\nActiveState=inactive\nMainPID=0\n") == {
        "active": "inactive", "main_pid": 0}
