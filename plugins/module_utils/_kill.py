# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one kill path: which holders to end, and how each kind is ended, for every module that ends a process.

Selection (gpu_kill's options) picks holders out of a snapshot; HolderKiller ends what it is given with one
policy: D-state holders are left (no signal ends them), zombies are reaped through their parent (_zombies), a
holder in another container is handled through that container's runtime (_containers), and everything else goes
through _protect's triage (who may be signalled) to _terminate (pid + start time checked before every signal).
gpu_kill, gpu_reset and nvidia_driver_reload all end holders here, with the options of the doc fragment
gpuops.remediation.kill.
"""

from __future__ import annotations

import re

from ansible_collections.gpuops.remediation.plugins.module_utils._containers import predict_stop, stop_container
from ansible_collections.gpuops.remediation.plugins.module_utils._jobs import JobProbe
from ansible_collections.gpuops.remediation.plugins.module_utils._journal import holder_source
from ansible_collections.gpuops.remediation.plugins.module_utils._node import current_layout
from ansible_collections.gpuops.remediation.plugins.module_utils._procscan import read_process
from ansible_collections.gpuops.remediation.plugins.module_utils._protect import Policy, refusal, terminate_permitted
from ansible_collections.gpuops.remediation.plugins.module_utils._protect_entries import ProtectEntryError, check_entries, check_units
from ansible_collections.gpuops.remediation.plugins.module_utils._services import unit_states
from ansible_collections.gpuops.remediation.plugins.module_utils._terminate import Target, signal_number
from ansible_collections.gpuops.remediation.plugins.module_utils._unit_members import probe_unit_members
from ansible_collections.gpuops.remediation.plugins.module_utils._verdict import BUSY_CLASS
from ansible_collections.gpuops.remediation.plugins.module_utils._zombies import reap_zombie

KILL_ARGUMENT_SPEC = dict(
    signals=dict(type="list", elements="str", default=["TERM", "KILL"]),
    grace=dict(type="float", default=10.0),
    containers=dict(type="str", choices=["stop", "kill", "skip"], default="stop"),
    protect_names=dict(type="list", elements="str", default=[]),
    protect_users=dict(type="list", elements="str", default=[]),
    protect_units=dict(type="list", elements="str", default=[]),
    allow_display=dict(type="bool", default=False),
    allow_daemons=dict(type="bool", default=False),
    reap_zombies=dict(type="bool", default=True),
    allow_parent_termination=dict(type="bool", default=False),
    end_running_jobs=dict(type="bool", default=False),
)

SELECTION_ARGUMENT_SPEC = dict(
    holders=dict(type="list", elements="dict"),
    users=dict(type="list", elements="str", default=[]),
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
    params = module.params
    if params["grace"] <= 0:
        module.fail_json(msg="grace must be more than 0 seconds, got %r: a process needs time to exit after a signal "
                             "(to end processes at once, set signals=[KILL])" % params["grace"])
    if not params["signals"]:
        module.fail_json(msg="signals must name at least one signal, got []")
    for name in params["signals"]:
        try:
            signal_number(name)
        except (AttributeError, ValueError):
            module.fail_json(msg="signals: %r is not a signal name (TERM, INT, KILL, ...)" % name)
    try:
        check_entries(params)
    except ProtectEntryError as exc:
        module.fail_json(msg=str(exc))
    if on_node:
        kill_policy(module)


def kill_policy(module):
    """The Policy of the module's kill options, every protect entry resolved on this node (the user and group
    database, systemd): an entry that names nothing fails the module, naming the option and the entry."""
    params = module.params
    layout = current_layout()
    try:
        check_entries(params)
        units = list(params["protect_units"] or [])
        states = unit_states(module, layout.command(module, "systemctl"), units) if units else {}
        check_units(units, states)
        return Policy(protect_names=params["protect_names"], protect_users=params["protect_users"],
                      protect_units=units, allow_display=params["allow_display"],
                      allow_daemons=params["allow_daemons"], allow_parents=params["allow_parent_termination"],
                      members=probe_unit_members(module, layout), unit_states=states,
                      jobs=JobProbe(module), end_running_jobs=params["end_running_jobs"])
    except ProtectEntryError as exc:
        module.fail_json(changed=False, msg=str(exc))
    return None


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


def validate_selection_params(module):
    """Compiled patterns; params["holders"] becomes (pid, start time) pairs. Fails naming the option and the value."""
    params = module.params
    if params["min_memory_mib"] is not None and params["min_memory_mib"] < 0:
        module.fail_json(msg="min_memory_mib must be 0 or more, got %r" % params["min_memory_mib"])
    patterns = {}
    for option in ("name_pattern", "cmdline_pattern"):
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

    def matches(self, holder, gpu_indexes):
        params = self.params
        if params["gpus"] and not set(holder["gpus"]) & gpu_indexes:
            return False
        # Unkillable and busy holders are selected whatever `classes` says, and left alone with the reason.
        if holder["class"] not in params["classes"] and holder["class"] not in ("unkillable", BUSY_CLASS):
            return False
        if params["users"] and not set(params["users"]) & set([str(holder.get("user")), str(holder.get("uid"))]):
            return False
        cmdline = holder.get("cmdline") or []
        if "name_pattern" in self.patterns:
            names = [holder.get("name") or ""] + cmdline[:1]
            if not any(self.patterns["name_pattern"].search(name) for name in names):
                return False
        if "cmdline_pattern" in self.patterns and not self.patterns["cmdline_pattern"].search(" ".join(cmdline)):
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
        holders = [h for h in snapshot["holders"] if h.get("visible", True) and self.matches(h, gpu_indexes)]
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


def _left(holder, reason):
    return {"pid": holder["pid"], "start_time": holder.get("start_time"), "name": holder.get("name"), "reason": reason}


class HolderKiller:
    """Ends holders (snapshot records) with the kill options of a module's params; check mode only predicts."""

    def __init__(self, module, journal):
        self.module = module
        self.params = module.params
        self.journal = journal
        self.policy = kill_policy(module)

    def end(self, holders, predict_only=False):
        """{"signalled", "left_alone", "zombies", "containers", "changed"} for these holders.

        In check mode, or with predict_only, nothing is signalled: the result is what a real run would do.
        """
        result = {"signalled": [], "left_alone": [], "zombies": [], "containers": []}
        targets, zombies, containers = self._triage(holders, result["left_alone"])
        check_mode = self.module.check_mode or predict_only
        outcome = terminate_permitted(targets, self.policy, signals=self.params["signals"], grace=self.params["grace"],
                                      journal=self.journal, check_mode=check_mode)
        result["signalled"] = outcome["signalled"]
        result["left_alone"].extend(outcome["skipped"])
        for zombie in [{"pid": z["pid"], "start_time": z["start_time"]} for z in zombies] + outcome["zombies"]:
            result["zombies"].append(self._reap(zombie, check_mode))
        for (runtime, container_id), members in sorted(containers.items()):
            result["containers"].append(self._stop(runtime, container_id, members, check_mode))
        result["changed"] = acted(result)
        return result

    def _triage(self, holders, left_alone):
        """Split holders into plain targets, zombies and containers to stop; the others are left alone."""
        targets, zombies, containers = [], [], {}
        for holder in holders:
            if holder["class"] == "unkillable":
                left_alone.append(_left(holder, "unkillable: uninterruptible sleep (D); a reset, reload or reboot is needed"))
            elif holder["class"] == "zombie":
                zombies.append(holder)
            elif holder.get("container") and self.params["containers"] != "kill":
                self._container(holder, containers, left_alone)
            else:
                targets.append(Target(holder["pid"], holder["start_time"], reason="holds GPU %s" % holder["gpus"],
                                      source=holder_source(holder)))
        return targets, zombies, containers

    def _container(self, holder, containers, left_alone):
        container = holder["container"]
        if self.params["containers"] == "skip":
            left_alone.append(_left(holder, "in %s container %s (containers=skip)" % (container["runtime"], container["id"])))
            return
        why_not = refusal(Target(holder["pid"], holder["start_time"]), self.policy)
        if why_not:
            left_alone.append(_left(holder, why_not))
            return
        containers.setdefault((container["runtime"], container["id"]), []).append(holder)

    def _reap(self, zombie, check_mode):
        if not self.params["reap_zombies"]:
            return dict(zombie, reaped_by=None, gone=False, reason="reap_zombies=false")
        return reap_zombie(zombie["pid"], zombie["start_time"], self.policy, grace=self.params["grace"], journal=self.journal,
                           check_mode=check_mode, signals=self.params["signals"])

    def _stop(self, runtime, container_id, members, check_mode):
        if check_mode:
            ok, message = predict_stop(self.module, runtime, container_id)
        else:
            ok, message = stop_container(self.module, runtime, container_id, self.params["grace"], self.journal,
                                         sources=[holder_source(holder) for holder in members])
        return {"runtime": runtime, "id": container_id, "pids": [holder["pid"] for holder in members], "ok": ok, "message": message}


def beyond_selection(module, holders, selected):
    """With the gpus option set, the holders to end that hold none of the selected GPUs (a client of the whole
    driver, a job on an NVLink peer or on another GPU of the node): a run narrowed to some GPUs ends none of them.
    Fails, naming them, when there are any."""
    if not module.params["gpus"]:
        return
    outside = [h for h in holders if not set(h.get("gpus") or []) & set(selected)]
    if outside:
        module.fail_json(changed=False, msg="refused: gpus=%s narrows this run to GPU %s, but ending what blocks it would also "
                         "end %s; leave gpus empty to allow ending them" % (
                             module.params["gpus"], ",".join(str(index) for index in sorted(selected)), ", ".join(
                                 "pid %s (%s, on %s)" % (h["pid"], h.get("name"), "GPU " + ",".join(str(g) for g in h["gpus"])
                                                         if h.get("gpus") else "no GPU: a client of the whole driver")
                                 for h in outside)))


def acted(result):
    """Whether ending changed the node: a signal sent (to a holder, or to a zombie's parent), a container stopped."""
    return bool(result["signalled"] or [z for z in result["zombies"] if z.get("reaped_by") or z.get("parent_signalled")]
                or [c for c in result["containers"] if c["ok"]])


def ended_pids(result):
    """Pids that ended (or, in check mode, would)."""
    pids = set(s["pid"] for s in result["signalled"] if s.get("exited"))
    pids |= set(z["pid"] for z in result["zombies"] if z.get("gone"))
    pids |= set(pid for c in result["containers"] if c["ok"] for pid in c["pids"])
    return pids


def failures(result):
    """Actions that were attempted and failed, as sentences: a failed action is reported as failed."""
    stops = ["could not stop %s container %s: %s" % (c["runtime"], c["id"], c["message"] or "no message")
             for c in result["containers"] if not c["ok"]]
    survivors = ["pid %s (%s) still runs after %s" % (s["pid"], s.get("name"), ", ".join(s.get("signals") or []))
                 for s in result["signalled"] if not s.get("exited")]
    return stops + survivors


def still_holding(result, holders):
    """The holders given to end() that did not end, each with why: what blocks a reset or an unload."""
    ended = ended_pids(result)
    reasons = dict((entry["pid"], entry["reason"]) for entry in result["left_alone"])
    reasons.update((z["pid"], z.get("reason") or "zombie not reaped") for z in result["zombies"] if not z.get("gone"))
    reasons.update((pid, "container not stopped: %s" % c["message"]) for c in result["containers"] if not c["ok"] for pid in c["pids"])
    return [_left(h, reasons.get(h["pid"]) or "still running after %s" % _signals_sent(result, h["pid"]))
            for h in holders if h["pid"] not in ended]


def _signals_sent(result, pid):
    sent = [entry.get("signals") for entry in result["signalled"] if entry["pid"] == pid]
    return ", ".join(sent[0]) if sent and sent[0] else "no signal"
