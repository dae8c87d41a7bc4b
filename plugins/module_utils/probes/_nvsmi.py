# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure parsers for nvidia-smi output: `-q -x` XML and `--format=csv` queries.

No I/O here: callers run the argv from `query_xml_argv` / `compute_apps_argv` and hand the text in.
The GPU dicts follow "Normalised shapes" in docs/internals.md, the same shape the NVML backend returns.
"""

from __future__ import annotations

import re

from ansible_collections.gpuops.remediation.plugins.module_utils._linear_text import without_trailing_brackets
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._pci import normalize_bus_id

COMPUTE_APPS_FIELDS = ("pid", "process_name", "used_gpu_memory", "gpu_bus_id", "gpu_uuid")

# Values nvidia-smi prints where a number or a string is unavailable.
_UNAVAILABLE = ("n/a", "[n/a]", "[not supported]", "not supported", "unknown error", "[unknown error]",
                "[insufficient permissions]", "insufficient permissions",
                "[requested functionality has been deprecated]", "requested functionality has been deprecated",
                "not available in wddm driver model", "")

# CSV columns whose values stay text even when they look numeric (serial 0000000000000, names, ids).
_TEXT_FIELDS = frozenset(("timestamp", "name", "gpu_name", "process_name", "serial", "gpu_serial", "uuid",
                          "gpu_uuid", "driver_version", "vbios_version", "pci.bus_id", "gpu_bus_id",
                          "inforom.img", "inforom.oem", "inforom.ecc", "inforom.pwr"))
_BUS_ID_FIELDS = frozenset(("pci.bus_id", "gpu_bus_id"))

_INT_WITH_UNIT_RE = re.compile(r"^(-?\d+)(?:\s*(?:[A-Za-z%/]+))?$")
_FLOAT_WITH_UNIT_RE = re.compile(r"^(-?\d+\.\d+)\s*(?:[A-Za-z%/]+)$")
_MIB_RE = re.compile(r"^(\d+)\s*(KiB|MiB|GiB)?$")

_COMPUTE_MODES = {
    "default": "Default",
    "exclusiveprocess": "Exclusive_Process",
    "exclusivethread": "Exclusive_Thread",
    "prohibited": "Prohibited",
}

# <gpu_recovery_action> text (and NVML's enum names) -> the normalised recovery action.
_RECOVERY_ACTIONS = {
    "none": "none",
    "reset": "reset",
    "gpureset": "reset",
    "gpuresetrequired": "reset",
    "reboot": "reboot",
    "nodereboot": "reboot",
    "noderebootrequired": "reboot",
    "drainp2p": "drain_p2p",
    "drainandreset": "drain_and_reset",
}


def query_xml_argv(nvidia_smi_path):
    """argv for the full XML query."""
    return [nvidia_smi_path, "-q", "-x"]


def compute_apps_argv(nvidia_smi_path, fields=COMPUTE_APPS_FIELDS):
    """argv for the per-process compute query, parsed by parse_compute_apps_csv(text, fields)."""
    return [nvidia_smi_path, "--query-compute-apps=" + ",".join(fields), "--format=csv,noheader,nounits"]


def _is_unavailable(value):
    return value is None or value.strip().lower() in _UNAVAILABLE


def _text(element, path):
    """Stripped text of a child element, None if missing or unavailable."""
    if element is None:
        return None
    child = element.find(path)
    if child is None or child.text is None:
        return None
    value = child.text.strip()
    return None if _is_unavailable(value) else value


def _int_or_none(value):
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None


def _mib(value):
    """"81559 MiB" -> 81559; N/A and friends -> None."""
    if value is None:
        return None
    match = _MIB_RE.match(value.strip())
    if not match:
        return None
    number = int(match.group(1))
    unit = match.group(2)
    if unit == "GiB":
        return number * 1024
    if unit == "KiB":
        return number // 1024
    return number


def _enabled(value):
    """"Enabled" -> True, "Disabled" -> False, anything else -> None."""
    if value is None:
        return None
    lowered = value.strip().lower()
    if lowered == "enabled":
        return True
    if lowered == "disabled":
        return False
    return None


def _compute_mode(value):
    if value is None:
        return None
    key = re.sub(r"[\s_]", "", value).lower()
    return _COMPUTE_MODES.get(key)


def _recovery_action(value):
    if value is None:
        return None
    key = re.sub(r"[\s_-]", "", value).lower()
    return _RECOVERY_ACTIONS.get(key)


def _memory(usage):
    return {
        "memory_total_mib": _mib(_text(usage, "total")),
        "memory_used_mib": _mib(_text(usage, "used")),
        "memory_free_mib": _mib(_text(usage, "free")),
        "memory_reserved_mib": _mib(_text(usage, "reserved")),
    }


def _mig_devices(gpu):
    devices = []
    for mig in gpu.findall("mig_devices/mig_device"):
        usage = mig.find("fb_memory_usage")
        devices.append({
            "gpu_instance_id": _int_or_none(_text(mig, "gpu_instance_id")),
            "compute_instance_id": _int_or_none(_text(mig, "compute_instance_id")),
            "memory_used_mib": _mib(_text(usage, "used")),
            "memory_total_mib": _mib(_text(usage, "total")),
        })
    return devices


def _processes(gpu):
    processes = []
    for info in gpu.findall("processes/process_info"):
        pid = _int_or_none(_text(info, "pid"))
        if pid is None:
            continue
        processes.append({
            "pid": pid,
            "type": _text(info, "type"),
            "used_mib": _mib(_text(info, "used_memory")),
            "name": _text(info, "process_name"),
            "gpu_instance_id": _int_or_none(_text(info, "gpu_instance_id")),
            "compute_instance_id": _int_or_none(_text(info, "compute_instance_id")),
        })
    return processes


def _gpu(element, position):
    memory = _memory(element.find("fb_memory_usage"))
    gpu = {
        # nvidia-smi lists GPUs in NVML index order; <minor_number> is the N of /dev/nvidiaN and may differ
        # (the dual RTX A5000 capture lists minor 1 first), so it is kept apart.
        "index": position,
        "minor_number": _int_or_none(_text(element, "minor_number")),
        "uuid": _text(element, "uuid"),
        "serial": _text(element, "serial"),
        "name": _text(element, "product_name"),
        "pci_bus_id": normalize_bus_id(_text(element, "pci/pci_bus_id") or element.get("id")),
        "persistence_mode": _enabled(_text(element, "persistence_mode")),
        "compute_mode": _compute_mode(_text(element, "compute_mode")),
        "mig_mode": {
            "current": _enabled(_text(element, "mig_mode/current_mig")),
            "pending": _enabled(_text(element, "mig_mode/pending_mig")),
        },
        "mig_devices": _mig_devices(element),
        "recovery_action": _recovery_action(_text(element, "gpu_recovery_action")),
        "nvlink_peers": [],
        "processes": _processes(element),
    }
    gpu.update(memory)
    return gpu


def _xml_document(text):
    """Drop anything printed before the XML (warnings on stdout) so ElementTree sees one document."""
    for marker in ("<?xml", "<nvidia_smi_log"):
        start = text.find(marker)
        if start >= 0:
            return text[start:]
    return text


def parse_query_xml(text):
    """Parse `nvidia-smi -q -x` (DTD v10..v13 or none) into the driver probe result.

    Returns {"driver_version": str|None, "cuda_version": str|None, "gpus": [GPU]}; raises ValueError if
    the text is not nvidia-smi XML.
    """
    import xml.etree.ElementTree as ET  # only this backend parses XML; the NVML path never imports it

    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    try:
        root = ET.fromstring(_xml_document(text))
    except ET.ParseError as exc:
        raise ValueError("nvidia-smi -q -x output is not XML: %s" % exc) from exc
    if root.tag != "nvidia_smi_log":
        raise ValueError("unexpected XML root <%s>, expected <nvidia_smi_log>" % root.tag)
    return {
        "driver_version": _text(root, "driver_version"),
        "cuda_version": _text(root, "cuda_version"),
        "gpus": [_gpu(element, position) for position, element in enumerate(root.findall("gpu"))],
    }


def _csv_cell(field, value):
    """Convert one CSV cell: None when unavailable, int/float when numeric, bus ids normalised."""
    value = value.strip()
    if _is_unavailable(value):
        return None
    if field in _BUS_ID_FIELDS:
        return normalize_bus_id(value) or value
    if field in _TEXT_FIELDS:
        return value
    match = _INT_WITH_UNIT_RE.match(value)
    if match:
        return int(match.group(1))
    match = _FLOAT_WITH_UNIT_RE.match(value)
    if match:
        return float(match.group(1))
    return value


def _header_fields(header_line):
    """Field names from a CSV header: "used_gpu_memory [MiB]" -> "used_gpu_memory"."""
    return [without_trailing_brackets(cell.strip()) for cell in header_line.split(",")]


def _split_row(line, fields):
    """Split on ", " (nvidia-smi's separator); surplus cells belong to a free-text name column."""
    cells = line.split(", ")
    if len(cells) > len(fields):
        for name_field in ("process_name", "name", "gpu_name"):
            if name_field in fields:
                at = fields.index(name_field)
                surplus = len(cells) - len(fields)
                cells[at:at + surplus + 1] = [", ".join(cells[at:at + surplus + 1])]
                break
    return cells


def _looks_like_header(line, fields):
    first = line.split(",")[0].strip()
    return bool(fields) and without_trailing_brackets(first) == fields[0]


def parse_query_csv(text, fields=None):
    """Rows of any `--query-*=... --format=csv[,noheader][,nounits]` output as dicts keyed by field.

    `fields` are the names passed to --query-*; None reads them from the header line.
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    lines = [line.rstrip("\r") for line in text.splitlines() if line.strip()]
    if fields is None:
        if not lines:
            return []
        fields = _header_fields(lines[0])
        lines = lines[1:]
    else:
        fields = list(fields)
        if lines and _looks_like_header(lines[0], fields):
            lines = lines[1:]
    rows = []
    for line in lines:
        cells = _split_row(line, fields)
        if len(cells) != len(fields):
            raise ValueError("CSV row has %d cells for %d fields: %r" % (len(cells), len(fields), line))
        rows.append(dict((field, _csv_cell(field, cell)) for field, cell in zip(fields, cells)))
    return rows


def parse_query_gpu_csv(text, fields=None):
    """`nvidia-smi --query-gpu=<fields> --format=csv...` -> [{field: value}] (one dict per GPU)."""
    return parse_query_csv(text, fields)


def parse_compute_apps_csv(text, fields=None):
    """`nvidia-smi --query-compute-apps=<fields> --format=csv...` -> [{field: value}] (one per process)."""
    return parse_query_csv(text, fields)
