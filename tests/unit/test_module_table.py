# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The README's module table lists exactly the modules an operator calls and its helpers' table exactly the modules
that serve the roles: a helper is a module whose short description says "Helper of the ..." (what `ansible-doc -l`
shows), its description names the role or playbook that calls it, and that role or playbook really calls it."""

import glob
import os
import re

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HELPER_MARK = "Helper of the "


def documentation(name):
    with open(os.path.join(ROOT, "plugins", "modules", name + ".py")) as handle:
        source = handle.read()
    return yaml.safe_load(re.search(r'DOCUMENTATION = r"""\n(.*?)"""', source, re.S).group(1))


def modules():
    return sorted(os.path.basename(path)[:-3] for path in glob.glob(os.path.join(ROOT, "plugins", "modules", "*.py"))
                  if not path.endswith("__init__.py"))


def readme_tables():
    """Each table under README's '## Modules' section, as the list of names in its first column, by its header."""
    with open(os.path.join(ROOT, "README.md")) as handle:
        section = handle.read().split("\n## Modules\n", 1)[1].split("\n## ", 1)[0]
    tables, header = {}, None
    for line in section.splitlines():
        if not line.startswith("|"):
            header = None
            continue
        if header is None:
            header = line.split("|")[1].strip()
            tables[header] = []
        elif not line.startswith("|---"):
            tables[header].append(re.match(r"\| `(\w+)`", line).group(1))
    return tables


def helpers():
    return [name for name in modules() if documentation(name)["short_description"].startswith(HELPER_MARK)]


def test_the_tables_hold_every_module_once_helpers_apart():
    tables = readme_tables()
    assert sorted(tables) == ["helper", "module"]
    assert sorted(tables["helper"]) == helpers()
    assert sorted(tables["module"]) == sorted(set(modules()) - set(helpers()))


def test_the_four_role_helpers_say_so():
    assert helpers() == ["gpu_breaker", "gpu_input_check", "gpu_ladder", "gpu_run_report"]


def _callers(name):
    """The roles and playbooks whose YAML calls gpuops.remediation.<name> as a task."""
    found = set()
    for path in glob.glob(os.path.join(ROOT, "roles", "*", "tasks", "*.yml")) + glob.glob(os.path.join(ROOT, "playbooks", "*.yml")):
        with open(path) as handle:
            if re.search(r"^\s*(- )?gpuops\.remediation\.%s:" % name, handle.read(), re.M):
                rel = os.path.relpath(path, ROOT).split(os.sep)
                found.add("role " + rel[1] if rel[0] == "roles" else rel[1])
    return found


def test_each_helper_names_who_calls_it_and_they_do():
    for name in helpers():
        doc = documentation(name)
        first = doc["description"][0]
        assert first.startswith("A helper of "), (name, first)
        first = first.split(", which", 1)[0].split(". ", 1)[0]
        named = set("role " + role for role in re.findall(r"role C\(gpuops\.remediation\.(\w+)\)", first))
        named |= set(re.findall(r"C\((\w+\.yml)\)", first))
        assert named, (name, first)
        assert named <= _callers(name), (name, named, _callers(name))
        # The operator's way in is named in the short description too.
        assert re.search(r"role|playbook", doc["short_description"]), name


def test_no_operator_module_calls_itself_a_helper():
    for name in set(modules()) - set(helpers()):
        assert "helper of" not in documentation(name)["short_description"].lower(), name
