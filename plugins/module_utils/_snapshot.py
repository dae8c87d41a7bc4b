# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One snapshot of a GPU node: the probes joined into GPUs, holders, services, driver, Xid events, verdict."""

from __future__ import annotations

import os
import re
import time

from ansible.module_utils.basic import missing_required_lib

from ansible_collections.gpuops.remediation.plugins.module_utils._gpu_names import PROCESS_STATES
from ansible_collections.gpuops.remediation.plugins.module_utils._mig_selection import (
    ambiguous_instance, instance_label, instances_text, looks_like_instance, names_gpu, narrowed_instances, node_instances, pinned_key, reaches,
    resolve_instance, scope_words, unlisted_for, unlisted_message)
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._gpu_probe import BackendUnavailable, probe_gpus_then
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._kernel_log import bus_id_to_index, probe_kernel_log
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._kmod import probe_driver
from ansible_collections.gpuops.remediation.plugins.module_utils.kill._left_behind import BUSY, probe_standing
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._cgroup import attribution
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._process import boot_time, read_process, start_time_epoch
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._procscan import scan_job, scan_processes
from ansible_collections.gpuops.remediation.plugins.module_utils._services import probe_services
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._unit_members import DAEMON, DISPLAY, UnitMembers, probe_unit_members
from ansible_collections.gpuops.remediation.plugins.module_utils._verdict import BUSY_CLASS, NO_GPU_SELECTED, NO_RUNG, answer_events, gpu_state, verdict

GPU_DEVICE = re.compile(r"/nvidia(\d+)$")
# The classes a live scheduler job's process turns busy (a zombie, a D-state process or a GPU daemon stays what it is).
JOB_CLASSES = ("compute", "graphics_session")


class SnapshotOptions:
    """The knobs of a snapshot, as gpu_holders_info and the remediation modules accept them."""

    def __init__(self, gpus=None, backend="auto", probe_timeout=10.0, kernel_log_source="auto", kernel_log_path=None,
                 kernel_log_window=None, ghost_threshold_mib=256, journal_path=None, scan_memory_maps="auto", xid_policy=None):
        # None (the option left out): every GPU; a list, those it names - an empty one none (a filter that matched nothing).
        self.gpus = None if gpus is None else list(gpus)
        self.backend = backend
        self.probe_timeout = probe_timeout
        self.kernel_log_source = kernel_log_source
        self.kernel_log_path = kernel_log_path
        self.kernel_log_window = kernel_log_window
        self.ghost_threshold_mib = ghost_threshold_mib
        # The node's journal, read back for the resets and reloads that answered earlier evidence (None: the layout's).
        self.journal_path = journal_path
        # auto, always, never (gpu_holders_info's option), or acting: a remediation module, about to act.
        self.scan_memory_maps = scan_memory_maps
        # The site's Xid code -> rung (_xid_policy.parse_policy), over NVIDIA's catalog.
        self.xid_policy = xid_policy
        # Set by the snapshot when it had processes to classify: the unit members, the job probe and the standing probe
        # it asked (kill_policy's "node"), so that a kill planned from it under the same lock asks none of them again.
        self.probed = None

    @classmethod
    def from_params(cls, params):
        names = ("gpus", "backend", "probe_timeout", "kernel_log_source", "kernel_log_path", "kernel_log_window", "ghost_threshold_mib",
                 "journal_path", "scan_memory_maps", "xid_policy")
        return cls(**dict((name, params[name]) for name in names if name in params))


# gpu_holders_info's choice of scan tier (the acting modules always read every memory map).
MEMORY_MAPS_ARGUMENT_SPEC = dict(
    scan_memory_maps=dict(type="str", default="auto", choices=["auto", "always", "never"]),
)


class UnknownGpu(ValueError):
    """A selection naming no GPU of the node; keeps the GPUs the node has, for the message."""

    def __init__(self, name, gpus=()):
        super().__init__(name)
        self.name = name
        self.gpus = list(gpus)


class AmbiguousGpu(UnknownGpu):
    """A selection naming a GPU by its short bus id and, as GPU:GI[/CI], a MIG instance too."""

    def __init__(self, name, gpus, named, instance):
        super().__init__(name, gpus)
        self.named = named
        self.instance = instance


class DisagreeingGpu(UnknownGpu):
    """A selection pinned to a GPU UUID ("<GPU or instance>@GPU-<UUID>") whose GPU on this node has another UUID."""

    def __init__(self, name, gpus, named, uuid):
        super().__init__(name, gpus)
        self.named = named
        self.uuid = uuid


def _gpus_text(gpus):
    return "; ".join("%s (%s, %s)" % (gpu["index"], gpu.get("uuid") or "no UUID", gpu.get("pci_bus_id") or "no bus id")
                     for gpu in gpus) or "none"


def _ambiguous_message(error):
    bus_ids = ", ".join(gpu.get("pci_bus_id") for gpu in error.gpus if gpu["index"] in error.named)
    uuids = [uuid for gpu, gi, ci, uuid in node_instances(error.gpus)
             if (gpu, gi) == error.instance[:2] and error.instance[2] in (None, ci) and uuid]
    return ("gpus: %r is both the PCI bus id of GPU %s (%s) and MIG instance %s: nothing was selected; write the bus id in full "
            "(%s) for the whole GPU, or the instance's MIG device UUID (%s) for the instance" % (
                error.name, ", ".join(str(index) for index in error.named), bus_ids, instance_label(*error.instance), bus_ids,
                ", ".join(uuids) or "none known"))


def unknown_gpu_message(error):
    """The unknown name and every GPU the node has (index, UUID, bus id), so the operator can pick one."""
    if isinstance(error, AmbiguousGpu):
        return _ambiguous_message(error)
    if isinstance(error, DisagreeingGpu):
        return ("gpus: %r names GPU %s of this node by one name and UUID %s by the other, but GPU %s is %s: the two names "
                "disagree and nothing was selected; this node has: %s" % (
                    error.name, error.named["index"], error.uuid, error.named["index"], error.named.get("uuid") or "of no known UUID",
                    _gpus_text(error.gpus)))
    unlisted = unlisted_for(error.gpus, error.name)
    if unlisted:
        return unlisted_message(error.name, unlisted)
    there = _gpus_text(error.gpus)
    if looks_like_instance(error.name) or any(gpu.get("gpu_instances") for gpu in error.gpus):
        return ("gpus: no GPU or MIG instance on this node is named %r (give an index, a UUID, a PCI bus id, a MIG device UUID "
                "or GPU:GI[/CI]); this node has: %s; MIG instances: %s" % (error.name, there, instances_text(error.gpus)))
    return "gpus: no GPU on this node is named %r (give an index, a UUID or a PCI bus id); this node has: %s" % (error.name, there)


def select_gpus(gpus, wanted):
    """Indexes of the GPUs named by index, UUID or PCI bus id; raises UnknownGpu naming the first unknown one. Only the
    option left out (None) means every GPU: an empty list selects none."""
    if wanted is None:
        return [gpu["index"] for gpu in gpus]
    selected = []
    for name in wanted:
        key, pinned = pinned_key(str(name).strip())
        match = [gpu["index"] for gpu in gpus if names_gpu(gpu, key)]
        instance = ambiguous_instance(gpus, key, match)
        if instance is not None:
            raise AmbiguousGpu(key, gpus, match, instance)
        if not match and looks_like_instance(key):
            # A MIG instance selects its GPU here; narrowed_instances() says which of its holders the selection reaches.
            match = [found[0] for found in [resolve_instance(gpus, key)] if found is not None]
        if not match:
            raise UnknownGpu(key, gpus)  # what names nothing, whatever UUID it is pinned to
        for gpu in gpus:
            if pinned and gpu["index"] in match and (gpu.get("uuid") or "").lower() != pinned.lower():
                raise DisagreeingGpu(str(name).strip(), gpus, gpu, pinned)
        selected.extend(index for index in match if index not in selected)
    return sorted(selected)


def index_by_minor(gpus):
    """{minor number: NVML index} of the GPUs whose minor is known: /dev/nvidia<N> and the driver's capabilities/gpu<N>
    name a GPU by its minor number N, which is not always its index."""
    return dict((gpu["minor_number"], gpu["index"]) for gpu in gpus if gpu.get("minor_number") is not None)


def device_gpus(devices, gpus):
    """GPU indexes of the /dev/nvidiaN nodes held: N is the device's minor number, not always its NVML index."""
    indexes = index_by_minor(gpus)
    return sorted(set(indexes.get(minor, minor) for minor in device_minors(devices)))


def device_minors(devices):
    """The N of every /dev/nvidiaN among the device paths held."""
    return set(int(m.group(1)) for m in (GPU_DEVICE.search(path) for path in devices) if m)


def holds_control_only(devices):
    """Holds /dev/nvidiactl and no /dev/nvidiaN: a client of the whole driver, which blocks every GPU's reset."""
    return not device_minors(devices) and any(os.path.basename(path) == "nvidiactl" for path in devices)


def _gpus_from_device_nodes(dev_dir):
    """Placeholders when the driver gave no answer: one per /dev/nvidiaN."""
    try:
        names = os.listdir(dev_dir)
    except OSError:
        return []
    indexes = sorted(int(name[6:]) for name in names if name.startswith("nvidia") and name[6:].isdigit())
    return [{"index": index, "minor_number": index, "uuid": None, "name": None, "pci_bus_id": None, "processes": []} for index in indexes]


def _holder_class(record, types, role):
    """The holder's class from what the kernel, the driver and the init system say (`role`: UnitMembers.role()), never
    from its name: a compute context (type C) is compute unless the init system runs it as a GPU daemon."""
    # A leader-exited thread group is alive: read_process gives it a live thread's state, never Z.
    if record["state"] == "Z" and not record.get("leader_exited"):
        return "zombie"
    if role and role["role"] == DAEMON:
        return "gpu_daemon"
    if "C" in types:
        return "compute"
    if (role and role["role"] == DISPLAY) or (types and types <= {"G"}):
        return "graphics_session"
    return "compute"


def _parent(ppid, proc_root):
    parent = read_process(ppid, proc_root) if ppid else None
    return {"ppid": ppid, "parent_name": parent["name"] if parent else None}


def build_holders(scan, gpus, proc_root="/proc", members=None, jobs=None, standing=None):
    """Join the /proc scan with the processes the driver lists, one record per pid; `members` (UnitMembers) says
    which of them the init system runs as a GPU daemon or a display server, `jobs` (_jobs.JobProbe) which belong to a
    live scheduler job, `standing` (_left_behind.StandingProbe) which compute contexts a crash left behind: the others
    are working programs (class busy, with the fact that says so in "standing")."""
    members = members or UnitMembers({}, proc_root)
    by_pid = {}
    for gpu in gpus:
        for proc in gpu.get("processes", []):
            entry = by_pid.setdefault(proc["pid"], {"memory": {}, "types": set(), "name": proc.get("name")})
            entry["memory"][gpu["index"]] = proc.get("used_mib")
            entry["types"].update(proc["type"].split("+"))
    holders = []
    for pid in sorted(set(scan) | set(by_pid)):
        driver_view = by_pid.get(pid, {"memory": {}, "types": set(), "name": None})
        record = scan.get(pid) or read_process(pid, proc_root)
        seen_by = (["nvml"] if pid in by_pid else []) + list(scan[pid]["via"] if pid in scan else [])
        if record is None:
            # Listed by the driver but not in our /proc: another PID namespace, or it just exited.
            holders.append({"pid": pid, "start_time": None, "name": driver_view["name"], "visible": False,
                            "gpus": sorted(driver_view["memory"]), "used_mib": _total(driver_view["memory"]),
                            "used_mib_per_gpu": driver_view["memory"], "seen_by": seen_by, "class": "compute",
                            "state": None, "devices": []})
            continue
        devices = scan[pid]["devices"] if pid in scan else []
        role = members.role(pid)
        holder = {
            "pid": pid, "start_time": record["start_time"], "name": record["name"], "cmdline": record["cmdline"],
            "exe": _exe(pid, proc_root),
            "user": record["user"], "uid": record["uid"], "state": PROCESS_STATES.get(record["state"], record["state"]),
            "visible": True, "gpus": sorted(set(driver_view["memory"]) | set(device_gpus(devices, gpus))),
            "used_mib": _total(driver_view["memory"]), "used_mib_per_gpu": driver_view["memory"],
            "seen_by": seen_by, "devices": devices, "class": _holder_class(record, driver_view["types"], role),
            "unit_role": role,
            "process_type": "+".join(sorted(driver_view["types"])) or None,
            # Its leader exited while threads live on: alive, classed and described by a live thread.
            "leader_exited": bool(record.get("leader_exited")),
        }
        holder.update(_parent(record["ppid"], proc_root))
        holder.update(attribution(pid, proc_root))
        holder["job"] = jobs.job_of(pid, holder) if jobs is not None and holder["class"] in JOB_CLASSES else None
        holder["standing"] = None
        if holder["class"] == "compute" and standing is not None:
            holder["standing"] = standing.standing(pid, job=holder["job"], unit=holder.get("systemd_unit"), proc_root=proc_root)
        if (holder["job"] and holder["job"]["running"]) or (holder["standing"] or {}).get("standing") == BUSY:
            holder["class"] = BUSY_CLASS
        holders.append(holder)
    return holders


def _exe(pid, proc_root):
    """The path of the process's executable (/proc/<pid>/exe), or None where it cannot be read (another user's process
    without privileges, a kernel thread): what names the process in reports, with its argv[0]."""
    try:
        return os.readlink("%s/%d/exe" % (proc_root, pid))
    except OSError:
        return None


def _total(memory):
    if not memory or any(value is None for value in memory.values()):
        return None
    return sum(memory.values())


def _attributed_mib(gpu):
    return sum(p["used_mib"] for p in gpu.get("processes", []) if p.get("used_mib") is not None)


def _unattributed_mib(gpu):
    """Memory in use on the GPU that no process the driver lists accounts for; None when that is unknown (no
    figure for the GPU, or one of its processes without a figure)."""
    procs = gpu.get("processes", [])
    used = gpu.get("memory_used_mib")
    if used is None or any(p.get("used_mib") is None for p in procs):
        return None
    return max(used - _attributed_mib(gpu), 0)


def memory_maps_tier(mode, gpus, gpu_report, ghost_threshold_mib):
    """(read every process's memory maps: bool, why). A process that holds a GPU only through a mapping is found only
    in its maps, which cost nine tenths of a scan: they are read when they can change the answer, memory in use that
    the processes the driver lists do not account for, or when a destructive rung is about to run."""
    if mode == "acting":
        return True, "a remediation module is about to act: every holder must be found"
    if mode == "always":
        return True, "asked for (scan_memory_maps=always)"
    if mode == "never":
        return False, "not asked for (scan_memory_maps=never)"
    if not gpu_report["ok"]:
        return True, "the driver did not answer: nothing rules out a holder that only maps a device"
    for gpu in gpus:
        ghost = _unattributed_mib(gpu)
        if ghost is None:
            return True, "GPU %s: the driver does not say how much memory each of its processes uses" % gpu["index"]
        if ghost > ghost_threshold_mib:
            return True, "GPU %s has %d MiB in use that no process the driver lists accounts for" % (gpu["index"], ghost)
    return False, ("the processes the driver lists account for the memory in use on every GPU (within ghost_threshold_mib); "
                   "only their maps were read")


def _listed_pids(gpus):
    return sorted(set(proc["pid"] for gpu in gpus for proc in gpu.get("processes", [])))


def _attribute_instances(holders, gpus, layout):
    """Each holder's MIG instances from the nvidia-caps nodes it holds (by device number) and the driver's process list."""
    from ansible_collections.gpuops.remediation.plugins.module_utils.probes._mig_caps import (  # pylint: disable=import-outside-toplevel
        instance_minors, instances_held)
    from ansible_collections.gpuops.remediation.plugins.module_utils.probes._mig_instances import attribute  # pylint: disable=import-outside-toplevel
    minors = instance_minors(layout.mig_capabilities_dir)
    indexes = index_by_minor(gpus)  # capabilities/gpu<M>: M is the GPU's minor number, not always its NVML index
    held = dict((h["pid"], set((indexes.get(g, g), gi, ci) for g, gi, ci in instances_held(h.get("devices") or [], minors)))
                for h in holders)
    attribute(holders, gpus, held)


def _scope_instances(gpu, instances):
    """On a MIG GPU, mark the instances the selection reaches; its ghost memory is theirs (an instance's ghost is judged
    in that instance, never another's)."""
    wanted = instances.get(gpu["index"])
    for gi in gpu.get("gpu_instances") or []:
        gi["selected"] = wanted is None or any(wanted_gi == gi["id"] for wanted_gi, dummy_ci in wanted)
    mine = [gi for gi in gpu.get("gpu_instances") or [] if gi["selected"]]
    if gpu.get("gpu_instances"):
        ghosts = [gi.get("unattributed_mib") for gi in mine]
        gpu["unattributed_mib"] = None if any(g is None for g in ghosts) else sum(ghosts)


def _finish_gpu(gpu, holders, options, probe_report, instances=None):
    gpu["attributed_mib"] = _attributed_mib(gpu)
    gpu["unattributed_mib"] = _unattributed_mib(gpu)
    _scope_instances(gpu, instances or {})
    gpu["holders"] = [h["pid"] for h in holders if gpu["index"] in h["gpus"]]
    gpu["state"] = gpu_state(gpu, holders, options.ghost_threshold_mib, probe_report)
    gpu.setdefault("lost", False)
    gpu.setdefault("pci_bus_id", None)  # NVML names no bus id for a GPU it lost
    return gpu


def _boot_epoch():
    try:
        return boot_time()
    except (IOError, OSError, ValueError):
        return None


def _lost_bus_ids(gpus, events):
    """Give a lost GPU that the driver named no bus id the one of its "fallen off the bus" / Xid 79 line.

    Bus ids in those lines that no GPU of the node has are matched to the lost GPUs without one, both in order
    (NVML numbers GPUs in PCI bus order); only when their numbers agree, so that no GPU is given another's id.
    """
    known = set(gpu.get("pci_bus_id") for gpu in gpus if gpu.get("pci_bus_id"))
    fallen = []
    for event in events:
        if event["kind"] == "fallen_off_bus" or event.get("xid") == 79:
            bus = event.get("pci_bus_id")
            if bus and bus not in known and bus not in fallen:
                fallen.append(bus)
    nameless = sorted((gpu for gpu in gpus if gpu.get("lost") and not gpu.get("pci_bus_id")), key=lambda gpu: gpu["index"])
    if nameless and len(nameless) == len(fallen):
        for gpu, bus in zip(nameless, sorted(fallen)):
            gpu.update(pci_bus_id=bus, pci_bus_id_from="kernel_log")


def _remembered_identities(gpus, layout):
    """Give a lost GPU the UUID, serial, name and bus id the watch last saw it with (its state file, root's, on this
    node; identity_from names it): a GPU off the bus answers nothing, and a vendor takes it back by these."""
    lost = [gpu for gpu in gpus if gpu.get("lost")]
    if not lost:
        return
    from ansible_collections.gpuops.remediation.plugins.module_utils.watch._watch import (  # pylint: disable=import-outside-toplevel
        DEFAULT_STATE_FILE, load_state, remembered_identity)
    from ansible_collections.gpuops.remediation.plugins.module_utils._safe_files import UnsafePath  # pylint: disable=import-outside-toplevel
    try:
        state, dummy_problem = load_state(os.path.join(layout.sim_root or "/", DEFAULT_STATE_FILE))
    except UnsafePath:
        return  # another user's file is never believed
    for gpu in lost:
        remembered = remembered_identity(gpu, state)
        if remembered:
            gpu.update(remembered, identity_from="watch_state")


def reset_blockers(holders):
    """Holders of /dev/nvidiactl and no GPU device (nv-fabricmanager, nv-hostengine, a monitoring agent, a stray
    NVML client): a client of the whole driver, which keeps every GPU from being reset."""
    blockers = []
    for holder in holders:
        devices = holder.get("devices") or []
        if holder.get("gpus") or not holds_control_only(devices):
            continue
        blockers.append({"pid": holder["pid"], "start_time": holder.get("start_time"), "name": holder.get("name"),
                         "class": holder.get("class"), "devices": devices, "systemd_unit": holder.get("systemd_unit")})
    return blockers


def mark_unkillable(holders, journal_path):
    """Name the frozen cgroup of every holder in one, and class "unkillable" a holder that outlived SIGKILL (the
    journal says so) outside one: uninterruptible sleep (D) alone is no evidence, SIGKILL ends most of it. The journal
    is read only when a holder is in D, as a process that outlives SIGKILL is."""
    if not holders:
        return
    from ansible_collections.gpuops.remediation.plugins.module_utils.kill._freezer import (  # pylint: disable=import-outside-toplevel
        cgroup_mounts, frozen_cgroup,
    )
    mounts = cgroup_mounts()
    for holder in holders:
        holder["frozen_cgroup"] = frozen_cgroup(holder["pid"], mounts=mounts) if holder.get("visible", True) else None
    if not any(h.get("state") == PROCESS_STATES["D"] for h in holders):
        return
    # Imported here, as in probe_journal: a healthy node never reads its journal (zipimport compiles a file twice).
    from ansible_collections.gpuops.remediation.plugins.module_utils.journal._reader import recent_records  # pylint: disable=import-outside-toplevel
    from ansible_collections.gpuops.remediation.plugins.module_utils.journal._evidence import outlived_kill  # pylint: disable=import-outside-toplevel
    survivors = outlived_kill(recent_records(journal_path)[0])
    for holder in holders:
        when = survivors.get((holder["pid"], holder.get("start_time")))
        if when and holder["state"] == PROCESS_STATES["D"] and not holder["frozen_cgroup"]:
            holder.update({"class": "unkillable", "outlived_kill": when})


def probe_journal(layout, options, events):
    """(completed resets and reloads, report) from the node's journal; a missing, torn or unreadable one is no error
    for the snapshot: it only means that no earlier action answers the kernel log's evidence. Read only when there is
    evidence to answer, and only its tail."""
    path = options.journal_path or layout.journal_file
    if not events:
        return [], {"path": path, "ok": True, "error": None, "records": 0, "read": False}
    # Imported only when read: _journal is the largest file a healthy node's payload would otherwise compile, twice.
    from ansible_collections.gpuops.remediation.plugins.module_utils.journal._reader import recent_records  # pylint: disable=import-outside-toplevel
    from ansible_collections.gpuops.remediation.plugins.module_utils.journal._evidence import completed_resets  # pylint: disable=import-outside-toplevel
    records, error = recent_records(path)
    report = {"path": path, "ok": error is None, "error": error, "records": len(records), "read": True}
    return completed_resets(records), report


def probe_unrestored_layouts(layout, options, gpus):
    """[{"run_id", "ts", "gpus"}] of the MIG layouts the journal says a run recorded before a reset or a reload and no
    run restored since (an interrupted run: docs/safety.md). Read only where a GPU has MIG mode on."""
    if not any((gpu.get("mig_mode") or {}).get("current") for gpu in gpus):
        return []
    from ansible_collections.gpuops.remediation.plugins.module_utils.journal._reader import recent_records  # pylint: disable=import-outside-toplevel
    from ansible_collections.gpuops.remediation.plugins.module_utils.journal._evidence import left_unrestored_layouts  # pylint: disable=import-outside-toplevel
    records, dummy_error = recent_records(options.journal_path or layout.journal_file)
    return [{"run_id": record.get("run_id"), "ts": record.get("ts"), "gpus": sorted(int(gpu) for gpu in record["layout"] if str(gpu).isdigit())}
            for record in left_unrestored_layouts(records)]


def _start_epochs(holders):
    epochs = {}
    for holder in holders:
        if holder.get("start_time") is not None:
            try:
                epochs[holder["pid"]] = start_time_epoch(holder["start_time"])
            except (IOError, OSError, ValueError):
                pass
    return epochs


def take_snapshot(module, layout, options):
    """Everything gpu_holders_info reports; the remediation modules plan from the same dict."""
    started = time.monotonic()
    # One probe process: the driver's answer, then the /proc scan once the driver's answer has chosen its tier.
    result, gpu_report, child = probe_gpus_then(module, layout, options.backend, options.probe_timeout, then=scan_job(layout))
    try:
        return _snapshot(module, layout, options, started, (result, gpu_report, child))
    finally:
        if child is not None:
            child.close()


def _snapshot(module, layout, options, started, probed):
    result, gpu_report, child = probed
    gpus = (result or {}).get("gpus") or ([] if gpu_report["ok"] else _gpus_from_device_nodes(layout.dev_dir))
    boot_epoch = _boot_epoch()
    events, log_report = probe_kernel_log(module, layout, options, boot_epoch)
    _lost_bus_ids(gpus, events)
    _remembered_identities(gpus, layout)
    selected = select_gpus(gpus, options.gpus)

    gpus_in_view = [gpu for gpu in gpus if gpu["index"] in selected]
    every_map, why = memory_maps_tier(options.scan_memory_maps, gpus_in_view, gpu_report, options.ghost_threshold_mib)
    # The maps of the processes the driver lists are read in any case: a handful, and they say how each holds its GPU.
    listed = _listed_pids(gpus)
    scan, scan_report = scan_processes(layout, options.probe_timeout, memory_maps=every_map, map_pids=listed, child=child)
    scan_report["memory_maps"] = {"scanned": every_map, "reason": why, "listed_pids": len(listed)}
    members = probe_unit_members(module, layout) if scan or listed else UnitMembers({})
    jobs = standing = None
    if scan or listed:
        # Imported only with a process to classify, as _journal and _freezer: zipimport compiles each file twice.
        from ansible_collections.gpuops.remediation.plugins.module_utils.scheduler._jobs import JobProbe  # pylint: disable=import-outside-toplevel
        jobs = JobProbe(module)
        standing = probe_standing(module, layout)
        options.probed = {"members": members, "jobs": jobs, "standing": standing}
    holders = build_holders(scan, gpus, members=members, jobs=jobs, standing=standing)
    if any(gpu.get("gpu_instances") for gpu in gpus):
        _attribute_instances(holders, gpus, layout)
    instances = narrowed_instances(gpus, options.gpus)
    holders = [h for h in holders if (not h["gpus"] and options.gpus != []) or reaches(h, selected, instances)]
    mark_unkillable(holders, options.journal_path or layout.journal_file)
    if holders:
        # A cgroup name is a container only when its runtime says so (the witness the job probe asked, its answers cached).
        from ansible_collections.gpuops.remediation.plugins.module_utils.kill._container_runtime import (  # pylint: disable=import-outside-toplevel
            confirm_holders,
        )
        confirm_holders(module, holders, witness=jobs.witness if jobs is not None else None)

    # Against every GPU: an event of an unselected GPU must not pass for one that names no GPU.
    bus_id_to_index(events, gpus)
    events = [event for event in events if event.get("gpu_index") is None or event["gpu_index"] in selected]
    completed, journal_report = probe_journal(layout, options, events)
    answer_events(events, completed, boot_epoch, holders, _start_epochs(holders))
    gpus = [_finish_gpu(gpu, holders, options, gpu_report, instances) for gpu in gpus if gpu["index"] in selected]
    snapshot = {
        # What the snapshot is of and when: a caller that keeps it (the ladder walk) can tell it is still the one to use.
        "scope": {"gpus": None if options.gpus is None else list(options.gpus), "ghost_threshold_mib": options.ghost_threshold_mib,
                  "kernel_log_source": options.kernel_log_source, "kernel_log_path": options.kernel_log_path,
                  "kernel_log_window": options.kernel_log_window, "taken_epoch": round(time.time(), 3)},
        "simulated": layout.simulated,
        "backend": gpu_report["backend"],
        "gpus": gpus,
        "holders": holders,
        "services": probe_services(members, holders),
        "driver": probe_driver(module, layout, (result or {}).get("driver_version"), (result or {}).get("cuda_version")),
        "xid_events": events,
        "reset_blockers": reset_blockers(holders),
        "probes": {"gpu": gpu_report, "process_scan": scan_report, "kernel_log": log_report, "journal": journal_report},
    }
    unrestored = probe_unrestored_layouts(layout, options, gpus)
    if unrestored:
        snapshot["mig_layouts_unrestored"] = unrestored
    snapshot["verdict"] = verdict(snapshot, options.ghost_threshold_mib)
    if options.gpus == []:
        snapshot["verdict"]["reasons"].append({"rung": NO_RUNG, "reason": NO_GPU_SELECTED})
    if instances:
        snapshot["scope"]["mig_instances"] = sorted(instance_label(g, gi, ci) for g in instances for gi, ci in instances[g])
        snapshot["verdict"]["reasons"].append({"rung": NO_RUNG, "reason": scope_words(instances)})
    snapshot["probes"]["seconds"] = round(time.monotonic() - started, 3)
    return snapshot


def snapshot_or_fail(module, layout, options):
    """take_snapshot, failing the module with a clear message for a backend that cannot run or an unknown GPU."""
    try:
        return take_snapshot(module, layout, options)
    except BackendUnavailable as exc:
        if str(exc) == "nvml":
            module.fail_json(msg=missing_required_lib("nvidia-ml-py (import pynvml), asked for by backend=nvml"))
        module.fail_json(msg="backend=nvidia_smi: nvidia-smi is not installed on this node")
    except UnknownGpu as exc:
        module.fail_json(msg=unknown_gpu_message(exc))
    return None
