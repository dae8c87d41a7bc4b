# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The safe-file layer attacked by a real second account: links, hard links, FIFOs, files swapped for links while root
writes, directories and files of another user, locks held by another process."""

from __future__ import annotations

import fcntl
import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import uuid

import pytest

from ansible_collections.gpuops.remediation.plugins.module_utils import _safe_files
from ansible_collections.gpuops.remediation.plugins.module_utils._lock import LockTimeout, NodeLock, flock_within, lock_holders, open_lock
from ansible_collections.gpuops.remediation.plugins.module_utils._safe_files import (
    UnsafePath, append, open_dir, path_problem, read_trusted, remove_stale_temporaries, write_atomic,
)

from ansible_collections.gpuops.remediation.tests.unit.helpers import bounded

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("useradd") or not shutil.which("runuser"),
                                reason="needs root, useradd and runuser to attack as a real second account")

VICTIM_TEXT = "root's own file\n"


@pytest.fixture(scope="module")
def mallory():
    """A real unprivileged account, removed at the end."""
    name = "gpuopsm%s" % uuid.uuid4().hex[:8]
    subprocess.run(["useradd", "-m", "-s", "/bin/sh", name], check=True, timeout=60)
    try:
        yield pwd.getpwnam(name)
    finally:
        subprocess.run(["userdel", "-r", name], check=False, capture_output=True, timeout=60)


@pytest.fixture
def stage():
    """A world-readable directory of the test's own (root's tmp_path is 0700: the second account could not reach it)."""
    path = tempfile.mkdtemp(prefix="gpuops-trust-", dir="/tmp")
    os.chmod(path, 0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


# The second account cannot run root's interpreters (pyenv under /root): it runs the system's.
USER_PYTHON = shutil.which("python3", path="/usr/bin:/bin") or "/usr/bin/python3"


def theirs_dir(stage, user):
    """A directory of the second account's own (mode 0755), as one it made in a place it may write."""
    path = os.path.join(stage, "theirs")
    os.mkdir(path, 0o755)
    os.chown(path, user.pw_uid, user.pw_gid)
    return path


def as_user(user, *argv, check=True):
    return subprocess.run(["runuser", "-u", user.pw_name, "--"] + list(argv), check=check, capture_output=True, text=True, timeout=60)


def victim(stage):
    path = os.path.join(stage, "victim")
    with open(path, "w") as handle:
        handle.write(VICTIM_TEXT)
    os.chmod(path, 0o600)
    return path


def intact(path):
    with open(path) as handle:
        text = handle.read()
    return text == VICTIM_TEXT and stat.S_IMODE(os.stat(path).st_mode) == 0o600 and os.stat(path).st_uid == 0


def sticky(stage):
    path = os.path.join(stage, "shared")
    os.mkdir(path)
    os.chmod(path, 0o1777)
    return path


def test_a_directory_of_another_user_is_refused_naming_option_path_and_owner(stage, mallory):
    target = victim(stage)
    theirs = theirs_dir(stage, mallory)
    as_user(mallory, "ln", "-s", target, os.path.join(theirs, "journal.jsonl"))
    path = os.path.join(theirs, "journal.jsonl")
    for attempt in (lambda: append(path, b"x\n", "journal_path"), lambda: write_atomic(path, "x", option="journal_path"),
                    lambda: read_trusted(path, "journal_path")):
        with pytest.raises(UnsafePath) as refused:
            attempt()
        said = str(refused.value)
        assert said.startswith("journal_path: %r is refused (at %s): it belongs to uid %d (%s)" % (path, theirs, mallory.pw_uid, mallory.pw_name))
    assert path_problem(path, "journal_path") == said  # what check mode says, making nothing
    assert intact(target)


def test_a_link_anywhere_in_the_path_is_refused(stage, mallory):
    target = victim(stage)
    real = os.path.join(stage, "real")
    os.mkdir(real, 0o700)
    os.symlink(real, os.path.join(stage, "via"))
    path = os.path.join(stage, "via", "state.json")
    with pytest.raises(UnsafePath, match="it is a symbolic link or not a directory"):
        write_atomic(path, "x", option="state_path")
    assert os.listdir(real) == []
    os.symlink(target, os.path.join(real, "state.json"))
    with pytest.raises(UnsafePath, match="state_path: .* is refused: it is a symbolic link"):
        read_trusted(os.path.join(real, "state.json"), "state_path")
    with pytest.raises(UnsafePath, match="it is a symbolic link"):
        append(os.path.join(real, "state.json"), b"x\n", "state_path")
    # write_atomic replaces a link at the last name (rename), never writes through it.
    write_atomic(os.path.join(real, "state.json"), "new\n", 0o640, option="state_path")
    assert intact(target) and not os.path.islink(os.path.join(real, "state.json"))
    assert stat.S_IMODE(os.stat(os.path.join(real, "state.json")).st_mode) == 0o640


def test_in_a_sticky_directory_a_users_link_hard_link_and_fifo_are_refused(stage, mallory):
    target = victim(stage)
    shared = sticky(stage)
    as_user(mallory, "ln", "-s", target, os.path.join(shared, "linked"))
    as_user(mallory, "mkfifo", os.path.join(shared, "fifo"))
    as_user(mallory, "sh", "-c", "echo forged > %s" % os.path.join(shared, "theirs"))
    with pytest.raises(UnsafePath, match="it is a symbolic link"):
        append(os.path.join(shared, "linked"), b"x\n", "journal_path")
    started = time.monotonic()
    with pytest.raises(UnsafePath, match="it is not a regular file"):
        append(os.path.join(shared, "fifo"), b"x\n", "journal_path")  # never blocks on a FIFO nobody reads
    assert time.monotonic() - started < 5
    with pytest.raises(UnsafePath, match="it belongs to uid %d" % mallory.pw_uid):
        append(os.path.join(shared, "theirs"), b"x\n", "journal_path")
    # Believed data is never read from a directory where others may add files, even a sticky one.
    with pytest.raises(UnsafePath, match=r"\(at %s\): others can write it \(mode 1777\)" % shared):
        read_trusted(os.path.join(shared, "theirs"), "state_path")
    os.link(target, os.path.join(shared, "hard"))  # a second name for root's file (root made it: protected_hardlinks)
    with pytest.raises(UnsafePath, match="it has 2 hard links"):
        append(os.path.join(shared, "hard"), b"x\n", "journal_path")
    assert intact(target)


def test_a_group_writable_directory_of_a_users_group_is_refused(stage, mallory):
    grouped = os.path.join(stage, "grouped")
    os.mkdir(grouped)
    os.chown(grouped, 0, mallory.pw_gid)
    os.chmod(grouped, 0o775)
    with pytest.raises(UnsafePath, match=r"group %d can write it \(mode 0775\)" % mallory.pw_gid):
        write_atomic(os.path.join(grouped, "report.md"), "x", option="dest")


def test_root_writing_while_a_user_swaps_the_name_for_a_link_never_writes_through_it(stage, mallory):
    """A child of the second account swaps report.md between a file of its own and a link to root's file as fast as it
    can while root rewrites report.md 200 times: root's file never changes, and what is left is root's own file."""
    target = victim(stage)
    shared = sticky(stage)
    path = os.path.join(shared, "report.md")
    script = ("import os, sys, time\nd, t = sys.argv[1], sys.argv[2]\nend = time.monotonic() + 60\n"
              "while time.monotonic() < end and not os.path.exists(os.path.join(d, 'stop')):\n"
              "    for make in (lambda p: os.symlink(t, p), lambda p: open(p, 'w').close()):\n"
              "        try:\n            os.unlink(os.path.join(d, 'report.md'))\n        except OSError:\n            pass\n"
              "        try:\n            make(os.path.join(d, 'report.md'))\n        except OSError:\n            pass\n")
    racer = bounded.start(["runuser", "-u", mallory.pw_name, "--", USER_PYTHON, "-c", script, shared, target])
    try:
        deadline = time.monotonic() + 30
        while not os.path.lexists(path):
            assert time.monotonic() < deadline and racer.poll() is None, "the racing child never made report.md"
            time.sleep(0.01)
        for number in range(200):
            write_atomic(path, "report %d\n" % number, 0o640, option="dest")
    finally:
        open(os.path.join(shared, "stop"), "w").close()
        bounded.wait(racer, "the racing child", timeout=90)
    assert intact(target)
    info = os.lstat(path)
    assert not stat.S_ISLNK(info.st_mode) or info.st_uid == mallory.pw_uid  # the child's link after root's last write


def test_stale_temporaries_removed_are_only_the_runs_own_regular_files(stage, mallory):
    target = victim(stage)
    shared = sticky(stage)
    path = os.path.join(shared, "gpuops.prom")
    os.symlink(target, os.path.join(shared, ".gpuops.prom.AAAAAAAA"))
    as_user(mallory, "touch", os.path.join(shared, ".gpuops.prom.BBBBBBBB"))
    open(os.path.join(shared, ".gpuops.prom.CCCCCCCC"), "w").close()
    assert remove_stale_temporaries(path, "metrics_path") == [os.path.join(shared, ".gpuops.prom.CCCCCCCC")]
    assert sorted(os.listdir(shared)) == [".gpuops.prom.AAAAAAAA", ".gpuops.prom.BBBBBBBB"]
    assert intact(target)


def test_a_lock_through_a_link_or_in_a_users_directory_is_refused_and_truncates_nothing(stage, mallory):
    """gpu_watch's lock (state_path + '.lock') as a link to a root file: refused, the file keeps its bytes."""
    target = victim(stage)
    mine = os.path.join(stage, "mine")
    os.mkdir(mine, 0o755)
    os.symlink(target, os.path.join(mine, "watch_state.json.lock"))
    with pytest.raises(UnsafePath, match="state_path: .* is refused: it is a symbolic link"):
        with NodeLock(os.path.join(mine, "watch_state.json.lock"), 1, option="state_path"):
            pass
    theirs = theirs_dir(stage, mallory)
    as_user(mallory, "touch", os.path.join(theirs, ".lock"))
    with pytest.raises(UnsafePath, match="it belongs to uid %d" % mallory.pw_uid):
        with NodeLock(os.path.join(theirs, ".lock"), 1, option="state_dir"):
            pass
    assert intact(target)


def test_a_lock_file_is_the_products_own_and_nobody_else_can_open_it(stage, mallory):
    path = os.path.join(stage, "node.lock")
    with NodeLock(path, 1, option="lock"):
        info = os.stat(path)
        assert stat.S_IMODE(info.st_mode) == 0o600 and info.st_uid == 0
        opened = as_user(mallory, USER_PYTHON, "-c", "open(%r)" % path, check=False)
        assert opened.returncode != 0 and "Permission denied" in opened.stderr


HOLDER = ("import fcntl, os, sys\nfd = os.open(sys.argv[1], os.O_RDWR)\nfcntl.flock(fd, fcntl.LOCK_EX)\n"
          "sys.stdout.write('held\\n'); sys.stdout.flush()\nsys.stdin.read()\n")


def test_a_timeout_names_the_lock_and_the_process_holding_it_and_a_dead_holder_never_blocks(stage):
    path = os.path.join(stage, "node.lock")
    os.close(open_lock(path, "lock"))
    holder = bounded.start([sys.executable, "-c", HOLDER, path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert bounded.line(holder, "the lock holder") == "held"
        fd = open_lock(path, "lock")
        try:
            assert lock_holders(fd) == [holder.pid]  # /proc/locks, by device and inode
            started = time.monotonic()
            with pytest.raises(LockTimeout) as waited:
                flock_within(fd, fcntl.LOCK_EX, 0.5, path)
            assert 0.5 <= time.monotonic() - started < 5
            assert str(waited.value).startswith("node lock %s is still held by pid %d (python" % (path, holder.pid))
        finally:
            os.close(fd)
    finally:
        holder.kill()
        bounded.wait_quietly(holder)
    # The holder died: the kernel dropped its flock, the file it left blocks nobody.
    started = time.monotonic()
    with NodeLock(path, 0.0, option="lock"):
        pass
    assert time.monotonic() - started < 1


def test_a_path_that_is_not_absolute_is_refused():
    with pytest.raises(UnsafePath, match=r"dest \(gpu_remediate_report_dir\): '~/.gpuops/reports' is not an absolute path"):
        open_dir("~/.gpuops/reports", "dest (gpu_remediate_report_dir)", create=True)


def test_a_parent_step_is_refused_never_resolved_by_name(stage, mallory):
    """shared/.. where shared is the second account's link: the kernel would go where the link points."""
    target = victim(stage)
    theirs = theirs_dir(stage, mallory)
    as_user(mallory, "ln", "-s", "/etc", os.path.join(theirs, "up"))
    for path in (os.path.join(theirs, "up", "..", "victim"), os.path.join(stage, "..", os.path.basename(stage), "victim")):
        with pytest.raises(UnsafePath, match="it has a '..' component"):
            read_trusted(path, "journal_path")
        with pytest.raises(UnsafePath, match="it has a '..' component"):
            append(path, b"x\n", "journal_path")
    assert intact(target)


def test_directories_made_have_the_mode_asked_whatever_the_umask(stage):
    old = os.umask(0o077)
    try:
        write_atomic(os.path.join(stage, "a", "b", "metrics.prom"), "x", 0o644, option="metrics_path", dir_mode=0o755)
    finally:
        os.umask(old)
    assert [stat.S_IMODE(os.stat(os.path.join(stage, *parts)).st_mode) for parts in (("a",), ("a", "b"))] == [0o755, 0o755]
    assert stat.S_IMODE(os.stat(os.path.join(stage, "a", "b", "metrics.prom")).st_mode) == 0o644
    assert read_trusted(os.path.join(stage, "a", "b", "metrics.prom"), "metrics_path") == (b"x", False)
    assert _safe_files.read_trusted(os.path.join(stage, "a", "missing"), "metrics_path") is None
