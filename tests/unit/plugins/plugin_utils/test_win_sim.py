# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulated Windows node answers as the real tools do (the shapes of the captures), and keeps its rules."""

import codecs

import pytest

from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node import _output_encoding
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.tools import _interactive_sessions, _taskkill_tree, _wsl_cli
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.simulation import _simulated_node
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows import _node_snapshot
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node._remote_node import SimulatedNode, WindowsNodeError

WSL = _wsl_cli.STORE_WSL_PATH


@pytest.fixture
def node(tmp_path):
    root = str(tmp_path / "ws")
    state = _simulated_node.build_state({
        "hostname": "WS12", "sessions": [{"user": "ada"}],
        "processes": [{"name": "python.exe", "memory_mib": 2048, "children": [{"name": "worker.exe", "memory_mib": 512}]},
                      {"name": "other.exe", "user": "bob", "memory_mib": 256}],
        "distributions": [{"name": "Ubuntu-22.04", "memory_mib": 3072}, {"name": "Debian", "running": False}]})
    _simulated_node.write_node(root, state)
    return root


def pid_of(root, name):
    return next(p["pid"] for p in _simulated_node.snapshot_of_state(root)["processes"] if p["name"] == name)


def test_wsl_writes_utf16le_without_bom_and_the_list_parses(node):
    answer = _simulated_node.run_command(node, _wsl_cli.list_argv(WSL, running=True))
    assert answer.rc == 0 and not answer.stdout.startswith(codecs.BOM_UTF16_LE)
    assert answer.stdout == "Ubuntu-22.04\r\n".encode("utf-16-le")
    decoded = _output_encoding.decode_transported(_simulated_node.transported(answer.stdout))
    assert decoded.encoding == "utf-16-le"
    assert _wsl_cli.parse_list(decoded.text, answer.rc).distributions == ["Ubuntu-22.04"]


def test_nothing_running_exits_minus_one_with_the_sentence_and_quiet_prints_nothing(node):
    assert _simulated_node.run_command(node, [WSL, "--shutdown"]).rc == 0
    loud = _simulated_node.run_command(node, [WSL, "--list", "--running"])
    text = _output_encoding.decode_output(loud.stdout).text
    assert loud.rc == -1 and text.strip() == "There are no running distributions."
    assert _wsl_cli.parse_list(text, loud.rc, vm_running=False) == _wsl_cli.WslList("ok", [], "There are no running distributions.")
    quiet = _simulated_node.run_command(node, _wsl_cli.list_argv(WSL, running=True))
    assert (quiet.rc, quiet.stdout) == (0, b"")


def test_terminate_stops_the_distribution_and_the_last_one_takes_the_vm_and_its_memory(node):
    before = _node_snapshot.take(SimulatedNode(node))
    assert [h["used_mib"] for h in before["holders"] if h["wsl_vm"]] == [3072]
    answer = _simulated_node.run_command(node, _wsl_cli.terminate_argv("Ubuntu-22.04", WSL))
    assert answer.rc == 0
    after = _node_snapshot.take(SimulatedNode(node))
    assert not [h for h in after["holders"] if h["wsl_vm"]]
    assert after["gpus"][0]["memory_used_mib"] == before["gpus"][0]["memory_used_mib"] - 3072
    assert after["wsl"]["running"] == []


def test_distributions_are_per_user(node):
    assert _simulated_node.run_command(node, _wsl_cli.list_argv(WSL), user="bob").stdout == b""
    missing = _simulated_node.run_command(node, _wsl_cli.terminate_argv("Ubuntu-22.04", WSL), user="bob")
    assert missing.rc == -1 and "WSL_E_DISTRO_NOT_FOUND" in _output_encoding.decode_output(missing.stdout).text


def test_the_inbox_path_is_used_when_the_store_wsl_is_missing(tmp_path):
    root = str(tmp_path / "old")
    _simulated_node.write_node(root, _simulated_node.build_state({"store_wsl": False}))
    with pytest.raises(_simulated_node.WinSimError, match="cannot find the file"):
        _simulated_node.run_command(root, [WSL, "--list", "--quiet"])
    assert _simulated_node.run_command(root, ["wsl.exe", "--list", "--quiet"]).rc == 0
    assert _node_snapshot.take(SimulatedNode(root))["wsl"]["path"] == "wsl.exe"


def taskkill(root, name, user=None):
    pid = pid_of(root, name)
    answer = _simulated_node.run_command(root, _taskkill_tree.taskkill_argv(pid), user)
    return pid, _taskkill_tree.parse_taskkill(answer.stdout.decode(), answer.stderr.decode(), answer.rc, pid)


def test_a_killed_process_tree_is_gone_and_its_memory_freed(node):
    used = _node_snapshot.take(SimulatedNode(node))["gpus"][0]["memory_used_mib"]
    pid, outcome = taskkill(node, "python.exe")
    assert outcome["outcome"] == "ended"
    assert [entry["parent"] for entry in outcome["pids"].values()] == [pid, None]
    after = _node_snapshot.take(SimulatedNode(node))
    assert after["gpus"][0]["memory_used_mib"] == used - 2048 - 512
    assert not [h for h in after["holders"] if h["name"] in ("python.exe", "worker.exe")]


@pytest.mark.parametrize("name, outcome", [("csrss.exe", "critical_process"), ("wininit.exe", "critical_process"),
                                           ("vmmemWSL", "access_denied"), ("System", "access_denied")])
def test_taskkill_refuses_what_windows_refuses(node, name, outcome):
    if name == "System":
        answer = _simulated_node.run_command(node, ["taskkill", "/F", "/T", "/PID", "4"])
        assert _taskkill_tree.parse_taskkill(answer.stdout.decode(), answer.stderr.decode(), answer.rc, 4)["outcome"] == outcome
        return
    pid, result = taskkill(node, name)
    assert result["outcome"] == outcome
    assert pid_of(node, name) == pid


def test_another_users_process_is_denied_to_a_non_administrator(node):
    assert taskkill(node, "python.exe", user="bob")[1]["outcome"] == "access_denied"
    assert taskkill(node, "other.exe", user="bob")[1]["outcome"] == "ended"


def test_a_pid_that_does_not_exist_exits_128(node):
    answer = _simulated_node.run_command(node, _taskkill_tree.taskkill_argv(99996))
    assert answer.rc == 128
    assert _taskkill_tree.parse_taskkill(answer.stdout.decode(), answer.stderr.decode(), answer.rc, 99996)["outcome"] == "not_found"


def test_quser_exits_1_when_nobody_is_logged_on(tmp_path):
    root = str(tmp_path / "empty")
    _simulated_node.write_node(root, _simulated_node.build_state({"sessions": []}))
    answer = _simulated_node.run_command(root, _interactive_sessions.quser_argv())
    assert (answer.rc, answer.stdout, answer.stderr) == (1, b"", b"No User exists for *\r\n")
    assert _interactive_sessions.parse_quser("", answer.rc, answer.stderr.decode()).status == "ok"


def test_quser_rows_parse_with_the_header(node):
    answer = _simulated_node.run_command(node, _interactive_sessions.quser_argv())
    parsed = _interactive_sessions.parse_quser(answer.stdout.decode(), answer.rc)
    assert parsed.status == "ok" and [(s["user"], s["id"]) for s in parsed.sessions] == [("ada", 1)]


def test_restarting_the_adapter_frees_ghost_memory(tmp_path):
    root = str(tmp_path / "ghost")
    _simulated_node.write_node(root, _simulated_node.build_state({"gpus": [{"ghost_mib": 900}]}))
    snapshot = _node_snapshot.take(SimulatedNode(root))
    assert snapshot["gpus"][0]["unattributed_mib"] == 900 and snapshot["verdict"]["rung"] == "restart_adapter"
    instance = snapshot["adapters"][0]["instance_id"]
    assert _simulated_node.run_command(root, ["pnputil", "/restart-device", instance]).rc == 0
    assert _node_snapshot.take(SimulatedNode(root))["gpus"][0]["unattributed_mib"] == 0


def test_a_missing_node_is_an_error_naming_the_variable(tmp_path):
    with pytest.raises(WindowsNodeError, match="gpuops_windows_sim_root"):
        SimulatedNode(str(tmp_path / "none")).command(["quser"])


@pytest.mark.parametrize("spec, message", [({"gpus": [{"driver_model": "XDDM"}]}, "gpus\\[0\\].driver_model: 'XDDM'"),
                                           ({"distributions": [{"name": "-bad"}]}, "distributions\\[\\].name"),
                                           ({"processes": [{"gpus": [3]}]}, "gpus: 3 is no GPU")])
def test_a_bad_scenario_names_the_option_and_the_value(spec, message):
    with pytest.raises(ValueError, match=message):
        _simulated_node.build_state(spec)
