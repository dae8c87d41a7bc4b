# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulated Windows GPU node, on the controller: a state file under its root, and the answers of the tools.

Reached only through _remote_node.windows_node (the controller side's one switch, the host variable
gpuops_windows_sim_root). It answers the argv lists and the named PowerShell scripts the real path runs with output
of the shape of the real captures (tests/unit/plugins/fixtures/windows and the Windows nvidia-smi captures): nvidia-smi -q -x
in the WDDM form (per-process memory N/A), pnputil's device blocks, quser's table (exit 1 when nobody is logged
on), taskkill's messages, wsl.exe in UTF-16LE, ConvertTo-Json of the CIM classes.

Rules it keeps: a process's GPU memory is counted while it exists, so a killed process's memory is freed; wsl.exe
lists and stops only the distributions of the user it runs as; `--terminate`/`--shutdown` stop distributions, and the
user's WSL VM (vmmemWSL) goes with the last one, its memory with it; taskkill refuses critical system processes and
the WSL VM as the real tool does; a GPU's used memory is its processes' memory plus its ghost memory; a session's
explorer.exe ended by force comes back as a new process (Winlogon's AutoRestartShell, on unless the scenario turns it
off); `logoff <id>` ends the session and every process in it; `pnputil /restart-device` exits 3010 on a GPU whose
scenario says a reboot is needed, and its ghost memory then stays until a reboot. reuse_pid gives a pid to a new
process, as Windows does quickly.

One job a file: _simulated_state (the state file, a node built from a scenario, the node's rules), _simulated_tools (the
tools' answers), _simulated_scripts (the PowerShell scripts' answers and the host's files); this file answers a call.
"""

from __future__ import annotations

import codecs
import os

from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.tools import _cim_processes, _wsl_cli
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.simulation._simulated_state import (
    INTEGRATED_GPU, MIB, STATE_KIND, VIRTUAL_DISPLAY, VM_NAME, WinSimError, build_state, host_file, locked_state,
    process_memory, reuse_pid, same_scenario, snapshot_of_state, state_path, write_node,
)
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.simulation._simulated_tools import SimCommand, _TOOLS, utf16
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.simulation._simulated_scripts import _ACTING_SCRIPTS, _FILE_SCRIPTS, _SCRIPTS

__all__ = [
    "INTEGRATED_GPU", "MIB", "STATE_KIND", "SimCommand", "VIRTUAL_DISPLAY", "VM_NAME", "WinSimError",
    "_ACTING_SCRIPTS", "_FILE_SCRIPTS", "_SCRIPTS", "_TOOLS", "_cim_processes", "build_state", "host_file",
    "locked_state", "process_memory", "reuse_pid", "run_command", "run_script", "same_scenario",
    "snapshot_of_state", "state_path", "transported", "utf16", "write_node",
]


def run_command(root, argv, user=None):
    """Answer one argv list as the real tool would, run as `user` (None: the node's default user) -> SimCommand."""
    if not argv:
        raise WinSimError("an empty argv runs nothing")
    tool = _cim_processes.base_name(argv[0].replace("\\", "/").rsplit("/", 1)[-1])
    handler = _TOOLS.get(tool)
    with locked_state(root, write=True) as state:
        if tool == "wsl" and argv[0] == _wsl_cli.STORE_WSL_PATH and not state["store_wsl"]:
            raise WinSimError("%s could not be run: The system cannot find the file specified" % argv[0])
        caller = user or state["default_user"]
        state["command_log"].append({"argv": list(argv), "user": caller})
        if handler is None:
            raise WinSimError("%s could not be run: The system cannot find the file specified" % argv[0])
        return handler(state, list(argv[1:]), caller)


def run_script(root, name, parameters=None, user=None):
    """Answer one named PowerShell script (_powershell_scripts) -> what it puts in $Ansible.Result."""
    if name in _ACTING_SCRIPTS:
        with locked_state(root, write=True) as state:
            caller = user or state["default_user"]
            # the question whether the script can run at all is no action, nor is a script Add-Type refused
            if (parameters or {}).get("ProcessIds") and (name != "terminate" or not state.get("constrained_language")):
                state.setdefault("script_log", []).append({"script": name, "parameters": dict(parameters or {}), "user": caller})
            return _ACTING_SCRIPTS[name](state, parameters or {}, caller)
    if name in _FILE_SCRIPTS:
        if not os.path.exists(state_path(root)):
            raise WinSimError("no simulated Windows node at %s (gpuops_windows_sim_root): %s is missing" % (root, state_path(root)))
        return _FILE_SCRIPTS[name](root, parameters or {})
    handler = _SCRIPTS.get(name)
    if handler is None:
        raise WinSimError("the simulated node knows no PowerShell script %r" % (name,))
    with locked_state(root) as state:
        return handler(state, parameters or {}, user or state["default_user"])


def transported(data):
    """Bytes as win_command hands them over with output_encoding_override=iso-8859-1: its reader honours a BOM
    (and drops it), else keeps one character per byte."""
    for bom, codec in ((codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF8, "utf-8")):
        if data.startswith(bom):
            return data[len(bom):].decode(codec, "replace")
    return data.decode("latin-1")
