# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one path by which the collection signals processes.

A process is named by (pid, start time) as seen at detection. Before every signal the pair is checked again,
so a pid that the kernel gave to a new process in the meantime is never signalled. Where the kernel and
Python allow it the signal goes through a pidfd opened before that check, which closes the last race
window; otherwise through os.kill right after the check. No shell, no kill(1).
"""

from __future__ import annotations

import os
import signal
import time

from ansible_collections.gpuops.remediation.plugins.module_utils import _procscan
from ansible_collections.gpuops.remediation.plugins.module_utils._gpu_names import DISPLAY_PROCESSES, GPU_DAEMONS, first_name_match, process_names

POLL_INTERVAL = 0.05


class Target:
    """A process to signal: pid, its start time when it was detected, and why it is targeted."""

    def __init__(self, pid, start_time, reason=""):
        self.pid = int(pid)
        self.start_time = None if start_time is None else int(start_time)
        self.reason = reason

    def __repr__(self):
        return "Target(%d, %r, %r)" % (self.pid, self.start_time, self.reason)


class Policy:
    """What may be signalled beyond the rules that always hold."""

    def __init__(self, protect_names=(), protect_users=(), protect_units=(), allow_display=False,
                 allow_daemons=False, allow_parents=False):
        self.protect_names = tuple(protect_names or ())
        self.protect_users = tuple(str(user) for user in (protect_users or ()))
        self.protect_units = tuple(protect_units or ())
        self.allow_display = allow_display
        self.allow_daemons = allow_daemons
        self.allow_parents = allow_parents


def signal_number(name):
    """'TERM', 'SIGTERM', 'term' or 15 -> 15."""
    if isinstance(name, int):
        return name
    text = str(name).upper()
    if not text.startswith("SIG"):
        text = "SIG" + text
    return int(getattr(signal, text))


def signal_name(name):
    """The short name used in results and the journal: 'TERM', 'KILL'."""
    return signal.Signals(signal_number(name)).name[3:]


# --- who is this process --------------------------------------------------------------------------------

def _names(info):
    return process_names(info.get("name"), info.get("cmdline"))


def _systemd_unit(pid):
    attribution = getattr(_procscan, "attribution", None)
    if attribution is None:
        return None
    try:
        return (attribution(pid) or {}).get("systemd_unit")
    except OSError:
        return None


def _unit_matches(unit, wanted):
    return unit == wanted or unit == wanted + ".service"


def _protection(pid, info, policy):
    """Why the policy protects this process, or None."""
    names = _names(info)
    name = first_name_match(names, policy.protect_names)
    if name:
        return "protected name: %s" % name
    for user in policy.protect_users:
        if user in (str(info.get("user")), str(info.get("uid"))):
            return "protected user: %s" % user
    if policy.protect_units:
        unit = _systemd_unit(pid)
        for wanted in policy.protect_units:
            if unit and _unit_matches(unit, wanted):
                return "protected unit: %s" % unit
    if not policy.allow_display:
        name = first_name_match(names, sorted(DISPLAY_PROCESSES))
        if name:
            return "display server: %s" % name
    if not policy.allow_daemons:
        name = first_name_match(names, sorted(GPU_DAEMONS))
        if name:
            return "GPU daemon: %s" % name
    return None


def _own_lineage(self_pid):
    return set(_procscan.ancestors(self_pid) or ()) | {self_pid}


def refusal(target, policy, self_pid=None):
    """None when target may be signalled, else why not. The checks run in the documented order."""
    self_pid = os.getpid() if self_pid is None else self_pid
    pid = target.pid
    if pid == 1:
        return "pid 1"
    if pid < 1:
        return "invalid pid %d" % pid
    if _procscan.is_kernel_thread(pid):
        return "kernel thread"
    info = _procscan.read_process(pid)
    if info is None:
        return "exited"
    if info.get("start_time") != target.start_time:
        return "pid reused: start time %s, expected %s" % (info.get("start_time"), target.start_time)
    if pid in _own_lineage(self_pid):
        return "ancestor of this Ansible run"
    if info.get("state") == "D":
        return "unkillable: uninterruptible sleep (D)"
    permission = _permission(pid)
    if permission:
        return permission
    return _protection(pid, info, policy)


def _permission(pid):
    """Why this run may not signal pid (another user's process, without the capability), or None; check mode and
    the real run refuse alike."""
    try:
        os.kill(pid, 0)
    except PermissionError:
        return "not permitted: this run (uid %d) may not signal it" % os.geteuid()
    except ProcessLookupError:
        return "exited"
    return None


# Parents that supervise others (a job step, a container, a session, a service manager): ending one to get a
# zombie reaped would end everything it supervises, so allow_parents never reaches them.
SUPERVISOR_PARENTS = ("slurmstepd", "slurmd", "containerd-shim", "containerd", "conmon", "dockerd", "crio", "runc",
                      "kubelet", "sshd", "systemd", "init", "tini", "dumb-init", "su", "sudo")


def _supervisor(parent):
    """The supervisor name the parent matches, or None."""
    names = process_names(parent.get("name"), None)
    for name in names:
        for supervisor in SUPERVISOR_PARENTS:
            if name == supervisor or name.startswith(supervisor + "-"):
                return supervisor
    return None


# --- sending --------------------------------------------------------------------------------------------

def _open_pidfd(pid):
    """A pidfd for pid, or None where the kernel or Python has none (then os.kill is used)."""
    if not hasattr(os, "pidfd_open") or not hasattr(signal, "pidfd_send_signal"):
        return None
    try:
        return os.pidfd_open(pid)
    except ProcessLookupError:
        raise
    except OSError:
        return None


def send_checked(pid, start_time, signum):
    """Send signum to pid only if it is still the process that started at start_time.

    Returns None when sent, else why not ("exited", "pid reused: ..." or the OS error).
    """
    try:
        pidfd = _open_pidfd(pid)
    except ProcessLookupError:
        return "exited"
    try:
        # With a pidfd open the pid cannot name another process until it is closed, so checking the start
        # time after opening it proves the signal reaches the process we mean.
        current = _procscan.start_time(pid)
        if current is None:
            return "exited"
        if current != start_time:
            return "pid reused: start time %s, expected %s" % (current, start_time)
        if pidfd is not None:
            signal.pidfd_send_signal(pidfd, signum)
        else:
            os.kill(pid, signum)
        return None
    except ProcessLookupError:
        return "exited"
    except OSError as error:
        return "%s: %s" % (type(error).__name__, error.strerror or error)
    finally:
        if pidfd is not None:
            os.close(pidfd)


# --- waiting --------------------------------------------------------------------------------------------

def _exit_state(pid, start_time):
    """'gone' (exited and reaped, or the pid is another process now), 'zombie', or None (still running).

    A thread group whose leader exited is running while a thread lives (read_process gives that thread's state).
    """
    info = _procscan.read_process(pid)
    if info is None or info.get("start_time") != start_time:
        return "gone"
    if info.get("state") in ("Z", "X"):
        return "zombie"
    return None


def _parent_of(pid):
    """{"pid", "name", "start_time"} of pid's parent (name and start time None when unreadable), or None."""
    info = _procscan.read_process(pid)
    if info is None:
        return None
    parent = _procscan.read_process(info["ppid"]) if info.get("ppid") else None
    parent = parent or {}
    return {"pid": info.get("ppid"), "name": parent.get("name"), "start_time": parent.get("start_time")}


def _zombie_entry(pid, start_time, name):
    return {"pid": pid, "start_time": start_time, "name": name, "parent": _parent_of(pid)}


def _wait_for_exit(entries, grace, started):
    """Poll /proc until every entry has exited or grace seconds have passed; marks entries in place."""
    deadline = time.monotonic() + grace
    while True:
        for entry in entries:
            if entry["exited"]:
                continue
            state = _exit_state(entry["pid"], entry["start_time"])
            if state:
                entry["exited"] = True
                entry["seconds"] = round(time.monotonic() - started[entry["pid"]], 3)
                entry["_zombie"] = state == "zombie"
        if all(entry["exited"] for entry in entries) or time.monotonic() >= deadline:
            return
        time.sleep(POLL_INTERVAL)


# --- check mode predictions -------------------------------------------------------------------------------

def _signal_mask(pid, field):
    """The SigIgn / SigCgt mask of pid as an int (0 when unreadable)."""
    try:
        with open("/proc/%d/status" % pid, "r", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith(field + ":"):
                    return int(line.split(":", 1)[1].strip(), 16)
    except (OSError, ValueError):
        pass
    return 0


def _handles(mask, signum):
    return bool(mask & (1 << (signum - 1)))


def predicted_signals(pid, signals):
    """The signals a real run would send: the next one follows only if this one is ignored."""
    ignored = _signal_mask(pid, "SigIgn")
    sent = []
    for name in signals:
        sent.append(signal_name(name))
        if not _handles(ignored, signal_number(name)):
            break
    return sent


# --- terminate ------------------------------------------------------------------------------------------

def _skip(target, reason, info=None):
    info = info or {}
    return {"pid": target.pid, "start_time": target.start_time, "name": info.get("name"), "reason": reason}


def _triage(targets, policy, self_pid):
    """Split targets into (to signal, skipped, zombies)."""
    to_signal, skipped, zombies, seen = [], [], [], set()
    for target in targets:
        if target.pid in seen:
            continue
        seen.add(target.pid)
        reason = refusal(target, policy, self_pid)
        info = _procscan.read_process(target.pid) or {}
        if reason:
            skipped.append(_skip(target, reason, info if info.get("start_time") == target.start_time else None))
        elif info.get("state") in ("Z", "X"):  # a real zombie: a leader-exited group has a live thread's state
            skipped.append(_skip(target, "zombie: only its parent can reap it", info))
            zombies.append(_zombie_entry(target.pid, target.start_time, info.get("name")))
        else:
            to_signal.append({"pid": target.pid, "start_time": target.start_time, "name": info.get("name"),
                              "signals": [], "exited": False, "seconds": 0.0, "_target": target})
    return to_signal, skipped, zombies


def _signal_round(entries, signum, journal, started):
    """Send one signal to every entry still running; returns the entries that were not signalled."""
    name = signal_name(signum)
    not_sent = []
    for entry in entries:
        if entry["exited"]:
            continue
        entry_id = None
        if journal is not None:
            entry_id = journal.intent("signal", pid=entry["pid"], start_time=entry["start_time"], name=entry["name"],
                                      signal=name, reason=entry["_target"].reason)
        started.setdefault(entry["pid"], time.monotonic())
        why_not = send_checked(entry["pid"], entry["start_time"], signum)
        if why_not is None:
            entry["signals"].append(name)
            entry["_journal_id"] = entry_id
        else:
            entry["_journal_id"] = None
            if journal is not None:
                journal.outcome(entry_id, False, pid=entry["pid"], signal=name, error=why_not)
            not_sent.append((entry, why_not))
    return not_sent


def _journal_wait_outcomes(entries, signum, journal):
    if journal is None:
        return
    for entry in entries:
        entry_id = entry.pop("_journal_id", None)
        if entry_id is not None:
            journal.outcome(entry_id, True, pid=entry["pid"], signal=signal_name(signum), exited=entry["exited"],
                            zombie=entry.get("_zombie", False), seconds=entry["seconds"])


def _resolve_not_sent(not_sent, skipped, started):
    """A target never signalled and now gone or reused is skipped; one signalled before has exited."""
    for entry, why_not in not_sent:
        if entry["signals"]:
            entry["exited"] = True
            entry["seconds"] = round(time.monotonic() - started[entry["pid"]], 3)
        else:
            entry["_drop"] = True
            skipped.append(_skip(entry["_target"], why_not, {"name": entry["name"]}))


def _public(entry):
    return {key: value for key, value in entry.items() if not key.startswith("_")}


def terminate(targets, policy, signals=("TERM", "KILL"), grace=10.0, journal=None, check_mode=False, self_pid=None):
    """Signal targets with the sequence signals, waiting up to grace seconds after each for them to exit.

    Returns {"signalled": [{"pid", "start_time", "name", "signals", "exited", "seconds"}],
    "skipped": [{"pid", "start_time", "name", "reason"}], "zombies": [{"pid", "start_time", "name", "parent"}]}.
    """
    self_pid = os.getpid() if self_pid is None else self_pid
    entries, skipped, zombies = _triage(targets, policy, self_pid)
    if check_mode:
        for entry in entries:
            entry["signals"] = predicted_signals(entry["pid"], signals)
            entry["exited"] = True
        return {"signalled": [_public(entry) for entry in entries], "skipped": skipped, "zombies": zombies}

    started = {}
    for name in signals:
        signum = signal_number(name)
        if all(entry["exited"] or entry.get("_drop") for entry in entries):
            break
        not_sent = _signal_round([entry for entry in entries if not entry.get("_drop")], signum, journal, started)
        _resolve_not_sent(not_sent, skipped, started)
        live = [entry for entry in entries if not entry.get("_drop")]
        _wait_for_exit(live, grace, started)
        _journal_wait_outcomes(live, signum, journal)
    for entry in entries:
        if not entry["exited"] and entry["pid"] in started:
            entry["seconds"] = round(time.monotonic() - started[entry["pid"]], 3)

    signalled = [entry for entry in entries if not entry.get("_drop")]
    zombies.extend(_zombie_entry(entry["pid"], entry["start_time"], entry["name"]) for entry in signalled
                   if entry.get("_zombie") and _exit_state(entry["pid"], entry["start_time"]) == "zombie")
    return {"signalled": [_public(entry) for entry in signalled], "skipped": skipped, "zombies": zombies}


# --- zombies --------------------------------------------------------------------------------------------

def _wait_gone(pid, start_time, grace):
    deadline = time.monotonic() + grace
    while _procscan.same_process(pid, start_time):
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_INTERVAL)
    return True


def _predict_reap(parent, policy):
    caught = _signal_mask(parent["pid"], "SigCgt")
    if _handles(caught, signal.SIGCHLD):
        return "sigchld"
    return "parent_terminated" if policy.allow_parents and not _supervisor(parent) else None


def _send_sigchld(parent, journal):
    entry_id = None
    if journal is not None:
        entry_id = journal.intent("signal", pid=parent["pid"], start_time=parent["start_time"], name=parent["name"],
                                  signal="CHLD", reason="reap zombie child")
    why_not = send_checked(parent["pid"], parent["start_time"], signal.SIGCHLD)
    if journal is not None:
        journal.outcome(entry_id, why_not is None, pid=parent["pid"], signal="CHLD", error=why_not)
    return why_not


def reap_zombie(zombie_pid, zombie_start_time, policy, grace=10.0, journal=None, check_mode=False,
                signals=("TERM", "KILL"), self_pid=None):
    """Get a zombie reaped: SIGCHLD to its parent, then (policy.allow_parents) terminate the parent.

    Returns {"pid", "start_time", "name", "parent": {"pid", "name", "start_time"}|None,
    "reaped_by": "sigchld"|"parent_terminated"|None, "gone": bool, "reason": str|None,
    "parent_result": terminate()'s result or None, "parent_signalled": bool (a signal reached the parent: the run
    changed something even when the zombie stays; in check mode, whether one would be sent)}.
    """
    self_pid = os.getpid() if self_pid is None else self_pid
    info = _procscan.read_process(zombie_pid)
    result = {"pid": zombie_pid, "start_time": zombie_start_time, "name": None, "parent": None,
              "reaped_by": None, "gone": False, "reason": None, "parent_result": None, "parent_signalled": False}
    if info is None or info.get("start_time") != zombie_start_time:
        result.update(gone=True, reason="exited")
        return result
    result["name"] = info.get("name")
    if info.get("leader_exited"):
        # A live thread group whose leader exited: its parent has nothing to reap, terminate() ends it.
        result["reason"] = "not a zombie: its leader exited but its threads live on (state %s)" % info.get("state")
        return result
    if info.get("state") not in ("Z", "X"):
        result["reason"] = "not a zombie (state %s)" % info.get("state")
        return result
    parent = _parent_of(zombie_pid)
    result["parent"] = parent
    parent_target = Target(parent["pid"], parent["start_time"], "parent of zombie %d" % zombie_pid)
    why_not = refusal(parent_target, policy, self_pid)
    if why_not:
        result["reason"] = "parent refused: %s" % why_not
        return result
    if check_mode:
        result["reaped_by"] = _predict_reap(parent, policy)
        result["gone"] = result["reaped_by"] is not None
        result["parent_signalled"] = True  # SIGCHLD goes to every parent that is not refused
        return result

    why_not = _send_sigchld(parent, journal)
    result["parent_signalled"] = why_not is None
    if why_not is None and _wait_gone(zombie_pid, zombie_start_time, grace):
        result.update(reaped_by="sigchld", gone=True)
        return result
    if not policy.allow_parents or _supervisor(parent):
        result["reason"] = "SIGCHLD did not reap it: %s" % (why_not or "the parent did not wait for it")
        if policy.allow_parents:
            result["reason"] += "; its parent %s supervises others and is never ended for a zombie" % parent["name"]
        return result
    result["parent_result"] = terminate([parent_target], policy, signals, grace, journal, False, self_pid)
    result["parent_signalled"] = result["parent_signalled"] or bool(result["parent_result"]["signalled"])
    # The zombie is handed to init (or the nearest subreaper) when its parent exits; that one reaps it.
    if _wait_gone(zombie_pid, zombie_start_time, grace):
        result.update(reaped_by="parent_terminated", gone=True)
    else:
        result["reason"] = "still a zombie after its parent was signalled"
    return result
