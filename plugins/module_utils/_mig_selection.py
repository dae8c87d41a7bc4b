# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A selection narrowed to MIG instances: `gpus` naming a MIG device UUID (MIG-...) or GPU:GI[/CI] (as an Xid line
names an instance, GPU-I / GPU-CI), and which holders such a selection reaches (those the kernel or the driver puts in
a selected instance, nothing else of that GPU). Linux only: Windows has no MIG."""

from __future__ import annotations

import re

from ansible_collections.gpuops.remediation.plugins.module_utils.probes._pci import normalize_bus_id

# GPU : GPU instance id [/ compute instance id], the GPU by index, UUID or PCI bus id ("0:3/0", "0000:01:00:5/0"); a text
# that is also a short PCI bus id of a GPU of the node ("1:0" is 01:00.0) is refused (ambiguous_instance). Linear: the GPU
# part has no "/", the ids at most 2 ASCII digits.
_INSTANCE_KEY = re.compile(r"^(?P<gpu>[^/]{1,64}):(?P<gi>[0-9]{1,2})(?:/(?P<ci>[0-9]{1,2}))?$")


def pinned_key(key):
    """(the key, the GPU UUID it is pinned to or None): "<GPU or instance>@GPU-<UUID>" names that GPU or instance only
    when the GPU it is on has that UUID (an alert that names a GPU by its PCI bus id and its UUID: both must be one GPU)."""
    named, at, uuid = key.rpartition("@")
    if at and named and uuid.upper().startswith("GPU-"):
        return named, uuid
    return key, None


def names_gpu(gpu, key):
    """Whether key names the GPU: its index, its UUID (any case) or its PCI bus id (any usual spelling)."""
    if key == str(gpu["index"]) or key.lower() == (gpu.get("uuid") or "").lower():
        return True
    return ":" in key and gpu.get("pci_bus_id") is not None and normalize_bus_id(key) == gpu["pci_bus_id"]


def instance_label(gpu_index, gi_id, ci_id=None):
    """How the collection writes an instance: GPU:GI, or GPU:GI/CI."""
    return "%s:%s" % (gpu_index, gi_id) if ci_id is None else "%s:%s/%s" % (gpu_index, gi_id, ci_id)


def node_instances(gpus):
    """Every instance the node has: [(gpu index, gi, ci, MIG UUID)]."""
    return [(gpu["index"], gi["id"], ci["id"], ci.get("uuid")) for gpu in gpus for gi in gpu.get("gpu_instances") or []
            for ci in gi["compute_instances"]]


def instances_text(gpus):
    """The node's instances for a refusal: "0:1/0 (MIG-...), 0:2/0 (MIG-...)", or "none"."""
    return ", ".join("%s (%s)" % (instance_label(g, gi, ci), uuid or "no UUID") for g, gi, ci, uuid in node_instances(gpus)) or "none"


def unlisted_for(gpus, key):
    """The GPUs whose MIG instances could not be listed (mig_listing_error) that the instance name `key` may be on: the
    GPU a GPU:GI[/CI] names, every such GPU for a MIG device UUID; [] for a key that names no instance."""
    failed = [gpu for gpu in gpus if gpu.get("mig_listing_error")]
    if key.upper().startswith("MIG-"):
        return failed
    match = _INSTANCE_KEY.match(key)
    return [gpu for gpu in failed if names_gpu(gpu, match.group("gpu"))] if match else []


def unlisted_message(key, unlisted):
    """Why an instance name on a GPU whose MIG listing failed selects nothing."""
    # Imported here: every snapshot imports this file, few have a MIG GPU whose listing failed.
    from ansible_collections.gpuops.remediation.plugins.module_utils.probes._mig_instances import unlisted_words  # pylint: disable=import-outside-toplevel
    return ("gpus: %r names a MIG instance, but the MIG instances could not be listed (%s): nothing was selected; select "
            "the whole GPU (%s), or the instance once its listing works" % (
                key, unlisted_words(unlisted), ", ".join(str(gpu["index"]) for gpu in unlisted)))


def looks_like_instance(key):
    return key.upper().startswith("MIG-") or _INSTANCE_KEY.match(key) is not None


def resolve_instance(gpus, key):
    """(gpu index, gi, ci or None) the key names, or None when the node has no such instance (or it names none)."""
    if key.upper().startswith("MIG-"):
        for gpu_index, gi, ci, uuid in node_instances(gpus):
            if uuid and uuid.lower() == key.lower():
                return (gpu_index, gi, ci)
        return None
    match = _INSTANCE_KEY.match(key)
    if not match:
        return None
    gi, ci = int(match.group("gi")), match.group("ci")
    for gpu in gpus:
        if not names_gpu(gpu, match.group("gpu")):
            continue
        for there_gpu, there_gi, there_ci, dummy_uuid in node_instances([gpu]):
            if there_gi == gi and (ci is None or int(ci) == there_ci):
                return (there_gpu, gi, None if ci is None else int(ci))
    return None


def ambiguous_instance(gpus, key, named):
    """The instance (gpu index, gi, ci or None) key also names when it names the GPUs `named` by their bus id, or None: "1:0"
    is both GPU 1's instance 0 and the GPU at 01:00.0, and either guess could reach another GPU's jobs, or all of them."""
    return resolve_instance(gpus, key) if named and looks_like_instance(key) else None


def narrowed_instances(gpus, wanted):
    """{gpu index: {(gi, ci or None)}} of the GPUs the selection `wanted` reaches only through MIG instances: a name of a
    GPU itself (index, UUID, bus id) selects it whole, which no instance of it narrows."""
    whole, result = set(), {}
    for name in wanted or []:
        key = pinned_key(str(name).strip())[0]  # select_gpus refused a key whose GPU has another UUID
        named = [gpu["index"] for gpu in gpus if names_gpu(gpu, key)]
        found = resolve_instance(gpus, key) if not named else None
        whole.update(named)
        if found is not None:
            result.setdefault(found[0], set()).add(found[1:])
    return dict((index, chosen) for index, chosen in result.items() if index not in whole)


def holder_instances(holder):
    """{(gpu, gi, ci)} a holder is in (holders[].mig_instances)."""
    return set((item["gpu"], item["gpu_instance_id"], item["compute_instance_id"]) for item in holder.get("mig_instances") or [])


def in_selected_instance(holder, instances):
    """Whether a holder of a narrowed GPU is in one of the selected instances ({gpu: {(gi, ci or None)}})."""
    for gpu_index, gi, ci in holder_instances(holder):
        for wanted_gi, wanted_ci in instances.get(gpu_index, ()):
            if gi == wanted_gi and (wanted_ci is None or ci == wanted_ci):
                return True
    return False


def _selects(instances, gpu_index, gi, ci):
    return any(gi == wanted_gi and (wanted_ci is None or ci == wanted_ci) for wanted_gi, wanted_ci in instances.get(gpu_index, ()))


def outside_instances(holder, instances):
    """Where, beyond a narrowed selection, a process would stop working if it ended: "MIG instance 0:5" for each instance
    of a narrowed GPU it is in that the selection leaves out, "GPU 0 (in no instance the selection names)" for a narrowed
    GPU it holds in none of the selected instances (one not in the snapshot's view, whose instance is unknown); []."""
    found = ["MIG instance %s" % instance_label(g, gi, ci) for g, gi, ci in sorted(holder_instances(holder), key=str)
             if g in instances and not _selects(instances, g, gi, ci)]
    if not found and set(holder.get("gpus") or []) & set(instances) and not in_selected_instance(holder, instances):
        found = ["GPU %s (in no instance the selection names)" % ",".join(str(g) for g in sorted(set(holder["gpus"]) & set(instances)))]
    return found


def reaches(holder, gpu_indexes, instances):
    """Whether a holder is within the selection: on a selected GPU, and on a narrowed GPU inside a selected instance
    (a holder of a narrowed GPU outside every selected instance, or in none, is outside it)."""
    mine = set(holder.get("gpus") or [])
    if not mine & set(gpu_indexes):
        return False
    return any(index not in instances or in_selected_instance(holder, instances) for index in mine & set(gpu_indexes))


def labels(instances):
    """"0:3, 1:2/0" for {gpu: {(gi, ci or None)}}."""
    return ", ".join(instance_label(g, gi, ci) for g in sorted(instances) for gi, ci in sorted(instances[g], key=str))


def scope_words(instances):
    """What a check mode or a verdict says of a narrowed selection."""
    return ("the selection is MIG instance %s: only holders in it are ended; nothing outside it is ended, reset or "
            "re-created" % labels(instances))


def refuse_whole_gpu_action(module, gpus, action):
    """Fail, changing nothing, when `gpus` narrows a GPU to instances and `action` (a reset, a driver reload) would reach
    the whole GPU, every instance's jobs with it."""
    wanted = module.params.get("gpus")
    instances = narrowed_instances(gpus, wanted)
    if instances:
        module.fail_json(changed=False, msg=(
            "refused: gpus=%s narrows this run to MIG instance %s, but %s reaches the whole GPU and every other instance's "
            "jobs; name the whole GPU (%s) to allow it" % (wanted, labels(instances), action, ", ".join(str(g) for g in sorted(instances)))))
