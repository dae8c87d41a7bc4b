# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""_cim_processes and _convertto_json: processes, their identity and their role, on fixtures/windows captures."""

from __future__ import annotations

import json

import pytest

from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node import _convertto_json
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.tools import _cim_processes

START = ("windows", "process-start-time")
NOTEPAD_MS = 1790077571033


def test_win32_process_json_gives_the_identity(captures):
    [process] = _cim_processes.parse_cim_processes(captures.text(*START, "win32-process-creationdate-convertto-json-ps51.json"))
    assert process["pid"] == 16828 and process["ppid"] == 20256 and process["name"] == "Notepad.exe"
    assert process["image_path"].endswith("\\Notepad\\Notepad.exe") and process["role"] is None
    assert process["creation_time_ms"] == NOTEPAD_MS


def test_get_process_json_names_the_same_process_the_same_way(captures):
    [process] = _cim_processes.parse_cim_processes(captures.text(*START, "get-process-starttime-convertto-json-ps51.json"))
    assert (process["pid"], process["name"], process["creation_time_ms"]) == (16828, "Notepad", NOTEPAD_MS)


def test_the_three_clocks_agree_to_the_millisecond(captures):
    raw = json.loads(captures.text(*START, "getprocesstimes-creation-filetime-same-pid.json"))
    assert _convertto_json.filetime_to_epoch_ms(raw["creation_time"]) == NOTEPAD_MS


def test_format_list_output_is_refused_its_dates_are_localized(captures):
    with pytest.raises(ValueError, match="ConvertTo-Json"):
        _cim_processes.parse_cim_processes(captures.text(*START, "win32-process-format-list-creationdate-zh-cn-locale.txt"))
    assert _convertto_json.epoch_ms("2026/10/2 9:44:28") is None


@pytest.mark.parametrize("text, ms", [
    ("/Date(1790077571033)/", NOTEPAD_MS),
    ("2026-09-22T10:26:11.0339280Z", 1790072771033),
    ("2026-09-22T12:26:11.0339280+02:00", 1790072771033),
    ("2026-09-22T10:26:11Z", 1790072771000),
    ("20260922122611.033928+120", 1790072771033),  # CIM's DMTF form, offset in minutes
    ("2026-09-22T10:26:11.0339280", None),  # a local time names no instant
    ("yesterday", None), (None, None), (1790077571033, None),
])
def test_every_date_form_becomes_milliseconds_since_1970(text, ms):
    assert _convertto_json.epoch_ms(text) == ms


@pytest.mark.parametrize("name, pid, role", [
    ("vmmemWSL", 9120, "vm"), ("vmmem", 9120, "vm"), ("VMMEM.EXE", 9120, "vm"),
    ("csrss.exe", 612, "protected"), ("wininit.exe", 700, "protected"), ("winlogon.exe", 780, "protected"),
    ("services.exe", 820, "protected"), ("lsass.exe", 836, "protected"), ("smss.exe", 400, "protected"),
    ("System", 4, "protected"), ("System Idle Process", 0, "protected"), ("Idle", 0, "protected"),
    ("Registry", 120, "protected"), ("Memory Compression", 2400, "protected"), ("anything", 4, "protected"),
    ("dwm.exe", 2056, "dwm"), ("python.exe", 3124, None), ("csrss-helper.exe", 3125, None),
])
def test_roles(name, pid, role):
    assert _cim_processes.role(name, pid) == role


def test_cim_rows_with_the_user_and_session_the_script_adds():
    text = json.dumps([{"ProcessId": 9120, "ParentProcessId": 4, "Name": "vmmemWSL", "SessionId": 0, "User": None,
                        "CreationDate": "/Date(1790000000000)/", "ExecutablePath": None},
                       {"ProcessId": 3124, "Name": "python.exe", "SessionId": 1, "User": "WS12\\alice",
                        "CreationDate": "/Date(1790077571033)/"},
                       {"Name": "no pid"}])
    processes = _cim_processes.parse_cim_processes(text)
    assert [(p["pid"], p["role"], p["session_id"], p["user"]) for p in processes] == [
        (9120, "vm", 0, None), (3124, None, 1, "WS12\\alice")]


@pytest.mark.parametrize("text", ["", "null", "[null]", "[\r\n    null\r\n]"])
def test_an_empty_pipeline_in_every_form_powershell_writes_it_is_no_process(text):
    # Windows PowerShell 5.1: ConvertTo-Json -InputObject @($nothing) is [null]
    assert _cim_processes.parse_cim_processes(text) == []
