# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulated Windows node answers as the real tools do (the shapes of the captures), and keeps its rules."""

import codecs

import pytest

from ansible_collections.gpuops.remediation.plugins.plugin_utils import (
    _win_decode, _win_sessions, _win_sim, _win_snapshot, _win_taskkill, _win_wsl,
)
from ansible_collections.gpuops.remediation.plugins.plugin_utils._win_node import SimulatedNode, WindowsNodeError

WSL = _win_wsl.STORE_WSL_PATH


@pytest.fixture
def node(tmp_path):
    root = str(tmp_path / "ws")
    state = _win_sim.build_state({
        "hostname": "WS12", "sessions": [{"user": "ada"}],
        "processes": [{"name": "python.exe", "memory_mib": 2048, "children": [{"name": "worker.exe", "memory_mib": 512}]},
                      {"name": "other.exe", "user": "bob", "memory_mib": 256}],
        "distributions": [{"name": "Ubuntu-22.04", "memory_mib": 3072}, {"name": "Debian", "running": False}]})
    _win_sim.write_node(root, state)
    return root


def pid_of(root, name):
    return next(p["pid"] for p in _win_sim.snapshot_of_state(root)["processes"] if p["name"] == name)


def test_wsl_writes_utf16le_without_bom_and_the_list_parses(node):
    answer = _win_sim.run_command(node, _win_wsl.list_argv(WSL, running=True))
    assert answer.rc == 0 and not answer.stdout.startswith(codecs.BOM_UTF16_LE)
    assert answer.stdout == "Ubuntu-22.04\r\n".encode("utf-16-le")
    decoded = _win_decode.decode_transported(_win_sim.transported(answer.stdout))
    assert decoded.encoding == "utf-16-le"
    assert _win_wsl.parse_list(decoded.text, answer.rc).distributions == ["Ubuntu-22.04"]


def test_nothing_running_exits_minus_one_with_the_sentence_and_quiet_prints_nothing(node):
    assert _win_sim.run_command(node, [WSL, "--shutdown"]).rc == 0
    loud = _win_sim.run_command(node, [WSL, "--list", "--running"])
    text = _win_decode.decode_output(loud.stdout).text
    assert loud.rc == -1 and text.strip() == "There are no running distributions."
    assert _win_wsl.parse_list(text, loud.rc, vm_running=False) == _win_wsl.WslList("ok", [], "There are no running distributions.")
    quiet = _win_sim.run_command(node, _win_wsl.list_argv(WSL, running=True))
    assert (quiet.rc, quiet.stdout) == (0, b"")


def test_terminate_stops_the_distribution_and_the_last_one_takes_the_vm_and_its_memory(node):
    before = _win_snapshot.take(SimulatedNode(node))
    assert [h["used_mib"] for h in before["holders"] if h["wsl_vm"]] == [3072]
    answer = _win_sim.run_command(node, _win_wsl.terminate_argv("Ubuntu-22.04", WSL))
    assert answer.rc == 0
    after = _win_snapshot.take(SimulatedNode(node))
    assert not [h for h in after["holders"] if h["wsl_vm"]]
    assert after["gpus"][0]["memory_used_mib"] == before["gpus"][0]["memory_used_mib"] - 3072
    assert after["wsl"]["running"] == []


def test_distributions_are_per_user(node):
    assert _win_sim.run_command(node, _win_wsl.list_argv(WSL), user="bob").stdout == b""
    missing = _win_sim.run_command(node, _win_wsl.terminate_argv("Ubuntu-22.04", WSL), user="bob")
    assert missing.rc == -1 and "WSL_E_DISTRO_NOT_FOUND" in _win_decode.decode_output(missing.stdout).text


def test_the_inbox_path_is_used_when_the_store_wsl_is_missing(tmp_path):
    root = str(tmp_path / "old")
    _win_sim.write_node(root, _win_sim.build_state({"store_wsl": False}))
    with pytest.raises(_win_sim.WinSimError, match="cannot find the file"):
        _win_sim.run_command(root, [WSL, "--list", "--quiet"])
    assert _win_sim.run_command(root, ["wsl.exe", "--list", "--quiet"]).rc == 0
    assert _win_snapshot.take(SimulatedNode(root))["wsl"]["path"] == "wsl.exe"


def taskkill(root, name, user=None):
    pid = pid_of(root, name)
    answer = _win_sim.run_command(root, _win_taskkill.taskkill_argv(pid), user)
    return pid, _win_taskkill.parse_taskkill(answer.stdout.decode(), answer.stderr.decode(), answer.rc, pid)


def test_a_killed_process_tree_is_gone_and_its_memory_freed(node):
    used = _win_snapshot.take(SimulatedNode(node))["gpus"][0]["memory_used_mib"]
    pid, outcome = taskkill(node, "python.exe")
    assert outcome["outcome"] == "ended"
    assert [entry["parent"] for entry in outcome["pids"].values()] == [pid, None]
    after = _win_snapshot.take(SimulatedNode(node))
    assert after["gpus"][0]["memory_used_mib"] == used - 2048 - 512
    assert not [h for h in after["holders"] if h["name"] in ("python.exe", "worker.exe")]


@pytest.mark.parametrize("name, outcome", [("csrss.exe", "critical_process"), ("wininit.exe", "critical_process"),
                                           ("vmmemWSL", "access_denied"), ("System", "access_denied")])
def test_taskkill_refuses_what_windows_refuses(node, name, outcome):
    if name == "System":
        answer = _win_sim.run_command(node, ["taskkill", "/F", "/T", "/PID", "4"])
        assert _win_taskkill.parse_taskkill(answer.stdout.decode(), answer.stderr.decode(), answer.rc, 4)["outcome"] == outcome
        return
    pid, result = taskkill(node, name)
    assert result["outcome"] == outcome
    assert pid_of(node, name) == pid


def test_another_users_process_is_denied_to_a_non_administrator(node):
    assert taskkill(node, "python.exe", user="bob")[1]["outcome"] == "access_denied"
    assert taskkill(node, "other.exe", user="bob")[1]["outcome"] == "ended"


def test_a_pid_that_does_not_exist_exits_128(node):
    answer = _win_sim.run_command(node, _win_taskkill.taskkill_argv(99996))
    assert answer.rc == 128
    assert _win_taskkill.parse_taskkill(answer.stdout.decode(), answer.stderr.decode(), answer.rc, 99996)["outcome"] == "not_found"


def test_quser_exits_1_when_nobody_is_logged_on(tmp_path):
    root = str(tmp_path / "empty")
    _win_sim.write_node(root, _win_sim.build_state({"sessions": []}))
    answer = _win_sim.run_command(root, _win_sessions.quser_argv())
    assert (answer.rc, answer.stdout, answer.stderr) == (1, b"", b"No User exists for *\r\n")
    assert _win_sessions.parse_quser("", answer.rc, answer.stderr.decode()).status == "ok"


def test_quser_rows_parse_with_the_header(node):
    answer = _win_sim.run_command(node, _win_sessions.quser_argv())
    parsed = _win_sessions.parse_quser(answer.stdout.decode(), answer.rc)
    assert parsed.status == "ok" and [(s["user"], s["id"]) for s in parsed.sessions] == [("ada", 1)]


def test_restarting_the_adapter_frees_ghost_memory(tmp_path):
    root = str(tmp_path / "ghost")
    _win_sim.write_node(root, _win_sim.build_state({"gpus": [{"ghost_mib": 900}]}))
    snapshot = _win_snapshot.take(SimulatedNode(root))
    assert snapshot["gpus"][0]["unattributed_mib"] == 900 and snapshot["verdict"]["rung"] == "restart_adapter"
    instance = snapshot["adapters"][0]["instance_id"]
    assert _win_sim.run_command(root, ["pnputil", "/restart-device", instance]).rc == 0
    assert _win_snapshot.take(SimulatedNode(root))["gpus"][0]["unattributed_mib"] == 0


def test_a_missing_node_is_an_error_naming_the_variable(tmp_path):
    with pytest.raises(WindowsNodeError, match="gpuops_windows_sim_root"):
        SimulatedNode(str(tmp_path / "none")).command(["quser"])


@pytest.mark.parametrize("spec, message", [({"gpus": [{"driver_model": "XDDM"}]}, "gpus\\[0\\].driver_model: 'XDDM'"),
                                           ({"distributions": [{"name": "-bad"}]}, "distributions\\[\\].name"),
                                           ({"processes": [{"gpus": [3]}]}, "gpus: 3 is no GPU")])
def test_a_bad_scenario_names_the_option_and_the_value(spec, message):
    with pytest.raises(ValueError, match=message):
        _win_sim.build_state(spec)
