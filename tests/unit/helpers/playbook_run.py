"""ansible-playbook in a child Python (the venv's, with the collection found through ANSIBLE_COLLECTIONS_PATH), its output
as the console shows it: no colour, stdout and stderr together, every run under a deadline (helpers/bounded.py)."""
import os
import subprocess
import sys

from ansible_collections.gpuops.remediation.tests.unit.helpers import bounded

# .../ansible_collections/gpuops/remediation/tests/unit/helpers: the directory above ansible_collections, as imported
COLLECTIONS_ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), *[os.pardir] * 6))
PLAYBOOK_MAIN = "import sys; from ansible.cli.playbook import main; main(['ansible-playbook'] + sys.argv[1:])"


def ansible_playbook(args, collections_root, cwd, env=None, timeout=300):
    """The finished run (returncode, stdout) of ansible-playbook ARGS."""
    child_env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collections_root, ANSIBLE_LOCALHOST_WARNING="false",
                     ANSIBLE_INVENTORY_UNPARSED_WARNING="false", ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    child_env.update(env or {})
    argv = [sys.executable, "-c", PLAYBOOK_MAIN] + list(args)
    return bounded.run(argv, "ansible-playbook %s" % " ".join(args), timeout=timeout, env=child_env, cwd=cwd,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)


LOCALHOST_PLAY = """
- hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - block:
%(tasks)s
        - ansible.builtin.copy:
            content: "{{ %(written)s | to_json }}"
            dest: %(out)s
            mode: "0600"
      always:
        - gpuops.remediation.gpu_sim: {root: %(root)s, state: absent}
"""


def localhost_play(tmp_path, tasks, registered, collections_root):
    """Run TASKS (a block's tasks against localhost, naming %(root)s, a simulated node's directory, removed at the end)
    and return what they REGISTERED, once the run passed."""
    import json  # pylint: disable=import-outside-toplevel
    root, out = str(tmp_path / "node"), str(tmp_path / "out.json")
    written = "{%s}" % ", ".join("'%s': %s" % (name, name) for name in registered)
    values = {"tasks": tasks.rstrip("\n") % {"root": root}, "written": written, "out": out, "root": root}
    (tmp_path / "play.yml").write_text(LOCALHOST_PLAY % values)
    run = ansible_playbook(["-i", "localhost,", "-e", "ansible_python_interpreter=" + sys.executable, str(tmp_path / "play.yml")],
                           collections_root, str(tmp_path))
    assert run.returncode == 0, run.stdout[-4000:]
    with open(out, encoding="utf-8") as handle:
        return json.load(handle)
