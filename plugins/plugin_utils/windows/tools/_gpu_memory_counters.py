# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU memory counters on Windows: per process (GPU Process Memory, summed per pid over LUIDs and phys) and per
adapter (GPU Adapter Memory). The per-process figures say who touches which GPU, never how much of its memory is
accounted: they are not additive (a real es-ES capture shows dwm.exe at 9.4 GB on an adapter using 0.99 GB). Ghost
memory is read from the adapter-level figure (_node_snapshot.ghost_memory).

Two sources, both ConvertTo-Json output: the language-neutral CIM class (property names never translated) and,
where it is missing, Get-Counter's samples (Path + CookedValue), whose counter names are the English ones only
when read through the English-name PDH path. An instance is `pid_<n>_luid_0x<high>_0x<low>_phys_<k>`.
"""

from __future__ import annotations

import re
from collections import namedtuple

from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node import _convertto_json

CIM_CLASS = "Win32_PerfFormattedData_GPUPerformanceCounters_GPUProcessMemory"

# CIM property / English counter name -> our key.
CIM_PROPERTIES = {"DedicatedUsage": "dedicated_bytes", "SharedUsage": "shared_bytes", "LocalUsage": "local_bytes",
                  "NonLocalUsage": "non_local_bytes", "TotalCommitted": "total_committed_bytes"}
_COUNTER_NAMES = {"dedicated usage": "dedicated_bytes", "shared usage": "shared_bytes", "local usage": "local_bytes",
                  "non local usage": "non_local_bytes", "total committed": "total_committed_bytes"}

_PROCESS_INSTANCE_RE = re.compile(r"^pid_(\d+)_luid_(0x[0-9a-f]+)_(0x[0-9a-f]+)_phys_(\d+)$", re.IGNORECASE)
_ADAPTER_INSTANCE_RE = re.compile(r"^luid_(0x[0-9a-f]+)_(0x[0-9a-f]+)_phys_(\d+)$", re.IGNORECASE)
# \\host\gpu process memory(<instance>)\<counter>; the instance never holds a backslash.
_COUNTER_PATH_RE = re.compile(r"\\([^\\]*)\(([^\\()]*)\)\\([^\\]+)$")

CounterReading = namedtuple("CounterReading", "by_pid unrecognised")


def parse_process_instance(instance):
    """`pid_5388_luid_0x00000000_0x0000fa7a_phys_0` -> (5388, "0x00000000_0x0000fa7a", 0); None if not one."""
    match = _PROCESS_INSTANCE_RE.match(instance.strip())
    if not match:
        return None
    return int(match.group(1)), _luid(match.group(2), match.group(3)), int(match.group(4))


def luid_value(luid):
    """"0x00000000_0x0000fa7a" -> the 64-bit LUID (high << 32 | low), as the registry's AdapterLuid QWORD holds it."""
    high, low = luid.split("_")
    return (int(high, 16) << 32) | int(low, 16)


def parse_cim_process_memory(text):
    """ConvertTo-Json of the CIM class's instances (Name and the usage properties) -> CounterReading."""
    reading = CounterReading({}, [])
    for item in _convertto_json.objects(text):
        instance = str(item.get("Name") or "")
        values = dict((key, _convertto_json.integer(item.get(prop))) for prop, key in CIM_PROPERTIES.items() if prop in item)
        _add(reading, instance, values, item)
    return reading


def parse_counter_samples(text):
    """ConvertTo-Json of Get-Counter's CounterSamples (Path, CookedValue) -> CounterReading.

    A sample of a counter not named in English (a translated path) is reported in `unrecognised`, not guessed.
    """
    reading = CounterReading({}, [])
    for item in _convertto_json.objects(text):
        match = _COUNTER_PATH_RE.search(str(item.get("Path") or ""))
        key = _COUNTER_NAMES.get(match.group(3).strip().lower()) if match else None
        if key is None:
            reading.unrecognised.append({"sample": item, "why": "not a GPU Process Memory counter path in English"})
            continue
        _add(reading, match.group(2), {key: _convertto_json.integer(item.get("CookedValue"))}, item)
    return reading


ADAPTER_CIM_CLASS = "Win32_PerfFormattedData_GPUPerformanceCounters_GPUAdapterMemory"


def parse_adapter_memory(text):
    """ConvertTo-Json of the GPU Adapter Memory instances -> {luid: dedicated bytes}: the CIM class (Name,
    DedicatedUsage) or Get-Counter's `\\GPU Adapter Memory(*)\\Dedicated Usage` samples (InstanceName, CookedValue).
    What WDDM accounts to the adapter for every live process together: an adapter-level figure. A value below 0 is no
    sample (a counter whose owner went away reads -1), never a negative size."""
    by_luid, partial = {}, set()
    for item in _convertto_json.objects(text):
        name = item.get("Name") if item.get("Name") is not None else item.get("InstanceName")
        match = _ADAPTER_INSTANCE_RE.match(str(name or "").strip())
        if not match:
            continue
        value = _convertto_json.integer(item.get("DedicatedUsage") if "DedicatedUsage" in item else item.get("CookedValue"))
        luid = _luid(match.group(1), match.group(2))
        if value is None or value < 0:
            partial.add(luid)  # one physical part without a sample: the others' sum is not the adapter's figure
            continue
        by_luid[luid] = by_luid.get(luid, 0) + value
    return dict((luid, value) for luid, value in by_luid.items() if luid not in partial)


def _luid(high, low):
    return "0x%08x_0x%08x" % (int(high, 16), int(low, 16))


def _add(reading, instance, values, item):
    parsed = parse_process_instance(instance)
    if parsed is None:
        reading.unrecognised.append({"sample": item, "why": "not a pid_<n>_luid_..._phys_<k> instance"})
        return
    pid, luid, _phys = parsed
    entry = reading.by_pid.setdefault(pid, {"pid": pid, "by_luid": {}})
    per_luid = entry["by_luid"].setdefault(luid, {})
    for key, value in values.items():
        if value is None or value < 0:
            continue  # -1 is the sample of a process that has exited: no sample, never -1 bytes
        per_luid[key] = per_luid.get(key, 0) + value
        entry[key] = entry.get(key, 0) + value
