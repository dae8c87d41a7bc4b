# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""_gpu_memory_counters: GPU Process Memory per pid, on the Get-Counter captures in fixtures/windows/get-counter.

No capture of the CIM class's ConvertTo-Json exists yet: those tests build it from the capture's instance and
numbers in the 5.1 layout (marked where they do).
"""

from __future__ import annotations

import json

import pytest

from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.tools import _gpu_memory_counters

PROCESS_SAMPLES = ("windows", "get-counter", "gpu-process-memory-dedicated-shared-path-cookedvalue-json-conpc53.json")
ADAPTER_SAMPLES = ("windows", "get-counter", "gpu-adapter-memory-dedicated-instancename-cookedvalue-json-gpustack-comment.json")


def cim_json(rows):
    """ConvertTo-Json (5.1 layout) of Select-Object Name, DedicatedUsage, SharedUsage: built, not captured."""
    return json.dumps(rows, indent=4).replace('": ', '":  ')


def test_get_counter_samples_of_one_process_on_one_adapter(captures):
    reading = _gpu_memory_counters.parse_counter_samples(captures.text(*PROCESS_SAMPLES))
    assert reading.unrecognised == []
    assert reading.by_pid == {5388: {
        "pid": 5388, "dedicated_bytes": 12097953792, "shared_bytes": 385875968,
        "by_luid": {"0x00000000_0x0000fa7a": {"dedicated_bytes": 12097953792, "shared_bytes": 385875968}}}}


def test_adapter_memory_by_luid(captures):
    assert _gpu_memory_counters.parse_adapter_memory(captures.text(*ADAPTER_SAMPLES)) == {
        "0x00000000_0x00010860": 0, "0x00000000_0x0050090f": 2630623232}


def test_pid_1234_is_not_pid_12345_and_case_does_not_matter():
    reading = _gpu_memory_counters.parse_cim_process_memory(cim_json([
        {"Name": "pid_1234_luid_0x00000000_0x0000FA7A_phys_0", "DedicatedUsage": 100, "SharedUsage": 1},
        {"Name": "PID_12345_LUID_0x00000000_0x0000fa7a_PHYS_0", "DedicatedUsage": 7000, "SharedUsage": 2},
    ]))
    assert reading.by_pid[1234]["dedicated_bytes"] == 100 and reading.by_pid[12345]["dedicated_bytes"] == 7000


def test_one_process_is_summed_over_its_luids_and_phys():
    reading = _gpu_memory_counters.parse_cim_process_memory(cim_json([
        {"Name": "pid_5388_luid_0x00000000_0x0000fa7a_phys_0", "DedicatedUsage": 12097953792, "SharedUsage": 385875968},
        {"Name": "pid_5388_luid_0x00000000_0x0000fa7a_phys_1", "DedicatedUsage": 1000, "SharedUsage": "24"},
        {"Name": "pid_5388_luid_0x00000000_0x00010860_phys_0", "DedicatedUsage": 0, "SharedUsage": 8},
    ]))
    entry = reading.by_pid[5388]
    assert entry["dedicated_bytes"] == 12097954792 and entry["shared_bytes"] == 385876000
    assert entry["by_luid"]["0x00000000_0x0000fa7a"] == {"dedicated_bytes": 12097954792, "shared_bytes": 385875992}
    assert entry["by_luid"]["0x00000000_0x00010860"] == {"dedicated_bytes": 0, "shared_bytes": 8}


def test_a_single_instance_written_without_the_list_and_an_empty_output():
    single = cim_json({"Name": "pid_8_luid_0x00000000_0x0000fa7a_phys_0", "DedicatedUsage": 5})
    assert _gpu_memory_counters.parse_cim_process_memory(single).by_pid[8]["dedicated_bytes"] == 5
    assert _gpu_memory_counters.parse_cim_process_memory("").by_pid == {}


def test_a_translated_counter_path_is_reported_not_guessed(captures):
    samples = json.loads(captures.text(*PROCESS_SAMPLES))
    samples[0]["Path"] = samples[0]["Path"].replace("gpu process memory", "gpu-prozessspeicher").replace(
        "dedicated usage", "dedizierte nutzung")
    reading = _gpu_memory_counters.parse_counter_samples(json.dumps(samples))
    assert reading.by_pid[5388] == {"pid": 5388, "shared_bytes": 385875968,
                                    "by_luid": {"0x00000000_0x0000fa7a": {"shared_bytes": 385875968}}}
    assert len(reading.unrecognised) == 1 and "English" in reading.unrecognised[0]["why"]


@pytest.mark.parametrize("name", ["_Total", "pid_12_luid_0x0_0x1", "pid_x_luid_0x0_0x1_phys_0",
                                  "pid_12_luid_0x0_0x1_phys_0_eng_0_engtype_3D"])
def test_other_instances_are_unrecognised(name):
    reading = _gpu_memory_counters.parse_cim_process_memory(cim_json([{"Name": name, "DedicatedUsage": 1}]))
    assert reading.by_pid == {} and len(reading.unrecognised) == 1


def test_luid_value_is_the_registry_qword():
    assert _gpu_memory_counters.luid_value("0x00000000_0x0000fa7a") == 0xFA7A
    assert _gpu_memory_counters.luid_value("0x00000001_0x00000002") == (1 << 32) | 2
    assert _gpu_memory_counters.parse_process_instance("pid_5388_luid_0x0_0xFA7A_phys_2") == (5388, "0x00000000_0x0000fa7a", 2)


def test_output_that_is_not_json_objects_is_an_error():
    with pytest.raises(ValueError, match="ConvertTo-Json"):
        _gpu_memory_counters.parse_cim_process_memory("Get-CimInstance : Invalid class")
    with pytest.raises(ValueError, match="other than objects"):
        _gpu_memory_counters.parse_cim_process_memory("[1, 2]")


MIB = 1024 * 1024


def test_an_adapter_whose_one_physical_part_has_no_sample_has_no_figure():
    # a linked adapter (phys_0, phys_1 under one LUID): phys_0 reads -1 (no sample); phys_1's 100 MiB alone is not
    # what the adapter uses, and taken for it would make 2900 of 3000 MiB in use look like ghost memory.
    import json
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.tools import _gpu_memory_counters
    rows = [{"Name": "luid_0x00000000_0x0000fa7a_phys_0", "DedicatedUsage": -1},
            {"Name": "luid_0x00000000_0x0000fa7a_phys_1", "DedicatedUsage": 100 * MIB},
            {"Name": "luid_0x00000000_0x0000fb7a_phys_0", "DedicatedUsage": 5 * MIB},
            {"Name": "luid_0x00000000_0x0000fb7a_phys_1", "DedicatedUsage": 7 * MIB}]
    assert _gpu_memory_counters.parse_adapter_memory(json.dumps(rows)) == {"0x00000000_0x0000fb7a": 12 * MIB}
