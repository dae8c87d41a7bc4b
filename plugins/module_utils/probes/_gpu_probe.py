# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the driver says about the GPUs: NVML through nvidia-ml-py, or nvidia-smi's XML when it is absent.

Both backends return the same normalised shape (docs/internals.md) and both run in a child process with a
deadline (_deadline.py), because a wedged driver blocks them for ever.
"""

from __future__ import annotations

import functools
import importlib.util
import time

from ansible_collections.gpuops.remediation.plugins.module_utils._command import CommandRunner
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._deadline import (
    ProbeChild, ProbeFailed, ProbeTimeout, run_with_deadline)
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._pci import normalize_bus_id

MIB = 1024 * 1024
COMPUTE_MODES = {0: "Default", 1: "Exclusive_Thread", 2: "Prohibited", 3: "Exclusive_Process"}
RECOVERY_ACTIONS = {0: "none", 1: "reset", 2: "reboot", 3: "drain_p2p", 4: "drain_and_reset", 6: "reset", 7: "reboot"}


class BackendUnavailable(Exception):
    """The asked-for backend cannot run on this node (library or tool missing)."""


def _text(value):
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def _serial(value):
    """The board serial, or None where the board has none (N/A on GeForce boards)."""
    text = _text(value)
    return None if not text or text.strip() in ("N/A", "[N/A]") else text.strip()


def _mib(value):
    return None if value is None else int(value // MIB)


class _NvmlReader:
    """Reads one GPU through pynvml; attributes a GPU does not support read as None."""

    def __init__(self, pynvml):
        self.nvml = pynvml

    def optional(self, func, *args):
        try:
            return func(*args)
        except self.nvml.NVMLError_GpuIsLost:
            raise
        except self.nvml.NVMLError:
            return None

    def processes(self, handle, kind):
        func = self.nvml.nvmlDeviceGetComputeRunningProcesses if kind == "C" else self.nvml.nvmlDeviceGetGraphicsRunningProcesses
        found = []
        for proc in self.optional(func, handle) or []:
            found.append({
                "pid": int(proc.pid), "type": kind, "used_mib": _mib(proc.usedGpuMemory), "name": None,
                "gpu_instance_id": _instance_id(getattr(proc, "gpuInstanceId", None)),
                "compute_instance_id": _instance_id(getattr(proc, "computeInstanceId", None)),
            })
        return found

    def memory(self, handle):
        nvml = self.nvml
        try:
            info = nvml.nvmlDeviceGetMemoryInfo(handle, version=nvml.nvmlMemory_v2)
            reserved = _mib(info.reserved)
        except nvml.NVMLError_GpuIsLost:
            raise
        except nvml.NVMLError:
            info = self.optional(nvml.nvmlDeviceGetMemoryInfo, handle)
            reserved = None
        if info is None:
            return {"memory_total_mib": None, "memory_used_mib": None, "memory_free_mib": None, "memory_reserved_mib": None}
        return {"memory_total_mib": _mib(info.total), "memory_used_mib": _mib(info.used),
                "memory_free_mib": _mib(info.free), "memory_reserved_mib": reserved}

    def recovery_action(self, handle):
        nvml = self.nvml
        field = getattr(nvml, "NVML_FI_DEV_GET_GPU_RECOVERY_ACTION", None)
        values = self.optional(nvml.nvmlDeviceGetFieldValues, handle, [field]) if field is not None else None
        if not values or values[0].nvmlReturn != nvml.NVML_SUCCESS:
            return None
        return RECOVERY_ACTIONS.get(int(values[0].value.uiVal), "reset")

    def nvlink_peers(self, handle):
        nvml = self.nvml
        peers = []
        for link in range(nvml.NVML_NVLINK_MAX_LINKS):
            state = self.optional(nvml.nvmlDeviceGetNvLinkState, handle, link)
            if state is None:
                break
            if state == nvml.NVML_FEATURE_ENABLED:
                remote = self.optional(nvml.nvmlDeviceGetNvLinkRemotePciInfo, handle, link)
                if remote is not None:
                    peers.append(normalize_bus_id(_text(remote.busId)))
        return sorted(set(peers))

    def mig_mode(self, handle):
        modes = self.optional(self.nvml.nvmlDeviceGetMigMode, handle)
        if modes is None:
            return {"current": None, "pending": None}
        return {"current": bool(modes[0]), "pending": bool(modes[1])}

    def gpu(self, index):
        nvml = self.nvml
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        gpu = {
            "index": index,
            "uuid": _text(nvml.nvmlDeviceGetUUID(handle)),
            "name": _text(nvml.nvmlDeviceGetName(handle)),
            "serial": _serial(self.optional(nvml.nvmlDeviceGetSerial, handle)),
            "pci_bus_id": normalize_bus_id(_text(nvml.nvmlDeviceGetPciInfo(handle).busId)),
            "minor_number": self.optional(nvml.nvmlDeviceGetMinorNumber, handle),
            "persistence_mode": _flag(self.optional(nvml.nvmlDeviceGetPersistenceMode, handle)),
            "compute_mode": COMPUTE_MODES.get(self.optional(nvml.nvmlDeviceGetComputeMode, handle)),
            "mig_mode": self.mig_mode(handle),
            "mig_devices": [],
            "recovery_action": self.recovery_action(handle),
            "nvlink_peers": self.nvlink_peers(handle),
        }
        gpu.update(self.memory(handle))
        gpu["processes"] = _merge_process_types(self.processes(handle, "C") + self.processes(handle, "G"))
        if gpu["mig_mode"]["current"]:
            self.add_mig_instances(gpu, handle)
        return gpu

    def add_mig_instances(self, gpu, handle):
        """The instances of a MIG-enabled GPU, and the instance of each process from the list its MIG device gives."""
        from ansible_collections.gpuops.remediation.plugins.module_utils.probes._mig_instances import (  # pylint: disable=import-outside-toplevel
            gpu_instances, nvml_mig_devices)
        devices, placed, failed = nvml_mig_devices(self.nvml, handle, self.optional)
        gpu["gpu_instances"] = gpu_instances(devices)
        if failed:
            gpu["mig_listing_error"] = failed
        for proc in gpu["processes"]:
            if proc["gpu_instance_id"] is None and proc["pid"] in placed:
                proc["gpu_instance_id"], proc["compute_instance_id"] = placed[proc["pid"]]


def _flag(value):
    return None if value is None else bool(value)


def _instance_id(value):
    # NVML reports 0xFFFFFFFF for "no MIG instance".
    return None if value is None or value >= 0xFFFFFFFF else int(value)


def _merge_process_types(processes):
    merged = {}
    for proc in processes:
        known = merged.get(proc["pid"])
        if known is None:
            merged[proc["pid"]] = proc
        elif known["type"] != proc["type"]:
            known["type"] = "C+G"
    return list(merged.values())


def _cuda_version(pynvml):
    try:
        version = pynvml.nvmlSystemGetCudaDriverVersion_v2()
    except pynvml.NVMLError:
        return None
    return "%d.%d" % (version // 1000, (version % 1000) // 10)


def nvml_snapshot(layout):
    """The GPUs as NVML sees them; run inside the deadline child."""
    pynvml = layout.load_nvml()
    pynvml.nvmlInit()
    try:
        reader = _NvmlReader(pynvml)
        gpus = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            try:
                gpus.append(reader.gpu(index))
            except pynvml.NVMLError_GpuIsLost:
                gpus.append({"index": index, "lost": True, "processes": []})
        return {"driver_version": _text(pynvml.nvmlSystemGetDriverVersion()), "cuda_version": _cuda_version(pynvml), "gpus": gpus}
    finally:
        pynvml.nvmlShutdown()


def _nvml_available():
    """Whether nvidia-ml-py is installed; it is bound to the node's NVML (and initialised) in the probe's child only."""
    return importlib.util.find_spec("pynvml") is not None


def _nvidia_smi_snapshot(module, nvidia_smi):
    # Imported here: most nodes have nvidia-ml-py, and every module run would otherwise compile the XML parser for nothing.
    from ansible_collections.gpuops.remediation.plugins.module_utils.probes._nvsmi import parse_query_xml, query_xml_argv

    argv = query_xml_argv(nvidia_smi)

    def probe():
        rc, out, err = CommandRunner(module).probe(argv)
        if rc != 0:
            raise RuntimeError("%s exited %d: %s" % (argv[0], rc, (err or out).strip()))
        result = parse_query_xml(out)
        if any((gpu.get("mig_mode") or {}).get("current") for gpu in result["gpus"]):
            _add_smi_mig_instances(module, nvidia_smi, result["gpus"])
        return result
    return probe


def _add_smi_mig_instances(module, nvidia_smi, gpus):
    """The instances of the MIG-enabled GPUs from nvidia-smi mig -lgi and -lci (profiles, placements) and -L (MIG UUIDs)."""
    from ansible_collections.gpuops.remediation.plugins.module_utils.probes import _mig_instances as mig  # pylint: disable=import-outside-toplevel
    runner = CommandRunner(module)
    texts, failed = [], None
    for argv in ([nvidia_smi, "mig", "-lgi"], [nvidia_smi, "mig", "-lci"], [nvidia_smi, "-L"]):
        rc, out, err = runner.probe(argv)
        failed = failed or mig.smi_listing_failure(argv, rc, out, err)
        texts.append(out)
    lgi, lci, uuids = mig.parse_lgi(texts[0]), mig.parse_lci(texts[1]), mig.parse_list_uuids(texts[2])
    for gpu in gpus:
        if (gpu.get("mig_mode") or {}).get("current"):
            # A listing that failed is no answer: the GPU's instances are unknown (a note), not none.
            gpu["gpu_instances"] = [] if failed else mig.gpu_instances(mig.smi_mig_devices(gpu, lgi, lci, uuids))
            if failed:
                gpu["mig_listing_error"] = failed


def probe_gpus(module, layout, backend, timeout):
    """Return (driver probe result or None, probe report). Raises BackendUnavailable for an explicit backend."""
    result, report, dummy_child = probe_gpus_then(module, layout, backend, timeout)
    return result, report


def probe_gpus_then(module, layout, backend, timeout, then=None):
    """probe_gpus, and the probe's child (None where none is left): then, a second probe (request -> result), is run
    by the same child when asked (ProbeChild.second_answer), so that a snapshot forks one probe process, not two."""
    report = {"backend": None, "ok": False, "timed_out": False, "error": None, "seconds": None}
    nvml = backend in ("nvml", "auto") and _nvml_available()
    if backend == "nvml" and not nvml:
        raise BackendUnavailable("nvml")
    if nvml:
        report["backend"] = "nvml"
        probe = functools.partial(nvml_snapshot, layout)
    else:
        nvidia_smi = layout.command(module, "nvidia-smi")
        if nvidia_smi is None:
            if backend == "nvidia_smi":
                raise BackendUnavailable("nvidia_smi")
            report["error"] = "neither nvidia-ml-py nor nvidia-smi is available on this node"
            return None, report, None
        report["backend"] = "nvidia_smi"
        probe = _nvidia_smi_snapshot(module, nvidia_smi)
    started = time.monotonic()
    child = ProbeChild(probe, then) if then is not None else None
    try:
        result = child.first_answer(timeout) if child is not None else run_with_deadline(probe, timeout)
        report["ok"] = True
    except ProbeTimeout as exc:
        result = None
        report.update(timed_out=True, error="%s probe gave %s" % (report["backend"], exc))
    except ProbeFailed as exc:
        result = None
        report["error"] = str(exc)
    report["seconds"] = round(time.monotonic() - started, 3)
    return result, report, child
