# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One process read from /proc: its identity (pid and start time, so that a reused pid is never taken for the
process it was), its description (read_process), its ancestors, whether it is a kernel thread, and the boot time
that turns a start time into a date."""

from __future__ import annotations

import os
import pwd

try:
    from ansible_collections.gpuops.remediation.plugins.module_utils.probes._proc_files import _read_all
except ImportError:  # copied flat into a simulated node's lib/, or run on its own
    from _proc_files import _read_all  # type: ignore[no-redef] # pylint: disable=import-error

PF_KTHREAD = 0x00200000


def _parse_stat(data):
    """{"pid", "name", "state", "ppid", "pgid", "sid", "tty_nr", "flags", "start_time"} from the bytes of /proc/<pid>/stat.

    The comm field may hold spaces, parentheses and newlines: it ends at the LAST ')'.
    """
    open_paren = data.index(b"(")
    close_paren = data.rindex(b")")
    fields = data[close_paren + 2:].split()
    return {
        "pid": int(data[:open_paren]),
        "name": data[open_paren + 1:close_paren].decode("utf-8", "replace"),
        "state": fields[0].decode("ascii", "replace"),
        "ppid": int(fields[1]),
        "pgid": int(fields[2]),
        "sid": int(fields[3]),
        "tty_nr": int(fields[4]),
        "flags": int(fields[6]),
        "start_time": int(fields[19]),
    }


def process_stat(pid, proc_root="/proc"):
    """_parse_stat of /proc/<pid>/stat (pid, name, state, ppid, pgid, sid, tty_nr, flags, start_time), or None when it is gone."""
    return _read_stat(pid, proc_root)


def _read_stat(pid, proc_root="/proc"):
    try:
        return _parse_stat(_read_all("%s/%d/stat" % (proc_root, pid)))
    except (OSError, ValueError, IndexError):
        return None


def _parse_cmdline(data):
    """Arguments of /proc/<pid>/cmdline, exactly as given (NUL separated, a trailing NUL ends the last)."""
    if not data:
        return []
    if data.endswith(b"\0"):
        data = data[:-1]
    return [arg.decode("utf-8", "replace") for arg in data.split(b"\0")]


def _real_uid(status_bytes):
    for line in status_bytes.splitlines():
        if line.startswith(b"Uid:"):
            return int(line.split()[1])
    return None


_USER_NAMES = {}


def _user_name(uid):
    if uid is None:
        return None
    if uid not in _USER_NAMES:
        try:
            _USER_NAMES[uid] = pwd.getpwuid(uid).pw_name
        except KeyError:
            _USER_NAMES[uid] = str(uid)
    return _USER_NAMES[uid]


def live_thread(pid, proc_root="/proc"):
    """(tid, stat) of the first live thread (state other than Z and X) of pid besides its leader, or None.

    A leader in state Z with such a thread is a live thread group whose leader exited, not a zombie.
    """
    proc_dir = "%s/%d" % (proc_root, pid)
    try:
        tids = sorted(int(name) for name in os.listdir(proc_dir + "/task") if name.isdigit())
    except OSError:
        return None
    for tid in tids:
        if tid == pid:
            continue
        try:
            stat = _parse_stat(_read_all("%s/task/%d/stat" % (proc_dir, tid)))
        except (OSError, ValueError, IndexError):
            continue  # exited between the listing and the read
        if stat["state"] not in ("Z", "X"):
            return tid, stat
    return None


def read_process(pid, proc_root="/proc"):
    """{"pid", "start_time", "ppid", "name", "cmdline", "state", "uid", "user", "leader_exited"}, or None when it
    is gone.

    A process whose leader exited while other threads live on (the leader's stat says Z) is alive:
    leader_exited is True, and state and cmdline are those of a live thread (the leader's cmdline is empty).
    """
    proc_dir = "%s/%d" % (proc_root, pid)
    try:
        stat = _parse_stat(_read_all(proc_dir + "/stat"))
        cmdline = _parse_cmdline(_read_all(proc_dir + "/cmdline"))
        uid = _real_uid(_read_all(proc_dir + "/status"))
    except (OSError, ValueError, IndexError):
        return None
    state = stat["state"]
    live = live_thread(pid, proc_root) if state == "Z" else None
    if live is not None:
        tid, thread_stat = live
        state = thread_stat["state"]
        try:
            cmdline = _parse_cmdline(_read_all("%s/task/%d/cmdline" % (proc_dir, tid))) or cmdline
        except OSError:
            pass
    return {
        "pid": pid,
        "start_time": stat["start_time"],
        "ppid": stat["ppid"],
        "name": stat["name"],
        "cmdline": cmdline,
        "state": state,
        "uid": uid,
        "user": _user_name(uid),
        "leader_exited": live is not None,
    }


def start_time(pid, proc_root="/proc"):
    """Clock ticks since boot when the process started (stat field 22), or None when it is gone."""
    stat = _read_stat(pid, proc_root)
    return stat["start_time"] if stat else None


def same_process(pid, start_time, proc_root="/proc"):  # pylint: disable=redefined-outer-name
    """True when pid still names the process that started at start_time (a reused pid is another one)."""
    if start_time is None:
        return False
    stat = _read_stat(pid, proc_root)
    return stat is not None and stat["start_time"] == start_time


def ancestors(pid, proc_root="/proc"):
    """[parent, grandparent, ..., 1]; shorter when a process on the way is gone or lives outside this view."""
    chain = []
    seen = {pid}
    current = pid
    while current > 1:
        stat = _read_stat(current, proc_root)
        if stat is None or stat["ppid"] <= 0 or stat["ppid"] in seen:
            break
        current = stat["ppid"]
        chain.append(current)
        seen.add(current)
    return chain


def is_kernel_thread(pid, proc_root="/proc"):
    """True for kernel threads: PF_KTHREAD in the stat flags, or kthreadd (pid 2) and its children."""
    stat = _read_stat(pid, proc_root)
    if stat is None:
        return False
    if stat["flags"] & PF_KTHREAD:
        return True
    if pid == 2 or stat["ppid"] == 2:
        # Inside a PID namespace pid 2 is an ordinary process: trust the rule only for the real kthreadd.
        kthreadd = _read_stat(2, proc_root)
        return kthreadd is not None and kthreadd["name"] == "kthreadd" and kthreadd["ppid"] == 0
    return False


_BOOT_TIME = {}


def boot_time(proc_root="/proc"):
    """Seconds since the epoch when the node booted (btime of /proc/stat)."""
    if proc_root not in _BOOT_TIME:
        with open(proc_root + "/stat", "rb") as handle:
            for line in handle:
                if line.startswith(b"btime "):
                    _BOOT_TIME[proc_root] = int(line.split()[1])
                    break
            else:
                raise ValueError("no btime line in %s/stat" % proc_root)
    return _BOOT_TIME[proc_root]


def start_time_epoch(ticks, proc_root="/proc"):
    """A start time in clock ticks since boot, as seconds since the epoch (float)."""
    return boot_time(proc_root) + float(ticks) / os.sysconf("SC_CLK_TCK")
