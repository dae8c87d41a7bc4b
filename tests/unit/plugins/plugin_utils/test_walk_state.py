# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The walk's typed state (_walk_state.WalkState) and its JSON form, the `state` gpu_ladder returns and the role hands
back: the keys the untyped state had, each present when it was, and a walk that goes on from the JSON as from the state."""

import json

from ansible_collections.gpuops.remediation.plugins.module_utils.journal import _reader
from ansible_collections.gpuops.remediation.plugins.plugin_utils.ladder._ladder_options import WalkOptions, walk_argument_spec
from ansible_collections.gpuops.remediation.plugins.plugin_utils.ladder._walk_state import STATE_VERSION, Scheduler, WalkState, walk_state
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows._windows_walk import WindowsWalk, windows_executor
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node import _node_journal
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.simulation import _simulated_node

from ansible_collections.gpuops.remediation.tests.unit.helpers.win_walk import build

# The keys of the state every call returns; the walk adds the others where it did before.
ALWAYS = {"version", "started", "first", "last", "floor", "tried", "inspections", "pending", "pending_rung", "refused", "beyond",
          "error", "drain_taken", "drained", "drain_notes", "undrained", "undrain_taken", "options"}
ENDED = {"health_check", "drain_followup", "outcome"}


def reboot_walk(node):
    args = dict((name, spec.get("default")) for name, spec in walk_argument_spec().items())
    args.update(platform="windows", max_rung="reboot", allow_reboot=True, run_id="walk-1")
    return WindowsWalk(WalkOptions(args), windows_executor(node, False, 256), False, "ws12")


def through_the_play(state):
    """What the next gpu_ladder task gets: the JSON the action plugin returned, as Ansible hands it on."""
    return json.loads(json.dumps(state.to_json()))


def journal(node):
    return _reader.read_journal(_simulated_node.host_file(node.root, _node_journal.DEFAULT_PATH))


def test_a_walk_paused_for_the_reboot_goes_on_from_the_json_the_play_hands_back(tmp_path):
    node = build(tmp_path, gpus=[{"ghost_mib": 2048, "restart_needs_reboot": True}])
    paused = through_the_play(reboot_walk(node).start())
    assert set(paused) == ALWAYS | {"reboot_journal"}
    assert paused["pending"] == "reboot" and paused["version"] == STATE_VERSION
    intent = journal(node)[-1]
    assert paused["reboot_journal"]["id"] == intent["id"]
    with _simulated_node.locked_state(node.root, write=True) as sim:
        sim["gpus"][0]["ghost_mib"] = 0  # what the controller's reboot did
    ended = reboot_walk(node).continue_after("reboot", paused, {"changed": True, "rebooted": True, "elapsed": 41})
    assert isinstance(ended, WalkState) and ended.outcome["fixed_by"] == "reboot"
    assert set(ended.to_json()) == ALWAYS | ENDED
    outcome = journal(node)[-1]
    assert (outcome["phase"], outcome["id"], outcome["ok"]) == ("outcome", intent["id"], True)


def test_an_ended_walks_json_reads_back_to_the_same_json(tmp_path):
    node = build(tmp_path, processes=[{"name": "python.exe", "memory_mib": 2048}])
    ended = reboot_walk(node).start()
    assert ended.pending is None and ended.outcome["status"] == "fixed"
    data = through_the_play(ended)
    assert set(data) == ALWAYS | ENDED
    assert WalkState.from_json(data).to_json() == data


def test_the_keys_set_on_the_way_appear_only_once_set():
    state = WalkState(scheduler=Scheduler(checked="reset", error="slurmctld gone", undrain_taken=True), run_id="run-1")
    data = state.to_json()
    assert (data["drain_checked"], data["drain_error"], data["undrain_error"], data["run_id"]) == ("reset", "slurmctld gone", "", "run-1")
    assert not ENDED & set(data) and "reboot_journal" not in data
    assert set(WalkState().to_json()) == ALWAYS


def test_the_decisions_read_the_json_form_as_the_state():
    data = {"drain_taken": True, "drain_followup": "hold", "health_check": {"reason": "dcgmi diag -r 1 failed:\n software"}}
    state = walk_state(data)
    assert state.scheduler.taken is True and state.scheduler.followup == "hold"
    assert walk_state(state) is state
    assert walk_state(None).version is None  # nothing handed back: no walk to continue
