# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a signal will do to a process, predicted from the kernel's signal state, and the plan that follows from it.

read_facts() reads /proc/<pid>/status (State, SigBlk of every thread, SigIgn, SigCgt, SigPnd/ShdPnd, TracerPid,
NSpid); plan() is the one pure function that turns those facts and a signal sequence into what a run sends, in
which order, and where it waits. Check mode reports the plan; the real run (_terminate) carries out the same plan.

The kernel's rules it follows (kernel/signal.c):
- an ignored signal (SigIgn) is discarded when sent;
- the init of a PID namespace (innermost NSpid 1) drops every signal it has no handler for, except SIGKILL (and
  SIGSTOP) sent from an ancestor namespace;
- a process-directed signal that every thread blocks (SigBlk) stays pending until one unblocks it;
- a stopped process (T) does not act on a signal other than SIGKILL until SIGCONT, default action included: systemd
  sends SIGCONT right after SIGTERM, and so does this plan;
- a process stopped by its tracer (t) acts on nothing but SIGKILL until the tracer resumes it;
- SIGKILL ends any process but one in uninterruptible sleep (D) that never wakes, or one in a v1 frozen cgroup
  (_freezer); only a process that outlives it is evidence that only a reboot ends it.
"""

from __future__ import annotations

import os
import signal

# Signals whose default action is to do nothing, or to stop the process: sent with SIG_DFL, they end nothing.
_DEFAULT_IGNORED = frozenset([signal.SIGCHLD, signal.SIGURG, signal.SIGWINCH, signal.SIGCONT])
_DEFAULT_STOPS = frozenset([signal.SIGSTOP, signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU])

# What the first signal of the sequence (normally TERM) is expected to do.
TERM = "term"            # its default action ends the process
HANDLER = "handler"      # the process's handler runs (it is expected to exit)
PENDING = "pending"      # blocked: it waits until the process unblocks it (the grace is that chance)
KILL_NEEDED = "kill_needed"  # it cannot act: not sent, KILL at once


def _mask(text):
    try:
        return int(text.strip(), 16)
    except ValueError:
        return 0


def parse_status(text):
    """The fields of a /proc/<pid>/status this module reads, from its text."""
    fields = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key] = value.strip()
    nspid = [int(part) for part in fields.get("NSpid", "").split() if part.isdigit()]
    return {"state": (fields.get("State") or "?")[:1], "blocked": _mask(fields.get("SigBlk", "0")),
            "ignored": _mask(fields.get("SigIgn", "0")), "caught": _mask(fields.get("SigCgt", "0")),
            "pending": _mask(fields.get("SigPnd", "0")) | _mask(fields.get("ShdPnd", "0")),
            "tracer_pid": int(fields["TracerPid"]) if fields.get("TracerPid", "").isdigit() else 0,
            "nspid": nspid}


def _read_text(path):
    try:
        with open(path, "r", encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


def read_facts(pid, proc_root="/proc"):
    """The kernel's signal state of pid (parse_status's keys), or None when it is gone.

    A process-directed signal goes to any thread that does not block it: "blocked" is what every live thread
    blocks; "state" and "tracer_pid" are those of a live thread (a leader that exited shows Z while its threads run).
    """
    base = os.path.join(proc_root, str(pid))
    leader = _read_text(os.path.join(base, "status"))
    if leader is None:
        return None
    facts = parse_status(leader)
    try:
        tids = os.listdir(os.path.join(base, "task"))
    except OSError:
        tids = []
    threads = [parse_status(text) for text in (_read_text(os.path.join(base, "task", tid, "status")) for tid in tids) if text]
    live = [thread for thread in threads if thread["state"] not in ("Z", "X")]
    if live:
        blocked = -1
        for thread in live:
            blocked &= thread["blocked"]
        facts["blocked"] = blocked
        if facts["state"] in ("Z", "X"):
            facts["state"] = live[0]["state"]
            facts["tracer_pid"] = live[0]["tracer_pid"]
    return facts


def _has(mask, signum):
    return bool(mask & (1 << (int(signum) - 1)))


def namespace_init(facts):
    """Whether the process is the init of a PID namespace below ours (its innermost NSpid is 1)."""
    nspid = facts.get("nspid") or []
    return len(nspid) > 1 and nspid[-1] == 1


def _name(signum):
    return signal.Signals(signum).name[3:]


def effect(facts, signum, frozen=False):
    """(what signum does to the process: "ends", "handler", "pending" or "none", why) from its facts alone.

    frozen: the process is in a frozen cgroup that the run will thaw first (its D or stopped look is the freezer's).
    """
    name = _name(signum)
    state = facts.get("state")
    if frozen and state == "D":
        state = "S"
    asleep = " (in uninterruptible sleep (D): it acts when the sleep ends; a fatal signal ends a killable sleep at once)" \
        if state == "D" else ""
    if signum == signal.SIGKILL:
        return "ends", "SIGKILL cannot be caught, blocked or ignored" + asleep
    if state == "t":
        return "none", "stopped by its tracer, pid %s: %s waits for the tracer to resume it" % (facts.get("tracer_pid"), name)
    caught = _has(facts.get("caught", 0), signum)
    if _has(facts.get("ignored", 0), signum):
        return "none", "%s is ignored (SigIgn): the kernel discards it" % name
    if not caught and namespace_init(facts):
        return "none", ("init of its PID namespace (NSpid %s) with no %s handler: the kernel drops it"
                        % (" ".join(str(p) for p in facts["nspid"]), name))
    if not caught and signum in _DEFAULT_IGNORED:
        return "none", "%s's default action is to ignore it" % name
    if not caught and signum in _DEFAULT_STOPS:
        return "none", "%s's default action stops the process, it does not end it" % name
    traced = " (traced by pid %s: the tracer sees %s first)" % (facts["tracer_pid"], name) if facts.get("tracer_pid") else ""
    if _has(facts.get("blocked", 0), signum):
        return "pending", "%s is blocked (SigBlk): it stays pending until the process unblocks it%s" % (name, traced + asleep)
    if caught:
        return "handler", "%s has a handler (SigCgt)%s" % (name, traced + asleep)
    return "ends", "%s's default action ends it%s" % (name, traced + asleep)


_EXPECTED = {"ends": TERM, "handler": HANDLER, "pending": PENDING, "none": KILL_NEEDED}


def plan(facts, signals, frozen=False):
    """What a run does to one process for the signal numbers `signals`, in order, if it behaves as its facts say.

    {"expected": TERM | HANDLER | PENDING | KILL_NEEDED (what the first signal does), "why": the facts that say so,
    "steps": [{"signal": name, "send": bool, "cont": bool (SIGCONT right after: it is stopped), "wait": bool (the grace
    after it), "why"}], "signals": the names it sends when the process exits as expected (check mode's prediction),
    "not_sent": [{"signal", "why"}] (those it skips before then), "kill_follows": "at_once" | "after_grace" (if it is
    still running then) | "no" (no KILL in the sequence)}.

    A signal that cannot act is not sent and not waited for. A process that acts on a signal is expected to exit
    within the grace; the signals after that one are sent only if it is still running.
    """
    steps, expected, why, kill_follows = [], None, None, "no"
    predicted, not_sent, settled = [], [], False
    for signum in signals:
        does, because = effect(facts, signum, frozen)
        name = _name(signum)
        stopped = facts.get("state") == "T" and does != "none" and signum != signal.SIGKILL
        steps.append({"signal": name, "send": does != "none", "cont": stopped, "wait": does != "none", "why": because})
        if expected is None:
            expected, why = _EXPECTED[does], because
            if stopped:
                why += "; it is stopped (T): SIGCONT follows so that it acts"
        if settled:
            continue
        if signum == signal.SIGKILL:
            kill_follows = "after_grace" if predicted else "at_once"
        if does == "none":
            not_sent.append({"signal": name, "why": because})
            continue
        predicted.append(name)
        if stopped:
            predicted.append("CONT")
        # A blocked signal may never act: the next one is part of the prediction.
        settled = does in ("ends", "handler")
    if kill_follows == "no" and signal.SIGKILL in signals:
        kill_follows = "after_grace"
    return {"expected": expected, "why": why, "steps": steps, "signals": predicted, "not_sent": not_sent,
            "kill_follows": kill_follows}
