# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the Windows walk's tests share: the walk's options as the role gpu_reclaim passes them for a Windows host, the
walk itself (its outcome, or the walk and the module runs it makes), and a simulated Windows node (with ada's session,
or bare, by its root)."""

from __future__ import annotations

from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.simulation import _simulated_node
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows._windows_walk import WindowsWalk, windows_executor
from ansible_collections.gpuops.remediation.plugins.plugin_utils.ladder._ladder_options import WalkOptions, walk_argument_spec
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node._remote_node import SimulatedNode


def windows_walk_options(top_rung, **overrides):
    """The walk's options for a Windows host climbing up to top_rung, with the role's option names; overrides win
    (max_rung among them)."""
    args = dict((name, spec.get("default")) for name, spec in walk_argument_spec().items())
    args.update(platform="windows", max_rung=top_rung,
                option_names={"max_rung": "gpu_reclaim_windows_max_rung", "allow_reboot": "gpu_reclaim_allow_reboot"})
    args.update(overrides)
    return WalkOptions(args)


def build(tmp_path, **scenario):
    """The simulated node WS12 under tmp_path, ada's session on it (the scenario's keys win), as ada sees it."""
    root = str(tmp_path / "ws12")
    _simulated_node.write_node(root, _simulated_node.build_state(dict({"hostname": "WS12", "sessions": [{"user": "ada"}]}, **scenario)))
    return SimulatedNode(root, "ada")


def wsl_walk_options(**overrides):
    """The walk's options for a Windows host climbing up to the wsl rung (overrides win)."""
    return windows_walk_options("wsl", **overrides)


def wsl_walk(node, check_mode=False, **overrides):
    """The outcome of a Windows walk on `node` up to the wsl rung (overrides win, max_rung among them)."""
    return WindowsWalk(wsl_walk_options(**overrides), windows_executor(node, check_mode, 256), check_mode, "ws12").start()["outcome"]


def recording_walk(node, check_mode=False, record=lambda name, args: name, **overrides):
    """(a Windows walk on `node` up to the restart_adapter rung, the list of the module runs it makes, each as
    record(short module name, its arguments) says)."""
    executor = windows_executor(node, check_mode, 256)
    calls = []

    def execute(module_name, args):
        calls.append(record(module_name.rsplit(".", 1)[-1], args))
        return executor(module_name, args)
    return WindowsWalk(windows_walk_options("restart_adapter", **overrides), execute, check_mode, "ws12"), calls


def simulated_root(tmp_path, **scenario):
    """The simulated node WS12 under tmp_path with the scenario's processes, users and GPUs: its root."""
    root = str(tmp_path / "ws")
    _simulated_node.write_node(root, _simulated_node.build_state(dict({"hostname": "WS12"}, **scenario)))
    return root


def live_processes(root):
    """{pid: process} of the simulated node at root, as it is now."""
    return dict((p["pid"], p) for p in _simulated_node.snapshot_of_state(root)["processes"])


def wsl_node(tmp_path, user="ada", **scenario):
    """The simulated node WS12 with ada's and bob's sessions (ada an administrator), as `user` sees it."""
    root = str(tmp_path / "ws12")
    _simulated_node.write_node(root, _simulated_node.build_state(dict({"hostname": "WS12", "sessions": [{"user": "ada"}, {"user": "bob"}],
                                                                       "administrators": ["ada"]}, **scenario)))
    return SimulatedNode(root, user)


def command_log(root):
    """The argv of every command the simulated node at root ran, in order."""
    return [entry["argv"] for entry in _simulated_node.snapshot_of_state(root)["command_log"]]


def stops(root):
    """The wsl.exe commands that stop something, in order."""
    return [argv[1:] for argv in command_log(root) if argv[0].lower().endswith("wsl.exe") and argv[1] in ("--terminate", "--shutdown")]


def running(root, owner="ada"):
    """The running WSL distributions of `owner` on the simulated node at root."""
    return [d["name"] for d in _simulated_node.snapshot_of_state(root)["distributions"] if d["running"] and d["owner"] == owner]
