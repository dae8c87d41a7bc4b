# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""win_gpu_holders_info: one snapshot of a Windows GPU node, taken from the controller (plugin_utils/windows/_node_snapshot.py)."""

from __future__ import annotations

from ansible.errors import AnsibleActionFail

from ansible_collections.gpuops.remediation.plugins.plugin_utils._action_base import ControllerAction


ARGUMENT_SPEC = {
    "nvidia_smi": {"type": "str", "default": "nvidia-smi"},
    "ghost_threshold_mib": {"type": "int", "default": 256},
    "journal_path": {"type": "str"},
}


class ActionModule(ControllerAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC

    def failures(self):
        # the strategy imports this plugin for a Linux host's skipped task too
        from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node._remote_node import (  # pylint: disable=import-outside-toplevel
            WindowsNodeError,
        )
        return (WindowsNodeError, ValueError)

    def act(self, args, task_vars):
        # the strategy imports this plugin for a Linux host's skipped task too
        from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.tools import _nvidia_smi_output  # pylint: disable=import-outside-toplevel
        from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows import _node_snapshot  # pylint: disable=import-outside-toplevel
        from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node._remote_node import (  # pylint: disable=import-outside-toplevel
            windows_node,
        )
        if args["ghost_threshold_mib"] < 0:
            raise AnsibleActionFail("ghost_threshold_mib: %r is below 0" % (args["ghost_threshold_mib"],))
        try:
            _nvidia_smi_output.checked_nvidia_smi(args["nvidia_smi"])
        except ValueError as exc:
            raise AnsibleActionFail(str(exc)) from None
        node = windows_node(self, task_vars)
        snapshot = _node_snapshot.take(node, args["nvidia_smi"], args["ghost_threshold_mib"], args["journal_path"])
        return dict(snapshot, changed=False, simulated=node.simulated)
