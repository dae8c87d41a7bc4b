# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a run an event starts selects, the same for every source: a MIG instance the event names (an Xid line's GPU-I
and GPU-CI, dcgm-exporter's GPU_I_ID and GPU_CI_ID labels) as "<bus id>:<GI>[/<CI>]", that instance alone; else the
GPU's bus id; else the GPU's UUID (an alert that gives no bus id); else nothing (the node). The rulebooks pass it to
reset_gpu.yml as "PCI:" + selection (docs/eda.md); an alert that names its GPU by a UUID label too passes `gpus`, the
selection pinned to that UUID ("PCI:<selection>@<UUID>"): the node acts only where the GPU at that bus id has it."""

from __future__ import annotations

from ansible_collections.gpuops.remediation.plugins.module_utils._mig_selection import instance_label

# The largest GPU or compute instance id a selection can name (GPU:GI[/CI] takes at most two digits; an A100 or H100
# has instance ids up to 14).
MAX_INSTANCE_ID = 99


def selection_fields(bus_id, gpu_instance_id=None, compute_instance_id=None, uuid=None):
    """The event's `selection`, its `scope` ("instance", "gpu" or "node"), the instance ids, the GPU's `uuid` where the
    event gives one (uuid: checked by gpu_uuid_label) and `gpus`, what the run's gpus options get, for its body."""
    if bus_id is None:
        selection, scope = uuid, "gpu" if uuid else "node"
    elif gpu_instance_id is None:
        selection, scope = bus_id, "gpu"
    else:
        selection, scope = instance_label(bus_id, gpu_instance_id, compute_instance_id), "instance"
    if bus_id is None:
        gpus = [uuid] if uuid else []
    else:
        gpus = ["PCI:" + selection + ("@" + uuid if uuid else "")]
    return {"selection": selection, "scope": scope, "gpu_instance_id": gpu_instance_id,
            "compute_instance_id": compute_instance_id, "uuid": uuid, "gpus": gpus}


_UUID_GROUPS = (8, 4, 4, 4, 12)
_HEX = frozenset("0123456789abcdefABCDEF")


def gpu_uuid_label(value):
    """(the GPU UUID, None) a dcgm-exporter `UUID` label holds ("GPU-" and 8-4-4-4-12 hex digits, as NVML prints it),
    (None, None) when absent or empty, else (None, why), naming the value: a MIG device's UUID (an instance is named by
    GPU_I_ID) or any other text (a template, a newline, a shell word) never reaches the run."""
    if value is None or value == "":
        return None, None
    if isinstance(value, str) and value[:4].upper() == "GPU-" and len(value) == 40:
        groups = value[4:].split("-")
        if tuple(len(group) for group in groups) == _UUID_GROUPS and all(char in _HEX for group in groups for char in group):
            return value, None
    shown = value[:80] if isinstance(value, str) else value
    if isinstance(value, str) and value[:4].upper() == "MIG-":
        return None, "its UUID %r is a MIG device's, not a GPU's (dcgm-exporter names a MIG instance by GPU_I_ID)" % (shown,)
    return None, "its UUID %r is not a GPU UUID (GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)" % (shown,)


def _instance_id(name, value):
    """(id, None) of a label holding a MIG instance id as Prometheus writes it (a plain small integer), (None, None)
    when absent or empty (Prometheus's absent label), else (None, why), naming the label and the value."""
    if value is None or value == "":
        return None, None
    if isinstance(value, str) and 0 < len(value) <= 2 and value.isascii() and value.isdigit():
        return int(value), None
    shown = value[:80] if isinstance(value, str) else value
    return None, "its %s %r is not a MIG instance id (a plain number 0-%d)" % (name, shown, MAX_INSTANCE_ID)


def alert_instance(labels, bus_id):
    """(gpu instance id, compute instance id, None) the labels of a dcgm-exporter-style alert name (GPU_I_ID, and
    GPU_CI_ID where the exporter gives compute instances), or (None, None, why) when a label cannot name an instance
    of that GPU: a value that is no plain small integer, a compute instance without its GPU instance, or an instance
    without the GPU's pci_bus_id. Never widened to the whole GPU: a run there would reach every other instance's jobs."""
    gi, why = _instance_id("GPU_I_ID", labels.get("GPU_I_ID"))
    if why is None:
        ci, why = _instance_id("GPU_CI_ID", labels.get("GPU_CI_ID"))
    if why:
        return None, None, why
    if ci is not None and gi is None:
        return None, None, "its GPU_CI_ID %r names a compute instance but no GPU_I_ID its GPU instance" % labels.get("GPU_CI_ID")
    if gi is not None and not bus_id:
        return None, None, ("its GPU_I_ID %r names a MIG instance but no pci_bus_id its GPU: the instance cannot be placed, "
                            "and the whole node is not what the alert names" % labels.get("GPU_I_ID"))
    return gi, ci, None
