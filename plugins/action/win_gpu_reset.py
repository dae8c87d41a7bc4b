# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""win_gpu_reset: kill holders, restart a GPU's display adapter, log a session off, restart the shell (plugin_utils/_win_reset.py)."""

from __future__ import annotations

from ansible.errors import AnsibleActionFail

from ansible_collections.gpuops.remediation.plugins.plugin_utils._action_base import ControllerAction

from ansible_collections.gpuops.remediation.plugins.plugin_utils import _win_reset
from ansible_collections.gpuops.remediation.plugins.plugin_utils._win_node import WindowsNodeError, windows_node


class ActionModule(ControllerAction):
    ARGUMENT_SPEC = _win_reset.WIN_RESET_ARGUMENT_SPEC
    FAILURES = (WindowsNodeError,)

    def act(self, args, task_vars):
        node = windows_node(self, task_vars)
        try:
            return dict(_win_reset.run(node, args, self._task.check_mode), simulated=node.simulated)
        except _win_reset.WinResetInputError as exc:
            raise AnsibleActionFail("%s; nothing was changed" % exc) from None
