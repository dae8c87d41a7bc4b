# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Test scaffolding: what crashes leave holding a GPU, beside working programs, as real processes.

    crash.py DEVICE REPORT

Detaches a stand-in for the node's init: a child subreaper (prctl PR_SET_CHILD_SUBREAPER) of a session of its own,
which reaps what dies. Under it, every process named below holds DEVICE open (O_RDWR):

  dataloader      two workers of a training script that led their process group and session and exited
  server_workers  two workers of a server that led its own process group and exited; the shell that started it runs
  reparented      a process that leads its own group, whose parent exited: re-parented to the subreaper, which did
                  not start it (its session's leader, a shell, runs)
  llm_serve       a server leading its own process group, started by a shell that runs, and its two workers
  reaper_child    a process the subreaper started itself (its own process group, the subreaper's session)
  daemon          a daemon that forked, called setsid and was re-parented to the subreaper: its own session leader
  pipeline        the second command of a shell's job on its terminal (`cat cfg | serve`): the shell put it in the job's process group,
                  led by the first command, which ended; the shell (session leader, its parent) runs

REPORT gets {role: [{"pid", "start_time"}], "all": ["pid:start time", ...] (every process it started, for the
clean-up), "reaper": pid} once every holder holds DEVICE and every orphan has been re-parented; the command returns
then. Every wait is bounded and fails naming what it waited for.
"""
import ctypes
import fcntl
import json
import os
import signal
import sys
import termios
import time

PR_SET_CHILD_SUBREAPER = 36
TIMEOUT = 20.0
HELD = []

device, report = sys.argv[1:3]


def start_time(pid):
    with open("/proc/%d/stat" % pid) as stat:
        return int(stat.read().rsplit(")", 1)[1].split()[19])


def ppid_of(pid):
    with open("/proc/%d/stat" % pid) as stat:
        return int(stat.read().rsplit(")", 1)[1].split()[1])


# A subreaper that reaps its orphans until the test ends it; past this it exits on its own, so nothing outlives a run.
REAPER_LIFETIME = 1800


def reap_forever():
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
    deadline = time.monotonic() + REAPER_LIFETIME
    while time.monotonic() < deadline:
        signal.sigtimedwait({signal.SIGCHLD}, max(0.0, deadline - time.monotonic()))
        try:
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        except ChildProcessError:
            pass
    sys.exit(0)


def hold_forever(lines, role):
    HELD.append(os.open(device, os.O_RDWR))
    os.write(lines, ("%s %d %d\n" % (role, os.getpid(), start_time(os.getpid()))).encode())
    while True:
        time.sleep(3600)


def fork(body):
    """Fork a child that runs body() and never returns; the child's pid in the parent."""
    child = os.fork()
    if child == 0:
        try:
            body()
        finally:
            os._exit(0)
    return child


def worker_of(lines, role):
    return lambda: hold_forever(lines, role)


def training_script(lines, done):
    """Leads its session and group, starts two workers, tells it did, and exits (a Ctrl+C, an OOM kill)."""
    os.setsid()
    for dummy in range(2):
        fork(worker_of(lines, "dataloader"))
    os.write(done, b"s")


def server_that_dies(lines, done):
    """A shell (session leader, runs on) whose server leads its own group, starts two workers and exits."""
    os.setsid()

    def server():
        os.setpgid(0, 0)
        for dummy in range(2):
            fork(worker_of(lines, "server_workers"))
        os.write(done, b"d")
    fork(server)
    reap_forever()


def launcher_that_exits(lines, done):
    """A shell (session leader, runs on) whose launcher starts a process in a group of its own and exits."""
    os.setsid()

    def launcher():
        os.setpgid(0, 0)

        def launched():
            os.setpgid(0, 0)
            hold_forever(lines, "reparented")
        fork(launched)
        os.write(done, b"l")
    fork(launcher)
    reap_forever()


def live_server(lines):
    """A shell (session leader, runs on) that started a server leading its own group, with two workers."""
    os.setsid()

    def server():
        os.setpgid(0, 0)
        for dummy in range(2):
            fork(worker_of(lines, "llm_serve_worker"))
        hold_forever(lines, "llm_serve")
    fork(server)
    reap_forever()


def pipeline_job(lines, done):
    """A shell (session leader, runs on) with job control on its terminal: the job's first command leads its group and
    ends."""
    os.setsid()
    terminal = os.openpty()[1]
    fcntl.ioctl(terminal, termios.TIOCSCTTY, 0)  # the session's controlling terminal, as a login's shell has one
    go_read, go_write = os.pipe()

    def first():
        os.setpgid(0, 0)
        os.read(go_read, 1)
    leader = fork(first)
    os.setpgid(leader, leader)

    def second():
        try:
            os.setpgid(0, leader)
        except OSError:  # the shell already put it there
            pass
        hold_forever(lines, "pipeline")
    os.setpgid(fork(second), leader)
    os.write(go_write, b"g")
    os.waitpid(leader, 0)
    os.write(done, b"p")
    reap_forever()


def reaper_child(lines):
    os.setpgid(0, 0)
    hold_forever(lines, "reaper_child")


def daemon(lines, done):
    def daemonized():
        os.setsid()
        hold_forever(lines, "daemon")
    fork(daemonized)
    os.write(done, b"x")


def wait_for(what, test):
    deadline = time.monotonic() + TIMEOUT
    while not test():
        if time.monotonic() > deadline:
            raise SystemExit("crash.py: timed out after %.0f s waiting for %s" % (TIMEOUT, what))
        time.sleep(0.01)


def read_lines(read_end, count):
    data = b""
    deadline = time.monotonic() + TIMEOUT
    while data.count(b"\n") < count:
        if time.monotonic() > deadline:
            raise SystemExit("crash.py: timed out waiting for %d holders to hold %s (got %r)" % (count, device, data))
        data += os.read(read_end, 4096)
    return [line.split() for line in data.decode().splitlines()]


def main():
    ready_read, ready_write = os.pipe()
    if os.fork():
        os.close(ready_write)
        status = os.read(ready_read, 1)
        sys.exit(0 if status == b"y" else 1)
    os.close(ready_read)
    os.setsid()
    ctypes.CDLL(None).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    lines_read, lines = os.pipe()
    done_read, done = os.pipe()
    others = [fork(lambda: training_script(lines, done)), fork(lambda: server_that_dies(lines, done)),
              fork(lambda: launcher_that_exits(lines, done)), fork(lambda: live_server(lines)),
              fork(lambda: reaper_child(lines)), fork(lambda: daemon(lines, done)), fork(lambda: pipeline_job(lines, done))]
    holders = read_lines(lines_read, 2 + 2 + 1 + 3 + 1 + 1 + 1)
    exits = b""
    while len(exits) < 5:
        exits += os.read(done_read, 4)
    for exited in (others[0], others[5]):  # the training script and the daemon's first process: reaped, as init does
        os.waitpid(exited, 0)
    me = os.getpid()
    orphans = [int(pid) for role, pid, dummy in holders if role in ("dataloader", "reparented", "daemon")]
    wait_for("the orphans %s to be re-parented to pid %d" % (orphans, me), lambda: all(ppid_of(pid) == me for pid in orphans))
    result = {"reaper": me, "all": ["%d:%d" % (pid, start_time(pid)) for pid in [me] + others if os.path.exists("/proc/%d" % pid)]}
    for role, pid, started in holders:
        result.setdefault(role, []).append({"pid": int(pid), "start_time": int(started)})
        result["all"].append("%s:%s" % (pid, started))
    with open(report + ".tmp", "w") as handle:
        json.dump(result, handle)
    os.rename(report + ".tmp", report)
    os.write(ready_write, b"y")
    reap_forever()


main()
