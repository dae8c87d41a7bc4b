# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""_protect (who may be signalled, and the triage before any signal) against real processes and the real /proc."""

from __future__ import annotations

import grp
import os
import pwd
import shutil
import signal
import subprocess
import sys
import textwrap

import pytest

from ansible_collections.gpuops.remediation.plugins.module_utils.probes import _process
from ansible_collections.gpuops.remediation.plugins.module_utils.kill import _terminate
from ansible_collections.gpuops.remediation.plugins.module_utils.kill._protect import Policy, refusal, terminate_permitted
from ansible_collections.gpuops.remediation.plugins.module_utils.kill._terminate import Target
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._unit_members import UnitMembers

from ansible_collections.gpuops.remediation.tests.unit.helpers import bounded


def test_pid_1_refused(procs):
    assert refusal(procs.target_for(1), Policy()) == "pid 1"
    result = terminate_permitted([procs.target_for(1)], Policy(), grace=0.2)
    assert result["signalled"] == []
    assert result["skipped"][0]["pid"] == 1 and result["skipped"][0]["reason"] == "pid 1"


def test_kernel_thread_refused(procs):
    fields = procs.stat_fields(2)
    if not fields or not int(fields[6]) & 0x00200000:
        pytest.skip("pid 2 is not a visible kernel thread here")
    assert refusal(procs.target_for(2), Policy()) == "kernel thread"


def test_our_parent_and_ourselves_refused(procs):
    parent = procs.target_for(os.getppid())
    assert refusal(parent, Policy()) == "ancestor of this Ansible run"
    assert refusal(procs.target_for(os.getpid()), Policy()) == "ancestor of this Ansible run"
    result = terminate_permitted([parent], Policy(), grace=0.2)
    assert result["signalled"] == []
    assert result["skipped"] == [{"pid": parent.pid, "start_time": parent.start_time,
                                  "name": _process.read_process(parent.pid)["name"],
                                  "reason": "ancestor of this Ansible run"}]
    assert _process.same_process(parent.pid, parent.start_time)


def test_exited_process_refused(spawn, procs):
    proc = spawn(["sleep", "60"])
    target = procs.target_for(proc.pid)
    proc.kill()
    bounded.wait(proc, "proc")
    assert refusal(target, Policy()) == "exited"


def test_uninterruptible_sleep_is_no_refusal_a_killable_one_ends(spawn, tmp_path, procs):
    compiler = shutil.which("cc") or shutil.which("gcc")
    if not compiler:
        pytest.skip("no C compiler to build a vfork parent")
    # A vfork parent waits in TASK_KILLABLE, which /proc shows as D, until its child execs or exits: a fatal signal
    # (TERM with its default action) ends it. D alone proves nothing.
    source = tmp_path / "vfork_parent.c"
    source.write_text("#include <unistd.h>\n#include <sys/prctl.h>\n#include <signal.h>\n"
                      "int main(void) { if (vfork() == 0) { prctl(PR_SET_PDEATHSIG, SIGKILL); sleep(30); _exit(0); } return 0; }\n")
    binary = str(tmp_path / "vfork_parent")
    subprocess.run([compiler, "-o", binary, str(source)], check=True, timeout=120)
    proc = spawn([binary])
    procs.wait_until(lambda: procs.state_of(proc.pid) == "D")
    target = procs.target_for(proc.pid)
    assert refusal(target, Policy()) is None
    predicted = terminate_permitted([target], Policy(), grace=2.0, check_mode=True)
    result = terminate_permitted([target], Policy(), grace=2.0)
    assert result["skipped"] == []
    [entry] = result["signalled"]
    assert entry["state"] == "D" and entry["expected"] == "term" and "uninterruptible sleep (D)" in entry["why"]
    assert entry["signals"] == ["TERM"] and entry["exited"] is True
    assert [(e["signals"], e["expected"]) for e in predicted["signalled"]] == [(["TERM"], "term")]
    assert bounded.wait(proc, "proc") == -signal.SIGTERM


def _named(procs, name):
    proc, _line = procs.python_child("""
        import ctypes, time
        ctypes.CDLL(None).prctl(15, %r, 0, 0, 0)
        print("ready", flush=True)
        time.sleep(60)
    """ % name.encode())
    return proc


def test_a_name_alone_protects_nothing(procs):
    """A process that calls itself Xorg or nvidia-persistenced is no display server and no GPU daemon."""
    for name in ("Xorg", "nvidia-persistenced"):
        target = procs.target_for(_named(procs, name).pid)
        assert refusal(target, Policy()) is None
        # The init system answered, and runs neither as a unit's process.
        members = UnitMembers({"display-manager.service": {"id": "gdm.service", "active": True, "main_pid": 1, "control_group": "/system.slice/gdm.service"},
                               "nvidia-persistenced.service": {"id": "nvidia-persistenced.service", "active": True, "main_pid": 1,
                                                               "control_group": "/system.slice/nvidia-persistenced.service"}})
        assert refusal(target, Policy(members=members)) is None


def test_display_server_is_the_display_managers(procs):
    """Started by the display manager unit's main process (here: this test process): a display server, whatever its name."""
    target = procs.target_for(_named(procs, "not-x-at-all").pid)
    members = UnitMembers({"display-manager.service": {"id": "gdm.service", "active": True, "main_pid": os.getpid(), "control_group": None}})
    assert refusal(target, Policy(members=members)) == "display server: gdm.service (started by its main process; allow_display to end it)"
    assert refusal(target, Policy(members=members, protect_names=["not-x-at-all"])) == "protected name: not-x-at-all"
    assert refusal(target, Policy(members=members, allow_display=True, protect_users=["root", str(os.getuid())])).startswith(
        "protected user: ")
    assert refusal(target, Policy(members=members, allow_display=True)) is None
    inactive = UnitMembers({"display-manager.service": {"id": "gdm.service", "active": False, "main_pid": os.getpid()}})
    assert refusal(target, Policy(members=inactive)) is None


def test_gpu_daemon_is_its_units_main_process(procs):
    proc = _named(procs, "some-agent")
    members = UnitMembers({"nvidia-persistenced.service": {"id": "nvidia-persistenced.service", "active": True, "main_pid": proc.pid}})
    assert refusal(procs.target_for(proc.pid), Policy(members=members)) == (
        "GPU daemon: nvidia-persistenced.service (its main process; allow_daemons to end it)")
    assert refusal(procs.target_for(proc.pid), Policy(members=members, allow_daemons=True)) is None


def test_protected_group(procs):
    """protect_users @group: the process's own groups (/proc status) hold the gid."""
    proc = _named(procs, "worker")
    group = grp.getgrgid(os.getgid()).gr_name
    assert refusal(procs.target_for(proc.pid), Policy(protect_users=["@" + group])) == "protected group: @" + group
    assert refusal(procs.target_for(proc.pid), Policy(protect_users=["@%d" % os.getgid()])) == "protected group: @%d" % os.getgid()
    other = [g for g in grp.getgrall() if g.gr_gid not in os.getgroups() and g.gr_gid != os.getgid() and
             pwd.getpwuid(os.getuid()).pw_name not in g.gr_mem]
    assert other, "the group database has a group this test process is not in"
    assert refusal(procs.target_for(proc.pid), Policy(protect_users=["@" + other[0].gr_name])) is None


def test_wrong_start_time_survives_as_reused(spawn, procs):
    proc = spawn(["sleep", "60"])
    real = _process.start_time(proc.pid)
    result = terminate_permitted([Target(proc.pid, real - 1, "stale snapshot")], Policy(), grace=0.5)
    assert result["signalled"] == []
    assert result["skipped"][0]["reason"] == "pid reused: start time %d, expected %d" % (real, real - 1)
    bounded.settle(0.1, "no signal reaching the process whose pid was reused")
    assert proc.poll() is None and procs.state_of(proc.pid) == "S"


def test_terminate_reports_a_target_that_already_is_a_zombie(spawn, procs):
    proc = spawn(["true"])
    procs.wait_until(lambda: procs.state_of(proc.pid) == "Z")
    result = terminate_permitted([procs.target_for(proc.pid)], Policy(), grace=0.2)
    assert result["signalled"] == []
    assert result["skipped"][0]["reason"].startswith("zombie")
    assert result["zombies"][0]["pid"] == proc.pid and result["zombies"][0]["parent"]["pid"] == os.getpid()


def test_leader_exited_group_is_running_not_a_zombie(procs):
    parent, child = procs.leader_exited_group()
    try:
        info = _process.read_process(child)
        assert info["leader_exited"] is True and info["state"] == "S"
        assert refusal(procs.target_for(child), Policy()) is None
        assert _terminate._exit_state(child, info["start_time"]) is None  # pylint: disable=protected-access
    finally:
        os.kill(child, signal.SIGKILL)
    assert parent.poll() is None


def test_a_process_this_run_may_not_signal_is_refused_alike_in_check_mode_and_for_real(spawn, child_env, collections_root):
    if os.geteuid() == 0:
        # As root every process may be signalled; drop to nobody in a child to ask as an unprivileged run would.
        code = textwrap.dedent("""
            import os, sys
            sys.path.insert(0, sys.argv[2])
            from ansible_collections.gpuops.remediation.plugins.module_utils.kill._protect import refusal, Policy
            from ansible_collections.gpuops.remediation.plugins.module_utils.kill._terminate import Target
            from ansible_collections.gpuops.remediation.plugins.module_utils.probes import _process
            os.setgid(65534); os.setuid(65534)
            pid = int(sys.argv[1])
            print(refusal(Target(pid, _process.start_time(pid)), Policy()))
        """)
        sleeper = spawn(["sleep", "30"])
        out = subprocess.run([sys.executable, "-c", code, str(sleeper.pid), collections_root], env=child_env,
                             capture_output=True, text=True, check=True, timeout=bounded.DEADLINE).stdout.strip()
        assert out == "not permitted: this run (uid 65534) may not signal it"
    else:
        init_like = [p for p in os.listdir("/proc") if p.isdigit() and os.stat("/proc/" + p).st_uid == 0 and p != "1"]
        pid = int(init_like[0])
        assert refusal(Target(pid, _process.start_time(pid)), Policy()).startswith("not permitted")
