# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""nvidia-smi on a Windows host: the Linux parsers (module_utils/probes/_nvsmi.py) plus the driver model.

Under WDDM, NVML cannot report a process's GPU memory: nvidia-smi prints N/A, kept None (never 0) with the reason,
and the GPU Process Memory counters (_gpu_memory_counters.py) give the number instead.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from ansible_collections.gpuops.remediation.plugins.module_utils.probes import _nvsmi
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._pci import normalize_bus_id

DRIVER_MODELS = ("WDDM", "MCDM", "TCC")

QUERY_GPU_FIELDS = ("index", "uuid", "name", "pci.bus_id", "driver_model.current", "driver_model.pending",
                    "memory.total", "memory.used")

WDDM_MEMORY_REASON = ("NVML cannot report per-process GPU memory under the WDDM driver model; "
                      "the GPU Process Memory counters give it")
NOT_REPORTED_REASON = "nvidia-smi reported no per-process GPU memory (N/A)"


def normalize_driver_model(value):
    """"WDDM" / "wddm" / "MCDM" / "TCC" -> the upper-case name; N/A and anything else -> None."""
    if not isinstance(value, str):
        return None
    upper = value.strip().upper()
    return upper if upper in DRIVER_MODELS else None


def used_memory_reason(used_mib, driver_model):
    """Why a process's memory is None (None when it is known)."""
    if used_mib is not None:
        return None
    return WDDM_MEMORY_REASON if driver_model == "WDDM" else NOT_REPORTED_REASON


def checked_nvidia_smi(value):
    """The nvidia_smi option (a program name or path, the first argv element), or ValueError naming it and the value:
    empty, blank or with a control character it names no program (it was run as it was, and the snapshot's probe said
    only that " could not be run")."""
    if not isinstance(value, str) or not value.strip() or any(ord(c) < 32 for c in value):
        raise ValueError("nvidia_smi: %r is no program name or path (like nvidia-smi or "
                         "C:\\Windows\\System32\\nvidia-smi.exe)" % (value,))
    return value


def query_xml_argv(nvidia_smi_path):
    """argv of the full XML query (the same as on Linux)."""
    return _nvsmi.query_xml_argv(nvidia_smi_path)


def query_gpu_argv(nvidia_smi_path, fields=QUERY_GPU_FIELDS):
    """argv of the per-GPU CSV query, parsed by parse_query_gpu_csv(text, fields)."""
    return [nvidia_smi_path, "--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits"]


def compute_apps_argv(nvidia_smi_path):
    """argv of the per-process CSV query, parsed by parse_compute_apps_csv(text, gpus)."""
    return _nvsmi.compute_apps_argv(nvidia_smi_path)


def parse_query_xml(text):
    """`nvidia-smi -q -x` -> the Linux probe result, each GPU with "driver_model": {"current", "pending"} and each
    process with "used_mib_reason" (None when used_mib is known)."""
    result = _nvsmi.parse_query_xml(text)
    models = _xml_driver_models(text)
    for gpu, model in zip(result["gpus"], models):
        gpu["driver_model"] = model
        for process in gpu["processes"]:
            process["used_mib_reason"] = used_memory_reason(process["used_mib"], model["current"])
    return result


def _xml_driver_models(text):
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    start = text.find("<nvidia_smi_log")
    root = ET.fromstring(text[start:]) if start >= 0 else ET.fromstring(text)
    return [{"current": normalize_driver_model(gpu.findtext("driver_model/current_dm")),
             "pending": normalize_driver_model(gpu.findtext("driver_model/pending_dm"))}
            for gpu in root.findall("gpu")]


def parse_query_gpu_csv(text, fields=QUERY_GPU_FIELDS):
    """`--query-gpu=<fields> --format=csv...` -> one dict per GPU: the CSV cells by field, and
    "pci_bus_id" (normalised) and "driver_model": {"current", "pending"}."""
    rows = _nvsmi.parse_query_gpu_csv(text, fields)
    for row in rows:
        row["pci_bus_id"] = normalize_bus_id(row.get("pci.bus_id") or "")
        row["driver_model"] = {"current": normalize_driver_model(row.get("driver_model.current")),
                               "pending": normalize_driver_model(row.get("driver_model.pending"))}
    return rows


def parse_compute_apps_csv(text, gpus, fields=_nvsmi.COMPUTE_APPS_FIELDS):
    """`--query-compute-apps=<fields> --format=csv...` -> [{"pid", "name", "pci_bus_id", "gpu_uuid", "used_mib",
    "used_mib_reason"}], the reason from the driver model of the row's GPU in `gpus` (parsed GPUs, matched by bus id).
    A row without a `gpu_bus_id` column takes the reason of the only driver model present, else the generic one."""
    models = dict((gpu.get("pci_bus_id"), gpu["driver_model"]["current"]) for gpu in gpus)
    only_model = next(iter(set(models.values()))) if len(set(models.values())) == 1 else None
    processes = []
    for row in _nvsmi.parse_compute_apps_csv(text, fields):
        bus_id = normalize_bus_id(row.get("gpu_bus_id") or "")
        used_mib = row.get("used_gpu_memory")
        model = models.get(bus_id, only_model)
        # Every row of --query-compute-apps is a compute context (type C in the XML's terms).
        processes.append({"pid": row.get("pid"), "name": row.get("process_name"), "pci_bus_id": bus_id, "type": "C",
                          "gpu_uuid": row.get("gpu_uuid"), "used_mib": used_mib,
                          "used_mib_reason": used_memory_reason(used_mib, model)})
    return processes
