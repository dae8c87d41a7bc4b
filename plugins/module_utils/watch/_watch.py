# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The watch: samples of a node judged against its state file, so that a condition can last longer than one run.

Pure functions, no I/O but the state file's own (load_state; written by _safe_files.write_atomic) and the node lock's probe
(probe_node_lock): a run takes its samples (snapshots, taken by gpu_watch), reduces each to what the watch judges
(sample_of, with the holder of the node lock if the ladder held it), and judge() walks them in order over the state
the previous run left, returning the new state, the findings and those that cleared (resolved). The snapshot and
the verdict answer every question about a GPU (its ghost memory, its state); the watch only counts how long an
answer has lasted.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import math
import os

from ansible_collections.gpuops.remediation.plugins.module_utils._escape import printable
from ansible_collections.gpuops.remediation.plugins.module_utils.journal._files import journal_epoch
from ansible_collections.gpuops.remediation.plugins.module_utils.journal._reader import recent_records
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._kernel_log import device_key
from ansible_collections.gpuops.remediation.plugins.module_utils._lock import describe_holder, holder_of
from ansible_collections.gpuops.remediation.plugins.module_utils._safe_files import UnsafePath, read_trusted

STATE_VERSION = 1
# Finding kinds, each judged for one GPU (or for the node: the probe that names no GPU).
FINDING_KINDS = ("high_memory_usage", "ghost_memory", "xid", "recovery_action", "unresponsive")
# Seen Xid lines remembered (by digest) to tell a new event from one already counted; a node logs far fewer.
XID_SEEN_LIMIT = 512
# The journal's actions that a rung of the ladder takes, for the last remediation of the node.
JOURNAL_RUNGS = {"signal": "kill", "container_stop": "kill", "gpu_reset": "reset", "module_load": "reload",
                 "module_unload": "reload", "systemctl_isolate": "graphics", "reboot": "reboot"}
NODE_KEY = "node"
# What a finding is known by when it clears: the receiver closes the alert by its fingerprint.
ACTIVE_FIELDS = ("fingerprint", "kind", "gpu", "gpu_index", "gpu_uuid", "pci_bus_id")
# Findings that a sample taken while the ladder holds the node lock cannot make: a GPU being reset or its driver being
# reloaded does not answer, and that is the ladder at work, not a fault.
IN_PROGRESS_SUPPRESSED = ("unresponsive",)
# Findings read from a GPU's memory: a run that could not read the GPU knows nothing of them, and resolves none.
MEMORY_KINDS = ("high_memory_usage", "ghost_memory", "recovery_action")


class Thresholds:
    """When a condition becomes a finding."""

    def __init__(self, high_usage_percent=90.0, high_usage_minutes=10.0, ghost_threshold_mib=256, ghost_samples=3,
                 state_max_age_minutes=30.0):
        self.high_usage_percent = high_usage_percent
        self.high_usage_seconds = high_usage_minutes * 60.0
        self.ghost_threshold_mib = ghost_threshold_mib
        self.ghost_samples = ghost_samples
        # A state older than this says nothing about the time since (the watch did not run): its streaks start over.
        self.state_max_age_seconds = state_max_age_minutes * 60.0


def empty_state():
    return {"version": STATE_VERSION, "updated_epoch": None, "last_success_epoch": None, "gpus": {},
            "xid": {"last_epoch": None, "seen": [], "counts": {}}, "active": {}}


def gpu_key(gpu):
    """The GPU's stable name across runs and reboots: its UUID, else its bus id, else its index."""
    if gpu.get("uuid"):
        return gpu["uuid"]
    if gpu.get("pci_bus_id"):
        return gpu["pci_bus_id"]
    return "index:%s" % gpu.get("index")


def sample_of(snapshot, epoch, lock_holder=None):
    """What the watch reads of one snapshot: the GPU probe's health and, per GPU, its memory and state; lock_holder is
    the holder of the node lock while it was taken (probe_node_lock), None when no other run held it."""
    probe = snapshot["probes"]["gpu"]
    gpus = []
    for gpu in snapshot["gpus"]:
        gpus.append({"key": gpu_key(gpu), "index": gpu.get("index"), "uuid": gpu.get("uuid"), "serial": gpu.get("serial"), "name": gpu.get("name"),
                     "pci_bus_id": gpu.get("pci_bus_id"), "memory_total_mib": gpu.get("memory_total_mib"),
                     "memory_used_mib": gpu.get("memory_used_mib"), "attributed_mib": gpu.get("attributed_mib"),
                     "unattributed_mib": gpu.get("unattributed_mib"), "holders": len(gpu.get("holders") or []),
                     "recovery_action": gpu.get("recovery_action"), "state": gpu.get("state")})
    return {"epoch": epoch, "probe_ok": bool(probe.get("ok")), "timed_out": bool(probe.get("timed_out")),
            "error": probe.get("error"), "backend": probe.get("backend"), "gpus": gpus,
            "remediation_in_progress": lock_holder is not None, "remediation_holder": lock_holder}


def probe_node_lock(path):
    """The holder of the node lock at path ({"pid", "start_time", "acquired", "description"}) when another process holds
    it, else None. Never waits and never keeps it: a shared flock tried without blocking fails while the ladder holds
    the exclusive one, and is dropped at once when it is taken (the ladder's NodeLock retries every 0.1 s)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None  # no lock file: no run of the ladder ever took the node
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as error:
        if error.errno not in (errno.EAGAIN, errno.EWOULDBLOCK, errno.EACCES):
            raise
        holder = holder_of(fd) or {}
        return dict(holder, description=describe_holder(holder))
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def used_percent(gpu):
    total, used = gpu.get("memory_total_mib"), gpu.get("memory_used_mib")
    if not total or used is None:
        return None
    return 100.0 * used / total


def _fresh(state, now, thresholds):
    updated = state.get("updated_epoch")
    return updated is not None and 0 <= now - updated <= thresholds.state_max_age_seconds


def _step_gpu(track, gpu, epoch, thresholds, hold_ghost=False):
    """One sample of one GPU: the high-usage streak's start, the ghost streak's length (held as it was when hold_ghost:
    memory that a process being killed or a GPU being reset has not yet given back is no ghost)."""
    percent = used_percent(gpu)
    if percent is not None and percent > thresholds.high_usage_percent:
        track["high_usage_since"] = track.get("high_usage_since") or epoch
    elif percent is not None:
        track["high_usage_since"] = None
    ghost = gpu.get("unattributed_mib")
    if ghost is not None and not hold_ghost:
        above = ghost > thresholds.ghost_threshold_mib
        track["ghost_samples"] = int(track.get("ghost_samples") or 0) + 1 if above else 0
    track["last_ghost_mib"] = ghost
    track["identity"] = dict((name, gpu.get(name)) for name in IDENTITY_FIELDS)
    return track


# What the state remembers of each GPU: what a GPU lost to the driver can no longer say (gpu_holders_info reads it back).
IDENTITY_FIELDS = ("index", "uuid", "serial", "name", "pci_bus_id")
DEFAULT_STATE_FILE = os.path.join("var", "lib", "gpuops", "watch_state.json")


def remembered_identity(gpu, state):
    """The fields of this GPU's identity it lacks that the state remembers ({} when it remembers none or another GPU)."""
    filled = _identified(gpu, _known_identities(state))
    return dict((name, filled[name]) for name in IDENTITY_FIELDS if gpu.get(name) is None and filled.get(name) is not None)


def _known_identities(state):
    """[identity with its "key"] of the GPUs the state remembers."""
    return [dict(track["identity"], key=key) for key, track in sorted(state.get("gpus", {}).items())
            if isinstance(track.get("identity"), dict)]


def _match(gpu, known):
    """The known identity this GPU is: the same UUID; else the same PCI device, of a known GPU whose UUID was never read;
    else the same index, of a known GPU of which neither was read (a device node's placeholder, a GPU lost to the
    driver). None when it is none of them: another GPU."""
    device = device_key(gpu.get("pci_bus_id"))
    if gpu.get("uuid"):
        entry = next((entry for entry in known if entry.get("uuid") == gpu["uuid"]), None)
        if entry is not None:
            return entry
    if device is not None:
        entry = next((entry for entry in known if device_key(entry.get("pci_bus_id")) == device
                      and (not entry.get("uuid") or not gpu.get("uuid"))), None)
        if entry is not None:
            return entry
    if gpu.get("index") is None:
        return None
    return next((entry for entry in known if entry.get("index") == gpu["index"] and (
        (not entry.get("uuid") and not entry.get("pci_bus_id")) or (not gpu.get("uuid") and device is None))), None)


def _identified(gpu, known):
    entry = _match(gpu, known)
    if entry is None:
        return dict(gpu, key=gpu_key(gpu))
    filled = dict(gpu, key=entry["key"])
    for name in IDENTITY_FIELDS:
        if filled.get(name) is None and entry.get(name) is not None:
            filled[name] = entry[name]
    return filled


def identify(state, samples):
    """The samples with every GPU under one identity across samples and runs, whatever the probe could read of it this
    time: the key of the GPU the state remembers (its UUID, else its bus id), and the UUID, bus id, index and name known
    of it filled in. A GPU the state does not know takes the identity an answering sample of this run read for it (a
    lost GPU read once by index and once by bus id is one GPU), else its own (gpu_key)."""
    known = _known_identities(state)
    read = []
    for sample in reversed([sample for sample in samples if sample["probe_ok"]]):
        for gpu in sample["gpus"]:
            if gpu.get("uuid") or gpu.get("pci_bus_id"):
                read.append(_identified(gpu, known))
    known = known + read
    return [dict(sample, gpus=[_identified(gpu, known) for gpu in sample["gpus"]]) for sample in samples]


def advance(state, samples, thresholds, now):
    """The state after these samples (oldest first). A failed probe changes no streak: it says nothing of the memory.
    A restarted state keeps the GPUs' identities (who they are does not age), not their streaks."""
    state = json.loads(json.dumps(state))
    restarted = not _fresh(state, now, thresholds)
    if restarted:
        state["gpus"] = dict((key, {"identity": track["identity"]}) for key, track in state["gpus"].items()
                             if isinstance(track.get("identity"), dict))
        state["active"] = {}
    # A run that waited for the lock behind another one may hold samples older than those already judged: history.
    judged_until = None if restarted else state.get("last_success_epoch")
    seen = set()
    for sample in samples:
        if not sample["probe_ok"] or (judged_until is not None and sample["epoch"] <= judged_until):
            continue
        state["last_success_epoch"] = sample["epoch"]
        for gpu in sample["gpus"]:
            seen.add(gpu["key"])
            _step_gpu(state["gpus"].setdefault(gpu["key"], {}), gpu, sample["epoch"], thresholds,
                      hold_ghost=sample.get("remediation_in_progress", False))
    if seen:
        # A GPU the driver no longer lists (replaced, or out of the selection) keeps no streak.
        state["gpus"] = dict((key, track) for key, track in state["gpus"].items() if key in seen)
    state["updated_epoch"] = now
    return state, restarted


def _finding(kind, gpu, message, **details):
    finding = {"kind": kind, "gpu": gpu.get("key", NODE_KEY), "gpu_index": gpu.get("index"), "gpu_uuid": gpu.get("uuid"),
               "pci_bus_id": gpu.get("pci_bus_id"), "message": message}
    finding.update(details)
    return finding


def _label(gpu):
    return "GPU %s (%s)" % (gpu.get("index"), gpu.get("uuid") or gpu.get("pci_bus_id") or "identity unknown")


def memory_findings(state, last_ok, thresholds, now):
    """High usage lasting high_usage_minutes, ghost memory for ghost_samples samples in a row, a recovery action."""
    findings = []
    in_progress = bool((last_ok or {}).get("remediation_in_progress"))
    for gpu in (last_ok or {}).get("gpus", []):
        if gpu.get("state") == "lost" and in_progress:
            continue  # fallen off the bus in the middle of a reset, as a GPU being reset may: the ladder's to judge
        if gpu.get("state") == "lost":
            # The probe answered for the other GPUs only: this one was not read, run after run until it is back.
            findings.append(_finding("unresponsive", gpu, "%s is lost to the driver (fallen off the bus): its memory and "
                                     "holders cannot be read; only a reboot brings it back" % _label(gpu), lost=True))
            continue
        track = state["gpus"].get(gpu["key"], {})
        since = track.get("high_usage_since")
        if since is not None and now - since >= thresholds.high_usage_seconds:
            findings.append(_finding("high_memory_usage", gpu, "%s has used more than %g%% of its memory for %d s" % (
                _label(gpu), thresholds.high_usage_percent, now - since), since_epoch=since, used_percent=round(used_percent(gpu) or 0, 1)))
        streak = int(track.get("ghost_samples") or 0)
        if streak >= thresholds.ghost_samples:
            findings.append(_finding("ghost_memory", gpu, "%s has had ghost memory (%s MiB in use that no live process accounts for) "
                                     "in %d samples in a row" % (_label(gpu), gpu.get("unattributed_mib"), streak),
                                     samples=streak, ghost_mib=gpu.get("unattributed_mib")))
        action = gpu.get("recovery_action")
        if action not in (None, "none"):
            findings.append(_finding("recovery_action", gpu, "the driver asks for recovery action '%s' on %s" % (action, _label(gpu)),
                                     recovery_action=action))
    return findings


def unresponsive_findings(samples, state=None):
    """A probe that timed out or failed: never an idle GPU. One finding per GPU it left unanswered: those its sample
    listed (the device nodes), else those the state remembers, else the node. A sample taken while the ladder held the
    node lock is left out: a GPU under reset does not answer."""
    samples = [sample for sample in samples if not sample.get("remediation_in_progress")]
    failed = [sample for sample in samples if not sample["probe_ok"]]
    if not failed:
        return []
    last = failed[-1]
    what = "timed out" if last["timed_out"] else "failed"
    message = "the GPU probe (%s) %s in %d of %d samples: %s" % (last["backend"] or "no backend", what, len(failed), len(samples),
                                                                 last["error"] or "no answer")
    targets = last["gpus"] or _known_identities(state or {}) or [{"key": NODE_KEY}]
    return [_finding("unresponsive", gpu, message, timed_out=last["timed_out"], failed_samples=len(failed)) for gpu in targets]


def _event_digest(event):
    return hashlib.sha256(("%s\n%s" % (event.get("time"), event.get("line"))).encode("utf-8", "replace")).hexdigest()[:24]


def new_xid_events(xid_state, events):
    """(the events not seen by an earlier run, the Xid state to keep). An event is new when it is dated after the last
    one seen, or undated or dated the same and its line was not seen; the counts per GPU and code grow by the new ones."""
    last = xid_state.get("last_epoch")
    seen = list(xid_state.get("seen") or [])
    known = set(seen)
    counts = json.loads(json.dumps(xid_state.get("counts") or {}))
    fresh = []
    for event in events:
        if event.get("kind") != "xid":
            continue
        digest = _event_digest(event)
        epoch = event.get("time_epoch")
        if digest in known or (last is not None and epoch is not None and epoch < last):
            continue
        known.add(digest)
        seen.append(digest)
        fresh.append(event)
        per_gpu = counts.setdefault(xid_gpu_key(event), {})
        per_gpu[str(event["xid"])] = per_gpu.get(str(event["xid"]), 0) + 1
    dated = [event["time_epoch"] for event in events if event.get("kind") == "xid" and event.get("time_epoch") is not None]
    newest = max(dated + ([last] if last is not None else [])) if dated or last is not None else None
    return fresh, {"last_epoch": newest, "seen": seen[-XID_SEEN_LIMIT:], "counts": counts}


def xid_gpu_key(event):
    """Xid counts are kept per GPU index (as the kernel line maps to one), else per the bus id it names."""
    if event.get("gpu_index") is not None:
        return str(event["gpu_index"])
    return event.get("pci_bus_id") or "unknown"


def _unseen_gpu(event):
    """The GPU of an Xid event when no answered sample of this run has it (the probe failed, or no GPU has its bus)."""
    index = event.get("gpu_index")
    key = "index:%s" % index if index is not None else "bus:%s" % (event.get("pci_bus_id") or "unknown")
    return {"key": key, "index": index, "pci_bus_id": event.get("pci_bus_id")}


def _remembered_gpu(event, state):
    """The GPU of the state (its key and identity, from the last run that read it) that the event's bus or index names,
    or None: so that an Xid logged while the probe fails keeps the key, and the fingerprint, of its GPU."""
    device = device_key(event.get("pci_bus_id"))
    for key, track in sorted(state["gpus"].items()):
        identity = track.get("identity") or {}
        if (device is not None and device == device_key(identity.get("pci_bus_id"))) or \
                (event.get("gpu_index") is not None and event["gpu_index"] == identity.get("index")):
            return dict(identity, key=key)
    return None


def _placed(event, state):
    """The event with the index of the GPU the state remembers on its bus, when the kernel line could not be mapped to
    one (the probe failed): its counts stay those of its GPU."""
    if event.get("kind") != "xid" or event.get("gpu_index") is not None:
        return event
    gpu = _remembered_gpu(event, state)
    return dict(event, gpu_index=gpu["index"]) if gpu and gpu.get("index") is not None else event


def xid_findings(fresh, last_ok, state):
    """One finding per GPU that logged new Xid events since the last run."""
    by_index = dict((gpu["index"], gpu) for gpu in (last_ok or {}).get("gpus", []))
    grouped = {}
    for event in fresh:
        grouped.setdefault(xid_gpu_key(event), []).append(event)
    findings = []
    for key in sorted(grouped):
        events = grouped[key]
        gpu = by_index.get(events[0].get("gpu_index")) or _remembered_gpu(events[0], state) or _unseen_gpu(events[0])
        codes = sorted(set(event["xid"] for event in events))
        findings.append(_finding("xid", gpu, "%d new Xid event(s) on %s since the last run: Xid %s" % (
            len(events), _label(gpu), ", ".join(str(code) for code in codes)), xids=codes, events=len(events),
            actions=sorted(set(event["catalog"]["action"] for event in events if event.get("catalog")))))
    return findings


def fingerprint(host, gpu, kind):
    """The same for the same host, GPU and kind of finding, run after run: what a receiver groups and deduplicates by."""
    return hashlib.sha256("\x00".join((host, gpu, kind)).encode("utf-8")).hexdigest()


def _active_entry(finding):
    return dict((name, finding.get(name)) for name in ACTIVE_FIELDS)


def unread_gpus(samples):
    """The keys of the GPUs this run could not read: listed by a sample whose probe failed, or lost to the driver, and
    read by no answering sample. Every GPU when no sample answered (None: nothing was read)."""
    answered = [sample for sample in samples if sample["probe_ok"]]
    if not answered:
        return None
    read = set(gpu["key"] for sample in answered for gpu in sample["gpus"] if gpu.get("state") != "lost")
    listed = set(gpu["key"] for sample in samples for gpu in sample["gpus"])
    return listed - read


def _unseen(entry, unread):
    return entry.get("kind") in MEMORY_KINDS and (unread is None or entry.get("gpu") in unread)


def resolved_findings(active, findings, samples):
    """(the findings active after the previous run that this run no longer makes, the active findings to keep, those
    kept active unseen).

    active is the previous state's {fingerprint: entry}. A finding is resolved only by a run that could see its GPU:
    one of a kind read from the GPU's memory (MEMORY_KINDS) on a GPU this run could not read (unread_gpus: the probe
    hung, or the GPU is lost to the driver) is kept active and returned as held, with its fingerprint, so that the
    next run that reads it fires or resolves it once. A finding of a kind that a sample taken while the ladder held
    the node lock cannot make (IN_PROGRESS_SUPPRESSED) is not resolved by such a run, only kept active: nothing is known
    of it. Each resolved or held entry has ACTIVE_FIELDS, the same fingerprint, kind and GPU as when it fired."""
    now_active = dict((finding["fingerprint"], _active_entry(finding)) for finding in findings)
    blind = any(sample.get("remediation_in_progress") for sample in samples)
    unread = unread_gpus(samples)
    resolved, held = [], []
    for fingerprint_, entry in sorted((active or {}).items()):
        if fingerprint_ in now_active:
            continue
        if _unseen(entry, unread):
            now_active[fingerprint_] = entry
            held.append(dict(entry, fingerprint=fingerprint_, held=True))
            continue
        if blind and entry.get("kind") in IN_PROGRESS_SUPPRESSED:
            now_active[fingerprint_] = entry
            continue
        resolved.append(dict(entry, fingerprint=fingerprint_))
    return resolved, now_active, held


class Judgement:
    """What judge() makes of a run: the state to keep, the findings, those that cleared since the previous run, the new
    Xid events, whether the streaks restarted."""

    def __init__(self, state, findings, fresh_xids, restarted, resolved=(), held=(), samples=()):
        self.state = state
        self.findings = findings
        self.fresh_xids = fresh_xids
        self.restarted = restarted
        self.resolved = list(resolved)
        # Active findings on GPUs this run could not read: neither made again nor resolved, still firing.
        self.held = list(held)
        # The samples with one identity per GPU (identify).
        self.samples = list(samples)


def judge(state, samples, events, thresholds, now, host):
    """The Judgement of this run's samples (oldest first) and kernel log events over the previous run's state."""
    samples = identify(state, samples)
    state, restarted = advance(state, samples, thresholds, now)
    fresh, state["xid"] = new_xid_events(state.get("xid") or {}, [_placed(event, state) for event in events])
    last_ok = next((sample for sample in reversed(samples) if sample["probe_ok"]), None)
    made = unresponsive_findings(samples, state) + memory_findings(state, last_ok, thresholds, now) + xid_findings(fresh, last_ok, state)
    findings, fingerprints = [], set()
    for finding in made:
        finding["fingerprint"] = fingerprint(host, finding["gpu"], finding["kind"])
        if finding["fingerprint"] not in fingerprints:  # one GPU, one finding of a kind (a failed probe and a lost GPU)
            fingerprints.add(finding["fingerprint"])
            findings.append(finding)
    # A restarted state (advance() emptied its active findings) knows of none that could have cleared.
    resolved, state["active"], held = resolved_findings(state.get("active"), findings, samples)
    return Judgement(state, findings, fresh, restarted, resolved, held, samples)


# ---------------------------------------------------------------- the state file

def _epoch_or_none(value):
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value))


def _count(value):
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _well_formed_track(track):
    return (isinstance(track, dict) and _epoch_or_none(track.get("high_usage_since")) and _epoch_or_none(track.get("last_ghost_mib"))
            and (track.get("ghost_samples") is None or _count(track["ghost_samples"])))


def _well_formed_xid(xid):
    counts = xid.get("counts", {})
    return (_epoch_or_none(xid.get("last_epoch")) and isinstance(xid.get("seen", []), list)
            and all(isinstance(digest, str) for digest in xid.get("seen", [])) and isinstance(counts, dict)
            and all(isinstance(per_gpu, dict) and all(_count(count) for count in per_gpu.values()) for per_gpu in counts.values()))


def _well_formed_active(active):
    return isinstance(active, dict) and all(
        isinstance(entry, dict) and isinstance(entry.get("kind"), str) and isinstance(entry.get("gpu"), str)
        for entry in active.values())


def _well_formed_state(state):
    """Whether every field a run judges with has the type this version writes (valid JSON is not a valid state)."""
    return (isinstance(state, dict) and state.get("version") == STATE_VERSION and isinstance(state.get("gpus"), dict)
            and isinstance(state.get("xid"), dict) and _epoch_or_none(state.get("updated_epoch"))
            and _epoch_or_none(state.get("last_success_epoch")) and all(_well_formed_track(t) for t in state["gpus"].values())
            and _well_formed_xid(state["xid"]) and _well_formed_active(state.get("active", {})))


STATE_PATH_OPTION = "state_path"


def load_state(path):
    """(state, problem): the state at path, or an empty state and why (None for a missing file: the first run). A state
    file or directory that another user could have written raises _safe_files.UnsafePath."""
    try:
        read = read_trusted(path, STATE_PATH_OPTION)
    except UnsafePath:
        raise  # another user's state is never believed, nor replaced: the run fails naming it
    except (IOError, OSError) as exc:
        return empty_state(), "cannot read the state file %s: %s" % (path, exc)
    if read is None:
        return empty_state(), None
    data = read[0]
    try:
        state = json.loads(data.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        return empty_state(), "the state file %s is corrupt (%s): replaced by a new one" % (path, exc)
    if not _well_formed_state(state):
        return empty_state(), "the state file %s is not one this version writes: replaced by a new one" % path
    return state, None


def dump_state(state):
    return json.dumps(state, sort_keys=True, indent=1) + "\n"


# ---------------------------------------------------------------- the node's journal

def last_remediation(records):
    """{"rung", "action", "time", "epoch"} of the latest action of the ladder that ended well, or None."""
    intents = dict((record["id"], record) for record in records if record.get("phase") == "intent")
    latest = None
    for record in records:
        if record.get("phase") != "outcome" or record.get("ok") is not True:
            continue
        intent = intents.get(record["id"], record)
        action = intent.get("action")
        if action not in JOURNAL_RUNGS or (action.startswith("module_") and intent.get("module") != "nvidia"):
            continue
        epoch = journal_epoch(record.get("ts"))
        if epoch is not None and (latest is None or epoch >= latest["epoch"]):
            latest = {"rung": JOURNAL_RUNGS[action], "action": action, "time": record.get("ts"), "epoch": epoch}
    return latest


def read_last_remediation(path):
    """(last_remediation of the journal at path, error or None); a missing journal is no error."""
    records, error = recent_records(path)
    return last_remediation(records), error


def remediation_for(findings, kinds):
    """Whether the watch's findings ask for the ladder, and on which GPUs: {"needed": bool, "gpus": [index as str]}.

    Only findings of a kind in `kinds` count. The ladder is narrowed to their GPUs, so that it leaves the other GPUs'
    processes alone; a finding that names no GPU (a probe that failed for the whole node) widens it to every GPU (None:
    the gpus option left out - an empty list selects none).
    """
    crossed = [finding for finding in findings if finding.get("kind") in kinds]
    if any(finding.get("gpu_index") is None for finding in crossed):
        return {"needed": bool(crossed), "gpus": None}
    return {"needed": bool(crossed), "gpus": sorted(set(str(finding["gpu_index"]) for finding in crossed), key=int)}


NOTHING_CROSSED = "nothing crossed a threshold"


def alert_of(findings, held, resolved):
    """What the role posts to the webhook, as Alertmanager's webhook says it: {"status", "alerts", "send", "lines"}.

    Each alert says whether it fires or is resolved, so that a receiver closes it by its fingerprint; a finding held on a
    GPU this run could not read fires still, never resolved. The body's status is firing while any alert fires. `send`:
    whether there is anything to post; `lines`: what crossed a threshold, one line a finding, for the run's output.
    """
    alerts = ([dict(finding, status="firing") for finding in findings] + [dict(entry, status="firing") for entry in held]
              + [dict(entry, status="resolved") for entry in resolved])
    firing = bool(findings) or bool(held)
    return {"status": "firing" if firing else "resolved", "alerts": alerts, "send": bool(alerts),
            "lines": [printable(finding["message"]) for finding in findings] or [NOTHING_CROSSED]}  # console lines
