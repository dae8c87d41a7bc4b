# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Sending signals to processes that _protect has already let through, and waiting for them to exit.

A process is named by (pid, start time) as seen at detection. Before every signal the pair is checked again,
so a pid that the kernel gave to a new process in the meantime is never signalled. Where the kernel and
Python allow it the signal goes through a pidfd opened before that check, which closes the last race
window; otherwise through os.kill right after the check. No shell, no kill(1). Who may be signalled at all is
_protect's question; zombies are _zombies'.
"""

from __future__ import annotations

import os
import signal
import time

from ansible_collections.gpuops.remediation.plugins.module_utils._argument_specs import KILL_GRACE
from ansible_collections.gpuops.remediation.plugins.module_utils.probes import _process
from ansible_collections.gpuops.remediation.plugins.module_utils.kill._signal_state import HANDLER, TERM, plan, read_facts

POLL_INTERVAL = 0.05


class Target:
    """A process to signal: pid, its start time when it was detected, and why it is targeted."""

    def __init__(self, pid, start_time, reason="", source=None, thawed=False):
        self.pid = int(pid)
        # Its frozen cgroup is thawed before the first signal: its D or stopped look is the freezer's.
        self.thawed = thawed
        self.start_time = None if start_time is None else int(start_time)
        self.reason = reason
        # What the journal records of who this is (_journal.holder_source), so that a leak can be traced to its source.
        self.source = source or {}

    def __repr__(self):
        return "Target(%d, %r, %r)" % (self.pid, self.start_time, self.reason)

    def skipped(self, reason, name=None):
        """The result entry of this target left unsignalled, and why."""
        return {"pid": self.pid, "start_time": self.start_time, "name": name, "reason": reason}


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
        current = _process.start_time(pid)
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
    info = _process.read_process(pid)
    if info is None or info.get("start_time") != start_time:
        return "gone"
    if info.get("state") in ("Z", "X"):
        return "zombie"
    return None


def _wait_after(signal_name_sent, grace, kill_grace=None):
    """How long to wait for the processes to be gone after this signal: grace, and after SIGKILL at least kill_grace
    (KILL_GRACE when not given). SIGKILL is not the end of a process: a CUDA context's teardown runs in the kernel, in
    uninterruptible sleep (D), and can take longer than a TERM's grace; only a process still there after this floor
    outlived SIGKILL (the journal's outlived_kill, the verdict's unkillable)."""
    if signal_name(signal_name_sent) != "KILL":
        return grace
    return max(grace, KILL_GRACE if kill_grace is None else kill_grace)


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


# --- the plan -----------------------------------------------------------------------------------------------

def catches(pid, signum):
    """Whether pid has a handler installed for signum."""
    facts = read_facts(pid)
    return bool(facts and facts["caught"] & (1 << (signum - 1)))


def _plan_entry(entry, signals):
    """Read the process's signal state and put its plan (_signal_state.plan) into the entry; the same in check mode
    and in the real run, so that check mode says what the run does."""
    facts = read_facts(entry["pid"]) or {"state": "?", "blocked": 0, "ignored": 0, "caught": 0, "pending": 0,
                                         "tracer_pid": 0, "nspid": []}
    entry["_plan"] = plan(facts, [signal_number(name) for name in signals], frozen=entry["_target"].thawed)
    entry.update(expected=entry["_plan"]["expected"], why=entry["_plan"]["why"], kill_follows=entry["_plan"]["kill_follows"],
                 state=facts["state"], not_sent=[])


def _predicted(entry):
    """Check mode's entry: the signals the plan sends, and whether the process is expected to end."""
    entry["signals"] = list(entry["_plan"]["signals"])
    entry["not_sent"] = [dict(skip) for skip in entry["_plan"]["not_sent"]]
    entry["exited"] = entry["expected"] in (TERM, HANDLER) or "KILL" in entry["signals"]
    return entry


# --- terminate ------------------------------------------------------------------------------------------

def _send(entry, name, signum, journal, started):
    """Send one signal to the entry (journalled); None when sent, else why not."""
    entry_id = None
    if journal is not None:
        entry_id = journal.intent("signal", pid=entry["pid"], start_time=entry["start_time"], name=entry["name"],
                                  signal=name, reason=entry["_target"].reason, source=entry["_target"].source)
    started.setdefault(entry["pid"], time.monotonic())
    why_not = send_checked(entry["pid"], entry["start_time"], signum)
    if why_not is None:
        entry["signals"].append(name)
        entry.setdefault("_journal_ids", []).append((entry_id, name))
    elif journal is not None:
        journal.outcome(entry_id, False, pid=entry["pid"], signal=name, error=why_not)
    return why_not


def _signal_round(entries, position, journal, started):
    """Carry out step `position` of each running entry's plan: send its signal (and SIGCONT to a stopped process),
    or record why it is not sent. Returns (entries to wait for, [(entry, why not)] for signals that could not be sent)."""
    waiting, not_sent = [], []
    for entry in entries:
        if entry["exited"]:
            continue
        step = entry["_plan"]["steps"][position]
        if not step["send"]:
            entry["not_sent"].append({"signal": step["signal"], "why": step["why"]})
            continue
        why_not = _send(entry, step["signal"], signal_number(step["signal"]), journal, started)
        if why_not is None and step["cont"]:
            why_not = _send(entry, "CONT", signal.SIGCONT, journal, started)
        if why_not is not None:
            not_sent.append((entry, why_not))
        elif step["wait"]:
            waiting.append(entry)
    return waiting, not_sent


def _journal_wait_outcomes(entries, journal):
    if journal is None:
        return
    for entry in entries:
        for entry_id, name in entry.pop("_journal_ids", []):
            details = {}
            if name == "KILL" and not entry["exited"]:
                # The evidence the verdict reads (_journal.outlived_kill): this process outlived SIGKILL.
                details = {"outlived_kill": True, "state": (_process.read_process(entry["pid"]) or {}).get("state")}
            journal.outcome(entry_id, True, pid=entry["pid"], signal=name, exited=entry["exited"],
                            zombie=entry.get("_zombie", False), seconds=entry["seconds"], **details)


def _resolve_not_sent(not_sent, skipped, started):
    """A target never signalled and now gone or reused is skipped; one signalled before has exited."""
    for entry, why_not in not_sent:
        if entry["signals"]:
            entry["exited"] = True
            entry["seconds"] = round(time.monotonic() - started[entry["pid"]], 3)
        else:
            entry["_drop"] = True
            skipped.append(entry["_target"].skipped(why_not, entry["name"]))


def _public(entry):
    return {key: value for key, value in entry.items() if not key.startswith("_")}


def _entry(target, name):
    return {"pid": target.pid, "start_time": target.start_time, "name": name, "signals": [], "exited": False,
            "seconds": 0.0, "_target": target}


def terminate(triaged, signals=("TERM", "KILL"), grace=10.0, journal=None, check_mode=False, kill_grace=None):
    """Signal the triaged [(Target, name)] with the sequence signals as each one's plan (_signal_state.plan) says:
    a signal that cannot act on it is not sent, one that can is followed by up to grace seconds for it to exit
    (SIGKILL too, for at least kill_grace seconds, KILL_GRACE by default: a process that outlives that is journalled as
    such). Who may be signalled is decided before
    (_protect.triage); here only a target that exited or whose pid was reused before its first signal is skipped.

    Returns {"signalled": [{"pid", "start_time", "name", "signals", "exited", "seconds", "expected", "why",
    "kill_follows", "state", "not_sent"}], "skipped": [{"pid", "start_time", "name", "reason"}], "zombies": [{"pid",
    "start_time", "name"}] (signalled targets that exited and are left unreaped)}. In check mode nothing is sent and
    "signals" and "exited" are the plan's.
    """
    entries, skipped = [_entry(target, name) for target, name in triaged], []
    for entry in entries:
        _plan_entry(entry, signals)
    if check_mode:
        return {"signalled": [_public(_predicted(entry)) for entry in entries], "skipped": skipped, "zombies": []}

    started = {}
    for position in range(len(signals)):
        if all(entry["exited"] or entry.get("_drop") for entry in entries):
            break
        live = [entry for entry in entries if not entry.get("_drop")]
        waiting, not_sent = _signal_round(live, position, journal, started)
        _resolve_not_sent(not_sent, skipped, started)
        waiting = [entry for entry in waiting if not entry.get("_drop")]
        if waiting:
            _wait_for_exit(waiting, _wait_after(signals[position], grace, kill_grace), started)
        # Every signal sent gets its outcome, also a TERM whose SIGCONT found the process gone already.
        _journal_wait_outcomes([entry for entry in live if not entry.get("_drop")], journal)
    for entry in entries:
        if not entry["exited"] and entry["pid"] in started:
            entry["seconds"] = round(time.monotonic() - started[entry["pid"]], 3)

    signalled = [entry for entry in entries if not entry.get("_drop")]
    zombies = [{"pid": entry["pid"], "start_time": entry["start_time"], "name": entry["name"]} for entry in signalled
               if entry.get("_zombie") and _exit_state(entry["pid"], entry["start_time"]) == "zombie"]
    return {"signalled": [_public(entry) for entry in signalled], "skipped": skipped, "zombies": zombies}


def wait_gone(pid, start_time, grace):
    """Wait up to grace seconds for (pid, start time) to be gone (reaped, or the pid reused); whether it is."""
    deadline = time.monotonic() + grace
    while _process.same_process(pid, start_time):
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_INTERVAL)
    return True
