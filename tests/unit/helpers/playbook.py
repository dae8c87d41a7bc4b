# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""ansible-playbook in a child, for the unit tests that need Ansible's own run of the collection's modules: this
Python, localhost, the collection under collections_root, bounded (bounded.run)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from ansible_collections.gpuops.remediation.tests.unit.helpers import bounded

PLAYBOOK_DEADLINE = 300.0
PLAY = """
- hosts: localhost
  connection: local
  gather_facts: false
  tasks:
"""


# ansible-playbook as this interpreter runs it: ansible-test's units venv has Ansible's modules but not its scripts.
ANSIBLE_PLAYBOOK = [sys.executable, "-c", "import sys; from ansible.cli.playbook import main; main(['ansible-playbook'] + sys.argv[1:])"]


def run_playbook(directory, collections_root, tasks, out):
    """Write a play of `tasks` (YAML, indented as a play's task list) on localhost to `directory`/play.yml, run it with
    ansible-playbook from `directory`, fail the test with its output unless it succeeds, and return the JSON the play
    wrote to `out`."""
    playbook = os.path.join(directory, "play.yml")
    with open(playbook, "w", encoding="utf-8") as handle:
        handle.write(PLAY + tasks.lstrip("\n"))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collections_root, ANSIBLE_LOCALHOST_WARNING="false",
               ANSIBLE_INVENTORY_UNPARSED_WARNING="false", ANSIBLE_NOCOLOR="1")
    argv = ANSIBLE_PLAYBOOK + ["-i", "localhost,", "-e", "ansible_python_interpreter=" + sys.executable, playbook]
    run = bounded.run(argv, "ansible-playbook %s" % playbook, timeout=PLAYBOOK_DEADLINE, env=env, stdout=subprocess.PIPE,
                      stderr=subprocess.STDOUT, universal_newlines=True, cwd=directory)
    assert run.returncode == 0, run.stdout[-4000:]
    with open(out, encoding="utf-8") as handle:
        return json.load(handle)
