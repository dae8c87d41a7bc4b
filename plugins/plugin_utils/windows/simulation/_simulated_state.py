# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulated Windows node's state: the state file under its lock, a node built from a scenario, and the
node's own rules (what Windows refuses to end, the shell Winlogon restarts, the WSL VM, a reused pid).
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import time
import uuid

from ansible_collections.gpuops.remediation.plugins.module_utils._lock import NodeLock
from ansible_collections.gpuops.remediation.plugins.module_utils._safe_files import write_atomic
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node import _output_encoding
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.tools import _cim_processes, _wsl_cli


STATE_KIND = "gpuops-windows-sim"
ROOT_OPTION = "gpuops_windows_sim_root"
# One step of the simulated node holds its lock for milliseconds: a longer wait is a stuck process, named.
LOCK_TIMEOUT = 60.0


MIB = 1024 * 1024


FIRST_PID = 1000


VM_NAME = "vmmemWSL"
VM_NAMES = ("vmmemWSL", "vmmem")  # vmmem: the WSL VM's memory process on older builds (and every Hyper-V VM's)
RELAY_NAME = "wslrelay.exe"
VM_ACCOUNT = "NT VIRTUAL MACHINE\\%s"
WSL_STATES = ("installed", "absent", "not_installed")


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
               "ghost_mib": 0, "recovery_action": "None", "device_id": "1E81", "restart_needs_reboot": False,
               "problem_after_restart": 0}


DWM_MIB = 128
SYSTEM_ACCOUNT = "NT AUTHORITY\\SYSTEM"
# The authority of a virtual machine's own account (NT VIRTUAL MACHINE\<vm id>).
VM_AUTHORITY = "NT VIRTUAL MACHINE\\"


# The integrated GPU a scenario can add (integrated_gpu): another vendor's adapter, in the registry and pnputil, never in
# nvidia-smi; its LUID's memory is never an NVIDIA GPU's.
INTEGRATED_GPU = {"name": "Intel(R) UHD Graphics 770", "vendor_id": 0x8086, "device_id": "4680", "luid": "0x00000000_0x0000b1e5",
                  "pci_bus_id": "00000000:00:02.0", "registry_key": "{5e1cb1e5-9e4f-11ee-8c90-0242ac120002}",
                  "instance_id": "PCI\\VEN_8086&DEV_4680&SUBSYS_7D251462&REV_0C\\3&11583659&0&10", "manufacturer": "Intel Corporation"}


# The virtual display a scenario can add (virtual_display): an indirect display driver's adapter, as the captured
# pnputil block shows it (ROOT\DISPLAY\0000); not on the PCI bus, so Get-PnpDeviceProperty gives it no BusNumber or
# Address, and not in the registry's DirectX adapters here.
VIRTUAL_DISPLAY = {"name": "IddSampleDriver Device HDR", "instance_id": "ROOT\\DISPLAY\\0000", "manufacturer": "<Your manufacturer name>"}


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
    with NodeLock(os.path.join(root, ".lock"), LOCK_TIMEOUT, option=ROOT_OPTION):
        with open(path) as handle:
            state = json.load(handle)
        yield state
        if write:
            _write_atomic(path, state)


def _write_atomic(path, state):
    write_atomic(path, json.dumps(state, indent=1, sort_keys=True), 0o644, option=ROOT_OPTION)


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
             "constrained_language": bool(scenario.get("constrained_language")),
             "oem_code_page": _code_page(scenario.get("oem_code_page")),
             "integrated_gpu": dict(INTEGRATED_GPU) if scenario.get("integrated_gpu") else None,
             "virtual_display": dict(VIRTUAL_DISPLAY) if scenario.get("virtual_display") else None,
             "pnp_properties": bool(scenario.get("pnp_properties", True)),
             "adapter_memory_counters": bool(scenario.get("adapter_memory_counters", True)),
             "winlogon_shell": scenario.get("winlogon_shell") or _cim_processes.DEFAULT_SHELL,
             "services_readable": bool(scenario.get("services_readable", True)),
             "wsl": _choice(scenario, "wsl", WSL_STATES), "wsl_vm_name": _choice(scenario, "wsl_vm_name", VM_NAMES),
             "wsl_relay": bool(scenario.get("wsl_relay", True))}
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


def _code_page(value):
    """The console's OEM code page the tools write in (437 unless the scenario says): one Python has a codec for."""
    number = 437 if value is None else value
    if isinstance(number, bool) or not isinstance(number, int) or _output_encoding.oem_codec(number) is None:
        raise ValueError("oem_code_page: %r is no code page with a known encoding (437, 850, 866, 932 ...)" % (value,))
    return number


def _choice(scenario, key, choices):
    value = scenario.get(key) or choices[0]
    if value not in choices:
        raise ValueError("%s: %r is none of %s" % (key, value, ", ".join(choices)))
    return value


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
            "adapter_status": "Started", "restarts": 0, "restart_needs_reboot": bool(spec["restart_needs_reboot"]),
            "problem_code": 0, "problem_after_restart": _problem_code(index, spec["problem_after_restart"])}


def _problem_code(index, value):
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 0xFFFF:
        raise ValueError("gpus[%d].problem_after_restart: %r is no device problem code (0 .. 65535)" % (index, value))
    return value


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
    if spec.get("critical"):
        process["critical"] = True  # what IsProcessCritical says of it: not a name
    if spec.get("runs_ansible"):
        process["runs_ansible"] = True  # the process Ansible's module runs in ($PID of the processes script)
    if spec.get("service"):
        process["service"] = str(spec["service"])  # Win32_Service.ProcessId of this service is its pid
    if spec.get("owner_known") is False:
        process["owner_hidden"] = True  # Get-Process -IncludeUserName gives no owner for it (not elevated, or denied)
    if _cim_processes.role(name, None) == "vm" and owner.upper().startswith(VM_AUTHORITY):
        process["hyperv_vm"] = True  # another VM's memory process (Hyper-V's), run as its VM's account
    if spec.get("counter_mib") is not None:
        process["counter_mib"] = int(spec["counter_mib"])  # what its GPU Process Memory counter reports, not what it holds
    for child in spec.get("children") or []:
        kid = _scenario_process(state, dict(child, user=child.get("user") or user, session_id=child.get("session_id", session)))
        kid["ppid"] = process["pid"]
    return process


def _scenario_distribution(state, spec):
    name = spec.get("name")
    try:
        _wsl_cli.checked_distribution_name(name)
    except ValueError as exc:
        raise ValueError("distributions[].name: %s" % exc) from None
    state["distributions"].append({
        "name": name, "owner": spec.get("owner") or state["default_user"], "running": bool(spec.get("running", True)),
        "version": int(spec.get("version", 2)), "default": bool(spec.get("default", not state["distributions"])),
        "gpu_memory": _memory_on(state, spec.get("gpus", [0]), spec.get("memory_mib", 0)) if spec.get("memory_mib") else {},
        # whether `find` answers in it (the /dev/dxg probe), and whether its GPU memory stays with the VM after it stops
        "gpu_probe": bool(spec.get("gpu_probe", True)), "held_after_stop": bool(spec.get("held_after_stop", False))})


def vm_id_of(state, owner):
    """The WSL VM id of `owner` on this node (the same on every start, as no real id is, but enough for one run)."""
    return str(uuid.uuid5(uuid.NAMESPACE_DNS, "%s.%s.wsl" % (owner.lower(), state["hostname"].lower())))


def _start_vm(state, owner):
    if any(p.get("wsl_vm_of") == owner for p in state["processes"]):
        return
    # The VM's memory process runs in session 0 under its VM's own account (NT VIRTUAL MACHINE\<vm id>); its GPU memory
    # is its distributions'. The user's WSL relay (in the user's session, as the user) names the VM's id on its command line.
    vm_id = vm_id_of(state, owner)
    _spawn(state, state.get("wsl_vm_name") or VM_NAME, VM_ACCOUNT % vm_id.upper(), 0, None, wsl_vm_of=owner, vm_id=vm_id, own_memory={})
    if state.get("wsl_relay", True):
        session = next((s["id"] for s in state["sessions"] if s["user"].lower() == owner.lower()), 0)
        _spawn(state, RELAY_NAME, "%s\\%s" % (state["hostname"], owner), session, "C:\\Program Files\\WSL\\wslrelay.exe",
               wsl_relay_of=owner, vm_id_arg="{%s}" % vm_id)


def _vm_memory(state, vm):
    memory = {}
    held = [d["gpu_memory"] for d in state["distributions"] if d["owner"] == vm["wsl_vm_of"] and d["running"]]
    for usages in held + [vm.get("own_memory") or {}]:
        for luid, usage in usages.items():
            entry = memory.setdefault(luid, {"dedicated_bytes": 0, "shared_bytes": 0})
            for key, value in usage.items():
                entry[key] += value
    return memory


def stop_distribution(state, distribution):
    """A distribution stops: its processes' GPU memory goes (or stays with the VM, held_after_stop)."""
    distribution["running"] = False
    if distribution.get("held_after_stop"):
        vm = next((p for p in state["processes"] if (p.get("wsl_vm_of") or "").lower() == distribution["owner"].lower()), None)
        if vm is not None:
            for luid, usage in distribution["gpu_memory"].items():
                entry = vm["own_memory"].setdefault(luid, {"dedicated_bytes": 0, "shared_bytes": 0})
                for key, value in usage.items():
                    entry[key] += value


def process_memory(state, process):
    """{luid: {"dedicated_bytes", "shared_bytes"}} of a live process (the WSL VM: its running distributions')."""
    return _vm_memory(state, process) if process.get("wsl_vm_of") else process["gpu_memory"]


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
            domain, bus, rest = device["pci_bus_id"].split(":")
            slot, function = rest.split(".")
            # a device on PCI segment N: bus number (N << 8) | bus, as Windows reports it
            properties = [{"KeyName": "DEVPKEY_Device_BusNumber", "Type": 7, "Data": int(domain, 16) << 8 | int(bus, 16)},
                          {"KeyName": "DEVPKEY_Device_Address", "Type": 7, "Data": int(slot, 16) << 16 | int(function, 16)}]
        code = device.get("problem_code") or 0
        # Win32_PnPEntity.Status is "OK" for a working device, "Error" for one with a problem code
        devices.append({"InstanceId": device["instance_id"], "FriendlyName": device["name"], "Manufacturer": device.get("manufacturer"),
                        "Present": True, "Status": "Error" if code else "OK", "ConfigManagerErrorCode": code, "Properties": properties})
    return devices


# The simulated host's %SystemRoot% and Winlogon's Shell value (the default: explorer.exe, resolved under it).
SYSTEM_ROOT = "C:\\Windows"


def shell_facts(state):
    """What the processes-reading scripts answer of the shell: Winlogon's Shell value and %SystemRoot%."""
    return {"winlogon_shell": state.get("winlogon_shell") or _cim_processes.DEFAULT_SHELL, "system_root": SYSTEM_ROOT}


def _restart_shell(state, ended):
    """Winlogon starts a session's shell again when it stops unexpectedly (AutoRestartShell=1, Windows' default): the
    process whose image path is its Shell (_cim_processes.shell_match), never another program of that name."""
    shell = _cim_processes.script_shell(shell_facts(state))
    if _cim_processes.shell_match(ended["name"], ended["image_path"], shell) and ended["session_id"] and state.get("auto_restart_shell", True):
        _spawn(state, ended["name"], ended["user"], ended["session_id"], ended["image_path"])


def is_critical(process):
    """What IsProcessCritical says of it: the scenario's critical flag, or one of Windows' own critical processes (SYSTEM's:
    a user's program with the same name is not)."""
    return bool(process.get("critical")) or (_cim_processes.base_name(process["name"]) in CRITICAL_NAMES and _system_owned(process))


def _system_owned(process):
    return (process.get("user") or "").upper() == SYSTEM_ACCOUNT.upper()


def _kill_refusal(state, process, caller):
    base = _cim_processes.base_name(process["name"])
    if is_critical(process):
        return "This is critical system process. Taskkill cannot end this process."
    if (process["pid"] in _cim_processes.PROTECTED_PIDS or (base in _cim_processes.PROTECTED_NAMES and _system_owned(process))
            or process.get("wsl_vm_of") or process.get("hyperv_vm")):
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


def _stop_vm(state, owner):
    state["processes"] = [p for p in state["processes"]
                          if owner.lower() not in ((p.get("wsl_vm_of") or "").lower(), (p.get("wsl_relay_of") or "").lower())]


def host_file(root, windows_path):
    """Where the simulated host keeps the file `windows_path` (C:\\ProgramData\\x -> <root>/fs/C/ProgramData/x)."""
    drive, sep, rest = str(windows_path).partition(":\\")
    parts = [part for part in rest.split("\\") if part]
    if len(drive) != 1 or not drive.isalpha() or not sep or not parts or any(p in (".", "..") or "/" in p for p in parts):
        raise WinSimError("The filename, directory name, or volume label syntax is incorrect: %r" % (windows_path,))
    return os.path.join(root, "fs", drive.upper(), *parts)


def snapshot_of_state(root):
    """A copy of the node's state, for tests and the scenario builder's result."""
    with locked_state(root) as state:
        return copy.deepcopy(state)
