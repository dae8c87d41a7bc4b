# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""win_gpu_reset method=logoff: `logoff <id>` for the sessions of one user (never session 0); the evidence is quser no
longer listing the session."""

from __future__ import annotations

from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.rungs import _acting_step
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.protect import _who_may_end
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.tools import _interactive_sessions


def act(node, args, check_mode, sleep, journal):
    mine = _interactive_sessions.sessions_of(_acting_step.sessions(node), args["user"])
    policy = _who_may_end.Policy.from_args(args)
    quser_rows = [session for session in mine if "domain" not in session]
    processes = _acting_step.process_list(node).values() if mine and (policy.names or policy.users or quser_rows or not policy.allow_dwm) else ()
    entries = [_logoff_plan(session, policy, processes, args["user"]) for session in mine]
    dropped = False
    for entry in entries:
        if entry["outcome"] == "logoff" and not check_mode:
            dropped = _logoff_one(node, journal, entry, args, sleep) or dropped
    if not check_mode and entries:
        remaining = set((s["id"], s["user"].lower()) for s in _acting_step.sessions(node))
        for entry in entries:
            if entry["outcome"] == "logoff_ran":
                gone = (entry["id"], entry["user"].lower()) not in remaining
                entry["outcome"] = "logged_off" if gone else "failed"
    for entry in entries:
        entry["line"] = _session_line(entry, check_mode)
    failures = [e for e in entries if e["outcome"] == "failed" or e.get("needs")]
    result = {"changed": any(e["outcome"] in ("logoff", "logged_off") for e in entries), "sessions": entries,
              "connection_dropped": dropped, "plan": [e["line"] for e in entries] or ["no session of %s: nothing to log off" % args["user"]]}
    if failures:
        result["msg"] = "; ".join(e["line"] for e in failures)
    return result


def _logoff_plan(session, policy, processes, user):
    """A logoff ends every process of the session: refused when the session's user, or any process running in it, is
    one the caller protects (protect_users, protect_names), as the kill refuses them, and when quser cannot show whose
    session it is."""
    entry = dict(session, argv=None, rc=None, message=None, connection_dropped=False)
    if session["id"] == _acting_step.SERVICES_SESSION:
        return dict(entry, outcome="refused", message="session 0 is the services' session: never logged off")
    unproven = _interactive_sessions.unproven(session, user, processes)
    if unproven:
        return dict(entry, outcome="refused", message=unproven)
    why = _who_may_end.caller_refusal({"name": None, "user": session.get("user")}, policy)
    if why is None:
        why = next((_who_may_end.label(p) + ", " + _who_may_end.caller_refusal(p, policy) for p in processes
                    if p.get("session_id") == session["id"] and _who_may_end.caller_refusal(p, policy)), None)
        why = why and "a logoff would end %s" % why
    if why:
        return dict(entry, outcome="refused", message=why)
    desktop = _who_may_end.desktop_refusal("a logoff", session["id"], processes, policy)
    if desktop:
        return dict(entry, outcome="refused", needs="allow_dwm", message=desktop)
    return dict(entry, outcome="logoff", argv=_interactive_sessions.logoff_argv(session["id"]))


def _logoff_one(node, journal, entry, args, sleep):
    def judge(answer):
        return answer.rc == 0, {"rc": answer.rc}
    answer, dropped = _acting_step.journaled_drop(node, journal, "logoff", entry, "the logoff of session %s" % entry["id"], args, sleep, judge,
                                                  session_id=entry["id"], user=entry["user"])
    entry.update(outcome="logoff_ran", connection_dropped=dropped)
    if answer is not None:
        entry.update(rc=answer.rc, message=(answer.stdout + answer.stderr).strip() or None)
    return dropped


def _session_line(entry, check_mode):
    what = "session %s of %s (%s)%s" % (entry["id"], entry["user"], entry.get("session_name") or "no session name",
                                        ", the connection's own: it may drop" if entry.get("current") else "")
    if entry["outcome"] == "refused":
        return "left %s: %s" % (what, entry["message"])
    if check_mode:
        return "would log off %s with logoff %s" % (what, entry["id"])
    if entry["outcome"] == "logged_off":
        return "logged off %s with logoff %s" % (what, entry["id"])
    return "could not log off %s: logoff exited %s%s, quser still lists it" % (what, entry["rc"], ": %s" % entry["message"] if entry["message"] else "")
