# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The journal's folder (issue 18 review): every component's own attributes are read ([IO.File]::GetAttributes, which
does not follow a link), so a junction whose target is gone - which Test-Path calls absent - is refused too; and a
folder whose DACL lets anyone but SYSTEM and Administrators write or create in it (a folder an administrator made under
ProgramData inherits "Users may create files") is refused like one someone else owns.

The script is read with the real PowerShell grammar (tree-sitter-powershell); the simulated node applies the same rules
(a dangling symbolic link; a folder the journal script did not make) and the action refuses before anything is ended."""

from __future__ import annotations

import os
import re

import pytest

from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node import _remote_node, _powershell_scripts
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.rungs import _reset_dispatch
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.simulation import _simulated_node
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows import _node_snapshot
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node._remote_node import SimulatedNode, WindowsNodeError

from ansible_collections.gpuops.remediation.tests.unit.helpers.powershell_grammar import Script

SCRIPT = Script(_powershell_scripts.SCRIPTS["journal_append"])


def function(name):
    [found] = [node for node in SCRIPT.nodes() if node.type == "function_statement"
               and any(child.type == "function_name" and SCRIPT.text_of(child).lower() == name.lower() for child in node.children)]
    return found


def inside(node, kind):
    parent = node.parent
    while parent is not None:
        if parent.type == kind:
            return parent
        parent = parent.parent
    return None


def test_every_script_still_parses_clean():
    assert [(name, Script(text).errors()) for name, text in _powershell_scripts.SCRIPTS.items() if Script(text).errors()] == []


def test_each_components_own_attributes_are_read_never_test_path():
    body = function("Assert-NoReparsePoint")
    names = [SCRIPT.text_of(node).lower() for node in SCRIPT.nodes(body) if node.type == "command_name"]
    assert not {"test-path", "get-item", "resolve-path"} & set(names), names  # each follows a link or calls a dangling one absent
    calls = [node for node in SCRIPT.nodes(body) if node.type == "invokation_expression"
             and SCRIPT.text_of(node).replace(" ", "").lower() == "[system.io.file]::getattributes($at)"]
    assert len(calls) == 1
    trying = inside(calls[0], "try_statement")
    assert trying is not None and inside(calls[0], "catch_clause") is None
    # only "not there" is passed over: any other failure (access denied) stops the script (fails closed)
    [types] = [node for node in SCRIPT.nodes(trying) if node.type == "catch_type_list"]
    assert sorted(SCRIPT.text_of(t).lower() for t in types.children if t.type == "type_literal") == [
        "[system.io.directorynotfoundexception]", "[system.io.filenotfoundexception]"]
    assert "GetDirectoryName($at)" in SCRIPT.text_of(body)  # up to the drive's root


# FileSystemRights values (System.Security.AccessControl) and the generic rights an inherit-only entry may carry.
WRITE_RIGHTS = {"WriteData": 0x2, "AppendData": 0x4, "WriteExtendedAttributes": 0x10, "DeleteSubdirectoriesAndFiles": 0x40,
                "WriteAttributes": 0x100, "Delete": 0x10000, "ChangePermissions": 0x40000, "TakeOwnership": 0x80000,
                "GENERIC_ALL": 0x10000000, "GENERIC_WRITE": 0x40000000}
READ_RIGHTS = {"ReadData": 0x1, "ReadExtendedAttributes": 0x8, "ExecuteFile": 0x20, "ReadAttributes": 0x80, "ReadPermissions": 0x20000,
               "Synchronize": 0x100000}


def write_mask():
    [value] = re.findall(r"^\$writeRights = (0x[0-9A-Fa-f]+)$", _powershell_scripts.SCRIPTS["journal_append"], re.M)
    return int(value, 16)


def test_the_write_mask_is_every_right_that_changes_a_folder_and_no_read_right():
    mask = write_mask()
    assert mask == sum(WRITE_RIGHTS.values())
    assert not mask & sum(READ_RIGHTS.values())


def test_the_dacl_of_the_folder_and_the_file_is_read_and_refused_for_anyone_but_system_and_administrators():
    body = SCRIPT.text_of(function("Test-Trusted"))
    assert "$acl.GetAccessRules($true, $true, [System.Security.Principal.SecurityIdentifier])" in body  # explicit and inherited
    assert "$trusted -contains $sid" in body and "-band $writeRights" in body and "throw" in body
    assert "'S-1-3-0'" in body and "InheritOnly" in body  # CREATOR OWNER only on an entry for what is created later
    calls = [line.strip() for line in _powershell_scripts.SCRIPTS["journal_append"].splitlines() if line.strip().startswith("Test-Trusted")]
    assert calls == ["Test-Trusted $folder", "Test-Trusted $fullPath"]


def decide(entries):
    """What Test-Trusted decides of a DACL's entries ((sid, rights, inherit_only)), as its text says: refused or not."""
    trusted = ("S-1-5-18", "S-1-5-32-544")
    for sid, rights, inherit_only in entries:
        if sid in trusted or (inherit_only and sid == "S-1-3-0"):
            continue
        if rights & write_mask():
            return sid
    return None


def test_programdatas_default_dacl_as_a_folder_made_under_it_inherits_it_is_refused():
    # icacls C:\ProgramData on Windows 10/11: SYSTEM (F), Administrators (F), CREATOR OWNER (OI)(CI)(IO)(F),
    # Users (OI)(CI)(RX), Users (CI)(WD,AD,WEA,WA)
    full = 0x1F01FF
    programdata = [("S-1-5-18", full, False), ("S-1-5-32-544", full, False), ("S-1-3-0", 0x10000000, True),
                   ("S-1-5-32-545", 0x1200A9, False), ("S-1-5-32-545", 0x2 | 0x4 | 0x10 | 0x100, False)]
    assert decide(programdata) == "S-1-5-32-545"
    made = [("S-1-5-18", full, False), ("S-1-5-32-544", full, False)]  # the folder the script makes: its own DACL
    assert decide(made) is None
    assert decide(made + [("S-1-5-11", 0x1200A9, False)]) is None  # Authenticated Users reading is no write
    assert decide(made + [("S-1-3-0", 0x10000000, False)]) == "S-1-3-0"  # CREATOR OWNER on the folder itself is someone


# ---- the simulated node ---------------------------------------------------------------------------------------------

def node(tmp_path):
    root = str(tmp_path / "ws12")
    _simulated_node.write_node(root, _simulated_node.build_state({"hostname": "WS12", "processes": [{"name": "python.exe", "memory_mib": 2048}]}))
    return root, SimulatedNode(root, "ada")


def kill(host, journal_path, check_mode=False):
    holder = next(h for h in _node_snapshot.take(host)["holders"] if h["name"] == "python.exe")
    return _reset_dispatch.run(host, {"method": "kill", "holders": [holder], "journal_path": journal_path}, check_mode=check_mode)


def python_runs(root):
    return "python.exe" in [p["name"] for p in _simulated_node.snapshot_of_state(root)["processes"]]


def test_a_dangling_junction_in_the_path_is_refused_and_nothing_is_ended(tmp_path):
    root, host = node(tmp_path)
    os.makedirs(os.path.join(root, "fs", "C", "ProgramData"))
    os.symlink(str(tmp_path / "gone"), os.path.join(root, "fs", "C", "ProgramData", "gpuops"))
    with pytest.raises(WindowsNodeError, match="reparse point"):
        kill(host, "C:\\ProgramData\\gpuops\\journal.jsonl")
    assert python_runs(root) and not os.path.exists(str(tmp_path / "gone"))


@pytest.mark.parametrize("journal_path", ["C:\\ProgramData\\gpuops\\journal.jsonl", "C:\\ProgramData\\journal.jsonl",
                                          "D:\\journal.jsonl"])
def test_a_folder_the_journal_did_not_make_is_refused_naming_who_may_write_it(tmp_path, journal_path):
    root, host = node(tmp_path)
    folder = os.path.dirname(os.path.join(root, "fs", *journal_path.replace(":", "").split("\\")))
    os.makedirs(folder, exist_ok=True)  # an administrator's mkdir: owner Administrators, ProgramData's entries inherited
    with pytest.raises(WindowsNodeError, match="S-1-5-32-545") as refused:
        kill(host, journal_path)
    assert "only SYSTEM and Administrators" in str(refused.value) and "journal_path" in str(refused.value)
    assert python_runs(root) and os.listdir(folder) == []


def test_the_folder_the_journal_made_is_used_again(tmp_path):
    root, host = node(tmp_path)
    done = kill(host, "C:\\ProgramData\\gpuops\\journal.jsonl")
    assert done["changed"] and not python_runs(root)
    assert [e["action"] for e in done["journal"]] == ["terminate", "terminate"]
    # the same host later, another holder: the folder it made (its own DACL) takes the next lines
    _simulated_node.write_node(root, _simulated_node.build_state({"hostname": "WS12", "processes": [{"name": "python.exe", "memory_mib": 2048}]}))
    again = kill(host, "C:\\ProgramData\\gpuops\\journal.jsonl")
    assert again["changed"] and not python_runs(root)
    with open(os.path.join(root, "fs", "C", "ProgramData", "gpuops", "journal.jsonl")) as journal:
        assert len(journal.read().splitlines()) == 4


# ---- check mode predicts the refusal (journal_check), on the simulated node and through TargetNode ----------------------

def plant(root, tmp_path, how):
    programdata = os.path.join(root, "fs", "C", "ProgramData")
    os.makedirs(programdata, exist_ok=True)
    if how == "dangling_junction":
        os.symlink(str(tmp_path / "gone"), os.path.join(programdata, "gpuops"))
    elif how == "administrators_mkdir":
        os.makedirs(os.path.join(programdata, "gpuops"))


def real_host_target(root):
    """TargetNode whose module calls the simulated node answers, a script that throws answered as win_powershell answers
    it (failed, its error records)."""
    from ansible_collections.gpuops.remediation.tests.unit.helpers.win_host import SimulatedHost

    class Failing(SimulatedHost):
        def _execute_module(self, module_name, module_args, task_vars):
            try:
                return SimulatedHost._execute_module(self, module_name, module_args, task_vars)
            except _simulated_node.WinSimError as exc:
                return {"failed": True, "error": [{"message": str(exc)}]}
    return _remote_node.TargetNode(Failing(root), {}, "ada")


@pytest.mark.parametrize("real_host", [False, True])
@pytest.mark.parametrize("how, words", [("dangling_junction", "reparse point"), ("administrators_mkdir", "S-1-5-32-545")])
def test_check_mode_fails_as_the_real_run_does(tmp_path, real_host, how, words):
    root, host = node(tmp_path)
    host = real_host_target(root) if real_host else host
    plant(root, tmp_path, how)
    messages = []
    for check_mode in (True, False):
        with pytest.raises(WindowsNodeError, match=words) as refused:
            kill(host, "C:\\ProgramData\\gpuops\\journal.jsonl", check_mode=check_mode)
        messages.append(str(refused.value).split(": ", 1)[-1])
    assert messages[0] == messages[1] and python_runs(root)


def test_a_check_mode_run_that_plans_nothing_does_not_ask(tmp_path):
    root, host = node(tmp_path)
    plant(root, tmp_path, "administrators_mkdir")
    args = {"method": "restart_explorer", "user": "ada", "journal_path": "C:\\ProgramData\\gpuops\\journal.jsonl"}
    predicted = _reset_dispatch.run(host, args, check_mode=True)
    done = _reset_dispatch.run(host, args, check_mode=False)
    assert not predicted["changed"] and not done["changed"] and not done["failed"]  # nothing to journal: nothing refused


def test_wsl_shutdown_check_mode_fails_as_its_real_run_does(tmp_path):
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.rungs import _wsl_shutdown
    root = str(tmp_path / "ws12")
    _simulated_node.write_node(root, _simulated_node.build_state({"hostname": "WS12", "distributions": [{"name": "Ubuntu-22.04", "memory_mib": 1024}]}))
    plant(root, tmp_path, "administrators_mkdir")
    host = SimulatedNode(root, "ada")
    for check_mode in (True, False):
        with pytest.raises(WindowsNodeError, match="S-1-5-32-545"):
            _wsl_shutdown.stop(host, "Ubuntu-22.04", check_mode, journal_path="C:\\ProgramData\\gpuops\\journal.jsonl")
    assert [d["name"] for d in _simulated_node.snapshot_of_state(root)["distributions"] if d["running"]] == ["Ubuntu-22.04"]


def test_the_check_script_writes_nothing_and_shares_the_appends_guards():
    check = Script(_powershell_scripts.SCRIPTS["journal_check"])
    assert check.errors() == [] and check.parameters() == ["path"]
    text = _powershell_scripts.SCRIPTS["journal_check"]
    assert _powershell_scripts._JOURNAL_GUARDS in text and _powershell_scripts._JOURNAL_GUARDS in _powershell_scripts.SCRIPTS["journal_append"]
    assert not {"createdirectory", "write", "filestream"} & set(call.rsplit("::", 1)[-1] for call in check.static_calls())
    assert "FileStream" not in text and "CreateDirectory" not in text and "$Ansible.Changed = $true" not in text


def test_the_journal_folder_dacl_is_set_only_on_a_folder_the_append_made():
    # journal_path C:\ProgramData\gpuops.jsonl (or D:\journal.jsonl): the folder is C:\ProgramData (D:\), owned by
    # SYSTEM, so the owner check passes; a DACL set there would replace its DACL with a protected SYSTEM+Administrators
    # one and strip every user's access to it and to all that inherits from it. The DACL goes with the creation (one
    # CreateDirectory call with the security descriptor, issue 18 rule 6): no Set-Acl at all, no window with an inherited one.
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node import _powershell_scripts
    from ansible_collections.gpuops.remediation.tests.unit.helpers.powershell_grammar import Script
    script = Script(_powershell_scripts.SCRIPTS["journal_append"])
    assert script.errors() == []
    assert not [node for node in script.nodes() if node.type == "command_name" and script.text_of(node).lower() in ("set-acl", "new-item")]
    create = [node for node in script.nodes() if node.type == "member_name" and script.text_of(node).lower() == "createdirectory"]
    assert len(create) == 2  # Windows PowerShell 5.1's call and PowerShell 7's
    for node in create:
        guards, parent = [], node.parent
        while parent is not None:
            if parent.type == "if_statement":
                guards.append(script.text_of(parent).split("{", 1)[0].replace(" ", "").lower())
            parent = parent.parent
        assert "if(-not[system.io.directory]::exists($folder))" in guards, guards
        assert "$security" in script.text_of(node.parent.parent).lower()
