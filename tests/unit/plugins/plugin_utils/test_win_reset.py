# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""_reset_dispatch against the simulated Windows node: what each method plans, does and leaves, and its refusals.

The one double here (DroppingNode) is the simulated node itself with a connection that breaks once after a command
ran, as WinRM does when an adapter restart or a logoff cuts it.
"""

import json

import pytest
import yaml
from ansible.errors import AnsibleConnectionFailure

from ansible_collections.gpuops.remediation.plugins.doc_fragments import win_journal
from ansible_collections.gpuops.remediation.plugins.modules import win_gpu_reset
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.rungs import _acting_step, _reset_dispatch, _end_by_handle
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node import _remote_node
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.simulation import _simulated_node
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows import _node_snapshot
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node._remote_node import ConnectionDropped, SimulatedNode, WindowsNodeError
from ansible_collections.gpuops.remediation.tests.unit.helpers.win_walk import build as sim


def build(tmp_path, name="ws", **scenario):
    root = str(tmp_path / name)
    _simulated_node.write_node(root, _simulated_node.build_state(dict({"hostname": "WS12"}, **scenario)))
    return root


@pytest.fixture
def busy(tmp_path):
    return build(tmp_path, processes=[{"name": "python.exe", "memory_mib": 2048, "children": [{"name": "worker.exe", "memory_mib": 512}]},
                                      {"name": "render.exe", "memory_mib": 1024}],
                 distributions=[{"name": "Ubuntu-22.04", "memory_mib": 3072}])


def holders(root, *names):
    snapshot = _node_snapshot.take(SimulatedNode(root))
    return [h for h in snapshot["holders"] if not names or h["name"] in names]


def live(root):
    return dict((p["pid"], p) for p in _simulated_node.snapshot_of_state(root)["processes"])


def alive(root, holder):
    process = live(root).get(holder["pid"])
    return process is not None and process["creation_time_ms"] == holder["creation_time_ms"]


def would(lines):
    return [line.replace("would end", "ended").replace("would restart the adapter of", "restarted the adapter of") for line in lines]


# ---- kill ----------------------------------------------------------------------------------------------------------

def test_check_mode_predicts_the_kill_plan_and_changes_nothing(busy):
    selected = holders(busy, "python.exe", "worker.exe", "render.exe")
    before = _simulated_node.snapshot_of_state(busy)["processes"]
    predicted = _reset_dispatch.run(SimulatedNode(busy), {"method": "kill", "holders": selected}, check_mode=True)
    assert predicted["changed"] and not predicted["failed"] and "snapshot_after" not in predicted
    assert _simulated_node.snapshot_of_state(busy)["processes"] == before
    done = _reset_dispatch.run(SimulatedNode(busy), {"method": "kill", "holders": selected}, check_mode=False)
    assert done["changed"] and not done["failed"]
    assert would(predicted["plan"]) == done["plan"]
    assert done["plan"][0] == "ended pid %d python.exe (ada, session 1)" % selected[0]["pid"]
    assert done["plan"][1] == "ended pid %d worker.exe (ada, session 1) with the tree of pid %d" % (selected[1]["pid"], selected[0]["pid"])
    assert done["ended_pids"] == predicted["ended_pids"] == sorted(h["pid"] for h in selected)


def test_the_killed_holders_are_gone_by_identity_and_their_memory_freed(busy):
    selected = holders(busy, "python.exe", "render.exe")
    worker = holders(busy, "worker.exe")[0]
    used = _node_snapshot.take(SimulatedNode(busy))["gpus"][0]["memory_used_mib"]
    done = _reset_dispatch.run(SimulatedNode(busy), {"method": "kill", "holders": selected}, check_mode=False)
    assert not any(alive(busy, h) for h in selected)
    assert done["snapshot_after"]["gpus"][0]["memory_used_mib"] == used - 2048 - 512 - 1024
    assert [e["outcome"] for e in done["processes"]] == ["ended", "ended"]
    assert done["processes"][0]["also_ended"] == [worker["pid"]] and not alive(busy, worker)


def test_a_second_kill_changes_nothing(busy):
    selected = holders(busy, "python.exe")
    assert _reset_dispatch.run(SimulatedNode(busy), {"method": "kill", "holders": selected}, check_mode=False)["changed"]
    again = _reset_dispatch.run(SimulatedNode(busy), {"method": "kill", "holders": selected}, check_mode=False)
    assert not again["changed"] and not again["failed"]
    assert again["plan"] == ["left pid %d python.exe: already gone" % selected[0]["pid"]]


def test_a_reused_pid_is_left_alone(busy):
    selected = holders(busy, "python.exe")
    newcomer = _simulated_node.reuse_pid(busy, selected[0]["pid"], "notepad.exe")
    assert newcomer["creation_time_ms"] != selected[0]["creation_time_ms"]
    for check_mode in (True, False):
        done = _reset_dispatch.run(SimulatedNode(busy), {"method": "kill", "holders": selected}, check_mode=check_mode)
        assert not done["changed"] and not done["failed"]
        assert done["processes"][0]["outcome"] == "pid_reused"
        assert done["plan"][0].startswith("left pid %d python.exe: pid reused: pid %d is now notepad.exe" % (newcomer["pid"], newcomer["pid"]))
    assert live(busy)[newcomer["pid"]]["name"] == "notepad.exe"
    assert not [argv for argv in command_log(busy) if argv[0] == "taskkill"] and terminated(busy) == []


def command_log(root):
    return [entry["argv"] for entry in _simulated_node.snapshot_of_state(root)["command_log"]]


def terminated(root):
    """The pids each terminate script call was given, in order (taskkill's argv are in command_log)."""
    return [entry["parameters"]["ProcessIds"] for entry in _simulated_node.snapshot_of_state(root).get("script_log", []) if entry["script"] == "terminate"]


def test_protected_processes_the_wsl_vm_the_shell_and_dwm_are_never_given_to_taskkill(busy):
    processes = _simulated_node.snapshot_of_state(busy)["processes"]
    names = ("System", "smss.exe", "csrss.exe", "wininit.exe", "services.exe", "lsass.exe", "winlogon.exe", "dwm.exe",
             "explorer.exe", "vmmemWSL")
    selected = [{"pid": p["pid"], "creation_time_ms": p["creation_time_ms"], "name": p["name"]} for p in processes if p["name"] in names]
    assert len(selected) == 11  # csrss twice: session 0's and session 1's
    done = _reset_dispatch.run(SimulatedNode(busy), {"method": "kill", "holders": selected}, check_mode=False)
    assert not done["changed"] and not done["failed"]
    assert set(e["outcome"] for e in done["processes"]) == {"refused"}
    assert all(alive(busy, h) for h in selected)
    assert not [argv for argv in command_log(busy) if argv[0] == "taskkill"] and terminated(busy) == []
    reasons = dict((e["name"], e["reason"]) for e in done["processes"])
    assert "wsl --terminate" in reasons["vmmemWSL"]
    assert "allow_dwm" in reasons["dwm.exe"] and "restart_explorer" in reasons["explorer.exe"]
    assert "protected Windows system process" in reasons["lsass.exe"]


def test_dwm_only_with_allow_dwm(busy):
    dwm = holders(busy, "dwm.exe")
    done = _reset_dispatch.run(SimulatedNode(busy), {"method": "kill", "holders": dwm, "allow_dwm": True}, check_mode=False)
    assert done["changed"] and done["processes"][0]["outcome"] == "ended" and not alive(busy, dwm[0])


def test_access_denied_is_a_failure_and_the_process_still_runs(busy):
    selected = holders(busy, "python.exe")
    done = _reset_dispatch.run(SimulatedNode(busy, user="bob"), {"method": "kill", "holders": selected}, check_mode=False)
    assert done["failed"] and not done["changed"]
    # OpenProcess's Win32 error 5, a number in every language
    assert done["processes"][0]["outcome"] == "failed" and done["processes"][0]["reason"] == "access_denied (Win32 error 5)"
    assert "access_denied" in done["msg"] and alive(busy, selected[0])


def test_creation_time_is_the_short_name_of_creation_time_ms(busy):
    selected = [{"pid": h["pid"], "creation_time": h["creation_time_ms"]} for h in holders(busy, "render.exe")]
    done = _reset_dispatch.run(SimulatedNode(busy), {"method": "kill", "holders": selected}, check_mode=False)
    assert done["changed"] and done["processes"][0]["outcome"] == "ended"


def test_an_empty_selection_ends_nothing(busy):
    done = _reset_dispatch.run(SimulatedNode(busy), {"method": "kill", "holders": []}, check_mode=False)
    assert not done["changed"] and done["plan"] == ["no holder selected: nothing to end"]


# ---- bad input -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("args, named", [
    ({"method": "nuke"}, "method: 'nuke'"),
    ({"method": "kill", "holders": [{"pid": "12"}]}, "holders[0].pid: '12'"),
    ({"method": "kill", "holders": [{"pid": 1036}]}, "holders[0].creation_time_ms: None"),
    ({"method": "kill", "holders": [{"pid": True, "creation_time_ms": 5}]}, "holders[0].pid: True"),
    ({"method": "kill", "holders": "1036"}, "holders: '1036'"),
    ({"method": "restart_adapter", "gpu": 1.5}, "gpu: 1.5"),
    ({"method": "restart_adapter", "gpu": True}, "gpu: True"),
    ({"method": "restart_adapter", "gpu": "GPU-nope"}, "gpu: 'GPU-nope' names no GPU"),
    ({"method": "restart_adapter", "gpu": 7}, "gpu: 7 names no GPU"),
    ({"method": "logoff"}, "user: required with method=logoff"),
    ({"method": "restart_explorer", "user": "ada\nbob"}, "user: 'ada\\nbob'"),
    ({"method": "kill", "ghost_threshold_mib": -1}, "ghost_threshold_mib: -1"),
    ({"method": "kill", "reconnect_timeout": "soon"}, "reconnect_timeout: 'soon'"),
    ({"method": "kill", "colour": "red"}, "colour: not an option"),
])
def test_bad_input_is_refused_naming_the_option_and_the_value_and_nothing_acts(busy, args, named):
    before = _simulated_node.snapshot_of_state(busy)["processes"]
    with pytest.raises(_reset_dispatch.WinResetInputError) as caught:
        _reset_dispatch.run(SimulatedNode(busy), args, check_mode=False)
    assert named in str(caught.value)
    assert isinstance(caught.value, ValueError)
    assert _simulated_node.snapshot_of_state(busy)["processes"] == before
    assert not [argv for argv in command_log(busy) if argv[0] in ("taskkill", "pnputil", "logoff") and len(argv) == 3 and argv[1] != "/enum-devices"]
    assert terminated(busy) == []


# ---- restart_adapter -----------------------------------------------------------------------------------------------

def test_the_adapter_of_a_stuck_gpu_is_restarted_and_a_second_run_changes_nothing(tmp_path):
    root = build(tmp_path, gpus=[{"ghost_mib": 900}, {"name": "NVIDIA RTX A4000"}])
    predicted = _reset_dispatch.run(SimulatedNode(root), {"method": "restart_adapter"}, check_mode=True)
    assert predicted["changed"] and _simulated_node.snapshot_of_state(root)["gpus"][0]["restarts"] == 0
    done = _reset_dispatch.run(SimulatedNode(root), {"method": "restart_adapter"}, check_mode=False)
    assert done["changed"] and not done["failed"] and not done["reboot_required"]
    assert would(predicted["plan"]) == done["plan"]
    assert [e["outcome"] for e in done["adapters"]] == ["restarted", "not_needed"]
    assert done["adapters"][0]["display"] and "drives the display" in done["plan"][0]
    state = _simulated_node.snapshot_of_state(root)
    assert [g["restarts"] for g in state["gpus"]] == [1, 0]
    restarts = [argv for argv in command_log(root) if argv[:2] == ["pnputil", "/restart-device"]]
    assert restarts == [["pnputil", "/restart-device", state["gpus"][0]["instance_id"]]]
    assert done["snapshot_after"]["gpus"][0]["unattributed_mib"] == 0
    again = _reset_dispatch.run(SimulatedNode(root), {"method": "restart_adapter"}, check_mode=False)
    assert not again["changed"] and not again["failed"]


@pytest.mark.parametrize("key", ["index", "uuid", "pci_bus_id", "short_bus_id"])
def test_the_gpu_is_chosen_by_index_uuid_or_bus_id(tmp_path, key):
    root = build(tmp_path, gpus=[{"ghost_mib": 900}, {"name": "NVIDIA RTX A4000", "ghost_mib": 700}])
    gpu = _node_snapshot.take(SimulatedNode(root))["gpus"][1]
    wanted = {"index": 1, "uuid": gpu["uuid"].lower(), "pci_bus_id": gpu["pci_bus_id"], "short_bus_id": gpu["pci_bus_id"][9:]}[key]
    done = _reset_dispatch.run(SimulatedNode(root), {"method": "restart_adapter", "gpu": wanted}, check_mode=False)
    assert [e["gpu"] for e in done["adapters"]] == [1] and done["adapters"][0]["outcome"] == "restarted"
    assert [g["restarts"] for g in _simulated_node.snapshot_of_state(root)["gpus"]] == [0, 1]


def test_force_restarts_a_gpu_that_does_not_need_it(tmp_path):
    root = build(tmp_path)
    assert not _reset_dispatch.run(SimulatedNode(root), {"method": "restart_adapter", "gpu": 0}, check_mode=False)["changed"]
    forced = _reset_dispatch.run(SimulatedNode(root), {"method": "restart_adapter", "gpu": 0, "force": True}, check_mode=False)
    assert forced["changed"] and "(force=true)" in forced["plan"][0]


def test_exit_3010_is_reboot_required_changed_not_failed(tmp_path):
    root = build(tmp_path, gpus=[{"ghost_mib": 900, "restart_needs_reboot": True}])
    done = _reset_dispatch.run(SimulatedNode(root), {"method": "restart_adapter"}, check_mode=False)
    assert done["changed"] and not done["failed"] and done["reboot_required"]
    assert done["adapters"][0]["rc"] == 3010 and done["adapters"][0]["outcome"] == "reboot_required"
    assert "pending a reboot (exit 3010)" in done["plan"][0]
    assert done["snapshot_after"]["gpus"][0]["unattributed_mib"] == 900  # the driver lets go at the reboot


# ---- a dropped connection ------------------------------------------------------------------------------------------

class DroppingNode(SimulatedNode):
    """The simulated node whose connection breaks once, right after the first command whose argv starts with `cut`
    ran on the node (the step took effect; its answer is lost), and stays down for `down` more calls."""

    def __init__(self, root, cut, down=0, user=None):
        super().__init__(root, user)
        self.cut, self.down, self.reconnects, self.dropped = cut, down, 0, False

    def reconnect(self):
        self.reconnects += 1

    def command(self, argv, read_only=False):
        if self.dropped and self.down:
            self.down -= 1
            raise ConnectionDropped("the host is unreachable: connection refused")
        answer = super().command(argv, read_only)
        if not self.dropped and list(argv[:len(self.cut)]) == self.cut:
            self.dropped = True
            raise ConnectionDropped("the connection to the host broke: Connection reset by peer")
        return answer


def test_tolerating_drop_waits_with_a_backoff_reconnects_and_lets_the_node_decide(tmp_path):
    root = build(tmp_path)
    node, sleeps = DroppingNode(root, ["pnputil", "/restart-device"], down=3), []
    instance = _simulated_node.snapshot_of_state(root)["gpus"][0]["instance_id"]
    answer, dropped = _acting_step.tolerating_drop(node, lambda: node.command(["pnputil", "/restart-device", instance]), "a restart",
                                                   timeout=600, sleep=sleeps.append)
    assert (answer, dropped) == (None, True)
    assert sleeps == [1, 2, 4, 8] and node.reconnects == 4
    assert _simulated_node.snapshot_of_state(root)["gpus"][0]["restarts"] == 1


def test_tolerating_drop_gives_up_after_the_timeout(tmp_path):
    root = build(tmp_path)
    node, now = DroppingNode(root, ["quser"], down=10 ** 6), [0.0]

    def sleep(seconds):
        now[0] += seconds

    with pytest.raises(WindowsNodeError, match="did not answer again within 30 s"):
        _acting_step.tolerating_drop(node, lambda: node.command(["quser"]), "a logoff", timeout=30, sleep=sleep, clock=lambda: now[0])
    assert 30 <= now[0] < 31


def test_an_answer_without_a_drop_is_returned_as_is(tmp_path):
    root = build(tmp_path)
    answer, dropped = _acting_step.tolerating_drop(SimulatedNode(root), lambda: "answer", "nothing", timeout=1, sleep=pytest.fail)
    assert (answer, dropped) == ("answer", False)


def test_an_adapter_restart_that_drops_the_connection_is_judged_by_the_node_afterwards(tmp_path):
    root = build(tmp_path, gpus=[{"ghost_mib": 900}])
    node, sleeps = DroppingNode(root, ["pnputil", "/restart-device"]), []
    done = _reset_dispatch.run(node, {"method": "restart_adapter"}, check_mode=False, sleep=sleeps.append)
    assert done["connection_dropped"] and done["changed"] and not done["failed"]
    assert done["adapters"][0]["outcome"] == "restarted" and done["adapters"][0]["rc"] is None
    assert done["adapters"][0]["reboot_required"] is None and not done["reboot_required"]
    assert sleeps == [1] and node.reconnects == 1


def test_a_logoff_that_drops_the_connection_is_judged_by_quser_afterwards(tmp_path):
    root = build(tmp_path, sessions=[{"user": "ada"}, {"user": "bob", "session_name": "rdp-tcp#0"}])
    node = DroppingNode(root, ["logoff"])
    done = _reset_dispatch.run(node, {"method": "logoff", "allow_dwm": True, "user": "ada"}, check_mode=False, sleep=lambda seconds: None)
    assert done["connection_dropped"] and done["changed"] and not done["failed"]
    assert [s["user"] for s in done["snapshot_after"]["sessions"]] == ["bob"]


def test_the_real_path_turns_a_broken_connection_into_connection_dropped():
    class Connection:
        def __init__(self):
            self.calls = []

        def close(self):
            self.calls.append("close")

        def reset(self):
            self.calls.append("reset")

    class Action:
        def __init__(self):
            self._task = type("Task", (), {"check_mode": False, "delegate_to": None})()
            self._connection = Connection()

        def _execute_module(self, module_name, module_args, task_vars):
            raise AnsibleConnectionFailure("winrm: Connection reset by peer")

    action = Action()
    node = _remote_node.TargetNode(action, {})
    with pytest.raises(ConnectionDropped, match="Connection reset by peer"):
        node.command(["pnputil", "/restart-device", "PCI\\VEN_10DE&DEV_1E81\\4&1"])
    node.reconnect()
    assert action._connection.calls == ["close", "reset"]


# ---- logoff --------------------------------------------------------------------------------------------------------

def test_logoff_finds_the_session_by_user_case_and_domain_ignored(tmp_path):
    root = build(tmp_path, sessions=[{"user": "ada"}, {"user": "bob", "session_name": "rdp-tcp#0"}],
                 processes=[{"name": "python.exe", "memory_mib": 2048}])
    predicted = _reset_dispatch.run(SimulatedNode(root), {"method": "logoff", "allow_dwm": True, "user": "WS12\\ADA"}, check_mode=True)
    assert predicted["changed"] and len(_simulated_node.snapshot_of_state(root)["sessions"]) == 2
    assert predicted["plan"] == ["would log off session 1 of ada (console) with logoff 1"]
    done = _reset_dispatch.run(SimulatedNode(root), {"method": "logoff", "allow_dwm": True, "user": "WS12\\ADA"}, check_mode=False)
    assert done["changed"] and not done["failed"]
    assert done["plan"] == ["logged off session 1 of ada (console) with logoff 1"]
    assert [s["user"] for s in done["snapshot_after"]["sessions"]] == ["bob"]
    assert not [h for h in done["snapshot_after"]["holders"] if h.get("session_id") == 1]
    again = _reset_dispatch.run(SimulatedNode(root), {"method": "logoff", "allow_dwm": True, "user": "ada"}, check_mode=False)
    assert not again["changed"] and not again["failed"] and again["plan"] == ["no session of ada: nothing to log off"]


def test_session_0_is_never_logged_off(tmp_path):
    root = build(tmp_path, sessions=[{"user": "svc", "id": 0, "session_name": "services"}])
    done = _reset_dispatch.run(SimulatedNode(root), {"method": "logoff", "allow_dwm": True, "user": "svc"}, check_mode=False)
    assert not done["changed"] and done["sessions"][0]["outcome"] == "refused"
    assert "services' session" in done["plan"][0]
    assert not [argv for argv in command_log(root) if argv[0] == "logoff"]


def test_a_logoff_windows_refuses_is_a_failure(tmp_path):
    root = build(tmp_path, sessions=[{"user": "ada"}, {"user": "bob"}], administrators=["root"])
    done = _reset_dispatch.run(SimulatedNode(root, user="bob"), {"method": "logoff", "allow_dwm": True, "user": "ada"}, check_mode=False)
    assert done["failed"] and not done["changed"] and "Access is denied" in done["msg"]


# ---- restart_explorer ----------------------------------------------------------------------------------------------

def test_the_shell_that_holds_gpu_memory_is_ended_alone_and_comes_back(tmp_path):
    root = build(tmp_path, sessions=[{"user": "ada", "explorer_memory_mib": 300}], processes=[{"name": "python.exe"}])
    old = holders(root, "explorer.exe")[0]
    predicted = _reset_dispatch.run(SimulatedNode(root), {"method": "restart_explorer", "allow_dwm": True, "user": "ada"}, check_mode=True)
    assert predicted["changed"] and alive(root, old)
    done = _reset_dispatch.run(SimulatedNode(root), {"method": "restart_explorer", "allow_dwm": True, "user": "ada"}, check_mode=False)
    assert done["changed"] and not done["failed"]
    entry = done["sessions"][0]
    assert entry["outcome"] == "restarted" and entry["gpu_memory_mib"] == 300
    assert entry["explorer_before"] == [{"pid": old["pid"], "creation_time_ms": old["creation_time_ms"]}]
    assert entry["explorer_after"] and entry["explorer_after"][0]["pid"] != old["pid"]
    assert [old["pid"]] in terminated(root)  # alone: no tree
    assert holders(root, "python.exe")
    again = _reset_dispatch.run(SimulatedNode(root), {"method": "restart_explorer", "allow_dwm": True, "user": "ada"}, check_mode=False)
    assert not again["changed"] and again["sessions"][0]["outcome"] == "not_needed"


def test_a_shell_windows_does_not_start_again_is_a_failure_that_says_what_to_do(tmp_path):
    root = build(tmp_path, sessions=[{"user": "ada", "explorer_memory_mib": 300}], auto_restart_shell=False)
    done = _reset_dispatch.run(SimulatedNode(root), {"method": "restart_explorer", "allow_dwm": True, "user": "ada", "shell_timeout": 0}, check_mode=False,
                               sleep=pytest.fail)
    assert done["failed"] and done["changed"]
    assert "AutoRestartShell" in done["msg"] and "Task Manager" in done["msg"]


# ---- the module's documentation ------------------------------------------------------------------------------------

def test_the_doc_only_module_documents_the_options_the_plugin_checks():
    doc = yaml.safe_load(win_gpu_reset.DOCUMENTATION)["options"]
    doc.update(yaml.safe_load(win_journal.ModuleDocFragment.DOCUMENTATION)["options"])  # its extends_documentation_fragment
    assert set(doc) == set(_reset_dispatch.WIN_RESET_ARGUMENT_SPEC)
    for name, spec in _reset_dispatch.WIN_RESET_ARGUMENT_SPEC.items():
        assert doc[name]["type"] == spec["type"], name
        assert doc[name].get("choices") == spec.get("choices"), name
        assert doc[name].get("default") == spec.get("default"), name
        assert bool(doc[name].get("required")) == bool(spec.get("required")), name


class ReusedBeforeTheEnd(SimulatedNode):
    """The simulated node where Windows hands the selected pid to a new process after win_gpu_reset's creation-time
    check and before the terminate script opens it: the race a check followed by taskkill /PID cannot close."""

    def powershell(self, name, parameters=None, read_only=True):
        if name == "terminate" and (parameters or {}).get("ProcessIds"):
            _simulated_node.reuse_pid(self.root, parameters["ProcessIds"][-1], "notepad.exe")
        return super().powershell(name, parameters, read_only)


def test_a_pid_reused_between_the_check_and_the_end_is_never_ended(busy):
    selected = holders(busy, "render.exe")
    done = _reset_dispatch.run(ReusedBeforeTheEnd(busy), {"method": "kill", "holders": selected}, check_mode=False)
    newcomer = live(busy)[selected[0]["pid"]]
    assert newcomer["name"] == "notepad.exe" and newcomer["creation_time_ms"] != selected[0]["creation_time_ms"]
    entry = done["processes"][0]
    assert entry["taskkill"]["method"] == "terminate" and entry["taskkill"]["outcome"].startswith("pid reused")
    assert entry["outcome"] == "ended"  # the selected process is gone by pid + creation time (it exited); the newcomer lives


def test_where_add_type_is_refused_each_member_of_the_tree_is_held_and_ended_alone_and_check_mode_says_so(tmp_path):
    root = build(tmp_path, constrained_language=True,
                 processes=[{"name": "python.exe", "memory_mib": 2048, "children": [{"name": "worker.exe", "memory_mib": 512}]}])
    selected = holders(root, "python.exe")
    child = holders(root, "worker.exe")[0]
    predicted = _reset_dispatch.run(SimulatedNode(root), {"method": "kill", "holders": selected}, check_mode=True)
    done = _reset_dispatch.run(SimulatedNode(root), {"method": "kill", "holders": selected}, check_mode=False)
    assert would(predicted["plan"]) == done["plan"] and predicted["ended_pids"] == done["ended_pids"] == sorted([selected[0]["pid"], child["pid"]])
    assert done["plan"][0].endswith(_end_by_handle.HELD_WORDS) and "could not be compiled" in done["processes"][0]["taskkill"]["message"]
    # each member by its pid and creation time, deepest first, compared on a held handle; never taskkill /T
    held = [entry["parameters"] for entry in _simulated_node.snapshot_of_state(root)["script_log"] if entry["script"] == "terminate_held"]
    assert held == [{"ProcessIds": [child["pid"], selected[0]["pid"]],
                     "CreationTimesMs": [child["creation_time_ms"], selected[0]["creation_time_ms"]]}]
    assert [argv for argv in command_log(root) if argv[0] == "taskkill"] == [
        ["taskkill", "/F", "/PID", str(child["pid"])], ["taskkill", "/F", "/PID", str(selected[0]["pid"])]] and terminated(root) == []
    assert not holders(root, "python.exe", "worker.exe")


# ---- bad input: the option and the value named, nothing run -------------------------------------------------------

@pytest.mark.parametrize("method", ["kill", "restart_adapter"])
@pytest.mark.parametrize("value", ["", "   ", "nvidia-smi\n", 7])
def test_win_gpu_reset_refuses_an_nvidia_smi_that_names_no_program(tmp_path, method, value):
    node = sim(tmp_path, gpus=[{"ghost_mib": 2048}], processes=[{"name": "render.exe", "memory_mib": 1024}])
    before = _simulated_node.snapshot_of_state(node.root)
    with pytest.raises(_reset_dispatch.WinResetInputError) as error:
        _reset_dispatch.run(node, {"method": method, "nvidia_smi": value}, check_mode=False)
    assert str(error.value).startswith("nvidia_smi: %r" % (value,))
    after = _simulated_node.snapshot_of_state(node.root)
    assert after["command_log"] == before["command_log"] and after["processes"] == before["processes"]


# ---- check mode equals the run: a holder named twice, or a child named before its parent -----------------------------

@pytest.mark.parametrize("order", ["parent_twice", "child_first", "parent_first"])
def test_kill_check_mode_predicts_each_entry_as_the_run_finds_it(tmp_path, order):
    scenario = {"gpus": [{"ghost_mib": 0}], "processes": [{"name": "render.exe", "memory_mib": 1024,
                                                          "children": [{"name": "worker.exe", "memory_mib": 64}]}]}
    results = {}
    for check_mode in (True, False):
        node = sim(tmp_path / str(check_mode), **scenario)
        holders = dict((h["name"], h) for h in _node_snapshot.take(node)["holders"])
        parent, child = holders["render.exe"], holders["worker.exe"]
        chosen = {"parent_twice": [parent, parent], "child_first": [child, parent], "parent_first": [parent, child]}[order]
        done = _reset_dispatch.run(node, {"method": "kill", "holders": chosen}, check_mode=check_mode)
        results[check_mode] = done
    predicted, done = results[True], results[False]
    # was (parent_twice): "would end" twice, the run "ended" then "already gone"; (child_first): the parent's tree
    # predicted with the child the run had already ended
    assert [(p["outcome"].replace("would_end", "ended"), p["also_ended"]) for p in predicted["processes"]] == \
        [(p["outcome"], p["also_ended"]) for p in done["processes"]]
    assert [line.replace("would end", "ended") for line in predicted["plan"]] == done["plan"]
    assert predicted["ended_pids"] == done["ended_pids"] and predicted["changed"] == done["changed"]


# ---- bad input found inside a method (a gpu naming no GPU) writes nothing on the host, not even an earlier run's
# interrupted outcome --------------------------------------------------------------------------------------------------

def journal_lines(node):
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node import _node_journal
    path = _simulated_node.host_file(node.root, _node_journal.DEFAULT_PATH)
    with open(path) as handle:
        return [json.loads(line) for line in handle if line.strip()]


@pytest.mark.parametrize("gpu", ["GPU-0", 7, "0000:99:00.0"])
def test_a_gpu_naming_no_gpu_writes_nothing_on_the_host(tmp_path, gpu):
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node import _node_journal
    node = sim(tmp_path, gpus=[{"ghost_mib": 2048}])
    _node_journal.WindowsJournal(node, None, "an-earlier-run").intent("restart_adapter", gpu=0)  # it never finished
    before = journal_lines(node)
    with pytest.raises(_reset_dispatch.WinResetInputError, match="^gpu: "):
        _reset_dispatch.run(node, {"method": "restart_adapter", "gpu": gpu}, check_mode=False)
    assert journal_lines(node) == before  # was: the earlier intent's "interrupted" outcome written before the refusal
    done = _reset_dispatch.run(node, {"method": "restart_adapter", "gpu": 0}, check_mode=False)
    assert [a["action"] for a in done["interrupted_actions"]] == ["restart_adapter"]
    closed = [r for r in journal_lines(node) if r.get("interrupted")]
    assert len(closed) == 1 and closed[0]["of_run"] == "an-earlier-run"
    assert _reset_dispatch.run(node, {"method": "restart_adapter", "gpu": 0}, check_mode=False)["interrupted_actions"] == []
