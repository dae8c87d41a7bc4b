# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""ansible-test runs tests/unit/plugins/module_utils/ and tests/unit/plugins/modules/ in its "target" context, where
Ansible's controller code (ansible.cli, ansible-playbook) is not installed: a test there that runs a playbook passes
under pytest and fails in make test. Such tests live in plugin_utils/ or at the top level."""

import ast
import os

UNIT = os.path.dirname(os.path.abspath(__file__))
TARGET_CONTEXTS = [os.path.join(UNIT, "plugins", name) for name in ("module_utils", "modules")]
HELPERS = os.path.join(UNIT, "helpers")
# Ansible's controller package and the helpers that run ansible-playbook (in a child); a test helper that imports one
# of them needs the controller too.
CONTROLLER_PACKAGES = ("ansible.cli", "tests.unit.helpers.playbook", "tests.unit.helpers.playbook_run", "tests.unit.helpers.reset_run")


def controller_imports(source, filename, controller_only=None):
    """(line, module) of each import in source that needs the controller (controller_only: its modules' names)."""
    controller_only = controller_only or controller_modules()
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        names = []
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + ["%s.%s" % (node.module, alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        needing = [name for name in names if any(name.endswith(wanted) or (wanted + ".") in name + "." for wanted in controller_only)]
        if needing:
            found.append((node.lineno, needing[0]))
    return found


def controller_modules():
    """Ansible's controller packages and every test helper that needs them, directly or through another helper."""
    sources = {}
    for name in sorted(os.listdir(HELPERS)):
        if name.endswith(".py"):
            with open(os.path.join(HELPERS, name), encoding="utf-8") as handle:
                sources["tests.unit.helpers." + name[:-3]] = handle.read()
    found = CONTROLLER_PACKAGES
    while True:
        more = tuple(helper for helper, source in sources.items()
                     if helper not in found and controller_imports(source, helper, found))
        if not more:
            return found
        found += more


def test_no_target_context_test_needs_the_controller():
    offenders = []
    for folder in TARGET_CONTEXTS:
        for name in sorted(os.listdir(folder)):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                with open(path, encoding="utf-8") as handle:
                    offenders += ["%s:%d: %s" % (os.path.relpath(path, UNIT), line, module)
                                  for line, module in controller_imports(handle.read(), path)]
    assert offenders == []


def test_the_helpers_that_run_playbooks_are_known_as_controller_only():
    needing = controller_modules()
    for helper in ("playbook", "playbook_run", "reset_run", "mig_play"):
        assert "tests.unit.helpers." + helper in needing
    assert "tests.unit.helpers.bounded" not in needing


def test_the_scan_sees_each_way_of_importing_a_playbook_runner():
    source = ("from ansible_collections.gpuops.remediation.tests.unit.helpers.playbook_run import localhost_play\n"
              "from ansible_collections.gpuops.remediation.tests.unit.helpers import reset_run\n"
              "from ansible.cli.playbook import main\n"
              "import ansible.cli\n"
              "from ansible_collections.gpuops.remediation.tests.unit.helpers import bounded\n")
    assert [line for line, _module in controller_imports(source, "example")] == [1, 2, 3, 4]
