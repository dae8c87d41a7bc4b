# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The journal on a Windows host (_node_journal), against the simulated node: the Linux journal's records, one line
before and one after each action, read back by the snapshot and by the next run (interrupted actions)."""

import pytest

from ansible_collections.gpuops.remediation.plugins.module_utils.journal import _reader
from ansible_collections.gpuops.remediation.plugins.module_utils.journal import _evidence
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node import _node_journal
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.rungs import _reset_dispatch, _wsl_shutdown
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.simulation import _simulated_node
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows import _node_snapshot
from ansible_collections.gpuops.remediation.plugins.plugin_utils.ladder._ladder_options import WalkOptions, walk_argument_spec
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows._windows_walk import WindowsWalk, windows_executor
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node._remote_node import SimulatedNode, WindowsNodeError

SCENARIO = {"hostname": "WS12", "processes": [{"name": "python.exe", "memory_mib": 2048}],
            "distributions": [{"name": "Ubuntu-22.04", "memory_mib": 3072}]}


def build(tmp_path, **scenario):
    root = str(tmp_path / "ws12")
    _simulated_node.write_node(root, _simulated_node.build_state(dict(SCENARIO, **scenario)))
    return SimulatedNode(root, "ada")


def lines(node, path=_node_journal.DEFAULT_PATH):
    """The journal as the file on the simulated host holds it, read by the Linux journal's own reader."""
    return _reader.read_journal(_simulated_node.host_file(node.root, path))


def python_holders(node):
    return [h for h in _node_snapshot.take(node)["holders"] if h["name"] == "python.exe"]


def test_a_kill_writes_an_intent_before_and_an_outcome_after_in_the_linux_schema(tmp_path):
    node = build(tmp_path)
    holder = python_holders(node)[0]
    done = _reset_dispatch.run(node, {"method": "kill", "holders": [holder], "run_id": "job-42"}, check_mode=False)
    intent, outcome = lines(node)
    assert done["journal"] == [intent, outcome]
    assert intent["phase"] == "intent" and outcome["phase"] == "outcome" and intent["id"] == outcome["id"]
    assert intent["action"] == outcome["action"] == "terminate" and intent["run_id"] == "job-42"
    assert intent["tree"] == [] and "argv" not in intent
    assert (intent["pid"], intent["creation_time_ms"], intent["name"]) == (holder["pid"], holder["creation_time_ms"], "python.exe")
    assert intent["source"] == {"name": "python.exe", "user": "WS12\\ada", "ppid": 0}  # who it was, as the Linux journal keeps it
    assert outcome["ok"] is True and outcome["outcomes"] == {str(holder["pid"]): "ended"} and outcome["pid"] == holder["pid"]
    assert _evidence.unfinished(lines(node)) == []


def test_check_mode_writes_no_line(tmp_path):
    node = build(tmp_path)
    predicted = _reset_dispatch.run(node, {"method": "kill", "holders": python_holders(node)}, check_mode=True)
    assert predicted["changed"] and predicted["journal"] == []
    assert lines(node) == []


def test_wsl_shutdown_and_a_terminate_are_journaled(tmp_path):
    node = build(tmp_path, distributions=[{"name": "Ubuntu-22.04", "memory_mib": 3072}, {"name": "Debian", "memory_mib": 1024}])
    _wsl_shutdown.stop(node, "Debian", check_mode=False, run_id="r1")
    done = _wsl_shutdown.stop(node, None, check_mode=False, run_id="r1")
    actions = [(r["action"], r["phase"], r.get("distribution"), r.get("ok")) for r in lines(node)]
    assert actions == [("wsl_terminate", "intent", "Debian", None), ("wsl_terminate", "outcome", "Debian", True),
                       ("wsl_shutdown", "intent", None, None), ("wsl_shutdown", "outcome", None, True)]
    assert done["journal"] == lines(node)[2:] and done["interrupted_actions"] == []


def test_an_adapter_restart_and_a_logoff_are_journaled(tmp_path):
    node = build(tmp_path, processes=[], distributions=[], gpus=[{"ghost_mib": 2048}])
    _reset_dispatch.run(node, {"method": "restart_adapter"}, check_mode=False)
    _reset_dispatch.run(node, {"method": "logoff", "allow_dwm": True, "user": "ada"}, check_mode=False)
    restart, restarted, logoff, logged_off = lines(node)
    assert restart["action"] == "restart_adapter" and restart["argv"][:2] == ["pnputil", "/restart-device"]
    assert restart["gpu"] == 0 and restarted["ok"] is True and restarted["outcome"] == "restarted"
    assert (logoff["action"], logoff["session_id"], logoff["user"]) == ("logoff", 1, "ada") and logged_off["ok"] is True


def test_a_journal_path_of_the_caller_is_where_the_lines_go(tmp_path):
    node = build(tmp_path)
    path = "D:\\gpuops\\ws12.jsonl"
    _reset_dispatch.run(node, {"method": "kill", "holders": python_holders(node), "journal_path": path}, check_mode=False)
    assert len(lines(node, path)) == 2 and lines(node) == []
    assert _node_snapshot.take(node, journal_path=path)["journal"]["records"] == 2


@pytest.mark.parametrize("path", ["journal.jsonl", "C:\\ProgramData\\..\\x.jsonl", "C:\\", "/var/log/x", "C:\\a\nb", 7,
                                  "C:\\a\\b*.jsonl"])
def test_a_bad_journal_path_is_refused_naming_the_option_before_anything_runs(tmp_path, path):
    node = build(tmp_path)
    with pytest.raises(ValueError, match="journal_path: "):
        _reset_dispatch.run(node, {"method": "kill", "holders": python_holders(node), "journal_path": path}, check_mode=False)
    with pytest.raises(ValueError, match="journal_path: "):
        _wsl_shutdown.stop(node, None, check_mode=False, journal_path=path)
    assert python_holders(node) and _node_snapshot.take(node)["wsl"]["running"] == ["Ubuntu-22.04"]


def test_an_action_never_finished_is_reported_once_as_interrupted(tmp_path):
    node = build(tmp_path)
    holder = python_holders(node)[0]
    # A run that wrote its intent and lost the host before the outcome.
    _node_journal.WindowsJournal(node, run_id="died").intent("taskkill", pid=holder["pid"], name="python.exe", argv=["taskkill"])
    seen = _node_snapshot.take(node)["journal"]
    assert [(a["run_id"], a["action"], a["pid"]) for a in seen["interrupted_actions"]] == [("died", "taskkill", holder["pid"])]
    predicted = _reset_dispatch.run(node, {"method": "kill", "holders": [holder]}, check_mode=True)
    assert predicted["interrupted_actions"][0]["run_id"] == "died" and len(lines(node)) == 1  # check mode closes nothing
    done = _reset_dispatch.run(node, {"method": "kill", "holders": [holder], "run_id": "next"}, check_mode=False)
    assert [a["run_id"] for a in done["interrupted_actions"]] == ["died"]
    [closed] = [line for line in lines(node) if line.get("of_run") == "died"]  # written after the method ran (rev18)
    assert closed["phase"] == "outcome" and closed["interrupted"] is True and closed["ok"] is False and closed["of_run"] == "died"
    assert _reset_dispatch.run(node, {"method": "kill", "holders": []}, check_mode=False)["interrupted_actions"] == []
    assert _node_snapshot.take(node)["journal"]["interrupted_actions"] == []


def test_a_leak_that_comes_back_is_traced_to_the_earlier_kills(tmp_path):
    node = build(tmp_path)
    _reset_dispatch.run(node, {"method": "kill", "holders": python_holders(node)}, check_mode=False)
    # The same job starts again and leaks again (the node rebuilt from its scenario; the host's files stay).
    _simulated_node.write_node(node.root, _simulated_node.build_state(SCENARIO))
    snapshot = _node_snapshot.take(node)
    assert python_holders(node)[0]["earlier_kills"] == 1
    assert snapshot["journal"]["kills_by_name"] == {"python.exe": 1}
    assert [(a["action"], a["ok"]) for a in snapshot["journal"]["recent_actions"]] == [("terminate", True)]
    assert snapshot["probes"]["journal"] == {"path": _node_journal.DEFAULT_PATH, "ok": True, "error": None, "records": 2, "read": True}


def test_a_torn_or_foreign_line_is_skipped_and_a_long_journal_read_by_its_tail(tmp_path):
    node = build(tmp_path)
    path = _simulated_node.host_file(node.root, _node_journal.DEFAULT_PATH)
    journal = _node_journal.WindowsJournal(node, run_id="old")
    journal.outcome(journal.intent("logoff", session_id=1), True)
    with open(path, "ab") as handle:
        handle.write(b'{"torn": \n[1, 2]\n')
    records, error = _node_journal.read_records(node, _node_journal.DEFAULT_PATH)
    assert error is None and [r["phase"] for r in records] == ["intent", "outcome"]
    with open(path, "ab") as handle:
        handle.write(b"x" * (_reader.RECENT_BYTES + 10) + b"\n")
    journal.intent("logoff", session_id=2)
    records, error = _node_journal.read_records(node, _node_journal.DEFAULT_PATH)
    assert error is None and [r.get("session_id") for r in records] == [2]


class JournalDenied(SimulatedNode):
    """The simulated node on which the journal script fails, as win_powershell reports a script's error."""

    def powershell(self, name, parameters=None, read_only=True):
        if name == "journal_read":
            raise WindowsNodeError("the journal_read script failed: Access to the path is denied.")
        return super().powershell(name, parameters, read_only)


def test_an_unreadable_journal_is_reported_and_is_no_error_for_the_snapshot(tmp_path):
    node = JournalDenied(build(tmp_path).root, "ada")
    snapshot = _node_snapshot.take(node)
    assert [h["name"] for h in snapshot["holders"] if h["class"] == "compute"] == ["python.exe"]
    assert snapshot["probes"]["journal"]["ok"] is False and "Access to the path is denied" in snapshot["probes"]["journal"]["error"]
    assert snapshot["journal"]["interrupted_actions"] == [] and snapshot["holders"][0]["earlier_kills"] == 0


def test_the_reboot_of_the_ladder_is_journaled_around_the_controllers_reboot(tmp_path):
    node = build(tmp_path, processes=[], distributions=[], gpus=[{"ghost_mib": 2048, "restart_needs_reboot": True}])
    args = dict((name, spec.get("default")) for name, spec in walk_argument_spec().items())
    args.update(platform="windows", max_rung="reboot", allow_reboot=True, run_id="walk-1")
    walk = WindowsWalk(WalkOptions(args), windows_executor(node, False, 256), False, "ws12")
    state = walk.start()
    assert state["pending"] == "reboot"
    intent = lines(node)[-1]
    assert (intent["action"], intent["phase"], intent["run_id"], intent["gpus"]) == ("reboot", "intent", "walk-1", [0])
    # What ansible.windows.win_reboot did (the simulation's reboot: the driver lets go of the ghost memory).
    with _simulated_node.locked_state(node.root, write=True) as sim:
        sim["gpus"][0]["ghost_mib"] = 0
    walk = WindowsWalk(WalkOptions(args), windows_executor(node, False, 256), False, "ws12")
    state = walk.continue_after("reboot", state, {"changed": True, "rebooted": True, "elapsed": 41})
    outcome = lines(node)[-1]
    assert (outcome["action"], outcome["phase"], outcome["id"], outcome["ok"]) == ("reboot", "outcome", intent["id"], True)
    assert state["outcome"]["fixed_by"] == "reboot" and _evidence.unfinished(lines(node)) == []
    assert "reboot_journal" not in state


class GoneAfterTaskkill(SimulatedNode):
    """The simulated node that stops answering once a process was ended, as a host that lost its connection for good."""

    gone = False

    def command(self, argv, read_only=False):
        if self.gone:
            raise WindowsNodeError("the host is unreachable")
        return super().command(argv, read_only)

    def powershell(self, name, parameters=None, read_only=True):
        if self.gone:
            raise WindowsNodeError("the host is unreachable")
        answer = super().powershell(name, parameters, read_only)
        self.gone = name == "terminate" and bool((parameters or {}).get("ProcessIds"))
        if self.gone:
            raise WindowsNodeError("the host is unreachable")
        return answer


def test_a_host_lost_mid_action_leaves_the_intent_open_and_the_error_of_the_action(tmp_path):
    node = build(tmp_path)
    holder = python_holders(node)[0]
    with pytest.raises(WindowsNodeError, match="unreachable"):
        _reset_dispatch.run(GoneAfterTaskkill(node.root, "ada"), {"method": "kill", "holders": [holder], "run_id": "lost"}, check_mode=False)
    assert [(r["run_id"], r["action"], r["phase"]) for r in lines(node)] == [("lost", "terminate", "intent")]
    assert [a["run_id"] for a in _node_snapshot.take(node)["journal"]["interrupted_actions"]] == ["lost"]


@pytest.mark.parametrize("path", ["C:\\x\\CON", "C:\\x\\NUL.txt", "C:\\x\\com1.jsonl", "C:\\x\\...\\j", "C:\\x\\.. \\j",
                                  "C:\\x\\j.", "C:\\x\\j ", "C:\\x\\j\n"])
def test_a_journal_path_that_names_a_device_or_a_name_windows_rewrites_is_refused(path):
    with pytest.raises(ValueError, match="journal_path"):
        _node_journal.checked_path(path)
    assert _node_journal.checked_path("C:\\console\\con-log.jsonl") == "C:\\console\\con-log.jsonl"
