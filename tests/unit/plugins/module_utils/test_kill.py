# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""_kill: what a narrowed run may end, and what a container stop ended, as pure decisions over records."""

from __future__ import annotations

import os

from ansible_collections.gpuops.remediation.plugins.module_utils.kill._kill import (
    beyond_selection, ended_pids, failures, holdings_now, still_holding, whole_driver_client)

CONTAINER_ID = "1a22e7e63cded052f07163ac6ec0d6926b755635281d453473043e5eaeae0256"


def process(pid, gpus, devices=None, seen_by=None, why="selected"):
    return {"pid": pid, "start_time": 100 + pid, "name": "p%d" % pid, "gpus": gpus,
            "devices": devices if devices is not None else ["/dev/nvidia%d" % g for g in gpus],
            "seen_by": seen_by if seen_by is not None else ["fd"], "why": why}


def test_a_client_of_the_whole_driver_holds_the_driver_and_no_gpu():
    assert whole_driver_client(process(1, [], devices=["/dev/nvidiactl"]))
    assert whole_driver_client(process(1, [], devices=["/dev/nvidiactl", "/dev/nvidia-uvm"]))
    assert whole_driver_client(process(1, [], devices=["/dev/dri/renderD128"]))
    assert whole_driver_client(process(1, [], devices=[], seen_by=["nvml"]))
    assert not whole_driver_client(process(1, [0], devices=["/dev/nvidiactl", "/dev/nvidia0"]))
    # A process of a container or a zombie's parent that the snapshot does not list holds nothing.
    assert not whole_driver_client(process(1, [], devices=[], seen_by=[]))


def test_nothing_is_beyond_when_every_process_is_on_selected_gpus():
    assert beyond_selection([process(1, [0]), process(2, [0, 1])], [0, 1]) == []


def test_a_process_that_also_holds_another_gpu_is_beyond():
    found = beyond_selection([process(1, [0]), process(2, [0, 1])], [0])
    assert [(p["pid"], p["outside"]) for p in found] == [(2, "GPU 1")]


def test_a_zombies_parent_on_another_gpu_is_beyond():
    parent = process(7, [1], why="parent of zombie 8, ended when it does not reap it")
    found = beyond_selection([parent], [0])
    assert found[0]["outside"] == "GPU 1"
    assert found[0]["why"].startswith("parent of zombie 8")


def test_a_client_of_the_whole_driver_is_beyond_any_selection():
    found = beyond_selection([process(3, [], devices=["/dev/nvidiactl"])], [0, 1])
    assert found[0]["outside"] == "no GPU: a client of the whole driver (holding /dev/nvidiactl)"


def test_a_process_that_holds_nothing_is_never_beyond():
    assert beyond_selection([process(4, [], devices=[], seen_by=[])], [0]) == []


def _stopped(survivors, ok=True):
    return {"signalled": [], "left_alone": [], "zombies": [], "unconfirmed_containers": [],
            "containers": [{"runtime": "docker", "id": CONTAINER_ID, "pids": [10, 11], "ok": ok, "message": "",
                            "ended": [pid for pid in (10, 11) if ok and pid not in [s["pid"] for s in survivors]],
                            "survivors": survivors}]}


def test_after_a_stop_only_the_holders_gone_are_ended():
    result = _stopped([{"pid": 11, "start_time": 111, "name": "escaped"}])
    assert ended_pids(result) == {10}
    assert failures(result) == ["pid 11 (escaped) of docker container %s still runs after the container was stopped" % CONTAINER_ID]
    holders = [{"pid": 10, "start_time": 110, "name": "a"}, {"pid": 11, "start_time": 111, "name": "escaped"}]
    assert still_holding(result, holders) == [
        {"pid": 11, "start_time": 111, "name": "escaped", "reason": "still runs after docker container %s was stopped" % CONTAINER_ID}]


def test_a_stop_with_no_survivor_ends_every_holder():
    result = _stopped([])
    assert ended_pids(result) == {10, 11}
    assert failures(result) == []


def test_a_failed_stop_ends_nothing():
    result = _stopped([], ok=False)
    assert ended_pids(result) == set()
    assert failures(result) == ["could not stop docker container %s: no message" % CONTAINER_ID]


def test_a_survivor_is_named_with_what_was_sent_and_what_was_not():
    result = {"signalled": [{"pid": 5, "name": "deaf", "signals": [], "exited": False,
                             "not_sent": [{"signal": "TERM", "why": "TERM is ignored (SigIgn): the kernel discards it"}]}],
              "left_alone": [], "zombies": [], "containers": [], "unconfirmed_containers": [], "thawed": []}
    assert failures(result) == ["pid 5 (deaf) still runs after no signal (TERM not sent: TERM is ignored (SigIgn): "
                                "the kernel discards it)"]


def test_a_cgroup_that_did_not_thaw_is_a_failure():
    result = {"signalled": [], "left_alone": [], "zombies": [], "containers": [], "unconfirmed_containers": [],
              "thawed": [{"cgroup": "/sys/fs/cgroup/freezer/job", "ok": False, "message": "still frozen after 2.0 s"}]}
    assert failures(result) == ["could not thaw cgroup /sys/fs/cgroup/freezer/job: still frozen after 2.0 s"]


def test_what_a_process_the_snapshot_does_not_list_holds_is_read_from_its_own_fds(tmp_path, monkeypatch):
    """A zombie's parent the snapshot missed still counts with what it holds: unknown is not nothing."""
    (tmp_path / "dev").mkdir()
    for name in ("nvidia0", "nvidia1", "nvidiactl"):
        (tmp_path / "dev" / name).write_bytes(b"")
    monkeypatch.setenv("GPUOPS_SIM_ROOT", str(tmp_path))
    snapshot = {"gpus": [{"index": 0, "minor_number": 0}, {"index": 1, "minor_number": 1}]}
    assert holdings_now(os.getpid(), snapshot) == {"gpus": [], "devices": [], "seen_by": []}
    with open(str(tmp_path / "dev" / "nvidia1"), "rb"), open(str(tmp_path / "dev" / "nvidiactl"), "rb"):
        held = holdings_now(os.getpid(), snapshot)
    assert held["gpus"] == [1]
    assert sorted(os.path.basename(path) for path in held["devices"]) == ["nvidia1", "nvidiactl"]
    assert held["seen_by"] == ["fd"]
