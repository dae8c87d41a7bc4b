# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""reset_gpu.yml's tasks per host: each task is a fork per host on the controller, a skipped one too, so what a run
does not need stays behind one include that is not reached (the circuit breaker when it is off, the refusal when
nothing is refused, the walk's controller steps when it asks for none).

The real reset_gpu.yml (ansible-playbook in a child) against a simulated node whose idle GPU 0 has an Xid that asks for
a reset: the run resets it, and what it shows of each task says which ran and which were skipped. The includes are
reached on one boolean each, from Python: gpu_ladder's needs_controller_step, the guard_refuses filter."""

import json
import os
import re
import time

from ansible_collections.gpuops.remediation.tests.unit.helpers.reset_run import idle_xid_nodes, reset_gpu as _reset_gpu, resets as _resets

TASK = re.compile(r"^TASK \[(?:[\w.]+ : )?(.*?)\] \*+$", re.M)
SKIPPED = re.compile(r"^skipping: \[gpunode\]", re.M)
BREAKER_TASKS = ("Read the Slurm nodes drained by gpuops, for the circuit breaker", "Apply the circuit breaker",
                 "Give this host's place in the circuit breaker back when it is found healthy")


def test_a_reset_with_the_breaker_off_skips_at_most_six_tasks_and_reaches_no_breaker_refusal_or_drain_task(collections_root):
    with idle_xid_nodes() as (directory, make):
        run, report, commands = _reset_gpu(directory, make(119), collections_root)
    assert run.returncode == 0, run.stdout[-3000:]
    assert (report["status"], report["fixed_by"]) == ("fixed", "reset"), report
    assert len(_resets(commands)) == 1, commands
    shown = TASK.findall(run.stdout)
    assert not set(BREAKER_TASKS) & set(shown), shown
    assert "Write the run report of the refused run" not in shown and "Refuse this host when the circuit breaker is open" not in shown, shown
    assert "The drain (and its check before each later destructive rung) and the reboot, as the walk pauses for them" not in shown, shown
    assert len(SKIPPED.findall(run.stdout)) <= 6, run.stdout[-3000:]
    assert "Remediate" not in shown and "Inspect and guard" in shown, shown  # the walk's role is imported, not included per host


def test_a_reset_with_the_breaker_on_runs_its_tasks_and_still_resets(collections_root):
    with idle_xid_nodes() as (directory, make):
        run, report, commands = _reset_gpu(directory, make(119), collections_root, extra=[
            "-e", "gpu_remediate_breaker_max_count=5", "-e", "gpu_remediate_breaker_dir=%s/breaker" % directory])
    assert run.returncode == 0, run.stdout[-3000:]
    assert (report["status"], report["fixed_by"]) == ("fixed", "reset"), report
    assert len(_resets(commands)) == 1, commands
    shown = TASK.findall(run.stdout)
    assert "Apply the circuit breaker" in shown and "Read the Slurm nodes drained by gpuops, for the circuit breaker" in shown, shown


def test_a_host_the_open_breaker_refuses_is_reported_failed_and_reset_nowhere_in_check_mode_too(collections_root):
    for mode in ([], ["--check"]):
        with idle_xid_nodes() as (directory, make):
            breaker = os.path.join(directory, "breaker")
            os.mkdir(breaker, 0o700)
            with open(os.path.join(breaker, "othernode.breaker.json"), "w") as handle:
                json.dump({"host": "othernode", "node": "othernode", "epoch": time.time(), "run": "earlier", "rung": "reset"}, handle)
            run, report, commands = _reset_gpu(directory, make(119), collections_root, extra=[
                "-e", "gpu_remediate_breaker_max_count=1", "-e", "gpu_remediate_breaker_dir=%s" % breaker] + mode)
            left = sorted(name for name in os.listdir(breaker) if name.endswith(".breaker.json"))
            if mode:  # a plan's report goes to latest-plan.json
                with open(os.path.join(directory, "reports-node0", "latest-plan.json")) as handle:
                    report = json.load(handle)["hosts"][0]
        assert run.returncode != 0, run.stdout[-3000:]
        assert report["status"] == "refused" and "othernode" in report["msg"], report
        assert not _resets(commands), commands
        assert left == ["othernode.breaker.json"], left
        shown = TASK.findall(run.stdout)
        assert "Refuse this host when the circuit breaker is open" in shown, shown
        assert "fatal: [gpunode]" in run.stdout, run.stdout[-3000:]


def test_a_walk_that_pauses_for_the_reboot_reaches_the_controller_steps_in_a_plan(collections_root):
    # A GPU fallen off the bus (Xid 79) asks for the reboot rung: the walk pauses for it (needs_controller_step) and the
    # plan reaches the Linux reboot task, which refuses a local connection (it would reboot the controller): the rung fails.
    with idle_xid_nodes() as (directory, make):
        run, dummy, commands = _reset_gpu(directory, make(79, gpus=[{"lost": True}]), collections_root, extra=[
            "--check", "-e", "gpu_reclaim_max_rung=reboot", "-e", "gpu_reclaim_allow_reboot=true"])
        with open(os.path.join(directory, "reports-node0", "latest-plan.json")) as handle:
            plan = json.load(handle)["hosts"][0]
    shown = TASK.findall(run.stdout)
    assert "The drain (and its check before each later destructive rung) and the reboot, as the walk pauses for them" in shown, shown
    assert "Reboot the Linux node" in shown and "Reboot the Windows host" not in shown, shown
    assert [step["rung"] for step in plan["rungs_tried"]] == ["reboot"] and plan["rungs_tried"][0]["failed"], plan
    assert "Write the run report of the refused run" not in shown, shown
    assert not _resets(commands), commands
