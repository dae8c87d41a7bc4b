# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The threads of a process that the scan must read on their own: those whose file table is not their leader's
(kcmp(2) compares two tables), and the live threads of a process whose leader exited."""

from __future__ import annotations

import os

# /proc/<pid>/task has 2 links plus one per thread.
_TASK_DIR_LINKS = 2
KCMP_FILES = 2
# kcmp(2) system call numbers, by machine.
_KCMP = {"x86_64": 312, "aarch64": 272, "ppc64le": 354, "ppc64": 354, "s390x": 343, "riscv64": 272}
_KCMP_CALL = []


def _kcmp_files():
    """A function (pid, tid) -> True when both use one file table, False when not, None when the kernel does not
    say (no kcmp, or not permitted); loaded once, before any worker forks."""
    if not _KCMP_CALL:
        call = None
        try:
            import ctypes  # only for kcmp
            number = _KCMP.get(os.uname().machine)
            if number is not None:
                syscall = ctypes.CDLL(None, use_errno=True).syscall
                syscall.restype = ctypes.c_long

                def kcmp(pid, tid):
                    answer = syscall(number, pid, tid, KCMP_FILES, 0, 0)
                    return None if answer < 0 else answer == 0

                call = kcmp
        except (ImportError, OSError, AttributeError):
            call = None
        _KCMP_CALL.append(call or (lambda pid, tid: None))
    return _KCMP_CALL[0]


def _other_threads(proc_dir, pid):
    """The tids of a process's threads other than its leader. /proc/<pid>/task has 2 + its thread count links:
    a single-threaded process is answered with one stat."""
    try:
        if os.stat(proc_dir + "/task").st_nlink <= _TASK_DIR_LINKS + 1:
            return []
        return [int(name) for name in os.listdir(proc_dir + "/task") if name.isdigit() and int(name) != pid]
    except OSError:
        return []


def _other_tables(proc_dir, pid, leader_fds):
    """The task dirs of the threads whose file table is neither their leader's (leader_fds: the set of the leader's
    fd names, None when they could not be read or there are none) nor one already listed.

    Where the kernel does not compare two tables (kcmp missing, or refused for a process whose capabilities the
    caller lacks), a thread whose fd numbers are exactly its leader's is taken for sharing its table (an unshared
    table that reused every number of the leader's is the one thing missed then), any other is read.
    """
    tids = _other_threads(proc_dir, pid)
    if not tids:
        return []
    same_table = _kcmp_files()
    read = [pid] if leader_fds else []
    tables = []
    for tid in tids:
        answers = [same_table(other, tid) for other in read]
        if True in answers:
            continue
        if None in answers and leader_fds:
            try:
                if set(os.listdir("%s/task/%d/fd" % (proc_dir, tid))) == leader_fds:
                    continue
            except OSError:
                continue  # gone, or not ours to read
        read.append(tid)
        tables.append("%s/task/%d" % (proc_dir, tid))
    return tables
