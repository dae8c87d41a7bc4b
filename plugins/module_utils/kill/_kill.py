# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one kill path: which holders to end, and how each kind is ended, for every module that ends a process.

Selection (gpu_kill's options) picks holders out of a snapshot; HolderKiller ends what it is given with one
policy: holders that outlived SIGKILL are left (no signal ends them), zombies are reaped through their parent (_zombies), a
holder in another container is handled through that container's runtime (_containers), and everything else goes
through _protect's triage (who may be signalled) to _terminate (pid + start time checked before every signal; the
signals each one gets planned from its signal state, _signal_state), after its frozen cgroup, if any, is thawed
(thaw_frozen) or the run refused (_freezer).
gpu_kill, gpu_reset and nvidia_driver_reload all end holders here, with the options of the doc fragment
gpuops.remediation.kill.
"""

from __future__ import annotations

import os
import re
import tempfile
import time

from ansible_collections.gpuops.remediation.plugins.module_utils.kill._container_runtime import ContainerWitness, namespace_members
from ansible_collections.gpuops.remediation.plugins.module_utils.kill._containers import predict_stop, stop_container
from ansible_collections.gpuops.remediation.plugins.module_utils.kill._freezer import describe, frozen_cgroup, thaw
from ansible_collections.gpuops.remediation.plugins.module_utils.scheduler._jobs import JobProbe
from ansible_collections.gpuops.remediation.plugins.module_utils.journal._writer import holder_source
from ansible_collections.gpuops.remediation.plugins.module_utils.kill._left_behind import probe_standing
from ansible_collections.gpuops.remediation.plugins.module_utils._node import current_layout
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._process import read_process, same_process
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._procscan import scan_holders_report
from ansible_collections.gpuops.remediation.plugins.module_utils._mig_selection import holder_instances, narrowed_instances, outside_instances, reaches
from ansible_collections.gpuops.remediation.plugins.module_utils._snapshot import device_gpus
from ansible_collections.gpuops.remediation.plugins.module_utils.kill._protect import Policy, parent_of, refusal, supervisor, terminate_permitted
from ansible_collections.gpuops.remediation.plugins.module_utils._argument_specs import check_kill_options
from ansible_collections.gpuops.remediation.plugins.module_utils.kill._protect_entries import (
    ProtectEntryError, check_entries, check_selected_users, check_units)
from ansible_collections.gpuops.remediation.plugins.module_utils._services import unit_states
from ansible_collections.gpuops.remediation.plugins.module_utils.kill._terminate import POLL_INTERVAL, Target
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._unit_members import probe_unit_members
from ansible_collections.gpuops.remediation.plugins.module_utils._verdict import BUSY_CLASS
from ansible_collections.gpuops.remediation.plugins.module_utils.kill._zombies import reap_zombie

# What HolderKiller.end() reports, as gpu_reset and nvidia_driver_reload return it under `killed`.
KILL_RESULT_KEYS = ("signalled", "left_alone", "zombies", "containers", "unconfirmed_containers", "thawed")

SELECTION_ARGUMENT_SPEC = dict(
    holders=dict(type="list", elements="dict"),
    users=dict(type="list", elements="str"),
    name_pattern=dict(type="str"),
    cmdline_pattern=dict(type="str"),
    min_memory_mib=dict(type="int"),
    classes=dict(type="list", elements="str", choices=["compute", "graphics_session", "gpu_daemon", "zombie"],
                 default=["compute", "graphics_session", "gpu_daemon", "zombie"]),
    orphans_only=dict(type="bool", default=False),
)


def validate_kill_params(module, on_node=False):
    """Fail, naming the option and the value, before anything is signalled; on_node (a module on its node, not the
    ladder's check on the controller): also resolve every protect entry there (kill_policy)."""
    check_kill_options(module)
    if on_node:
        kill_policy(module, probe_node=False)


def kill_policy(module, probe_node=True, probed=None):
    """The Policy of the module's kill options, every protect entry resolved on this node (the user and group
    database, systemd): an entry that names nothing fails the module, naming the option and the entry.

    probe_node=False: the entries alone, for the check before the lock; the GPU units' members, the scheduler and
    the standing of processes are read only for the Policy that ends holders (one `systemctl show` less a run).
    probed: those three as the snapshot the holders come from asked them under the same lock (SnapshotOptions.probed):
    the facts the plan was made from, not asked again."""
    params = module.params
    layout = current_layout()
    try:
        check_entries(params)
        units = list(params["protect_units"] or [])
        states = unit_states(module, layout.command(module, "systemctl"), units) if units else {}
        check_units(units, states)
        node = {}
        if probe_node:
            node = probed or {"members": probe_unit_members(module, layout), "jobs": JobProbe(module), "standing": probe_standing(module, layout)}
        return Policy(protect_names=params["protect_names"], protect_users=params["protect_users"],
                      protect_units=units, allow_display=params["allow_display"],
                      allow_daemons=params["allow_daemons"], allow_parents=params["allow_parent_termination"],
                      unit_states=states, end_running_jobs=params["end_running_jobs"], explicit=explicit_selection(params), **node)
    except ProtectEntryError as exc:
        module.fail_json(changed=False, msg=str(exc))
    return None


def explicit_selection(params):
    """Whether the operator named what to end (holders by pid, a name or command line pattern, users): a busy process
    so named is ended, as with end_running_jobs."""
    return bool(params.get("holders") is not None or params.get("name_pattern") or params.get("cmdline_pattern") or params.get("users"))


def _whole_number(value):
    """value as an int when it is a whole number given as an int or as decimal digits; else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        return int(value.strip())
    return None


def process_identities(option, holders):
    """[{"pid", "start_time"}] from the holders given, or (None, error naming the option and the bad element)."""
    identities = []
    for position, holder in enumerate(holders):
        pid = _whole_number(holder.get("pid")) if isinstance(holder, dict) else None
        start_time = _whole_number(holder.get("start_time")) if isinstance(holder, dict) else None
        if pid is None or pid <= 0 or start_time is None or start_time < 0:
            return None, ("%s[%d]: %r is not a process: each needs pid (a whole number > 0) and start_time (a whole "
                          "number >= 0, clock ticks since boot, as gpu_holders_info returns it)" % (option, position, holder))
        identities.append({"pid": pid, "start_time": start_time})
    return identities, None


# How much of a name or command line name_pattern and cmdline_pattern read (a command line may be 2 MiB of a user's
# choosing; the pattern is the operator's, with whatever backtracking it has): no selection depends on more.
PATTERN_TEXT_CHARS = 4096


def validate_selection_params(module):
    """Compiled patterns; params["holders"] becomes (pid, start time) pairs. Fails naming the option and the value."""
    params = module.params
    if params["min_memory_mib"] is not None and params["min_memory_mib"] < 0:
        module.fail_json(msg="min_memory_mib must be 0 or more, got %r" % params["min_memory_mib"])
    patterns = {}
    try:
        check_selected_users(params["users"])
    except ProtectEntryError as exc:
        module.fail_json(msg=str(exc))
    for option in ("name_pattern", "cmdline_pattern"):
        if params[option] == "":
            # A template that came out empty: it would match every name while selecting nothing by name.
            module.fail_json(msg="%s: '' is empty and would match everything (give a pattern, or leave %s out)" % (option, option))
        if params[option] is not None:
            try:
                patterns[option] = re.compile(params[option])
            except re.error as exc:
                module.fail_json(msg="%s: %r is not a valid regular expression: %s" % (option, params[option], exc))
    if params["holders"] is not None:
        params["holders"], error = process_identities("holders", params["holders"])
        if error:
            module.fail_json(msg=error)
    return patterns


def _owned(holder):
    """Whether a job, pod or container still owns the holder: the scheduler's word where it gave one (holder["job"]),
    else the cgroup's (a node without a scheduler's tools)."""
    if holder.get("job") is not None and not holder.get("container"):
        return bool(holder["job"]["running"])
    return bool(holder.get("slurm_job") or holder.get("container") or holder.get("kubernetes_pod_uid"))


class HolderSelection:
    """Which holders of the snapshot the selection options select, and why the explicit ones not selected are not."""

    def __init__(self, params, patterns):
        self.params = params
        self.patterns = patterns

    def matches(self, holder, gpu_indexes, instances=None):
        params = self.params
        # A GPU the selection narrows to MIG instances reaches only the holders inside them.
        if params["gpus"] is not None and not reaches(holder, gpu_indexes, instances or {}):
            return False
        # Unkillable and busy holders are selected whatever `classes` says, and left alone with the reason; no class
        # (an empty list) selects none.
        if not params["classes"] or holder["class"] not in params["classes"] and holder["class"] not in ("unkillable", BUSY_CLASS):
            return False
        if params["users"] is not None and not set(params["users"]) & set([str(holder.get("user")), str(holder.get("uid"))]):
            return False
        cmdline = holder.get("cmdline") or []
        # The operator's pattern may backtrack; what it reads is the process owner's: only its first PATTERN_TEXT_CHARS.
        if "name_pattern" in self.patterns:
            names = [holder.get("name") or ""] + cmdline[:1]
            if not any(self.patterns["name_pattern"].search(name[:PATTERN_TEXT_CHARS]) for name in names):
                return False
        if "cmdline_pattern" in self.patterns and not self.patterns["cmdline_pattern"].search(" ".join(cmdline)[:PATTERN_TEXT_CHARS]):
            return False
        if params["min_memory_mib"] is not None and (holder.get("used_mib") or 0) < params["min_memory_mib"]:
            return False
        if params["orphans_only"] and _owned(holder):
            return False
        return True

    def select(self, snapshot, gpu_indexes):
        """(selected holders, left-alone entries for explicit holders that are not selected any more).

        An explicit empty list selects nothing: it is what `selectattr(...) | list` gives when nothing matched.
        """
        instances = narrowed_instances(snapshot["gpus"], self.params["gpus"])
        holders = [h for h in snapshot["holders"] if h.get("visible", True) and self.matches(h, gpu_indexes, instances)]
        explicit = self.params["holders"]
        if explicit is None:
            return holders, []
        wanted = dict((h["pid"], h["start_time"]) for h in explicit)
        holders = [h for h in holders if wanted.get(h["pid"]) == h["start_time"]]
        found = set(h["pid"] for h in holders)
        left_alone = [{"pid": pid, "start_time": start_time, "name": None, "reason": self._why_absent(pid, start_time)}
                      for pid, start_time in sorted(wanted.items()) if pid not in found]
        return holders, left_alone

    @staticmethod
    def _why_absent(pid, start_time):
        info = read_process(pid)
        if info is None:
            return "exited"
        if info["start_time"] != start_time:
            return "pid reused: start time %s, expected %s" % (info["start_time"], start_time)
        return "does not hold a selected GPU, or is not selected by the other options"


def holdings_now(pid, snapshot):
    """{"gpus", "devices", "seen_by"} of what pid holds now, from its own /proc entry (the scan of that one process),
    with the GPU indexes of the snapshot's device minors."""
    layout = current_layout()
    with tempfile.TemporaryDirectory() as root:
        os.symlink("/proc/%d" % pid, os.path.join(root, str(pid)))
        found = scan_holders_report(layout.dev_dir, proc_root=root, sys_dir=layout.sys_dir, workers=1,
                                    nvidia_dri=layout.dri_node_rule)["holders"].get(pid) or {}
    devices = found.get("devices") or []
    return {"gpus": device_gpus(devices, snapshot["gpus"]), "devices": devices,
            "seen_by": list(found.get("via") or [])}


def _claimed(holder):
    """{"runtime", "id"} of the container a holder's cgroup path names, confirmed or not."""
    claim = holder.get("container") or holder.get("container_claim") or {}
    return {"runtime": claim.get("runtime"), "id": claim.get("id")}


def _left(holder, reason):
    return {"pid": holder["pid"], "start_time": holder.get("start_time"), "name": holder.get("name"), "reason": reason}


class HolderKiller:
    """Ends holders (snapshot records) with the kill options of a module's params; check mode only predicts."""

    def __init__(self, module, journal, probed=None):
        self.module = module
        self.params = module.params
        self.journal = journal
        self.policy = kill_policy(module, probed=probed)
        # The runtime's answers are asked once: the refusal (a running container is busy) and the stop share them.
        self.witness = self.policy.jobs.witness if self.policy is not None and self.policy.jobs is not None else ContainerWitness(module)

    def end(self, holders, predict_only=False):
        """{"signalled", "left_alone", "zombies", "containers", "unconfirmed_containers", "changed"} for these holders.

        In check mode, or with predict_only, nothing is signalled: the result is what a real run would do.
        """
        result = {"signalled": [], "left_alone": [], "zombies": [], "containers": [], "unconfirmed_containers": [], "thawed": []}
        targets, zombies, containers = self._triage(holders, result)
        check_mode = self.module.check_mode or predict_only
        result["thawed"] = self._thaw(targets + self._zombie_parents(zombies), check_mode)
        outcome = terminate_permitted(targets, self.policy, signals=self.params["signals"], grace=self.params["grace"],
                                      journal=self.journal, check_mode=check_mode, kill_grace=self.params.get("kill_grace"))
        result["signalled"] = outcome["signalled"]
        result["left_alone"].extend(outcome["skipped"])
        for zombie in [{"pid": z["pid"], "start_time": z["start_time"]} for z in zombies] + outcome["zombies"]:
            result["zombies"].append(self._reap(zombie, check_mode))
        for (runtime, container_id), members in sorted(containers.items()):
            result["containers"].append(self._stop(runtime, container_id, members, check_mode))
        result["changed"] = acted(result)
        return result

    def _kind(self, holder):
        """(kind, detail): how end() treats this holder, the one place that says so.

        "unkillable" (left alone), "zombie" (reaped through its parent), "skip" (in a confirmed container,
        containers=skip), "container" (its confirmed container is stopped), or "plain" (signalled by pid and start time);
        detail is the runtime's confirmation when the holder's cgroup names a container (else None). A container its
        runtime does not confirm makes a plain process: never a container stop.
        """
        if holder["class"] == "unkillable":
            return "unkillable", None
        if holder["class"] == "zombie":
            return "zombie", None
        if self.params["containers"] == "kill":
            return "plain", None
        if holder.get("container_claim"):  # the snapshot asked the runtime already: no container
            return "plain", {"confirmed": False, "reason": holder["container_claim"]["reason"]}
        if not holder.get("container"):
            return "plain", None
        confirmation = self.witness.confirm(holder["pid"], holder["container"])
        if not confirmation["confirmed"]:
            return "plain", confirmation
        return ("skip" if self.params["containers"] == "skip" else "container"), confirmation

    def _triage(self, holders, result):
        """Split holders into plain targets, zombies and containers to stop; the others are left alone."""
        targets, zombies, containers = [], [], {}
        left_alone = result["left_alone"]
        self.policy.know_contexts(holders)
        blocked = self._blocked_containers(holders)
        for holder in holders:
            kind, confirmation = self._kind(holder)
            if confirmation and not confirmation["confirmed"]:
                result["unconfirmed_containers"].append(dict(_left(holder, confirmation["reason"]), claimed=_claimed(holder)))
            if kind == "unkillable":
                left_alone.append(_left(holder, "unkillable: it outlived SIGKILL (journal, %s); a reset, reload or reboot is needed"
                                        % holder.get("outlived_kill")))
            elif kind == "zombie":
                zombies.append(holder)
            elif kind == "skip":
                container = holder["container"]
                left_alone.append(_left(holder, "in %s container %s (containers=skip)" % (container["runtime"], container["id"])))
            elif kind == "container":
                why_not = refusal(Target(holder["pid"], holder["start_time"]), self.policy)
                key = (holder["container"]["runtime"], holder["container"]["id"])
                if why_not:
                    left_alone.append(_left(holder, why_not))
                elif key in blocked:
                    left_alone.append(_left(holder, "in %s container %s, whose stop would also end pid %s (%s)" % (key + blocked[key])))
                else:
                    containers.setdefault(key, []).append(holder)
            else:
                targets.append(Target(holder["pid"], holder["start_time"], reason="holds GPU %s" % holder["gpus"],
                                      source=holder_source(holder)))
        return targets, zombies, containers

    def _blocked_containers(self, holders):
        """{(runtime, id): (pid, why)} of the confirmed containers to stop that hold a process of `holders` the rules
        refuse (protected, busy, a display server...): a stop ends every process of its container, so such a container
        is not stopped, and its other holders are left alone too. A holder that is gone blocks nothing."""
        blocked = {}
        for holder in holders:
            if self._kind(holder)[0] != "container":
                continue
            key = (holder["container"]["runtime"], holder["container"]["id"])
            why_not = refusal(Target(holder["pid"], holder["start_time"]), self.policy)
            if key not in blocked and why_not and same_process(holder["pid"], holder["start_time"]):
                blocked[key] = (holder["pid"], why_not)
        return blocked

    def _zombie_parents(self, zombies):
        """The parents SIGCHLD (and, allowed, the signal sequence) would go to: a frozen one reaps nothing either."""
        if not self.params["reap_zombies"]:
            return []
        parents = [parent_of(zombie["pid"]) for zombie in zombies]
        return [Target(parent["pid"], parent["start_time"]) for parent in parents
                if parent and parent.get("start_time") is not None and not refusal(Target(parent["pid"], parent["start_time"]), self.policy)]

    def _thaw(self, targets, check_mode):
        """Thaw the frozen cgroups that hold targets, when thaw_frozen allows it; else refuse the run, naming them.

        A frozen task acts on no signal until thawed (under the v1 freezer not even on SIGKILL); thawing happens first,
        so that TERM can run its handler. [{"cgroup", "file", "version", "pids", "ok", "message"}], one per cgroup.
        Only targets the rules let this run signal count: a frozen cgroup of a busy, protected or refused process (a
        Slurm job suspended through the freezer) is neither thawed nor a reason to refuse; that process is left alone."""
        frozen = {}
        for target in targets:
            if refusal(target, self.policy):
                continue
            found = frozen_cgroup(target.pid)
            if found:
                frozen.setdefault(found["cgroup"], (found, []))[1].append(target)
        if not frozen:
            return []
        if not self.params["thaw_frozen"]:
            self.module.fail_json(changed=False, msg="refused: %s; a frozen task acts on no signal until it is thawed (under "
                                  "the v1 freezer not even SIGKILL); thaw_frozen=true allows this run to thaw it" % "; ".join(
                                      "pid %s: %s" % (",".join(str(t.pid) for t in members), describe(found))
                                      for found, members in frozen.values()))
        thawed = []
        for cgroup, (found, members) in sorted(frozen.items()):
            entry = {"cgroup": cgroup, "file": found["file"], "version": found["version"], "pids": [t.pid for t in members],
                     "ok": True, "message": None}
            if not check_mode:
                entry_id = self.journal.intent("thaw_cgroup", cgroup=cgroup, file=found["file"], pids=entry["pids"]) if self.journal else None
                entry["message"] = thaw(members[0].pid, found, self.params["grace"])
                entry["ok"] = entry["message"] is None
                if self.journal:
                    self.journal.outcome(entry_id, entry["ok"], cgroup=cgroup, error=entry["message"])
            for target in members:
                target.thawed = True
            thawed.append(entry)
        return thawed

    def would_end(self, holders, snapshot):
        """Every live process that end(holders) would end, with what the snapshot says it holds: the plain targets
        the rules let through (with every holder of the PID namespace one of them is the init of), the parent of a
        zombie when it may be ended for it, and every holder of a container to stop (in its cgroup, or in its own PID
        namespace, which dies with it). A zombie is dead already: reaping it
        ends nothing. Each: {"pid", "start_time", "name", "gpus", "devices", "seen_by", "why"}.
        """
        by_pid = dict((h["pid"], h) for h in snapshot["holders"])
        ended = {}
        self.policy.know_contexts(holders)
        blocked = self._blocked_containers(holders)

        def add(pid, start_time, name, why):
            if pid not in ended:
                # A process the snapshot does not list (a zombie's parent, say) is looked at now: unknown is not nothing.
                record = by_pid.get(pid) or holdings_now(pid, snapshot)
                ended[pid] = {"pid": pid, "start_time": start_time, "name": name or record.get("name"),
                              "gpus": list(record.get("gpus") or []), "devices": list(record.get("devices") or []),
                              "seen_by": list(record.get("seen_by") or []), "mig_instances": list(record.get("mig_instances") or []),
                              "why": why}

        for holder in holders:
            kind, confirmation = self._kind(holder)
            if kind == "plain" and not refusal(Target(holder["pid"], holder["start_time"]), self.policy):
                add(holder["pid"], holder["start_time"], holder.get("name"), "selected")
                for member in namespace_members(holder["pid"], snapshot["holders"]):
                    add(member["pid"], member.get("start_time"), member.get("name"),
                        "in the PID namespace whose init, pid %s, it ends" % holder["pid"])
            elif kind == "zombie" and self.params["reap_zombies"]:
                parent = self._parent_to_end(holder)
                if parent:
                    add(parent["pid"], parent["start_time"], parent["name"], "parent of zombie %s, ended when it does not reap it" % holder["pid"])
            elif kind == "container" and not refusal(Target(holder["pid"], holder["start_time"]), self.policy) and (
                    (holder["container"]["runtime"], holder["container"]["id"]) not in blocked):
                container = holder["container"]
                for member in self.witness.members(confirmation, snapshot["holders"]):
                    add(member["pid"], member.get("start_time"), member.get("name"),
                        "in %s container %s, stopped for pid %s" % (container["runtime"], container["id"], holder["pid"]))
        return list(ended.values())

    def _stop_ends(self, members):
        """What the stop of the members' container is to end: the members, and every other live process the runtime's
        container holds now (ContainerWitness.members: its cgroup, its own PID namespace), each by pid and start time."""
        confirmation = self._kind(members[0])[1] or {}
        ends = dict((holder["pid"], holder) for holder in members)
        for process in self.witness.members(confirmation, _processes_now(self.witness.proc_root)):
            ends.setdefault(process["pid"], process)
        return list(ends.values())

    def _parent_to_end(self, zombie):
        """The zombie's parent when reap_zombie may end it (allow_parent_termination, not a supervisor, not refused)."""
        if not self.policy.allow_parents:
            return None
        parent = parent_of(zombie["pid"])
        if not parent or parent.get("start_time") is None or supervisor(parent):
            return None
        if refusal(Target(parent["pid"], parent["start_time"]), self.policy.unselected()):
            return None
        return parent

    def _reap(self, zombie, check_mode):
        if not self.params["reap_zombies"]:
            return dict(zombie, reaped_by=None, gone=False, reason="reap_zombies=false")
        return reap_zombie(zombie["pid"], zombie["start_time"], self.policy, grace=self.params["grace"], journal=self.journal,
                           check_mode=check_mode, signals=self.params["signals"], kill_grace=self.params.get("kill_grace"))

    def _stop(self, runtime, container_id, members, check_mode):
        """The stop, then every process it was to end checked by pid and start time - the selected members and every
        other process of the container (its cgroup, its own PID namespace), selected or not: only those gone are
        ended (check mode: all)."""
        if check_mode:
            ok, message = predict_stop(self.module, runtime, container_id)
            survivors = []
        else:
            to_end = self._stop_ends(members)
            ok, message = stop_container(self.module, runtime, container_id, self.params["grace"], self.journal,
                                         sources=[holder_source(holder) for holder in members])
            survivors = _survivors(to_end, self.params["grace"] if ok else 0)
        alive = set(s["pid"] for s in survivors)
        return {"runtime": runtime, "id": container_id, "pids": [holder["pid"] for holder in members], "ok": ok, "message": message,
                "ended": [holder["pid"] for holder in members if ok and holder["pid"] not in alive],
                "survivors": survivors if ok else []}


def _processes_now(proc_root):
    """Every live process of proc_root, as {"pid", "start_time", "name"} (one read of each /proc/<pid>/stat)."""
    found = []
    for name in os.listdir(proc_root):
        if name.isdigit():
            info = read_process(int(name), proc_root)
            if info is not None and info.get("state") not in ("Z", "X"):
                found.append({"pid": info["pid"], "start_time": info["start_time"], "name": info.get("name")})
    return found


def _running(holder):
    info = read_process(holder["pid"])
    return info is not None and info["start_time"] == holder["start_time"] and info.get("state") not in ("Z", "X")


def _survivors(members, wait):
    """The members (pid + start time) still running, a zombie counting as gone, after waiting up to `wait` seconds."""
    deadline = time.monotonic() + wait
    while True:
        alive = [holder for holder in members if _running(holder)]
        if not alive or time.monotonic() >= deadline:
            return [{"pid": h["pid"], "start_time": h["start_time"], "name": h.get("name")} for h in alive]
        time.sleep(POLL_INTERVAL)


def whole_driver_client(record):
    """A process the snapshot places on no GPU although it holds the driver: node-wide device files only
    (/dev/nvidiactl, /dev/nvidia-uvm, nvidia-modeset, nvidia-caps, a /dev/dri node no GPU index names) or a process the
    driver lists on no GPU. Its work can be on any GPU, so a run narrowed to some GPUs never ends it."""
    return not record.get("gpus") and bool(record.get("devices") or "nvml" in (record.get("seen_by") or []))


def beyond_selection(processes, selected, instances=None):
    """Of the processes an action would end (HolderKiller.would_end), those outside the selected GPU indexes, or on a
    GPU the selection narrows to MIG instances ({gpu: {(gi, ci or None)}}) in an instance it leaves out, each with
    "outside": the GPUs or instances beyond the selection it is in, or "the whole driver"."""
    found = []
    for process in processes:
        if whole_driver_client(process):
            found.append(dict(process, outside="no GPU: a client of the whole driver (holding %s)" % (
                ", ".join(process.get("devices") or []) or "a driver context on no GPU")))
            continue
        # A GPU instance's nvidia-caps node puts it on that GPU too, /dev/nvidia<N> held or not.
        gpus = sorted((set(process.get("gpus") or []) | set(gpu for gpu, dummy_gi, dummy_ci in holder_instances(process))) - set(selected))
        others = (["GPU " + ",".join(str(index) for index in gpus)] if gpus else []) + outside_instances(process, instances or {})
        if others:
            found.append(dict(process, outside=", ".join(others)))
    return found


def refuse_beyond_selection(module, killer, holders, snapshot, selected):
    """With the gpus option set, fail (changing nothing, in check mode alike) when ending `holders` would end a
    process that holds a GPU outside the selection, is in a MIG instance the selection leaves out, or is a client of the
    whole driver, naming each and where."""
    if module.params["gpus"] is None:
        return
    instances = narrowed_instances(snapshot["gpus"], module.params["gpus"])
    refuse_outside(module, beyond_selection(killer.would_end(holders, snapshot), selected, instances), selected)


def refuse_outside(module, outside, selected):
    """Fail, changing nothing, naming each process of beyond_selection() and why it would end; nothing when none."""
    if outside:
        module.fail_json(changed=False, beyond_selection=outside, msg=(
            "refused: gpus=%s narrows this run to GPU %s, but it would end %s; leave gpus out (every GPU), or select those GPUs "
            "too, to allow it" % (module.params["gpus"], ",".join(str(index) for index in sorted(selected)), "; ".join(
                "pid %s (%s, on %s; %s)" % (p["pid"], p.get("name"), p["outside"], p["why"]) for p in outside))))


def acted(result):
    """Whether ending changed the node: a signal sent (to a holder, or to a zombie's parent), a container stopped."""
    return bool(result["signalled"] or [z for z in result["zombies"] if z.get("reaped_by") or z.get("parent_signalled")]
                or [c for c in result["containers"] if c["ok"]] or [t for t in result.get("thawed") or [] if t["ok"]])


def ended_pids(result):
    """Pids that ended (or, in check mode, would)."""
    pids = set(s["pid"] for s in result["signalled"] if s.get("exited"))
    pids |= set(z["pid"] for z in result["zombies"] if z.get("gone"))
    pids |= set(pid for c in result["containers"] for pid in c.get("ended", c["pids"] if c["ok"] else []))
    return pids


def failures(result):
    """Actions that were attempted and failed, as sentences: a failed action is reported as failed."""
    stops = ["could not stop %s container %s: %s" % (c["runtime"], c["id"], c["message"] or "no message")
             for c in result["containers"] if not c["ok"]]
    survivors = ["pid %s (%s) still runs after %s" % (s["pid"], s.get("name"), _after(s)) for s in result["signalled"] if not s.get("exited")]
    stayed = ["pid %s (%s) of %s container %s still runs after the container was stopped" % (s["pid"], s.get("name"), c["runtime"], c["id"])
              for c in result["containers"] for s in c.get("survivors") or []]
    thaws = ["could not thaw cgroup %s: %s" % (t["cgroup"], t["message"]) for t in result.get("thawed") or [] if not t["ok"]]
    return thaws + stops + stayed + survivors


def _after(entry):
    """What was sent to a process that still runs, and what was not sent and why."""
    sent = ", ".join(entry.get("signals") or []) or "no signal"
    skipped = "; ".join("%s not sent: %s" % (skip["signal"], skip["why"]) for skip in entry.get("not_sent") or [])
    return sent + (" (%s)" % skipped if skipped else "")


def still_holding(result, holders):
    """The holders given to end() that did not end, each with why: what blocks a reset or an unload."""
    ended = ended_pids(result)
    reasons = dict((entry["pid"], entry["reason"]) for entry in result["left_alone"])
    reasons.update((z["pid"], z.get("reason") or "zombie not reaped") for z in result["zombies"] if not z.get("gone"))
    reasons.update((pid, "container not stopped: %s" % c["message"]) for c in result["containers"] if not c["ok"] for pid in c["pids"])
    reasons.update((s["pid"], "still runs after %s container %s was stopped" % (c["runtime"], c["id"]))
                   for c in result["containers"] for s in c.get("survivors") or [])
    return [_left(h, reasons.get(h["pid"]) or "still running after %s" % _signals_sent(result, h["pid"]))
            for h in holders if h["pid"] not in ended]


def _signals_sent(result, pid):
    sent = [entry.get("signals") for entry in result["signalled"] if entry["pid"] == pid]
    return ", ".join(sent[0]) if sent and sent[0] else "no signal"
