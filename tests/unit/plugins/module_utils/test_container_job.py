# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""_jobs.container_job: a holder of a container its runtime confirms running, with its main process alive, is a running
job's process (busy); one of a container that has stopped, or whose main process is gone, is a leftover; a runtime that
gave no answer, or a holder that is not one of the container's processes, gives no job (issue 17 rule 8).

The runtime's answers and the cgroup texts are the real captures under fixtures/docker (SOURCES.md); the confirmation
is what ContainerWitness.confirm builds from judge() over them."""

from __future__ import annotations

from ansible_collections.gpuops.remediation.plugins.module_utils.kill._container_runtime import judge, parse_inspect
from ansible_collections.gpuops.remediation.plugins.module_utils.scheduler._jobs import container_job

from ansible_collections.gpuops.remediation.tests.unit.helpers.docker_captures import (
    CLAIMED, CONTAINER_ID, FAKE_CGROUP, MAIN_CGROUP, OTHER_ID, RUNNING, fixture, inspected,
)

EXITED = inspected("inspect-exited.json")


def confirmation(state, why_not, holder_cgroup, main_cgroup):
    """As ContainerWitness.confirm: main_pid only when the runtime named a main process whose cgroup could be read."""
    confirmed, reason = judge(CLAIMED, state, why_not, holder_cgroup, main_cgroup)
    main_pid = state["pid"] if state and state["pid"] and main_cgroup else None
    return {"runtime": "docker", "id": CONTAINER_ID, "confirmed": confirmed, "reason": reason, "main_pid": main_pid}


def test_a_confirmed_running_container_with_its_main_process_alive_is_a_running_job():
    job = container_job(CLAIMED, RUNNING, confirmation(RUNNING, None, MAIN_CGROUP, MAIN_CGROUP))
    assert job == {"scheduler": "container", "id": CONTAINER_ID, "runtime": "docker", "state": "running", "running": True,
                   "main_pid": 21107, "why": "docker container %s runs with its main process 21107 alive" % CONTAINER_ID}


def test_a_holder_of_an_exited_container_is_a_leftover():
    job = container_job(CLAIMED, EXITED, confirmation(EXITED, None, MAIN_CGROUP, ""))
    assert job["running"] is False
    assert job["state"] == "not running"
    assert job["main_pid"] is None
    assert job["why"] == "docker says container %s is not running: a leftover of it" % CONTAINER_ID


def test_a_holder_whose_container_main_process_is_gone_is_a_leftover():
    # The runtime still says running (its answer came before the main process exited): the kernel says it is gone.
    job = container_job(CLAIMED, RUNNING, confirmation(RUNNING, None, MAIN_CGROUP, ""))
    assert job["running"] is False
    assert job["state"] == "running"
    assert job["why"] == "the main process 21107 that docker names is gone: a leftover of it"


def test_a_runtime_that_gave_no_answer_gives_no_job():
    why = "docker inspect exited with status 1: Cannot connect to the Docker daemon"
    assert container_job(CLAIMED, None, confirmation(None, why, MAIN_CGROUP, "")) is None


def test_a_container_the_runtime_does_not_know_gives_no_job():
    state, why = parse_inspect("docker", OTHER_ID, 1, fixture("inspect-missing.stdout"), fixture("inspect-missing.stderr"))
    assert container_job({"runtime": "docker", "id": OTHER_ID}, state, confirmation(state, why, MAIN_CGROUP, "")) is None


def test_a_forged_scope_in_a_users_delegated_subtree_is_no_job_even_when_the_named_container_runs():
    # The container runs and its main process lives: the forger is not one of its processes, so no job shields it.
    assert container_job(CLAIMED, RUNNING, confirmation(RUNNING, None, FAKE_CGROUP, MAIN_CGROUP)) is None


def test_a_process_outside_the_running_containers_cgroup_is_no_job():
    assert container_job(CLAIMED, RUNNING, confirmation(RUNNING, None, "0::/system.slice/other.service\n", MAIN_CGROUP)) is None
