# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""win_gpu_reset: kill holders, restart a GPU's display adapter, log a session off, restart the shell (plugin_utils/_win_reset.py)."""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.gpuops.remediation.plugins.plugin_utils import _win_reset
from ansible_collections.gpuops.remediation.plugins.plugin_utils._win_node import WindowsNodeError, windows_node


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        dummy, args = self.validate_argument_spec(_win_reset.WIN_RESET_ARGUMENT_SPEC)
        node = windows_node(self, task_vars or {})
        try:
            result.update(_win_reset.run(node, args, self._task.check_mode), simulated=node.simulated)
        except _win_reset.WinResetInputError as exc:
            raise AnsibleActionFail("%s; nothing was changed" % exc) from None
        except WindowsNodeError as exc:
            raise AnsibleActionFail(str(exc)) from None
        return result
