# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The README agrees with the code: its module table names exactly the modules of plugins/modules, the versions it
names are those the code requires and tests, its links lead to files of the checkout, and it says what has never met
real hardware, pointing to docs/windows.md and the device check."""

import glob
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _readme():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as handle:
        return handle.read()


def _section(text, title):
    return text.split("\n## %s\n" % title, 1)[1].split("\n## ", 1)[0]


def test_the_module_table_is_plugins_modules():
    rows = [line for line in _section(_readme(), "Modules").splitlines() if line.startswith("| `")]
    named = [re.match(r"\| `([a-z_0-9]+)`", row).group(1) for row in rows]
    modules = sorted(os.path.basename(path)[:-3] for path in glob.glob(os.path.join(ROOT, "plugins", "modules", "*.py"))
                     if not path.endswith("__init__.py"))
    assert len(named) == len(set(named)), "a module named twice"
    assert sorted(named) == modules


def test_the_readme_says_what_never_met_real_hardware():
    section = _section(_readme(), "What has never met real hardware")
    assert "docs/windows.md" in section and "tests/device/README.md" in section
    for rung in ("reset", "reload", "graphics", "reboot"):
        assert rung in section


def test_d_state_is_said_one_way():
    """Uninterruptible sleep is no reason to leave a process alone (docs/safety.md); no doc says it is never signalled."""
    texts = [_readme()] + [open(path, encoding="utf-8").read() for path in glob.glob(os.path.join(ROOT, "docs", "*.md"))]
    texts += [open(os.path.join(ROOT, "plugins", "modules", "gpu_kill.py"), encoding="utf-8").read()]
    for text in texts:
        flat = " ".join(text.split())
        assert not re.search(r"uninterruptible sleep[^.]{0,200}(are|is) never signalled", flat)
        assert not re.search(r"in uninterruptible sleep \(reported as unkillable", flat)
        assert "a process in D state: reboot" not in flat


def _load_tool(name):
    import importlib.util
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, "tools", name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_versions_it_names_are_the_ones_the_code_holds():
    """ansible-core from meta/runtime.yml, the tested core versions and node Pythons from the lanes, the build's Python
    from tools/check_python.py: the README says each as the code has it."""
    import yaml
    flat = " ".join(_readme().split())
    with open(os.path.join(ROOT, "meta", "runtime.yml")) as handle:
        minimum = re.match(r">=(\d+\.\d+)", yaml.safe_load(handle)["requires_ansible"]).group(1)
    assert "The controller needs ansible-core %s or later" % minimum in flat
    lanes = _load_tool("core_lanes")
    with open(os.path.join(ROOT, "requirements.txt")) as handle:
        pinned = re.search(r"^ansible-core==(\d+\.\d+)\.", handle.read(), re.M).group(1)
    cores = sorted({".".join(version.split(".")[:2]) for version, _pythons in lanes.CORES})
    assert "tested on %s and %s)" % (", ".join(cores), pinned) in flat
    pythons = lanes.NODE_PYTHONS
    assert "Python %s or newer (tested on %s and %s" % (pythons[0], ", ".join(pythons[:-1]), pythons[-1]) in flat
    with open(os.path.join(ROOT, "tools", "check_python.py")) as handle:
        build = ".".join(re.search(r"sys\.version_info < \((\d+), (\d+)\)", handle.read()).groups())
    assert "python3 (%s or newer" % build in flat


def test_every_link_leads_to_a_file_of_the_checkout():
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", _readme())
    assert links
    assert [link for link in links if not link.startswith("http") and not os.path.exists(os.path.join(ROOT, link))] == []
