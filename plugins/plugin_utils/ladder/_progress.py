# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The walk's progress lines: one as each step on the node starts and one as it ends (host, GPUs, rung, what it does,
seconds), so a walk of minutes (a kill's wait, a reset, dcgmi's diagnostic) is never silent. The walk hands each line
to the `say` the action plugin gives it: Ansible's display, shown at default verbosity and, under AWX and
ansible-runner, a job event of its own - without a task per host."""

from __future__ import annotations

from ansible_collections.gpuops.remediation.plugins.module_utils._escape import printable

# module -> (what it does, what it would do in a plan)
WHAT = {
    "gpu_holders_info": ("takes a snapshot of the GPUs and their holders", "takes a snapshot of the GPUs and their holders"),
    "win_gpu_holders_info": ("takes a snapshot of the GPUs and their holders", "takes a snapshot of the GPUs and their holders"),
    "gpu_kill": ("ends the holders", "would end the holders"),
    "gpu_reset": ("resets the GPUs that need it", "would reset the GPUs that need it"),
    "nvidia_driver_reload": ("unloads and reloads the driver", "would unload and reload the driver"),
    "gpu_graphics_restart": ("restarts the graphics stack", "would restart the graphics stack"),
    "gpu_health_check": ("checks the GPUs' health (dcgmi diag)", "would check the GPUs' health"),
    "win_gpu_reset": ("acts on the Windows node", "would act on the Windows node"),
    "wsl_shutdown": ("shuts the WSL distributions down", "would shut the WSL distributions down"),
}
INSPECT, GATE = "inspect", "health gate"
MSG_CHARS = 200


def step_of(module, rung):
    """The step a module run belongs to: the inspection, the health gate, or the rung being taken."""
    if module.endswith("holders_info"):
        return INSPECT
    if module == "gpu_health_check":
        return GATE
    return "rung %s" % rung if rung else module


def _where(host, gpus):
    return "%s GPU %s" % (host, ",".join(str(gpu) for gpu in gpus) if gpus else "all")


def started_line(host, gpus, step, module, check_mode):
    """"gpuops: node07 GPU all: rung reset: gpu_reset resets the GPUs that need it - started"."""
    what = WHAT.get(module, ("runs", "would run"))[1 if check_mode else 0]
    return printable("gpuops: %s: %s: %s %s - started" % (_where(host, gpus), step, module, what))


def ended_line(host, gpus, step, module, seconds, result, check_mode):
    """"gpuops: node07 GPU all: rung reset: gpu_reset changed in 4.2 s" (failed, with its message; in a plan, would ...)."""
    if result.get("failed"):
        how = "%s: %s" % ("would fail" if check_mode else "failed", str(result.get("msg") or "")[:MSG_CHARS])
    elif isinstance(result.get("health_check"), dict):
        how = "%s: %s" % (result["health_check"].get("result"), str(result["health_check"].get("reason") or "")[:MSG_CHARS])
    elif result.get("changed"):
        how = "would change" if check_mode else "changed"
    else:
        how = "done, nothing changed"
    return printable("gpuops: %s: %s: %s %s in %.1f s" % (_where(host, gpus), step, module, how, seconds))
