# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What wsl_shutdown does, on a Windows node (real or simulated, _win_node): stop one WSL distribution
(wsl --terminate) or all of them and the WSL VM (wsl --shutdown), only when something runs. Used by the action
plugin wsl_shutdown and by the Windows ladder's wsl rung."""

from __future__ import annotations

from ansible_collections.gpuops.remediation.plugins.plugin_utils import _win_journal, _win_processes, _win_snapshot, _win_wsl
from ansible_collections.gpuops.remediation.plugins.plugin_utils._win_node import WindowsNodeError

ARGUMENT_SPEC = {"distribution": {"type": "str"}, "journal_path": {"type": "str"}, "run_id": {"type": "str"}}


def checked(distribution):
    """The distribution option, refused with a ValueError naming it when it could be read as an option or a list."""
    if distribution is not None:
        try:
            _win_wsl.checked_distribution_name(distribution)
        except ValueError as exc:
            raise ValueError("distribution: %s; nothing was stopped" % exc) from None
    return distribution


def wsl_path(node):
    found = node.powershell("wsl_path", {"Path": _win_wsl.STORE_WSL_PATH})
    return _win_wsl.STORE_WSL_PATH if found.get("exists") else _win_wsl.INBOX_WSL_PATH


def running(node, path):
    probes = {}
    answer = node.powershell("processes", {})
    try:
        processes = _win_processes.parse_cim_processes(answer.get("processes") or "[]")
    except ValueError as exc:
        raise WindowsNodeError("the process list is not readable, nothing was stopped: %s" % exc) from None
    listed = _win_snapshot.running_distributions(node, path, probes, _win_snapshot.vm_running(processes))
    if listed["status"] != "ok":
        raise WindowsNodeError("wsl.exe's list of running distributions is not readable, nothing was stopped: %s" % listed["message"])
    return listed["running"]


def plan(distribution, running_now):
    """(argv builder, the distributions it stops): nothing when none of them runs."""
    if distribution is None:
        return (_win_wsl.shutdown_argv, list(running_now)) if running_now else (None, [])
    stopping = [name for name in running_now if name.lower() == distribution.lower()]
    return (lambda path: _win_wsl.terminate_argv(distribution, path), stopping) if stopping else (None, [])


def stop(node, distribution, check_mode, journal_path=None, run_id=None):
    """The module's result: what ran (or would), what was running before and after, the journal lines it wrote on
    the host and the earlier runs' interrupted actions; failed when it did not stop them."""
    checked(distribution)
    journal = _win_journal.WindowsJournal(node, journal_path, run_id)
    interrupted = journal.interrupted(check_mode)
    path = wsl_path(node)
    before = running(node, path)
    build, stopping = plan(distribution, before)
    outcome = {"changed": bool(stopping), "stopped": stopping, "running_before": before, "wsl_path": path,
               "command": build(path) if build else None, "simulated": node.simulated, "interrupted_actions": interrupted}
    if not build or check_mode:
        outcome.update(running_after=[name for name in before if name not in stopping], journal=journal.entries())
        return outcome
    done = {}

    def judge(answer):
        done.update(_win_wsl.stop_outcome(answer.rc, answer.stdout + answer.stderr), rc=answer.rc)
        return done["done"], {"rc": answer.rc, "message": done["message"]}
    action = "wsl_terminate" if distribution is not None else "wsl_shutdown"
    journal.around(action, lambda: node.command(build(path)), judge, argv=build(path), distribution=distribution, stopping=stopping)
    outcome["journal"] = journal.entries()
    after = running(node, path)
    outcome.update(running_after=after, rc=done["rc"], message=done["message"])
    still = [name for name in stopping if name in after]
    if not done["done"] or still:
        why = done["message"] or "still running"
        outcome.update(failed=True, msg="%s did not stop %s: %s" % (" ".join(outcome["command"]), ", ".join(still or stopping), why))
    return outcome
