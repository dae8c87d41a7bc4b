# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Building a simulated GPU node from a gpu_sim spec, and destroying it.

A node lives under one directory (the root):
  state.json   the only truth the simulated NVML and tools read and write (schema in docs/simulation.md)
  state.lock   flock'ed around every read-modify-write (mode 0600, a bounded wait: _sim_state.node_lock)
  dev/         regular 4096-byte files standing in for /dev/nvidia*, /dev/dri/*
  sys/         module/: loaded modules and their parameters, like /sys/module; class/drm/: the dri nodes' vendor
  proc/modules the loaded modules, like /proc/modules
  bin/         nvidia-smi, modprobe, lsmod, systemctl, and dcgmi when built with dcgm (thin scripts calling
               _sim_tools.main)
  lib/         the simulation's run-time code (LIB_FILES), copied as plain modules: the tools, the simulated
               libnvidia-ml, the programs the node's processes run, and copies of the real /proc scanner
               and PCI bus-id parser they use
  run/         spawn requests, holder specs, ready reports
  kernel.log   the kernel ring buffer
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import sys
import time
import uuid

from ansible_collections.gpuops.remediation.plugins.module_utils.kill._freezer import parse_mountinfo
from ansible_collections.gpuops.remediation.plugins.module_utils._node import GPU_COMMANDS
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._pci import normalize_bus_id
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._device_nodes import NVIDIA_PCI_VENDOR, SIM_REGISTRY
from ansible_collections.gpuops.remediation.plugins.module_utils.simulation import _sim_mig as sim_mig
from ansible_collections.gpuops.remediation.plugins.module_utils.simulation._sim_tools import _publish_mig as publish_mig
from ansible_collections.gpuops.remediation.plugins.module_utils.simulation._sim_processes import (
    SERVICES, STOP_TIMEOUT, record_holder, send_signal, spawn, start_service, start_supervisor, wait_gone)
from ansible_collections.gpuops.remediation.plugins.module_utils.simulation._sim_rules import (
    DEFAULT_MODULES, KNOWN_MODULES, MODULE_DEPENDS, append_kernel_log, clear_gpu_after_reset, write_module_views, xid_line)
from ansible_collections.gpuops.remediation.plugins.module_utils.simulation._sim_mig_write import mig_after_reset
from ansible_collections.gpuops.remediation.plugins.module_utils.simulation._sim_state import (
    DEVICE_SIZE, SimError, dev_path, gpu_device, load_state, process_exists, state_path, update_state, write_json_atomic,
    write_text_atomic)

STATE_VERSION = 1
HOLDER_KINDS = ("fd", "mmap", "inherited", "zombie", "ignores_term", "leader_exited", "leader_exited_ignores_term",
                "term_checkpoint", "blocks_term", "stopped_checkpoint", "pidns_init", "pidns_init_checkpoint", "vfork_parent",
                "second_node", "mount_namespace", "own_fd_table", "o_path")
HOLDER_TYPES = ("C", "G", "C+G")
FREEZE_WHEN = ("never", "at_start", "on_term")
FREEZABLE_KINDS = ("fd", "ignores_term", "blocks_term", "term_checkpoint")
COMPUTE_MODES = ("Default", "Exclusive_Thread", "Prohibited", "Exclusive_Process")
RECOVERY_ACTIONS = ("none", "reset", "reboot", "drain_p2p", "drain_and_reset")
DEFAULT_MODULE_PARAMS = {"nvidia_drm": {"modeset": "Y"}}
CONTROL_DEVICES = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset", "dri/card1", "dri/renderD128")
DEFAULT_GPU_NAME = "NVIDIA H100 80GB HBM3"
DEFAULT_GPU_MEMORY_MIB = 81559
DEFAULT_GPU_RESERVED_MIB = 552
DEFAULT_BUS_NUMBERS = (0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB)
# What the node's lib/ holds (paths under module_utils; copied flat): everything its tools, its NVML and its processes import, and nothing else.
LIB_FILES = ("simulation/_sim_state.py", "simulation/_sim_rules.py", "simulation/_sim_processes.py", "simulation/_sim_programs.py",
             "simulation/_sim_tools.py", "simulation/_sim_dcgmi.py", "simulation/_sim_mig.py", "simulation/_sim_mig_write.py",
             "simulation/_sim_nvml.py",
             "probes/_procscan.py", "probes/_pci.py",
             "probes/_proc_files.py", "probes/_device_nodes.py", "probes/_threads.py", "probes/_process.py",
             "kill/_freezer.py", "_safe_files.py", "_lock.py")
# The simulated NVML library and what it imports: every module that probes the GPUs loads them from lib/ in its probe
# child, where a real node loads the compiled libnvidia-ml.so.
NVML_LIBRARY_FILES = ("_sim_nvml.py", "_sim_mig.py", "_sim_state.py", "_pci.py", "_process.py", "_proc_files.py")
DIAG_RESULTS = ("pass", "warn", "fail")
# DCGM's command line, installed only on a node built with dcgm (a node without DCGM has no gate to pass).
DCGM_COMMANDS = ("dcgmi",)
LOGIND_COMMANDS = ("loginctl",)
TOOL_SCRIPT = """import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "lib"))

import _sim_tools  # noqa: E402

sys.exit(_sim_tools.main(os.path.basename(__file__), sys.argv[1:], ROOT))
"""


# ---------------------------------------------------------------- the state a spec describes

def _default_uuid(root, index):
    import hashlib  # only needed here

    digest = hashlib.sha1(("%s|%d" % (os.path.realpath(root), index)).encode()).hexdigest()
    return "GPU-%s-%s-%s-%s-%s" % (digest[:8], digest[8:12], digest[12:16], digest[16:20], digest[20:32])


def _default_bus_number(index):
    if index < len(DEFAULT_BUS_NUMBERS):
        return DEFAULT_BUS_NUMBERS[index]
    return 0xE0 + index - len(DEFAULT_BUS_NUMBERS)


def _bus_id(index, text):
    bus = normalize_bus_id(text)
    if bus is None:
        raise SimError("gpus[%d].pci_bus_id %r is not a PCI bus id like 00000000:18:00.0" % (index, text))
    return bus


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
    diag = spec.get("dcgm_diag") or "pass"
    if diag not in DIAG_RESULTS:
        raise SimError("gpus[%d].dcgm_diag %r is not one of %s" % (index, diag, ", ".join(DIAG_RESULTS)))
    gpu = {
        "index": index,
        "uuid": spec.get("uuid") or _default_uuid(root, index),
        "name": spec.get("name") or DEFAULT_GPU_NAME,
        "pci_bus_id": _bus_id(index, bus),
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
        "dcgm_diag": diag,
    }
    _build_mig_instances(gpu, spec.get("mig_instances") or [])
    return gpu


def _build_mig_instances(gpu, instances):
    """The GPU instances (each with its full compute instance) the scenario starts with, as nvidia-smi mig -cgi -C makes them."""
    where = "gpus[%d].mig_instances" % gpu["index"]
    if instances and not (gpu["mig_mode"] or {}).get("current"):
        raise SimError("%s needs gpus[%d].mig_mode: true" % (where, gpu["index"]))
    for number, item in enumerate(instances):
        item = item if isinstance(item, dict) else {"profile": item}
        try:
            profile = sim_mig.profile_by_name_or_id(gpu["name"], item.get("profile"))
            gi = sim_mig.create_gpu_instance(gpu, profile["id"])
        except sim_mig.MigError as exc:
            raise SimError("%s[%d]: profile %r on %s: %s" % (where, number, item.get("profile"), gpu["name"], exc)) from exc
        sim_mig.create_compute_instance(gpu, gi["id"])
        gi["ghost_mib"] = int(item.get("ghost_mib") or 0)


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
        if kind == "mount_namespace" and os.geteuid() != 0:
            raise SimError("%s.kind mount_namespace needs root (a mount namespace of its own); this runs as uid %d"
                           % (where, os.geteuid()))
        devices = [gpu_device(root, index) for index in gpus]
        if not gpus:
            devices = [dev_path(root, "nvidiactl")]  # an NVML client: the control device alone
        elif kind != "mmap":
            devices += [dev_path(root, "nvidiactl"), dev_path(root, "nvidia-uvm")]
        parent_gpus = [int(g) for g in holder.get("parent_gpus") or []]
        for index in parent_gpus:
            if kind != "zombie" or index < 0 or index >= count:
                raise SimError("%s.parent_gpus: %r is not a GPU index of this node (0..%d) held by a zombie's parent" % (
                    where, index, count - 1))
        parent_devices = [gpu_device(root, index) for index in parent_gpus]
        if parent_devices:
            parent_devices += [dev_path(root, "nvidiactl"), dev_path(root, "nvidia-uvm")]
        mig = _holder_instance(state, root, holder, gpus, where)
        if mig:
            devices += [dev_path(root, "nvidia-caps/nvidia-cap%d" % sim_mig.cap_minor(gpus[0], gi, ci)) for gi, ci in ((mig[0], None), mig)]
        if kind == "o_path":
            gpus, memory = [], 0  # it never opened a device: the driver knows nothing of it
        specs.append({"role": "holder", "kind": kind, "name": name, "gpus": gpus, "memory_mib": memory,
                      "type": htype, "user": holder.get("user"), "run_as": _resolve_user(holder.get("user"), where),
                      "devices": devices, "parent_name": holder.get("parent_name") or "job-launcher",
                      "parent_devices": parent_devices,
                      "cgroup": _unit_cgroup(state, root, holder, where) or _holder_cgroup(root, number, kind, holder, where),
                      "unit": holder.get("unit"), "unit_command": holder.get("unit_command"), "freeze": holder.get("freeze") or "never",
                      "running": bool(holder.get("running")), "mig": {str(gpus[0]): list(mig)} if mig else None})
    return specs


def _holder_instance(state, root, holder, gpus, where):
    """(GPU instance, compute instance 0) a holder runs in (holders[].mig_instance, on its first GPU), or None."""
    wanted = holder.get("mig_instance")
    if wanted is None:
        return None
    gpu = state["gpus"][gpus[0]] if gpus else None
    there = sorted(gi["id"] for gi in (gpu or {}).get("gpu_instances", []))
    if int(wanted) not in there:
        raise SimError("%s.mig_instance: %r is not a GPU instance of GPU %s (it has: %s)"
                       % (where, wanted, gpus[0] if gpus else None, ", ".join(str(gi) for gi in there) or "none"))
    return (int(wanted), 0)


def _holder_cgroup(root, number, kind, holder, where):
    """{"version", "dir"} of the cgroup of its own a holder with a freezer runs in, or None."""
    version = holder.get("freezer")
    if not version:
        if (holder.get("freeze") or "never") != "never":
            raise SimError("%s.freeze %r needs %s.freezer (v1 or v2)" % (where, holder["freeze"], where))
        return None
    if kind not in FREEZABLE_KINDS:
        raise SimError("%s.freezer: kind %s cannot run in a cgroup of its own (only %s)" % (where, kind, ", ".join(FREEZABLE_KINDS)))
    if os.geteuid() != 0:
        raise SimError("%s.freezer: a cgroup of its own needs root (this runs as uid %d)" % (where, os.geteuid()))
    with open("/proc/self/mountinfo") as handle:
        mounts = parse_mountinfo(handle.read())
    mount = mounts["v1"].get("freezer") if version == "v1" else mounts["v2"]
    if not mount:
        raise SimError("%s.freezer: this machine has no %s mounted" % (where, "v1 freezer" if version == "v1" else "cgroup v2"))
    tag = hashlib.sha256(os.path.abspath(root).encode("utf-8")).hexdigest()[:12]
    return {"version": version, "dir": os.path.join(mount[0], "gpuops-sim-%s-%d" % (tag, number))}


# The simulated init system's units: the states a unit may be in (ActiveState: SubState by default), and the commands of
# a start that may put a holder in the background (`systemctl show` lists each with its pid).
UNIT_STATES = {"active": "exited", "activating": "start", "reloading": "reload", "deactivating": "stop",
               "inactive": "dead", "failed": "failed"}
UNIT_COMMANDS = ("ExecStartPre", "ExecStart", "ExecStartPost")


def _units(spec):
    """{name: {"active", "sub", "result", "commands": []}} of the scenario's systemd units (gpu_sim `units`)."""
    units = {}
    for number, unit in enumerate(spec.get("units") or []):
        where = "units[%d]" % number
        name = unit.get("name") or ""
        if not name.endswith(".service") or "/" in name or not name.isprintable() or name.startswith(".") or " " in name:
            raise SimError("%s.name %r is not a service unit's name (NAME.service)" % (where, name))
        if name in units or any(name in (meta["unit"], *meta["aliases"]) for meta in SERVICES.values()):
            raise SimError("%s.name %r names a unit twice" % (where, name))
        active = unit.get("active_state") or "active"
        if active not in UNIT_STATES:
            raise SimError("%s.active_state %r is not one of %s" % (where, active, ", ".join(UNIT_STATES)))
        units[name] = {"active": active, "sub": unit.get("sub_state") or UNIT_STATES[active],
                       "result": unit.get("result") or "success", "commands": []}
    return units


def _unit_cgroup(state, root, holder, where):
    """{"version", "dir", "parents"} of the control group of the unit a holder runs in (holders[].unit), or None: a real
    cgroup in the hierarchy systemd names units in (root only), below a slice of this node's own."""
    unit, command = holder.get("unit"), holder.get("unit_command")
    if command and not unit:
        raise SimError("%s.unit_command %r needs %s.unit" % (where, command, where))
    if command and command not in UNIT_COMMANDS:
        raise SimError("%s.unit_command %r is not one of %s" % (where, command, ", ".join(UNIT_COMMANDS)))
    if not unit:
        return None
    if holder.get("freezer"):
        raise SimError("%s.unit: a holder with a freezer runs in a cgroup of its own, not in unit %s's" % (where, unit))
    if unit not in state["units"]:
        raise SimError("%s.unit %r is not one of the node's units (%s)" % (where, unit, ", ".join(sorted(state["units"])) or "none"))
    if holder.get("running"):
        raise SimError("%s.unit: a holder a unit's command put in the background is not running (its command exited)" % where)
    if os.geteuid() != 0:
        raise SimError("%s.unit: a unit's control group needs root (this runs as uid %d)" % (where, os.geteuid()))
    with open("/proc/self/mountinfo") as handle:
        mounts = parse_mountinfo(handle.read())
    mount = mounts["v1"].get("name=systemd") or mounts["v2"]
    if not mount:
        raise SimError("%s.unit: this machine has no cgroup hierarchy systemd names units in" % where)
    tag = hashlib.sha256(os.path.abspath(root).encode("utf-8")).hexdigest()[:12]
    system_slice = os.path.join(mount[0], "system.slice")
    slice_dir = os.path.join(system_slice, "gpuops-sim-%s.slice" % tag)
    # system.slice too when the node makes it (a machine without systemd), never a real machine's own
    return {"version": "unit", "dir": os.path.join(slice_dir, unit),
            "parents": [slice_dir] + ([] if os.path.isdir(system_slice) else [system_slice])}


def _release_cgroups(state):
    """Thaw the holders' cgroups (a v1 frozen task outlives SIGKILL until thawed): before the kill."""
    for holder in state.get("holders", []):
        cgroup = holder.get("cgroup")
        if cgroup and cgroup["version"] != "unit":
            name = "freezer.state" if cgroup["version"] == "v1" else "cgroup.freeze"
            try:
                with open(os.path.join(cgroup["dir"], name), "w") as handle:
                    handle.write("THAWED" if cgroup["version"] == "v1" else "0")
            except OSError:
                pass


def _remove_cgroups(state):
    for holder in state.get("holders", []):
        cgroup = holder.get("cgroup")
        deadline = time.monotonic() + 2.0
        for directory in ([cgroup["dir"]] + cgroup.get("parents", [])) if cgroup else []:
            while os.path.isdir(directory):
                try:
                    os.rmdir(directory)
                except OSError:
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.02)


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
        "dcgm": bool(spec.get("dcgm", False)),
        "dcgm_hang": bool(spec.get("dcgm_hang", False)),
        # logind's sessions {id: state}; None: the node has no logind (no loginctl).
        "logind": None if spec.get("logind_sessions") is None else dict(
            (str(session["id"]), session.get("state") or "active") for session in spec["logind_sessions"]),
        "reset_requires_nvlink_peers": bool(spec.get("reset_requires_nvlink_peers", False)),
        "default_target": "graphical.target",
        "active_target": "graphical.target",
        "gpus": gpus,
        "holders": [],
        # systemd units of the scenario's own, whose control groups holders run in: what systemctl show says of them.
        "units": _units(spec),
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


# ---------------------------------------------------------------- building

def validate_spec(root, spec):
    """Raise SimError, naming the option and the value, for a spec create_node would refuse; touches nothing."""
    _initial_state(os.path.abspath(root), spec)


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
    write_json_atomic(state_path(root), state)
    try:
        start_supervisor(root, state)
        holder_specs = _holder_specs(state, root, spec.get("holders"))
        for service in spec.get("services") or []:
            start_service(root, service)
        for holder_spec in holder_specs:
            record_holder(root, holder_spec, spawn(root, holder_spec))
    except Exception:
        destroy_node(root)
        raise
    return load_state(root)


def _make_tree(root, state):
    for sub in ("dev/dri", "bin", "lib", "run/spawn", "run/specs", "run/ready", "run/checkpoints", "var", "sys/module"):
        os.makedirs(os.path.join(root, sub), exist_ok=True)
    names = ["nvidia%d" % gpu["index"] for gpu in state["gpus"]] + list(CONTROL_DEVICES)
    for name in names:
        with open(dev_path(root, name), "wb") as handle:
            handle.write(b"\0" * DEVICE_SIZE)
        os.chmod(dev_path(root, name), 0o666)
        # The node's registry of its devices: a device file deleted from dev/ while held stays known, as the
        # kernel knows a device whose node was deleted.
        registered = os.path.join(root, "sys", SIM_REGISTRY, name)
        os.makedirs(os.path.dirname(registered), exist_ok=True)
        os.link(dev_path(root, name), registered)
    os.chmod(root, 0o755)
    # Holders that run as another user report back here after dropping privileges: sticky and open, like /tmp.
    os.chmod(os.path.join(root, "run", "ready"), 0o1777)
    os.chmod(os.path.join(root, "run", "checkpoints"), 0o1777)
    write_module_views(root, state)
    publish_mig(root, state)  # the capabilities files and nvidia-caps nodes of the scenario's MIG instances
    _write_drm_vendors(root)
    open(os.path.join(root, "kernel.log"), "a").close()
    _new_boot_id(root)
    _install_code(root, GPU_COMMANDS + (DCGM_COMMANDS if state["dcgm"] else ()) + (LOGIND_COMMANDS if state["logind"] is not None else ()))


def _write_drm_vendors(root):
    """<root>/sys/class/drm/<node>/device/vendor for each dri node: sysfs tells the scanner they are NVIDIA's."""
    for name in CONTROL_DEVICES:
        if name.startswith("dri/"):
            device_dir = os.path.join(root, "sys", "class", "drm", name[4:], "device")
            os.makedirs(device_dir, exist_ok=True)
            with open(os.path.join(device_dir, "vendor"), "w") as handle:
                handle.write(NVIDIA_PCI_VENDOR + "\n")


def _module_source(filename):
    """The text of a module_utils file, `filename` relative to module_utils (works inside AnsiballZ's zip too)."""
    import pkgutil  # only needed here

    package = __name__.rsplit(".", 2)[0] if __name__.count(".") >= 2 else ""
    if package:
        data = pkgutil.get_data(package, filename)
        if data is not None:
            return data
    with open(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), filename), "rb") as handle:
        return handle.read()


def _install_code(root, tools):
    for filename in LIB_FILES:
        with open(os.path.join(root, "lib", os.path.basename(filename)), "wb") as handle:
            handle.write(_module_source(filename))
    _compile_nvml_library(root)
    for tool in tools:
        path = os.path.join(root, "bin", tool)
        with open(path, "w") as handle:
            # -SE: the tools need only the standard library; no site-packages scan, no PYTHON* variables.
            handle.write("#!%s -SE\n" % sys.executable + TOOL_SCRIPT)
        os.chmod(path, 0o755)


def _compile_nvml_library(root):
    """Keep the simulated NVML library's bytecode in lib/__pycache__, so that loading it costs a snapshot what loading
    the real (compiled) library costs, not a compile of its source: a module's environment often has
    PYTHONDONTWRITEBYTECODE set (Python then compiles the source at every import and keeps nothing). The bytecode
    records its source's hash, not its modification second and size: a source edited after it, whatever its size and
    time, is what loads."""
    import py_compile  # only needed here

    for filename in NVML_LIBRARY_FILES:
        py_compile.compile(os.path.join(root, "lib", filename), doraise=True, invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH)


# ---------------------------------------------------------------- rebooting

def reboot_node(root):
    """What a reboot does to the node's GPUs (gpu_sim state=rebooted, the stand-in for ansible.builtin.reboot): each GPU
    is found on the bus again, without leaked memory or a pending recovery; MIG mode stays as it was (A100, H100 and H200
    keep it across a reboot) and a pending mode change takes effect; no GPU or compute instance is left; the kernel log
    starts empty. A reboot ends every process: this one refuses while a holder the node started still runs (a test
    ends it first), so that no simulated job outlives the reboot. Returns the state."""
    root = os.path.abspath(root)
    state = load_state(root)
    alive = [holder["pid"] for holder in state.get("holders", []) if process_exists(holder.get("pid"), holder.get("start_time"))]
    if alive:
        raise SimError("the simulated reboot ends no process: holders %s still run (end them first)" % ", ".join(str(pid) for pid in alive))

    def rebooted(state):
        for gpu in state["gpus"]:
            gpu["lost"] = False
            clear_gpu_after_reset(gpu)
            mig_after_reset(gpu)
        state["reboots"] = state.get("reboots", 0) + 1
        publish_mig(root, state)

    state = update_state(root, rebooted)
    with open(os.path.join(root, "kernel.log"), "w"):
        pass
    _new_boot_id(root)
    return state


def _new_boot_id(root):
    """<root>/boot_id, as the kernel's /proc/sys/kernel/random/boot_id: a new random UUID at every (simulated) boot."""
    write_text_atomic(os.path.join(root, "boot_id"), "%s\n" % uuid.uuid4())


# ---------------------------------------------------------------- destroying

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
    _release_cgroups(state)
    records = list(state.get("processes", [])) + _ready_reports(root)
    others = [(p["pid"], p["start_time"]) for p in records if p.get("role") != "supervisor" and p.get("pid")]
    supervisors = [(p["pid"], p["start_time"]) for p in records if p.get("role") == "supervisor"]
    for pid, st in others:
        if process_exists(pid, st):
            send_signal(pid, signal.SIGKILL)
    wait_gone(others, STOP_TIMEOUT)
    # The supervisor reaps the killed ones (its children and the orphans); give it a moment.
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline and any(process_exists(pid, st) for pid, st in others):
        time.sleep(0.02)
    for pid, st in supervisors:
        if process_exists(pid, st):
            send_signal(pid, signal.SIGKILL)
    for pid, st in others + supervisors:
        _reap(pid, st)
    _remove_cgroups(state)
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
