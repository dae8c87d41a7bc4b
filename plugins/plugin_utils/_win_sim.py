# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulated Windows GPU node, on the controller: a state file under its root, and the answers of the tools.

Reached only through _win_node.windows_node (the controller side's one switch, the host variable
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
"""

from __future__ import annotations

import base64
import codecs
import contextlib
import copy
import fcntl
import json
import os
import time

from ansible_collections.gpuops.remediation.plugins.module_utils import _journal
from ansible_collections.gpuops.remediation.plugins.plugin_utils import _win_counters, _win_processes, _win_wsl

STATE_KIND = "gpuops-windows-sim"
MIB = 1024 * 1024
FIRST_PID = 1000
VM_NAME = "vmmemWSL"
# What taskkill says of the processes Windows marks critical (ending one bugchecks the host).
CRITICAL_NAMES = frozenset(("csrss", "wininit", "smss", "services", "lsass", "winlogon"))
_BASE_PROCESSES = (
    # name, session, user, image path, parent name
    ("System", 0, "NT AUTHORITY\\SYSTEM", None, None),
    ("smss.exe", 0, "NT AUTHORITY\\SYSTEM", "C:\\Windows\\System32\\smss.exe", "System"),
    ("csrss.exe", 0, "NT AUTHORITY\\SYSTEM", "C:\\Windows\\System32\\csrss.exe", None),
    ("wininit.exe", 0, "NT AUTHORITY\\SYSTEM", "C:\\Windows\\System32\\wininit.exe", None),
    ("services.exe", 0, "NT AUTHORITY\\SYSTEM", "C:\\Windows\\System32\\services.exe", "wininit.exe"),
    ("lsass.exe", 0, "NT AUTHORITY\\SYSTEM", "C:\\Windows\\System32\\lsass.exe", "wininit.exe"),
)
_SESSION_PROCESSES = (
    ("csrss.exe", "NT AUTHORITY\\SYSTEM", "C:\\Windows\\System32\\csrss.exe"),
    ("winlogon.exe", "NT AUTHORITY\\SYSTEM", "C:\\Windows\\System32\\winlogon.exe"),
    ("dwm.exe", "Window Manager\\DWM-%(id)d", "C:\\Windows\\System32\\dwm.exe"),
    ("explorer.exe", "%(host)s\\%(user)s", "C:\\Windows\\explorer.exe"),
)
DEFAULT_GPU = {"name": "NVIDIA GeForce RTX 2080 SUPER", "memory_mib": 8192, "reserved_mib": 205, "driver_model": "WDDM",
               "ghost_mib": 0, "recovery_action": "None", "device_id": "1E81", "restart_needs_reboot": False}
DWM_MIB = 128
# The integrated GPU a scenario can add (integrated_gpu): another vendor's adapter, in the registry and pnputil, never in
# nvidia-smi; its LUID's memory is never an NVIDIA GPU's.
INTEGRATED_GPU = {"name": "Intel(R) UHD Graphics 770", "vendor_id": 0x8086, "device_id": "4680", "luid": "0x00000000_0x0000b1e5",
                  "pci_bus_id": "00000000:00:02.0", "registry_key": "{5e1cb1e5-9e4f-11ee-8c90-0242ac120002}",
                  "instance_id": "PCI\\VEN_8086&DEV_4680&SUBSYS_7D251462&REV_0C\\3&11583659&0&10", "manufacturer": "Intel Corporation"}
# The virtual display a scenario can add (virtual_display): an indirect display driver's adapter, as the captured
# pnputil block shows it (ROOT\DISPLAY\0000); not on the PCI bus, so Get-PnpDeviceProperty gives it no BusNumber or
# Address, and not in the registry's DirectX adapters here.
VIRTUAL_DISPLAY = {"name": "IddSampleDriver Device HDR", "instance_id": "ROOT\\DISPLAY\\0000", "manufacturer": "<Your manufacturer name>"}
_NOT_FOUND_DISTRIBUTION = "There is no distribution with the supplied name.\r\nError code: Wsl/Service/WSL_E_DISTRO_NOT_FOUND\r\n"


class WinSimError(Exception):
    """A simulated Windows node that cannot be read, built or given that command; the message names the culprit."""


def state_path(root):
    return os.path.join(root, "windows-state.json")


@contextlib.contextmanager
def locked_state(root, write=False):
    """The state under the node's lock; with `write`, what the block left in it is saved (atomically)."""
    path = state_path(root)
    if not os.path.exists(path):
        raise WinSimError("no simulated Windows node at %s (gpuops_windows_sim_root): %s is missing" % (root, path))
    with open(os.path.join(root, ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with open(path) as handle:
            state = json.load(handle)
        yield state
        if write:
            _write_atomic(path, state)


def _write_atomic(path, state):
    tmp = "%s.%d.tmp" % (path, os.getpid())
    with open(tmp, "w") as handle:
        json.dump(state, handle, indent=1, sort_keys=True)
        handle.flush()
        os.fsync(handle.fileno())
    os.rename(tmp, path)


# ---- building a node from a scenario ------------------------------------------------------------------------------

def build_state(scenario, now_ms=None):
    """A node's state from a scenario (the options of win_gpu_sim); ValueError naming the option and value."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    host = scenario.get("hostname") or "WS01"
    state = {"kind": STATE_KIND, "version": 1, "hostname": host, "driver_version": "591.86", "cuda_version": "13.1",
             "store_wsl": bool(scenario.get("store_wsl", True)), "default_user": scenario.get("default_user") or "ada",
             "administrators": list(scenario.get("administrators") or [scenario.get("default_user") or "ada"]),
             "auto_restart_shell": bool(scenario.get("auto_restart_shell", True)),
             "next_pid": FIRST_PID, "clock_ms": now_ms - 3600 * 1000, "gpus": [], "processes": [], "sessions": [],
             "distributions": [], "command_log": [], "script_log": [],
             "constrained_language": bool(scenario.get("constrained_language")), "integrated_gpu": dict(INTEGRATED_GPU) if scenario.get("integrated_gpu") else None,
             "virtual_display": dict(VIRTUAL_DISPLAY) if scenario.get("virtual_display") else None,
             "pnp_properties": bool(scenario.get("pnp_properties", True))}
    for index, gpu in enumerate(scenario.get("gpus") or [{}]):
        state["gpus"].append(_gpu(index, dict(DEFAULT_GPU, **dict((k, v) for k, v in gpu.items() if v is not None))))
    for key in ("luid", "instance_id"):
        values = [gpu[key].lower() for gpu in state["gpus"]]
        if len(set(values)) != len(values):
            raise ValueError("gpus[].%s: %s names one adapter twice" % (key, ", ".join(values)))
    for name, session, user, image, parent in _BASE_PROCESSES:
        pid = 4 if name == "System" else None
        _spawn(state, name, user, session, image, parent_name=parent, pid=pid)
    for session in scenario.get("sessions") if scenario.get("sessions") is not None else [{"user": state["default_user"]}]:
        _open_session(state, session)
    for process in scenario.get("processes") or []:
        _scenario_process(state, process)
    for distribution in scenario.get("distributions") or []:
        _scenario_distribution(state, distribution)
    for owner in sorted(set(d["owner"] for d in state["distributions"] if d["running"])):
        _start_vm(state, owner)
    return state


def write_node(root, state):
    os.makedirs(root, exist_ok=True)
    _write_atomic(state_path(root), state)


def same_scenario(root, scenario):
    """Whether the node at root was built from this scenario (a second run then changes nothing)."""
    try:
        with open(state_path(root)) as handle:
            return json.load(handle).get("scenario") == scenario
    except (IOError, OSError, ValueError):
        return False


def _gpu(index, spec):
    model = str(spec["driver_model"]).upper()
    if model not in ("WDDM", "TCC", "MCDM"):
        raise ValueError("gpus[%d].driver_model: %r is none of WDDM, TCC, MCDM" % (index, spec["driver_model"]))
    bus = spec.get("pci_bus_id") or "00000000:%02X:00.0" % (0x0C + index * 0x10)
    luid = spec.get("luid") or 0xFA7A + index * 0x1000
    if isinstance(luid, bool) or not isinstance(luid, int) or not 0 < luid < 1 << 64:
        raise ValueError("gpus[%d].luid: %r is no LUID (a positive 64-bit number)" % (index, spec.get("luid")))
    instance_id = spec.get("instance_id")
    if instance_id is not None and (not isinstance(instance_id, str) or not instance_id.strip()
                                    or any(ord(c) < 32 for c in instance_id)):
        raise ValueError("gpus[%d].instance_id: %r is no device instance id (one line of text)" % (index, instance_id))
    return {"index": index, "name": spec["name"], "memory_mib": int(spec["memory_mib"]), "reserved_mib": int(spec["reserved_mib"]),
            "driver_model": model, "ghost_mib": int(spec["ghost_mib"]), "recovery_action": spec["recovery_action"],
            "pci_bus_id": bus, "uuid": spec.get("uuid") or "GPU-%08x-5e1c-4a7d-9b3e-%012x" % (0x19d6d965 + index, index),
            "luid": "0x%08x_0x%08x" % (luid >> 32, luid & 0xFFFFFFFF),
            # Get-ChildItem lists the DirectX keys in GUID order, which here follows the LUIDs, not nvidia-smi's order.
            "registry_key": "{%08x-9e4f-11ee-8c90-0242ac120002}" % (0x5e1c0000 + (luid & 0xFFFF)),
            "instance_id": instance_id or _nvidia_instance_id(spec["device_id"], index),
            "adapter_status": "Started", "restarts": 0, "restart_needs_reboot": bool(spec["restart_needs_reboot"])}


def _nvidia_instance_id(device_id, index):
    return "PCI\\VEN_10DE&DEV_%s&SUBSYS_40051458&REV_A1\\4&2a4c1b2&0&%04X" % (device_id, 0x0008 + index * 0x10)


def _luid_of(state, index):
    for gpu in state["gpus"]:
        if gpu["index"] == index:
            return gpu["luid"]
    raise ValueError("gpus: %r is no GPU of the node (it has %d)" % (index, len(state["gpus"])))


def _memory_on(state, gpus, memory_mib):
    return dict((_luid_of(state, index), {"dedicated_bytes": int(memory_mib) * MIB, "shared_bytes": 0}) for index in gpus)


def _spawn(state, name, user, session_id, image_path, parent_name=None, gpu_memory=None, pid=None, **extra):
    if pid is None:
        pid = state["next_pid"]
        state["next_pid"] += 4
    state["clock_ms"] += 1375
    parent = next((p["pid"] for p in state["processes"] if p["name"] == parent_name), 0) if parent_name else 0
    process = {"pid": pid, "ppid": parent, "name": name, "user": user, "session_id": session_id, "image_path": image_path,
               "creation_time_ms": state["clock_ms"], "gpu_memory": gpu_memory or {}}
    process.update(extra)
    state["processes"].append(process)
    return process


def _open_session(state, session):
    session_id = int(session["id"]) if session.get("id") is not None else 1 + len(state["sessions"])
    user = session.get("user") or state["default_user"]
    state["sessions"].append({"id": session_id, "user": user, "session_name": session.get("session_name", "console"),
                              "state": session.get("state") or "Active", "logon_time": "6/14/2026 11:35 AM"})
    values = {"id": session_id, "host": state["hostname"], "user": user}
    shares = {"dwm.exe": DWM_MIB, "explorer.exe": int(session.get("explorer_memory_mib") or 0)}
    for name, owner, image in _SESSION_PROCESSES:
        memory = _memory_on(state, [0], shares[name]) if shares.get(name) and state["gpus"] else None
        _spawn(state, name, owner % values, session_id, image, gpu_memory=memory)


def _scenario_process(state, spec):
    name = spec.get("name") or "python.exe"
    if not isinstance(name, str) or not name.strip() or "\x00" in name:
        raise ValueError("processes[].name: %r is no process name" % (name,))
    user = spec.get("user") or state["default_user"]
    session = spec.get("session_id", 1)
    memory = _memory_on(state, spec.get("gpus", [0]), spec.get("memory_mib", 1024))
    if spec.get("igpu_memory_mib"):
        if not state.get("integrated_gpu"):
            raise ValueError("processes[].igpu_memory_mib: %r needs integrated_gpu: true" % (spec["igpu_memory_mib"],))
        memory[state["integrated_gpu"]["luid"]] = {"dedicated_bytes": int(spec["igpu_memory_mib"]) * MIB, "shared_bytes": 0}
    image = spec.get("image_path") or "C:\\Users\\%s\\AppData\\Local\\Programs\\%s" % (user.split("\\")[-1], name)
    owner = user if "\\" in user else "%s\\%s" % (state["hostname"], user)
    process = _spawn(state, name, owner, session, image, gpu_memory=memory)
    if spec.get("graphics"):
        process["smi_type"] = "G"  # a desktop application drawing on the GPU, as nvidia-smi lists it under WDDM
    if spec.get("counter_mib") is not None:
        process["counter_mib"] = int(spec["counter_mib"])  # what its GPU Process Memory counter reports, not what it holds
    for child in spec.get("children") or []:
        kid = _scenario_process(state, dict(child, user=child.get("user") or user, session_id=child.get("session_id", session)))
        kid["ppid"] = process["pid"]
    return process


def _scenario_distribution(state, spec):
    name = spec.get("name")
    try:
        _win_wsl.checked_distribution_name(name)
    except ValueError as exc:
        raise ValueError("distributions[].name: %s" % exc) from None
    state["distributions"].append({
        "name": name, "owner": spec.get("owner") or state["default_user"], "running": bool(spec.get("running", True)),
        "version": int(spec.get("version", 2)), "default": bool(spec.get("default", not state["distributions"])),
        "gpu_memory": _memory_on(state, spec.get("gpus", [0]), spec.get("memory_mib", 0)) if spec.get("memory_mib") else {}})


def _start_vm(state, owner):
    if any(p.get("wsl_vm_of") == owner for p in state["processes"]):
        return
    # The VM's memory process runs in session 0 under its own virtual account; its GPU memory is its distributions'.
    _spawn(state, VM_NAME, None, 0, None, wsl_vm_of=owner)


def _vm_memory(state, vm):
    memory = {}
    for distribution in state["distributions"]:
        if distribution["owner"] == vm["wsl_vm_of"] and distribution["running"]:
            for luid, usage in distribution["gpu_memory"].items():
                entry = memory.setdefault(luid, {"dedicated_bytes": 0, "shared_bytes": 0})
                for key, value in usage.items():
                    entry[key] += value
    return memory


def process_memory(state, process):
    """{luid: {"dedicated_bytes", "shared_bytes"}} of a live process (the WSL VM: its running distributions')."""
    return _vm_memory(state, process) if process.get("wsl_vm_of") else process["gpu_memory"]


# ---- the node, as the action plugins see it ----------------------------------------------------------------------

class SimCommand:
    """What a tool wrote: exit status and the raw bytes of stdout and stderr."""

    def __init__(self, rc, stdout=b"", stderr=b""):
        self.rc, self.stdout, self.stderr = rc, stdout, stderr


def run_command(root, argv, user=None):
    """Answer one argv list as the real tool would, run as `user` (None: the node's default user) -> SimCommand."""
    if not argv:
        raise WinSimError("an empty argv runs nothing")
    tool = _win_processes.base_name(argv[0].replace("\\", "/").rsplit("/", 1)[-1])
    handler = _TOOLS.get(tool)
    with locked_state(root, write=True) as state:
        if tool == "wsl" and argv[0] == _win_wsl.STORE_WSL_PATH and not state["store_wsl"]:
            raise WinSimError("%s could not be run: The system cannot find the file specified" % argv[0])
        caller = user or state["default_user"]
        state["command_log"].append({"argv": list(argv), "user": caller})
        if handler is None:
            raise WinSimError("%s could not be run: The system cannot find the file specified" % argv[0])
        return handler(state, list(argv[1:]), caller)


def run_script(root, name, parameters=None, user=None):
    """Answer one named PowerShell script (_win_scripts) -> what it puts in $Ansible.Result."""
    if name in _ACTING_SCRIPTS:
        with locked_state(root, write=True) as state:
            caller = user or state["default_user"]
            # the question whether the script can run at all is no action, nor is a script Add-Type refused
            if (parameters or {}).get("ProcessIds") and not state.get("constrained_language"):
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


# ---- nvidia-smi ------------------------------------------------------------------------------------------------------

def _gpu_used_mib(state, gpu):
    used = sum(process_memory(state, p).get(gpu["luid"], {}).get("dedicated_bytes", 0) for p in state["processes"])
    return used // MIB + gpu["ghost_mib"]


def _smi_processes(state, gpu):
    # The VM's allocations are the counters' to show: host nvidia-smi lists the Windows processes.
    return [p for p in state["processes"] if not p.get("wsl_vm_of") and p["gpu_memory"].get(gpu["luid"], {}).get("dedicated_bytes")]


def _nvidia_smi(state, args, _caller):
    if args != ["-q", "-x"]:
        return SimCommand(0, b"", b"") if not args else SimCommand(
            2, ("Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\r\n").encode(), b"")
    lines = ['<?xml version="1.0" ?>', '<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">', "<nvidia_smi_log>",
             "\t<timestamp>%s</timestamp>" % time.strftime("%a %b %d %H:%M:%S %Y", time.gmtime(state["clock_ms"] / 1000)),
             "\t<driver_version>%s</driver_version>" % state["driver_version"],
             "\t<cuda_version>%s</cuda_version>" % state["cuda_version"],
             "\t<attached_gpus>%d</attached_gpus>" % len(state["gpus"])]
    for gpu in state["gpus"]:
        lines.extend(_smi_gpu(state, gpu))
    lines.append("</nvidia_smi_log>")
    return SimCommand(0, ("\r\n".join(lines) + "\r\n").encode("utf-8"))


def _smi_gpu(state, gpu):
    used = _gpu_used_mib(state, gpu)
    free = gpu["memory_mib"] - gpu["reserved_mib"] - used
    bus = gpu["pci_bus_id"]
    lines = ['\t<gpu id="%s">' % bus, "\t\t<product_name>%s</product_name>" % _xml(gpu["name"]),
             "\t\t<persistence_mode>N/A</persistence_mode>",
             "\t\t<mig_mode>", "\t\t\t<current_mig>N/A</current_mig>", "\t\t\t<pending_mig>N/A</pending_mig>", "\t\t</mig_mode>",
             "\t\t<driver_model>", "\t\t\t<current_dm>%s</current_dm>" % gpu["driver_model"],
             "\t\t\t<pending_dm>%s</pending_dm>" % gpu["driver_model"], "\t\t</driver_model>",
             "\t\t<uuid>%s</uuid>" % gpu["uuid"], "\t\t<minor_number>N/A</minor_number>",
             "\t\t<pci>", "\t\t\t<pci_bus>%s</pci_bus>" % bus[9:11], "\t\t\t<pci_device>%s</pci_device>" % bus[12:14],
             "\t\t\t<pci_domain>%s</pci_domain>" % bus[4:8], "\t\t\t<pci_bus_id>%s</pci_bus_id>" % bus, "\t\t</pci>",
             "\t\t<gpu_recovery_action>%s</gpu_recovery_action>" % gpu["recovery_action"],
             "\t\t<fb_memory_usage>", "\t\t\t<total>%d MiB</total>" % gpu["memory_mib"],
             "\t\t\t<reserved>%d MiB</reserved>" % gpu["reserved_mib"], "\t\t\t<used>%d MiB</used>" % used,
             "\t\t\t<free>%d MiB</free>" % free, "\t\t</fb_memory_usage>", "\t\t<compute_mode>Default</compute_mode>",
             "\t\t<processes>"]
    for process in _smi_processes(state, gpu):
        memory = process["gpu_memory"][gpu["luid"]]["dedicated_bytes"] // MIB
        lines.extend(["\t\t\t<process_info>", "\t\t\t\t<gpu_instance_id>N/A</gpu_instance_id>",
                      "\t\t\t\t<compute_instance_id>N/A</compute_instance_id>", "\t\t\t\t<pid>%d</pid>" % process["pid"],
                      "\t\t\t\t<type>%s</type>" % (process.get("smi_type") or ("C+G" if process["session_id"] else "C")),
                      "\t\t\t\t<process_name>%s</process_name>" % _xml(process["image_path"] or process["name"]),
                      "\t\t\t\t<used_memory>%s</used_memory>" % ("N/A" if gpu["driver_model"] == "WDDM" else "%d MiB" % memory),
                      "\t\t\t</process_info>"])
    lines.extend(["\t\t</processes>", "\t</gpu>"])
    return lines


def _xml(text):
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


# ---- pnputil, quser ----------------------------------------------------------------------------------------------

def _pnputil(state, args, _caller):
    if [a.lower() for a in args] == ["/enum-devices", "/class", "display"]:
        blocks = ["Microsoft PnP Utility", ""]
        for adapter in _pnp_devices(state):
            blocks.extend(["Instance ID:                %s" % adapter["instance_id"],
                           "Device Description:         %s" % adapter["name"],
                           "Class Name:                 Display",
                           "Class GUID:                 {4d36e968-e325-11ce-bfc1-08002be10318}",
                           "Manufacturer Name:          %s" % adapter["manufacturer"],
                           "Status:                     %s" % adapter["adapter_status"],
                           "Driver Name:                oem%d.inf" % adapter["inf"], ""])
        return SimCommand(0, "\r\n".join(blocks).encode())
    if len(args) == 2 and args[0].lower() == "/restart-device":
        return _restart_device(state, args[1])
    return SimCommand(1, b"Microsoft PnP Utility\r\n\r\nInvalid arguments.\r\n")


def _display_adapters(state):
    """The display adapters as PnP and the registry know them: the NVIDIA GPUs, and the integrated GPU when there is one."""
    adapters = [dict(gpu, manufacturer="NVIDIA", vendor_id=0x10DE, inf=40 + gpu["index"]) for gpu in state["gpus"]]
    if state.get("integrated_gpu"):
        adapters.insert(0, dict(state["integrated_gpu"], adapter_status="Started", inf=12))
    return adapters


def _pnp_devices(state):
    """The Display-class devices PnP lists, in instance-id order (not nvidia-smi's): the adapters and the virtual display."""
    devices = _display_adapters(state)
    if state.get("virtual_display"):
        devices.append(dict(state["virtual_display"], adapter_status="Started", inf=43))
    return sorted(devices, key=lambda device: device["instance_id"].lower())


def _pnp_locations(state):
    """Get-PnpDevice -Class Display with each device's Get-PnpDeviceProperty BusNumber and Address (Type 7: UInt32;
    for PCI, Address = (device << 16) | function), as the snapshot script selects them; none for the virtual display."""
    devices = []
    for device in _pnp_devices(state):
        properties = []
        if device.get("pci_bus_id"):
            dummy, bus, rest = device["pci_bus_id"].split(":")
            slot, function = rest.split(".")
            properties = [{"KeyName": "DEVPKEY_Device_BusNumber", "Type": 7, "Data": int(bus, 16)},
                          {"KeyName": "DEVPKEY_Device_Address", "Type": 7, "Data": int(slot, 16) << 16 | int(function, 16)}]
        devices.append({"InstanceId": device["instance_id"], "Present": True, "Properties": properties})
    return devices


def _restart_device(state, instance_id):
    for gpu in state["gpus"]:
        if gpu["instance_id"].lower() == instance_id.lower() and gpu.get("restart_needs_reboot"):
            # ERROR_SUCCESS_REBOOT_REQUIRED: the restart waits for a reboot, the driver keeps what it holds. The text
            # is ours (no capture of it); the plugins read the exit code.
            return SimCommand(3010, ("Microsoft PnP Utility\r\n\r\nRestarting device:          %s\r\n"
                                     "System reboot is needed to complete restart operations.\r\n" % instance_id).encode())
        if gpu["instance_id"].lower() == instance_id.lower():
            gpu["restarts"] += 1
            gpu["ghost_mib"] = 0
            gpu["recovery_action"] = "None"
            return SimCommand(0, ("Microsoft PnP Utility\r\n\r\nRestarting device:          %s\r\n"
                                  "Device restarted successfully.\r\n" % instance_id).encode())
    return SimCommand(1, ("Microsoft PnP Utility\r\n\r\nRestarting device:          %s\r\n"
                          "Failed to restart device:   %s\r\n\r\nThe system cannot find the file specified.\r\n"
                          % (instance_id, instance_id)).encode())


def _quser(state, args, _caller):
    if args:
        return SimCommand(1, b"", ("No User exists for %s\r\n" % args[0]).encode())
    if not state["sessions"]:
        return SimCommand(1, b"", b"No User exists for *\r\n")
    rows = [" USERNAME              SESSIONNAME        ID  STATE   IDLE TIME  LOGON TIME"]
    for session in state["sessions"]:
        cells = (session["user"][:20], session["session_name"] or "", session["id"], session["state"], "none", session["logon_time"])
        rows.append(" %-21s %-18s %2d  %-6s %10s  %s" % cells)
    return SimCommand(0, ("\r\n".join(rows) + "\r\n").encode())


# ---- taskkill ----------------------------------------------------------------------------------------------------

def _taskkill(state, args, caller):
    upper = [a.upper() for a in args]
    if "/PID" not in upper or upper.index("/PID") + 1 >= len(args) or not args[upper.index("/PID") + 1].isdigit():
        return SimCommand(1, b"", b'ERROR: Invalid syntax. Type "TASKKILL /?" for usage.\r\n')
    pid = int(args[upper.index("/PID") + 1])
    target = _process(state, pid)
    if target is None:
        return SimCommand(128, b"", ('ERROR: The process "%d" not found.\r\n' % pid).encode())
    if "/F" not in upper:
        return SimCommand(1, b"", ("ERROR: The process with PID %d could not be terminated.\r\n"
                                   "Reason: This process can only be terminated forcefully (with /F option).\r\n" % pid).encode())
    tree = _descendants(state, pid) if "/T" in upper else []
    out, err = [], []
    for process in tree + [target]:
        refusal = _kill_refusal(state, process, caller)
        child = " (child process of PID %d)" % process["ppid"] if process is not target else ""
        if refusal:
            err.append("ERROR: The process with PID %d%s could not be terminated.\r\nReason: %s\r\n" % (process["pid"], child, refusal))
        else:
            state["processes"].remove(process)
            out.append("SUCCESS: The process with PID %d%s has been terminated.\r\n" % (process["pid"], child))
            _restart_shell(state, process)
    rc = 0 if not err else 1 if not out else 255
    return SimCommand(rc, "".join(out).encode(), "".join(err).encode())


def _restart_shell(state, ended):
    """Winlogon starts a session's shell again when it stops unexpectedly (AutoRestartShell=1, Windows' default)."""
    if _win_processes.base_name(ended["name"]) == "explorer" and ended["session_id"] and state.get("auto_restart_shell", True):
        _spawn(state, ended["name"], ended["user"], ended["session_id"], ended["image_path"])


def _terminate_script(state, parameters, caller):
    """The terminate script: each pid opened (Win32 error 87 when none has it, 5 when Windows refuses it to the caller),
    its creation time compared, then ended; Add-Type refused under Constrained Language Mode (the scenario's
    constrained_language)."""
    if state.get("constrained_language"):
        return {"unavailable": "Cannot add type. Definition of new types is not supported in this language mode.", "results": "[]"}
    results = []
    for pid, created in zip(parameters.get("ProcessIds") or [], parameters.get("CreationTimesMs") or []):
        process = _process(state, int(pid))
        if process is None:
            results.append({"ProcessId": int(pid), "Outcome": "not_opened", "Code": 87})
        elif process["creation_time_ms"] != int(created):
            results.append({"ProcessId": int(pid), "Outcome": "pid_reused", "Code": process["creation_time_ms"]})
        elif _kill_refusal(state, process, caller):
            results.append({"ProcessId": int(pid), "Outcome": "not_opened", "Code": 5})
        else:
            state["processes"].remove(process)
            _restart_shell(state, process)
            results.append({"ProcessId": int(pid), "Outcome": "ended", "Code": 0})
    return {"results": _ps_json(results)}


def _kill_refusal(state, process, caller):
    base = _win_processes.base_name(process["name"])
    if base in CRITICAL_NAMES:
        return "This is critical system process. Taskkill cannot end this process."
    if process["pid"] in _win_processes.PROTECTED_PIDS or base in _win_processes.PROTECTED_NAMES or process.get("wsl_vm_of"):
        return "Access is denied."
    owner = (process["user"] or "").split("\\")[-1]
    if owner.lower() != caller.lower() and caller.lower() not in [a.lower() for a in state["administrators"]]:
        return "Access is denied."
    return None


def _process(state, pid):
    return next((p for p in state["processes"] if p["pid"] == pid), None)


def _descendants(state, pid):
    found, frontier = [], [pid]
    while frontier:
        children = [p for p in state["processes"] if p["ppid"] in frontier and p["pid"] != p["ppid"] and p not in found]
        found.extend(children)
        frontier = [p["pid"] for p in children]
    return list(reversed(found))


# ---- logoff -----------------------------------------------------------------------------------------------------

def _logoff(state, args, caller):
    """`logoff <id>`: silent with exit 0 when the session ends (what logoff.exe does). Its error lines are ours (no
    capture of them); the plugins read the exit code and then whether quser still lists the session."""
    if len(args) != 1 or not args[0].isdigit():
        return SimCommand(1, b"", b"Invalid parameter(s)\r\nTerminates a session.\r\n")
    session_id = int(args[0])
    session = next((s for s in state["sessions"] if s["id"] == session_id), None)
    if session is None:
        return SimCommand(1, b"", ("Could not logoff session ID %d, Error code 7022\r\n"
                                   "Error [7022]:The specified session cannot be found.\r\n" % session_id).encode())
    if session["user"].lower() != caller.lower() and caller.lower() not in [a.lower() for a in state["administrators"]]:
        return SimCommand(1, b"", ("Could not logoff session ID %d, Error code 5\r\nError [5]:Access is denied.\r\n" % session_id).encode())
    state["sessions"].remove(session)
    state["processes"] = [p for p in state["processes"] if p["session_id"] != session_id]
    return SimCommand(0, b"")


def reuse_pid(root, pid, name="notepad.exe"):
    """Windows gives a freed pid to the next process soon: end the process `pid` (if any) and start `name` under the
    same pid, in the same session, with a new creation time and no GPU memory. -> the new process."""
    with locked_state(root, write=True) as state:
        old = _process(state, pid)
        if old is not None:
            state["processes"].remove(old)
        user = old["user"] if old else "%s\\%s" % (state["hostname"], state["default_user"])
        session = old["session_id"] if old else 1
        return copy.deepcopy(_spawn(state, name, user, session, "C:\\Windows\\System32\\%s" % name, pid=pid))


# ---- wsl.exe -----------------------------------------------------------------------------------------------------

def utf16(text):
    """What wsl.exe writes: UTF-16LE without a BOM, CR LF newlines."""
    return text.replace("\r\n", "\n").replace("\n", "\r\n").encode("utf-16-le")


def _wsl(state, args, caller):
    mine = [d for d in state["distributions"] if d["owner"].lower() == caller.lower()]
    options = [a.lower() for a in args]
    if options and options[0] in ("--list", "-l"):
        return _wsl_list(mine, set(options[1:]))
    if options == ["--shutdown"]:
        for distribution in mine:
            distribution["running"] = False
        _stop_vm(state, caller)
        return SimCommand(0, b"")
    if len(args) == 2 and options[0] in ("--terminate", "-t"):
        return _wsl_terminate(state, mine, args[1], caller)
    return SimCommand(-1, utf16("Invalid command line argument: %s\r\nPlease use 'wsl.exe --help' to get a list of supported arguments.\r\n"
                                % (" ".join(args) or "(none)")))


def _wsl_list(mine, flags):
    running = bool(flags & {"--running"})
    shown = [d for d in mine if d["running"] or not running]
    if flags & {"--quiet", "-q"}:
        return SimCommand(0, utf16("".join(d["name"] + "\n" for d in shown)))
    if not shown:
        sentence = "There are no running distributions." if running else "Windows Subsystem for Linux has no installed distributions."
        return SimCommand(-1, utf16(sentence + "\n"))
    if flags & {"--verbose", "-v"}:
        width = max(len(d["name"]) for d in shown) + 2
        rows = ["  " + "NAME".ljust(width) + "STATE".ljust(16) + "VERSION"]
        rows.extend(("* " if d["default"] else "  ") + d["name"].ljust(width) + ("Running" if d["running"] else "Stopped").ljust(16)
                    + str(d["version"]) for d in shown)
        return SimCommand(0, utf16("\n".join(rows) + "\n"))
    return SimCommand(0, utf16("Windows Subsystem for Linux Distributions:\n" +
                               "".join(d["name"] + (" (Default)" if d["default"] else "") + "\n" for d in shown)))


def _wsl_terminate(state, mine, name, caller):
    distribution = next((d for d in mine if d["name"].lower() == name.lower()), None)
    if distribution is None:
        return SimCommand(-1, utf16(_NOT_FOUND_DISTRIBUTION))
    distribution["running"] = False
    if not any(d["running"] for d in mine):
        _stop_vm(state, caller)
    return SimCommand(0, utf16("The operation completed successfully.\n"))


def _stop_vm(state, owner):
    state["processes"] = [p for p in state["processes"] if (p.get("wsl_vm_of") or "").lower() != owner.lower()]


# ---- PowerShell scripts (ConvertTo-Json as Windows PowerShell 5.1 writes it) --------------------------------------

def _ps_json(items):
    # 5.1 escapes the slashes of its date form: "\/Date(1790077571033)\/", and writes an empty pipeline
    # collected with @(...) as [null].
    if not items:
        return "[\r\n    null\r\n]"
    return json.dumps(items, indent=4).replace('"/Date(', '"\\/Date(').replace(')/"', ')\\/"')


def _store_wsl(state, path):
    return bool(state["store_wsl"]) and path == _win_wsl.STORE_WSL_PATH


def _snapshot_script(state, parameters, _caller):
    memory_rows = []
    for process in state["processes"]:
        for luid, usage in sorted(process_memory(state, process).items()):
            high, low = luid.split("_")
            memory_rows.append({"Name": "pid_%d_luid_%s_%s_phys_0" % (process["pid"], high, low),
                                "DedicatedUsage": usage["dedicated_bytes"], "SharedUsage": usage["shared_bytes"],
                                "LocalUsage": usage["dedicated_bytes"], "NonLocalUsage": usage["shared_bytes"],
                                "TotalCommitted": usage["dedicated_bytes"] + usage["shared_bytes"]})
    for process in state["processes"]:
        if process.get("counter_mib") is not None and memory_rows:
            # what its per-process counter says (not what it holds): -1 is the sample of an exited process
            for row in memory_rows:
                if row["Name"].startswith("pid_%d_" % process["pid"]):
                    row["DedicatedUsage"] = -1 if process["counter_mib"] < 0 else process["counter_mib"] * MIB
    adapter_rows = {}
    for process in state["processes"]:
        for luid, usage in process_memory(state, process).items():
            adapter_rows[luid] = adapter_rows.get(luid, 0) + usage["dedicated_bytes"]
    adapter_memory = [{"Name": "luid_%s_%s_phys_0" % tuple(luid.split("_")), "DedicatedUsage": value, "SharedUsage": 0}
                      for luid, value in sorted(adapter_rows.items())]
    constrained = bool(state.get("constrained_language"))
    adapters = [_registry_adapter(adapter, constrained) for adapter in sorted(_display_adapters(state), key=lambda a: a["registry_key"])]
    answer = {"process_memory": {"source": "cim", "json": _ps_json(memory_rows), "error": None}, "processes": _processes_json(state),
              "adapter_memory": {"source": "cim", "json": _ps_json(adapter_memory), "error": None},
              "adapters": _ps_json(adapters), "store_wsl": _store_wsl(state, parameters.get("WslPath")),
              "pnp_locations": _ps_json(_pnp_locations(state)), "pnp_error": None,
              "d3dkmt_error": "Cannot add type. Definition of new types is not supported in this language mode." if constrained else None}
    if not state.get("pnp_properties", True):
        # What a host without the PnpDevice module answers (its message, English here; the plugins read only that it failed).
        answer.update(pnp_locations=None, pnp_error="The term 'Get-PnpDevice' is not recognized as the name of a cmdlet, "
                                                    "function, script file, or operable program.")
    return answer


def _registry_adapter(adapter, constrained=False):
    """One DirectX key's values as the snapshot script selects them (AdapterLuid: the QWORD as text) and the adapter's
    PCI location as D3DKMTQueryAdapterInfo(KMTQAITYPE_ADAPTERADDRESS) gives it (bus, device, function; no domain)."""
    dummy, bus, rest = adapter["pci_bus_id"].split(":")
    device, function = rest.split(".")
    return {"Key": adapter["registry_key"], "Description": adapter["name"], "AdapterLuid": str(_win_counters.luid_value(adapter["luid"])),
            "VendorId": adapter["vendor_id"], "DeviceId": int(adapter["instance_id"].split("DEV_")[1][:4], 16),
            "SubSysId": _id_after(adapter["instance_id"], "SUBSYS_", 8), "RevisionId": _id_after(adapter["instance_id"], "REV_", 2),
            "BusNumber": None if constrained else int(bus, 16), "DeviceNumber": None if constrained else int(device, 16),
            "FunctionNumber": None if constrained else int(function, 16)}


def _id_after(instance_id, marker, width):
    at = instance_id.upper().find(marker)
    return int(instance_id[at + len(marker):at + len(marker) + width], 16) if at >= 0 else None


def _processes_json(state):
    return _ps_json([{"ProcessId": p["pid"], "ParentProcessId": p["ppid"], "Name": p["name"], "ExecutablePath": p["image_path"],
                      "CreationDate": "/Date(%d)/" % p["creation_time_ms"], "SessionId": p["session_id"], "User": p["user"]}
                     for p in state["processes"]])


def _processes_script(state, _parameters, _caller):
    return {"processes": _processes_json(state)}


def _wsl_path_script(state, parameters, _caller):
    return {"exists": _store_wsl(state, parameters.get("Path"))}


# ---- the node's files (the journal) ------------------------------------------------------------------------------

def host_file(root, windows_path):
    """Where the simulated host keeps the file `windows_path` (C:\\ProgramData\\x -> <root>/fs/C/ProgramData/x)."""
    drive, sep, rest = str(windows_path).partition(":\\")
    parts = [part for part in rest.split("\\") if part]
    if len(drive) != 1 or not drive.isalpha() or not sep or not parts or any(p in (".", "..") or "/" in p for p in parts):
        raise WinSimError("The filename, directory name, or volume label syntax is incorrect: %r" % (windows_path,))
    return os.path.join(root, "fs", drive.upper(), *parts)


def _journal_append_script(root, parameters):
    line = parameters.get("Line")
    if not isinstance(line, str) or "\n" in line or "\r" in line:
        raise WinSimError("a journal line holds no newline: %r" % (line,))
    path = host_file(root, parameters.get("Path"))
    _journal.append_line(path, json.loads(line))
    return {"written": len(line.encode("utf-8")) + 1}


def _journal_read_script(root, parameters):
    path = host_file(root, parameters.get("Path"))
    if not os.path.isfile(path):
        return {"exists": False, "cut": False, "base64": ""}
    tail = int(parameters.get("TailBytes"))
    with open(path, "rb") as handle:
        cut = os.fstat(handle.fileno()).st_size > tail
        if cut:
            handle.seek(-tail, os.SEEK_END)
        data = handle.read()
    return {"exists": True, "cut": cut, "base64": base64.b64encode(data).decode("ascii")}


_FILE_SCRIPTS = {"journal_append": _journal_append_script, "journal_read": _journal_read_script}
_TOOLS = {"nvidia-smi": _nvidia_smi, "pnputil": _pnputil, "quser": _quser, "taskkill": _taskkill, "wsl": _wsl, "logoff": _logoff}
_ACTING_SCRIPTS = {"terminate": _terminate_script}
_SCRIPTS = {"snapshot": _snapshot_script, "wsl_path": _wsl_path_script, "processes": _processes_script}


def transported(data):
    """Bytes as win_command hands them over with output_encoding_override=iso-8859-1: its reader honours a BOM
    (and drops it), else keeps one character per byte."""
    for bom, codec in ((codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF8, "utf-8")):
        if data.startswith(bom):
            return data[len(bom):].decode(codec, "replace")
    return data.decode("latin-1")


def snapshot_of_state(root):
    """A copy of the node's state, for tests and the scenario builder's result."""
    with locked_state(root) as state:
        return copy.deepcopy(state)
