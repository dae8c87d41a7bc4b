# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU settings through NVML (module gpu_config): what is asked, what must change, what refuses, how it is set.

The decisions (the wanted compute mode, the plan per GPU, the refusals) are pure functions of the driver's probe
result (_gpu_probe.probe_gpus, its normalised shape), so that check mode and the real run decide alike. The setters
run in a child under the probe deadline (_deadline.py), like every other NVML call: a wedged driver blocks them too.
"""

from __future__ import annotations

from ansible_collections.gpuops.remediation.plugins.module_utils.probes._gpu_probe import COMPUTE_MODES

# What an operator writes (any case) -> the spelling of the snapshot and NVML's nvmlComputeMode_t names.
COMPUTE_MODE_CHOICES = {"DEFAULT": "Default", "EXCLUSIVE_PROCESS": "Exclusive_Process", "PROHIBITED": "Prohibited"}
DEPRECATED_COMPUTE_MODE = "EXCLUSIVE_THREAD"
NVML_COMPUTE_MODE = dict((name, number) for number, name in COMPUTE_MODES.items())
SETTINGS = ("persistence_mode", "compute_mode")  # the order they are set in


def compute_mode_problem(value):
    """Why `value` is not a compute mode this module sets, naming the option and the value; None when it is one."""
    if value is None:
        return None
    key = str(value).strip().upper()
    if key == DEPRECATED_COMPUTE_MODE:
        return ("compute_mode: %r is deprecated by NVIDIA (nvidia-smi lists it as DEPRECATED) and is not set by "
                "this module; use EXCLUSIVE_PROCESS for one process per GPU" % value)
    if key not in COMPUTE_MODE_CHOICES:
        return "compute_mode: %r is not one of %s" % (value, ", ".join(COMPUTE_MODE_CHOICES))
    return None


def wanted_settings(compute_mode, persistence_mode):
    """{setting: value} of what was asked, in the snapshot's spelling (compute_mode already checked)."""
    wanted = {}
    if persistence_mode is not None:
        wanted["persistence_mode"] = bool(persistence_mode)
    if compute_mode is not None:
        wanted["compute_mode"] = COMPUTE_MODE_CHOICES[str(compute_mode).strip().upper()]
    return wanted


def current_settings(gpu):
    return dict((setting, gpu.get(setting)) for setting in SETTINGS)


def changes_for(gpu, wanted):
    """{setting: new value} for what differs on this GPU, in the order they are set."""
    return dict((setting, wanted[setting]) for setting in SETTINGS if setting in wanted and gpu.get(setting) != wanted[setting])


def unsupported(gpu, changes):
    """Why the driver cannot make these changes on this GPU (NVML would answer Not Supported or GPU lost), or None."""
    label = "GPU %s" % gpu["index"]
    if gpu.get("lost"):
        return "%s has fallen off the bus (NVML_ERROR_GPU_IS_LOST); reset or reboot it first" % label
    if "persistence_mode" in changes and gpu.get("persistence_mode") is None:
        return ("%s does not report a persistence mode (NVML_ERROR_NOT_SUPPORTED: not a Linux driver, or a GPU without it); "
                "leave persistence_mode unset for it" % label)
    if "compute_mode" in changes and (gpu.get("mig_mode") or {}).get("current"):
        return ("%s has MIG mode on: NVML sets the compute mode of each MIG device, not of the GPU "
                "(NVML_ERROR_NOT_SUPPORTED); leave compute_mode unset for it" % label)
    if "compute_mode" in changes and gpu.get("compute_mode") is None:
        return "%s does not report a compute mode (NVML_ERROR_NOT_SUPPORTED)" % label
    return None


def compute_processes(gpu):
    return [proc for proc in gpu.get("processes") or [] if "C" in (proc.get("type") or "C").split("+")]


def busy_reason(gpu, changes):
    """Why a compute mode change would contradict the processes that run on this GPU, or None.

    The driver applies a compute mode at once and keeps the contexts that exist, so it refuses nothing itself: two
    processes would go on sharing a GPU that then reads Exclusive_Process, and a GPU set to Prohibited would still run
    the job it was meant to keep off. Persistence mode never depends on who runs.
    """
    mode = changes.get("compute_mode")
    running = compute_processes(gpu)
    if mode == "Exclusive_Process" and len(running) > 1:
        return "%d compute processes share it, and Exclusive_Process allows one" % len(running)
    if mode == "Prohibited" and running:
        return "compute processes run on it, and Prohibited allows none"
    return None


def describe_processes(processes):
    return ", ".join("pid %s (%s)" % (proc["pid"], proc.get("name") or "name unknown") for proc in processes)


def busy_message(refusals):
    """The refusal of a run that would change the compute mode under running processes: [(gpu, reason)]."""
    parts = ["GPU %s: %s - %s" % (gpu["index"], reason, describe_processes(compute_processes(gpu))) for gpu, reason in refusals]
    return ("gpu_config refused, nothing changed: %s; end them first (gpuops.remediation.gpu_kill, or let the job finish), "
            "or set allow_busy=true to set the mode anyway (the processes that run keep running)" % "; ".join(parts))


def nvml_error_name(pynvml, error):
    """NVML_ERROR_* for an NVMLError, as the C header names it."""
    value = getattr(error, "value", None)
    for name in dir(pynvml):
        if name.startswith("NVML_ERROR_") and getattr(pynvml, name) == value:
            return name
    return "NVML error %s" % value


def apply_changes(layout, plan):
    """Set each change of plan ([{"index", "uuid", "changes": {setting: value}}]) through NVML; run in the deadline child.

    Returns [{"index", "setting", "value", "ok", "error", "message"}], one per setting tried; stops at the first failure,
    so that what is reported as not done was not done.
    """
    pynvml = layout.load_nvml()
    pynvml.nvmlInit()
    done = []
    try:
        for item in plan:
            handle = pynvml.nvmlDeviceGetHandleByUUID(item["uuid"])
            for setting, value in item["changes"].items():
                outcome = {"index": item["index"], "setting": setting, "value": value, "ok": True, "error": None, "message": None}
                done.append(outcome)
                try:
                    if setting == "persistence_mode":
                        pynvml.nvmlDeviceSetPersistenceMode(handle, 1 if value else 0)
                    else:
                        pynvml.nvmlDeviceSetComputeMode(handle, NVML_COMPUTE_MODE[value])
                except pynvml.NVMLError as exc:
                    outcome.update(ok=False, error=nvml_error_name(pynvml, exc), message=str(exc))
                    return done
        return done
    finally:
        pynvml.nvmlShutdown()


def failure_hint(error):
    """What would let a failed setter succeed."""
    if error == "NVML_ERROR_NO_PERMISSION":
        return "NVML's setters need root: run the task with become: true"
    if error == "NVML_ERROR_NOT_SUPPORTED":
        return "this GPU or driver does not support the setting"
    if error == "NVML_ERROR_GPU_IS_LOST":
        return "the GPU fell off the bus; reset or reboot it first"
    return "see the driver's kernel log"
