# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The instance rung's decision: which MIG GPU instances to destroy and create again, with the same profile and
placement, to get back memory that no process in them accounts for - without touching their neighbours.

An instance is re-created only when the selection reaches it, its ghost memory (used that no live process in that
instance accounts for, _mig_instances.attribute) is above the threshold, nobody holds it (no process has its nvidia-caps
node open nor is listed in it by the driver), and its profile and placement are known (else it could not be put back
exactly). Linux only.
"""

from __future__ import annotations

from ansible_collections.gpuops.remediation.plugins.module_utils.probes._mig_instances import listing_words


def _label(gpu, gi):
    return "MIG instance %s:%s (%s, profile %s, placement %s)" % (
        gpu["index"], gi["id"], gi.get("profile") or "profile unknown", gi.get("profile_id"),
        "%d:%d" % (gi["placement"]["start"], gi["placement"]["size"]) if gi.get("placement") else "unknown")


def _left_out_compute(gpu, gi, instances):
    """The compute instances of gi a selection naming some of them by GPU:GI/CI leaves out ("0:1/1"): re-creating gi would
    destroy them too. None when the selection names gi whole or all of its compute instances."""
    named = [ci for wanted_gi, ci in (instances or {}).get(gpu["index"], ()) if wanted_gi == gi["id"]]
    if not named or None in named:
        return None
    return ["%s:%s/%s" % (gpu["index"], gi["id"], ci["id"]) for ci in gi["compute_instances"] if ci["id"] not in named] or None


def recreate_plan(snapshot, ghost_threshold_mib, instances=None):
    """(to_recreate, refused) over the snapshot's MIG GPUs: the one decision of the instance rung.

    instances: the selection's MIG instances ({gpu: {(gi, ci or None)}}, _mig_selection.narrowed_instances). Each entry:
    {"gpu", "gi", "label", "profile", "profile_id", "start", "size", "compute" (compute instance profile ids),
    "compute_ids", "ghost_mib"}; a refused one also has "why". An instance with no ghost memory above the threshold is in
    neither list.
    """
    to_recreate, refused = [], []
    for gpu in snapshot["gpus"]:
        if gpu.get("mig_listing_error"):
            # No listing is no answer: which instance holds ghost memory, and what to create again, are unknown.
            refused.append({"gpu": gpu["index"], "gi": None, "label": "GPU %s" % gpu["index"],
                            "why": "its MIG instances could not be listed (%s): none is destroyed or created" % listing_words(gpu["mig_listing_error"])})
        for gi in gpu.get("gpu_instances") or []:
            ghost = gi.get("unattributed_mib")
            if not gi.get("selected", True) or ghost is None or ghost <= ghost_threshold_mib:
                continue
            entry = {"gpu": gpu["index"], "gi": gi["id"], "label": _label(gpu, gi), "profile": gi.get("profile"),
                     "profile_id": gi.get("profile_id"), "start": (gi.get("placement") or {}).get("start"),
                     "size": (gi.get("placement") or {}).get("size"), "ghost_mib": ghost,
                     "compute": sorted(ci.get("profile_id") for ci in gi["compute_instances"] if ci.get("profile_id") is not None),
                     "compute_ids": sorted(ci["id"] for ci in gi["compute_instances"])}
            holders = gi.get("holders") or []
            left_out = _left_out_compute(gpu, gi, instances)
            if left_out:
                entry["why"] = ("the selection leaves out its compute instance%s %s, which re-creating it would destroy too; name "
                                "%s:%s to allow it" % ("s" if len(left_out) > 1 else "", ", ".join(left_out), gpu["index"], gi["id"]))
            elif holders:
                entry["why"] = "held by pid %s: an instance is re-created only when nothing is in it" % ", ".join(str(pid) for pid in holders)
            elif entry["profile_id"] is None or entry["start"] is None:
                entry["why"] = "its profile or placement is unknown, so it could not be created again exactly"
            (refused if "why" in entry else to_recreate).append(entry)
    return to_recreate, refused


def with_listed_compute(entries, layout):
    """The entries with their compute instance profiles as nvidia-smi mig -lci lists them (`layout`: the layout
    MigLayoutKeeper.read gives), which NVML's MIG device handles do not say."""
    for entry in entries:
        listed = [gi for gi in layout.get(str(entry["gpu"]), []) if gi["gi"] == entry["gi"]]
        if listed:
            entry["compute"] = list(listed[0]["compute"])
    return entries


def layout_line(gpus, run_id):
    """What the rung says of a MIG layout an interrupted run left unrestored."""
    return "restore the MIG layout of GPU %s that run %s recorded before its reset or reload (it was interrupted)" % (
        ", ".join(str(gpu) for gpu in gpus), run_id)


def plan_line(entry):
    """What check mode says the rung would do to one instance."""
    return "re-create %s with compute instance profile%s %s: %s MiB in it that no process accounts for" % (
        entry["label"], "s" if len(entry["compute"]) > 1 else "", ",".join(str(p) for p in entry["compute"]) or "none", entry["ghost_mib"])


def destroy_argvs(nvidia_smi, entry):
    """The commands that destroy one instance: its compute instances, then the GPU instance."""
    gpu, gi = str(entry["gpu"]), str(entry["gi"])
    argvs = []
    if entry["compute_ids"]:
        argvs.append([nvidia_smi, "mig", "-i", gpu, "-dci", "-gi", gi, "-ci", ",".join(str(ci) for ci in entry["compute_ids"])])
    argvs.append([nvidia_smi, "mig", "-i", gpu, "-dgi", "-gi", gi])
    return argvs
