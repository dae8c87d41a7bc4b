# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_snapshot's state file: whose it is (another user's, or one anyone can write, is not believed), and one that
cannot be read said once, not hidden; the source run as ansible-rulebook runs it."""

import asyncio
import json
import os
import time

import pytest

from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda._snapshot_source import state_file_problem
from ansible_collections.gpuops.remediation.tests.unit.helpers.eda_sources import _source


# ---------------------------------------------------------------- gpu_snapshot: whose state file

async def _first_events(queue):
    """The source's first event, waited for (not a sleep that a loaded machine outruns), and what came with it."""
    first = [await asyncio.wait_for(queue.get(), 30)]
    return first + [queue.get_nowait() for _index in range(queue.qsize())]


def test_state_file_problem_of_another_user_or_writable_by_anyone(tmp_path):
    path = tmp_path / "watch_state.json"
    assert state_file_problem(str(path)) is None  # missing: nothing known, no problem
    path.write_text("{}")
    os.chmod(str(tmp_path), 0o755)
    os.chmod(str(path), 0o640)
    assert state_file_problem(str(path)) is None
    os.chmod(str(path), 0o646)
    assert "option state_path: %r is refused: others can write it (mode 0646)" % str(path) in state_file_problem(str(path))
    os.chmod(str(path), 0o640)
    os.chmod(str(tmp_path), 0o777)
    assert "(at %s): others can write it (mode 0777" % tmp_path in state_file_problem(str(path))
    os.chmod(str(tmp_path), 0o1777)  # sticky: others cannot replace it, but could have put it there first
    assert "(at %s): others can write it (mode 1777" % tmp_path in state_file_problem(str(path))
    os.chmod(str(tmp_path), 0o755)
    link = tmp_path / "linked.json"
    link.symlink_to(path)
    assert "it is a symbolic link" in state_file_problem(str(link))
    if os.geteuid() == 0:
        os.chown(str(path), 65534, 65534)
        assert "it belongs to uid 65534" in state_file_problem(str(path))


def _ghost_state(epoch):
    return {"version": 1, "updated_epoch": epoch, "last_success_epoch": epoch,
            "xid": {"last_epoch": None, "seen": [], "counts": {}}, "active": {},
            "gpus": {"GPU-1": {"high_usage_since": None, "ghost_samples": 3, "last_ghost_mib": 4096,
                               "identity": {"index": 0, "uuid": "GPU-1", "name": "H100", "pci_bus_id": "00000000:18:00.0"}}}}


def _state_file_options(path, tmp_path):
    """The gpu_snapshot source's options that follow the state file at path, polling fast, throttling repeats."""
    return {"mode": "state_file", "host": "node07", "state_path": str(path), "journal_path": str(tmp_path / "none.jsonl"),
            "duration_seconds": 0, "poll_interval": 0.05, "throttle_seconds": 3600}


def test_snapshot_does_not_believe_a_state_file_anyone_can_write(tmp_path):
    """A world-writable watch state file: anyone could write ghost memory into it and start a GPU reset (the jobs on that
    GPU killed). gpu_snapshot reports it once, makes no ghost_memory event, and reads it again once it is fixed."""
    from ansible_collections.gpuops.remediation.plugins.module_utils.watch._watch import load_state

    path = tmp_path / "watch_state.json"
    path.write_text(json.dumps(_ghost_state(time.time())))
    state, problem = load_state(str(path))
    assert problem is None, problem  # a state the watch writes: only its owner and mode are wrong
    os.chmod(str(path), 0o666)
    module = _source("gpu_snapshot")

    async def run():
        queue = asyncio.Queue()
        task = asyncio.ensure_future(module.main(queue, _state_file_options(path, tmp_path)))
        try:
            first = await _first_events(queue)
            os.chmod(str(path), 0o640)
            fixed = await asyncio.wait_for(queue.get(), 5)
            return first, fixed
        finally:
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    first, fixed = asyncio.run(run())
    assert [event["gpuops"]["type"] for event in first] == ["source_problem"], first
    assert "option state_path" in first[0]["gpuops"]["message"] and "others can write it (mode 0666)" in first[0]["gpuops"]["message"]
    assert fixed["gpuops"]["type"] == "ghost_memory" and fixed["meta"] == {"hosts": "node07"}


def test_snapshot_state_file_that_cannot_be_read_is_said_once_not_hidden(tmp_path):
    """A corrupt state file (or one the source's user cannot read) made no event and said nothing: a source that never
    sees anything looked like a healthy fleet. It is a source_problem naming state_path, once; fixed, it is read."""
    path = tmp_path / "watch_state.json"
    path.write_text('{"version": 1, "gpus": ')
    module = _source("gpu_snapshot")

    async def run():
        queue = asyncio.Queue()
        task = asyncio.ensure_future(module.main(queue, _state_file_options(path, tmp_path)))
        try:
            first = await _first_events(queue)
            path.write_text(json.dumps(_ghost_state(time.time())))
            return first, await asyncio.wait_for(queue.get(), 5)
        finally:
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    first, fixed = asyncio.run(run())
    assert [event["gpuops"]["type"] for event in first] == ["source_problem"], first
    assert first[0]["gpuops"]["message"].startswith("option state_path: the state file %s is corrupt" % path)
    assert fixed["gpuops"]["type"] == "ghost_memory"
