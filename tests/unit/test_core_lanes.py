# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""tools/core_lanes.py (make test's lanes step): a lane that has no interpreter to run on says `not run` and why, the
summary names the pinned ansible-core and every lane, and a machine without the lanes' interpreters still passes."""

import importlib.util
import os
import sys

from ansible_collections.gpuops.remediation.tests.unit.helpers import bounded

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOL = os.path.join(ROOT, "tools", "core_lanes.py")


def _lanes():
    spec = importlib.util.spec_from_file_location("core_lanes", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_without_the_node_pythons_every_node_lane_says_not_run_and_the_summary_says_so(tmp_path):
    """PYENV_ROOT (pyenv's own setting) names an empty pyenv: no node Python is found, nothing fails."""
    (tmp_path / "pyenv" / "versions").mkdir(parents=True)
    summary = tmp_path / "summary.txt"
    done = bounded.run([sys.executable, TOOL, "--nodes", "--summary", str(summary)], "core_lanes --nodes", capture_output=True,
                       text=True, cwd=ROOT, env=dict(os.environ, PYENV_ROOT=str(tmp_path / "pyenv")))
    assert done.returncode == 0, done.stderr
    lines = summary.read_text().splitlines()
    assert lines[0] == "ansible-core versions and target Pythons:"
    assert lines[1].startswith("  ansible-core 2.") and lines[1].endswith("(pinned, controller Python %d.%d): ran every test" % sys.version_info[:2])
    assert lines[2:] == ["  target Python %s: not run: no Python %s under pyenv here" % (version, version) for version in _lanes().NODE_PYTHONS]
    assert done.stdout.splitlines() == lines


def test_a_core_lane_without_a_python_it_installs_on_says_not_run_and_why():
    """As ansible-core 2.16 on a Debian 13 machine (Python 3.13 only, no pyenv): the lane names what it lacks."""
    results = []
    _lanes().core_lane("2.16.19", ("3.1", "3.0"), {}, results)
    assert results == [("ansible-core 2.16.19", "not run: no Python 3.1/3.0 here (not this one, not under pyenv)")]


def test_a_venv_that_cannot_be_made_says_why(tmp_path):
    lanes = _lanes()
    lanes.LANES = str(tmp_path)
    bindir, why = lanes.cached_venv("nowhere", str(tmp_path / "no-such-python"), ["pytest"])
    assert bindir is None
    assert why == "cannot run %s: No such file or directory" % (tmp_path / "no-such-python")
