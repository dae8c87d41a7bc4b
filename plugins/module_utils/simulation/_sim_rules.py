# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rules a simulated GPU node's kernel keeps: who uses its devices, what blocks a reset, module refcounts,
the kernel's views of its modules (/proc/modules, /sys/module) and its log lines.

Who holds a device is read with the real /proc scanner (_procscan.scan_holders, copied into the node's lib/
with the simulation): the simulation keeps no scanner of its own.
"""

from __future__ import annotations

import os
import shutil
import time

try:
    from ansible_collections.gpuops.remediation.plugins.module_utils.probes._procscan import scan_holders
    from ansible_collections.gpuops.remediation.plugins.module_utils.simulation._sim_state import find_gpu, live_holders
except ImportError:  # running from <root>/lib as plain modules
    from _procscan import scan_holders  # type: ignore[no-redef] # pylint: disable=import-error
    from _sim_state import find_gpu, live_holders  # type: ignore[no-redef] # pylint: disable=import-error

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


# ---------------------------------------------------------------- who uses the devices

def device_users(root):
    """{pid: set of device paths} for every process holding a device file under <root>/dev open or mapped.

    The real scanner's answer: threads are looked at too (a process whose leader exited keeps its files
    through its live threads).
    """
    holders = scan_holders(os.path.join(root, "dev"), sys_dir=os.path.join(root, "sys"))
    return dict((pid, set(holder["devices"])) for pid, holder in holders.items())


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


def clear_gpu_after_reset(gpu):
    gpu["ghost_mib"] = 0
    gpu["recovery_action"] = "none"


# ---------------------------------------------------------------- kernel modules

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


def write_module_views(root, state):
    """The kernel's views of the modules, rewritten after every change of their load state."""
    for name, info in state["modules"].items():
        _write_sys_module(root, name, info)
    _write_proc_modules(root, state)


def _write_sys_module(root, name, info):
    """Mirror a module's load state into <root>/sys/module/<name>/parameters."""
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


def _write_proc_modules(root, state):
    """<root>/proc/modules in the kernel's format.

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


# ---------------------------------------------------------------- the kernel log

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
