# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Issue 18 review (review18): who may be ended on Windows through the paths the protect rules must cover."""

import pytest

from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.rungs import _reset_dispatch
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.simulation import _simulated_node
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows import _node_snapshot
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows._windows_walk import WindowsWalk, windows_executor
from ansible_collections.gpuops.remediation.tests.unit.helpers.win_walk import build, windows_walk_options


def options(**overrides):
    return windows_walk_options("restart_adapter", **overrides)


def walk(node, check_mode=False, **overrides):
    executor = windows_executor(node, check_mode, 256)
    calls = []

    def execute(module_name, args):
        calls.append((module_name.rsplit(".", 1)[-1], args.get("method")))
        return executor(module_name, args)
    return WindowsWalk(options(**overrides), execute, check_mode, "ws12"), calls


def commands(node):
    return [entry["argv"] for entry in _simulated_node.snapshot_of_state(node.root)["command_log"]]


@pytest.mark.parametrize("check_mode", [True, False])
def test_restart_adapter_is_refused_for_a_protected_application_that_only_draws(tmp_path, check_mode):
    # A protected name holds the GPU as a graphics application (not a compute context): an adapter restart takes the
    # GPU from it as surely as from a compute process.
    node = build(tmp_path, gpus=[{"ghost_mib": 2048}], processes=[{"name": "render.exe", "memory_mib": 512, "graphics": True}])
    ladder, calls = walk(node, check_mode=check_mode, protect_names=["render"], max_rung="restart_adapter")
    state = ladder.start()
    assert ("win_gpu_reset", "restart_adapter") not in calls, state["outcome"]
    assert not [argv for argv in commands(node) if argv[0].lower().startswith("pnputil") and "/restart-device" in argv]


@pytest.mark.parametrize("check_mode", [True, False])
def test_win_gpu_reset_logoff_called_on_its_own_never_logs_off_a_protected_user(tmp_path, check_mode):
    node = build(tmp_path)
    args = {"method": "logoff", "user": "ada", "protect_users": ["WS12\\ADA"]}
    done = _reset_dispatch.run(node, args, check_mode=check_mode)
    assert not done["changed"], done["plan"]
    assert [s["user"] for s in _node_snapshot.take(node)["sessions"]] == ["ada"]


def test_win_gpu_reset_logoff_never_ends_a_protected_name_running_in_the_session(tmp_path):
    node = build(tmp_path, processes=[{"name": "render.exe", "memory_mib": 0}])
    done = _reset_dispatch.run(node, {"method": "logoff", "user": "ada", "protect_names": ["render"]}, check_mode=False)
    assert not done["changed"], done["plan"]
    assert "render.exe" in [p["name"] for p in _simulated_node.snapshot_of_state(node.root)["processes"]]


@pytest.mark.parametrize("check_mode", [True, False])
def test_win_gpu_reset_restart_adapter_called_on_its_own_leaves_a_gpu_a_protected_process_holds(tmp_path, check_mode):
    node = build(tmp_path, gpus=[{"ghost_mib": 2048}], processes=[{"name": "render.exe", "memory_mib": 512, "graphics": True}])
    done = _reset_dispatch.run(node, {"method": "restart_adapter", "protect_names": ["RENDER.EXE"]}, check_mode=check_mode)
    assert done["failed"] and not done["changed"] and "render.exe" in done["msg"] and "protected name" in done["msg"]
    assert [a["outcome"] for a in done["adapters"]] == ["refused"]
    assert not [argv for argv in commands(node) if "/restart-device" in argv]


@pytest.mark.parametrize("check_mode", [True, False])
def test_the_walk_never_logs_off_a_protected_user(tmp_path, check_mode):
    node = build(tmp_path, gpus=[{"recovery_action": "None"}], processes=[])
    snapshot = _node_snapshot.take(node)
    # a system process of ada's session holds the GPU: the logoff rung's case
    snapshot["holders"] = [{"pid": 999, "name": "csrss.exe", "class": "system", "session_id": 1, "gpus": [0], "user": None}]
    ladder, calls = walk(node, check_mode=check_mode, protect_users=["ada"], max_rung="logoff")
    step, dummy = ladder._take_logoff(snapshot)
    assert not step["changed"] and [s["user"] for s in _node_snapshot.take(node)["sessions"]] == ["ada"], step


MIB = 1024 * 1024


@pytest.mark.parametrize("driver_model", [{"current": "WDDM", "pending": "WDDM"}, "WDDM"])
def test_under_wddm_an_empty_process_list_is_no_per_process_view(driver_model):
    # nvidia-smi lists no process on a WDDM GPU (all of them vacuously "have" a figure): the whole use is not ghost
    # memory; the adapter-level figure decides, and without one it is unknown.
    gpu = {"index": 0, "memory_used_mib": 3000, "processes": [], "luid": "0x00000000_0x0000fa7a", "driver_model": driver_model}
    ghost = _node_snapshot.ghost_memory(gpu, 3000 * MIB)
    assert ghost["ghost_mib"] == 0 and ghost["source"] == "adapter_counter"
    assert _node_snapshot.ghost_memory(gpu, None)["ghost_mib"] is None


def test_under_tcc_an_empty_process_list_is_the_driver_saying_no_process_holds_memory():
    gpu = {"index": 0, "memory_used_mib": 3000, "processes": [], "luid": None, "driver_model": {"current": "TCC", "pending": "TCC"}}
    assert _node_snapshot.ghost_memory(gpu, None)["ghost_mib"] == 3000


def test_a_tree_member_whose_creation_time_is_unknown_still_counts_for_what_the_tree_would_take():
    # CIM gave no CreationDate for the child: the terminate script never ends it (no creation time to match), but
    # taskkill /T, the fallback, takes it by its parent pid: a protected process there refuses the tree.
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.protect._who_may_end import Policy, descendants, tree_refusal
    processes = {
        100: {"pid": 100, "ppid": 1, "name": "python.exe", "user": "WS12\\ada", "creation_time_ms": 5000},
        101: {"pid": 101, "ppid": 100, "name": "keeper.exe", "user": "WS12\\bob", "creation_time_ms": None},
    }
    assert "keeper.exe" in tree_refusal(processes, processes[100], Policy(protect_users=["bob"]))
    assert descendants(processes, processes[100]) == []  # never sent to the terminate script without its creation time


@pytest.mark.parametrize("name", ["sshd-session.exe", "SSHD-AUTH.EXE", "sshd.exe", "wsmprovhost.exe"])
def test_the_connection_host_processes_of_openssh_9_8_are_never_ended(name):
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.protect._who_may_end import Policy, refusal
    assert "remote connection" in refusal({"pid": 7000, "name": name}, Policy(allow_dwm=True, allow_shell=True))


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


@pytest.mark.parametrize("name", ["explorer.exe", "EXPLORER.EXE", "Explorer", "explorer"])
def test_the_walk_knows_the_shell_by_the_name_the_protect_rules_use(name):
    # restart_explorer for the shell, never the kill rung (which refuses it): whatever form the process list gives
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows._windows_walk import is_shell
    assert is_shell({"name": name})
    assert not is_shell({"name": "explorer2.exe"}) and not is_shell({"name": None})


@pytest.mark.parametrize("check_mode", [False])
def test_a_critical_process_with_an_ordinary_name_is_never_ended(tmp_path, check_mode):
    # A service host Windows marks critical: no name rule knows it. TerminateProcess would end it (and bugcheck the
    # host); the terminate script asks IsProcessCritical on the handle first and leaves it.
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.rungs import _end_by_handle
    node = build(tmp_path, processes=[{"name": "svchost.exe", "memory_mib": 1024, "critical": True, "user": "NT AUTHORITY\\SYSTEM", "session_id": 0}])
    holder = next(h for h in _node_snapshot.take(node)["holders"] if h["name"] == "svchost.exe")
    done = _reset_dispatch.run(node, {"method": "kill", "holders": [holder]}, check_mode=check_mode)
    assert not done["changed"] and done["failed"], done["plan"]
    assert "critical system process" in done["processes"][0]["reason"]
    assert holder["pid"] in [p["pid"] for p in _simulated_node.snapshot_of_state(node.root)["processes"]]
    assert _end_by_handle.reason({"outcome": "critical", "code": 0}).startswith("a critical system process")
    assert "Win32 error 50" in _end_by_handle.reason({"outcome": "critical", "code": 50})


def test_a_protect_name_given_as_the_executable_path_protects_that_executable():
    # "C:\Apps\render.exe" never equalled a process name: the process it meant was ended
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.protect._who_may_end import Policy, refusal
    policy = Policy(protect_names=["C:\\Apps\\Render.exe"])
    assert refusal({"pid": 10, "name": "render.exe", "image_path": "c:\\apps\\render.exe"}, policy).startswith("protected name")
    assert refusal({"pid": 10, "name": "render.exe", "image_path": "D:\\other\\render.exe"}, policy) is None
    assert refusal({"pid": 10, "name": "render.exe", "image_path": None}, policy).startswith("protected name")  # not known: kept


@pytest.mark.parametrize("check_mode", [True, False])
def test_win_gpu_reset_kill_leaves_a_process_protected_by_its_path(tmp_path, check_mode):
    node = build(tmp_path, processes=[{"name": "render.exe", "memory_mib": 1024, "image_path": "C:\\Apps\\render.exe"}])
    holder = next(h for h in _node_snapshot.take(node)["holders"] if h["name"] == "render.exe")
    done = _reset_dispatch.run(node, {"method": "kill", "holders": [holder], "protect_names": ["c:\\apps\\RENDER.EXE"]}, check_mode=check_mode)
    assert not done["changed"] and done["processes"][0]["outcome"] == "refused"
    assert holder["pid"] in [p["pid"] for p in _simulated_node.snapshot_of_state(node.root)["processes"]]


# ---- defects found and not fixed here (reported to the lead): each test states the rule and fails today ----------

def test_quser_reads_a_user_name_with_a_space():
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.tools import _interactive_sessions
    header = " USERNAME              SESSIONNAME        ID  STATE   IDLE TIME  LOGON TIME\n"
    active = _interactive_sessions.parse_quser(header + ">john smith            console             1  Active      none   6/14/2026 11:35 AM\n", 0)
    assert active.status == "ok" and active.sessions[0]["user"] == "john smith"
    disconnected = _interactive_sessions.parse_quser(header + " john smith                        2  Disc            .  04.07.2024 23:24\n", 0)
    # was: user "john", session name "smith": `logoff user=john` logged John Smith off
    assert [s["user"] for s in disconnected.sessions] == ["john smith"]


def test_a_non_ascii_user_name_from_quser_in_the_oem_code_page_is_read():
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node import _output_encoding
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.tools import _interactive_sessions
    raw = (" USERNAME              SESSIONNAME        ID  STATE   IDLE TIME  LOGON TIME\r\n"
           ">jos\u00e9                  console             1  Activo      none   14/06/2026 11:35\r\n").encode("cp850")
    text = _output_encoding.decode_transported(raw.decode(_output_encoding.TRANSPORT_ENCODING)).text
    sessions = _interactive_sessions.parse_quser(text, 0).sessions
    assert _interactive_sessions.sessions_of(sessions, "jos\u00e9"), sessions  # was: user 'jos\x82', no session of josé


def test_a_hyper_v_vm_holding_the_gpu_never_shuts_down_an_idle_wsl(tmp_path):
    node = build(tmp_path, processes=[{"name": "vmmem", "memory_mib": 4096, "user": "NT VIRTUAL MACHINE\\7A1B", "session_id": 0}],
                 distributions=[{"name": "Ubuntu", "memory_mib": 0}])
    ladder, calls = walk(node, max_rung="wsl")
    ladder.start()
    assert not [argv for argv in commands(node) if argv[0].lower().endswith("wsl.exe") and "--shutdown" in argv]
