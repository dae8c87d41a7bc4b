# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One snapshot of a Windows GPU node: the probes run on the node (_remote_node), parsed (_win_*), joined.

Probes: nvidia-smi -q -x (GPUs, driver model, the processes NVML lists), one PowerShell round trip (GPU Process
Memory counters, Win32_Process with owners, the DirectX adapters' LUIDs, the PnP display devices' PCI locations),
pnputil (adapters and instance ids), the sessions (the session API, else quser), wsl.exe (running distributions), the host's journal. The join:
a counter's LUID -> its DirectX adapter (AdapterLuid) -> the nvidia-smi GPU at the adapter's PCI location (bus,
device, function, from the graphics kernel; by name where it gave none); a pnputil adapter -> the nvidia-smi GPU at its PnP location (BusNumber, Address;
by name where none came back); a pid -> its Win32_Process (pid + creation time is the identity every later action
checks).
"""

from __future__ import annotations

import re

from ansible_collections.gpuops.remediation.plugins.module_utils.probes._pci import normalize_bus_id
from ansible_collections.gpuops.remediation.plugins.module_utils._verdict import gpu_state, windows_verdict
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.tools import (
    _gpu_memory_counters, _nvidia_smi_output, _pnputil_adapters, _cim_processes, _interactive_sessions, _wsl_cli,
)
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node import _node_journal, _convertto_json
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.protect import _wsl_vm_identity
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node._remote_node import WindowsNodeError

MIB = 1024 * 1024
NVIDIA_VENDOR_ID = 0x10DE
_CLASS_OF_ROLE = {"protected": "system", "dwm": "graphics_session"}
# A VM memory process's class by what _wsl_vm_identity found: the WSL VM (the wsl rung's), another VM's or one not known to
# be WSL's (no rung of ours: a running VM is busy, and neither is ever killed).
_CLASS_OF_VM_KIND = {"wsl": "wsl_vm"}
NO_COUNTER_REASON = "no GPU Process Memory counter names this pid on an NVIDIA adapter"


def take(node, nvidia_smi="nvidia-smi", ghost_threshold_mib=256, journal_path=None):
    """The snapshot: {"gpus", "holders", "adapters", "sessions", "wsl", "journal", "probes", "verdict"}.

    "journal": what the node's journal (_node_journal) says of earlier runs: their recent actions, the actions one of them
    started and never finished ("interrupted_actions"), and how often each process name was ended before (each holder's
    "earlier_kills"), so that a leak that comes back is seen as one."""
    journal_path = _node_journal.checked_path(journal_path)
    probes = {}
    script = _probe(probes, "powershell", lambda: node.powershell("snapshot", {"WslPath": _wsl_cli.STORE_WSL_PATH}), {})
    gpus = _gpus(node, nvidia_smi, probes)
    counters = _counters(script.get("process_memory") or {}, probes)
    shell = _cim_processes.script_shell(script)
    processes = _parsed(probes, "processes", lambda text: _cim_processes.parse_cim_processes(text, shell), script.get("processes"), [])
    vms = wsl_vms(processes, script, probes, getattr(node, "user", None))
    locations = _pnp_locations(script, probes)
    luids = _join_luids(gpus, _parsed(probes, "adapters", _adapters, script.get("adapters"), []), counters, probes, locations,
                        script.get("d3dkmt_error"))
    holders = _holders(gpus, luids, counters, processes, probes)
    journal = _node_journal.journal_report(node, journal_path)
    probes["journal"] = dict((key, journal[key]) for key in ("path", "ok", "error", "records", "read"))
    for holder in holders:
        holder["earlier_kills"] = journal["kills_by_name"].get((holder.get("name") or "").lower(), 0)
    wsl_path = _wsl_cli.STORE_WSL_PATH if script.get("store_wsl") else _wsl_cli.INBOX_WSL_PATH
    wsl = dict(running_distributions(node, wsl_path, probes, vm_running(processes)), path=wsl_path, user=getattr(node, "user", None),
               vms=[vm_record(vm) for vm in vms])
    wsl["distributions"] = _distribution_holds(node, wsl_path, wsl, holders, probes)
    snapshot = {"gpus": gpus, "holders": holders, "adapters": _adapter_devices(node, gpus, locations, probes),
                "sessions": _sessions(node, probes), "wsl": wsl, "journal": journal, "probes": probes}
    adapter_memory = _adapter_memory(script.get("adapter_memory") or {}, probes)
    for holder in holders:
        holder.update(counter_residency(holder, gpus, adapter_memory))
    for gpu in gpus:
        ghost = ghost_memory(gpu, adapter_memory.get(gpu.get("luid")) if gpu.get("luid") else None)
        gpu.update(attributed_mib=ghost["attributed_mib"], unattributed_mib=ghost["ghost_mib"], ghost_source=ghost["source"],
                   ghost_reason=ghost["reason"])
        gpu["state"] = gpu_state(gpu, holders, ghost_threshold_mib, probes["gpu"])
    snapshot["verdict"] = windows_verdict(snapshot, ghost_threshold_mib)
    return snapshot


def ghost_memory(gpu, adapter_dedicated_bytes):
    """A GPU's ghost memory (memory the driver counts used that no live process holds): {"ghost_mib" (None: unknown,
    never 0 for unknown), "attributed_mib", "source", "reason"}.

    From the driver's own per-process view where it gives one (TCC, MCDM: nvidia-smi's used_memory of every process it
    lists), else from the adapter-level figure (GPU Adapter Memory's Dedicated Usage of the GPU's LUID: what WDDM
    accounts to the adapter for the live processes together). The per-process counters are never summed for it: they
    say who touches a GPU, not how much (one process's counter can exceed what the whole adapter uses)."""
    used = gpu.get("memory_used_mib")
    if used is None:
        return {"ghost_mib": None, "attributed_mib": None, "source": None, "reason": "nvidia-smi gave no memory in use"}
    listed = gpu.get("processes") or []
    # Under WDDM the driver gives no per-process figure: an empty list there is no view at all (a process nvidia-smi
    # does not list may hold memory the counters see), never "no process holds anything".
    wddm = ((gpu.get("driver_model") or {}).get("current") if isinstance(gpu.get("driver_model"), dict) else gpu.get("driver_model")) == "WDDM"
    if (listed or not wddm) and all(process.get("used_mib") is not None for process in listed):
        attributed = sum(process["used_mib"] for process in listed)
        return {"ghost_mib": max(0, used - attributed), "attributed_mib": attributed, "source": "nvidia_smi_processes", "reason": None}
    if adapter_dedicated_bytes is not None:
        attributed = min(used, adapter_dedicated_bytes // MIB)
        return {"ghost_mib": used - attributed, "attributed_mib": attributed, "source": "adapter_counter", "reason": None}
    why = "no GPU Adapter Memory figure for its adapter" if gpu.get("luid") else "its adapter's LUID is not joined"
    return {"ghost_mib": None, "attributed_mib": None, "source": None,
            "reason": "unknown: WDDM gives no per-process memory (N/A) and %s" % why}


def _adapter_memory(memory, probes):
    """{luid: dedicated bytes} of the GPU Adapter Memory counters (probes["adapter_memory"] says whether they answered)."""
    text = memory.get("json")
    if memory.get("source") != "cim" or text is None:
        probes["adapter_memory"] = {"ok": False, "error": memory.get("error") or "no GPU Adapter Memory source answered"}
        return {}
    try:
        figures = _gpu_memory_counters.parse_adapter_memory(text)
    except ValueError as exc:
        probes["adapter_memory"] = {"ok": False, "error": str(exc)}
        return {}
    probes["adapter_memory"] = {"ok": True, "error": None, "luids": sorted(figures)}
    return figures


def running_distributions(node, wsl_path, probes, vm_running=None):
    """{"running": [names], "status", "message"} from `wsl --list --running --quiet`, as the node's user. `vm_running`:
    whether a WSL VM process runs (Win32_Process): with none, a wsl.exe that exits non-zero or cannot be started at all
    (a host without WSL) means nothing runs. A callable is asked only then (exit 0 needs no process list)."""
    def known():
        return vm_running() if callable(vm_running) else vm_running
    try:
        answer = node.command(_wsl_cli.list_argv(wsl_path, running=True), read_only=True)
    except WindowsNodeError as exc:
        none = known() is False
        probes["wsl"] = {"ok": none, "error": None if none else str(exc), "installed": False if none else None}
        return {"running": [], "status": "ok" if none else "unrecognised", "message": str(exc)}
    listed = _wsl_cli.parse_list(answer.stdout, answer.rc, known() if answer.rc != 0 else None)
    probes["wsl"] = {"ok": listed.status == "ok", "error": listed.message if listed.status != "ok" else None,
                     "encoding": answer.encoding, "rc": answer.rc}
    return {"running": listed.distributions, "status": listed.status, "message": listed.message}


def vm_running(processes):
    """Whether the node user's WSL VM runs (what their `wsl --list --running` speaks of), from a process list that
    wsl_vms annotated: True, False (none, or only other VMs and other users' WSL VMs), or None when the list is empty
    or a VM memory process is not known to be WSL's, or a WSL VM's user is not known."""
    if not processes:
        return None
    vms = [process for process in processes if process.get("role") == "vm"]
    if [vm for vm in vms if vm.get("vm_kind") == "wsl" and vm.get("wsl_mine")]:
        return True
    unknown = [vm for vm in vms if vm.get("vm_kind") is None or (vm.get("vm_kind") == "wsl" and vm.get("wsl_mine") is None)]
    return None if unknown else False


def wsl_vms(processes, script, probes, user):
    """The VM memory processes of `processes`, each annotated by _wsl_vm_identity (which VM, whether it is the WSL VM,
    whose, and "wsl_mine": whether it is `user`'s); probes["hcs"] says whether HCS answered."""
    systems = None
    if script.get("compute_systems") is not None:
        try:
            systems = _wsl_vm_identity.parse_compute_systems(script["compute_systems"])
        except ValueError as exc:
            probes["hcs"] = {"ok": False, "error": str(exc)}
    if "hcs" not in probes:
        probes["hcs"] = {"ok": systems is not None, "error": None if systems is not None else script.get("hcs_error") or "HCS gave no answer"}
    vms = _wsl_vm_identity.identify(processes, systems)
    for vm in vms:
        vm["wsl_mine"] = _wsl_vm_identity.owned_by(vm, user) if vm["vm_kind"] == "wsl" else False
    return vms


def vm_record(vm):
    """What a snapshot and wsl_shutdown keep of a VM memory process: its identity and what it is."""
    return dict((key, vm.get(key)) for key in ("pid", "name", "creation_time_ms", "user", "vm_id", "vm_kind", "vm_kind_source",
                                               "wsl_owner", "wsl_mine"))


def _distribution_holds(node, wsl_path, wsl, holders, probes):
    """Which running distributions of the node's user hold the GPU (_wsl_cli.parse_gpu_probe: a process of theirs with
    /dev/dxg open), asked only while a WSL VM that may be the user's holds a GPU (another user's is not asked about)
    -> [{"name", "holds_gpu" (None: not known), "pids", "error"}]."""
    if not wsl["running"] or not [h for h in holders if h["gpus"] and h["class"] == "wsl_vm" and h.get("wsl_mine") is not False]:
        return []
    found = []
    for name in wsl["running"]:
        try:
            answer = node.command(_wsl_cli.gpu_probe_argv(name, wsl_path), read_only=True)
        except WindowsNodeError as exc:
            found.append({"name": name, "holds_gpu": None, "pids": [], "error": str(exc)})
            continue
        found.append(dict(_wsl_cli.parse_gpu_probe(answer.stdout, answer.rc, answer.stderr), name=name))
    unknown = [d["name"] for d in found if d["holds_gpu"] is None]
    probes["wsl_distributions"] = {"ok": not unknown, "error": "; ".join("%s: %s" % (d["name"], d["error"]) for d in found if d["holds_gpu"] is None) or None}
    return found


def _probe(probes, name, call, default):
    try:
        value = call()
    except WindowsNodeError as exc:
        probes[name] = {"ok": False, "error": str(exc)}
        return default
    probes[name] = {"ok": True, "error": None}
    return value


def _parsed(probes, name, parse, text, default):
    if text is None:
        probes[name] = {"ok": False, "error": "the snapshot script returned no %s" % name}
        return default
    try:
        value = parse(text)
    except ValueError as exc:
        probes[name] = {"ok": False, "error": str(exc)}
        return default
    probes[name] = {"ok": True, "error": None}
    return value


def _gpus(node, nvidia_smi, probes):
    try:
        answer = node.command(_nvidia_smi_output.query_xml_argv(nvidia_smi), read_only=True)
    except WindowsNodeError as exc:
        probes["gpu"] = {"ok": False, "timed_out": False, "error": str(exc), "backend": "nvidia_smi"}
        return []
    if answer.rc != 0:
        probes["gpu"] = {"ok": False, "timed_out": False, "backend": "nvidia_smi",
                         "error": "nvidia-smi exited %s: %s" % (answer.rc, (answer.stdout + answer.stderr).strip())}
        return []
    try:
        parsed = _nvidia_smi_output.parse_query_xml(answer.stdout)
    except Exception as exc:  # pylint: disable=broad-exception-caught  # an XML error of any kind is evidence, not a crash
        probes["gpu"] = {"ok": False, "timed_out": False, "backend": "nvidia_smi", "error": "unreadable nvidia-smi XML: %s" % exc}
        return []
    probes["gpu"] = {"ok": True, "timed_out": False, "error": None, "backend": "nvidia_smi",
                     "driver_version": parsed.get("driver_version")}
    for index, gpu in enumerate(parsed["gpus"]):
        gpu["index"] = index
    return parsed["gpus"]


def _counters(memory, probes):
    source, text = memory.get("source"), memory.get("json")
    parse = {"cim": _gpu_memory_counters.parse_cim_process_memory, "counter": _gpu_memory_counters.parse_counter_samples}.get(source)
    if parse is None or text is None:
        probes["counters"] = {"ok": False, "source": None, "error": memory.get("error") or "no GPU Process Memory source answered"}
        return _gpu_memory_counters.CounterReading({}, [])
    try:
        reading = parse(text)
    except ValueError as exc:
        probes["counters"] = {"ok": False, "source": source, "error": str(exc)}
        return _gpu_memory_counters.CounterReading({}, [])
    probes["counters"] = {"ok": True, "source": source, "error": memory.get("error"), "unrecognised": reading.unrecognised}
    return reading


def _adapters(text):
    adapters = []
    for item in _convertto_json.objects(text):
        value = _convertto_json.integer(item.get("AdapterLuid"))
        if value is None:
            continue
        location = tuple(_convertto_json.integer(item.get(key)) for key in ("BusNumber", "DeviceNumber", "FunctionNumber"))
        adapters.append({"key": item.get("Key"), "description": item.get("Description"), "vendor_id": _convertto_json.integer(item.get("VendorId")),
                         "device_id": _convertto_json.integer(item.get("DeviceId")), "subsys_id": _convertto_json.integer(item.get("SubSysId")),
                         "revision_id": _convertto_json.integer(item.get("RevisionId")),
                         "luid": "0x%08x_0x%08x" % (value >> 32, value & 0xFFFFFFFF),
                         "pci_location": list(location) if None not in location else None, "pci_domain": None,
                         "located_by": "d3dkmt" if None not in location else None})
    return adapters


def pci_location(bus_id):
    """nvidia-smi's pci.bus_id (domain:bus:device.function) -> [bus, device, function], as the graphics kernel gives an
    adapter's location (without the domain: pci_domain has it), or None."""
    normal = normalize_bus_id(bus_id)
    if normal is None:
        return None
    dummy, bus, rest = normal.split(":")
    device, function = rest.split(".")
    return [int(bus, 16), int(device, 16), int(function, 16)]


def pci_domain(bus_id):
    """The PCI domain (segment) of nvidia-smi's pci.bus_id, or None."""
    normal = normalize_bus_id(bus_id)
    return int(normal.split(":")[0], 16) if normal is not None else None


def same_place(gpu, candidate):
    """Whether a candidate adapter sits at the GPU's PCI location: bus, device and function equal, and the domain too
    where both sides state it (nvidia-smi always does; Get-PnpDeviceProperty's bus number carries it; the graphics
    kernel's adapter address has none, so an adapter located by it is compared without the domain)."""
    location = pci_location(gpu.get("pci_bus_id"))
    if location is None or candidate.get("pci_location") != location:
        return False
    domain, theirs = pci_domain(gpu.get("pci_bus_id")), candidate.get("pci_domain")
    return domain is None or theirs is None or domain == theirs


_PCI_IDS_RE = re.compile(r"^PCI\\VEN_([0-9A-F]{4})&DEV_([0-9A-F]{4})(?:&SUBSYS_([0-9A-F]{8}))?(?:&REV_([0-9A-F]{2}))?\\", re.IGNORECASE)


def locate_by_pnp(adapter, locations):
    """The PCI location of a DirectX adapter the graphics kernel gave none for (Add-Type refused): the one present PnP
    device whose instance id carries the adapter's vendor, device, subsystem and revision ids (registry values of the
    DirectX key), at its Get-PnpDeviceProperty location; None when not exactly one matches (identical GPUs)."""
    found = _pnp_matches(adapter, locations)
    return found[0]["pci_location"] if len(found) == 1 else None


def _pnp_matches(adapter, locations):
    wanted = (adapter.get("vendor_id"), adapter.get("device_id"), adapter.get("subsys_id"), adapter.get("revision_id"))
    found = []
    for instance_id, known in locations.items():
        match = _PCI_IDS_RE.match(instance_id)
        if not match or known.get("present") is False or known.get("pci_location") is None:
            continue
        ids = tuple(int(part, 16) if part else None for part in match.groups())
        if all(want is None or want == have for want, have in zip(wanted, ids)) and None not in wanted[:2]:
            found.append(known)
    return found


def _join_luids(gpus, adapters, counters, probes, locations=None, d3dkmt_error=None):
    """{luid: gpu index} for the NVIDIA adapters joined to one nvidia-smi GPU; each GPU gets "luid" (None when unjoined)
    and "luid_join" (how: "pci_location", "name", or None).

    By PCI location where the graphics kernel gave the adapters' (the LUID order says nothing of nvidia-smi's index
    order); where it gave none (Add-Type refused), by the location of the one PnP device with the adapter's ids
    ("pnp_location"); else by name (two adapters of one name: the one the counters show), and a single NVIDIA GPU and adapter
    always join. An adapter of another vendor (an Intel or AMD iGPU) is never joined to an NVIDIA GPU.
    """
    nvidia = [a for a in adapters if a["vendor_id"] == NVIDIA_VENDOR_ID]
    for adapter in nvidia:
        if adapter["pci_location"] is None and locations:
            found = _pnp_matches(adapter, locations)
            known = found[0] if len(found) == 1 else {}
            adapter.update(pci_location=known.get("pci_location"), pci_domain=known.get("pci_domain"))
            adapter["located_by"] = "pnp" if adapter["pci_location"] is not None else None
    seen = set(luid for entry in counters.by_pid.values() for luid in entry["by_luid"])
    joined, method, problems = _join_to_gpus(gpus, nvidia, seen, "NVIDIA DirectX adapters")
    if method == "pci_location" and any(a["located_by"] == "pnp" for a in nvidia):
        method = "pnp_location"
    for gpu in gpus:
        adapter = joined.get(gpu["index"])
        gpu.update(luid=adapter["luid"] if adapter else None, luid_join=method if adapter else None)
    problems = ["%s; its LUID is not known, its processes' memory is not counted on it" % problem for problem in problems]
    probes["luid_join"] = {"ok": not problems, "error": "; ".join(problems) or None, "method": method}
    if d3dkmt_error:
        probes["luid_join"]["d3dkmt_error"] = str(d3dkmt_error)  # why the kernel gave no location: joined as "method" says
    return dict((adapter["luid"], index) for index, adapter in joined.items())


def _join_to_gpus(gpus, candidates, seen_luids, what):
    """({gpu index: its one candidate}, method, problems): each nvidia-smi GPU joined to the one candidate (an NVIDIA
    adapter: a DirectX key or a PnP device, with "pci_location" and "description") at its PCI location, where every
    candidate has one ("pci_location"); else by name ("name"). A candidate that two GPUs find (identical GPUs by name)
    joins neither; a GPU left without one is a problem, saying how many `what` matched."""
    by_location = all(c["pci_location"] is not None for c in candidates) and bool(candidates)
    found = dict((gpu["index"], _by_location(gpu, candidates) if by_location else _by_name(gpu, gpus, candidates, seen_luids))
                 for gpu in gpus)
    finders = [id(c) for matches in found.values() for c in matches]
    joined, problems = {}, []
    for gpu in gpus:
        matches = found[gpu["index"]]
        if len(matches) == 1 and finders.count(id(matches[0])) == 1:
            joined[gpu["index"]] = matches[0]
            continue
        how = "at its PCI location %s" % gpu.get("pci_bus_id") if by_location else "of that name"
        shared = ", which another GPU matches too" if len(matches) == 1 else ""
        problems.append("GPU %s (%s): %d %s %s%s" % (gpu["index"], gpu.get("name"), len(matches), what, how, shared))
    return joined, "pci_location" if by_location else "name", problems


def _by_location(gpu, candidates):
    return [c for c in candidates if same_place(gpu, c)]


def _by_name(gpu, gpus, candidates, seen_luids):
    """The candidates of the GPU's name (two of one name: those whose LUID the counters show); a single GPU and a
    single candidate always join."""
    if len(gpus) == 1 and len(candidates) == 1:
        return candidates
    named = [c for c in candidates if (c["description"] or "").strip().lower() == (gpu.get("name") or "").strip().lower()]
    if len(named) > 1:
        named = [c for c in named if c.get("luid") in seen_luids] or named
    return named


def _holders(gpus, luids, counters, processes, probes):
    by_pid = dict((p["pid"], p) for p in processes)
    listed = {}
    for gpu in gpus:
        for entry in gpu.get("processes") or []:
            listed.setdefault(entry["pid"], []).append((gpu["index"], entry))
    holders, vanished = [], []
    for pid in sorted(set(listed) | set(pid for pid, e in counters.by_pid.items() if _on_nvidia(e, luids))):
        process = by_pid.get(pid)
        if process is None:
            vanished.append(pid)  # ended between the probes: nothing to act on
            continue
        holders.append(_holder(process, listed.get(pid, []), counters.by_pid.get(pid), luids))
    probes["processes"]["vanished_pids"] = vanished
    return holders


def _on_nvidia(entry, luids):
    return any(luid in luids and usage.get("dedicated_bytes") for luid, usage in entry["by_luid"].items())


def _holder(process, listed, counter, luids):
    by_gpu, shared = {}, 0
    for luid, usage in ((counter or {}).get("by_luid") or {}).items():
        if luid in luids and (usage.get("dedicated_bytes") or usage.get("shared_bytes")):
            key = str(luids[luid])
            by_gpu[key] = by_gpu.get(key, 0) + (usage.get("dedicated_bytes") or 0) // MIB
            shared += usage.get("shared_bytes") or 0
    gpus = sorted(set([index for index, _entry in listed] + [int(key) for key in by_gpu]))
    smi_used = [entry["used_mib"] for _index, entry in listed if entry.get("used_mib") is not None]
    used = sum(by_gpu.values()) if by_gpu else (sum(smi_used) if smi_used else None)
    reasons = [entry.get("used_mib_reason") for _index, entry in listed if entry.get("used_mib_reason")]
    seen_by = (["nvidia-smi"] if listed else []) + (["counters"] if by_gpu else [])
    holder = dict(process, gpus=gpus, used_mib=used, used_mib_by_gpu=by_gpu, shared_mib=shared // MIB, seen_by=seen_by,
                  nvidia_smi_used_mib=sum(smi_used) if smi_used else None,
                  nvidia_smi_reason=reasons[0] if reasons and not smi_used else None,
                  used_mib_reason=None if used is not None else (reasons[0] if reasons else NO_COUNTER_REASON),
                  wsl_vm=process.get("vm_kind") == "wsl")
    holder["nvidia_smi_types"] = sorted(set(entry.get("type") or "N/A" for _index, entry in listed))
    if process["role"] == "vm":
        holder["class"] = _CLASS_OF_VM_KIND.get(process.get("vm_kind"), "vm")
    else:
        holder["class"] = _CLASS_OF_ROLE.get(process["role"]) or ("compute" if _compute_context(listed) else "graphics_session")
    return holder


def counter_residency(holder, gpus, adapter_memory):
    """What a holder's GPU Process Memory "Dedicated Usage" counter says of the memory it holds on each GPU, as fields:
    "counter_dedicated_mib_by_gpu" (the counter as read, per GPU), "used_mib_by_gpu" and "used_mib" (memory held: the
    counter's figure only where it is no larger than what the GPU says is used - nvidia-smi's memory.used, else its
    adapter's GPU Adapter Memory figure), "used_mib_source" (V(counter), V(nvidia-smi) or None) and, where a figure was
    set aside, "used_mib_reason" naming both figures. The per-process counter counts what the process has committed or
    mapped, shared surfaces too (dwm.exe reads 8996 MiB on a GPU using 2990 MiB): a figure larger than the GPU's whole
    use is no residency."""
    counted = dict(holder.get("used_mib_by_gpu") or {})
    used_by_index = {}
    for gpu in gpus:
        used = gpu.get("memory_used_mib")
        if used is None and gpu.get("luid") and adapter_memory.get(gpu["luid"]) is not None:
            used = adapter_memory[gpu["luid"]] // MIB
        used_by_index[str(gpu["index"])] = used
    held, set_aside = {}, []
    for key, mib in counted.items():
        limit = used_by_index.get(key)
        if limit is not None and mib > limit:
            set_aside.append("its Dedicated Usage counter on GPU %s (%d MiB) is larger than the memory that GPU uses (%d MiB): "
                             "not memory held" % (key, mib, limit))
        else:
            held[key] = mib
    fields = {"counter_dedicated_mib_by_gpu": counted, "used_mib_by_gpu": held}
    if not set_aside:
        fields["used_mib_source"] = "counter" if counted else ("nvidia-smi" if holder.get("nvidia_smi_used_mib") is not None else None)
        return fields
    smi = holder.get("nvidia_smi_used_mib")
    if held:
        fields.update(used_mib=sum(held.values()), used_mib_source="counter")
    elif smi is not None:
        fields.update(used_mib=smi, used_mib_source="nvidia-smi")
    else:
        fields.update(used_mib=None, used_mib_source=None)
    fields["used_mib_reason"] = "; ".join(set_aside)
    return fields


def _compute_context(listed):
    """Whether nvidia-smi calls the process a compute one (type C or C+G). Under WDDM every application that draws on
    the GPU holds memory on it (type G, and the GPU Process Memory counters show it): a browser or an editor is no leak
    for the kill rung, like dwm. A process the counters show and nvidia-smi does not list is not known to be compute
    either, so it is left alone too."""
    return any("C" in str(entry.get("type") or "").upper().split("+") for _index, entry in listed)


def _adapter_devices(node, gpus, locations, probes):
    """The display adapters Get-PnpDevice lists (pnputil's listing where it did not answer), each with its
    "pci_location" and "pci_domain" (from the PnP properties, by instance id) and "gpu": the nvidia-smi GPU joined to it
    ("gpu_join": how, as probes["adapter_join"]["method"]), or None."""
    if locations:
        # Get-PnpDevice answered: the adapters, their state (ConfigManagerErrorCode) and location are its numbers.
        devices = _pnputil_adapters.devices_from_cim(locations)
        probes["adapters_pnp"] = {"ok": True, "error": None, "source": "cim", "unrecognised": []}
    else:
        try:
            answer = node.command(["pnputil", "/enum-devices", "/class", "Display"], read_only=True)
        except WindowsNodeError as exc:
            probes["adapters_pnp"] = {"ok": False, "error": str(exc)}
            probes["adapter_join"] = {"ok": False, "error": "pnputil did not answer", "method": None}
            return []
        devices, unrecognised = _pnputil_adapters.parse_enum_devices(answer.stdout)
        probes["adapters_pnp"] = {"ok": answer.rc == 0, "error": None if answer.rc == 0 else "pnputil exited %s" % answer.rc,
                                  "source": "pnputil", "unrecognised": unrecognised}
    for device in devices:
        known = locations.get(device["instance_id"].lower()) or {}
        device.update(pci_location=known.get("pci_location"), pci_domain=known.get("pci_domain"), present=known.get("present"),
                      gpu=None, gpu_join=None)
        # from numbers (ConfigManagerErrorCode, Present), never from a status word: None where CIM gave none
        device["started"] = (device["present"] is not False and not device["problem_code"]) if device["state_known"] else None
    # A device Windows keeps for a card no longer there (Present false) may sit at a present one's location.
    nvidia = [d for d in devices if d["is_nvidia"] and d["present"] is not False]
    joined, method, problems = _join_to_gpus(gpus, nvidia, (), "NVIDIA PnP display adapters")
    for index, device in joined.items():
        device.update(gpu=index, gpu_join=method)
    problems = ["%s; its adapter cannot be restarted" % problem for problem in problems]
    probes["adapter_join"] = {"ok": not problems, "error": "; ".join(problems) or None, "method": method}
    return devices


def _pnp_locations(script, probes):
    """{instance id (lower case): {"present", "pci_location"}} from the snapshot script's PnP properties, or {}."""
    locations = _parsed(probes, "pnp_locations", _pnputil_adapters.parse_pnp_locations, script.get("pnp_locations"), {})
    if script.get("pnp_error"):
        probes["pnp_locations"]["error"] = script["pnp_error"]
    return locations


def _sessions(node, probes):
    try:
        found = _interactive_sessions.read(node)
    except WindowsNodeError as exc:
        probes["sessions"] = {"ok": False, "error": str(exc)}
        return []
    probes["sessions"] = {"ok": found.status == "ok", "error": found.message if found.status != "ok" else None, "source": found.source}
    if found.status == "ok" and found.source != "wts":
        probes["sessions"]["note"] = found.message
    return found.sessions
