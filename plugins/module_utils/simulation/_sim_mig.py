# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulated node's MIG rules: GPU instance profiles, their placements and memory slices.

A MIG GPU has 8 memory slices and 7 compute slices. A GPU instance of a profile starts only at one of the
profile's placement starts and occupies `size` memory slices from there; creating one fails, with the driver's
words, when those slices overlap an instance that exists, or when the profile's instance count is used up.
Profiles, ids, starts and sizes are those `nvidia-smi mig -lgip -lgipp` prints on A100-SXM4-80GB and
H100-80GB (NVIDIA MIG user guide, "Supported MIG Profiles"); memory is the MiB an instance's fb_memory_usage
total shows (19968 MiB for an A100-80GB 2g.20gb in nvidia-smi-qx/v12-a100-sxm4-mig-535.54.03.xml).
The state holds, per GPU, "mig_mode": {"current": bool, "pending": bool} (None: no MIG) and
"gpu_instances": [...], each GPU instance {"id", "profile_id", "start", "size", "compute_instances": [{"id", "profile_id"}]}.
"""

from __future__ import annotations

import hashlib

MEMORY_SLICES = 8
COMPUTE_SLICES = 7
INSUFFICIENT = "Insufficient Resources"
INVALID_ARGUMENT = "Invalid Argument"
NO_PERMISSION = "Insufficient Permissions"
# A test's knob: with "mig_listing_denied" in the state, the MIG listings fail as for a user without the MIG monitor
# capability: nvidia-smi mig -lgi / -lci exit 4 (NVML's NO_PERMISSION), NVML's MIG device calls answer NO_PERMISSION.
DENIED_KEY = "mig_listing_denied"
RC_NO_PERMISSION = 4

# profile id -> (name, compute slices, memory slices (placement size), placement starts, instance count)
_SHAPES = {
    19: ("1g.{small}", 1, 1, (0, 1, 2, 3, 4, 5, 6), 7),
    20: ("1g.{small}+me", 1, 1, (0, 1, 2, 3, 4, 5, 6), 1),
    15: ("1g.{double}", 1, 2, (0, 2, 4, 6), 4),
    14: ("2g.{double}", 2, 2, (0, 2, 4), 3),
    9: ("3g.{half}", 3, 4, (0, 4), 2),
    5: ("4g.{half}", 4, 4, (0,), 1),
    0: ("7g.{full}", 7, 8, (0,), 1),
}

# compute slices -> NVML's compute instance profile id (NVML_COMPUTE_INSTANCE_PROFILE_<n>_SLICE)
_CI_PROFILE_IDS = {1: 0, 2: 1, 3: 2, 4: 3, 7: 4}
_CI_SLICES = dict((profile_id, slices) for slices, profile_id in _CI_PROFILE_IDS.items())

# product -> names' memory words and the MiB each memory-slice count gives an instance
PRODUCTS = {
    "NVIDIA A100-SXM4-80GB": ({"small": "10gb", "double": "20gb", "half": "40gb", "full": "80gb"},
                              {1: 9728, 2: 19968, 4: 40192, 8: 81152}),
    "NVIDIA H100 80GB HBM3": ({"small": "10gb", "double": "20gb", "half": "40gb", "full": "80gb"},
                              {1: 9984, 2: 20096, 4: 40448, 8: 81152}),
}


# The driver's nvidia-caps minors (/proc/driver/nvidia-caps/mig-minors): 1 config, 2 monitor, then per GPU 15
# GPU instance slots of 9 minors each, the GI's own followed by its 8 compute instances'.
_FIRST_GI_MINOR = 3
_MINORS_PER_GI = 9
_GI_SLOTS = 15


def cap_minor(gpu_index, gi_id, ci_id=None):
    """The nvidia-caps minor of GPU instance gi_id (or of its compute instance ci_id) on GPU gpu_index."""
    base = _FIRST_GI_MINOR + gpu_index * _GI_SLOTS * _MINORS_PER_GI + gi_id * _MINORS_PER_GI
    return base if ci_id is None else base + 1 + ci_id


def capability_files(gpus):
    """{relative path: text} of the capabilities access files the driver shows for these GPUs' instances."""
    files = {}
    for gpu in gpus:
        for gi in gpu.get("gpu_instances", []):
            gi_dir = "gpu%d/mig/gi%d" % (gpu["index"], gi["id"])
            files[gi_dir + "/access"] = _access_text(cap_minor(gpu["index"], gi["id"]))
            for ci in gi["compute_instances"]:
                files["%s/ci%d/access" % (gi_dir, ci["id"])] = _access_text(cap_minor(gpu["index"], gi["id"], ci["id"]))
    return files


def mig_uuid(gpu, gi_id, ci_id):
    """A stable MIG device UUID (MIG-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx) for one compute instance of one GPU."""
    digest = hashlib.sha1(("%s|%d|%d" % (gpu["uuid"], gi_id, ci_id)).encode()).hexdigest()
    return "MIG-%s-%s-%s-%s-%s" % (digest[:8], digest[8:12], digest[12:16], digest[16:20], digest[20:32])


def devices(gpu, holders=()):
    """The GPU's MIG devices (one per compute instance), numbered as nvidia-smi -L and -q -x number them; `holders`
    (the node's live holders) use their instance's memory."""
    table = profiles(gpu["name"]) if gpu.get("gpu_instances") else {}
    result = []
    for gi in sorted(gpu.get("gpu_instances", []), key=lambda g: g["id"]):
        profile = table[gi["profile_id"]]
        for ci in sorted(gi["compute_instances"], key=lambda c: c["id"]):
            result.append({"index": len(result), "gi": gi["id"], "ci": ci["id"], "name": profile["name"],
                           "uuid": mig_uuid(gpu, gi["id"], ci["id"]), "memory_total_mib": profile["memory_mib"],
                           "memory_used_mib": instance_used_mib(gpu, gi, holders), "profile_id": gi["profile_id"],
                           "start": gi["start"], "size": gi["size"]})
    return result


def _access_text(minor):
    return "DeviceFileMinor: %d\nDeviceFileMode: 292\nDeviceFileModify: 1\n" % minor


class MigError(Exception):
    """A MIG operation the driver refuses; str() is the driver's reason (e.g. Insufficient Resources)."""


def profiles(product):
    """The GPU instance profiles of one product: {profile id: {name, compute, size, starts, count, memory_mib}}."""
    if product not in PRODUCTS:
        raise MigError("Not Supported")
    words, memory = PRODUCTS[product]
    return dict((pid, {"id": pid, "name": name.format(**words), "compute": compute, "size": size,
                       "starts": starts, "count": count, "memory_mib": memory[size]})
                for pid, (name, compute, size, starts, count) in _SHAPES.items())


def profile_by_name_or_id(product, text):
    """A profile named as nvidia-smi mig -cgi accepts it: its id, its name, or its name with 'MIG ' before it."""
    table = profiles(product)
    word = str(text).strip()
    for profile in table.values():
        if word in (str(profile["id"]), profile["name"], "MIG " + profile["name"]):
            return profile
    raise MigError(INVALID_ARGUMENT)


def _occupied(gpu_instances):
    slices = set()
    for gi in gpu_instances:
        slices.update(range(gi["start"], gi["start"] + gi["size"]))
    return slices


def free_placement(product, gpu_instances, profile_id, start=None):
    """The start a new instance of profile_id takes (the lowest free one, or `start`), or raise MigError.

    The one decision of where an instance may go: a placement is free when none of its memory slices is
    occupied, the compute slices left cover the profile, and the profile's instance count is not used up.
    """
    profile = profiles(product).get(profile_id)
    if profile is None:
        raise MigError(INVALID_ARGUMENT)
    if start is not None and start not in profile["starts"]:
        raise MigError(INVALID_ARGUMENT)
    same = [gi for gi in gpu_instances if gi["profile_id"] == profile_id]
    used_compute = sum(profiles(product)[gi["profile_id"]]["compute"] for gi in gpu_instances)
    if len(same) >= profile["count"] or used_compute + profile["compute"] > COMPUTE_SLICES:
        raise MigError(INSUFFICIENT)
    if profile_id == 20 and any(gi["profile_id"] == 20 for gi in gpu_instances):
        raise MigError(INSUFFICIENT)
    taken = _occupied(gpu_instances)
    for candidate in ([start] if start is not None else profile["starts"]):
        if not taken.intersection(range(candidate, candidate + profile["size"])):
            return candidate
    raise MigError(INSUFFICIENT)


def create_gpu_instance(gpu, profile_id, start=None):
    """Add a GPU instance to gpu["gpu_instances"] (MIG mode must be on); returns it. Ids: the lowest unused from 1."""
    if not (gpu.get("mig_mode") or {}).get("current"):
        raise MigError("Not Supported")
    instances = gpu.setdefault("gpu_instances", [])
    placed = free_placement(gpu["name"], instances, profile_id, start)
    used = set(gi["id"] for gi in instances)
    new_id = next(i for i in range(1, 15) if i not in used)
    gi = {"id": new_id, "profile_id": profile_id, "start": placed, "size": profiles(gpu["name"])[profile_id]["size"],
          "compute_instances": []}
    instances.append(gi)
    return gi


def compute_starts(compute, slices):
    """Where a compute instance of `slices` compute slices may start in a GPU instance of `compute` slices, as the driver
    places them (nvidia-smi mig -lcip): at a multiple of its size rounded up to a power of two, inside the instance
    (1c.7g: 0..6, 2c.7g: 0, 2, 4, 3c.7g: 0, 4, 4c.7g and 7g: 0; 1c.3g: 0..2, 2c.3g: 0)."""
    step = 1
    while step < slices:
        step *= 2
    return [start for start in range(0, compute, step) if start + slices <= compute]


def ci_placement(gpu, gi, ci):
    """(start, size) of a compute instance in its GPU instance's compute slices (one of an older state: the whole)."""
    compute = profiles(gpu["name"])[gi["profile_id"]]["compute"]
    return ci.get("start", 0), ci.get("size", compute)


def create_compute_instance(gpu, gi_id, profile_id=None):
    """A compute instance of NVML's compute profile `profile_id` (None: the full-size one, the -C default) at the
    lowest free placement the profile allows, with the lowest free id from 0; raise MigError (Invalid Argument for a
    profile the GPU instance cannot hold, Insufficient Resources when no placement is free)."""
    gi = find_gpu_instance(gpu, gi_id)
    compute = profiles(gpu["name"])[gi["profile_id"]]["compute"]
    if profile_id is None:
        profile_id = full_compute_profile_id(gpu, gi)
    slices = _CI_SLICES.get(profile_id)
    if slices is None or slices > compute:
        raise MigError(INVALID_ARGUMENT)
    taken = set()
    for other in gi["compute_instances"]:
        start, size = ci_placement(gpu, gi, other)
        taken.update(range(start, start + size))
    free = [start for start in compute_starts(compute, slices) if not taken & set(range(start, start + slices))]
    if not free:
        raise MigError(INSUFFICIENT)
    used = set(ci["id"] for ci in gi["compute_instances"])
    ci = {"id": next(i for i in range(8) if i not in used), "profile_id": profile_id, "start": free[0], "size": slices}
    gi["compute_instances"].append(ci)
    return ci


def ci_name(gpu, gi, ci):
    """A compute instance's profile name: its GPU instance's for the full-size one, else "<n>c.<GPU instance's>"
    (1c.7g.80gb)."""
    profile = profiles(gpu["name"])[gi["profile_id"]]
    size = ci_placement(gpu, gi, ci)[1]
    return profile["name"] if size == profile["compute"] else "%dc.%s" % (size, profile["name"])


def full_compute_profile_id(gpu, gi):
    """NVML's id of the compute instance profile that takes all of GPU instance gi's compute slices."""
    return _CI_PROFILE_IDS[profiles(gpu["name"])[gi["profile_id"]]["compute"]]


def find_gpu_instance(gpu, gi_id):
    for gi in gpu.get("gpu_instances", []):
        if gi["id"] == gi_id:
            return gi
    raise MigError("Not Found")


def destroy_gpu_instance(gpu, gi_id):
    """Remove a GPU instance; one with a compute instance left is refused (In use by another client)."""
    gi = find_gpu_instance(gpu, gi_id)
    if gi["compute_instances"]:
        raise MigError("In use by another client")
    gpu["gpu_instances"].remove(gi)


def create_failure_lines(index, profile_id, reason):
    """What nvidia-smi mig -cgi prints when the driver refuses (nvidia-smi-mig/cgi-insufficient-resources-*)."""
    return ["Unable to create a GPU instance on GPU %2d using profile %s: %s" % (index, profile_id, reason),
            "Failed to create GPU instances: %s" % reason]


def render_lgi(gpus):
    """nvidia-smi mig -lgi: one row per GPU instance (GPU, name, profile id, instance id, placement start:size)."""
    rule = "+-------------------------------------------------------+"
    lines = [rule, "| GPU instances:                                        |",
             "| GPU   Name             Profile  Instance   Placement  |",
             "|                          ID       ID       Start:Size |", "|" + "=" * 55 + "|"]
    rows = []
    for gpu in gpus:
        table = profiles(gpu["name"])
        for gi in sorted(gpu.get("gpu_instances", []), key=lambda g: g["id"]):
            name = "MIG " + table[gi["profile_id"]]["name"]
            placement = "%d:%d" % (gi["start"], gi["size"])
            rows.append("|  %-3d  %-16s %4d %8d %9s  |" % (gpu["index"], name, gi["profile_id"], gi["id"], placement))
    if not rows:
        return ["No GPU instances found: Not Found"]
    return lines + rows + [rule]


# ---------------------------------------------------------------- reading the instances (what the driver shows)

def holder_instance(holder, gpu_index):
    """(GPU instance id, compute instance id) a simulated holder runs in on one GPU, or None outside any instance."""
    where = (holder.get("mig") or {}).get(str(gpu_index))
    return (int(where[0]), int(where[1])) if where else None


def instance_used_mib(gpu, gi, holders):
    """Memory in use in one GPU instance: its live holders' and the ghost memory the instance keeps (gi["ghost_mib"])."""
    inside = [h for h in holders if (holder_instance(h, gpu["index"]) or (None,))[0] == gi["id"]]
    return int(gi.get("ghost_mib", 0)) + sum(int(h["gpus"][str(gpu["index"])]) for h in inside)


def instances_ghost_mib(gpu):
    """The ghost memory every instance of the GPU keeps (part of the GPU's used memory)."""
    return sum(int(gi.get("ghost_mib", 0)) for gi in gpu.get("gpu_instances", []))


def compute_instance_info(gpu, gi_id, ci_id):
    """What NVML's nvmlComputeInstanceGetInfo gives: {"id", "gi", "profile_id", "start", "size"}, or raise MigError."""
    gi = find_gpu_instance(gpu, gi_id)
    for ci in gi["compute_instances"]:
        if ci["id"] == ci_id:
            start, size = ci_placement(gpu, gi, ci)
            return {"id": ci["id"], "gi": gi_id, "profile_id": ci["profile_id"], "start": start, "size": size}
    raise MigError("Not Found")


def gpu_instance_info(gpu, gi_id):
    """What NVML's nvmlGpuInstanceGetInfo gives: {"id", "profile_id", "start", "size"}, or raise MigError."""
    gi = find_gpu_instance(gpu, gi_id)
    return {"id": gi["id"], "profile_id": gi["profile_id"], "start": gi["start"], "size": gi["size"]}


def render_lci(gpus):
    """nvidia-smi mig -lci: one row per compute instance (GPU, GPU instance id, name, profile id, id, placement)."""
    rule = "+--------------------------------------------------------------------+"
    header = [rule, "| Compute instances:                                                 |",
              "| GPU     GPU       Name             Profile   Instance   Placement  |",
              "|       Instance                       ID        ID       Start:Size |",
              "|         ID                                                         |", "|" + "=" * 68 + "|"]
    rows = []
    for gpu in gpus:
        for gi in sorted(gpu.get("gpu_instances", []), key=lambda g: g["id"]):
            for ci in sorted(gi["compute_instances"], key=lambda c: c["id"]):
                row = (gpu["index"], gi["id"], "MIG " + ci_name(gpu, gi, ci), ci["profile_id"], ci["id"], "%d:%d" % ci_placement(gpu, gi, ci))
                rows.append("|  %3d  %5d       %-16s %5d %9d %10s     |" % row)
    if not rows:
        return ["No compute instances found: Not Found"]
    return header + rows + [rule]
