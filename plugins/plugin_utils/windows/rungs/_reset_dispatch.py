# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""win_gpu_reset: the Windows rungs that act on the node itself, one method a run.

- kill: the terminate script (_end_by_handle: each process opened by pid, its creation time compared on that handle,
  that handle terminated; the tree member by member, deepest first) for each selected holder that is still the same
  process (pid + creation time, checked against a fresh process list just before; Windows reuses pids quickly); where the
  script cannot be compiled, each member held by its handle and ended by taskkill /F /PID (never /T); never a protected
  system process, the WSL VM, the shell, the connection's own host process, nor dwm unless allowed.
- restart_adapter: `pnputil /restart-device <instance id>` on the one adapter of each chosen GPU, joined to it by PCI
  location (by name only where no location came back, and never when two GPUs share the name); never `/class Display`,
  which restarts every adapter; exit 3010 means the restart waits for a reboot.
- logoff: `logoff <id>` for the sessions of one user, never session 0 (the services' session).
- restart_explorer: end the session's explorer.exe alone (the terminate script, no tree: it would end every program
  the user started from it) and wait for Winlogon to start it again (AutoRestartShell, on by default). It is not
  started from here: a process started over WinRM or SSH runs in that network logon, not on the user's desktop.

Whatever a tool printed, the evidence is the node afterwards: the process gone by pid + creation time, the session
gone from quser, the adapter started. Steps that can cut the connection (an adapter restart, a logoff of the
connection's own session) run through tolerating_drop. run() is what the action plugin and the ladder call; bad
input raises WinResetInputError (a ValueError) naming the option and the value, before anything runs.
"""

from __future__ import annotations

import re
import time

from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.rungs import _adapter_restart, _kill_holders, _session_logoff, _explorer_restart
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node import _node_journal
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.tools import _nvidia_smi_output
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows import _node_snapshot
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.rungs._acting_step import WinResetInputError

_SID_RE = re.compile(r"^S-1-\d+(-\d+)*$", re.IGNORECASE)
METHODS = ("kill", "restart_adapter", "logoff", "restart_explorer")
WIN_RESET_ARGUMENT_SPEC = {
    "method": {"type": "str", "required": True, "choices": list(METHODS)},
    "holders": {"type": "list", "elements": "dict", "default": []},
    "allow_dwm": {"type": "bool", "default": False},
    "allow_daemons": {"type": "bool", "default": False},
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


def run(node, args, check_mode, sleep=time.sleep):
    """Run the method `args["method"]` on `node` (_remote_node) -> the module's result.

    `args`: the options of WIN_RESET_ARGUMENT_SPEC (missing ones take their defaults). The result has "changed",
    "failed" ("msg" when failed), "method", "plan" (one line per thing done, or that would be done in check mode),
    "connection_dropped", the method's details, "journal" (the lines this run wrote on the host, one before and one
    after each action), "interrupted_actions" (earlier runs' actions that never finished), and "snapshot_after" (not
    in check mode). `sleep` is what waits
    (between reconnection attempts, while the shell restarts). Raises WinResetInputError for bad input and
    WindowsNodeError when the node cannot be asked at all.
    """
    args = checked_args(args)
    journal = _node_journal.WindowsJournal(node, args["journal_path"], args["run_id"])
    # Read only here: a gpu that names no GPU of the node is found bad inside the method, and bad input writes nothing.
    interrupted = journal.interrupted(True)
    act = {"kill": _kill_holders.act, "restart_adapter": _adapter_restart.act, "logoff": _session_logoff.act,
           "restart_explorer": _explorer_restart.act}
    result = act[args["method"]](node, args, check_mode, sleep, journal)
    if check_mode and result.get("changed"):
        journal.check()  # the real run's first journal line would be refused the same way, before anything is done
    if not check_mode and interrupted:
        journal.interrupted(False)  # their outcome written now (interrupted), so that each is reported once
    result.update(journal=journal.entries(), interrupted_actions=interrupted)
    result.setdefault("connection_dropped", False)
    result.update(method=args["method"], failed=bool(result.get("msg")))
    if not result["failed"]:
        result.pop("msg", None)
    if not check_mode:
        result["snapshot_after"] = _node_snapshot.take(node, args["nvidia_smi"], args["ghost_threshold_mib"], args["journal_path"])
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
    _checked_users(full["protect_users"])
    if full["gpu"] is not None:
        _checked_gpu_form(full["gpu"])
    if full["method"] in ("logoff", "restart_explorer"):
        _checked_user(full["user"], full["method"])
    try:
        _node_journal.checked_path(full["journal_path"])
        _nvidia_smi_output.checked_nvidia_smi(full["nvidia_smi"])
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


def _checked_users(users):
    """protect_users names users (ada, WS12\\ada, ada@corp): the process list gives each process's owner by name, so a
    SID or a group (Linux's @group) would match no process and protect nothing, silently."""
    for at, user in enumerate(users):
        if user.strip().startswith("@"):
            raise WinResetInputError("protect_users[%d]: %r is a group (Linux's @group): on Windows protect_users names users "
                                     "(ada, DOMAIN\\ada, ada@domain), and a group would protect no process" % (at, user))
        if _SID_RE.match(user.strip()):
            raise WinResetInputError("protect_users[%d]: %r is a SID: on Windows protect_users names users (ada, "
                                     "DOMAIN\\ada, ada@domain) as the process list gives owners, and a SID would protect no "
                                     "process" % (at, user))


def _checked_gpu_form(gpu):
    if isinstance(gpu, (list, tuple)) and not gpu:
        return  # an empty selection (a filter that matched nothing): no GPU, nothing restarted
    if isinstance(gpu, bool) or not isinstance(gpu, (int, str)) or (isinstance(gpu, int) and gpu < 0) \
            or (isinstance(gpu, str) and not gpu.strip()):
        raise WinResetInputError("gpu: %r is no GPU index, UUID or PCI bus id" % (gpu,))


def _checked_user(user, method):
    if user is None:
        raise WinResetInputError("user: required with method=%s (the user whose session it acts on)" % method)
    if not isinstance(user, str) or not user.strip() or any(ord(c) < 32 for c in user):
        raise WinResetInputError("user: %r is not a user name" % (user,))
