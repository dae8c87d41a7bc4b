# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A simulated GPU node's state file, read and written under its lock, and what the state says.

The state (<root>/state.json) is the only truth the simulated NVML and tools read and write. The simulated
NVML imports only this file on every snapshot of a simulated node; the kernel's rules are in _sim_rules.py,
building and destroying a node in _sim_build.py, its processes in _sim_processes.py and _sim_programs.py.
Whether a process still exists is read with the real process identity code (_process, copied into the node's
lib/ with the simulation).
"""

from __future__ import annotations

import os

try:
    from ansible_collections.gpuops.remediation.plugins.module_utils.probes._process import same_process
except ImportError:  # running from <root>/lib as a plain module
    from _process import same_process  # type: ignore[no-redef] # pylint: disable=import-error

DEVICE_SIZE = 4096  # bytes of each regular file standing in for a device node
# How long one read-modify-write waits for the state lock: the node's tools answer in milliseconds, so a longer wait is
# someone holding it; shorter than the probe deadline (probe_timeout, 10 s by default), so the run says who.
LOCK_TIMEOUT = 5.0


class SimError(Exception):
    """A simulated-node operation that cannot be done; the message names the culprit."""


def state_path(root):
    return os.path.join(root, "state.json")


def dev_path(root, name):
    return os.path.join(root, "dev", name)


def gpu_device(root, index):
    return dev_path(root, "nvidia%d" % index)


def _lean_json():
    """(loads, dumps) of one line of JSON through the C accelerator of the json package, without importing that package
    (re, enum and the rest, three quarters of a simulated tool's start), where the interpreter has it; json's own
    otherwise. The simulated tools stand in for C binaries that start in a few milliseconds."""
    try:
        import _json  # pylint: disable=import-outside-toplevel
        scanner_of, encoder_of, quoted = _json.make_scanner, _json.make_encoder, _json.encode_basestring_ascii
        encoder_of({}, None, quoted, None, ": ", ", ", False, False, True)
    except (ImportError, AttributeError, TypeError):
        import json  # pylint: disable=import-outside-toplevel
        return json.loads, json.dumps

    def constant(name):
        return {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}[name]

    class _Context:  # the attributes json.decoder.JSONDecoder gives its scanner
        strict = True
        object_hook = object_pairs_hook = None
        parse_float, parse_int, parse_constant = float, int, staticmethod(constant)
        memo = {}

    scan = scanner_of(_Context())

    def loads(text):
        start = len(text) - len(text.lstrip(_JSON_SPACE))
        try:
            value, end = scan(text, start)
        except StopIteration as exc:
            raise ValueError("no JSON value at %d" % exc.value)
        if text[end:].strip(_JSON_SPACE):
            raise ValueError("extra data after the JSON value at %d" % end)
        return value

    def refuse(value):
        raise TypeError("%r is not JSON serializable" % (value,))

    def dumps(value):
        return "".join(encoder_of({}, refuse, quoted, None, ": ", ", ", False, False, True)(value, 0))
    return loads, dumps


_JSON = []
_JSON_SPACE = " \t\n\r"


def json_text(value):
    """value as one line of JSON (json.dumps's default form)."""
    if not _JSON:
        _JSON.extend(_lean_json())
    return _JSON[1](value)


def load_state(root):
    """The node's state, or raise SimError when root holds no simulated node."""
    if not _JSON:
        _JSON.extend(_lean_json())
    try:
        with open(state_path(root)) as handle:
            return _JSON[0](handle.read())
    except (IOError, OSError) as exc:
        raise SimError("no simulated GPU node at %s: %s" % (root, exc))


_WRITE_CODE = {}


def write_code():
    """What a write of the node's files needs (json, fcntl, the product's lock and atomic writer), imported on the first
    write: a read-only tool run (systemctl show) never needs it. A node process that drops its privileges calls this
    before it does (_sim_programs.run_holder): the user it becomes may not read root's interpreter files."""
    if not _WRITE_CODE:
        # pylint: disable=import-outside-toplevel
        import fcntl
        import json
        try:
            from ansible_collections.gpuops.remediation.plugins.module_utils._lock import LockTimeout, flock_within, open_lock
            from ansible_collections.gpuops.remediation.plugins.module_utils._safe_files import UnsafePath, write_atomic
        except ImportError:  # running from <root>/lib as a plain module
            from _lock import LockTimeout, flock_within, open_lock  # type: ignore[no-redef] # pylint: disable=import-error
            from _safe_files import UnsafePath, write_atomic  # type: ignore[no-redef] # pylint: disable=import-error
        _WRITE_CODE.update(fcntl=fcntl, json=json, LockTimeout=LockTimeout, flock_within=flock_within, open_lock=open_lock,
                           UnsafePath=UnsafePath, write_atomic=write_atomic)
    return _WRITE_CODE


def write_json_atomic(path, data):
    """data as JSON, replaced whole (_safe_files.write_atomic, the collection's one writer of such files)."""
    write_text_atomic(path, write_code()["json"].dumps(data, indent=1, sort_keys=True))


def write_text_atomic(path, text):
    """A simulated node's file, replaced whole."""
    write_code()["write_atomic"](path, text, 0o644, option="simulated node file", dir_mode=0o755)


def node_lock(root, timeout=LOCK_TIMEOUT):
    """Exclusive flock on <root>/state.lock for one read-modify-write, as the product's own locks are taken
    (_lock.open_lock: mode 0600, so that nobody else can open it to hold it, never through a link; an older node's lock
    is made 0600), waiting at most `timeout` seconds: SimError names the lock and the process holding it. Returns the
    lock's fd: closing it lets go. (No contextlib: a read-only tool run would import it, and collections, for nothing.)"""
    code = write_code()
    path = os.path.join(root, "state.lock")
    try:
        fd = code["open_lock"](path, "simulated node lock")
    except code["UnsafePath"] as exc:
        raise SimError(str(exc))
    try:
        code["flock_within"](fd, code["fcntl"].LOCK_EX, timeout, path, what="simulated node lock")
    except code["LockTimeout"] as exc:
        os.close(fd)
        raise SimError(str(exc))
    except BaseException:
        os.close(fd)
        raise
    return fd


def update_state(root, fn):
    """Lock, load, let fn change the state (in place or by returning a new one), write atomically."""
    fd = node_lock(root)
    try:
        state = load_state(root)
        result = fn(state)
        if result is not None:
            state = result
        write_json_atomic(state_path(root), state)
        return state
    finally:
        os.close(fd)


def process_exists(pid, start_time):
    """True while a process with this pid and this start time exists (a zombie still exists)."""
    return bool(pid) and pid > 0 and same_process(pid, start_time)


def find_gpu(state, index):
    for gpu in state["gpus"]:
        if gpu["index"] == index:
            return gpu
    raise SimError("no GPU with index %s on this node" % index)


def live_holders(state, index=None):
    """Holders whose process (pid and start time) still exists; on GPU `index` when given."""
    result = []
    for holder in state.get("holders", []):
        if index is not None and str(index) not in holder.get("gpus", {}):
            continue
        if process_exists(holder["pid"], holder["start_time"]):
            result.append(holder)
    return result


def gpu_memory(state, index):
    """Memory of one GPU in MiB, the way nvidia-smi -q and NVML's v2 struct split it.

    used = live holders' memory + ghost (memory nobody alive accounts for); reserved is apart from used;
    free = total - reserved - used; attributed = what live processes account for.
    """
    gpu = find_gpu(state, index)
    attributed = sum(int(h["gpus"][str(index)]) for h in live_holders(state, index))
    # A MIG GPU's instances keep ghost memory of their own, part of the GPU's.
    ghost = int(gpu.get("ghost_mib", 0)) + sum(int(gi.get("ghost_mib", 0)) for gi in gpu.get("gpu_instances") or [])
    used = attributed + ghost
    total = int(gpu["memory_total_mib"])
    reserved = int(gpu.get("memory_reserved_mib", 0))
    return {"total_mib": total, "reserved_mib": reserved, "used_mib": used,
            "free_mib": max(total - reserved - used, 0), "attributed_mib": attributed, "ghost_mib": ghost}


def driver_loaded(state):
    return bool(state["modules"].get("nvidia", {}).get("loaded"))


def gpu_serial(gpu):
    """The board serial a simulated GPU reports (nvidia-smi's <serial>, NVML's nvmlDeviceGetSerial): 13 digits, from its
    bus and index, as stable as the real one."""
    return "16501240%05d" % (int(gpu["pci_bus_id"][9:11], 16) * 10 + gpu["index"])
