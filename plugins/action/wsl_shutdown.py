# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""wsl_shutdown: stop one WSL distribution (wsl --terminate) or all of them and the WSL VM (wsl --shutdown)."""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.gpuops.remediation.plugins.plugin_utils import _win_snapshot, _win_wsl
from ansible_collections.gpuops.remediation.plugins.plugin_utils._win_node import WindowsNodeError, windows_node

ARGUMENT_SPEC = {"distribution": {"type": "str"}}


def _wsl_path(node):
    found = node.powershell("wsl_path", {"Path": _win_wsl.STORE_WSL_PATH})
    return _win_wsl.STORE_WSL_PATH if found.get("exists") else _win_wsl.INBOX_WSL_PATH


def _running(node, wsl_path):
    probes = {}
    listed = _win_snapshot.running_distributions(node, wsl_path, probes)
    if listed["status"] != "ok":
        raise WindowsNodeError("wsl.exe's list of running distributions is not readable, nothing was stopped: %s" % listed["message"])
    return listed["running"]


def plan(distribution, running):
    """(argv builder, the distributions it stops): nothing when none of them runs."""
    if distribution is None:
        return (_win_wsl.shutdown_argv, list(running)) if running else (None, [])
    stopping = [name for name in running if name.lower() == distribution.lower()]
    return (lambda path: _win_wsl.terminate_argv(distribution, path), stopping) if stopping else (None, [])


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        dummy, args = self.validate_argument_spec(ARGUMENT_SPEC)
        distribution = args["distribution"]
        if distribution is not None:
            try:
                _win_wsl.checked_distribution_name(distribution)
            except ValueError as exc:
                raise AnsibleActionFail("distribution: %s; nothing was stopped" % exc) from None
        node = windows_node(self, task_vars or {})
        try:
            result.update(self._stop(node, distribution))
        except WindowsNodeError as exc:
            raise AnsibleActionFail(str(exc)) from None
        return result

    def _stop(self, node, distribution):
        wsl_path = _wsl_path(node)
        before = _running(node, wsl_path)
        build, stopping = plan(distribution, before)
        outcome = {"changed": bool(stopping), "stopped": stopping, "running_before": before, "wsl_path": wsl_path,
                   "command": build(wsl_path) if build else None, "simulated": node.simulated}
        if not build or self._task.check_mode:
            outcome["running_after"] = [name for name in before if name not in stopping]
            return outcome
        answer = node.command(build(wsl_path))
        done = _win_wsl.stop_outcome(answer.rc, answer.stdout + answer.stderr)
        after = _running(node, wsl_path)
        outcome.update(running_after=after, rc=answer.rc, message=done["message"])
        still = [name for name in stopping if name in after]
        if not done["done"] or still:
            why = done["message"] or "still running"
            outcome.update(failed=True, msg="%s did not stop %s: %s" % (" ".join(outcome["command"]), ", ".join(still or stopping), why))
        return outcome
