# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the tests of the real-host path share: Ansible's ActionBase plumbing that TargetNode runs win_command and
win_powershell through, answered with canned bytes and script results (ScriptAnswers) or by the simulated Windows node
(SimulatedHost), and the TargetNode over the simulated node (target)."""

from __future__ import annotations

import codecs

from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node import _remote_node, _powershell_scripts
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.simulation import _simulated_node


class Task:
    check_mode, delegate_to = False, None


class ScriptAnswers:
    """Ansible's ActionBase plumbing for TargetNode: win_command answered with bytes as the tool wrote them (transported
    as win_command hands them over), win_powershell by script name; every call counted."""

    def __init__(self, commands=None, scripts=None):
        self._task = Task()
        self.commands, self.scripts, self.calls = commands or {}, scripts or {}, []

    def _execute_module(self, module_name, module_args, task_vars):
        del task_vars
        if module_name == _remote_node.WIN_COMMAND:
            self.calls.append(("command", module_args["argv"][0]))
            rc, out, err = self.commands[module_args["argv"][0]]
            return {"rc": rc, "stdout": _simulated_node.transported(out), "stderr": _simulated_node.transported(err)}
        name = next(name for name, text in _powershell_scripts.SCRIPTS.items() if text == module_args["script"])
        self.calls.append(("script", name))
        answer = self.scripts[name]
        if isinstance(answer, Exception):
            return {"failed": True, "error": [{"message": str(answer)}]}
        return {"result": answer, "changed": False}


class SimulatedHost:
    """Ansible's ActionBase plumbing for TargetNode, answered by the simulated node: wsl.exe's words in the host's
    language (UTF-16LE, a BOM or not), and wsl.exe lying where `lie` says (its exit status, or doing nothing)."""

    def __init__(self, root, user="ada", sentence=None, bom=False, lie=None):
        self._task = Task()
        self.root, self.user, self.sentence, self.bom, self.lie = root, user, sentence, bom, lie

    def _execute_module(self, module_name, module_args, task_vars):
        del task_vars
        if module_name == _remote_node.WIN_COMMAND:
            argv = module_args["argv"]
            verb = argv[1] if len(argv) > 1 else None
            if self.lie == "did_nothing" and verb in ("--terminate", "--shutdown"):
                return {"rc": 0, "stdout": "", "stderr": ""}
            answer = _simulated_node.run_command(self.root, argv, self.user)
            out, rc = answer.stdout, answer.rc
            if self.lie == "failed" and verb in ("--terminate", "--shutdown"):
                rc, out = -1, "Catastrophic failure\r\nError code: Wsl/Service/E_UNEXPECTED\r\n".encode("utf-16-le")
            if self.sentence is not None and argv[0].lower().endswith("wsl.exe") and verb in ("--list", "--status") and (rc != 0 or not out):
                # a wsl.exe that says "nothing runs" in words and exit -1 (as without --quiet), in the host's language
                rc, out = -1, self.sentence.replace("\n", "\r\n").encode("utf-16-le")
            if self.bom and argv[0].lower().endswith("wsl.exe") and out and verb != "--distribution":  # not Linux's own output
                out = codecs.BOM_UTF16_LE + out
            return {"rc": rc, "stdout": _simulated_node.transported(out), "stderr": _simulated_node.transported(answer.stderr)}
        name = next(name for name, text in _powershell_scripts.SCRIPTS.items() if text == module_args["script"])
        return {"result": _simulated_node.run_script(self.root, name, module_args["parameters"], self.user), "changed": False}


def target(root, **how):
    return _remote_node.TargetNode(SimulatedHost(root, **how), {}, how.get("user", "ada"))
