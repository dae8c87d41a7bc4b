# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The MIG layout and its one restore decision: built from nvidia-smi mig -lgi / -lci as the real tool prints them (the
MIG user guide's example), what to create so that a layout holds a recorded one, and which recorded layouts the journal
says no run has restored."""

from __future__ import annotations

from ansible_collections.gpuops.remediation.plugins.module_utils import _mig_layout as layout
from ansible_collections.gpuops.remediation.plugins.module_utils.journal._evidence import left_unrestored_layouts
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._mig_instances import parse_lci, parse_lgi

# nvidia-smi mig -lgi on an A100-SXM4-40GB after "-cgi 19,14,5" (MIG user guide, "Instance Geometry", example 1)
REAL_LGI = """+----------------------------------------------------+
| GPU instances:                                     |
| GPU   Name          Profile  Instance   Placement  |
|                       ID       ID       Start:Size |
|====================================================|
|   0  MIG 1g.5gb       19       13          6:1     |
+----------------------------------------------------+
|   0  MIG 2g.10gb      14        5          4:2     |
+----------------------------------------------------+
|   0  MIG 4g.20gb       5        1          0:4     |
+----------------------------------------------------+
"""
# nvidia-smi mig -lci rows of the same GPU (the R470+ shape, with the Placement column)
REAL_LCI = """|   0      1       MIG 4g.20gb          3         0        0:4     |
|   0      5       MIG 2g.10gb          1         0        0:2     |
|   0     13       MIG 1g.5gb           0         0        0:1     |
"""


def test_the_layout_joins_each_gpu_instance_with_its_compute_instances_in_placement_order():
    built = layout.build_layout(parse_lgi(REAL_LGI), parse_lci(REAL_LCI), [0, 1])
    assert [(gi["profile_id"], gi["start"], gi["compute"]) for gi in built["0"]] == [(5, 0, [3]), (14, 4, [1]), (19, 6, [0])]
    assert built["1"] == []


def test_restore_creates_only_what_is_missing_and_never_touches_the_rest():
    recorded = layout.build_layout(parse_lgi(REAL_LGI), parse_lci(REAL_LCI), [0])
    assert [(step["profile_id"], step["start"], step["gi"], step["compute"]) for step in layout.restore_steps(recorded, {})] == [
        (5, 0, None, [3]), (14, 4, None, [1]), (19, 6, None, [0])]
    assert layout.restore_steps(recorded, recorded) == []
    # the 2g.20gb exists without its compute instance; an instance the record does not have (1g at 7) is left alone
    now = {"0": [dict(recorded["0"][0]), dict(recorded["0"][1], gi=9, compute=[]), dict(recorded["0"][2]),
                 {"profile_id": 19, "start": 7, "size": 1, "gi": 14, "compute": [0]}]}
    assert [(step["profile_id"], step["gi"], step["compute"]) for step in layout.restore_steps(recorded, now)] == [(14, 9, [1])]
    step = layout.restore_steps(recorded, {})[0]
    assert layout.create_argv("/usr/bin/nvidia-smi", step) == ["/usr/bin/nvidia-smi", "mig", "-i", "0", "-cgi", "5:0"]
    assert layout.create_ci_argv("nvidia-smi", step, 7) == ["nvidia-smi", "mig", "-i", "0", "-cci", "3", "-gi", "7"]
    assert layout.describe(step) == "GPU 0: 4g.20gb (profile 5) at placement 0 with compute instance of profile 3"


def test_a_recorded_gpu_is_followed_by_its_uuid_and_one_that_left_the_node_gets_nothing():
    recorded = {"0": layout.build_layout(parse_lgi(REAL_LGI), parse_lci(REAL_LCI), [0])["0"], "1": [], "2": [{"profile_id": 19}]}
    uuids = {"0": "GPU-aaaa", "1": "GPU-bbbb", "2": "GPU-cccc"}
    # after the reload GPU-aaaa fell off the bus: GPU-bbbb is index 0 now, GPU-cccc index 1
    followed, lost = layout.follow_gpus(recorded, uuids, {"GPU-bbbb": 0, "GPU-cccc": 1})
    assert followed == {"0": [], "1": [{"profile_id": 19}]}
    assert lost == ["GPU 0 (GPU-aaaa) is not on the node any more: its instances were not created elsewhere"]
    # nothing moved: the same layout; a record without UUIDs (an older run's) keeps its indexes
    assert layout.follow_gpus(recorded, uuids, {"GPU-aaaa": 0, "GPU-bbbb": 1, "GPU-cccc": 2}) == (recorded, [])
    assert layout.follow_gpus(recorded, {}, {}) == (recorded, [])


def test_the_created_instance_id_is_read_from_the_real_line():
    assert layout.created_gi("Successfully created GPU instance ID 13 on GPU 0 using profile MIG 1g.5gb (ID 19)\n") == 13
    assert layout.created_gi("Successfully created GPU instance ID  5 on GPU  0 using profile MIG 1g.24gb (ID 15)\n") == 5
    assert layout.created_gi("Failed to create GPU instances: Insufficient Resources\n") is None


def test_a_pending_mig_mode_change_is_named():
    assert layout.pending_mig_change({"mig_mode": {"current": True, "pending": True}}) is None
    assert layout.pending_mig_change({"mig_mode": None}) is None
    assert layout.pending_mig_change({"mig_mode": {"current": True, "pending": False}}) == \
        "its MIG mode change is pending (now on, off after a reset): a reset would apply it"


def _record(run_id, entry_id, phase, ok=None, of=None, layout_=None):
    record = {"ts": "2026-12-06T10:00:00Z", "run_id": run_id, "id": entry_id, "phase": phase, "action": "mig_layout"}
    if phase == "intent":
        record["layout"] = layout_ if layout_ is not None else {"0": []}
    else:
        record["ok"] = ok
        if of:
            record["of"] = of
    return record


def test_a_layout_is_left_unrestored_until_an_ok_outcome_answers_it():
    killed = _record("a", "a-1", "intent")
    # killed after its reset: the reset's intent follows the record (a run killed before it never lost the layout)
    reset = {"ts": "2026-12-06T10:00:01Z", "run_id": "a", "id": "a-2", "phase": "intent", "action": "gpu_reset"}
    assert left_unrestored_layouts([killed, reset]) == [killed]
    assert left_unrestored_layouts([killed, reset], run_id="a") == []
    interrupted = _record("b", "a-1", "outcome", ok=False)
    # a run that took it over and failed to restore it: its own intent (naming the first in `of`) stands for both
    failed_restore = [dict(_record("b", "b-1", "intent"), of=["a-1"]), _record("b", "b-1", "outcome", ok=False, of=["a-1"])]
    assert left_unrestored_layouts([killed, reset, interrupted] + failed_restore) == [failed_restore[0]]
    restored = [_record("c", "c-1", "intent"), _record("c", "c-1", "outcome", ok=True, of=["a-1", "b-1"])]
    assert left_unrestored_layouts([killed, reset, interrupted] + failed_restore + restored) == []
    assert left_unrestored_layouts([dict(killed, layout="not a layout")]) == []
