# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""taskkill: the argv that ends one process tree by force, and what its output says happened.

The exit status decides where it can (0: ended, 128: no such process); the per-pid lines are read only in the
English wording the captures show ("SUCCESS"/"ERROR" and the "Reason:" line), anything else is "unrecognised".
Whatever taskkill says, a process counts as ended only once it is gone by pid + creation time.
"""

from __future__ import annotations

import re

from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.tools._cim_processes import PROTECTED_PIDS

RC_ENDED = 0
RC_FAILED = 1
RC_NOT_FOUND = 128

# Reason: line -> our reason.
_REASONS = {
    "access is denied.": "access_denied",
    "this is critical system process. taskkill cannot end this process.": "critical_process",
    "there is no running instance of the task.": "not_running",
    "this process can only be terminated forcefully (with /f option).": "needs_force",
}
_CHILD = r"(?: \(child process of PID (?P<parent>\d+)\))?"
_SUCCESS_RE = re.compile(r'^SUCCESS: The process (?:"[^"]*" )?with PID (?P<pid>\d+)' + _CHILD + r" has been terminated\.$")
_ERROR_RE = re.compile(r'^ERROR: The process (?:"[^"]*" )?with PID (?P<pid>\d+)' + _CHILD + r" could not be terminated\.$")
_NOT_FOUND_RE = re.compile(r'^ERROR: The process "(?P<what>[^"]*)" not found\.$')
_REASON_RE = re.compile(r"^Reason: (?P<reason>.*)$")


def taskkill_argv(pid, tree=True):
    """argv ending pid (and with `tree` its children) by force: without /F taskkill only asks a window to close."""
    if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0 or pid in PROTECTED_PIDS:
        raise ValueError("not a pid taskkill may be given: %r" % (pid,))
    argv = ["taskkill", "/F"]
    if tree:
        argv.append("/T")
    return argv + ["/PID", str(pid)]


def parse_taskkill(stdout, stderr, rc, pid):
    """-> {"outcome": "ended"|"not_found"|"access_denied"|"critical_process"|"not_running"|"needs_force"|"failed"|
    "unrecognised", "pids": {pid: {"ended": bool, "reason": str|None, "parent": int|None}}, "message": str|None}.

    `outcome` is about `pid`; "pids" lists every process of the tree a line named.
    """
    lines = [line.strip() for line in (stdout + "\n" + stderr).splitlines() if line.strip()]
    pids, not_found = _per_pid(lines)
    message = " / ".join(lines) or None
    own = pids.get(pid)
    if rc == RC_ENDED:
        return {"outcome": "ended", "pids": pids, "message": None}
    if rc == RC_NOT_FOUND or str(pid) in not_found:
        return {"outcome": "not_found", "pids": pids, "message": message}
    if own is not None and own["reason"] is not None:
        return {"outcome": own["reason"], "pids": pids, "message": message}
    if own is not None and not own["ended"]:
        return {"outcome": "failed", "pids": pids, "message": message}
    return {"outcome": "unrecognised", "pids": pids, "message": "taskkill exited %s: %s" % (rc, message)}


def _per_pid(lines):
    pids, not_found, last = {}, set(), None
    for line in lines:
        match = _SUCCESS_RE.match(line) or _ERROR_RE.match(line)
        if match:
            last = int(match.group("pid"))
            pids[last] = {"ended": line.startswith("SUCCESS"), "reason": None,
                          "parent": int(match.group("parent")) if match.group("parent") else None}
            continue
        match = _NOT_FOUND_RE.match(line)
        if match:
            not_found.add(match.group("what"))
            continue
        match = _REASON_RE.match(line)
        if match and last is not None and not pids[last]["ended"]:
            pids[last]["reason"] = _REASONS.get(match.group("reason").strip().lower(), "failed")
    return pids, not_found
