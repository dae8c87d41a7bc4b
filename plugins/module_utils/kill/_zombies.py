# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Getting a zombie reaped: no signal reaches it, so SIGCHLD goes to its parent, and (allow_parents) the parent is
ended when it still does not reap, unless it supervises others. The parent goes through _protect like any target.
"""

from __future__ import annotations

import os
import signal

from ansible_collections.gpuops.remediation.plugins.module_utils.probes import _process
from ansible_collections.gpuops.remediation.plugins.module_utils.journal._writer import holder_source
from ansible_collections.gpuops.remediation.plugins.module_utils.kill._protect import parent_of, refusal, supervisor, terminate_permitted
from ansible_collections.gpuops.remediation.plugins.module_utils.kill._terminate import Target, _wait_after, catches, send_checked, wait_gone


def _predict_reap(parent, policy):
    # A stopped parent (T, or t under a tracer) runs no handler, and SIGCHLD gets no SIGCONT: it reaps nothing.
    if catches(parent["pid"], signal.SIGCHLD) and (_process.read_process(parent["pid"]) or {}).get("state") not in ("T", "t"):
        return "sigchld"
    if not policy.allow_parents or supervisor(parent):
        return None
    return "parent_terminated" if refusal(Target(parent["pid"], parent["start_time"]), policy) is None else None


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
                signals=("TERM", "KILL"), self_pid=None, kill_grace=None):
    """Get a zombie reaped: SIGCHLD to its parent, then (policy.allow_parents) terminate the parent.

    Returns {"pid", "start_time", "name", "parent": {"pid", "name", "start_time"}|None,
    "reaped_by": "sigchld"|"parent_terminated"|None, "gone": bool, "reason": str|None,
    "parent_result": terminate_permitted()'s result or None, "parent_signalled": bool (a signal reached the parent: the run
    changed something even when the zombie stays; in check mode, whether one would be sent)}.
    """
    self_pid = os.getpid() if self_pid is None else self_pid
    policy = policy.unselected()  # every rule below is asked of the parent, which the operator did not select
    info = _process.read_process(zombie_pid)
    result = {"pid": zombie_pid, "start_time": zombie_start_time, "name": None, "parent": None,
              "reaped_by": None, "gone": False, "reason": None, "parent_result": None, "parent_signalled": False}
    if info is None or info.get("start_time") != zombie_start_time:
        result.update(gone=True, reason="exited")
        return result
    result["name"] = info.get("name")
    if info.get("leader_exited"):
        # A live thread group whose leader exited: its parent has nothing to reap, terminate_permitted() ends it.
        result["reason"] = "not a zombie: its leader exited but its threads live on (state %s)" % info.get("state")
        return result
    if info.get("state") not in ("Z", "X"):
        result["reason"] = "not a zombie (state %s)" % info.get("state")
        return result
    parent = parent_of(zombie_pid)
    result["parent"] = parent
    # The parent is the source to record: it let its child's GPU memory sit in a zombie.
    source = dict(holder_source(_process.read_process(parent["pid"]) or parent), zombie_child=info.get("name"))
    parent_target = Target(parent["pid"], parent["start_time"], "parent of zombie %d" % zombie_pid, source=source)
    # SIGCHLD ends nothing: a busy parent (a working program) may get it; ending it is asked again below.
    why_not = refusal(parent_target, policy, self_pid, ending=False)
    if why_not:
        result["reason"] = "parent refused: %s" % why_not
        return result
    if check_mode:
        result["reaped_by"] = _predict_reap(parent, policy)
        result["gone"] = result["reaped_by"] is not None
        result["parent_signalled"] = True  # SIGCHLD goes to every parent that is not refused
        if result["reaped_by"] == "parent_terminated":
            # What the run would send the parent, planned from its signal state as for any process.
            result["parent_result"] = terminate_permitted([parent_target], policy, signals, grace, None, True, self_pid)
        return result

    why_not = _send_sigchld(parent, journal)
    result["parent_signalled"] = why_not is None
    if why_not is None and wait_gone(zombie_pid, zombie_start_time, grace):
        result.update(reaped_by="sigchld", gone=True)
        return result
    supervises = supervisor(parent) if policy.allow_parents else None
    if not policy.allow_parents or supervises:
        result["reason"] = "SIGCHLD did not reap it: %s" % (why_not or "the parent did not wait for it")
        if supervises:
            result["reason"] += "; its parent %s supervises others (%s) and is never ended for a zombie" % (parent["name"], supervises)
        return result
    busy = refusal(parent_target, policy, self_pid)
    if busy:
        result["reason"] = "SIGCHLD did not reap it, and its parent is not ended: %s" % busy
        return result
    result["parent_result"] = terminate_permitted([parent_target], policy, signals, grace, journal, False, self_pid,
                                                  kill_grace=kill_grace)
    result["parent_signalled"] = result["parent_signalled"] or bool(result["parent_result"]["signalled"])
    # The zombie is handed to init (or the nearest subreaper) when its parent exits; that one reaps it on its own
    # schedule (seconds on a loaded VM), so the wait is as long as after SIGKILL, not the parent's TERM grace.
    if wait_gone(zombie_pid, zombie_start_time, _wait_after("KILL", grace, kill_grace)):
        result.update(reaped_by="parent_terminated", gone=True)
    else:
        result["reason"] = "still a zombie after its parent was signalled"
    return result
