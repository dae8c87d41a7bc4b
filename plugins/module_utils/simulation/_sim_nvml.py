# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""NVML's C entry points, implemented in Python on top of a simulated node's state.

NodeLayout.load_nvml() puts a SimNvmlLibrary where pynvml keeps its CDLL (pynvml.nvmlLib), so pynvml's own
wrappers run unchanged: they look each symbol up by name and call it with the ctypes arguments they would
pass to libnvidia-ml.so (byref(struct), string buffers, c_uint sizes, arrays). Each entry point here reads
<root>/state.json afresh, fills those arguments and returns an NVML return code. A symbol that is not
here raises AttributeError, which pynvml reports as NVML_ERROR_FUNCTION_NOT_FOUND, like an old library.
"""

from __future__ import annotations

import ctypes
import os
import time

try:
    from ansible_collections.gpuops.remediation.plugins.module_utils.probes._pci import normalize_bus_id
    from ansible_collections.gpuops.remediation.plugins.module_utils.simulation import _sim_mig as sim_mig
    from ansible_collections.gpuops.remediation.plugins.module_utils.simulation import _sim_state as node
except ImportError:  # loaded from <root>/lib as a plain module (NodeLayout.load_nvml)
    from _pci import normalize_bus_id  # type: ignore[no-redef] # pylint: disable=import-error
    import _sim_mig as sim_mig  # type: ignore[no-redef] # pylint: disable=import-error
    import _sim_state as node  # type: ignore[no-redef] # pylint: disable=import-error

NVML_SUCCESS = 0
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_INSUFFICIENT_SIZE = 7
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25
NVML_ERROR_UNKNOWN = 999
ERROR_STRINGS = {
    NVML_SUCCESS: b"Success", NVML_ERROR_UNINITIALIZED: b"Uninitialized", NVML_ERROR_INVALID_ARGUMENT: b"Invalid Argument",
    NVML_ERROR_NOT_SUPPORTED: b"Not Supported", NVML_ERROR_NO_PERMISSION: b"Insufficient Permissions", NVML_ERROR_NOT_FOUND: b"Not Found",
    NVML_ERROR_INSUFFICIENT_SIZE: b"Insufficient Size", NVML_ERROR_DRIVER_NOT_LOADED: b"Driver Not Loaded",
    NVML_ERROR_GPU_IS_LOST: b"GPU is lost", NVML_ERROR_ARGUMENT_VERSION_MISMATCH: b"Argument version mismatch",
    NVML_ERROR_UNKNOWN: b"Unknown Error",
}
NVML_MEMORY_V2 = 0x02000028
NVML_FI_DEV_GET_GPU_RECOVERY_ACTION = 230
NVML_VALUE_TYPE_UNSIGNED_INT = 1
NVML_NVLINK_MAX_LINKS = 18  # links a Hopper GPU has; pynvml allows up to 36
NOT_AVAILABLE = 0xFFFFFFFF
COMPUTE_MODES = {"Default": 0, "Exclusive_Thread": 1, "Prohibited": 2, "Exclusive_Process": 3}
RECOVERY_ACTIONS = {"none": 0, "reset": 1, "reboot": 2, "drain_p2p": 3, "drain_and_reset": 4}
HANDLE_BASE = 0x51D0  # device handles are HANDLE_BASE + index, cast to nvmlDevice_t
# MIG device handles are MIG_HANDLE_BASE + GPU index * HANDLE_STRIDE + MIG device index; GPU instance handles
# GI_HANDLE_BASE + GPU index * HANDLE_STRIDE + GPU instance id.
MIG_HANDLE_BASE = 0x60000
GI_HANDLE_BASE = 0x70000
# Compute instance handles: CI_HANDLE_BASE + GPU index * HANDLE_STRIDE + GPU instance id * 16 + compute instance id.
CI_HANDLE_BASE = 0x80000
HANDLE_STRIDE = 0x100
MAX_MIG_DEVICES = 7  # what nvmlDeviceGetMaxMigDeviceCount answers on an A100/H100
MIB = 1024 * 1024

# Calls that still answer for a GPU that fell off the bus: the driver cached them when it attached.
ANSWERS_WHEN_LOST = ("nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetMinorNumber")


def _value(arg):
    """A ctypes scalar or a plain int, as int."""
    return getattr(arg, "value", arg)


def _target(ref):
    """The object a byref() points at (pynvml passes byref(c_struct))."""
    return getattr(ref, "_obj", ref)


def _fill_string(buffer, size, text):
    data = text.encode("utf-8") if not isinstance(text, bytes) else text
    if len(data) + 1 > _value(size):
        return NVML_ERROR_INSUFFICIENT_SIZE
    buffer.value = data
    return NVML_SUCCESS


def _plain(method):
    """A plain function around a bound method: pynvml sets attributes (restype) on what it looks up."""
    def entry_point(*args):
        return method(*args)
    entry_point.__name__ = method.__name__
    return entry_point


def _handle_value(handle):
    return ctypes.cast(handle, ctypes.c_void_p).value if handle is not None else None


def _set_raw_handle(ref, base, gpu, number):
    """Write a MIG device (or GPU instance) handle, base + GPU index * HANDLE_STRIDE + number; NVML_SUCCESS."""
    ctypes.c_void_p.from_buffer(_target(ref)).value = base + gpu["index"] * HANDLE_STRIDE + number
    return NVML_SUCCESS


def _is_mig_handle(handle):
    return MIG_HANDLE_BASE <= (_handle_value(handle) or 0) < GI_HANDLE_BASE


class _MigReads:
    """NVML's MIG read calls (nvidia-ml-py's names): a MIG-enabled GPU's MIG devices, their ids, UUIDs and memory,
    and its GPU instances' profiles and placements."""

    def _mig_device(self, handle, call):
        """(state, gpu, MIG device of _sim_mig.devices, error code) for a MIG device handle."""
        raw = (_handle_value(handle) or 0) - MIG_HANDLE_BASE
        state, gpu, rc = self._device(ctypes.c_void_p(HANDLE_BASE + raw // HANDLE_STRIDE), call)
        if rc:
            return state, gpu, None, rc
        found = sim_mig.devices(gpu, node.live_holders(state, gpu["index"])) if (gpu.get("mig_mode") or {}).get("current") else []
        index = raw % HANDLE_STRIDE
        if index >= len(found):
            return state, gpu, None, NVML_ERROR_INVALID_ARGUMENT  # the instance is gone: the handle is stale
        return state, gpu, found[index], NVML_SUCCESS

    def nvmlDeviceGetMaxMigDeviceCount(self, handle, ref):
        _state, gpu, rc = self._device(handle, "nvmlDeviceGetMaxMigDeviceCount")
        if rc:
            return rc
        _target(ref).value = 0 if gpu.get("mig_mode") is None else MAX_MIG_DEVICES
        return NVML_SUCCESS

    def _mig_enabled(self, handle, call, not_enabled):
        """(state, gpu, error code) of a GPU's own handle for a call that needs MIG mode on (`not_enabled` when off)."""
        state, gpu, rc = self._device(handle, call)
        if not rc and not (gpu.get("mig_mode") or {}).get("current"):
            rc = not_enabled
        return state, gpu, rc

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle, index, ref):
        state, gpu, rc = self._mig_enabled(handle, "nvmlDeviceGetMigDeviceHandleByIndex", NVML_ERROR_INVALID_ARGUMENT)
        if not rc and state.get(sim_mig.DENIED_KEY):
            rc = NVML_ERROR_NO_PERMISSION
        if not rc and not 0 <= _value(index) < len(sim_mig.devices(gpu, node.live_holders(state, gpu["index"]))):
            rc = NVML_ERROR_NOT_FOUND
        return rc or _set_raw_handle(ref, MIG_HANDLE_BASE, gpu, _value(index))

    def nvmlDeviceIsMigDeviceHandle(self, handle, ref):
        _target(ref).value = 1 if _is_mig_handle(handle) else 0
        return NVML_SUCCESS

    def nvmlDeviceGetDeviceHandleFromMigDeviceHandle(self, handle, ref):
        _state, gpu, _device, rc = self._mig_device(handle, "nvmlDeviceGetDeviceHandleFromMigDeviceHandle")
        if rc:
            return rc
        self._set_handle(ref, gpu["index"])
        return NVML_SUCCESS

    def _mig_id(self, handle, ref, key, call):
        if not _is_mig_handle(handle):
            return NVML_ERROR_INVALID_ARGUMENT  # a GPU's own handle has no instance id
        _state, _gpu, device, rc = self._mig_device(handle, call)
        if rc:
            return rc
        _target(ref).value = device[key]
        return NVML_SUCCESS

    def nvmlDeviceGetGpuInstanceId(self, handle, ref):
        return self._mig_id(handle, ref, "gi", "nvmlDeviceGetGpuInstanceId")

    def nvmlDeviceGetComputeInstanceId(self, handle, ref):
        return self._mig_id(handle, ref, "ci", "nvmlDeviceGetComputeInstanceId")

    def _mig_uuid(self, handle, buffer, size):
        _state, _gpu, device, rc = self._mig_device(handle, "nvmlDeviceGetUUID")
        return rc if rc else _fill_string(buffer, size, device["uuid"])

    def _mig_memory(self, handle, ref, version_checked):
        _state, _gpu, device, rc = self._mig_device(handle, "nvmlDeviceGetMemoryInfo")
        if rc:
            return rc
        info = _target(ref)
        if version_checked:
            if info.version != NVML_MEMORY_V2:
                return NVML_ERROR_ARGUMENT_VERSION_MISMATCH
            info.reserved = 0
        info.total = device["memory_total_mib"] * MIB
        info.used = device["memory_used_mib"] * MIB
        info.free = max(device["memory_total_mib"] - device["memory_used_mib"], 0) * MIB
        return NVML_SUCCESS

    def nvmlDeviceGetGpuInstanceById(self, handle, gi_id, ref):
        _state, gpu, rc = self._mig_enabled(handle, "nvmlDeviceGetGpuInstanceById", NVML_ERROR_NOT_SUPPORTED)
        if not rc and _value(gi_id) not in [gi["id"] for gi in gpu.get("gpu_instances", [])]:
            rc = NVML_ERROR_NOT_FOUND
        return rc or _set_raw_handle(ref, GI_HANDLE_BASE, gpu, _value(gi_id))

    def _owned(self, handle, base, end, call):
        """(gpu, number, error code) of a GPU instance or compute instance handle: base + GPU index * HANDLE_STRIDE +
        number, below `end`."""
        raw = (_handle_value(handle) or 0) - base
        if not 0 <= raw < end - base:
            return None, None, NVML_ERROR_INVALID_ARGUMENT
        _state, gpu, rc = self._device(ctypes.c_void_p(HANDLE_BASE + raw // HANDLE_STRIDE), call)
        return gpu, raw % HANDLE_STRIDE, rc

    def _instance_info(self, handle, base, end, call, read):
        """(gpu, what read(gpu, number) gives, error code): an instance that is gone since its handle was taken is
        Invalid Argument."""
        gpu, number, rc = self._owned(handle, base, end, call)
        if rc:
            return gpu, None, rc
        try:
            return gpu, read(gpu, number), NVML_SUCCESS
        except sim_mig.MigError:
            return gpu, None, NVML_ERROR_INVALID_ARGUMENT

    def nvmlGpuInstanceGetInfo(self, gi_handle, ref):
        gpu, gi, rc = self._instance_info(gi_handle, GI_HANDLE_BASE, CI_HANDLE_BASE, "nvmlGpuInstanceGetInfo", sim_mig.gpu_instance_info)
        if rc:
            return rc
        info = _target(ref)
        ctypes.c_void_p.from_buffer(info, 0).value = HANDLE_BASE + gpu["index"]
        info.id, info.profileId = gi["id"], gi["profile_id"]
        info.placement.start, info.placement.size = gi["start"], gi["size"]
        return NVML_SUCCESS

    def nvmlGpuInstanceGetComputeInstanceById(self, gi_handle, ci_id, ref):
        gpu, gi_id, rc = self._owned(gi_handle, GI_HANDLE_BASE, CI_HANDLE_BASE, "nvmlGpuInstanceGetComputeInstanceById")
        if rc:
            return rc
        try:
            sim_mig.compute_instance_info(gpu, gi_id, _value(ci_id))
        except sim_mig.MigError:
            return NVML_ERROR_NOT_FOUND
        return _set_raw_handle(ref, CI_HANDLE_BASE, gpu, gi_id * 16 + _value(ci_id))

    def nvmlComputeInstanceGetInfo_v2(self, ci_handle, ref):
        gpu, ci, rc = self._instance_info(ci_handle, CI_HANDLE_BASE, CI_HANDLE_BASE + 0x10000, "nvmlComputeInstanceGetInfo",
                                          lambda gpu, number: sim_mig.compute_instance_info(gpu, *divmod(number, 16)))
        if rc:
            return rc
        info = _target(ref)
        ctypes.c_void_p.from_buffer(info, 0).value = HANDLE_BASE + gpu["index"]
        gi_handle = GI_HANDLE_BASE + gpu["index"] * HANDLE_STRIDE + ci["gi"]
        ctypes.c_void_p.from_buffer(info, ctypes.sizeof(ctypes.c_void_p)).value = gi_handle
        info.id, info.profileId = ci["id"], ci["profile_id"]
        info.placement.start, info.placement.size = ci["start"], ci["size"]
        return NVML_SUCCESS


class SimNvmlLibrary(_MigReads):
    """Stands in for the loaded libnvidia-ml.so of a simulated node under `root`."""

    def __init__(self, root):
        self.root = root
        for name in dir(type(self)):
            if name.startswith("nvml"):
                setattr(self, name, _plain(getattr(self, name)))

    # -- plumbing

    def _state(self):
        state = node.load_state(self.root)
        if state.get("nvml_hang"):
            while True:  # a driver call stuck in D state never returns
                time.sleep(3600)
        return state

    def _device(self, handle, call):
        """(state, gpu, error code): the GPU a handle names, checked like the driver would."""
        state = self._state()
        if not node.driver_loaded(state):
            return state, None, NVML_ERROR_DRIVER_NOT_LOADED
        raw = ctypes.cast(handle, ctypes.c_void_p).value if handle is not None else None
        index = (raw or 0) - HANDLE_BASE
        if raw is None or index < 0 or index >= len(state["gpus"]):
            return state, None, NVML_ERROR_INVALID_ARGUMENT
        gpu = node.find_gpu(state, index)
        if gpu.get("lost") and call not in ANSWERS_WHEN_LOST:
            return state, gpu, NVML_ERROR_GPU_IS_LOST
        return state, gpu, NVML_SUCCESS

    @staticmethod
    def _set_handle(ref, index):
        ctypes.c_void_p.from_buffer(_target(ref)).value = HANDLE_BASE + index

    # -- library and system

    def nvmlInitWithFlags(self, flags):
        state = self._state()
        return NVML_SUCCESS if node.driver_loaded(state) else NVML_ERROR_DRIVER_NOT_LOADED

    def nvmlInit_v2(self):
        return self.nvmlInitWithFlags(0)

    def nvmlShutdown(self):
        self._state()
        return NVML_SUCCESS

    def nvmlErrorString(self, result):
        return ERROR_STRINGS.get(_value(result), b"Unknown Error")

    def nvmlSystemGetDriverVersion(self, buffer, size):
        state = self._state()
        if not node.driver_loaded(state):
            return NVML_ERROR_DRIVER_NOT_LOADED
        return _fill_string(buffer, size, state["driver_version"])

    def _cuda_version(self, ref):
        state = self._state()
        if not node.driver_loaded(state):
            return NVML_ERROR_DRIVER_NOT_LOADED
        major, _sep, minor = state["cuda_version"].partition(".")
        _target(ref).value = int(major) * 1000 + int(minor or 0) * 10
        return NVML_SUCCESS

    def nvmlSystemGetCudaDriverVersion(self, ref):
        return self._cuda_version(ref)

    def nvmlSystemGetCudaDriverVersion_v2(self, ref):
        return self._cuda_version(ref)

    # -- enumerating devices

    def nvmlDeviceGetCount_v2(self, ref):
        state = self._state()
        if not node.driver_loaded(state):
            return NVML_ERROR_DRIVER_NOT_LOADED
        _target(ref).value = len(state["gpus"])
        return NVML_SUCCESS

    def nvmlDeviceGetHandleByIndex_v2(self, index, ref):
        state = self._state()
        if not node.driver_loaded(state):
            return NVML_ERROR_DRIVER_NOT_LOADED
        index = _value(index)
        if index < 0 or index >= len(state["gpus"]):
            return NVML_ERROR_INVALID_ARGUMENT
        self._set_handle(ref, index)
        return NVML_SUCCESS

    def nvmlDeviceGetHandleByPciBusId_v2(self, bus_id, ref):
        state = self._state()
        if not node.driver_loaded(state):
            return NVML_ERROR_DRIVER_NOT_LOADED
        text = _value(bus_id)
        text = text.decode() if isinstance(text, bytes) else str(text)
        wanted = normalize_bus_id(text)
        if wanted is None:
            return NVML_ERROR_INVALID_ARGUMENT
        for gpu in state["gpus"]:
            if gpu["pci_bus_id"] == wanted:
                if gpu.get("lost"):
                    return NVML_ERROR_GPU_IS_LOST
                self._set_handle(ref, gpu["index"])
                return NVML_SUCCESS
        return NVML_ERROR_NOT_FOUND

    def nvmlDeviceGetHandleByUUID(self, uuid, ref):
        state = self._state()
        text = _value(uuid)
        text = text.decode() if isinstance(text, bytes) else str(text)
        for gpu in state["gpus"]:
            if gpu["uuid"] == text:
                self._set_handle(ref, gpu["index"])
                return NVML_SUCCESS
        return NVML_ERROR_NOT_FOUND

    # -- identity

    def nvmlDeviceGetName(self, handle, buffer, size):
        if _is_mig_handle(handle):
            _state, gpu, device, rc = self._mig_device(handle, "nvmlDeviceGetName")
            return rc if rc else _fill_string(buffer, size, "%s MIG %s" % (gpu["name"], device["name"]))
        _state, gpu, rc = self._device(handle, "nvmlDeviceGetName")
        return rc if rc else _fill_string(buffer, size, gpu["name"])

    def nvmlDeviceGetUUID(self, handle, buffer, size):
        if _is_mig_handle(handle):
            return self._mig_uuid(handle, buffer, size)
        _state, gpu, rc = self._device(handle, "nvmlDeviceGetUUID")
        return rc if rc else _fill_string(buffer, size, gpu["uuid"])

    def nvmlDeviceGetSerial(self, handle, buffer, size):
        _state, gpu, rc = self._device(handle, "nvmlDeviceGetSerial")
        return rc if rc else _fill_string(buffer, size, node.gpu_serial(gpu))

    def nvmlDeviceGetMinorNumber(self, handle, ref):
        _state, gpu, rc = self._device(handle, "nvmlDeviceGetMinorNumber")
        if rc:
            return rc
        _target(ref).value = gpu.get("minor_number", gpu["index"])
        return NVML_SUCCESS

    def nvmlDeviceGetPciInfo_v3(self, handle, ref):
        _state, gpu, rc = self._device(handle, "nvmlDeviceGetPciInfo_v3")
        if rc:
            return rc
        _fill_pci(_target(ref), gpu)
        return NVML_SUCCESS

    # -- memory and processes

    def nvmlDeviceGetMemoryInfo(self, handle, ref):
        if _is_mig_handle(handle):
            return self._mig_memory(handle, ref, version_checked=False)
        state, gpu, rc = self._device(handle, "nvmlDeviceGetMemoryInfo")
        if rc:
            return rc
        mem = node.gpu_memory(state, gpu["index"])
        info = _target(ref)
        # The v1 struct has no reserved field: NVML counts reserved memory as used there.
        info.total = mem["total_mib"] * MIB
        info.free = mem["free_mib"] * MIB
        info.used = (mem["used_mib"] + mem["reserved_mib"]) * MIB
        return NVML_SUCCESS

    def nvmlDeviceGetMemoryInfo_v2(self, handle, ref):
        if _is_mig_handle(handle):
            return self._mig_memory(handle, ref, version_checked=True)
        state, gpu, rc = self._device(handle, "nvmlDeviceGetMemoryInfo_v2")
        if rc:
            return rc
        info = _target(ref)
        if info.version != NVML_MEMORY_V2:
            return NVML_ERROR_ARGUMENT_VERSION_MISMATCH
        mem = node.gpu_memory(state, gpu["index"])
        info.total = mem["total_mib"] * MIB
        info.reserved = mem["reserved_mib"] * MIB
        info.used = mem["used_mib"] * MIB
        info.free = mem["free_mib"] * MIB
        return NVML_SUCCESS

    def _running_processes(self, handle, count_ref, array, kind, call):
        if _is_mig_handle(handle):
            state, gpu, device, rc = self._mig_device(handle, call)
        else:
            (state, gpu, rc), device = self._device(handle, call), None
        if rc:
            return rc
        holders = [h for h in node.live_holders(state, gpu["index"]) if kind in h.get("type", "C").split("+")]
        if device is not None:  # a MIG device lists the processes of its own instance only
            holders = [h for h in holders if sim_mig.holder_instance(h, gpu["index"]) == (device["gi"], device["ci"])]
        count = _target(count_ref)
        if array is None or count.value < len(holders):
            needed = len(holders)
            count.value = needed
            return NVML_ERROR_INSUFFICIENT_SIZE if needed else NVML_SUCCESS
        for slot, holder in enumerate(holders):
            entry = array[slot]
            entry.pid = holder["pid"]
            entry.usedGpuMemory = int(holder["gpus"][str(gpu["index"])]) * MIB
            instance = sim_mig.holder_instance(holder, gpu["index"]) or (NOT_AVAILABLE, NOT_AVAILABLE)
            entry.gpuInstanceId, entry.computeInstanceId = instance
        count.value = len(holders)
        return NVML_SUCCESS

    def nvmlDeviceGetComputeRunningProcesses_v3(self, handle, count_ref, array):
        return self._running_processes(handle, count_ref, array, "C", "nvmlDeviceGetComputeRunningProcesses_v3")

    def nvmlDeviceGetComputeRunningProcesses_v2(self, handle, count_ref, array):
        return self._running_processes(handle, count_ref, array, "C", "nvmlDeviceGetComputeRunningProcesses_v2")

    def nvmlDeviceGetGraphicsRunningProcesses_v3(self, handle, count_ref, array):
        return self._running_processes(handle, count_ref, array, "G", "nvmlDeviceGetGraphicsRunningProcesses_v3")

    def nvmlDeviceGetGraphicsRunningProcesses_v2(self, handle, count_ref, array):
        return self._running_processes(handle, count_ref, array, "G", "nvmlDeviceGetGraphicsRunningProcesses_v2")

    # -- modes

    def nvmlDeviceGetPersistenceMode(self, handle, ref):
        _state, gpu, rc = self._device(handle, "nvmlDeviceGetPersistenceMode")
        if rc:
            return rc
        if gpu["persistence_mode"] is None:  # a GPU without it (WDDM on Windows): the state holds null
            return NVML_ERROR_NOT_SUPPORTED
        _target(ref).value = 1 if gpu["persistence_mode"] else 0
        return NVML_SUCCESS

    def nvmlDeviceSetPersistenceMode(self, handle, mode):
        _state, gpu, rc = self._device(handle, "nvmlDeviceSetPersistenceMode")
        if rc:
            return rc
        mode = _value(mode)
        if mode not in (0, 1):
            return NVML_ERROR_INVALID_ARGUMENT
        if gpu["persistence_mode"] is None:
            return NVML_ERROR_NOT_SUPPORTED
        return self._set_mode(gpu["index"], "persistence_mode", bool(mode))

    def nvmlDeviceSetComputeMode(self, handle, mode):
        _state, gpu, rc = self._device(handle, "nvmlDeviceSetComputeMode")
        if rc:
            return rc
        names = dict((number, name) for name, number in COMPUTE_MODES.items())
        mode = _value(mode)
        if mode not in names:
            return NVML_ERROR_INVALID_ARGUMENT
        if (gpu.get("mig_mode") or {}).get("current"):
            return NVML_ERROR_NOT_SUPPORTED  # with MIG on, NVML takes a MIG device handle here, not the GPU's
        return self._set_mode(gpu["index"], "compute_mode", names[mode])

    def _set_mode(self, index, key, value):
        """Every NVML setter needs root; the driver applies it at once, whoever holds the GPU."""
        if os.geteuid() != 0:
            return NVML_ERROR_NO_PERMISSION

        def apply(state):
            node.find_gpu(state, index)[key] = value
        node.update_state(self.root, apply)
        return NVML_SUCCESS

    def nvmlDeviceGetComputeMode(self, handle, ref):
        _state, gpu, rc = self._device(handle, "nvmlDeviceGetComputeMode")
        if rc:
            return rc
        _target(ref).value = COMPUTE_MODES.get(gpu["compute_mode"], 0)
        return NVML_SUCCESS

    def nvmlDeviceGetMigMode(self, handle, current_ref, pending_ref):
        _state, gpu, rc = self._device(handle, "nvmlDeviceGetMigMode")
        if rc:
            return rc
        mig = gpu.get("mig_mode")
        if mig is None:
            return NVML_ERROR_NOT_SUPPORTED
        _target(current_ref).value = 1 if mig.get("current") else 0
        _target(pending_ref).value = 1 if mig.get("pending") else 0
        return NVML_SUCCESS

    def nvmlDeviceGetFieldValues(self, handle, count, values_ref):
        _state, gpu, rc = self._device(handle, "nvmlDeviceGetFieldValues")
        if rc:
            return rc
        values = _target(values_ref)
        for slot in range(_value(count)):
            entry = values[slot]
            entry.timestamp = int(time.time() * 1e6)
            entry.latencyUsec = 0
            if entry.fieldId == NVML_FI_DEV_GET_GPU_RECOVERY_ACTION:
                entry.valueType = NVML_VALUE_TYPE_UNSIGNED_INT
                entry.value.uiVal = RECOVERY_ACTIONS.get(gpu.get("recovery_action") or "none", 0)
                entry.nvmlReturn = NVML_SUCCESS
            else:
                entry.nvmlReturn = NVML_ERROR_NOT_SUPPORTED
        return NVML_SUCCESS

    # -- NVLink: link i of a GPU goes to its i-th peer

    def _link(self, handle, link, call):
        state, gpu, rc = self._device(handle, call)
        if rc:
            return state, None, rc
        link = _value(link)
        if not gpu["nvlink_peers"]:
            return state, None, NVML_ERROR_NOT_SUPPORTED
        if link < 0 or link >= NVML_NVLINK_MAX_LINKS:
            return state, None, NVML_ERROR_INVALID_ARGUMENT
        peer = gpu["nvlink_peers"][link] if link < len(gpu["nvlink_peers"]) else None
        return state, peer, NVML_SUCCESS

    def nvmlDeviceGetNvLinkState(self, handle, link, ref):
        _state, peer, rc = self._link(handle, link, "nvmlDeviceGetNvLinkState")
        if rc:
            return rc
        _target(ref).value = 0 if peer is None else 1
        return NVML_SUCCESS

    def nvmlDeviceGetNvLinkRemotePciInfo_v2(self, handle, link, ref):
        state, peer, rc = self._link(handle, link, "nvmlDeviceGetNvLinkRemotePciInfo_v2")
        if rc:
            return rc
        if peer is None:
            return NVML_ERROR_NOT_SUPPORTED
        _fill_pci(_target(ref), node.find_gpu(state, peer))
        return NVML_SUCCESS


def _fill_pci(info, gpu):
    """An nvmlPciInfo_t for a GPU: both bus id spellings, domain/bus/device, the device ids."""
    bus = gpu["pci_bus_id"]
    domain, bus_no, rest = bus.split(":")
    device = rest.split(".")[0]
    info.busIdLegacy = ("%s:%s:%s.0" % (domain[-4:], bus_no, device)).encode()
    info.busId = bus.encode()
    info.domain = int(domain, 16)
    info.bus = int(bus_no, 16)
    info.device = int(device, 16)
    info.pciDeviceId = int(gpu.get("pci_device_id", "233010DE"), 16)
    info.pciSubSystemId = 0x16C110DE
