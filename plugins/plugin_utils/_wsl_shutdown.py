# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What wsl_shutdown does, on a Windows node (real or simulated, _win_node): stop one WSL distribution
(wsl --terminate) or all of them and the WSL VM (wsl --shutdown), only when something runs. Used by the action
plugin wsl_shutdown and by the Windows ladder's wsl rung."""

from __future__ import annotations

from ansible_collections.gpuops.remediation.plugins.plugin_utils import _win_snapshot, _win_wsl
from ansible_collections.gpuops.remediation.plugins.plugin_utils._win_node import WindowsNodeError

ARGUMENT_SPEC = {"distribution": {"type": "str"}}


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
    listed = _win_snapshot.running_distributions(node, path, probes)
    if listed["status"] != "ok":
        raise WindowsNodeError("wsl.exe's list of running distributions is not readable, nothing was stopped: %s" % listed["message"])
    return listed["running"]


def plan(distribution, running_now):
    """(argv builder, the distributions it stops): nothing when none of them runs."""
    if distribution is None:
        return (_win_wsl.shutdown_argv, list(running_now)) if running_now else (None, [])
    stopping = [name for name in running_now if name.lower() == distribution.lower()]
    return (lambda path: _win_wsl.terminate_argv(distribution, path), stopping) if stopping else (None, [])


def stop(node, distribution, check_mode):
    """The module's result: what ran (or would), what was running before and after; failed when it did not stop them."""
    path = wsl_path(node)
    before = running(node, path)
    build, stopping = plan(checked(distribution), before)
    outcome = {"changed": bool(stopping), "stopped": stopping, "running_before": before, "wsl_path": path,
               "command": build(path) if build else None, "simulated": node.simulated}
    if not build or check_mode:
        outcome["running_after"] = [name for name in before if name not in stopping]
        return outcome
    answer = node.command(build(path))
    done = _win_wsl.stop_outcome(answer.rc, answer.stdout + answer.stderr)
    after = running(node, path)
    outcome.update(running_after=after, rc=answer.rc, message=done["message"])
    still = [name for name in stopping if name in after]
    if not done["done"] or still:
        why = done["message"] or "still running"
        outcome.update(failed=True, msg="%s did not stop %s: %s" % (" ".join(outcome["command"]), ", ".join(still or stopping), why))
    return outcome
