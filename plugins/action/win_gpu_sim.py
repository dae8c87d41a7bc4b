# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""win_gpu_sim: create or remove a simulated Windows GPU node on the controller (plugin_utils/windows/simulation/_simulated_node.py)."""

from __future__ import annotations

import os
import shutil

from ansible.errors import AnsibleActionFail

from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.simulation import _simulated_node
from ansible_collections.gpuops.remediation.plugins.plugin_utils._action_base import ControllerAction
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node._remote_node import SIM_ROOT_VAR

_GPU = {"name": {"type": "str"}, "memory_mib": {"type": "int"}, "reserved_mib": {"type": "int"},
        "driver_model": {"type": "str", "choices": ["WDDM", "TCC", "MCDM"]}, "ghost_mib": {"type": "int"},
        "recovery_action": {"type": "str", "choices": ["None", "Reset", "Reboot"]}, "pci_bus_id": {"type": "str"},
        "uuid": {"type": "str"}, "restart_needs_reboot": {"type": "bool", "default": False}, "luid": {"type": "int"},
        "instance_id": {"type": "str"}, "problem_after_restart": {"type": "int", "default": 0}}
_CHILD = {"name": {"type": "str", "required": True}, "gpus": {"type": "list", "elements": "int", "default": [0]},
          "memory_mib": {"type": "int", "default": 1024}, "user": {"type": "str"}, "session_id": {"type": "int"},
          "image_path": {"type": "str"}, "igpu_memory_mib": {"type": "int", "default": 0},
          "graphics": {"type": "bool", "default": False}, "counter_mib": {"type": "int"},
          "critical": {"type": "bool", "default": False}, "owner_known": {"type": "bool", "default": True},
          "runs_ansible": {"type": "bool", "default": False}, "service": {"type": "str"}}
_PROCESS = dict(_CHILD, session_id={"type": "int", "default": 1},
                children={"type": "list", "elements": "dict", "default": [], "options": _CHILD})
ARGUMENT_SPEC = {
    "root": {"type": "path", "required": True},
    "state": {"type": "str", "default": "present", "choices": ["present", "absent"]},
    "hostname": {"type": "str", "default": "WS01"},
    "default_user": {"type": "str", "default": "ada"},
    "administrators": {"type": "list", "elements": "str"},
    "store_wsl": {"type": "bool", "default": True},
    "wsl": {"type": "str", "default": "installed", "choices": ["installed", "absent", "not_installed"]},
    "wsl_vm_name": {"type": "str", "default": "vmmemWSL", "choices": ["vmmemWSL", "vmmem"]},
    "wsl_relay": {"type": "bool", "default": True},
    "auto_restart_shell": {"type": "bool", "default": True},
    "integrated_gpu": {"type": "bool", "default": False},
    "virtual_display": {"type": "bool", "default": False},
    "pnp_properties": {"type": "bool", "default": True},
    "adapter_memory_counters": {"type": "bool", "default": True},
    "winlogon_shell": {"type": "str", "default": "explorer.exe"},
    "services_readable": {"type": "bool", "default": True},
    "constrained_language": {"type": "bool", "default": False},
    "oem_code_page": {"type": "int", "default": 437},
    "gpus": {"type": "list", "elements": "dict", "options": _GPU},
    "processes": {"type": "list", "elements": "dict", "default": [], "options": _PROCESS},
    "sessions": {"type": "list", "elements": "dict", "options": {
        "user": {"type": "str", "required": True}, "id": {"type": "int"}, "session_name": {"type": "str", "default": "console"},
        "state": {"type": "str", "default": "Active"}, "explorer_memory_mib": {"type": "int", "default": 0}}},
    "distributions": {"type": "list", "elements": "dict", "default": [], "options": {
        "name": {"type": "str", "required": True}, "owner": {"type": "str"}, "running": {"type": "bool", "default": True},
        "version": {"type": "int", "default": 2}, "default": {"type": "bool"}, "gpus": {"type": "list", "elements": "int", "default": [0]},
        "memory_mib": {"type": "int", "default": 0}, "gpu_probe": {"type": "bool", "default": True},
        "held_after_stop": {"type": "bool", "default": False}}},
}


def _given(value):
    """The scenario as given: options left unset (None) are left out, so that the simulation's defaults apply."""
    if isinstance(value, dict):
        return dict((key, _given(item)) for key, item in value.items() if item is not None)
    if isinstance(value, list):
        return [_given(item) for item in value]
    return value


class ActionModule(ControllerAction):
    _requires_connection = False
    ARGUMENT_SPEC = ARGUMENT_SPEC
    FAILURES = (ValueError,)

    def act(self, args, task_vars):
        args = _given(args)
        root = args.pop("root")
        if args.pop("state") == "absent":
            exists = os.path.exists(_simulated_node.state_path(root))
            if exists and not self._task.check_mode:
                shutil.rmtree(root)
            return dict(changed=exists, root=root)
        if os.path.isdir(root) and os.listdir(root) and not os.path.exists(_simulated_node.state_path(root)):
            raise AnsibleActionFail("root: %r is a directory that holds something other than a simulated Windows node" % root)
        state = _simulated_node.build_state(args)
        changed = not _simulated_node.same_scenario(root, args)
        if changed and not self._task.check_mode:
            state["scenario"] = args
            _simulated_node.write_node(root, state)
        elif not changed:
            state = _simulated_node.snapshot_of_state(root)
        return dict(changed=changed, root=root, host_vars={SIM_ROOT_VAR: root},
                    processes=[dict((k, p[k]) for k in ("pid", "name", "creation_time_ms", "session_id")) for p in state["processes"]])
