# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the journal's records say: units and targets an interrupted run left down, intents left without an outcome,
the resets that answer earlier evidence, the processes that outlived SIGKILL, who the runs had to end, each run."""

from __future__ import annotations

import time

from ansible_collections.gpuops.remediation.plugins.module_utils._gpu_names import GPU_SERVICE_UNITS
from ansible_collections.gpuops.remediation.plugins.module_utils.journal._files import journal_epoch
from ansible_collections.gpuops.remediation.plugins.module_utils.journal._writer import _reset_bus_ids, command_line

# A line dated further in the future than this was written under a wrong clock: it answers nothing.
CLOCK_SLACK_SECONDS = 300

# The actions that take a node's GPUs (or the node) away, as each is journalled, and what the circuit breaker calls
# them: a reset, a driver reload (nvidia_driver_reload's modprobe -r / modprobe), a graphics restart
# (gpu_graphics_restart's isolate of multi-user.target), a reboot (the Windows walk's; a Linux reboot writes none). A
# signal, a container stop, a unit stopped or started are not: the node stays up.
DESTRUCTIVE_ACTIONS = {"gpu_reset": "GPU reset", "module_unload": "driver reload", "module_load": "driver reload",
                       "systemctl_isolate": "graphics restart", "reboot": "reboot"}


def left_stopped(records, run_id=None):
    """Units that a run stopped (systemctl_stop ok) and never started again afterwards, in stop order, skipping the
    run run_id (the caller's own). Read under the node lock: the run that stopped them is no longer acting. Only the
    GPU units a run of the collection stops (GPU_SERVICE_UNITS) are ever named: a line naming any other unit is not
    one this collection wrote, and starting it is not ours to do."""
    stopped = {}
    for record in records:
        if record.get("phase") != "outcome" or record.get("ok") is not True or record.get("unit") not in GPU_SERVICE_UNITS \
                or record.get("run_id") == run_id:
            continue
        if record.get("action") == "systemctl_stop":
            stopped[record["unit"]] = record
        elif record.get("action") == "systemctl_start":
            stopped.pop(record["unit"], None)
    return [record["unit"] for record in sorted(stopped.values(), key=lambda record: record["ts"])]


def left_isolated(records, run_id=None):
    """graphical.target when a run (not run_id, the caller's own) isolated multi-user.target to restart the graphics
    stack and nothing got the node back to graphical.target since (that run was killed in between), else None."""
    targets = dict((record["id"], record.get("target")) for record in records
                   if record.get("action") == "systemctl_isolate" and record["phase"] == "intent")
    down = False
    for record in records:
        if record.get("action") != "systemctl_isolate":
            continue
        target = targets.get(record["id"])
        if record["phase"] == "intent" and target == "multi-user.target" and record.get("run_id") != run_id:
            down = True
        elif record["phase"] == "outcome" and record.get("ok") is True and target == "graphical.target":
            down = False
    return "graphical.target" if down else None


# The actions after which a recorded MIG layout is gone: a GPU reset, the driver's unload, instances destroyed. (A
# reboot is the controller's: a layout recorded for it carries the boot id instead.)
LOSES_MIG_LAYOUT = ("gpu_reset", "module_unload", "mig_destroy")


def _entry_order(entry_id):
    """(the writing process's prefix of a journal entry id, its counter): ids are "<run id>-<token>-<n>" (_writer)."""
    prefix, dash, counter = str(entry_id).rpartition("-")
    return (prefix, int(counter)) if dash and counter.isascii() and counter.isdigit() and len(counter) < 12 else (None, None)


def _never_acted(record, records):
    """Whether the module that recorded this layout before its reset, reload or re-creation wrote no intent of an action
    that loses it afterwards: it died before its rung acted, and the layout was never lost. A record for a reboot (its
    boot id decides) or one a later run took over (`of`: the earlier run's loss stands) is never such a record."""
    if "boot_id" in record or record.get("of"):
        return False
    prefix, counter = _entry_order(record["id"])
    if prefix is None:
        return False
    for later in records:
        if later.get("phase") == "intent" and later.get("action") in LOSES_MIG_LAYOUT:
            later_prefix, later_counter = _entry_order(later.get("id"))
            if later_prefix == prefix and later_counter > counter:
                return False
    return True


def left_unrestored_layouts(records, run_id=None):
    """The MIG layouts a run recorded before a reset or a reload (intent `mig_layout` with its layout) that no run has
    restored since (no ok outcome of that intent, nor of a later `mig_layout` naming it in `of`), oldest first, skipping
    the run run_id (the caller's own) and a run that died before it acted (_never_acted: the operator may have changed
    that layout since, on purpose); a layout a later run took over (its intent's `of`) is that run's. Read under the node
    lock."""
    open_layouts = {}
    for record in records:
        if record.get("action") != "mig_layout":
            continue
        if record["phase"] == "intent" and isinstance(record.get("layout"), dict):
            # A later run's intent that took an earlier layout over (its `of`) stands for it from now on.
            for taken in [entry for entry in record.get("of") or [] if isinstance(entry, str)]:
                open_layouts.pop(taken, None)
            if record.get("run_id") != run_id and not _never_acted(record, records):
                open_layouts[record["id"]] = record
        elif record["phase"] == "outcome" and record.get("ok") is True:
            for answered in [record["id"]] + [entry for entry in record.get("of") or [] if isinstance(entry, str)]:
                open_layouts.pop(answered, None)
    return list(open_layouts.values())


def own_unrestored_layouts(records, run_id):
    """The MIG layouts the run run_id recorded (before its reboot) and has not restored yet, oldest first."""
    return [record for record in left_unrestored_layouts(records) if record.get("run_id") == run_id]


def unfinished(records):
    """The intents that have no outcome: actions a killed run may have left half done."""
    finished = set(record.get("id") for record in records if record.get("phase") == "outcome")
    return [record for record in records if record.get("phase") == "intent" and record.get("id") not in finished]


def completed_resets(records, now=None):
    """The resets and driver reloads that ended well, oldest first: what answers earlier Xid evidence.

    Each: {"action": "gpu_reset" | "nvidia_driver_reload", "time": the outcome's ts, "epoch": float,
    "gpus": [indexes] (gpu_reset) or None (a reload answers every GPU), "bus_ids": [as given to nvidia-smi]}.
    A reload is a successful load of the nvidia module (it was unloaded before). Malformed lines are skipped.
    """
    latest = time.time() + CLOCK_SLACK_SECONDS if now is None else now + CLOCK_SLACK_SECONDS
    intents, done = {}, []
    for record in records:
        if record.get("phase") == "intent":
            intents[record["id"]] = record  # the nearest earlier intent of this id
            continue
        intent = intents.get(record["id"])
        if record.get("phase") != "outcome" or record.get("ok") is not True or intent is None \
                or intent.get("action") != record.get("action"):
            continue
        epoch = journal_epoch(record.get("ts"))
        if epoch is None or epoch > latest:
            continue
        if intent.get("action") == "gpu_reset":
            gpus = intent.get("gpus") if isinstance(intent.get("gpus"), list) else []
            done.append({"action": "gpu_reset", "time": record.get("ts"), "epoch": epoch,
                         "gpus": [gpu for gpu in gpus if isinstance(gpu, int)], "bus_ids": _reset_bus_ids(intent.get("argv"))})
        elif intent.get("action") == "module_load" and intent.get("module") == "nvidia":
            done.append({"action": "nvidia_driver_reload", "time": record.get("ts"), "epoch": epoch, "gpus": None, "bus_ids": []})
    return done


def outlived_kill(records):
    """{(pid, start_time): the outcome's ts} of every process a run sent SIGKILL that was still there when its bounded
    wait ran out (_terminate): the only evidence that a process is unkillable. Malformed lines are skipped."""
    intents, found = {}, {}
    for record in records:
        if record.get("phase") == "intent" and record.get("action") == "signal":
            intents[record.get("id")] = record
        elif record.get("phase") == "outcome" and record.get("outlived_kill") is True and record.get("signal") == "KILL":
            intent = intents.get(record.get("id"))
            if intent is not None and isinstance(intent.get("pid"), int) and isinstance(intent.get("start_time"), int):
                found[(intent["pid"], intent["start_time"])] = record.get("ts")
    return found


def _owner(source):
    """What owned an ended holder, as one label: its Slurm job, pod, container or systemd unit, else None."""
    if source.get("slurm_job"):
        return "slurm job %s" % source["slurm_job"]
    if source.get("kubernetes_pod_uid"):
        return "pod %s" % source["kubernetes_pod_uid"]
    container = source.get("container")
    if isinstance(container, dict) and container.get("id"):
        return "%s container %s" % (container.get("runtime") or "", str(container["id"])[:12])
    if source.get("systemd_unit"):
        return "unit %s" % source["systemd_unit"]
    return None


def _ended(records):
    """(intent, source) of each holder a run ended: a signal after which it exited, or a container stop that went
    through; one per process and run."""
    intents = dict((record["id"], record) for record in records if record["phase"] == "intent")
    seen, ended = set(), []
    for record in records:
        intent = intents.get(record["id"])
        if record["phase"] != "outcome" or record.get("ok") is not True or intent is None:
            continue
        # A signal sent is not a process ended (TERM can be ignored): the outcome says whether it exited.
        if intent["action"] == "signal" and record.get("exited") is True and isinstance(intent.get("source"), dict) and intent["source"]:
            key = (intent.get("run_id"), intent.get("pid"), intent.get("start_time"))
            if key not in seen:
                seen.add(key)
                ended.append((intent, intent["source"]))
        elif intent["action"] == "container_stop" and isinstance(intent.get("sources"), list):
            ended.extend((intent, source) for source in intent["sources"] if isinstance(source, dict) and source)
    return ended


def leak_sources(records, since=None):
    """Who the runs had to end to get GPU memory back, grouped by user and program, most often first: the answer to
    "where do our leaks come from". since: only actions at or after this epoch.

    Each: {"user", "name", "ended" (processes), "runs" (distinct runs), "first", "last" (ts), "used_mib" (what the
    ended processes held, where the driver said), "owners" (their jobs, pods, containers or units, newest first, at
    most 10), "cmdlines" (at most 3 distinct)}.
    """
    groups = {}
    for intent, source in _ended(records):
        epoch = journal_epoch(intent.get("ts"))
        if since is not None and (epoch is None or epoch < since):
            continue
        key = (str(source.get("user")), str(source.get("name")))
        group = groups.setdefault(key, {"user": source.get("user"), "name": source.get("name"),
                                        "command": source.get("command") or source.get("name"), "ended": 0, "runs": set(),
                                        "first": intent["ts"], "last": intent["ts"], "used_mib": 0, "owners": [], "cmdlines": []})
        group["ended"] += 1
        group["runs"].add(intent.get("run_id"))
        group["first"], group["last"] = min(group["first"], intent["ts"]), max(group["last"], intent["ts"])
        memory = source.get("used_mib_per_gpu")
        if isinstance(memory, dict):
            group["used_mib"] += sum(value for value in memory.values() if isinstance(value, (int, float)) and not isinstance(value, bool))
        owner = _owner(source)
        if owner and owner not in group["owners"]:
            group["owners"].insert(0, owner)
            del group["owners"][10:]
        cmdline = command_line(source["cmdline"]) if source.get("cmdline") else None
        if cmdline and cmdline not in group["cmdlines"] and len(group["cmdlines"]) < 3:
            group["cmdlines"].append(cmdline)
    result = sorted((dict(group, runs=len(group["runs"])) for group in groups.values()), key=lambda group: group["last"], reverse=True)
    return sorted(result, key=lambda group: group["ended"], reverse=True)


def run_summaries(records, since=None):
    """One line per run that acted, oldest first: {"run_id", "first", "last", "actions", "failed", "interrupted"}."""
    runs = {}
    # Left half done: no outcome yet, or the outcome a later run wrote for it (close_interrupted).
    open_intents = set(record["id"] for record in unfinished(records)) | set(record["id"] for record in records if record.get("interrupted"))
    for record in records:
        epoch = journal_epoch(record.get("ts"))
        if since is not None and (epoch is None or epoch < since):
            continue
        run = runs.setdefault(record.get("run_id"), {"run_id": record.get("run_id"), "first": record["ts"], "last": record["ts"],
                                                     "actions": 0, "failed": 0, "interrupted": 0})
        run["first"], run["last"] = min(run["first"], record["ts"]), max(run["last"], record["ts"])
        if record["phase"] == "intent":
            run["actions"] += 1
            run["interrupted"] += record["id"] in open_intents
        elif record.get("ok") is not True and not record.get("interrupted"):
            run["failed"] += 1
    return sorted(runs.values(), key=lambda run: run["first"])
