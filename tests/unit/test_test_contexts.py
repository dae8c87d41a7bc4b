# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""ansible-test runs tests/unit/plugins/module_utils/ in its "target" context, where Ansible's controller code
(ansible.cli, ansible-playbook) is not installed: a test there that runs a playbook passes under pytest and fails in
make test. Such tests live in plugin_utils/ or at the top level."""

import ast
import os

UNIT = os.path.dirname(os.path.abspath(__file__))
TARGET_CONTEXT = os.path.join(UNIT, "plugins", "module_utils")
# The helpers that run ansible-playbook, and Ansible's controller packages.
CONTROLLER_ONLY = ("tests.unit.helpers.playbook", "tests.unit.helpers.playbook_run", "tests.unit.helpers.reset_run", "ansible.cli")


def controller_imports(source, filename):
    """(line, module) of each import in source that needs the controller."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        names = []
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + ["%s.%s" % (node.module, alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        needing = [name for name in names if any(name.endswith(wanted) or (wanted + ".") in name + "." for wanted in CONTROLLER_ONLY)]
        if needing:
            found.append((node.lineno, needing[0]))
    return found


def test_no_target_context_test_needs_the_controller():
    offenders = []
    for name in sorted(os.listdir(TARGET_CONTEXT)):
        if name.endswith(".py"):
            path = os.path.join(TARGET_CONTEXT, name)
            with open(path, encoding="utf-8") as handle:
                offenders += ["%s:%d: %s" % (name, line, module) for line, module in controller_imports(handle.read(), path)]
    assert offenders == []


def test_the_scan_sees_each_way_of_importing_a_playbook_runner():
    source = ("from ansible_collections.gpuops.remediation.tests.unit.helpers.playbook_run import localhost_play\n"
              "from ansible_collections.gpuops.remediation.tests.unit.helpers import reset_run\n"
              "from ansible.cli.playbook import main\n"
              "import ansible.cli\n"
              "from ansible_collections.gpuops.remediation.tests.unit.helpers import bounded\n")
    assert [line for line, _module in controller_imports(source, "example")] == [1, 2, 3, 4]
