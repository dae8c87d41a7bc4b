# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""wsl_shutdown: stop one WSL distribution (wsl --terminate) or all of them and the WSL VM (wsl --shutdown)."""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.gpuops.remediation.plugins.plugin_utils import _wsl_shutdown
from ansible_collections.gpuops.remediation.plugins.plugin_utils._win_node import WindowsNodeError, windows_node


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        dummy, args = self.validate_argument_spec(_wsl_shutdown.ARGUMENT_SPEC)
        try:
            _wsl_shutdown.checked(args["distribution"])
            result.update(_wsl_shutdown.stop(windows_node(self, task_vars or {}), args["distribution"], self._task.check_mode))
        except (ValueError, WindowsNodeError) as exc:
            raise AnsibleActionFail(str(exc)) from None
        return result
