# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Progress while the ladder walks: each step on the node prints one line as it starts and one as it ends (host, GPUs,
rung, what it does, seconds) inside the one walk task, at default verbosity, through a real ansible-playbook run of
reset_gpu.yml on a simulated node with ghost memory; and the same lines are job events of ansible-runner (what AWX
runs jobs with), in order, between the walk task's start and its end."""

from __future__ import annotations

import glob
import json
import os
import re
import sys

import pytest

from ansible_collections.gpuops.remediation.tests.unit.helpers import bounded
from ansible_collections.gpuops.remediation.tests.unit.helpers.playbook_run import COLLECTIONS_ROOT, ansible_playbook

NODE = """
- hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - gpuops.remediation.gpu_sim: {root: %(root)s, gpus: [{}, {ghost_mib: 2048}], state: %(state)s}
"""
INVENTORY = """gpu_nodes:
  hosts:
    ghost:
      ansible_connection: local
      ansible_python_interpreter: %s
      gpuops_environment: {GPUOPS_SIM_ROOT: %s}
"""
WALK_NAME = "Walk the ladder from the snapshot, lightest rung first, up to a step the controller must take"
WALK_TASK = "TASK [gpuops.remediation.gpu_reclaim : " + WALK_NAME


@pytest.fixture
def node(tmp_path):
    root = tmp_path / "ghost"
    python = ["-i", "localhost,", "-e", "ansible_python_interpreter=" + sys.executable]
    for state in ("present",):
        (tmp_path / "node.yml").write_text(NODE % {"root": root, "state": state})
        run = ansible_playbook(python + [str(tmp_path / "node.yml")], COLLECTIONS_ROOT, str(tmp_path))
        assert run.returncode == 0, run.stdout[-3000:]
    (tmp_path / "inventory.yml").write_text(INVENTORY % (sys.executable, root))
    yield tmp_path
    (tmp_path / "node.yml").write_text(NODE % {"root": root, "state": "absent"})
    ansible_playbook(python + [str(tmp_path / "node.yml")], COLLECTIONS_ROOT, str(tmp_path))


def _progress(text):
    return [line.strip() for line in text.splitlines() if line.strip().startswith("gpuops: ghost GPU all: ")]


def _expected_order(lines, check_mode):
    """Every start has its end, right after the step's own lines; the reset rung's module and the health gate among them."""
    assert lines, "no progress line"
    started = [line for line in lines if line.endswith(" - started")]
    ended = [line for line in lines if re.search(r" in [0-9]+\.[0-9] s$", line)]
    assert len(started) == len(ended) and len(started) + len(ended) == len(lines), lines
    assert lines[0] == "gpuops: ghost GPU all: inspect: gpu_holders_info takes a snapshot of the GPUs and their holders - started" or \
        lines[0].startswith("gpuops: ghost GPU all: rung reset: "), lines
    what = "would reset the GPUs that need it" if check_mode else "resets the GPUs that need it"
    assert "gpuops: ghost GPU all: rung reset: gpu_reset %s - started" % what in lines, lines
    done = [line for line in ended if line.startswith("gpuops: ghost GPU all: rung reset: gpu_reset ")]
    assert len(done) == 1 and (" would change in " if check_mode else " changed in ") in done[0], lines
    return started, ended


@pytest.mark.parametrize("check_mode", [False, True])
def test_the_walk_says_each_step_as_it_starts_and_ends(node, collection_root, check_mode):
    args = ["-i", str(node / "inventory.yml"), os.path.join(collection_root, "playbooks", "reset_gpu.yml"),
            "-e", "gpu_remediate_report_dir=%s" % (node / "reports")] + (["--check"] if check_mode else [])
    run = ansible_playbook(args, COLLECTIONS_ROOT, str(node))
    assert run.returncode == 0, run.stdout[-4000:]
    walk = run.stdout.split(WALK_TASK, 1)[1].split("\nTASK [", 1)[0]
    lines = _progress(walk)
    _expected_order(lines, check_mode)
    assert _progress(run.stdout) == lines  # every progress line inside the one walk task: no task per host or per step
    assert "gpuops: ghost GPU all: health gate: gpu_health_check" in walk or check_mode


def test_the_progress_lines_are_ansible_runner_job_events(node, collection_root):
    pdd = node / "runner"
    (pdd / "env").mkdir(parents=True)
    (pdd / "inventory").mkdir()
    (pdd / "inventory" / "hosts.yml").write_text((node / "inventory.yml").read_text())
    (pdd / "env" / "extravars").write_text(json.dumps({"gpu_remediate_report_dir": str(node / "reports")}))
    # ansible-runner runs the ansible-playbook it finds on PATH: this Python's (ansible-test's venv has no such script).
    shim = node / "bin"
    shim.mkdir()
    (shim / "ansible-playbook").write_text("#!%s\nimport sys\nfrom ansible.cli.playbook import main\n"
                                           "sys.exit(main(['ansible-playbook'] + sys.argv[1:]))\n" % sys.executable)
    (shim / "ansible-playbook").chmod(0o755)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS_ROOT, ANSIBLE_NOCOLOR="1",
               PATH=os.pathsep.join([str(shim), os.path.dirname(sys.executable), os.environ.get("PATH", "")]))
    run = bounded.run([sys.executable, "-m", "ansible_runner", "run", str(pdd), "--project-dir", collection_root,
                       "-p", "playbooks/reset_gpu.yml", "--ident", "walk"], "ansible-runner run reset_gpu.yml", timeout=600,
                      env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    events = sorted((json.loads(open(path, encoding="utf-8").read())
                     for path in glob.glob(str(pdd / "artifacts" / "walk" / "job_events" / "*.json"))), key=lambda event: event["counter"])
    walk_start = [event["counter"] for event in events if event["event"] == "playbook_on_task_start"
                  and event.get("event_data", {}).get("task", "") == WALK_NAME]
    walk_end = [event["counter"] for event in events if event["event"] == "runner_on_ok"
                and event.get("event_data", {}).get("task", "") == WALK_NAME]
    assert len(walk_start) == 1 and len(walk_end) == 1, [(e["event"], e.get("event_data", {}).get("task")) for e in events]
    progress = [event for event in events if _progress(event.get("stdout") or "")]
    lines = [line for event in progress for line in _progress(event["stdout"])]
    _expected_order(lines, check_mode=False)
    assert len(progress) == len(lines)  # one event per line
    assert all(walk_start[0] < event["counter"] < walk_end[0] for event in progress)
