# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Windows host's facts on the real-host path: TargetNode answered with the real captures of
tests/unit/plugins/fixtures/windows, re-encoded as the tools write them (the host's OEM code page; UTF-16LE with and
without a BOM), and the simulated node where a rule acts.

1 sessions from the session API, quser read by its columns where Add-Type is refused; 2 the host's OEM code page;
4 the tree fallback never takes a child born after the tree was read; 5 an adapter's state from ConfigManagerErrorCode,
not pnputil's words; 6 the journal folder made with its DACL, links refused; 7 the PCI domain compared where both sides
state it. (3, protect_users failing closed, is the protect rule's: test_win_protected_on_every_path.py.)"""

from __future__ import annotations

import codecs
import json
import os

import pytest

from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.rungs import _adapter_restart, _reset_dispatch, _end_by_handle
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node import _output_encoding, _remote_node, _powershell_scripts
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows import _windows_walk, _node_snapshot
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.tools import _pnputil_adapters, _interactive_sessions
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.simulation import _simulated_node
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node._remote_node import SimulatedNode, WindowsNodeError
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.simulation._simulated_state import _spawn, locked_state

from ansible_collections.gpuops.remediation.tests.unit.helpers.powershell_grammar import Script
from ansible_collections.gpuops.remediation.tests.unit.helpers.win_host import ScriptAnswers

QUSER = ("windows", "quser")
HEADER_CAPTURES = ["header-console-current-marker-phoebe.txt", "header-console-no-marker-over-ssh.txt",
                   "header-disc-blank-sessionname-dotted-date-test-data.txt", "header-rdp-current-marker-dot-idle.txt"]
# user names quser cannot split on blanks, in the code page a host of that language writes them in
NAMES = [(437, "john smith"), (850, "jos\u00e9 mar\u00eda"), (866, "\u041a\u0438\u0440\u0438\u043b\u043b \u0418\u0432\u0430\u043d\u043e\u0432"),
         (932, "\u5c71\u7530 \u592a\u90ce"), (866, "\u0442\u0438\u0431"), (1252, "Ren\u00e9e O'Neil")]
NOT_ELEVATED = "Cannot add type. Definition of new types is not supported in this language mode."


def renamed(text, name):
    """A quser capture whose first row's user is `name`, in the user column as quser pads it (the header's positions)."""
    lines = text.splitlines()
    start = _interactive_sessions._columns(lines[0])[1]
    row = lines[1]
    lines[1] = row[0] + name.ljust(start - 1) + row[start:]
    return "\r\n".join(lines) + "\r\n"


# ---- 1 and 2: sessions, the OEM code page -------------------------------------------------------------------------

@pytest.mark.parametrize("capture", HEADER_CAPTURES)
@pytest.mark.parametrize("code_page, name", NAMES)
def test_quser_in_the_hosts_oem_code_page_read_by_its_columns_where_the_session_api_cannot_compile(captures, capture, code_page, name):
    text = renamed(captures.text(*(QUSER + (capture,))), name)
    action = ScriptAnswers({"quser": (0, text.encode("cp%d" % code_page), b"")},
                           {"sessions": {"unavailable": NOT_ELEVATED, "sessions": "[]"}, "code_page": {"oem": str(code_page), "ansi": "1252"}})
    node = _remote_node.TargetNode(action, {})
    found = _interactive_sessions.read(node)
    again = _interactive_sessions.read(node)
    assert found.status == "ok" and found.source == "quser" and "could not be compiled" in found.message
    assert [s["user"] for s in found.sessions] == [name] == [s["user"] for s in again.sessions]
    assert _interactive_sessions.sessions_of(found.sessions, "WS12\\" + name.upper())
    assert not _interactive_sessions.sessions_of(found.sessions, name.split(" ")[0]) or " " not in name  # never the first word alone
    # read once per node, and only when a tool wrote something beyond ASCII
    assert action.calls.count(("script", "code_page")) == (0 if name.isascii() else 1)


def test_the_session_id_of_a_disconnected_session_with_a_spaced_name_is_its_own(captures):
    text = renamed(captures.text(*(QUSER + ("header-disc-blank-sessionname-dotted-date-test-data.txt",))), "john smith")
    [session] = _interactive_sessions.parse_quser(text, 0).sessions
    assert (session["user"], session["session_name"], session["id"], session["state"]) == ("john smith", None, 4, "Disc")


@pytest.mark.parametrize("capture", ["rdp-sessions-ws2008r2-no-header.txt", "rdp-sessions-ws2019-no-header.txt"])
def test_rows_without_a_header_are_still_read_by_their_shape(captures, capture):
    found = _interactive_sessions.parse_quser(captures.text(*(QUSER + (capture,))), 0)
    assert found.status == "ok" and [(s["user"], s["id"]) for s in found.sessions] == [("user1", 30), ("user2", 42), ("user3", 55)]


def wts_answer(*sessions):
    rows = [{"SessionId": 0, "State": 4, "WinStationName": "Services", "UserName": "", "DomainName": ""}]
    rows += [{"SessionId": sid, "State": state, "WinStationName": station, "UserName": user, "DomainName": "WS12"}
             for sid, state, station, user in sessions]
    rows.append({"SessionId": 65536, "State": 6, "WinStationName": "RDP-Tcp", "UserName": "", "DomainName": ""})
    # Windows PowerShell 5.1's ConvertTo-Json layout: two spaces after the colon, non-ASCII escaped
    return {"unavailable": None, "sessions": json.dumps(rows, indent=4).replace('": ', '":  '), "own_session": 0}


def test_the_session_api_gives_whole_names_in_any_language_and_quser_is_never_read():
    long_name = "Administrateur-du-domaine-principal"  # quser cuts it at 20 characters, the API does not
    action = ScriptAnswers({}, {"sessions": wts_answer((1, 0, "Console", "jos\u00e9 mar\u00eda"), (2, 4, "", "john smith"),
                                                       (3, 0, "RDP-Tcp#0", long_name))})
    found = _interactive_sessions.read(_remote_node.TargetNode(action, {}))
    assert found.source == "wts" and [(s["id"], s["user"], s["state"], s["session_name"]) for s in found.sessions] == [
        (1, "jos\u00e9 mar\u00eda", "Active", "Console"), (2, "john smith", "Disc", None), (3, long_name, "Active", "RDP-Tcp#0")]
    assert [s["id"] for s in _interactive_sessions.sessions_of(found.sessions, "john")] == []
    assert not [call for call in action.calls if call[0] == "command"]


def test_a_domain_prefix_names_the_sessions_domain_where_the_api_gave_one():
    action = ScriptAnswers({}, {"sessions": wts_answer((1, 0, "Console", "ada"), (2, 0, "RDP-Tcp#0", "bob"))})
    sessions = _interactive_sessions.read(_remote_node.TargetNode(action, {})).sessions
    sessions[1]["domain"] = "CORP"
    assert [s["id"] for s in _interactive_sessions.sessions_of(sessions, "WS12\\ADA")] == [1]
    assert _interactive_sessions.sessions_of(sessions, "ws12\\bob") == []  # CORP\bob is not the local bob
    assert [s["id"] for s in _interactive_sessions.sessions_of(sessions, "corp\\bob")] == [2]
    assert [s["id"] for s in _interactive_sessions.sessions_of(sessions, "bob")] == [2]
    assert [s["id"] for s in _interactive_sessions.sessions_of(sessions, ".\\ada")] == [1]
    quser = [dict(session, domain=None) for session in sessions]  # quser names no domain: the prefix is not known
    assert [s["id"] for s in _interactive_sessions.sessions_of(quser, "ws12\\bob")] == [2]


@pytest.mark.parametrize("constrained", [False, True])
def test_logoff_of_john_never_logs_off_john_smith(tmp_path, constrained):
    root = str(tmp_path / "ws12")
    _simulated_node.write_node(root, _simulated_node.build_state({"hostname": "WS12", "constrained_language": constrained, "oem_code_page": 850,
                                                                  "administrators": ["ada"],
                                                                  "sessions": [{"user": "john smith"}, {"user": "john"}, {"user": "jos\u00e9"}]}))
    node = SimulatedNode(root, "ada")
    done = _reset_dispatch.run(node, {"method": "logoff", "allow_dwm": True, "user": "john"}, check_mode=False)
    assert done["changed"] and [e["user"] for e in done["sessions"]] == ["john"]
    assert [s["user"] for s in _simulated_node.snapshot_of_state(root)["sessions"]] == ["john smith", "jos\u00e9"]
    done = _reset_dispatch.run(node, {"method": "logoff", "allow_dwm": True, "user": "WS12\\Jos\u00e9"}, check_mode=False)
    assert done["changed"] and [s["user"] for s in _simulated_node.snapshot_of_state(root)["sessions"]] == ["john smith"]
    assert _node_snapshot.take(node)["probes"]["sessions"]["source"] == ("quser" if constrained else "wts")


def test_code_page_bytes_that_happen_to_be_utf8_are_read_in_the_hosts_code_page():
    raw = "\u0442\u0438\u0431".encode("cp866")
    raw.decode("utf-8")  # E2 A8 A1: valid UTF-8 (another character)
    assert _output_encoding.decode_transported(raw.decode("latin-1"), 866) == ("\u0442\u0438\u0431", "cp866 (OEM code page)", False)


def test_where_the_code_page_cannot_be_read_437_is_used_and_said():
    listing = b" USERNAME  SESSIONNAME  ID  STATE  IDLE TIME  LOGON TIME\r\n>jos\x82  console  1  Active  none  1/1/2026 1:00\r\n"
    action = ScriptAnswers({"quser": (0, listing, b"")}, {"code_page": WindowsNodeError("access denied")})
    answer = _remote_node.TargetNode(action, {}).command(["quser"], read_only=True)
    assert "jos\u00e9" in answer.stdout and answer.encoding.startswith("cp437 (the host's OEM code page not known")


@pytest.mark.parametrize("bom", [b"", codecs.BOM_UTF16_LE])
def test_wsl_exe_utf16_with_or_without_bom_never_asks_for_the_code_page(bom):
    text = "Es werden keine Distributionen ausgef\u00fchrt.\r\n"
    action = ScriptAnswers({"wsl.exe": (-1, bom + text.encode("utf-16-le"), b"")}, {})
    answer = _remote_node.TargetNode(action, {}).command(["wsl.exe", "--list", "--running"], read_only=True)
    assert answer.stdout == text.replace("\r\n", "\n") and action.calls == [("command", "wsl.exe")]


# ---- 3: protect_users fails closed ---------------------------------------------------------------------------------

# ---- 4: the tree fallback ------------------------------------------------------------------------------------------

class ChildBornLater(SimulatedNode):
    """A node on which the selected process starts a child after the process list was read, just before the end."""

    parent = None
    born = None

    def powershell(self, name, parameters=None, read_only=True):
        if name in ("terminate", "terminate_held") and (parameters or {}).get("ProcessIds") and self.born is None:
            with locked_state(self.root, write=True) as state:
                self.born = _spawn(state, "late.exe", "WS12\\ada", 1, None, parent_name=self.parent)["pid"]
        return super().powershell(name, parameters, read_only)


@pytest.mark.parametrize("constrained", [True, False])
def test_a_child_born_after_the_tree_was_read_is_never_taken(tmp_path, constrained):
    root = str(tmp_path / "ws12")
    _simulated_node.write_node(root, _simulated_node.build_state({"hostname": "WS12", "constrained_language": constrained, "processes": [
        {"name": "python.exe", "memory_mib": 2048, "children": [{"name": "worker.exe", "memory_mib": 512}]}]}))
    node = ChildBornLater(root, "ada")
    node.parent = "python.exe"
    snapshot = _node_snapshot.take(node)
    selected = [h for h in snapshot["holders"] if h["name"] == "python.exe"]
    worker = next(h for h in snapshot["holders"] if h["name"] == "worker.exe")
    done = _reset_dispatch.run(node, {"method": "kill", "holders": selected}, check_mode=False)
    alive = [p["pid"] for p in _simulated_node.snapshot_of_state(root)["processes"]]
    assert node.born in alive and selected[0]["pid"] not in alive and worker["pid"] not in alive
    assert done["ended_pids"] == sorted([selected[0]["pid"], worker["pid"]]) and not done["failed"]
    assert done["processes"][0]["taskkill"]["method"] == ("taskkill" if constrained else "terminate")


def test_the_held_fallback_leaves_a_reused_pid_and_says_so(tmp_path):
    root = str(tmp_path / "ws12")
    _simulated_node.write_node(root, _simulated_node.build_state({"hostname": "WS12", "constrained_language": True,
                                                                  "processes": [{"name": "python.exe", "memory_mib": 2048}]}))
    node = SimulatedNode(root, "ada")
    holder = next(h for h in _node_snapshot.take(node)["holders"] if h["name"] == "python.exe")
    answer = {}

    class Journal:
        @staticmethod
        def around(action, act, judge, **details):
            answer["action"], answer["details"] = action, details
            answer["ok"], answer["judged"] = judge(act())

    _simulated_node.reuse_pid(root, holder["pid"], "other.exe")
    by_pid = _end_by_handle.held_end(node, Journal(), holder, [{"pid": holder["pid"], "creation_time_ms": holder["creation_time_ms"]}])
    assert by_pid[holder["pid"]]["outcome"] == "pid_reused" and not answer["ok"] and answer["action"] == "taskkill"
    assert "pid reused" in _end_by_handle.reason(by_pid[holder["pid"]])
    assert "other.exe" in [p["name"] for p in _simulated_node.snapshot_of_state(root)["processes"] if p["pid"] == holder["pid"]]


def test_the_held_script_reads_each_handle_before_the_creation_time_and_never_kills_a_tree():
    script = Script(_powershell_scripts.SCRIPTS["terminate_held"])
    text = _powershell_scripts.SCRIPTS["terminate_held"]
    assert script.errors() == [] and "Add-Type" not in text and "/T" not in text.split("taskkill.exe", 1)[1].split("\n", 1)[0]
    assert text.index("$process.Handle") < text.index("$process.StartTime") < text.index("taskkill.exe /F /PID $processId")
    assert "$LASTEXITCODE" in text  # the exit code decides
    # under 'Stop', Windows PowerShell 5.1 makes taskkill's stderr line (2>&1) a terminating error: 'Continue' around it
    kill = text.index("taskkill.exe /F /PID")
    assert text.rindex("$ErrorActionPreference = 'Continue'", 0, kill) < kill < text.index("$ErrorActionPreference = 'Stop'", kill)


def test_taskkill_exit_code_decides_and_its_words_only_name_the_reason():
    said = "ERROR: The process with PID 7280 could not be terminated.\r\nReason: Access is denied."
    assert _end_by_handle.reason({"outcome": "not_terminated", "code": 1, "tool": "taskkill", "message": said, "pid": 7280}) == \
        "taskkill exited 1 (access_denied)"
    zh = "\u9519\u8bef: \u65e0\u6cd5\u7ec8\u6b62 PID 7280 \u7684\u8fdb\u7a0b\u3002"
    assert _end_by_handle.reason({"outcome": "not_terminated", "code": 1, "tool": "taskkill", "message": zh, "pid": 7280}) == "taskkill exited 1"


# ---- 5: the adapter's state from numbers ---------------------------------------------------------------------------

@pytest.mark.parametrize("check_mode", [False])
def test_an_adapter_pnputil_calls_started_but_cim_gives_problem_43_is_a_failed_restart(tmp_path, check_mode):
    root = str(tmp_path / "ws12")
    _simulated_node.write_node(root, _simulated_node.build_state({"hostname": "WS12", "gpus": [{"ghost_mib": 2048, "problem_after_restart": 43}]}))
    node = SimulatedNode(root, "ada")
    done = _reset_dispatch.run(node, {"method": "restart_adapter"}, check_mode=check_mode)
    assert done["failed"] and done["adapters"][0]["outcome"] == "failed" and "problem code 43" in done["msg"]
    listing = node.command(["pnputil", "/enum-devices", "/class", "Display"], read_only=True).stdout
    assert "Status:                     Started" in listing  # the word says started: it decides nothing
    adapter = _node_snapshot.take(node)["adapters"][0]
    assert (adapter["state_source"], adapter["problem_code"], adapter["started"]) == ("cim", 43, False)


def test_without_get_pnpdevice_a_status_word_decides_nothing_and_the_state_is_said_unknown(captures):
    text = captures.text("windows", "pnputil", "enum-devices-display-intel-nvidia-desktop.txt").replace("Started", "Problem")
    devices, dummy = _pnputil_adapters.parse_enum_devices(text)
    assert [_adapter_restart.adapter_problem(d) for d in devices] == [None, None] and not any(d["state_known"] for d in devices)
    assert _adapter_restart.adapter_problem(dict(devices[1], problem_code=43)).startswith("stopped with problem code 43")
    assert _adapter_restart.adapter_problem(dict(devices[1], present=False)) == "not present"
    assert _adapter_restart.adapter_problem(None).startswith("gone")


def test_the_snapshot_script_gives_the_problem_code_as_a_number_or_null():
    text = _powershell_scripts.SCRIPTS["snapshot"]
    assert "$problem = [int]$device.ConfigManagerErrorCode" in text and "ConfigManagerErrorCode = $problem" in text
    assert text.index("if ($null -ne $device.ConfigManagerErrorCode)") < text.index("$problem = [int]")  # never [int]$null: 0


def test_get_pnpdevice_objects_give_the_state_as_numbers(captures):
    items = json.loads(captures.text("windows", "pnp-device-property", "display-two-rtx4090-intel-idd-ps51.json"))
    items[0].update(FriendlyName="NVIDIA GeForce RTX 4090", Status="Error", ConfigManagerErrorCode=43)
    items[1].update(Status="OK", ConfigManagerErrorCode=0)
    devices = _pnputil_adapters.devices_from_cim(_pnputil_adapters.parse_pnp_locations(json.dumps(items)))
    assert [(d["is_nvidia"], d["problem_code"], d["state_known"]) for d in devices[:2]] == [(True, 43, True), (True, None, True)]
    assert devices[0]["description"] == "NVIDIA GeForce RTX 4090" and devices[2]["state_known"] is False


# ---- 6: the journal ------------------------------------------------------------------------------------------------

def test_the_journal_script_refuses_links_in_every_component_and_a_second_hard_link_and_sets_no_acl_afterwards():
    text = _powershell_scripts.SCRIPTS["journal_append"]
    script = Script(text)
    assert script.errors() == []
    calls = [line.strip() for line in text.splitlines() if line.strip().startswith("Assert-NoReparsePoint")]
    assert calls == ["Assert-NoReparsePoint $fullPath"] * 2  # before the creation and after it
    assert "[System.IO.Path]::GetDirectoryName($at)" in text  # every component up to the drive's root
    assert "LinkType -eq 'HardLink'" in text and "Set-Acl" not in text and "New-Item" not in text
    assert "$security.SetOwner([System.Security.Principal.SecurityIdentifier]::new('S-1-5-32-544'))" in text
    assert text.index("ShouldProcess") < text.index("CreateDirectory")  # check mode creates nothing


def kill_with_journal(tmp_path, journal_path, check_mode=False):
    root = str(tmp_path / "ws12")
    _simulated_node.write_node(root, _simulated_node.build_state({"hostname": "WS12", "processes": [{"name": "python.exe", "memory_mib": 2048}]}))
    node = SimulatedNode(root, "ada")
    holder = next(h for h in _node_snapshot.take(node)["holders"] if h["name"] == "python.exe")
    done = _reset_dispatch.run(node, {"method": "kill", "holders": [holder], "journal_path": journal_path}, check_mode=check_mode)
    return root, holder, done


def test_a_link_planted_in_the_journal_path_refuses_the_action(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    root = str(tmp_path / "ws12")
    os.makedirs(os.path.join(root, "fs", "C", "ProgramData"))
    os.symlink(str(elsewhere), os.path.join(root, "fs", "C", "ProgramData", "gpuops"))
    with pytest.raises(WindowsNodeError, match="reparse point"):
        kill_with_journal(tmp_path, "C:\\ProgramData\\gpuops\\journal.jsonl")
    assert list(elsewhere.iterdir()) == []
    assert "python.exe" in [p["name"] for p in _simulated_node.snapshot_of_state(root)["processes"]]  # no intent written: nothing ended


def test_a_journal_with_a_second_hard_link_refuses_the_action(tmp_path):
    root = str(tmp_path / "ws12")
    folder = os.path.join(root, "fs", "C", "ProgramData", "gpuops")
    # the journal's folder and file as the journal script made them (its own DACL), then a second name for the file
    _simulated_node.write_node(root, _simulated_node.build_state({"hostname": "WS12"}))
    _simulated_node.run_script(root, "journal_append", {"Path": "C:\\ProgramData\\gpuops\\journal.jsonl", "Line": '{"action": "earlier"}'})
    size = os.path.getsize(os.path.join(folder, "journal.jsonl"))
    os.link(os.path.join(folder, "journal.jsonl"), str(tmp_path / "another-name"))
    with pytest.raises(WindowsNodeError, match="more than one hard link"):
        kill_with_journal(tmp_path, "C:\\ProgramData\\gpuops\\journal.jsonl")
    assert "python.exe" in [p["name"] for p in _simulated_node.snapshot_of_state(root)["processes"]]
    assert os.path.getsize(os.path.join(folder, "journal.jsonl")) == size


def test_check_mode_creates_no_journal_folder(tmp_path):
    root, dummy, done = kill_with_journal(tmp_path, "C:\\ProgramData\\gpuops-new\\journal.jsonl", check_mode=True)
    assert done["changed"] and not os.path.exists(os.path.join(root, "fs", "C", "ProgramData", "gpuops-new"))


# ---- 7: the PCI domain ---------------------------------------------------------------------------------------------

def test_a_pnp_bus_number_carries_the_segment_and_the_domain_is_compared_where_both_sides_state_it():
    def numbers(bus):
        return [{"KeyName": "DEVPKEY_Device_BusNumber", "Type": 7, "Data": bus}, {"KeyName": "DEVPKEY_Device_Address", "Type": 7, "Data": 0}]
    ids = ["PCI\\VEN_10DE&DEV_2684&SUBSYS_889111D4&REV_A1\\4&1&0&0008", "PCI\\VEN_10DE&DEV_2684&SUBSYS_889111D4&REV_A1\\4&2&0&0008"]
    locations = _pnputil_adapters.parse_pnp_locations(json.dumps([{"InstanceId": ids[0], "Present": True, "Properties": numbers(0x101)},
                                                                  {"InstanceId": ids[1], "Present": True, "Properties": numbers(0x001)}]))
    assert [(v["pci_domain"], v["pci_location"]) for v in locations.values()] == [(1, [1, 0, 0]), (0, [1, 0, 0])]
    gpus = [{"index": 0, "name": "RTX 4090", "pci_bus_id": "00000000:01:00.0"}, {"index": 1, "name": "RTX 4090", "pci_bus_id": "00000001:01:00.0"}]
    candidates = _pnputil_adapters.devices_from_cim(locations)
    for device in candidates:
        device.update(pci_location=locations[device["instance_id"].lower()]["pci_location"],
                      pci_domain=locations[device["instance_id"].lower()]["pci_domain"])
    joined, method, problems = _node_snapshot._join_to_gpus(gpus, candidates, (), "adapters")
    assert method == "pci_location" and not problems
    assert (joined[0]["instance_id"], joined[1]["instance_id"]) == (ids[1], ids[0])
    # the graphics kernel's address has no domain: compared by bus, device and function alone
    assert _node_snapshot.same_place(gpus[1], {"pci_location": [1, 0, 0], "pci_domain": None})
    assert not _node_snapshot.same_place(gpus[1], {"pci_location": [1, 0, 0], "pci_domain": 0})


def test_restart_adapter_restarts_the_adapter_on_the_gpus_own_segment(tmp_path):
    # TCC: the ghost memory is the driver's own figure (no LUID needed; the graphics kernel's adapter address has no
    # domain, so two GPUs at one bus/device/function on two segments leave their LUIDs unjoined - docs/windows.md)
    root = str(tmp_path / "ws12")
    _simulated_node.write_node(root, _simulated_node.build_state({"hostname": "WS12", "gpus": [
        {"ghost_mib": 0, "pci_bus_id": "00000000:41:00.0", "driver_model": "TCC"},
        {"ghost_mib": 2048, "pci_bus_id": "00000001:41:00.0", "driver_model": "TCC"}]}))
    node = SimulatedNode(root, "ada")
    snapshot = _node_snapshot.take(node)
    assert sorted((a["gpu"], a["pci_domain"]) for a in snapshot["adapters"]) == [(0, 0), (1, 1)]
    done = _reset_dispatch.run(node, {"method": "restart_adapter"}, check_mode=False)
    assert [(a["gpu"], a["outcome"]) for a in done["adapters"]] == [(0, "not_needed"), (1, "restarted")]
    assert [g["restarts"] for g in _simulated_node.snapshot_of_state(root)["gpus"]] == [0, 1]


# ---- the simulation's options: documented as the action checks them ----------------------------------------------

def _same_spec(doc, spec, where):
    assert set(doc) == set(spec), (where, sorted(set(doc) ^ set(spec)))
    for name, option in spec.items():
        documented = doc[name]
        assert documented["type"] == option["type"], (where, name)
        assert documented.get("default") == option.get("default"), (where, name)
        assert documented.get("choices") == option.get("choices"), (where, name)
        if option.get("options") and documented.get("suboptions"):
            _same_spec(documented["suboptions"], option["options"], "%s.%s" % (where, name))


def test_win_gpu_sim_documents_every_option_its_action_checks():
    import yaml
    from ansible_collections.gpuops.remediation.plugins.action import win_gpu_sim as action
    from ansible_collections.gpuops.remediation.plugins.modules import win_gpu_sim as module
    doc = yaml.safe_load(module.DOCUMENTATION)["options"]
    _same_spec(doc, action.ARGUMENT_SPEC, "win_gpu_sim")
    gpus = doc["gpus"]["suboptions"]
    assert gpus["problem_after_restart"]["default"] == 0 and doc["oem_code_page"]["default"] == 437
    assert doc["processes"]["suboptions"]["owner_known"]["default"] is True


def test_a_sessions_script_that_fails_leaves_quser_to_answer(captures):
    text = captures.text(*(QUSER + ("header-rdp-current-marker-dot-idle.txt",)))
    action = ScriptAnswers({"quser": (0, text.encode("ascii"), b"")}, {"sessions": WindowsNodeError("Win32Exception: Access is denied")})
    found = _interactive_sessions.read(_remote_node.TargetNode(action, {}))
    assert found.status == "ok" and found.source == "quser" and "Access is denied" in found.message
    assert [s["user"] for s in found.sessions] == ["administrator"]


def test_the_walk_logs_off_the_session_that_holds_the_gpu_by_its_domain_too():
    snapshot = {"sessions": [{"id": 1, "user": "ada", "domain": "CORP"}, {"id": 2, "user": "ada", "domain": "WS12"}, {"id": 3, "user": "bob"}],
                "holders": [{"pid": 700, "class": "system", "session_id": 2, "gpus": [0]}, {"pid": 701, "class": "system", "session_id": 3, "gpus": [0]}]}
    users = _windows_walk.logoff_users(snapshot)
    assert users == ["WS12\\ada", "bob"]
    sessions = snapshot["sessions"]
    assert [s["id"] for s in _interactive_sessions.sessions_of(sessions, users[0])] == [2]  # never CORP\ada's session 1


@pytest.mark.parametrize("name", ["snapshot", "processes"])
def test_where_get_process_cannot_name_owners_each_is_asked_of_cim_and_one_not_given_stays_unknown(name):
    text = _powershell_scripts.SCRIPTS[name]
    assert Script(text).errors() == []
    asked = text.index("Invoke-CimMethod -InputObject $_ -MethodName 'GetOwner'")
    assert text.index("$ownersRead = $false") < asked  # only where -IncludeUserName failed (not elevated)
    assert "if ($owner.ReturnValue -eq 0 -and $owner.User)" in text[asked:]  # 2 access denied, 3 insufficient privilege
