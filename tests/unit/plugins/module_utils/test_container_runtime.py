# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""_container_runtime: a container is one only when its runtime says so.

The runtime's answers and the cgroup files are real captures (fixtures/docker, see SOURCES.md); the cgroup v2 lines
built here follow the paths docker's systemd driver and a user's delegated subtree give, and say so.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

import pytest

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpuops.remediation.plugins.module_utils.kill._container_runtime import (
    ContainerWitness, confirm_holders, delegated_subtree, inspect_argv, judge, namespace_init, namespace_members, parse_inspect, within)
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._cgroup import parse_cgroup

from ansible_collections.gpuops.remediation.tests.unit.helpers.docker_captures import (
    CLAIMED, CONTAINER_ID, FAKE_CGROUP, MAIN_CGROUP, OTHER_ID, RUNNING, fixture,
)

from ansible_collections.gpuops.remediation.tests.unit.helpers import bounded


def v2(path):
    return "0::%s\n" % path


# --- the runtime's answer ---------------------------------------------------------------------------------

def test_a_running_container_names_its_main_process():
    assert RUNNING == {"id": CONTAINER_ID, "running": True, "pid": 21107, "host_pid_namespace": False}


def test_a_stopped_container_has_no_main_process():
    state, why = parse_inspect("docker", CONTAINER_ID, 0, fixture("inspect-exited.json"))
    assert why is None
    assert state["running"] is False
    assert state["pid"] is None


def test_an_unknown_id_is_the_runtimes_error():
    state, why = parse_inspect("docker", OTHER_ID, 1, fixture("inspect-missing.stdout"), fixture("inspect-missing.stderr"))
    assert state is None
    assert why == "docker inspect exited with status 1: Error response from daemon: No such container: " + OTHER_ID


def test_an_answer_about_another_container_does_not_count():
    # The runtime resolves prefixes and names: only an answer for exactly the claimed id confirms it.
    state, why = parse_inspect("docker", OTHER_ID, 0, fixture("inspect-running.json"))
    assert state is None
    assert why == "docker knows no container %s" % OTHER_ID


def test_output_that_is_not_json_is_no_answer():
    assert parse_inspect("podman", CONTAINER_ID, 0, "Error: something\n") == (None, "podman inspect printed no JSON")


def test_crictl_answer():
    answer = json.dumps({"status": {"id": CONTAINER_ID, "state": "CONTAINER_RUNNING"},
                         "info": {"pid": 4242, "runtimeSpec": {"linux": {"namespaces": [{"type": "pid"}, {"type": "ipc"}]}}}})
    assert parse_inspect("containerd", CONTAINER_ID, 0, answer) == (
        {"id": CONTAINER_ID, "running": True, "pid": 4242, "host_pid_namespace": False}, None)
    exited = answer.replace("CONTAINER_RUNNING", "CONTAINER_EXITED")
    assert parse_inspect("cri-o", CONTAINER_ID, 0, exited)[0]["running"] is False


@pytest.mark.parametrize("runtime, argv", [
    ("docker", ["/usr/bin/docker", "container", "inspect", CONTAINER_ID]),
    ("podman", ["/usr/bin/podman", "container", "inspect", CONTAINER_ID]),
    ("containerd", ["/usr/bin/crictl", "inspect", "--output", "json", CONTAINER_ID]),
    ("cri-o", ["/usr/bin/crictl", "inspect", "--output", "json", CONTAINER_ID]),
])
def test_inspect_argv(runtime, argv):
    assert inspect_argv(argv[0], runtime, CONTAINER_ID) == argv


# --- cgroup facts -----------------------------------------------------------------------------------------

def test_the_forged_scope_claims_the_container_by_name():
    # What attribution reads from the path alone: the name claims the container, nothing more.
    assert parse_cgroup(FAKE_CGROUP)["container"] == CLAIMED


def test_a_users_delegated_subtree_is_found_in_any_line():
    assert delegated_subtree(FAKE_CGROUP) == "/user.slice/user-1000.slice/user@1000.service/docker-%s.scope" % CONTAINER_ID
    assert delegated_subtree(MAIN_CGROUP) is None
    assert delegated_subtree(v2("/user.slice/user-1000.slice/session-3.scope")) is None


def test_within_the_container_cgroup_in_every_common_hierarchy():
    assert within(MAIN_CGROUP, MAIN_CGROUP) is None
    below = MAIN_CGROUP.replace(CONTAINER_ID, CONTAINER_ID + "/worker")
    assert within(below, MAIN_CGROUP) is None
    assert within(MAIN_CGROUP, below) == "its cgroup /docker/%s is not the container's /docker/%s/worker" % (CONTAINER_ID, CONTAINER_ID)
    assert within(FAKE_CGROUP, MAIN_CGROUP).startswith("its cgroup /user.slice/")
    assert within(v2("/docker/" + CONTAINER_ID), "1:cpu:/docker/%s\n" % CONTAINER_ID) == (
        "no cgroup hierarchy in common with the container's main process")


def test_a_sibling_whose_name_starts_like_the_container_is_not_within():
    main = v2("/system.slice/docker-%s.scope" % CONTAINER_ID)
    sibling = v2("/system.slice/docker-%s.scope-evil" % CONTAINER_ID)
    assert within(sibling, main) is not None


# --- the decision -----------------------------------------------------------------------------------------

def test_a_process_of_the_container_is_confirmed():
    confirmed, reason = judge(CLAIMED, RUNNING, None, MAIN_CGROUP, MAIN_CGROUP)
    assert confirmed
    assert reason == "docker runs container %s with main process 21107, and this process is in its cgroup" % CONTAINER_ID


def test_the_forged_scope_of_a_real_running_container_is_not_confirmed():
    confirmed, reason = judge(CLAIMED, RUNNING, None, FAKE_CGROUP, MAIN_CGROUP)
    assert not confirmed
    assert reason == ("its cgroup /user.slice/user-1000.slice/user@1000.service/docker-%s.scope lies in a user's "
                      "delegated subtree" % CONTAINER_ID)


def test_a_forged_scope_outside_any_delegated_subtree_is_still_not_the_containers():
    forged = v2("/system.slice/docker-%s.scope" % CONTAINER_ID)
    confirmed, reason = judge(CLAIMED, RUNNING, None, forged, MAIN_CGROUP)
    assert not confirmed
    assert reason.startswith("its cgroup /system.slice/docker-%s.scope is not the container's /docker/%s" % (CONTAINER_ID, CONTAINER_ID))


def test_a_container_the_runtime_does_not_know_is_not_confirmed():
    why = "docker inspect exited with status 1: Error response from daemon: No such container: x"
    assert judge(CLAIMED, None, why, MAIN_CGROUP, "") == (False, why)


def test_a_stopped_container_confirms_nothing():
    state = dict(RUNNING, running=False, pid=None)
    assert judge(CLAIMED, state, None, MAIN_CGROUP, "") == (False, "docker says container %s is not running" % CONTAINER_ID)


def test_a_main_process_gone_since_the_answer_confirms_nothing():
    assert judge(CLAIMED, RUNNING, None, MAIN_CGROUP, "") == (False, "the main process 21107 that docker names is gone")


def test_a_container_whose_own_cgroup_lies_in_a_users_subtree_is_not_confirmed():
    # Rootless engines put their containers in user@UID.service: a user's subtree is never the root runtime's word.
    rootless = v2("/user.slice/user-1000.slice/user@1000.service/user.slice/docker-%s.scope" % CONTAINER_ID)
    confirmed, reason = judge(CLAIMED, RUNNING, None, rootless, rootless)
    assert not confirmed
    assert "delegated subtree" in reason


def test_a_main_process_in_another_containers_cgroup_confirms_nothing():
    other = MAIN_CGROUP.replace(CONTAINER_ID, "f" * 64)
    confirmed, reason = judge(CLAIMED, RUNNING, None, other, other)
    assert not confirmed
    assert reason == "the main process 21107 that docker names is not in that container's cgroup"


def test_a_main_process_below_the_container_cgroup_still_names_it():
    # systemd inside a container moves itself to init.scope; the container's cgroup is the one that names it.
    main = v2("/system.slice/docker-%s.scope/init.scope" % CONTAINER_ID)
    worker = v2("/system.slice/docker-%s.scope/system.slice/worker.service" % CONTAINER_ID)
    assert judge(CLAIMED, RUNNING, None, worker, main)[0]
    assert within(worker, main) is not None  # without the claim, only the main process's own cgroup counts
    assert not judge(CLAIMED, RUNNING, None, v2("/system.slice/other.service"), main)[0]


def test_systemd_driver_on_cgroup_v2():
    main = v2("/system.slice/docker-%s.scope" % CONTAINER_ID)
    assert judge(CLAIMED, RUNNING, None, main, main)[0]
    fake = v2("/user.slice/user-1000.slice/user@1000.service/app.slice/docker-%s.scope" % CONTAINER_ID)
    assert not judge(CLAIMED, RUNNING, None, fake, main)[0]


# --- the witness: a real AnsibleModule running a real CLI, a real /proc ------------------------------------

@pytest.fixture
def module():
    with patch_module_args({}):
        yield AnsibleModule(argument_spec={})


INSPECT_CLI = """#!{python}
import sys
sys.stdout.write(open({answer!r}).read())
"""


def test_witness_confirms_nothing_for_a_plain_process_that_names_a_running_container(tmp_path, monkeypatch, module):
    """A real process of ours, a real docker-shaped CLI answering with the captured inspect of a running container
    whose main process is this test's own child: our child is in our cgroup, and that is not /docker/<id>."""
    child = bounded.start([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        answer = tmp_path / "answer.json"
        data = json.loads(fixture("inspect-running.json"))
        data[0]["State"]["Pid"] = child.pid
        answer.write_text(json.dumps(data))
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        cli = bin_dir / "docker"
        cli.write_text(INSPECT_CLI.format(python=sys.executable, answer=str(answer)))
        cli.chmod(0o755)
        monkeypatch.setenv("PATH", str(bin_dir))
        result = ContainerWitness(module).confirm(os.getpid(), CLAIMED)
        assert result["confirmed"] is False
        assert result["reason"] == "the main process %d that docker names is not in that container's cgroup" % child.pid
        assert result["main_pid"] == child.pid
        assert result["same_pid_namespace"] is True
    finally:
        child.kill()
        bounded.wait(child, "child")


def test_witness_without_a_cli_confirms_nothing(tmp_path, monkeypatch, module):
    monkeypatch.setenv("PATH", str(tmp_path))
    result = ContainerWitness(module).confirm(os.getpid(), CLAIMED)
    assert result == {"runtime": "docker", "id": CONTAINER_ID, "confirmed": False,
                      "reason": "no CLI for container runtime docker (docker) on this node",
                      "main_pid": None, "main_start_time": None, "same_pid_namespace": None}


# --- PID namespaces: ending an init ends its namespace ---------------------------------------------------

def _children(pid):
    with open("/proc/%d/task/%d/children" % (pid, pid)) as handle:
        return [int(child) for child in handle.read().split()]


@pytest.mark.skipif(os.geteuid() != 0, reason="a new PID namespace (unshare --pid) needs root")
def test_the_init_of_a_pid_namespace_takes_its_members_along():
    bounded.require_unshare("pid")
    unshare = bounded.start(["unshare", "--pid", "--fork", "sh", "-c", "sleep 60 & exec sleep 61"])
    init = None
    try:
        deadline = time.monotonic() + 10
        while not _children(unshare.pid) or not _children(_children(unshare.pid)[0]):
            assert time.monotonic() < deadline, "the namespace did not start"
            time.sleep(0.01)
        init = _children(unshare.pid)[0]
        member = _children(init)[0]
        holders = [{"pid": init, "visible": True}, {"pid": member, "visible": True}, {"pid": os.getpid(), "visible": True}]
        assert namespace_init(init)
        assert not namespace_init(member)
        assert not namespace_init(os.getpid())
        assert [h["pid"] for h in namespace_members(init, holders)] == [member]
        assert namespace_members(member, holders) == []
    finally:
        if init is not None:
            os.kill(init, signal.SIGKILL)  # the kernel ends the namespace's other process with it
        bounded.wait(unshare, "unshare")


def test_the_snapshot_keeps_a_container_only_when_the_runtime_confirms_it(tmp_path, monkeypatch, module):
    monkeypatch.setenv("PATH", str(tmp_path))  # no docker CLI on this node: nothing can confirm the claim
    holders = [{"pid": os.getpid(), "container": dict(CLAIMED)}, {"pid": os.getpid(), "container": None}]
    confirm_holders(module, holders)
    assert holders[0]["container"] is None
    assert holders[0]["container_claim"] == dict(CLAIMED, reason="no CLI for container runtime docker (docker) on this node")
    assert holders[1] == {"pid": os.getpid(), "container": None}


HANGING_CLI = """#!{python}
import os, time
with open({pid_file!r}, "w") as handle:
    handle.write(str(os.getpid()))
time.sleep(60)
"""


def test_a_runtime_that_does_not_answer_confirms_nothing_within_the_probe_deadline(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    cli = bin_dir / "docker"
    pid_file = tmp_path / "cli.pid"
    cli.write_text(HANGING_CLI.format(python=sys.executable, pid_file=str(pid_file)))
    cli.chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    with patch_module_args({"probe_timeout": 1.0}):
        hung = AnsibleModule(argument_spec={"probe_timeout": {"type": "float"}})
    started = time.monotonic()
    try:
        result = ContainerWitness(hung).confirm(os.getpid(), CLAIMED)
    finally:
        if pid_file.exists():
            try:
                os.kill(int(pid_file.read_text()), signal.SIGKILL)  # the CLI, where the deadline left it running
            except ProcessLookupError:
                pass  # the runner ended the CLI's process group at the deadline, as it should
    assert time.monotonic() - started < 30
    assert result["confirmed"] is False
    assert result["reason"] == "docker inspect did not answer within 1.0 s"
