# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulated GPU node: its state file, its real processes, and the rules the simulation keeps.

A node lives under one directory (the root):
  state.json   the only truth the simulated NVML and tools read and write (schema in docs/simulation.md)
  state.lock   flock'ed around every read-modify-write
  dev/         regular 4096-byte files standing in for /dev/nvidia*, /dev/dri/*
  sys/module/  loaded modules and their parameters, like /sys/module
  bin/         nvidia-smi, modprobe, lsmod, systemctl (thin scripts calling _sim_tools.main)
  lib/         this file, _sim_state.py, _sim_tools.py and _sim_nvml.py (the simulated libnvidia-ml), copied
               as plain modules
  run/         spawn requests, holder specs, ready reports
  kernel.log   the kernel ring buffer

Processes are real. A supervisor ("gpu-sim-init", a child subreaper) starts every holder and service, so
orphans are re-parented to it and reaped like init would; a zombie whose parent still runs stays a zombie.
This file is also the program those processes run: `python _sim_node.py supervisor ROOT` and
`python _sim_node.py holder SPEC.json`.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import json
import os
import shutil
import signal
import sys
import threading
import time

try:
    from ansible_collections.gpuops.remediation.plugins.module_utils._sim_state import (
        SimError, find_gpu, live_holders, load_state, normalize_bus_id, proc_stat, process_exists, start_time_of, state_path)
except ImportError:  # running from <root>/lib as a plain module
    from _sim_state import (  # type: ignore[no-redef] # pylint: disable=import-error
        SimError, find_gpu, live_holders, load_state, normalize_bus_id, proc_stat, process_exists, start_time_of, state_path)

STATE_VERSION = 1
SUPERVISOR_NAME = "gpu-sim-init"
HOLDER_KINDS = ("fd", "mmap", "inherited", "zombie", "ignores_term", "leader_exited", "leader_exited_ignores_term")
HOLDER_TYPES = ("C", "G", "C+G")
COMPUTE_MODES = ("Default", "Exclusive_Thread", "Prohibited", "Exclusive_Process")
RECOVERY_ACTIONS = ("none", "reset", "reboot", "drain_p2p", "drain_and_reset")
DEFAULT_MODULES = ("nvidia", "nvidia_modeset", "nvidia_uvm", "nvidia_drm")
# gdrdrv (GDRCopy) and nvidia_fs (GPUDirect Storage) are not NVIDIA's driver but use it: while one is loaded,
# `modprobe -r nvidia` fails with "Module nvidia is in use."
KNOWN_MODULES = DEFAULT_MODULES + ("nvidia_peermem", "gdrdrv", "nvidia_fs")
# What each module needs loaded first (the in-kernel dependency, as modinfo depends: shows it).
MODULE_DEPENDS = {
    "nvidia": [],
    "nvidia_modeset": ["nvidia"],
    "nvidia_uvm": ["nvidia"],
    "nvidia_drm": ["nvidia_modeset"],
    "nvidia_peermem": ["nvidia"],
    "gdrdrv": ["nvidia"],
    "nvidia_fs": ["nvidia"],
}
MODULE_SIZES = {"nvidia": 34136064, "nvidia_modeset": 1228800, "nvidia_uvm": 1437696, "nvidia_drm": 53248, "nvidia_peermem": 16384,
                "gdrdrv": 24576, "nvidia_fs": 262144}
DEFAULT_MODULE_PARAMS = {"nvidia_drm": {"modeset": "Y"}}
CONTROL_DEVICES = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset", "dri/card1", "dri/renderD128")
DEVICE_SIZE = 4096
SERVICES = {
    "nvidia-persistenced": {"unit": "nvidia-persistenced.service", "process": "nvidia-persistenced",
                            "description": "NVIDIA Persistence Daemon", "aliases": []},
    "nvidia-fabricmanager": {"unit": "nvidia-fabricmanager.service", "process": "nv-fabricmanager",
                             "description": "NVIDIA fabric manager service", "aliases": []},
    "nvidia-dcgm": {"unit": "nvidia-dcgm.service", "process": "nv-hostengine",
                    "description": "NVIDIA DCGM service", "aliases": ["dcgm.service"]},
    "display-manager": {"unit": "gdm.service", "process": "gdm3", "description": "GNOME Display Manager",
                        "aliases": ["display-manager.service", "gdm3.service"]},
}
XORG_NAME = "Xorg"
XORG_MEMORY_MIB = 24
DEFAULT_GPU_NAME = "NVIDIA H100 80GB HBM3"
DEFAULT_GPU_MEMORY_MIB = 81559
DEFAULT_GPU_RESERVED_MIB = 552
DEFAULT_BUS_NUMBERS = (0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB)
SPAWN_TIMEOUT = 20.0
STOP_TIMEOUT = 5.0
PR_SET_NAME = 15
PR_SET_CHILD_SUBREAPER = 36
XID_MESSAGES = {
    13: "Graphics SM Warp Exception on (GPC 0, TPC 0, SM 0): Out Of Range Address",
    31: "Ch 00000008, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_8 faulted @ 0x7f00_1c000000. "
        "Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_WRITE",
    43: "Ch 00000008",
    48: "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 0, subpartition 0.",
    63: "Row Remapping: New row (0x0000000000a1b2c3) was marked for remapping, reset gpu to activate.",
    64: "Row Remapping: Failed to mark row (0x0000000000a1b2c3) for remapping.",
    74: "NVLink: fatal error detected on link 3(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)",
    79: "GPU has fallen off the bus.",
    94: "Contained: SM (0x1). RST: No, D-RST: No",
    95: "Uncontained: FBHUB. RST: Yes, D-RST: No",
    119: "Timeout after 6s of waiting for RPC response from GPU0 GSP! Expected function 76 (GSP_RM_CONTROL) (0x20801813 0x4c).",
    120: "GSP task exception: LIBOS_EXCEPTION_PAGE_FAULT at pc 0x0000000000000000",
}


# ---------------------------------------------------------------- paths and the state file

def _lock_path(root):
    return os.path.join(root, "state.lock")


def dev_path(root, name):
    return os.path.join(root, "dev", name)


def gpu_device(root, index):
    return dev_path(root, "nvidia%d" % index)


@contextlib.contextmanager
def node_lock(root):
    """Exclusive flock on <root>/state.lock for one read-modify-write."""
    fd = os.open(_lock_path(root), os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _write_json_atomic(path, data):
    tmp = "%s.%d.tmp" % (path, os.getpid())
    with open(tmp, "w") as handle:
        json.dump(data, handle, indent=1, sort_keys=True)
        handle.flush()
        os.fsync(handle.fileno())
    os.rename(tmp, path)


def save_state(root, state):
    _write_json_atomic(state_path(root), state)
    if state.get("modules"):
        write_proc_modules(root, state)


def write_proc_modules(root, state):
    """<root>/proc/modules in the kernel's format, rewritten with every change of the state.

    One difference from the kernel's: a refcount here counts the dependent modules and the pins, not the
    processes that hold a device file at this moment (a file cannot follow them; the simulated lsmod does).
    """
    lines = []
    loaded = [(name, info) for name, info in state["modules"].items() if info.get("loaded")]
    for name, info in sorted(loaded, key=lambda item: -item[1].get("load_seq", 0)):
        users = module_dependents(state, name)
        lines.append("%s %d %d %s Live 0x0000000000000000 (POE)\n" % (
            name, MODULE_SIZES.get(name, 16384), module_refcount(state, name, {}), "".join(u + "," for u in users) or "-"))
    path = os.path.join(root, "proc", "modules")
    if not os.path.isdir(os.path.dirname(path)):
        os.makedirs(os.path.dirname(path))
    with open(path + ".tmp", "w") as handle:
        handle.write("".join(lines))
    os.rename(path + ".tmp", path)


def update_state(root, fn):
    """Lock, load, let fn change the state (in place or by returning a new one), write atomically."""
    with node_lock(root):
        state = load_state(root)
        result = fn(state)
        if result is not None:
            state = result
        save_state(root, state)
        return state


# ---------------------------------------------------------------- /proc

def _links_under(directory, prefix):
    found = set()
    try:
        names = os.listdir(directory)
    except OSError:
        return found
    for name in names:
        try:
            target = os.readlink(os.path.join(directory, name))
        except OSError:
            continue
        if target.startswith(prefix):
            found.add(target)
    return found


def _mapped_under(pid, prefix):
    found = set()
    try:
        with open("/proc/%s/maps" % pid) as handle:
            lines = handle.readlines()
    except (IOError, OSError):
        return found
    for line in lines:
        fields = line.split(None, 5)  # address perms offset dev inode [path]
        if len(fields) == 6 and fields[5].startswith(prefix):
            found.add(fields[5].rstrip("\n"))
    return found


def device_users(root):
    """{pid: set of device paths} for every process holding a file under <root>/dev open or mapped.

    Threads are looked at too: a process whose leader exited keeps its files through its live threads.
    """
    prefix = os.path.join(os.path.realpath(root), "dev") + os.sep
    users = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        paths = _links_under("/proc/%s/fd" % entry, prefix) | _mapped_under(entry, prefix)
        if not paths:
            try:
                tasks = os.listdir("/proc/%s/task" % entry)
            except OSError:
                tasks = []
            for tid in tasks:
                if tid != entry:
                    paths |= _links_under("/proc/%s/task/%s/fd" % (entry, tid), prefix)
        if paths:
            users[int(entry)] = paths
    return users


# ---------------------------------------------------------------- the rules

def reset_blockers(state, root, index, users=None):
    """Pids that keep GPU `index` from being reset.

    Those are its live holders, whoever has <root>/dev/nvidia<index> open or mapped, and whoever holds
    nvidiactl without any nvidiaN: a client of the whole driver (nv-fabricmanager, nv-hostengine) blocks
    every GPU, while a CUDA process on GPU 0 (nvidia0 + nvidiactl) does not block GPU 1.
    """
    users = device_users(root) if users is None else users
    dev = os.path.realpath(os.path.join(root, "dev"))
    own = os.path.join(dev, "nvidia%d" % index)
    ctl = os.path.join(dev, "nvidiactl")
    pids = set(h["pid"] for h in live_holders(state, index))
    for pid, paths in users.items():
        gpu_files = [path for path in paths if _is_gpu_file(dev, path)]
        if own in paths or (ctl in paths and not gpu_files):
            pids.add(pid)
    return sorted(pids)


def _is_gpu_file(dev, path):
    name = os.path.basename(path)
    return os.path.dirname(path) == dev and name.startswith("nvidia") and name[6:].isdigit()


def module_users(root, users=None):
    """{module: number of processes holding one of its device files} from the /proc scan."""
    users = device_users(root) if users is None else users
    dev = os.path.realpath(os.path.join(root, "dev")) + os.sep
    counts = dict((name, 0) for name in KNOWN_MODULES)
    for paths in users.values():
        names = set(path[len(dev):] for path in paths)
        counts["nvidia"] += 1  # every device file is the nvidia module's
        if names & {"nvidia-uvm", "nvidia-uvm-tools"}:
            counts["nvidia_uvm"] += 1
        if "nvidia-modeset" in names:
            counts["nvidia_modeset"] += 1
        if any(name.startswith("dri/") for name in names):
            counts["nvidia_drm"] += 1
    return counts


def module_dependents(state, name):
    """Loaded modules that depend on `name` (lsmod's "Used by"), the most recently loaded first."""
    modules = state["modules"]
    deps = [other for other, info in modules.items() if info.get("loaded") and name in MODULE_DEPENDS.get(other, [])]
    return sorted(deps, key=lambda other: -modules[other].get("load_seq", 0))


def module_refcount(state, name, counts):
    info = state["modules"][name]
    return int(info.get("refcount", 0)) + len(module_dependents(state, name)) + counts.get(name, 0)


def clear_gpu_after_reset(gpu):
    gpu["ghost_mib"] = 0
    gpu["recovery_action"] = "none"


def write_sys_module(root, name, info):
    """Mirror a module's load state into <root>/sys/module/<name> (parameters/, refcnt)."""
    directory = os.path.join(root, "sys", "module", name)
    if not info.get("loaded"):
        shutil.rmtree(directory, ignore_errors=True)
        return
    params_dir = os.path.join(directory, "parameters")
    if not os.path.isdir(params_dir):
        os.makedirs(params_dir)
    for param, value in info.get("params", {}).items():
        with open(os.path.join(params_dir, param), "w") as handle:
            handle.write("%s\n" % value)


def xid_line(state, xid, index, pid=None, process_name=None, message=None):
    """A dmesg-format NVRM Xid line for GPU `index`, as the driver prints it."""
    bus = find_gpu(state, index)["pci_bus_id"]
    domain, bus_no, rest = bus.split(":")
    short = "%s:%s:%s" % (domain[-4:], bus_no, rest.split(".")[0])
    who = "pid=%s, name=%s" % (pid, process_name) if pid else "pid='<unknown>', name=<unknown>"
    text = message if message is not None else XID_MESSAGES.get(int(xid), "")
    uptime = _uptime()
    return "[%12.6f] NVRM: Xid (PCI:%s): %d, %s, %s" % (uptime, short.lower(), int(xid), who, text)


def _uptime():
    try:
        with open("/proc/uptime") as handle:
            return float(handle.read().split()[0])
    except (IOError, OSError, ValueError, IndexError):
        return time.monotonic()


def append_kernel_log(root, lines):
    with open(os.path.join(root, "kernel.log"), "a") as handle:
        for line in lines:
            handle.write(line.rstrip("\n") + "\n")


# ---------------------------------------------------------------- building a node from a spec

def _default_uuid(root, index):
    import hashlib  # only needed here

    digest = hashlib.sha1(("%s|%d" % (os.path.realpath(root), index)).encode()).hexdigest()
    return "GPU-%s-%s-%s-%s-%s" % (digest[:8], digest[8:12], digest[12:16], digest[16:20], digest[20:32])


def _default_bus_number(index):
    if index < len(DEFAULT_BUS_NUMBERS):
        return DEFAULT_BUS_NUMBERS[index]
    return 0xE0 + index - len(DEFAULT_BUS_NUMBERS)


def _build_gpu(root, index, spec):
    bus = spec.get("pci_bus_id") or "00000000:%02X:00.0" % _default_bus_number(index)
    action = spec.get("recovery_action") or "none"
    if action not in RECOVERY_ACTIONS:
        raise SimError("gpus[%d].recovery_action %r is not one of %s" % (index, action, ", ".join(RECOVERY_ACTIONS)))
    mode = spec.get("compute_mode") or "Default"
    if mode not in COMPUTE_MODES:
        raise SimError("gpus[%d].compute_mode %r is not one of %s" % (index, mode, ", ".join(COMPUTE_MODES)))
    total = int(spec.get("memory_mib") or DEFAULT_GPU_MEMORY_MIB)
    mig = spec.get("mig_mode")
    return {
        "index": index,
        "uuid": spec.get("uuid") or _default_uuid(root, index),
        "name": spec.get("name") or DEFAULT_GPU_NAME,
        "pci_bus_id": normalize_bus_id(bus),
        "pci_device_id": "233010DE",
        "minor_number": index,
        "memory_total_mib": total,
        "memory_reserved_mib": int(spec["reserved_mib"]) if spec.get("reserved_mib") is not None else DEFAULT_GPU_RESERVED_MIB,
        "ghost_mib": int(spec.get("ghost_mib") or 0),
        "nvlink_peers": [int(peer) for peer in spec.get("nvlink_peers") or []],
        "persistence_mode": bool(spec.get("persistence_mode", False)),
        "compute_mode": mode,
        "mig_mode": None if mig is None else {"current": bool(mig), "pending": bool(mig)},
        "recovery_action": action,
        "lost": bool(spec.get("lost", False)),
        "primary": bool(spec.get("primary", False)),
    }


def _check_gpus(gpus):
    count = len(gpus)
    seen = {}
    for gpu in gpus:
        for peer in gpu["nvlink_peers"]:
            if peer < 0 or peer >= count or peer == gpu["index"]:
                raise SimError("gpus[%d].nvlink_peers: %r is not another GPU's index (0..%d)" % (gpu["index"], peer, count - 1))
        if gpu["pci_bus_id"] in seen:
            raise SimError("gpus[%d].pci_bus_id %s is also GPU %d's" % (gpu["index"], gpu["pci_bus_id"], seen[gpu["pci_bus_id"]]))
        seen[gpu["pci_bus_id"]] = gpu["index"]
        if gpu["ghost_mib"] + gpu["memory_reserved_mib"] > gpu["memory_total_mib"]:
            raise SimError("gpus[%d].ghost_mib %d does not fit in memory_mib %d" % (gpu["index"], gpu["ghost_mib"], gpu["memory_total_mib"]))


def _build_modules(names):
    modules = {}
    for seq, name in enumerate(names or []):
        if name not in KNOWN_MODULES:
            raise SimError("modules: %r is not one of %s" % (name, ", ".join(KNOWN_MODULES)))
        modules[name] = {"loaded": True, "refcount": 0, "load_seq": seq + 1,
                         "params": dict(DEFAULT_MODULE_PARAMS.get(name, {}))}
    for name in KNOWN_MODULES:
        modules.setdefault(name, {"loaded": False, "refcount": 0, "load_seq": 0,
                                  "params": dict(DEFAULT_MODULE_PARAMS.get(name, {}))})
    for name, info in modules.items():
        missing = [dep for dep in MODULE_DEPENDS[name] if info["loaded"] and not modules[dep]["loaded"]]
        if missing:
            raise SimError("modules: %s needs %s loaded" % (name, ", ".join(missing)))
    return modules


def _resolve_user(user, where):
    """(uid, gid) to run as, or None to stay the current user."""
    if not user:
        return None
    import pwd  # only needed here

    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        raise SimError("%s: no user named %r on this machine" % (where, user))
    if entry.pw_uid == os.geteuid():
        return None
    if os.geteuid() != 0:
        raise SimError("%s: running as user %r needs root (this runs as uid %d)" % (where, user, os.geteuid()))
    return [entry.pw_uid, entry.pw_gid]


def _holder_specs(state, root, holders):
    specs = []
    count = len(state["gpus"])
    for number, holder in enumerate(holders or []):
        where = "holders[%d]" % number
        kind = holder.get("kind") or "fd"
        if kind not in HOLDER_KINDS:
            raise SimError("%s.kind %r is not one of %s" % (where, kind, ", ".join(HOLDER_KINDS)))
        gpus = holder.get("gpus")
        gpus = [0] if gpus is None else [int(g) for g in gpus]
        for index in gpus:
            if index < 0 or index >= count:
                raise SimError("%s.gpus: %r is not a GPU index of this node (0..%d)" % (where, index, count - 1))
        htype = holder.get("type") or "C"
        if htype not in HOLDER_TYPES:
            raise SimError("%s.type %r is not one of %s" % (where, htype, ", ".join(HOLDER_TYPES)))
        memory = holder.get("memory_mib")
        memory = 1024 if memory is None else int(memory)
        if memory < 0:
            raise SimError("%s.memory_mib %r is negative" % (where, memory))
        name = holder.get("name") or "python3"
        devices = [gpu_device(root, index) for index in gpus]
        if not gpus:
            devices = [dev_path(root, "nvidiactl")]  # an NVML client: the control device alone
        elif kind != "mmap":
            devices += [dev_path(root, "nvidiactl"), dev_path(root, "nvidia-uvm")]
        specs.append({"role": "holder", "kind": kind, "name": name, "gpus": gpus, "memory_mib": memory,
                      "type": htype, "user": holder.get("user"), "run_as": _resolve_user(holder.get("user"), where),
                      "devices": devices, "parent_name": holder.get("parent_name") or "job-launcher"})
    return specs


def _service_specs(root, state, name):
    """Spawn specs for one service (display-manager brings its Xorg along)."""
    meta = SERVICES[name]
    devices = [dev_path(root, "nvidiactl")]
    if name == "nvidia-persistenced":
        devices = [gpu_device(root, gpu["index"]) for gpu in state["gpus"]] + devices
    specs = [{"role": "service", "service": name, "kind": "fd", "name": meta["process"], "devices": devices}]
    if name == "display-manager" and state["gpus"]:
        xorg_devices = [gpu_device(root, 0), dev_path(root, "nvidiactl"), dev_path(root, "nvidia-modeset"),
                        dev_path(root, "dri/card1")]
        specs.append({"role": "service_child", "service": name, "kind": "fd", "name": XORG_NAME, "devices": xorg_devices,
                      "gpus": [0], "memory_mib": XORG_MEMORY_MIB, "type": "G"})
    return specs


def create_node(root, spec):
    """Build a node under `root` from a gpu_sim spec (the module's options); return its state.

    Raises SimError for bad input (naming the option) or when `root` already holds a node.
    """
    root = os.path.abspath(root)
    if os.path.exists(state_path(root)):
        raise SimError("root %s already holds a simulated node" % root)
    state = _initial_state(root, spec)
    _make_tree(root, state)
    append_kernel_log(root, list(spec.get("kernel_log") or []) + _xid_lines(state, spec.get("xid")))
    save_state(root, state)
    try:
        _start_supervisor(root, state)
        holder_specs = _holder_specs(state, root, spec.get("holders"))
        for service in spec.get("services") or []:
            _start_service(root, service)
        for holder_spec in holder_specs:
            _record_holder(root, holder_spec, spawn(root, holder_spec))
    except Exception:
        destroy_node(root)
        raise
    return load_state(root)


def validate_spec(root, spec):
    """Raise SimError, naming the option and the value, for a spec create_node would refuse; touches nothing."""
    _initial_state(os.path.abspath(root), spec)


def _initial_state(root, spec):
    gpu_specs = spec.get("gpus")
    if gpu_specs is None:
        gpu_specs = [{}]
    gpus = [_build_gpu(root, index, dict(item or {})) for index, item in enumerate(gpu_specs)]
    _check_gpus(gpus)
    for service in spec.get("services") or []:
        if service not in SERVICES:
            raise SimError("services: %r is not one of %s" % (service, ", ".join(sorted(SERVICES))))
    modules = spec.get("modules")
    state = {
        "version": STATE_VERSION,
        "spec_hash": spec.get("spec_hash"),
        "python": spec.get("python") or sys.executable,
        "python_home": spec.get("python_home") or getattr(sys, "base_exec_prefix", sys.exec_prefix),
        "driver_version": spec.get("driver_version") or "590.48.01",
        "cuda_version": spec.get("cuda_version") or "13.1",
        "nvml_hang": bool(spec.get("nvml_hang", False)),
        "reset_requires_nvlink_peers": bool(spec.get("reset_requires_nvlink_peers", False)),
        "default_target": "graphical.target",
        "active_target": "graphical.target",
        "gpus": gpus,
        "holders": [],
        "services": dict((name, {"unit": meta["unit"], "aliases": meta["aliases"], "pid": 0, "start_time": None,
                                 "active": False, "enabled": False, "children": []}) for name, meta in SERVICES.items()),
        "modules": _build_modules(DEFAULT_MODULES if modules is None else modules),
        "processes": [],
    }
    for name in spec.get("pinned_modules") or []:
        if not state["modules"].get(name, {}).get("loaded"):
            raise SimError("pinned_modules: %r is not among the loaded modules" % (name,))
        state["modules"][name]["refcount"] += 1  # a user outside the simulation holds it
    _holder_specs(state, root, spec.get("holders"))  # validate before anything is created
    for item in spec.get("xid") or []:
        if int(item.get("gpu", 0)) >= len(gpus):
            raise SimError("xid: gpu %r is not a GPU index of this node" % item.get("gpu"))
    return state


def _xid_lines(state, items):
    return [xid_line(state, item["xid"], int(item.get("gpu", 0)), item.get("pid"), item.get("process_name"), item.get("text"))
            for item in items or []]


def _make_tree(root, state):
    for sub in ("dev/dri", "bin", "lib", "run/spawn", "run/specs", "run/ready", "var", "sys/module"):
        os.makedirs(os.path.join(root, sub), exist_ok=True)
    names = ["nvidia%d" % gpu["index"] for gpu in state["gpus"]] + list(CONTROL_DEVICES)
    for name in names:
        with open(dev_path(root, name), "wb") as handle:
            handle.write(b"\0" * DEVICE_SIZE)
        os.chmod(dev_path(root, name), 0o666)
    os.chmod(root, 0o755)
    # Holders that run as another user report back here after dropping privileges: sticky and open, like /tmp.
    os.chmod(os.path.join(root, "run", "ready"), 0o1777)
    for name, info in state["modules"].items():
        write_sys_module(root, name, info)
    open(os.path.join(root, "kernel.log"), "a").close()
    _install_code(root)


def _module_source(filename):
    """The text of a sibling module_utils file (works inside AnsiballZ's zip too)."""
    import pkgutil  # only needed here

    package = __name__.rpartition(".")[0]
    if package:
        data = pkgutil.get_data(package, filename)
        if data is not None:
            return data
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), filename), "rb") as handle:
        return handle.read()


TOOL_SCRIPT = """import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "lib"))

import _sim_tools  # noqa: E402

sys.exit(_sim_tools.main(os.path.basename(__file__), sys.argv[1:], ROOT))
"""
TOOL_NAMES = ("nvidia-smi", "modprobe", "lsmod", "systemctl")


def _install_code(root):
    for filename in ("_sim_state.py", "_sim_node.py", "_sim_tools.py", "_sim_nvml.py"):
        with open(os.path.join(root, "lib", filename), "wb") as handle:
            handle.write(_module_source(filename))
    for tool in TOOL_NAMES:
        path = os.path.join(root, "bin", tool)
        with open(path, "w") as handle:
            # -SE: the tools need only the standard library; no site-packages scan, no PYTHON* variables.
            handle.write("#!%s -SE\n" % sys.executable + TOOL_SCRIPT)
        os.chmod(path, 0o755)


# ---------------------------------------------------------------- spawning through the supervisor

def _lib_program(root):
    return os.path.join(root, "lib", "_sim_node.py")


def _launch(state, argv0, args):
    """Start our program detached: own session, stdio on /dev/null, argv[0] (the cmdline) set to argv0.

    With an argv[0] that is not its path, Python cannot find its standard library by itself: PYTHONHOME
    tells it, and -S keeps site-packages out (the programs need only the standard library).
    """
    import subprocess  # only needed here

    env = dict((key, value) for key, value in os.environ.items() if not key.startswith("PYTHON"))
    env["PYTHONHOME"] = state["python_home"]
    with open(os.devnull, "r+b") as devnull:
        return subprocess.Popen([argv0, "-S", "-s"] + args, executable=state["python"], stdin=devnull, stdout=devnull,
                                stderr=devnull, close_fds=True, start_new_session=True, cwd="/", env=env)


def _start_supervisor(root, state):
    proc = _launch(state, SUPERVISOR_NAME, [_lib_program(root), "supervisor", root])
    deadline = time.monotonic() + SPAWN_TIMEOUT
    ready = os.path.join(root, "run", "supervisor.json")
    while not os.path.exists(ready):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SimError("the node supervisor did not start (exit %s)" % proc.poll())
        time.sleep(0.02)
    with open(ready) as handle:
        info = json.load(handle)

    def record(st):
        st["supervisor"] = info
        st["processes"].append({"pid": info["pid"], "start_time": info["start_time"], "role": "supervisor"})

    update_state(root, record)


def spawn(root, spec):
    """Ask the supervisor to start one process from `spec`; wait until it holds what it should.

    Returns the holder program's ready report: {"pid", "start_time", "parent_pid", "parent_start_time"}.
    """
    request_id = "%d-%d-%d" % (os.getpid(), int(time.time() * 1e6), threading.get_ident() % 100000)
    spec = dict(spec, id=request_id, root=root)
    request = os.path.join(root, "run", "spawn", request_id + ".json")
    _write_json_atomic(request, spec)
    ready = os.path.join(root, "run", "ready", request_id + ".json")
    failed = os.path.join(root, "run", "ready", request_id + ".error")
    deadline = time.monotonic() + SPAWN_TIMEOUT
    while time.monotonic() < deadline:
        if os.path.exists(ready):
            with open(ready) as handle:
                return json.load(handle)
        if os.path.exists(failed):
            with open(failed) as handle:
                raise SimError("%s %r did not start: %s" % (spec.get("role"), spec.get("name"), handle.read().strip()))
        time.sleep(0.02)
    raise SimError("%s %r did not report ready within %.0f s" % (spec.get("role"), spec.get("name"), SPAWN_TIMEOUT))


def _record_holder(root, spec, report):
    holder = {"pid": report["pid"], "start_time": report["start_time"], "kind": spec["kind"], "name": spec["name"],
              "type": spec.get("type", "C"), "user": spec.get("user"),
              "gpus": dict((str(index), int(spec.get("memory_mib", 0))) for index in spec.get("gpus", [])),
              "parent_pid": report.get("parent_pid"), "parent_start_time": report.get("parent_start_time"),
              "role": spec["role"], "service": spec.get("service")}

    def record(state):
        state["holders"].append(holder)
        state["processes"].append({"pid": holder["pid"], "start_time": holder["start_time"], "role": spec["role"]})
        if report.get("parent_pid"):
            state["processes"].append({"pid": report["parent_pid"], "start_time": report["parent_start_time"],
                                       "role": "parent"})

    update_state(root, record)
    return holder


def _start_service(root, name):
    """Start a service's real processes and mark it active; a running one is left as it is."""
    state = load_state(root)
    current = state["services"][name]
    if current["active"] and process_exists(current["pid"], current["start_time"]):
        return current
    main = None
    children = []
    for spec in _service_specs(root, state, name):
        report = spawn(root, spec)
        if spec["role"] == "service":
            main = report
        else:
            children.append(_record_holder(root, spec, report))

    def record(st):
        service = st["services"][name]
        service.update({"pid": main["pid"], "start_time": main["start_time"], "active": True, "enabled": True,
                        "children": [{"pid": c["pid"], "start_time": c["start_time"], "name": c["name"]} for c in children]})
        st["processes"].append({"pid": main["pid"], "start_time": main["start_time"], "role": "service"})

    return update_state(root, record)["services"][name]


def start_service(root, name):
    return _start_service(root, name)


def stop_service(root, name, timeout=STOP_TIMEOUT):
    """SIGTERM the service's processes (verified by start time), wait, SIGKILL what is left; mark it inactive."""
    state = load_state(root)
    service = state["services"][name]
    targets = [(service["pid"], service["start_time"])] + [(c["pid"], c["start_time"]) for c in service.get("children", [])]
    terminate([t for t in targets if t[0]], timeout)

    def record(st):
        st["services"][name].update({"pid": 0, "start_time": None, "active": False, "children": []})

    update_state(root, record)


def terminate(targets, timeout):
    """SIGTERM each (pid, start_time) that is still that process, wait up to timeout, then SIGKILL."""
    alive = [(pid, st) for pid, st in targets if process_exists(pid, st)]
    for pid, _st in alive:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = [(pid, st) for pid, st in alive if _running(pid, st)]
        if not alive:
            return
        time.sleep(0.02)
    for pid, _st in alive:
        _signal(pid, signal.SIGKILL)
    _wait_gone(alive, timeout)


def _running(pid, start_time):
    """Exists and is not a zombie (a stopped service's zombie is the supervisor's to reap)."""
    stat = proc_stat(pid)
    return bool(stat) and stat[1] == start_time and stat[0] not in ("Z", "X")


def _wait_gone(targets, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(_running(pid, st) for pid, st in targets):
        time.sleep(0.02)


def _signal(pid, sig):
    try:
        os.kill(pid, sig)
    except OSError:
        pass


# ---------------------------------------------------------------- tearing a node down

def destroy_node(root):
    """SIGKILL every process the node started (verified by start time), reap what we can, remove root.

    Returns False when there was nothing at root.
    """
    root = os.path.abspath(root)
    if not os.path.exists(root):
        return False
    try:
        state = load_state(root)
    except SimError:
        state = {"processes": []}
    records = list(state.get("processes", [])) + _ready_reports(root)
    others = [(p["pid"], p["start_time"]) for p in records if p.get("role") != "supervisor" and p.get("pid")]
    supervisors = [(p["pid"], p["start_time"]) for p in records if p.get("role") == "supervisor"]
    for pid, st in others:
        if process_exists(pid, st):
            _signal(pid, signal.SIGKILL)
    _wait_gone(others, STOP_TIMEOUT)
    # The supervisor reaps the killed ones (its children and the orphans); give it a moment.
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline and any(process_exists(pid, st) for pid, st in others):
        time.sleep(0.02)
    for pid, st in supervisors:
        if process_exists(pid, st):
            _signal(pid, signal.SIGKILL)
    for pid, st in others + supervisors:
        _reap(pid, st)
    shutil.rmtree(root, ignore_errors=True)
    return True


def _ready_reports(root):
    reports = []
    directory = os.path.join(root, "run", "ready")
    try:
        names = os.listdir(directory)
    except OSError:
        return reports
    for name in names:
        if not name.endswith(".json"):
            continue
        try:
            with open(os.path.join(directory, name)) as handle:
                report = json.load(handle)
        except (IOError, OSError, ValueError):
            continue
        reports.append({"pid": report.get("pid"), "start_time": report.get("start_time"), "role": "holder"})
        if report.get("parent_pid"):
            reports.append({"pid": report["parent_pid"], "start_time": report.get("parent_start_time"), "role": "parent"})
    supervisor = os.path.join(root, "run", "supervisor.json")
    if os.path.exists(supervisor):
        try:
            with open(supervisor) as handle:
                info = json.load(handle)
            reports.append({"pid": info["pid"], "start_time": info["start_time"], "role": "supervisor"})
        except (IOError, OSError, ValueError, KeyError):
            pass
    return reports


def _reap(pid, start_time):
    """Collect a killed child of ours, if it is one (the supervisor is the creator's child)."""
    deadline = time.monotonic() + 2.0
    while True:
        try:
            done, _status = os.waitpid(pid, os.WNOHANG)
        except OSError:
            return
        if done or time.monotonic() > deadline or not process_exists(pid, start_time):
            return
        time.sleep(0.02)


# ---------------------------------------------------------------- the programs the processes run

def _set_process_name(name):
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_NAME, ctypes.c_char_p(name.encode("utf-8", "replace")[:15]), 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _own_identity():
    return {"pid": os.getpid(), "start_time": start_time_of(os.getpid())}


_HELD = []  # what a holder program keeps open or mapped until it is killed


def _sleep_forever(*held):
    """Sleep until killed, keeping `held` (fds, mappings) referenced all along."""
    _HELD.extend(held)
    while True:
        time.sleep(3600)


def _open_devices(paths):
    return [os.open(path, os.O_RDWR) for path in paths]


def _report(spec, data):
    path = os.path.join(spec["root"], "run", "ready", spec["id"] + ".json")
    _write_json_atomic(path, data)


def _wait_for_zombie(pid):
    while True:
        stat = proc_stat(pid)
        if stat is None or stat[0] in ("Z", "X"):
            return
        time.sleep(0.01)


def run_holder(spec_path):
    """The holder/service program: hold the devices the way spec['kind'] says, report, then wait."""
    with open(spec_path) as handle:
        spec = json.load(handle)
    _set_process_name(spec["name"])
    if spec.get("run_as"):
        uid, gid = spec["run_as"]
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)
    kind = spec.get("kind", "fd")
    if kind in ("ignores_term", "leader_exited_ignores_term"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # process-wide: the threads of the group share it
    if kind == "mmap":
        _hold_mapped(spec)
    elif kind == "inherited":
        _hold_inherited(spec)
    elif kind == "zombie":
        _hold_as_zombie(spec)
    elif kind in ("leader_exited", "leader_exited_ignores_term"):
        _hold_in_thread(spec)
    else:
        fds = _open_devices(spec["devices"])
        _report(spec, _own_identity())
        _sleep_forever(fds)


def _hold_mapped(spec):
    """Map each device and close its fd: only /proc/<pid>/maps shows the hold.

    libc's mmap, not Python's mmap module: that one keeps a dup of the fd open.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    maps = []
    for path in spec["devices"]:
        fd = os.open(path, os.O_RDWR)
        address = libc.mmap(None, DEVICE_SIZE, 0x1 | 0x2, 0x01, fd, 0)  # PROT_READ|PROT_WRITE, MAP_SHARED
        os.close(fd)
        if address in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), "mmap of %s failed" % path)
        maps.append(address)
    _report(spec, _own_identity())
    _sleep_forever(maps)


def _hold_inherited(spec):
    fds = _open_devices(spec["devices"])
    parent = _own_identity()
    child = os.fork()
    if child:
        os._exit(0)  # the parent leaves; the child keeps the inherited fds
    report = _own_identity()
    report.update({"opened_by_pid": parent["pid"], "opened_by_start_time": parent["start_time"]})
    _report(spec, report)
    _sleep_forever(fds)


def _hold_as_zombie(spec):
    _set_process_name(spec.get("parent_name") or "job-launcher")
    child = os.fork()
    if child == 0:
        _set_process_name(spec["name"])
        _open_devices(spec["devices"])
        os._exit(0)  # exits while its parent never waits: a zombie
    _wait_for_zombie(child)
    parent = _own_identity()
    _report(spec, {"pid": child, "start_time": start_time_of(child), "parent_pid": parent["pid"],
                   "parent_start_time": parent["start_time"]})
    _sleep_forever()


def _hold_in_thread(spec):
    opened = threading.Event()
    holder = threading.Thread(target=_thread_holds, args=(spec, opened))
    holder.daemon = False
    holder.start()
    opened.wait()
    libc = ctypes.CDLL(None)
    libc.pthread_exit(None)  # the leader exits; the thread keeps the fds


def _thread_holds(spec, opened):
    fds = _open_devices(spec["devices"])
    identity = _own_identity()
    opened.set()
    _wait_for_zombie(identity["pid"])  # the leader shows as Z once it has exited
    _report(spec, identity)
    _sleep_forever(fds)


def run_supervisor(root):
    """The node's init: a child subreaper that starts what run/spawn asks for and reaps whatever dies."""
    _set_process_name(SUPERVISOR_NAME)
    libc = ctypes.CDLL(None)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    launcher = load_state(root)  # our own sys.executable is unreliable: argv[0] is our name
    spawn_dir = os.path.join(root, "run", "spawn")
    children = []
    _write_json_atomic(os.path.join(root, "run", "supervisor.json"), _own_identity())
    while os.path.isdir(spawn_dir):
        _reap_all()
        for name in sorted(os.listdir(spawn_dir)):
            if name.endswith(".json"):
                children.append(_start_requested(root, launcher, os.path.join(spawn_dir, name)))
        time.sleep(0.02)
    # The node was removed without destroy_node: take what we started with us.
    for pid, st in children:
        if pid and process_exists(pid, st):
            _signal(pid, signal.SIGKILL)


def _reap_all():
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except OSError as exc:
            if exc.errno == errno.ECHILD:
                return
            raise
        if pid == 0:
            return


def _start_requested(root, launcher, request):
    spec_path = os.path.join(root, "run", "specs", os.path.basename(request))
    try:
        os.rename(request, spec_path)
        with open(spec_path) as handle:
            spec = json.load(handle)
        argv0 = spec.get("parent_name") if spec.get("kind") == "zombie" else spec["name"]
        proc = _launch(launcher, argv0 or spec["name"], [_lib_program(root), "holder", spec_path])
        return proc.pid, start_time_of(proc.pid)
    except Exception as exc:  # pylint: disable=broad-except
        error = os.path.join(root, "run", "ready", os.path.basename(request)[:-5] + ".error")
        with open(error, "w") as handle:
            handle.write("%s: %s\n" % (type(exc).__name__, exc))
        return 0, None


def main(argv):
    if len(argv) == 3 and argv[1] == "supervisor":
        run_supervisor(argv[2])
    elif len(argv) == 3 and argv[1] == "holder":
        try:
            run_holder(argv[2])
        except Exception as exc:  # pylint: disable=broad-except
            with open(argv[2]) as handle:
                spec = json.load(handle)
            error = os.path.join(spec["root"], "run", "ready", spec["id"] + ".error")
            with open(error, "w") as handle:
                handle.write("%s: %s\n" % (type(exc).__name__, exc))
            return 1
    else:
        sys.stderr.write("usage: _sim_node.py supervisor ROOT | holder SPEC.json\n")
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
