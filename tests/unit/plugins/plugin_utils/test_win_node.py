# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""_remote_node: the one switch (a host variable), and what the real path hands ansible.windows.

The action below stands in for Ansible's ActionBase plumbing only (its _execute_module records the module call and
answers what win_command / win_powershell return); the code under test is ours.
"""

import codecs

import pytest

from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node import _remote_node, _powershell_scripts
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.simulation import _simulated_node
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.tools import _wsl_cli


class Task:
    def __init__(self, check_mode=False, delegate_to=None):
        self.check_mode, self.delegate_to = check_mode, delegate_to


class Context:
    become, become_user, remote_user = False, None, "ada"


class Templar:
    @staticmethod
    def template(value):
        return value


class Action:
    def __init__(self, answer=None, check_mode=False, delegate_to=None):
        self._task, self._templar, self._play_context = Task(check_mode, delegate_to), Templar(), Context()
        self.answer, self.calls = answer or {}, []

    def _execute_module(self, module_name, module_args, task_vars):
        self.calls.append((module_name, module_args, self._task.check_mode))
        return dict(self.answer)


def test_the_host_variable_switches_to_the_simulation(tmp_path):
    node = _remote_node.windows_node(Action(), {_remote_node.SIM_ROOT_VAR: str(tmp_path)})
    assert node.simulated and node.root == str(tmp_path) and node.user == "ada"
    assert not _remote_node.windows_node(Action(), {}).simulated


def test_a_delegated_task_reads_the_delegated_hosts_variable(tmp_path):
    task_vars = {"ansible_delegated_vars": {"ws12": {_remote_node.SIM_ROOT_VAR: str(tmp_path)}}}
    assert _remote_node.windows_node(Action(delegate_to="ws12"), task_vars).simulated
    assert not _remote_node.windows_node(Action(delegate_to="ws12"), {_remote_node.SIM_ROOT_VAR: str(tmp_path)}).simulated


def test_the_become_user_is_whom_the_tools_run_as(tmp_path):
    action = Action()
    action._play_context.become, action._play_context.become_user = True, "bob"
    assert _remote_node.windows_node(action, {_remote_node.SIM_ROOT_VAR: str(tmp_path)}).user == "bob"


def test_win_command_gets_the_argv_list_and_the_byte_transport():
    utf16 = "Ubuntu-22.04\r\n".encode("utf-16-le")
    action = Action({"rc": 0, "stdout": _simulated_node.transported(utf16), "stderr": ""}, check_mode=True)
    result = _remote_node.TargetNode(action, {}).command(_wsl_cli.list_argv(_wsl_cli.STORE_WSL_PATH, running=True), read_only=True)
    name, args, check_mode = action.calls[0]
    assert name == "ansible.windows.win_command"
    assert args == {"argv": [_wsl_cli.STORE_WSL_PATH, "--list", "--running", "--quiet"], "output_encoding_override": "iso-8859-1"}
    assert check_mode is False and action._task.check_mode is True  # a probe runs in check mode; the task is restored
    assert (result.rc, result.stdout, result.encoding) == (0, "Ubuntu-22.04\n", "utf-16-le")


@pytest.mark.parametrize("data, encoding", [
    (codecs.BOM_UTF16_LE + "Es werden keine Distributionen ausgeführt.\r\n".encode("utf-16-le"), "as win_command read it"),
    ("Es werden keine Distributionen ausgeführt.\r\n".encode("utf-16-le"), "utf-16-le"),
    ("Es werden keine Distributionen ausgeführt.\n".encode("utf-8"), "utf-8"),
    (codecs.BOM_UTF16_LE + "実行中のディストリビューションはありません。".encode("utf-16-le"), "as win_command read it"),
])
def test_every_encoding_wsl_writes_comes_back_whole(data, encoding):
    action = Action({"rc": -1, "stdout": _simulated_node.transported(data), "stderr": ""})
    result = _remote_node.TargetNode(action, {}).command(["wsl.exe", "--list", "--running"])
    assert result.encoding == encoding
    assert result.stdout.strip() in ("Es werden keine Distributionen ausgeführt.", "実行中のディストリビューションはありません。")
    assert _wsl_cli.parse_list(result.stdout, result.rc, vm_running=False) == ("ok", [], result.stdout.strip())


def test_an_action_command_keeps_check_mode():
    action = Action({"rc": 0, "stdout": "", "stderr": ""}, check_mode=True)
    _remote_node.TargetNode(action, {}).command(_wsl_cli.shutdown_argv())
    assert action.calls[0][2] is True


def test_a_command_that_could_not_run_is_an_error():
    action = Action({"failed": True, "msg": "Exception calling SearchPath: The system cannot find the file specified"})
    with pytest.raises(_remote_node.WindowsNodeError, match="cannot find the file"):
        _remote_node.TargetNode(action, {}).command(["nvidia-smi", "-q", "-x"])


def test_scripts_get_their_values_as_parameters_never_in_their_text():
    hostile = "C:\\x'; Remove-Item -Recurse C:\\ #\u2019\n"
    action = Action({"changed": False, "result": {"exists": False}})
    assert _remote_node.TargetNode(action, {}).powershell("wsl_path", {"Path": hostile}) == {"exists": False}
    name, args, check_mode = action.calls[0]
    assert name == "ansible.windows.win_powershell" and check_mode is False
    assert args["script"] == _powershell_scripts.WSL_PATH and args["parameters"] == {"Path": hostile}
    assert hostile not in args["script"]


@pytest.mark.parametrize("name", sorted(_powershell_scripts.SCRIPTS))
def test_every_script_reads_only_and_runs_in_check_mode(name):
    script = _powershell_scripts.SCRIPTS[name]
    assert script.startswith("[CmdletBinding(SupportsShouldProcess)]\nparam (")
    assert "$Ansible.Changed = $false" in script


def test_a_failed_script_is_an_error_with_its_error_records():
    action = Action({"failed": True, "error": [{"message": "Invalid class"}]})
    with pytest.raises(_remote_node.WindowsNodeError, match="the snapshot script failed: Invalid class"):
        _remote_node.TargetNode(action, {}).powershell("snapshot", {"WslPath": _wsl_cli.STORE_WSL_PATH})
