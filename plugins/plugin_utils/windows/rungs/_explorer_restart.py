# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""win_gpu_reset method=restart_explorer: the session's shell (the process whose image path is Winlogon's Shell,
_cim_processes.is_shell: %SystemRoot%\\explorer.exe by default) ended alone (no tree) when it holds GPU memory, and
Windows waited for to start it again (AutoRestartShell)."""

from __future__ import annotations

import time

from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.rungs import _acting_step, _end_by_handle
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.tools import _cim_processes, _interactive_sessions
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.protect import _who_may_end
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows import _node_snapshot

_SHELL_POLL_S = 1


def act(node, args, check_mode, sleep, journal):
    sessions = [s for s in _interactive_sessions.sessions_of(_acting_step.sessions(node), args["user"]) if s["id"] != _acting_step.SERVICES_SESSION]
    snapshot = _node_snapshot.take(node, args["nvidia_smi"], args["ghost_threshold_mib"], args["journal_path"])
    processes = _acting_step.process_list(node)
    policy = _who_may_end.Policy.from_args(args, allow_shell=True)
    entries = [_shell_plan(session, processes, snapshot, args["force"], policy, args["user"]) for session in sessions]
    for entry in entries:
        desktop = entry["outcome"] == "restart" and _who_may_end.desktop_refusal("restarting explorer.exe", entry["id"], processes.values(), policy)
        if desktop:
            entry.update(outcome="refused", needs="allow_dwm", message=desktop)
    for entry in entries:
        if entry["outcome"] == "restart" and not check_mode:
            _restart_shell(node, journal, entry, args["shell_timeout"], sleep)
        entry["line"] = _shell_line(entry, check_mode)
    failures = [e for e in entries if e["outcome"] == "failed" or e.get("needs")]
    result = {"changed": any(e["outcome"] in ("restart", "restarted") or e.get("ended") for e in entries), "sessions": entries,
              "plan": [e["line"] for e in entries] or ["no session of %s: no explorer to restart" % args["user"]]}
    if failures:
        result["msg"] = "; ".join(e["line"] for e in failures)
    return result


def _shell_plan(session, processes, snapshot, force, policy, user):
    # The shell by its image path (Winlogon's Shell), never by name; one whose path is not known is refused below.
    shells = [p for p in processes.values() if p.get("session_id") == session["id"] and _cim_processes.is_shell(p) is not False]
    held = sum(h.get("used_mib") or 0 for h in snapshot["holders"] if h["pid"] in [p["pid"] for p in shells])
    entry = {"id": session["id"], "user": session["user"], "explorer_before": [_acting_step.identity(p) for p in shells], "explorer_after": None,
             "gpu_memory_mib": held, "ended": False, "message": None}
    if not shells:
        return dict(entry, outcome="no_shell", message="no explorer.exe runs in it")
    unproven = _interactive_sessions.unproven(session, user, processes.values())
    if unproven:
        return dict(entry, outcome="refused", message=unproven)
    refused = [why for why in (_who_may_end.refusal(shell, policy) for shell in shells) if why]
    if refused:
        return dict(entry, outcome="refused", message="; ".join(refused))
    if not held and not force:
        return dict(entry, outcome="not_needed", message="its explorer.exe holds no GPU memory (force=true restarts it anyway)")
    return dict(entry, outcome="restart")


def _restart_shell(node, journal, entry, timeout, sleep):
    for shell in entry["explorer_before"]:
        answer = _end_by_handle.end(node, journal, dict(shell, name="explorer.exe", user=entry["user"]), [])
        entry["message"] = answer["message"]
    after = _new_shells(node, entry, timeout, sleep)
    old = [s for s in entry["explorer_before"] if s in after["all"]]
    entry.update(ended=len(old) < len(entry["explorer_before"]), explorer_after=after["new"])
    if old:
        entry.update(outcome="failed", message="explorer.exe is still running: %s" % (entry["message"] or "no reason given"))
    elif not after["new"]:
        entry.update(outcome="failed", message="explorer.exe ended, Windows did not start it again within %d s (AutoRestartShell off?): "
                     "the user can start it from Task Manager, or log off and on" % timeout)
    else:
        entry.update(outcome="restarted", message=None)


def _new_shells(node, entry, timeout, sleep, clock=time.monotonic):
    """Poll the session's explorer.exe until one that is not an old one runs, or `timeout` passes."""
    deadline = clock() + timeout
    while True:
        shells = [_acting_step.identity(p) for p in _acting_step.process_list(node).values()
                  if p.get("session_id") == entry["id"] and _cim_processes.is_shell(p)]
        new = [s for s in shells if s not in entry["explorer_before"]]
        if new or clock() >= deadline:
            return {"all": shells, "new": new}
        sleep(_SHELL_POLL_S)


def _shell_line(entry, check_mode):
    what = "explorer.exe of session %s (%s)" % (entry["id"], entry["user"])
    pids = ", ".join("pid %s" % s["pid"] for s in entry["explorer_before"])
    if entry["outcome"] in ("no_shell", "not_needed", "refused"):
        return "left %s: %s" % (what, entry["message"])
    if check_mode:
        return "would restart %s: end %s alone, Windows starts it again" % (what, pids)
    if entry["outcome"] == "restarted":
        return "restarted %s: ended %s alone, Windows started %s" % (
            what, pids, ", ".join("pid %s" % s["pid"] for s in entry["explorer_after"]))
    return "could not restart %s: %s" % (what, entry["message"])
