# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The operator's inputs through a real ansible-playbook run of reset_gpu.yml: a misspelt variable of the collection's
prefixes is refused with the closest input there is, and every wrong value is named as the operator wrote it, by the
first task, before any node is inspected (the inventory's one host has no node behind it: reaching it would fail)."""

from __future__ import annotations

import os
import sys

import pytest

from ansible_collections.gpuops.remediation.tests.unit.helpers.playbook_run import ansible_playbook


def _reset_gpu(tmp_path, collection_root, collections_root, *extra):
    args = ["-i", "n01,", "-e", "gpuops_hosts=all", "-e", "ansible_connection=ssh", "-e", "ansible_host=192.0.2.1"]
    for item in extra:
        args += ["-e", item]
    return ansible_playbook(args + [os.path.join(collection_root, "playbooks", "reset_gpu.yml")], collections_root, str(tmp_path))


@pytest.mark.parametrize("extra, says", [
    (["gpu_reclaim_max_rungs=reset"], "gpu_reclaim_max_rungs is no input of this playbook; did you mean gpu_reclaim_max_rung?"),
    (['{"gpu_reclaim_protect_name": ["train-worker"]}'], "gpu_reclaim_protect_name is no input of this playbook; did you mean gpu_reclaim_protect_names?"),
    (["gpuops_dryrun=true"], "gpuops_dryrun is no input of this playbook; did you mean gpuops_dry_run?"),
    (["gpu_reclaim_kill_grace=abc"], "gpu_reclaim_kill_grace=abc (a number)"),
    (["gpu_reclaim_kill_grace=-5"], "gpu_reclaim_kill_grace=-5 (more than 0 seconds)"),
    (["gpu_reclaim_lock_timeout=-1"], "gpu_reclaim_lock_timeout=-1 (0 or more seconds)"),
    (["gpu_inspect_probe_timeout=0"], "gpu_inspect_probe_timeout=0 (more than 0 seconds)"),
    (["gpu_reclaim_ghost_threshold_mib=1.5"], "gpu_reclaim_ghost_threshold_mib=1.5 (a whole number)"),
    (["gpu_remediate_breaker_window_minutes=0"], "gpu_remediate_breaker_window_minutes=0 (1 or more)"),
    (['{"gpu_reclaim_kill_signals": ["TERM", "KILLL"]}'], "gpu_reclaim_kill_signals=['TERM', 'KILLL'] (signal names (TERM, INT, KILL, ...); not one: KILLL)"),
    (['{"gpu_reclaim_kill_signals": []}'], "gpu_reclaim_kill_signals=[] (at least one signal name"),
    (['{"gpu_reclaim_gpus": [true]}'], "gpu_reclaim_gpus=[True] (a list of GPU indexes, UUIDs, PCI bus ids or MIG instances; true, false"),
    (['{"gpu_inspect_gpus": [0, " "]}'], "gpu_inspect_gpus=[0, ' '] (a list of GPU indexes"),
    (['{"gpu_reclaim_gpus": [[0]]}'], "gpu_reclaim_gpus=[[0]] (a list of GPU indexes"),
])
def test_refused_by_the_first_task_in_the_operators_words(tmp_path, collection_root, collections_root, extra, says):
    run = _reset_gpu(tmp_path, collection_root, collections_root, *extra)
    assert run.returncode == 2, run.stdout[-3000:]
    assert says in run.stdout, run.stdout[-3000:]
    assert "_AnsibleTaggedStr" not in run.stdout and "unable to convert" not in run.stdout
    assert "TASK [gpuops.remediation.gpu_remediate : " not in run.stdout and "UNREACHABLE" not in run.stdout


def test_every_wrong_input_named_in_one_refusal(tmp_path, collection_root, collections_root):
    run = _reset_gpu(tmp_path, collection_root, collections_root, "gpu_reclaim_max_rungs=reset", "gpu_reclaim_kill_grace=-5")
    refusal = [line for line in run.stdout.splitlines() if line.startswith("[ERROR]") and "invalid input:" in line]
    assert len(refusal) == 1, run.stdout[-3000:]
    assert "gpu_reclaim_max_rungs is no input" in refusal[0] and "gpu_reclaim_kill_grace=-5" in refusal[0]


def test_a_host_variable_the_collection_reads_is_no_typo(tmp_path, collection_root, collections_root):
    """A name far from every input gets no guess; variables read elsewhere (the Xid policy) are inputs, not typos."""
    run = _reset_gpu(tmp_path, collection_root, collections_root, "gpuops_zzzz=1", '{"gpuops_xid_policy": {"79": "reboot"}}')
    refusal = [line for line in run.stdout.splitlines() if line.startswith("[ERROR]") and "invalid input:" in line]
    assert len(refusal) == 1 and "gpuops_zzzz is no input of this playbook" in refusal[0], run.stdout[-3000:]
    assert "did you mean" not in refusal[0] and "gpuops_xid_policy" not in refusal[0]


def _gpu_watch(tmp_path, collection_root, collections_root, *extra):
    args = ["-i", "n01,", "-e", "gpuops_hosts=all", "-e", "ansible_connection=local", "-e", "ansible_python_interpreter=" + sys.executable,
            "-e", '{"gpuops_environment": {"GPUOPS_SIM_ROOT": "%s"}}' % (tmp_path / "no-node")]
    for item in extra:
        args += ["-e", item]
    return ansible_playbook(args + [os.path.join(collection_root, "playbooks", "gpu_watch.yml")], collections_root, str(tmp_path))


def test_the_watch_takes_the_ladders_inputs_and_refuses_its_own_typos(tmp_path, collection_root, collections_root):
    """gpu_watch.yml may run the ladder: its variables are inputs of the watch, in the playbook's check and the role's."""
    refused = _gpu_watch(tmp_path, collection_root, collections_root, "gpu_reclaim_max_rung=reset", "gpu_watch_sample=3")
    assert refused.returncode == 2 and "gpu_watch_sample is no input of this playbook; did you mean gpu_watch_samples?" in refused.stdout
    assert "gpu_reclaim_max_rung is no input" not in refused.stdout
    taken = _gpu_watch(tmp_path, collection_root, collections_root, "gpu_reclaim_max_rung=reset")
    assert "is no input of this playbook" not in taken.stdout, taken.stdout[-3000:]
    assert "TASK [gpuops.remediation.gpu_watch : Check the watch's inputs]" in taken.stdout, taken.stdout[-3000:]
    assert "TASK [gpuops.remediation.gpu_watch : Sample the node and judge it across runs]" in taken.stdout, taken.stdout[-3000:]
