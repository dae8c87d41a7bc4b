# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""win_gpu_reset: the Windows rungs that act on the node itself, one method a run.

- kill: `taskkill /F /T /PID <pid>` for each selected holder that is still the same process (pid + creation time,
  checked against a fresh process list just before its taskkill; Windows reuses pids quickly); never a protected
  system process, the WSL VM, the shell, the connection's own host process, nor dwm unless allowed.
- restart_adapter: `pnputil /restart-device <instance id>` on the one adapter of each chosen GPU, joined to it by PCI
  location (by name only where no location came back, and never when two GPUs share the name); never `/class Display`,
  which restarts every adapter; exit 3010 means the restart waits for a reboot.
- logoff: `logoff <id>` for the sessions of one user, never session 0 (the services' session).
- restart_explorer: end the session's explorer.exe alone (`taskkill /F /PID`, without /T: /T would end every program
  the user started from it) and wait for Winlogon to start it again (AutoRestartShell, on by default). It is not
  started from here: a process started over WinRM or SSH runs in that network logon, not on the user's desktop.

Whatever a tool printed, the evidence is the node afterwards: the process gone by pid + creation time, the session
gone from quser, the adapter started. Steps that can cut the connection (an adapter restart, a logoff of the
connection's own session) run through tolerating_drop. run() is what the action plugin and the ladder call; bad
input raises WinResetInputError (a ValueError) naming the option and the value, before anything runs.
"""

from __future__ import annotations

import time

from ansible_collections.gpuops.remediation.plugins.module_utils._journal import holder_source
from ansible_collections.gpuops.remediation.plugins.module_utils._pci import normalize_bus_id
from ansible_collections.gpuops.remediation.plugins.module_utils._verdict import reset_evidence
from ansible_collections.gpuops.remediation.plugins.plugin_utils import (
    _win_journal, _win_pnputil, _win_processes, _win_protect, _win_sessions, _win_snapshot, _win_taskkill,
)
from ansible_collections.gpuops.remediation.plugins.plugin_utils._win_node import ConnectionDropped, WindowsNodeError

METHODS = ("kill", "restart_adapter", "logoff", "restart_explorer")
WIN_RESET_ARGUMENT_SPEC = {
    "method": {"type": "str", "required": True, "choices": list(METHODS)},
    "holders": {"type": "list", "elements": "dict", "default": []},
    "allow_dwm": {"type": "bool", "default": False},
    "protect_names": {"type": "list", "elements": "str", "default": []},
    "protect_users": {"type": "list", "elements": "str", "default": []},
    "gpu": {"type": "raw"},
    "force": {"type": "bool", "default": False},
    "user": {"type": "str"},
    "nvidia_smi": {"type": "str", "default": "nvidia-smi"},
    "ghost_threshold_mib": {"type": "int", "default": 256},
    "reconnect_timeout": {"type": "int", "default": 600},
    "shell_timeout": {"type": "int", "default": 30},
    "journal_path": {"type": "str"},
    "run_id": {"type": "str"},
}
SHELL_NAME = _win_protect.SHELL_NAME
SERVICES_SESSION = 0
_MAX_BACKOFF_S = 12
_SHELL_POLL_S = 1


class WinResetInputError(ValueError):
    """Bad input to win_gpu_reset; the message names the option and the value, and nothing was run."""


def run(node, args, check_mode, sleep=time.sleep):
    """Run the method `args["method"]` on `node` (_win_node) -> the module's result.

    `args`: the options of WIN_RESET_ARGUMENT_SPEC (missing ones take their defaults). The result has "changed",
    "failed" ("msg" when failed), "method", "plan" (one line per thing done, or that would be done in check mode),
    "connection_dropped", the method's details, "journal" (the lines this run wrote on the host, one before and one
    after each action), "interrupted_actions" (earlier runs' actions that never finished), and "snapshot_after" (not
    in check mode). `sleep` is what waits
    (between reconnection attempts, while the shell restarts). Raises WinResetInputError for bad input and
    WindowsNodeError when the node cannot be asked at all.
    """
    args = checked_args(args)
    journal = _win_journal.WindowsJournal(node, args["journal_path"], args["run_id"])
    interrupted = journal.interrupted(check_mode)
    act = {"kill": _kill, "restart_adapter": _restart_adapter, "logoff": _logoff, "restart_explorer": _restart_explorer}
    result = act[args["method"]](node, args, check_mode, sleep, journal)
    result.update(journal=journal.entries(), interrupted_actions=interrupted)
    result.setdefault("connection_dropped", False)
    result.update(method=args["method"], failed=bool(result.get("msg")))
    if not result["failed"]:
        result.pop("msg", None)
    if not check_mode:
        result["snapshot_after"] = _win_snapshot.take(node, args["nvidia_smi"], args["ghost_threshold_mib"], args["journal_path"])
    return result


# ---- input ---------------------------------------------------------------------------------------------------------

def checked_args(args):
    """The options with their defaults, each checked; WinResetInputError naming the first bad one."""
    full = dict((name, spec.get("default")) for name, spec in WIN_RESET_ARGUMENT_SPEC.items())
    full.update((name, value) for name, value in (args or {}).items() if value is not None or name not in full)
    unknown = sorted(set(full) - set(WIN_RESET_ARGUMENT_SPEC))
    if unknown:
        raise WinResetInputError("%s: not an option of win_gpu_reset (%s)" % (unknown[0], ", ".join(sorted(WIN_RESET_ARGUMENT_SPEC))))
    if full["method"] not in METHODS:
        raise WinResetInputError("method: %r is none of %s" % (full["method"], ", ".join(METHODS)))
    for name in ("ghost_threshold_mib", "reconnect_timeout", "shell_timeout"):
        if isinstance(full[name], bool) or not isinstance(full[name], int) or full[name] < 0:
            raise WinResetInputError("%s: %r is not a whole number of 0 or more" % (name, full[name]))
    full["holders"] = _checked_holders(full["holders"])
    for name in ("protect_names", "protect_users"):
        _checked_names(name, full[name])
    if full["gpu"] is not None:
        _checked_gpu_form(full["gpu"])
    if full["method"] in ("logoff", "restart_explorer"):
        _checked_user(full["user"], full["method"])
    try:
        _win_journal.checked_path(full["journal_path"])
    except ValueError as exc:
        raise WinResetInputError(str(exc)) from None
    return full


def _checked_holders(holders):
    if not isinstance(holders, (list, tuple)):
        raise WinResetInputError("holders: %r is not a list of {pid, creation_time_ms}" % (holders,))
    checked = []
    for at, holder in enumerate(holders):
        if not isinstance(holder, dict):
            raise WinResetInputError("holders[%d]: %r is not a mapping with pid and creation_time_ms" % (at, holder))
        holder = dict(holder)
        if holder.get("creation_time_ms") is None and holder.get("creation_time") is not None:
            holder["creation_time_ms"] = holder["creation_time"]  # the same milliseconds, under the short name
        for key in ("pid", "creation_time_ms"):
            value = holder.get(key)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise WinResetInputError("holders[%d].%s: %r is not a positive whole number (win_gpu_holders_info reports "
                                         "it)" % (at, key, value))
        checked.append(holder)
    return checked


def _checked_names(option, names):
    if not isinstance(names, (list, tuple)):
        raise WinResetInputError("%s: %r is not a list of names" % (option, names))
    for at, name in enumerate(names):
        if not isinstance(name, str) or not name.strip() or any(ord(c) < 32 for c in name):
            raise WinResetInputError("%s[%d]: %r is not a name" % (option, at, name))


def _checked_gpu_form(gpu):
    if isinstance(gpu, bool) or not isinstance(gpu, (int, str)) or (isinstance(gpu, int) and gpu < 0) \
            or (isinstance(gpu, str) and not gpu.strip()):
        raise WinResetInputError("gpu: %r is no GPU index, UUID or PCI bus id" % (gpu,))


def _checked_user(user, method):
    if user is None:
        raise WinResetInputError("user: required with method=%s (the user whose session it acts on)" % method)
    if not isinstance(user, str) or not user.strip() or any(ord(c) < 32 for c in user):
        raise WinResetInputError("user: %r is not a user name" % (user,))


# ---- a step that can cut the connection ---------------------------------------------------------------------------

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
            node.command(_win_sessions.quser_argv(), read_only=True)
            return None, True
        except WindowsNodeError as exc:
            last = exc
        if clock() >= deadline:
            raise WindowsNodeError("the connection dropped during %s and the host did not answer again within %d s: %s"
                                   % (what, timeout, last))
        delay = min(delay * 2, _MAX_BACKOFF_S)


# ---- reading the node -----------------------------------------------------------------------------------------------

def process_list(node):
    """{pid: process} from Win32_Process now (pid, name, creation_time_ms, session_id, user, role)."""
    answer = node.powershell("processes", {})
    try:
        return dict((p["pid"], p) for p in _win_processes.parse_cim_processes(answer.get("processes") or "[]"))
    except ValueError as exc:
        raise WindowsNodeError("the process list is not readable, nothing was done: %s" % exc) from None


def _sessions(node):
    answer = node.command(_win_sessions.quser_argv(), read_only=True)
    parsed = _win_sessions.parse_quser(answer.stdout, answer.rc, answer.stderr)
    if parsed.status != "ok":
        raise WindowsNodeError("quser's output is not recognised, nothing was done: %s" % parsed.message)
    return parsed.sessions


def _same(process, holder):
    return process is not None and process.get("creation_time_ms") == holder["creation_time_ms"]


def _who(process):
    user = (process.get("user") or "unknown user").split("\\")[-1]
    return "pid %s %s (%s, session %s)" % (process["pid"], process.get("name"), user, process.get("session_id"))


def _taskkill(node, journal, process, tree):
    pid = process["pid"]
    argv = _win_taskkill.taskkill_argv(pid, tree=tree)

    parsed = {}

    def judge(answer):
        parsed.update(_win_taskkill.parse_taskkill(answer.stdout, answer.stderr, answer.rc, pid), rc=answer.rc, argv=argv)
        return parsed["outcome"] == "ended", {"rc": answer.rc, "outcome": parsed["outcome"], "message": parsed["message"]}
    journal.around("taskkill", lambda: node.command(argv), judge, pid=pid, creation_time_ms=process.get("creation_time_ms"),
                   name=process.get("name"), user=process.get("user"), tree=tree, argv=argv, source=holder_source(process))
    return parsed


# ---- kill ----------------------------------------------------------------------------------------------------------

def _kill(node, args, check_mode, _sleep, journal):
    entries, by_tree = [], {}  # by_tree: pid -> (the selected pid whose taskkill /T ended it, or would, its record)
    policy = _win_protect.Policy.from_args(args)
    processes = process_list(node)
    for holder in args["holders"]:
        if entries and not check_mode:
            processes = process_list(node)  # fresh before each taskkill: Windows reuses pids quickly
        entry = _kill_one(node, journal, holder, processes, by_tree, policy, check_mode)
        entries.append(entry)
        if entry["outcome"] in ("would_end", "taskkill_ran"):
            _note_tree(entry, processes, by_tree)
    if not check_mode and any(e["outcome"] == "taskkill_ran" for e in entries):
        _judge_kills(entries, process_list(node))
    failures = [e for e in entries if e["outcome"] == "failed"]
    ended = [pid for e in entries if e["outcome"] in ("ended", "would_end") for pid in [e["pid"]] + e["also_ended"]]
    result = {"changed": any(e["outcome"] in ("ended", "would_end") or e["also_ended"] for e in entries),
              "processes": entries, "ended_pids": sorted(set(ended)),
              "plan": [e["line"] for e in entries] or ["no holder selected: nothing to end"]}
    if failures:
        result["msg"] = "taskkill did not end %s" % "; ".join(e["line"] for e in failures)
    return result


def _kill_one(node, journal, holder, processes, by_tree, policy, check_mode):
    process = processes.get(holder["pid"])
    entry = {"pid": holder["pid"], "creation_time_ms": holder["creation_time_ms"], "name": holder.get("name"),
             "user": holder.get("user"), "session_id": holder.get("session_id"), "also_ended": [], "tree_of": None,
             "taskkill": None, "reason": None}
    parent, record = by_tree.get(holder["pid"], (None, None))
    if parent is not None and _same(record, holder) and (check_mode or not _same(process, holder)):
        verb = "would end" if check_mode else "ended"
        return dict(entry, outcome=verb.replace(" ", "_"), tree_of=parent, name=record["name"],
                    line="%s %s with the tree of pid %s" % (verb, _who(record), parent))
    left = _left_reason(holder, process, policy)
    if left:
        outcome, reason = left
        return dict(entry, outcome=outcome, reason=reason, line="left pid %s %s: %s" % (holder["pid"], holder.get("name") or "", reason))
    entry.update(name=process["name"], user=process.get("user"), session_id=process.get("session_id"))
    refused = _win_protect.tree_refusal(processes, process, policy)
    if refused:
        return dict(entry, outcome="refused", reason=refused, line="left pid %s %s: %s" % (holder["pid"], process["name"], refused))
    if check_mode:
        return dict(entry, outcome="would_end", line="would end %s with taskkill /F /T" % _who(process))
    return dict(entry, outcome="taskkill_ran", taskkill=_taskkill(node, journal, process, tree=True), process=process)


def _note_tree(entry, processes, by_tree):
    """The tree taskkill /T takes (or, in check mode, would take) with the selected process: its descendants as the
    process list shows them just before (pid + creation time), whatever taskkill prints afterwards, in any language.
    In check mode they are all predicted ended; after the run, _judge_kills keeps those gone by pid + creation time."""
    pids = _win_protect.descendants(processes, processes[entry["pid"]])
    entry["tree"] = [_identity(processes[pid]) for pid in pids]
    entry["also_ended"] = sorted(pids)
    for pid in pids:
        by_tree.setdefault(pid, (entry["pid"], processes[pid]))


def _left_reason(holder, process, policy):
    """(outcome, reason) for a holder left alone, or None when it is to be ended."""
    if process is None:
        return "gone", "already gone"
    if not _same(process, holder):
        return "pid_reused", "pid reused: pid %s is now %s, started at %s ms, not the process selected (started at %s ms)" % (
            holder["pid"], process.get("name"), process.get("creation_time_ms"), holder["creation_time_ms"])
    refusal = _win_protect.refusal(process, policy)
    return ("refused", refusal) if refusal else None


def _judge_kills(entries, after):
    """The evidence: a process selected, or one of its tree, is ended only when it is gone by pid + creation time from
    the process list read after taskkill (its words are kept for the report: they are localized)."""
    for entry in entries:
        if "tree" in entry:
            entry["also_ended"] = sorted(member["pid"] for member in entry["tree"] if not _same(after.get(member["pid"]), member))
        if entry["outcome"] != "taskkill_ran":
            continue
        process, answer = entry.pop("process"), entry["taskkill"]
        if _same(after.get(entry["pid"]), entry):
            reason = answer["outcome"] if answer["outcome"] != "ended" else "taskkill exited 0, the process still runs"
            detail = " (%s)" % answer["message"] if answer["message"] else ""
            entry.update(outcome="failed", reason=reason, line="could not end %s with taskkill /F /T: %s%s" % (_who(process), reason, detail))
        else:
            entry.update(outcome="ended", line="ended %s with taskkill /F /T" % _who(process))


# ---- restart_adapter -----------------------------------------------------------------------------------------------

def _restart_adapter(node, args, check_mode, sleep, journal):
    before = _win_snapshot.take(node, args["nvidia_smi"], args["ghost_threshold_mib"], args["journal_path"])
    chosen = _chosen_gpus(before, args["gpu"])
    entries = [_adapter_plan(before, gpu, args) for gpu in chosen]
    dropped = False
    for entry in entries:
        if entry["outcome"] == "restart" and not check_mode:
            dropped = _restart_one(node, journal, entry, args, sleep) or dropped
    if not check_mode and any(e["outcome"] in ("restarted", "reboot_required", "unknown") for e in entries):
        _judge_restarts(node, entries, args)
    for entry in entries:
        entry["line"] = _adapter_line(entry, check_mode)
    failures = [e for e in entries if e["outcome"] in ("failed", "unsupported", "no_adapter")]
    result = {"changed": any(e["outcome"] in ("restart", "restarted", "reboot_required") for e in entries),
              "adapters": entries, "reboot_required": any(e["reboot_required"] for e in entries),
              "connection_dropped": dropped, "plan": [e["line"] for e in entries] or ["no GPU needs an adapter restart"]}
    if failures:
        result["msg"] = "; ".join(e["line"] for e in failures)
    return result


def _chosen_gpus(snapshot, wanted):
    """The GPUs `gpu` names (index, UUID or PCI bus id), or every GPU when unset (those that need it are restarted)."""
    if wanted is None:
        return list(snapshot["gpus"])
    text = str(wanted).strip()
    bus = normalize_bus_id(text) if not text.isdigit() else None
    for gpu in snapshot["gpus"]:
        if (text.isdigit() and gpu["index"] == int(text)) or (gpu.get("uuid") or "").lower() == text.lower() \
                or (bus is not None and gpu.get("pci_bus_id") == bus):
            return [gpu]
    known = ", ".join("%s (%s, %s)" % (g["index"], g.get("uuid"), g.get("pci_bus_id")) for g in snapshot["gpus"]) or "none"
    raise WinResetInputError("gpu: %r names no GPU of the node (its GPUs: %s)" % (wanted, known))


def _adapter_plan(snapshot, gpu, args):
    reason = reset_evidence(gpu, [], args["ghost_threshold_mib"]) or ("force=true" if args["force"] else None)
    adapters = [a for a in snapshot["adapters"] if a.get("gpu") == gpu["index"]]
    join = snapshot["probes"].get("adapter_join") or {}
    display = any(gpu["index"] in (h.get("gpus") or []) and h["class"] == "graphics_session" for h in snapshot["holders"])
    entry = {"gpu": gpu["index"], "name": gpu.get("name"), "reason": reason, "display": display,
             "instance_id": adapters[0]["instance_id"] if len(adapters) == 1 else None, "argv": None, "rc": None,
             "adapter_join": join.get("method"), "reboot_required": False, "message": None, "connection_dropped": False}
    if reason is None:
        return dict(entry, outcome="not_needed", reason="nothing asks for a restart (state %s)" % gpu.get("state"))
    if entry["instance_id"] is None:
        return dict(entry, outcome="no_adapter", message="%d PnP display adapters are joined to it, not one (joined by %s: %s)" % (
            len(adapters), join.get("method"), join.get("error")))
    try:
        argv = _win_pnputil.restart_device_argv(entry["instance_id"])
    except ValueError as exc:
        return dict(entry, outcome="no_adapter", message="pnputil cannot be given its adapter's id (%s)" % exc)
    return dict(entry, outcome="restart", argv=argv)


def _journaled_drop(node, journal, action, entry, what, args, sleep, judge, **details):
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


def _restart_one(node, journal, entry, args, sleep):
    def judge(answer):
        done = _win_pnputil.restart_outcome(answer.rc, answer.stdout + answer.stderr)
        return done["outcome"] in ("restarted", "reboot_required"), {"rc": answer.rc, "outcome": done["outcome"],
                                                                     "reboot_required": done["reboot_required"]}
    answer, dropped = _journaled_drop(node, journal, "restart_adapter", entry, "the restart of %s" % entry["instance_id"], args,
                                      sleep, judge, gpu=entry["gpu"], instance_id=entry["instance_id"], reason=entry["reason"])
    if dropped:
        # pnputil's exit code is lost with the connection: the adapter's state afterwards decides.
        entry.update(outcome="unknown", connection_dropped=True, reboot_required=None)
        return True
    done = _win_pnputil.restart_outcome(answer.rc, answer.stdout + answer.stderr)
    entry.update(rc=answer.rc, outcome=done["outcome"], reboot_required=done["reboot_required"], message=done["message"])
    return False


def _judge_restarts(node, entries, args):
    """After the restart: the adapter is started again (and, when the connection dropped, the GPU no longer needs it)."""
    after = _win_snapshot.take(node, args["nvidia_smi"], args["ghost_threshold_mib"], args["journal_path"])
    for entry in entries:
        if entry["outcome"] not in ("restarted", "reboot_required", "unknown"):
            continue
        adapter = next((a for a in after["adapters"] if a["instance_id"].lower() == entry["instance_id"].lower()), None)
        gpu = next((g for g in after["gpus"] if g["index"] == entry["gpu"]), None)
        # The problem code is language-neutral where the status word is not ("Problem" is "Problem" in German too).
        if adapter is None or adapter.get("started") is False or adapter.get("problem_code") is not None:
            entry.update(outcome="failed", message="the adapter is %s after the restart" % (
                "gone" if adapter is None else "%s (problem code %s)" % (adapter["status"], adapter["problem_code"])
                if adapter.get("problem_code") is not None else adapter["status"]))
        elif entry["outcome"] == "unknown":
            still = gpu is not None and reset_evidence(gpu, [], args["ghost_threshold_mib"])
            entry.update(outcome="failed" if still else "restarted",
                         message="the connection dropped; after it: %s" % (still or "the adapter is started, the GPU no longer needs a restart"))


def _adapter_line(entry, check_mode):
    gpu = "GPU %s (%s)" % (entry["gpu"], entry["name"])
    if entry["outcome"] == "not_needed":
        return "left %s: %s" % (gpu, entry["reason"])
    if entry["outcome"] == "no_adapter":
        return "could not restart %s: %s" % (gpu, entry["message"])
    display = "; it drives the display, the connection may drop" if entry["display"] else ""
    how = "with pnputil /restart-device %s (%s)%s" % (entry["instance_id"], entry["reason"], display)
    if check_mode:
        return "would restart the adapter of %s %s" % (gpu, how)
    verb = {"restarted": "restarted the adapter of", "reboot_required": "restarted, pending a reboot (exit 3010), the adapter of"}
    line = "%s %s %s" % (verb.get(entry["outcome"], "could not restart the adapter of"), gpu, how)
    return line + (": %s" % entry["message"] if entry["message"] and entry["outcome"] != "reboot_required" else "")


# ---- logoff --------------------------------------------------------------------------------------------------------

def _logoff(node, args, check_mode, sleep, journal):
    mine = _win_sessions.sessions_of(_sessions(node), args["user"])
    entries = [_logoff_plan(session) for session in mine]
    dropped = False
    for entry in entries:
        if entry["outcome"] == "logoff" and not check_mode:
            dropped = _logoff_one(node, journal, entry, args, sleep) or dropped
    if not check_mode and entries:
        remaining = set((s["id"], s["user"].lower()) for s in _sessions(node))
        for entry in entries:
            if entry["outcome"] == "logoff_ran":
                gone = (entry["id"], entry["user"].lower()) not in remaining
                entry["outcome"] = "logged_off" if gone else "failed"
    for entry in entries:
        entry["line"] = _session_line(entry, check_mode)
    failures = [e for e in entries if e["outcome"] == "failed"]
    result = {"changed": any(e["outcome"] in ("logoff", "logged_off") for e in entries), "sessions": entries,
              "connection_dropped": dropped, "plan": [e["line"] for e in entries] or ["no session of %s: nothing to log off" % args["user"]]}
    if failures:
        result["msg"] = "; ".join(e["line"] for e in failures)
    return result


def _logoff_plan(session):
    entry = dict(session, argv=None, rc=None, message=None, connection_dropped=False)
    if session["id"] == SERVICES_SESSION:
        return dict(entry, outcome="refused", message="session 0 is the services' session: never logged off")
    return dict(entry, outcome="logoff", argv=_win_sessions.logoff_argv(session["id"]))


def _logoff_one(node, journal, entry, args, sleep):
    def judge(answer):
        return answer.rc == 0, {"rc": answer.rc}
    answer, dropped = _journaled_drop(node, journal, "logoff", entry, "the logoff of session %s" % entry["id"], args, sleep, judge,
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


# ---- restart_explorer ----------------------------------------------------------------------------------------------

def _restart_explorer(node, args, check_mode, sleep, journal):
    sessions = [s for s in _win_sessions.sessions_of(_sessions(node), args["user"]) if s["id"] != SERVICES_SESSION]
    snapshot = _win_snapshot.take(node, args["nvidia_smi"], args["ghost_threshold_mib"], args["journal_path"])
    processes = process_list(node)
    policy = _win_protect.Policy.from_args(args, allow_shell=True)
    entries = [_shell_plan(session, processes, snapshot, args["force"], policy) for session in sessions]
    for entry in entries:
        if entry["outcome"] == "restart" and not check_mode:
            _restart_shell(node, journal, entry, args["shell_timeout"], sleep)
        entry["line"] = _shell_line(entry, check_mode)
    failures = [e for e in entries if e["outcome"] == "failed"]
    result = {"changed": any(e["outcome"] in ("restart", "restarted") or e.get("ended") for e in entries), "sessions": entries,
              "plan": [e["line"] for e in entries] or ["no session of %s: no explorer to restart" % args["user"]]}
    if failures:
        result["msg"] = "; ".join(e["line"] for e in failures)
    return result


def _shell_plan(session, processes, snapshot, force, policy):
    shells = [p for p in processes.values() if p.get("session_id") == session["id"] and _win_processes.base_name(p.get("name")) == SHELL_NAME]
    held = sum(h.get("used_mib") or 0 for h in snapshot["holders"] if h["pid"] in [p["pid"] for p in shells])
    entry = {"id": session["id"], "user": session["user"], "explorer_before": [_identity(p) for p in shells], "explorer_after": None,
             "gpu_memory_mib": held, "ended": False, "message": None}
    if not shells:
        return dict(entry, outcome="no_shell", message="no explorer.exe runs in it")
    refused = [why for why in (_win_protect.refusal(shell, policy) for shell in shells) if why]
    if refused:
        return dict(entry, outcome="refused", message="; ".join(refused))
    if not held and not force:
        return dict(entry, outcome="not_needed", message="its explorer.exe holds no GPU memory (force=true restarts it anyway)")
    return dict(entry, outcome="restart")


def _identity(process):
    return {"pid": process["pid"], "creation_time_ms": process.get("creation_time_ms")}


def _restart_shell(node, journal, entry, timeout, sleep):
    for shell in entry["explorer_before"]:
        answer = _taskkill(node, journal, dict(shell, name="explorer.exe", user=entry["user"]), tree=False)
        entry["message"] = answer["message"]
    after = _new_shells(node, entry, timeout, sleep)
    old = [s for s in entry["explorer_before"] if s in after["all"]]
    entry.update(ended=len(old) < len(entry["explorer_before"]), explorer_after=after["new"])
    if old:
        entry.update(outcome="failed", message="explorer.exe is still running: %s" % (entry["message"] or "taskkill said nothing"))
    elif not after["new"]:
        entry.update(outcome="failed", message="explorer.exe ended, Windows did not start it again within %d s (AutoRestartShell off?): "
                     "the user can start it from Task Manager, or log off and on" % timeout)
    else:
        entry.update(outcome="restarted", message=None)


def _new_shells(node, entry, timeout, sleep, clock=time.monotonic):
    """Poll the session's explorer.exe until one that is not an old one runs, or `timeout` passes."""
    deadline = clock() + timeout
    while True:
        shells = [_identity(p) for p in process_list(node).values()
                  if p.get("session_id") == entry["id"] and _win_processes.base_name(p.get("name")) == SHELL_NAME]
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
        return "would restart %s: end %s with taskkill /F, Windows starts it again" % (what, pids)
    if entry["outcome"] == "restarted":
        return "restarted %s: ended %s with taskkill /F, Windows started %s" % (
            what, pids, ", ".join("pid %s" % s["pid"] for s in entry["explorer_after"]))
    return "could not restart %s: %s" % (what, entry["message"])
