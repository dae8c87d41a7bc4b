# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The MIG tests' plays: the collection's modules through ansible-playbook against a simulated node, each task's result
kept."""

from __future__ import annotations

from ansible_collections.gpuops.remediation.tests.unit.helpers import playbook


def play(tmp_path, collections_root, root, tasks, names):
    """Run `tasks` (each registering one of `names`) against the node at root; returns {name: result}."""
    out = str(tmp_path / "out.json")
    body = "".join("    - %s\n      environment: {GPUOPS_SIM_ROOT: %s}\n      register: %s\n" % (task, root, name)
                   for task, name in zip(tasks, names))
    body += "    - ansible.builtin.copy:\n        content: \"{{ {%s} | to_json }}\"\n        dest: %s\n        mode: \"0600\"\n" % (
        ", ".join("'%s': %s" % (name, name) for name in names), out)
    return playbook.run_playbook(str(tmp_path), collections_root, body, out)


def narrowed_kills(keys):
    """gpu_kill tasks (end_running_jobs, allowed to fail) for each selection key in turn, check mode first, then real."""
    tasks = []
    for key in keys:
        task = "gpuops.remediation.gpu_kill: {gpus: [\"%s\"], end_running_jobs: true}\n      ignore_errors: true" % key
        tasks += [task + "\n      check_mode: true", task]
    return tasks


def refused_beyond(result, name, pid):
    """The result of a gpu_kill that refused pid, and only it, as beyond its selection, changing nothing; its entry."""
    assert result["failed"] is True and result["changed"] is False, (name, result.get("signalled"), result.get("msg"))
    assert [p["pid"] for p in result["beyond_selection"]] == [pid], name
    return result["beyond_selection"][0]
