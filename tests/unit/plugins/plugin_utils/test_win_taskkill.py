# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""_taskkill_tree: the argv and what the captures in fixtures/windows/taskkill say happened."""

from __future__ import annotations

import pytest

from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.tools._taskkill_tree import parse_taskkill, taskkill_argv


def outcome(captures, name, rc, pid):
    return parse_taskkill(captures.text("windows", "taskkill", name), "", rc, pid)


def test_success_by_exit_status_and_the_critical_process_by_its_reason(captures):
    assert outcome(captures, "f-pid-success-and-critical-system-process.txt", 0, 6392)["outcome"] == "ended"
    result = outcome(captures, "f-pid-success-and-critical-system-process.txt", 1, 580)
    assert result["outcome"] == "critical_process"
    assert result["pids"][6392] == {"ended": True, "reason": None, "parent": None}
    assert result["pids"][580] == {"ended": False, "reason": "critical_process", "parent": None}


def test_access_is_denied_for_each_pid_of_an_image(captures):
    result = outcome(captures, "f-im-access-denied-multi-pid.txt", 1, 13896)
    assert result["outcome"] == "access_denied"
    assert sorted(result["pids"]) == [7304, 9592, 13896, 24320]
    assert all(entry["reason"] == "access_denied" for entry in result["pids"].values())


def test_not_found_by_exit_status_128(captures):
    result = outcome(captures, "f-im-not-found.txt", 128, 4242)
    assert result["outcome"] == "not_found" and "ollama_llama_server.exe" in result["message"]
    assert parse_taskkill("", 'ERROR: The process "4242" not found.\n', 1, 4242)["outcome"] == "not_found"


def test_a_tree_kill_reports_every_child_with_its_parent(captures):
    result = outcome(captures, "f-t-tree-mixed-success-no-running-instance.txt", 1, 15328)
    assert result["outcome"] == "not_running"
    assert result["pids"][2508] == {"ended": True, "reason": None, "parent": 15328}
    assert result["pids"][11872] == {"ended": False, "reason": "not_running", "parent": 15328}
    assert outcome(captures, "f-t-tree-mixed-success-no-running-instance.txt", 1, 2508)["outcome"] == "unrecognised"


def test_without_force_nothing_is_killed(captures):
    result = outcome(captures, "t-without-f-only-forcefully.txt", 1, 21140)
    assert result["outcome"] == "needs_force" and not result["pids"][21140]["ended"]


@pytest.mark.parametrize("stdout", ["ERFOLGREICH: Der Prozess mit PID 4242 wurde beendet.\n",
                                    "FEHLER: Der Prozess mit PID 4242 konnte nicht beendet werden.\nUrsache: Zugriff verweigert\n"])
def test_localized_text_with_a_failing_exit_status_concludes_nothing(stdout):
    result = parse_taskkill(stdout, "", 1, 4242)
    assert result["outcome"] == "unrecognised" and result["pids"] == {}


def test_localized_success_is_read_from_the_exit_status():
    assert parse_taskkill("成功: PID 4242 のプロセスは強制終了されました。\n", "", 0, 4242)["outcome"] == "ended"


def test_an_unknown_reason_is_a_failure_with_the_text():
    result = parse_taskkill("ERROR: The process with PID 4242 could not be terminated.\nReason: Something new.\n", "", 1, 4242)
    assert result["outcome"] == "failed" and "Something new." in result["message"]


def test_the_argv_always_forces_and_takes_the_tree():
    assert taskkill_argv(4242) == ["taskkill", "/F", "/T", "/PID", "4242"]
    assert taskkill_argv(4242, tree=False) == ["taskkill", "/F", "/PID", "4242"]


@pytest.mark.parametrize("pid", [0, 4, -1, True, "4242", 42.0, None])
def test_the_argv_refuses_what_is_no_killable_pid(pid):
    with pytest.raises(ValueError, match="not a pid"):
        taskkill_argv(pid)
