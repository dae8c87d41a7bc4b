# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""wsl_shutdown: stop one WSL distribution (wsl --terminate), all of them and the WSL VM (wsl --shutdown), or only what
holds the GPU (gpu_holders)."""

from __future__ import annotations

from ansible_collections.gpuops.remediation.plugins.plugin_utils._action_base import ControllerAction
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.rungs import _wsl_shutdown
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node._remote_node import WindowsNodeError, windows_node


class ActionModule(ControllerAction):
    ARGUMENT_SPEC = _wsl_shutdown.ARGUMENT_SPEC
    FAILURES = (ValueError, WindowsNodeError)

    def act(self, args, task_vars):
        _wsl_shutdown.checked(args["distribution"], args["gpu_holders"])
        return _wsl_shutdown.stop(windows_node(self, task_vars), args["distribution"], self._task.check_mode,
                                  args["journal_path"], args["run_id"], gpu_holders=args["gpu_holders"])
