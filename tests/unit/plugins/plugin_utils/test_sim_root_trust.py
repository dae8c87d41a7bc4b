# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_sim as root at a path another user reached first: a real second account (`nobody`) makes the directory (empty,
as a playbook's /tmp/gpusim would find it) or a node of its own there; root's gpu_sim refuses it through Ansible,
naming the option and the owner, in check mode too, and writes nothing into it."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

import pytest

from ansible_collections.gpuops.remediation.tests.unit.helpers.playbook import run_playbook

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("runuser"), reason="needs root and runuser for a second account")


@pytest.fixture
def staged():
    """A sticky directory every user may add to, as /tmp is (root's tmp_path is mode 700: nobody could reach it)."""
    directory = tempfile.mkdtemp(prefix="gpuops-sim-trust-")
    os.chmod(directory, 0o1777)
    yield directory
    shutil.rmtree(directory)


def _as_nobody(*argv):
    subprocess.run(["runuser", "-u", "nobody", "--"] + list(argv), check=True, timeout=30)


def _gpu_sim(staged, root, collections_root, check):
    out = os.path.join(staged, "out.json")
    return run_playbook(staged, collections_root, """
    - gpuops.remediation.gpu_sim:
        root: %(root)s
        gpus: [{name: NVIDIA H100 80GB HBM3, memory_mib: 81559, pci_bus_id: "0000:01:00.0"}]
      check_mode: %(check)s
      register: node
      ignore_errors: true
    - ansible.builtin.copy:
        content: "{{ node | to_json }}"
        dest: %(out)s
        mode: "0600"
""" % {"root": root, "out": out, "check": "true" if check else "false"}, out)


@pytest.mark.parametrize("check", [False, True])
@pytest.mark.parametrize("what", ["empty", "node"])
def test_a_root_another_user_made_is_refused(staged, collections_root, what, check):
    root = os.path.join(staged, "gpusim")
    _as_nobody("mkdir", "-m", "0755", root)
    if what == "node":  # a node of the user's own: its tools would run as root
        _as_nobody("sh", "-c", 'mkdir -m 0755 "$1/bin" && echo "{}" > "$1/state.json"', "sh", root)
    before = sorted(os.listdir(root))
    result = _gpu_sim(staged, root, collections_root, check)
    assert result.get("failed") is True, result
    assert result["msg"].startswith("root: %r is refused: it belongs to uid " % root) and "(nobody)" in result["msg"], result["msg"]
    assert sorted(os.listdir(root)) == before
