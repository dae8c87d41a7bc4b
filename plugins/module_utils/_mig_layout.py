# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Never lose a node's MIG layout: read it before a GPU reset, a driver reload or a reboot (which leave MIG mode on and
no instance at all), keep it in the journal, create exactly it again afterwards, read it back.

A layout is, per GPU index (a string, as JSON keys are), its GPU instances: {"profile_id", "start", "size", "gi" (the id
the driver gave it, for the report), "compute" (its compute instances' profile ids, sorted), "compute_placements"
(each compute instance's {"profile_id", "start", "size"} in its GPU instance, in placement order)}. Two layouts are the
same when each GPU has the same instances by profile and placement with the same compute instances by profile and
placement: the ids are the driver's to choose. Read from `nvidia-smi mig -lgi` and `-lci` (the snapshot's parsers,
_mig_instances); written with `nvidia-smi mig -i <gpu> -cgi <profile>:<start>` then `-cci <profiles> -gi <id>`, argv
only. `-cci` takes no placement: the compute instances are created in the recorded placement order (the driver gives
each the lowest free one) and read back; one the driver placed elsewhere is a failed restore naming it. Linux only.
"""

from __future__ import annotations

import re

_CREATED_GI = re.compile(r"^Successfully created GPU instance ID +(\d+) on GPU +(\d+) ")


def build_layout(gpu_instances, compute_instances, indexes):
    """The layout of the GPUs `indexes` from the listings as _mig_instances.parse_lgi and parse_lci read them
    ({(gpu, gi): {"profile", "profile_id", "placement"}} and {(gpu, gi, ci): {"profile_id", ...}})."""
    layout = dict((str(index), []) for index in indexes)
    for (gpu, gi_id), gi in sorted(gpu_instances.items()):
        if str(gpu) in layout:
            mine = [ci for (ci_gpu, ci_gi, dummy), ci in compute_instances.items() if (ci_gpu, ci_gi) == (gpu, gi_id)]
            layout[str(gpu)].append({"profile_id": gi["profile_id"], "name": gi["profile"], "start": gi["placement"]["start"],
                                     "size": gi["placement"]["size"], "gi": gi_id, "compute": sorted(ci["profile_id"] for ci in mine),
                                     "compute_placements": compute_placements(mine)})
    for instances in layout.values():
        instances.sort(key=lambda gi: gi["start"])
    return layout


def compute_placements(compute_instances):
    """[{"profile_id", "start", "size"}] of a GPU instance's compute instances in placement order (as -lci lists them)."""
    return sorted(({"profile_id": ci["profile_id"], "start": ci["placement"]["start"], "size": ci["placement"]["size"]}
                   for ci in compute_instances if ci.get("placement")), key=lambda ci: (ci["start"], ci["profile_id"]))


def _key(gi):
    return (gi["profile_id"], gi["start"])


def restore_steps(recorded, current):
    """What to create so that `current` holds every instance of `recorded`: the one decision of the layout restore.

    Returns [{"gpu": index, "profile_id", "start", "name", "gi": the id it has now (None: to create), "compute": the
    compute instance profiles to create in it}], in placement order per GPU. An instance that exists with its compute
    instances is left as it is, and an instance that is not in the record is never touched: the restore only adds.
    """
    steps = []
    for gpu, instances in sorted(recorded.items(), key=lambda item: int(item[0])):
        now = dict((_key(gi), gi) for gi in current.get(gpu, []))
        for gi in instances:
            there = now.get(_key(gi))
            # in the recorded placement order: the driver places each new compute instance at the lowest free slot
            wanted = [ci["profile_id"] for ci in gi.get("compute_placements") or []] or list(gi["compute"])
            for profile in (there or {}).get("compute", []):
                if profile in wanted:
                    wanted.remove(profile)
            if there is None or wanted:
                steps.append({"gpu": int(gpu), "profile_id": gi["profile_id"], "start": gi["start"], "name": gi.get("name"),
                              "gi": there["gi"] if there else None, "compute": wanted})
    return steps


def placement_mismatches(recorded, current):
    """Each recorded compute instance whose placement the GPU instance now (same profile and placement) does not have,
    as an operator names it ("GPU 0: 7g.80gb (profile 0) at placement 0: compute instance of profile 0 at 1:1, read back at
    0:1"): the restore created it, but elsewhere. A record without compute placements (an older run's) has none."""
    found = []
    for gpu, instances in sorted(recorded.items(), key=lambda item: int(item[0])):
        now = dict((_key(gi), gi) for gi in current.get(gpu, []))
        for gi in instances:
            there = now.get(_key(gi))
            if there is None or not gi.get("compute_placements"):
                continue
            have = [(ci["profile_id"], ci["start"], ci["size"]) for ci in there.get("compute_placements") or []]
            for ci in gi["compute_placements"]:
                if (ci["profile_id"], ci["start"], ci["size"]) not in have:
                    read = ", ".join("%d:%d" % (start, size) for profile, start, size in have if profile == ci["profile_id"]) or "none"
                    found.append("GPU %s: %s (profile %d) at placement %d: compute instance of profile %d at %d:%d, read back at %s" % (
                        gpu, gi.get("name") or "instance", gi["profile_id"], gi["start"], ci["profile_id"], ci["start"], ci["size"], read))
    return found


def follow_gpus(recorded, uuids, indexes_now):
    """The recorded layout keyed by where each GPU is now: a GPU's index can change across a reset or a reload (one that
    fell off the bus leaves the enumeration), so a record names each GPU by its UUID (`uuids`: {index then: uuid}) and
    `indexes_now` ({uuid: index now}) says where it went. Returns (layout, lost): `lost` names each recorded GPU that
    is no longer on the node, whose instances are never created on another GPU. A GPU without a recorded UUID (a
    record of an older run) keeps its index."""
    layout, lost = {}, []
    for gpu, instances in recorded.items():
        uuid = (uuids or {}).get(gpu)
        if uuid is None:
            layout[gpu] = instances
        elif uuid in indexes_now:
            layout[str(indexes_now[uuid])] = instances
        else:
            lost.append("GPU %s (%s) is not on the node any more: its instances were not created elsewhere" % (gpu, uuid))
    return layout, lost


def describe(step):
    """One instance of the layout, as an operator names it: "GPU 0: 3g.40gb (profile 9) at 4:4 with compute instances
    of profile 2"."""
    what = "GPU %d: %s (profile %d) at placement %d" % (step["gpu"], step.get("name") or "instance", step["profile_id"], step["start"])
    if step.get("compute"):
        what += " with compute instance%s of profile %s" % ("s" if len(step["compute"]) > 1 else "", ",".join(str(p) for p in step["compute"]))
    return what


def reboot_plan_line(recorded, check_mode):
    """What the reboot rung says of the layout it keeps: the GPUs and each instance it creates again after the reboot."""
    steps = restore_steps(recorded, {})
    return "%s the MIG layout of GPU %s, to create again after the reboot: %s" % (
        "would record" if check_mode else "recorded", ", ".join(sorted(recorded, key=int)),
        "; ".join(describe(step) for step in steps) or "no instance")


def create_argv(nvidia_smi, step):
    """The argv that creates the GPU instance of one step at its placement (no compute instance: create_ci_argv)."""
    return [nvidia_smi, "mig", "-i", str(step["gpu"]), "-cgi", "%d:%d" % (step["profile_id"], step["start"])]


def create_ci_argv(nvidia_smi, step, gi_id):
    return [nvidia_smi, "mig", "-i", str(step["gpu"]), "-cci", ",".join(str(profile) for profile in step["compute"]), "-gi", str(gi_id)]


def created_gi(out):
    """The id the driver gave the GPU instance -cgi created (its "Successfully created GPU instance ID" line), or None."""
    for line in out.splitlines():
        match = _CREATED_GI.match(line.strip())
        if match:
            return int(match.group(1))
    return None


def mig_gpus(snapshot, indexes):
    """The GPUs among `indexes` whose MIG mode is on now: those whose layout a reset or a reload would lose."""
    return [gpu["index"] for gpu in snapshot["gpus"] if gpu["index"] in indexes and (gpu.get("mig_mode") or {}).get("current")]


def mig_layout_at_stake(snapshot, scoped):
    """Whether a reboot of the node may lose a MIG layout: a GPU of the snapshot has MIG mode on, or the snapshot is
    `scoped` to some GPUs (a reboot reaches the others too, which it does not show)."""
    return scoped or any((gpu.get("mig_mode") or {}).get("current") for gpu in (snapshot or {}).get("gpus") or [])


def pending_mig_change(gpu):
    """Why a reset of this GPU would change its MIG mode (a change pending until the next reset), or None."""
    mode = gpu.get("mig_mode") or {}
    if mode.get("pending") is None or mode.get("current") is None or bool(mode["pending"]) == bool(mode["current"]):
        return None
    return "its MIG mode change is pending (now %s, %s after a reset): a reset would apply it" % (
        "on" if mode["current"] else "off", "on" if mode["pending"] else "off")
