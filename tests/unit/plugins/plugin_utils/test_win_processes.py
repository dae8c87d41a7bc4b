# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""_win_processes and _win_json: processes, their identity and their role, on fixtures/windows captures."""

from __future__ import annotations

import json

import pytest

from ansible_collections.gpuops.remediation.plugins.plugin_utils import _win_json, _win_processes

START = ("windows", "process-start-time")
NOTEPAD_MS = 1790077571033


def test_win32_process_json_gives_the_identity(captures):
    [process] = _win_processes.parse_cim_processes(captures.text(*START, "win32-process-creationdate-convertto-json-ps51.json"))
    assert process["pid"] == 16828 and process["ppid"] == 20256 and process["name"] == "Notepad.exe"
    assert process["image_path"].endswith("\\Notepad\\Notepad.exe") and process["role"] is None
    assert process["creation_time_ms"] == NOTEPAD_MS


def test_get_process_json_names_the_same_process_the_same_way(captures):
    [process] = _win_processes.parse_cim_processes(captures.text(*START, "get-process-starttime-convertto-json-ps51.json"))
    assert (process["pid"], process["name"], process["creation_time_ms"]) == (16828, "Notepad", NOTEPAD_MS)


def test_the_three_clocks_agree_to_the_millisecond(captures):
    raw = json.loads(captures.text(*START, "getprocesstimes-creation-filetime-same-pid.json"))
    assert _win_json.filetime_to_epoch_ms(raw["creation_time"]) == NOTEPAD_MS


def test_format_list_output_is_refused_its_dates_are_localized(captures):
    with pytest.raises(ValueError, match="ConvertTo-Json"):
        _win_processes.parse_cim_processes(captures.text(*START, "win32-process-format-list-creationdate-zh-cn-locale.txt"))
    assert _win_json.epoch_ms("2026/10/2 9:44:28") is None


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
    assert _win_json.epoch_ms(text) == ms


@pytest.mark.parametrize("name, pid, role", [
    ("vmmemWSL", 9120, "wsl_vm"), ("vmmem", 9120, "wsl_vm"), ("VMMEM.EXE", 9120, "wsl_vm"),
    ("csrss.exe", 612, "protected"), ("wininit.exe", 700, "protected"), ("winlogon.exe", 780, "protected"),
    ("services.exe", 820, "protected"), ("lsass.exe", 836, "protected"), ("smss.exe", 400, "protected"),
    ("System", 4, "protected"), ("System Idle Process", 0, "protected"), ("Idle", 0, "protected"),
    ("Registry", 120, "protected"), ("Memory Compression", 2400, "protected"), ("anything", 4, "protected"),
    ("dwm.exe", 2056, "dwm"), ("python.exe", 3124, None), ("csrss-helper.exe", 3125, None),
])
def test_roles(name, pid, role):
    assert _win_processes.role(name, pid) == role


def test_cim_rows_with_the_user_and_session_the_script_adds():
    text = json.dumps([{"ProcessId": 9120, "ParentProcessId": 4, "Name": "vmmemWSL", "SessionId": 0, "User": None,
                        "CreationDate": "/Date(1790000000000)/", "ExecutablePath": None},
                       {"ProcessId": 3124, "Name": "python.exe", "SessionId": 1, "User": "WS12\\alice",
                        "CreationDate": "/Date(1790077571033)/"},
                       {"Name": "no pid"}])
    processes = _win_processes.parse_cim_processes(text)
    assert [(p["pid"], p["role"], p["session_id"], p["user"]) for p in processes] == [
        (9120, "wsl_vm", 0, None), (3124, None, 1, "WS12\\alice")]


def test_tasklist_csv_en_and_de_thousands_separators(captures):
    listing = _win_processes.parse_tasklist_csv(captures.text("windows", "tasklist", "fo-csv-nh-many-rows-excerpt.csv"))
    assert listing.status == "ok" and len(listing.processes) == 28
    assert listing.processes[0] == {"pid": 952, "name": "AUEPMaster.exe", "session_name": "Services", "session_id": 0,
                                    "memory_kib": 15612, "role": None}
    german = _win_processes.parse_tasklist_csv(captures.text("windows", "tasklist", "fi-pid-fo-csv-nh-found-de-thousands-dot.csv"))
    assert german.processes == [{"pid": 4, "name": "System", "session_name": "Services", "session_id": 0,
                                 "memory_kib": 14348, "role": "protected"}]


def test_tasklist_verbose_csv_by_position_under_a_localized_header():
    text = ('"Abbildname","PID","Sitzungsname","Sitz.-Nr.","Speichernutzung","Status","Benutzername","CPU-Zeit","Fenstertitel"\n'
            '"python.exe","3124","Console","1","1.204.568 K","Wird ausgeführt","WS12\\alice","0:12:01","N/A"\n')
    [process] = _win_processes.parse_tasklist_csv(text).processes
    assert process["pid"] == 3124 and process["memory_kib"] == 1204568 and process["user"] == "WS12\\alice"
    assert process["status"] == "Wird ausgeführt" and process["cpu_time"] == "0:12:01"


@pytest.mark.parametrize("name, reader", [("fi-imagename-no-match-info-en.txt", "table"),
                                          ("fi-pid-no-match-information-de.txt", "csv")])
def test_no_tasks_lines_the_captures_show(captures, name, reader):
    parse = _win_processes.parse_tasklist_csv if reader == "csv" else _win_processes.parse_tasklist_table
    listing = parse(captures.text("windows", "tasklist", name))
    assert listing.status == "no_match" and listing.processes == []


def test_a_no_tasks_line_in_another_language_concludes_nothing():
    listing = _win_processes.parse_tasklist_csv("INFORMATIONS : aucune tâche en service ne correspond aux critères spécifiés.\n")
    assert listing.status == "unrecognised"


def test_a_tasklist_error_is_unrecognised(captures):
    listing = _win_processes.parse_tasklist_csv(captures.text("windows", "tasklist", "git-bash-fi-path-mangled-error-de.txt"), rc=1)
    assert listing.status == "unrecognised" and "FEHLER" in listing.message
    assert _win_processes.parse_tasklist_csv("").status == "unrecognised"


@pytest.mark.parametrize("name, rows", [
    ("fi-imagename-two-rows.txt", [(4616, "nginx.exe", 7412), (5836, "nginx.exe", 7800)]),
    ("fi-imagename-gvim-single.txt", [(6112, "gvim.exe", 21796)]),
    ("fi-pid-single-row-header-trimmed.txt", [(19148, "java.exe", 516356)]),
])
def test_tasklist_tables_cut_by_the_rule_line_or_by_the_row_shape(captures, name, rows):
    listing = _win_processes.parse_tasklist_table(captures.text("windows", "tasklist", name))
    assert listing.status == "ok"
    assert [(p["pid"], p["name"], p["memory_kib"]) for p in listing.processes] == rows
    assert {(p["session_name"], p["session_id"]) for p in listing.processes} == {("Console", 1)}


def test_a_table_image_name_with_spaces_stays_whole():
    text = ("Image Name                     PID Session Name        Session#    Mem Usage\n"
            "========================= ======== ================ =========== ============\n"
            "NZXT CAM.exe                 20372 Console                    1     96,004 K\n")
    [process] = _win_processes.parse_tasklist_table(text).processes
    assert (process["name"], process["pid"]) == ("NZXT CAM.exe", 20372)
