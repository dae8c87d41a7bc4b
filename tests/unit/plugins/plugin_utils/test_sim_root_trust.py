# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_sim as root at a path another user reached first: a real second account (`nobody`) makes the directory (empty,
as a playbook's /tmp/gpusim would find it) or a node of its own there; root's gpu_sim refuses it through Ansible,
naming the option and the owner, in check mode too, and writes nothing into it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

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
    playbook = os.path.join(staged, "play.yml")
    with open(playbook, "w", encoding="utf-8") as handle:
        handle.write("""
- hosts: localhost
  connection: local
  gather_facts: false
  tasks:
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
""" % {"root": root, "out": out, "check": "true" if check else "false"})
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collections_root, ANSIBLE_LOCALHOST_WARNING="false",
               ANSIBLE_INVENTORY_UNPARSED_WARNING="false", ANSIBLE_NOCOLOR="1")
    argv = [sys.executable, "-c", "import sys; from ansible.cli.playbook import main; main(['ansible-playbook'] + sys.argv[1:])",
            "-i", "localhost,", "-e", "ansible_python_interpreter=" + sys.executable, playbook]
    run = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                         cwd=staged, timeout=300, check=False)
    assert run.returncode == 0, run.stdout[-4000:]
    with open(out, encoding="utf-8") as handle:
        return json.load(handle)


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
