# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every command a module runs on a node goes through _command.CommandRunner: no module or module_utils file calls
AnsibleModule.run_command itself (read from the source's syntax tree, not its text)."""

from __future__ import annotations

import ast
import os

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "plugins")
RUNNER = os.path.join("module_utils", "_command.py")


def _python_files(*folders):
    for folder in folders:
        for directory, dummy, names in os.walk(os.path.join(ROOT, folder)):
            for name in names:
                if name.endswith(".py"):
                    path = os.path.join(directory, name)
                    yield os.path.relpath(path, ROOT), path


def raw_run_command_calls():
    calls = []
    for relative, path in _python_files("modules", "module_utils"):
        with open(path) as handle:
            tree = ast.parse(handle.read(), path)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "run_command":
                calls.append("%s:%d" % (relative, node.lineno))
    return calls


def test_only_the_runner_calls_run_command():
    calls = raw_run_command_calls()
    assert [call for call in calls if not call.startswith(RUNNER + ":")] == []
    assert calls, "the scan found not even the runner's own call: it reads the wrong files"
