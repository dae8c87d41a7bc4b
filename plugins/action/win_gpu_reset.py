# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""win_gpu_reset: kill holders, restart a GPU's display adapter, log a session off, restart the shell (plugin_utils/windows/rungs/_reset_dispatch.py)."""

from __future__ import annotations

from ansible.errors import AnsibleActionFail

from ansible_collections.gpuops.remediation.plugins.plugin_utils._action_base import ControllerAction

from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.rungs import _reset_dispatch
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node._remote_node import WindowsNodeError, windows_node


class ActionModule(ControllerAction):
    ARGUMENT_SPEC = _reset_dispatch.WIN_RESET_ARGUMENT_SPEC
    FAILURES = (WindowsNodeError,)

    def act(self, args, task_vars):
        node = windows_node(self, task_vars)
        try:
            return dict(_reset_dispatch.run(node, args, self._task.check_mode), simulated=node.simulated)
        except _reset_dispatch.WinResetInputError as exc:
            raise AnsibleActionFail("%s; nothing was changed" % exc) from None
