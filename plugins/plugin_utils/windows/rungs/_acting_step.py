# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What every Windows rung that acts on the node needs (win_gpu_reset's methods: _kill_holders, _adapter_restart, _session_logoff,
_explorer_restart): the input error, a step that can cut the connection and its journal lines, the node's processes and
sessions now, and how a process is named and told apart (pid + creation time)."""

from __future__ import annotations

import time

from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.tools import _cim_processes, _interactive_sessions
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node._remote_node import ConnectionDropped, WindowsNodeError

SERVICES_SESSION = 0
_MAX_BACKOFF_S = 12


class WinResetInputError(ValueError):
    """Bad input to win_gpu_reset; the message names the option and the value, and nothing was run."""


def tolerating_drop(node, act, what, timeout, sleep=time.sleep, clock=time.monotonic):
    """act() -> (its answer, False); when the connection drops during it -> (None, True) once the host answers again.

    What the step did is then not known from its answer: the caller decides by the node's state afterwards. Between
    tries the connection is reopened (node.reconnect, as win_reboot does) and quser asked, with a backoff of 1, 2,
    4 ... 12 s; WindowsNodeError when the host has not answered within `timeout` seconds.
    """
    try:
        return act(), False
    except ConnectionDropped as exc:
        last = exc
    deadline = clock() + timeout
    delay = 1
    while True:
        sleep(min(delay, max(0, deadline - clock())))
        try:
            node.reconnect()
            node.command(_interactive_sessions.quser_argv(), read_only=True)
            return None, True
        except WindowsNodeError as exc:
            last = exc
        if clock() >= deadline:
            raise WindowsNodeError("the connection dropped during %s and the host did not answer again within %d s: %s"
                                   % (what, timeout, last))
        delay = min(delay * 2, _MAX_BACKOFF_S)


def journaled_drop(node, journal, action, entry, what, args, sleep, judge, **details):
    """tolerating_drop of entry's argv, between its journal lines: a dropped connection is written as not ok, the
    node's state afterwards deciding (what the caller does next)."""
    step = {}

    def act():
        step["answer"], step["dropped"] = tolerating_drop(node, lambda: node.command(entry["argv"]), what, args["reconnect_timeout"], sleep)
        return step

    def judged(done):
        if done["dropped"]:
            return False, {"connection_dropped": True, "evidence": "the node afterwards decides"}
        return judge(done["answer"])
    journal.around(action, act, judged, argv=entry["argv"], **details)
    return step["answer"], step["dropped"]


def process_list(node):
    """{pid: process} from Win32_Process now (pid, name, creation_time_ms, session_id, user, role; run_ancestor: the
    process the script ran in and its ancestors, the run's own connection)."""
    answer = node.powershell("processes", {})
    try:
        listed = _cim_processes.parse_cim_processes(answer.get("processes") or "[]", _cim_processes.script_shell(answer))
        by_pid = dict((p["pid"], p) for p in listed)
        return _cim_processes.mark_run_ancestors(by_pid, answer.get("own_pid"))
    except ValueError as exc:
        raise WindowsNodeError("the process list is not readable, nothing was done: %s" % exc) from None


def sessions(node):
    """The node's sessions now (_interactive_sessions.read: the session API, else quser's columns)."""
    found = _interactive_sessions.read(node)
    if found.status != "ok":
        raise WindowsNodeError("quser's output is not recognised, nothing was done: %s" % found.message)
    return found.sessions


def same(process, holder):
    return process is not None and process.get("creation_time_ms") == holder["creation_time_ms"]


def who(process):
    user = (process.get("user") or "unknown user").split("\\")[-1]
    return "pid %s %s (%s, session %s)" % (process["pid"], process.get("name"), user, process.get("session_id"))


def identity(process):
    return {"pid": process["pid"], "creation_time_ms": process.get("creation_time_ms")}
