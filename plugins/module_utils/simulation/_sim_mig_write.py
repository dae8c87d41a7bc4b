# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulated node's MIG changes: nvidia-smi mig -cgi <profile>[:<start>], -cci, -dci, -dgi, and what a GPU reset or
a driver unload does to MIG.

The words are the real tool's (NVIDIA MIG user guide, "Destroying GPU Instances"; the capture
nvidia-smi-mig/cgi-insufficient-resources-then-success.txt): "Successfully destroyed compute instance ID  0 from GPU  0
GPU instance ID  1", "Successfully destroyed GPU instance ID  1 from GPU  0", and a refusal as two lines, "Unable to
destroy GPU instance ID  5 from GPU  0: In use by another client" then "Failed to destroy GPU instances: In use by another
client", exit 255. A GPU instance or compute instance is in use while a process holds its nvidia-caps node. A reset or
an unload of the driver leaves MIG mode on and no instance at all, as the real driver does; a pending mode change takes
effect there. Only the full-size compute instance of a GPU instance (the one -C makes) is simulated.
"""

from __future__ import annotations

import os
import time

try:
    from ansible_collections.gpuops.remediation.plugins.module_utils.simulation import _sim_mig as sim_mig
except ImportError:  # running from <root>/lib as plain modules
    import _sim_mig as sim_mig  # type: ignore[no-redef] # pylint: disable=import-error

IN_USE = "In use by another client"
NOT_FOUND = "Not Found"


def mig_after_reset(gpu):
    """A GPU reset or a driver unload: a pending MIG mode takes effect, and no GPU instance is left."""
    mig = gpu.get("mig_mode")
    if mig is None:
        return
    mig["current"] = bool(mig.get("pending"))
    gpu["gpu_instances"] = []


# A test's knob: with "mig_hold_after_reset" in the state, the MIG listings (-lgi, -lci) hang after a reset, as a driver
# busy re-initialising does, until the test clears "mig_listing_held" (a run killed there never restores its layout).
HOLD_KEY, HELD_KEY = "mig_hold_after_reset", "mig_listing_held"
HOLD_LIMIT_SECONDS = 600


def hold_after_reset(state):
    if state.get(HOLD_KEY):
        state[HELD_KEY] = True


def wait_while_held(load_state, root):
    """Block while the state says the listings are held (at most HOLD_LIMIT_SECONDS)."""
    deadline = time.monotonic() + HOLD_LIMIT_SECONDS
    while load_state(root).get(HELD_KEY) and time.monotonic() < deadline:
        time.sleep(0.05)


def profile_and_start(product, word):
    """(profile, start or None) of one -cgi word: a profile id or name, with ":<placement start>" after it or not."""
    name, colon, start = word.partition(":")
    if colon and not (start.isascii() and start.isdigit() and len(start) <= 2):
        raise sim_mig.MigError(sim_mig.INVALID_ARGUMENT)
    return sim_mig.profile_by_name_or_id(product, name), (int(start) if colon else None)


def _held_minors(users):
    """The nvidia-caps minors any process holds (users: _sim_rules.device_users)."""
    held = set()
    for paths in users.values():
        for path in paths:
            if os.path.basename(os.path.dirname(path)) == "nvidia-caps" and os.path.basename(path).startswith("nvidia-cap"):
                number = os.path.basename(path)[len("nvidia-cap"):]
                if number.isdigit():
                    held.add(int(number))
    return held


def _in_use(gpu, gi_id, ci_id, users):
    minors = {sim_mig.cap_minor(gpu["index"], gi_id, ci_id)}
    if ci_id is None:
        gi = sim_mig.find_gpu_instance(gpu, gi_id)
        minors.update(sim_mig.cap_minor(gpu["index"], gi_id, ci["id"]) for ci in gi["compute_instances"])
    return bool(minors & _held_minors(users))


def _chosen(items, wanted):
    return [item for item in items if wanted is None or item["id"] in wanted]


# What the real tool says when a GPU instance named with -gi does not exist, per verb: its first line's start, the second's.
_MISSING = {"dgi": ("Unable to destroy GPU instance ID %2d from GPU %2d", "Failed to destroy GPU instances"),
            "dci": ("Unable to destroy compute instances of GPU instance ID %2d on GPU %2d", "Failed to destroy compute instances"),
            "cci": ("Unable to create a compute instance in GPU instance ID %2d on GPU %2d", "Failed to create compute instances")}


def _missing_gpu_instance(gpu, gi_ids, verb):
    """The two lines of a refusal when a GPU instance named with -gi does not exist, else None."""
    missing = sorted(set(gi_ids or []) - set(gi["id"] for gi in gpu.get("gpu_instances", [])))
    if not missing:
        return None
    first, second = _MISSING[verb]
    return [(first % (missing[0], gpu["index"])) + ": " + NOT_FOUND, second + ": " + NOT_FOUND]


def destroy_compute_instances(gpu, gi_ids, ci_ids, users):
    """nvidia-smi mig -dci [-gi ...] [-ci ...] on one GPU: (lines, failed)."""
    missing = _missing_gpu_instance(gpu, gi_ids, "dci")
    if missing:
        return missing, True
    lines = []
    for gi in sorted(_chosen(gpu.get("gpu_instances", []), gi_ids), key=lambda g: g["id"]):
        for ci in sorted(_chosen(gi["compute_instances"], ci_ids), key=lambda c: c["id"]):
            if _in_use(gpu, gi["id"], ci["id"], users):
                return lines + ["Unable to destroy compute instance ID %2d from GPU %2d GPU instance ID %2d: %s" % (ci["id"], gpu["index"], gi["id"], IN_USE),
                                "Failed to destroy compute instances: %s" % IN_USE], True
            gi["compute_instances"].remove(ci)
            lines.append("Successfully destroyed compute instance ID %2d from GPU %2d GPU instance ID %2d" % (ci["id"], gpu["index"], gi["id"]))
    return lines, False


def destroy_gpu_instances(gpu, gi_ids, users):
    """nvidia-smi mig -dgi [-gi ...] on one GPU: (lines, failed). A GPU instance with a compute instance, or held, stays."""
    missing = _missing_gpu_instance(gpu, gi_ids, "dgi")
    if missing:
        return missing, True
    lines = []
    for gi in sorted(_chosen(gpu.get("gpu_instances", []), gi_ids), key=lambda g: g["id"]):
        if gi["compute_instances"] or _in_use(gpu, gi["id"], None, users):
            return lines + ["Unable to destroy GPU instance ID %2d from GPU %2d: %s" % (gi["id"], gpu["index"], IN_USE),
                            "Failed to destroy GPU instances: %s" % IN_USE], True
        gpu["gpu_instances"].remove(gi)
        lines.append("Successfully destroyed GPU instance ID %2d from GPU %2d" % (gi["id"], gpu["index"]))
    return lines, False


def create_compute_instances(gpu, gi_ids, ci_profiles):
    """nvidia-smi mig -cci [<profile ids>] -gi <ids> on one GPU: (lines, failed). Each profile in the order given, at
    the lowest free placement it allows (sim_mig.create_compute_instance); none given: the full-size one."""
    missing = _missing_gpu_instance(gpu, gi_ids, "cci")
    if missing:
        return missing, True
    lines = []
    for gi in sorted(_chosen(gpu.get("gpu_instances", []), gi_ids), key=lambda g: g["id"]):
        for word in ci_profiles or [None]:
            full = sim_mig.full_compute_profile_id(gpu, gi)
            try:
                if word is not None and not (word.isascii() and word.isdigit() and len(word) <= 2):
                    raise sim_mig.MigError(sim_mig.INVALID_ARGUMENT)
                ci = sim_mig.create_compute_instance(gpu, gi["id"], None if word is None else int(word))
            except sim_mig.MigError as exc:
                return lines + ["Unable to create a compute instance on GPU %2d GPU instance ID %2d using profile %s: %s"
                                % (gpu["index"], gi["id"], word if word is not None else full, exc),
                                "Failed to create compute instances: %s" % exc], True
            lines.append("Successfully created compute instance ID %2d on GPU %2d GPU instance ID %2d using profile MIG %s (ID %2d)"
                         % (ci["id"], gpu["index"], gi["id"], sim_mig.ci_name(gpu, gi, ci), ci["profile_id"]))
    return lines, False
