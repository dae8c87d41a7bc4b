# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A MIG-enabled GPU's instances as the driver shows them, from NVML's MIG device handles or from nvidia-smi.

Both backends give a list of MIG devices (one per compute instance: its GPU instance and compute instance ids, UUID,
profile, placement and memory); gpu_instances() groups them into the snapshot's shape (docs/internals.md):
[{"id", "profile", "profile_id", "placement": {"start", "size"}, "memory_total_mib", "memory_used_mib",
"compute_instances": [{"id", "uuid", "profile_id", "placement"}]}]. Linux only: Windows has no MIG.
"""

from __future__ import annotations

NOT_AVAILABLE = 0xFFFFFFFF
# nvidia-smi exits 6 (NVML's Not Found) when a listing has nothing to list ("No GPU instances found: Not Found", no
# MIG-enabled device): an answer, the tables empty. Any other non-zero exit is no answer at all.
RC_NOT_FOUND = 6


def listing_failure(command, rc, message):
    """The note a MIG-enabled GPU carries when its instances could not be listed (`mig_listing_error`): the command, its
    exit code (or NVML's error code) and its last words. The GPU's gpu_instances are then unknown, not none."""
    return {"command": command, "rc": rc, "message": message}


def listing_words(failure):
    """A listing_failure as an operator reads it: "nvidia-smi mig -lgi exited 4: ..." or "NVML nvmlDevice... failed
    (error 4): ..."."""
    how = "exited %s" % failure.get("rc") if failure.get("command", "").startswith("nvidia-smi") else "failed (error %s)" % failure.get("rc")
    return "%s %s%s" % (failure.get("command"), how, ": %s" % failure["message"] if failure.get("message") else "")


def unlisted_words(gpus):
    """"GPU 0: nvidia-smi mig -lgi exited 4: ..." for each GPU whose MIG instances could not be listed; "" for none."""
    return "; ".join("GPU %s: %s" % (gpu["index"], listing_words(gpu["mig_listing_error"])) for gpu in gpus if gpu.get("mig_listing_error"))


def smi_listing_failure(argv, rc, out, err):
    """listing_failure of an nvidia-smi listing that exited `rc`, or None when it answered (0 or Not Found)."""
    if rc in (0, RC_NOT_FOUND):
        return None
    lines = (err or out or "").strip().splitlines()
    return listing_failure("nvidia-smi " + " ".join(argv[1:]), rc, lines[-1].strip() if lines else "")


def gpu_instances(devices):
    """The MIG devices grouped by GPU instance, in id order; memory is the GPU instance's (its compute instances share it)."""
    by_gi = {}
    for device in devices:
        gi = by_gi.setdefault(device["gpu_instance_id"], {
            "id": device["gpu_instance_id"], "profile": device.get("profile"), "profile_id": device.get("profile_id"),
            "placement": device.get("placement"), "memory_total_mib": device.get("memory_total_mib"),
            "memory_used_mib": device.get("memory_used_mib"), "compute_instances": []})
        gi["compute_instances"].append({"id": device["compute_instance_id"], "uuid": device.get("uuid"),
                                        "profile_id": device.get("ci_profile_id"), "placement": device.get("ci_placement")})
    for gi in by_gi.values():
        gi["compute_instances"].sort(key=lambda ci: ci["id"])
    return [by_gi[key] for key in sorted(by_gi)]


# ---------------------------------------------------------------- NVML

def _profile_from_name(name):
    """"NVIDIA A100-SXM4-80GB MIG 1g.10gb" (NVML's name of a MIG device) -> "1g.10gb"."""
    text = name.decode("utf-8", "replace") if isinstance(name, bytes) else (name or "")
    if "MIG " not in text:
        return None
    return text.rpartition("MIG ")[2].strip() or None


def _nvml_listing(nvml, call, *args):
    """(answer, None), or (None, listing_failure) when the MIG listing call raised; a lost GPU raises on."""
    try:
        return call(*args), None
    except nvml.NVMLError_GpuIsLost:
        raise
    except nvml.NVMLError as exc:
        return None, listing_failure("NVML %s" % call.__name__, getattr(exc, "value", None), str(exc))


def nvml_mig_devices(nvml, handle, optional):
    """(MIG devices, {pid: (gi, ci)}, listing_failure or None) of one MIG-enabled GPU through nvidia-ml-py; `optional`
    calls an NVML function and gives None for an error. The processes are those each MIG device lists (NVML's
    per-instance process list). The MIG devices themselves come from calls whose error is no answer (a failure), but
    Not Found for a free slot."""
    devices, placed = [], {}
    count, failed = _nvml_listing(nvml, nvml.nvmlDeviceGetMaxMigDeviceCount, handle)
    if failed:
        return [], {}, failed
    for index in range(count or 0):
        try:
            mig = nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, index)
        except nvml.NVMLError_NotFound:
            continue  # a free slot
        except nvml.NVMLError_GpuIsLost:
            raise
        except nvml.NVMLError as exc:
            return [], {}, listing_failure("NVML nvmlDeviceGetMigDeviceHandleByIndex", getattr(exc, "value", None), str(exc))
        gi_id = optional(nvml.nvmlDeviceGetGpuInstanceId, mig)
        ci_id = optional(nvml.nvmlDeviceGetComputeInstanceId, mig)
        if gi_id is None or ci_id is None:
            continue
        gi_handle = optional(nvml.nvmlDeviceGetGpuInstanceById, handle, gi_id)
        info = optional(nvml.nvmlGpuInstanceGetInfo, gi_handle) if gi_handle is not None else None
        ci_handle = optional(nvml.nvmlGpuInstanceGetComputeInstanceById, gi_handle, ci_id) if gi_handle is not None else None
        ci_info = optional(nvml.nvmlComputeInstanceGetInfo, ci_handle) if ci_handle is not None else None
        memory = optional(nvml.nvmlDeviceGetMemoryInfo, mig)
        uuid = optional(nvml.nvmlDeviceGetUUID, mig)
        devices.append({
            "gpu_instance_id": int(gi_id), "compute_instance_id": int(ci_id),
            "uuid": uuid.decode("utf-8", "replace") if isinstance(uuid, bytes) else uuid,
            "profile": _profile_from_name(optional(nvml.nvmlDeviceGetName, mig)),
            "profile_id": int(info.profileId) if info is not None else None,
            "placement": {"start": int(info.placement.start), "size": int(info.placement.size)} if info is not None else None,
            "ci_profile_id": int(ci_info.profileId) if ci_info is not None else None,
            "ci_placement": {"start": int(ci_info.placement.start), "size": int(ci_info.placement.size)} if ci_info is not None else None,
            "memory_total_mib": int(memory.total // (1024 * 1024)) if memory is not None else None,
            "memory_used_mib": int(memory.used // (1024 * 1024)) if memory is not None else None,
        })
        for func in (nvml.nvmlDeviceGetComputeRunningProcesses, nvml.nvmlDeviceGetGraphicsRunningProcesses):
            for proc in optional(func, mig) or []:
                placed[int(proc.pid)] = (int(gi_id), int(ci_id))
    return devices, placed, None


# ---------------------------------------------------------------- nvidia-smi

def _table_cells(line):
    """The cells of one row of nvidia-smi mig's boxed table ("|  0  MIG 1g.10gb  19  1  0:1  |"), or None."""
    text = line.strip()
    if not (text.startswith("|") and text.endswith("|")) or "=" in text or len(text) < 3:
        return None
    return text[1:-1].split()


def _placement(word):
    start, sep, size = word.partition(":")
    if not (sep and start.isdigit() and size.isdigit()):
        return None
    return {"start": int(start), "size": int(size)}


def _int_words(words):
    return all(word.isascii() and word.isdigit() for word in words)


def parse_lgi(text):
    """`nvidia-smi mig -lgi` -> {(gpu, gpu instance id): {"profile", "profile_id", "placement"}}; rows that are not
    instance rows (the header, the rules, "No GPU instances found") are skipped. One pass over the lines."""
    found = {}
    for line in (text or "").splitlines():
        words = _table_cells(line)
        # GPU, "MIG", name, profile id, instance id, start:size
        if not words or len(words) != 6 or words[1] != "MIG" or not _int_words([words[0], words[3], words[4]]):
            continue
        placement = _placement(words[5])
        if placement is not None:
            found[(int(words[0]), int(words[4]))] = {"profile": words[2], "profile_id": int(words[3]), "placement": placement}
    return found


def parse_lci(text):
    """`nvidia-smi mig -lci` -> {(gpu, gpu instance id, compute instance id): {"profile_id", "placement"}}."""
    found = {}
    for line in (text or "").splitlines():
        words = _table_cells(line)
        # GPU, GPU instance id, "MIG", name, profile id, instance id, start:size
        if not words or len(words) != 7 or words[2] != "MIG" or not _int_words([words[0], words[1], words[4], words[5]]):
            continue
        placement = _placement(words[6])
        if placement is not None:
            found[(int(words[0]), int(words[1]), int(words[5]))] = {"profile_id": int(words[4]), "placement": placement}
    return found


def parse_list_uuids(text):
    """`nvidia-smi -L` -> {(gpu position, MIG device index): MIG UUID}; a MIG line follows its GPU's line."""
    found = {}
    gpu = -1
    for line in (text or "").splitlines():
        if line.startswith("GPU "):
            gpu += 1
            continue
        words = line.split()
        if gpu < 0 or not words or words[0] != "MIG" or "Device" not in words:
            continue
        at = words.index("Device")
        index = words[at + 1].rstrip(":") if at + 1 < len(words) else ""
        uuid = words[-1].rstrip(")")
        if index.isascii() and index.isdigit() and uuid.startswith("MIG-"):
            found[(gpu, int(index))] = uuid
    return found


def smi_mig_devices(gpu, lgi, lci, uuids):
    """The MIG devices of one GPU of nvidia-smi -q -x (its mig_devices, in -L's order), completed from -lgi, -lci, -L."""
    devices = []
    for position, device in enumerate(gpu.get("mig_devices") or []):
        gi_id, ci_id = device.get("gpu_instance_id"), device.get("compute_instance_id")
        if gi_id is None or ci_id is None:
            continue
        gi = lgi.get((gpu["index"], gi_id), {})
        ci = lci.get((gpu["index"], gi_id, ci_id), {})
        devices.append({"gpu_instance_id": gi_id, "compute_instance_id": ci_id, "uuid": uuids.get((gpu["index"], position)),
                        "profile": gi.get("profile"), "profile_id": gi.get("profile_id"), "placement": gi.get("placement"),
                        "ci_profile_id": ci.get("profile_id"), "ci_placement": ci.get("placement"),
                        "memory_total_mib": device.get("memory_total_mib"), "memory_used_mib": device.get("memory_used_mib")})
    return devices


# ---------------------------------------------------------------- holders and ghost memory per instance

def attribute(holders, gpus, held_by_pid):
    """Put each holder in its instances and each instance's holders and ghost memory on its GPU instance.

    held_by_pid: {pid: {(gpu index, gi, ci or None)}} from the nvidia-caps nodes each holder has open or mapped (the
    kernel's fact, _mig_caps.instances_held); the driver's process list (gpu_instance_id / compute_instance_id of each
    process) is joined in. holders[].mig_instances: [{"gpu", "gpu_instance_id", "compute_instance_id", "seen_by"}], one per
    compute instance it is in; gpu_instances[].holders (pids), attributed_mib (what the driver lists in it) and
    unattributed_mib (used that no listed process accounts for: ghost memory, None when unknown).
    """
    for holder in holders:
        found = {}
        for gpu_index, gi, ci in held_by_pid.get(holder["pid"], ()):
            found.setdefault((gpu_index, gi, ci), {"gpu": gpu_index, "gpu_instance_id": gi, "compute_instance_id": ci, "seen_by": ["nvidia-caps"]})
        for gpu in gpus:
            for proc in gpu.get("processes") or []:
                if proc["pid"] != holder["pid"] or proc.get("gpu_instance_id") is None:
                    continue
                key = (gpu["index"], proc["gpu_instance_id"], proc.get("compute_instance_id"))
                found.setdefault(key, {"gpu": key[0], "gpu_instance_id": key[1], "compute_instance_id": key[2], "seen_by": []})["seen_by"].append("nvml")
        if found or any(gpu.get("gpu_instances") for gpu in gpus):
            holder["mig_instances"] = _one_per_instance(found)
    for gpu in gpus:
        for gi in gpu.get("gpu_instances") or []:
            _finish_instance(gpu, gi, holders)


def _one_per_instance(found):
    """The entries in (gpu, gi, ci) order, a GPU instance's entry with no compute instance folded into those of the same
    GPU instance that name one: a process is in every compute instance whose node it holds or the driver lists it in
    (in two of one GPU instance, it is in both: ending it ends its work in each)."""
    for (gpu_index, gi, ci), entry in list(found.items()):
        known = [other for key, other in found.items() if ci is None and key[:2] == (gpu_index, gi) and key[2] is not None]
        for other in known:
            other["seen_by"] = sorted(set(other["seen_by"]) | set(entry["seen_by"]))
        if known:
            del found[(gpu_index, gi, ci)]
    for entry in found.values():
        entry["seen_by"] = sorted(set(entry["seen_by"]))
    return [found[key] for key in sorted(found, key=lambda key: (key[0], key[1], -1 if key[2] is None else key[2]))]


def _finish_instance(gpu, gi, holders):
    gi["holders"] = sorted(h["pid"] for h in holders
                           if any(item["gpu"] == gpu["index"] and item["gpu_instance_id"] == gi["id"] for item in h.get("mig_instances") or []))
    listed = [p for p in gpu.get("processes") or [] if p.get("gpu_instance_id") == gi["id"]]
    known = gi.get("memory_used_mib") is not None and all(p.get("used_mib") is not None for p in listed)
    gi["attributed_mib"] = sum(p["used_mib"] for p in listed if p.get("used_mib") is not None)
    gi["unattributed_mib"] = max(gi["memory_used_mib"] - gi["attributed_mib"], 0) if known else None
