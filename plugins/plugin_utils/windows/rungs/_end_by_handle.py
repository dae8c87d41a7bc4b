# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ending Windows processes: the terminate script, which opens each process by its pid, compares its creation time on
that handle and terminates that same handle (a pid handed to another process between the check and the end is never
ended); where it cannot be compiled (Constrained Language Mode or AppLocker refuse Add-Type) the terminate_held script,
which holds each process by a handle while it compares its creation time and runs `taskkill /F /PID` (never /T) on it,
said so in the result. Either way no process outside the members given is ended: a child born after the tree was read
is not one.

A tree is ended by the same rule, member by member: the caller gives the tree as the process list showed it (pid and
creation time of each descendant), deepest first, the process last. What was ended is judged afterwards by the
process list, by pid and creation time (the caller's), never by what a tool printed.
"""

from __future__ import annotations

from ansible_collections.gpuops.remediation.plugins.module_utils.journal._writer import holder_source
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node import _convertto_json
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.tools import _taskkill_tree

SCRIPT = "terminate"
HELD_SCRIPT = "terminate_held"
# How the plan says the fallback ends a process and its tree.
HELD_WORDS = "with taskkill /F /PID (no /T), each process of its tree held by a handle"
# Win32 error codes OpenProcess and TerminateProcess give, language-neutral: what they mean here.
WIN32_REASONS = {5: "access_denied", 87: "not_found"}


def parse_results(answer):
    """The terminate script's $Ansible.Result -> {"unavailable": why or None, "by_pid": {pid: {"outcome", "code"}}}.

    outcome: "ended", "not_opened" (code: the Win32 error; 87 no such process, 5 access denied), "pid_reused" (code: the
    creation time in ms the pid has now), "not_terminated" (code: the Win32 error), "critical" (Windows marks it critical:
    never ended; code: 0, or the Win32 error when Windows could not say)."""
    if answer.get("unavailable"):
        return {"unavailable": str(answer["unavailable"]), "by_pid": {}}
    by_pid = {}
    for item in _convertto_json.objects(answer.get("results") or "[]"):
        pid = _convertto_json.integer(item.get("ProcessId"))
        if pid is not None:
            by_pid[pid] = {"outcome": str(item.get("Outcome")), "code": _convertto_json.integer(item.get("Code"))}
    return {"unavailable": None, "by_pid": by_pid}


def unavailable(node):
    """Why the terminate script cannot run on this node (Add-Type refused), or None. Asked with no process at all, in
    check mode too, so that check mode predicts the way the run will end processes."""
    return parse_results(node.powershell(SCRIPT, {"ProcessIds": [], "CreationTimesMs": []}, read_only=True))["unavailable"]


def reason(result):
    """A member's result as the reason a process was not ended (None when it was)."""
    if result is None:
        return "no answer for it"
    if result["outcome"] == "ended":
        return None
    if result["outcome"] == "critical":
        return ("a critical system process (ending it stops the host): never ended" if not result["code"] else
                "not known whether it is a critical system process (Win32 error %s): never ended" % result["code"])
    if result["outcome"] == "pid_reused":
        return "pid reused (the pid now names a process created at %s ms)" % result["code"]
    if result["outcome"] == "not_terminated" and result.get("tool") == "taskkill":
        # the exit code decides; taskkill's English words, where they are English, only name the reason
        words = _taskkill_tree.parse_taskkill(result.get("message") or "", "", result["code"], result.get("pid"))["outcome"]
        return "taskkill exited %s%s" % (result["code"], " (%s)" % words if words not in ("unrecognised", "failed") else "")
    return "%s (Win32 error %s)" % (WIN32_REASONS.get(result["code"], result["outcome"]), result["code"])


def end(node, journal, process, tree):
    """End `process` ({"pid", "creation_time_ms", "name", "user"}) and `tree` (its descendants as the process list showed
    them, [{"pid", "creation_time_ms"}], deepest first) -> {"method" ("terminate" or "taskkill"), "outcome" ("ended" or
    the reason), "message", "by_pid"}. One journal action: "terminate" (or "taskkill" when the script is unavailable)."""
    members = list(tree) + [{"pid": process["pid"], "creation_time_ms": process["creation_time_ms"]}]
    parameters = {"ProcessIds": [m["pid"] for m in members], "CreationTimesMs": [m["creation_time_ms"] for m in members]}
    done = {}

    def judge(answer):
        done.update(parse_results(answer))
        if done["unavailable"]:
            return False, {"unavailable": done["unavailable"]}
        outcomes = dict((str(pid), result["outcome"]) for pid, result in done["by_pid"].items())
        return done["by_pid"].get(process["pid"], {}).get("outcome") == "ended", {"outcomes": outcomes}
    journal.around(SCRIPT, lambda: node.powershell(SCRIPT, parameters, read_only=False), judge, pid=process["pid"],
                   creation_time_ms=process["creation_time_ms"], name=process.get("name"), user=process.get("user"),
                   tree=[m["pid"] for m in tree], source=holder_source(process))
    if done["unavailable"]:
        held = held_end(node, journal, process, members)
        note = ("the terminate script could not be compiled (%s): each process held by its handle and ended with taskkill "
                "/F /PID, one at a time" % done["unavailable"])
        why = reason(held.get(process["pid"]))
        said = (held.get(process["pid"]) or {}).get("message")
        return {"method": "taskkill", "outcome": "ended" if why is None else why, "by_pid": held,
                "message": "; ".join(part for part in (note, why, said) if part)}
    own = done["by_pid"].get(process["pid"])
    why = reason(own)
    return {"method": "terminate", "outcome": "ended" if why is None else why, "by_pid": done["by_pid"], "message": why}


def held_end(node, journal, process, members):
    """The members ([{"pid", "creation_time_ms"}], the process last) ended by the terminate_held script: each held by a
    handle, its creation time compared on it, then `taskkill /F /PID` alone (never /T), journaled as one "taskkill"
    action -> {pid: {"outcome", "code" (taskkill's exit code when it ran), "message" (its words, for the report)}}."""
    parameters = {"ProcessIds": [m["pid"] for m in members], "CreationTimesMs": [m["creation_time_ms"] for m in members]}
    by_pid = {}

    def judge(answer):
        for item in _convertto_json.objects(answer.get("results") or "[]"):
            pid = _convertto_json.integer(item.get("ProcessId"))
            if pid is not None:
                by_pid[pid] = {"outcome": str(item.get("Outcome")), "code": _convertto_json.integer(item.get("Code")),
                               "message": item.get("Message") or None, "tool": "taskkill", "pid": pid}
        return by_pid.get(process["pid"], {}).get("outcome") == "ended", {
            "outcomes": dict((str(pid), result["outcome"]) for pid, result in by_pid.items()),
            "exit_codes": dict((str(pid), result["code"]) for pid, result in by_pid.items() if result["outcome"] in ("ended", "not_terminated"))}
    journal.around("taskkill", lambda: node.powershell(HELD_SCRIPT, parameters, read_only=False), judge, pid=process["pid"],
                   creation_time_ms=process["creation_time_ms"], name=process.get("name"), user=process.get("user"),
                   tree=[m["pid"] for m in members[:-1]], source=holder_source(process))
    return by_pid
