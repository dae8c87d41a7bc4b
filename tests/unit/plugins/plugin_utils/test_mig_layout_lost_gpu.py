# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A GPU lost to the driver does not make the MIG layout of the others unreadable: nvidia-smi --query-gpu exits 15 (GPU
is lost) while it lists every other GPU, so the restore of a recorded layout follows the GPUs it lists. Through real
ansible-playbook runs of gpu_ladder on a simulated node whose GPU 1 fell off the bus (the very node the reboot rung is
for): a walk that recorded the layout and died before the reboot leaves its record, and the next walk answers it (the
layout is all there) and pauses for the reboot, rather than failing the rung for every run to come."""

from __future__ import annotations

from ansible_collections.gpuops.remediation.tests.unit.helpers.mig_play import play
from ansible_collections.gpuops.remediation.tests.unit.plugins.plugin_utils.test_mig_layout_restore import journal, layout_of, smi
from ansible_collections.gpuops.remediation.tests.unit.plugins.plugin_utils.test_mig_reboot_layout import WALK, layout_lines, lost_gpu_node


def test_the_query_lists_the_other_gpus_and_exits_15_for_the_lost_one(node_root):
    lost_gpu_node(node_root)
    listed = smi(node_root, "--query-gpu=index,uuid", "--format=csv,noheader")
    assert listed.returncode == 15 and listed.stdout.startswith("0, GPU-")


def test_a_record_left_before_the_reboot_is_answered_while_a_gpu_is_lost(tmp_path, node_root, collections_root):
    before = lost_gpu_node(node_root)
    # the walk recorded the layout and paused for the reboot; the play died before the reboot task
    play(tmp_path, collections_root, node_root, [WALK % "died"], ["walk"])
    assert layout_lines(node_root) == [("intent", "died", None)]
    (tmp_path / "next").mkdir()
    nxt = play(tmp_path / "next", collections_root, node_root, [WALK % "next"], ["next"])["next"]
    # the earlier record answered (nothing missing), the layout untouched, and the walk pauses for the reboot
    assert ("outcome", "next", True) in layout_lines(node_root), layout_lines(node_root)
    failed = [record for record in journal(node_root) if record["action"] == "mig_layout" and record["phase"] == "outcome"
              and record.get("ok") is not True and not record.get("interrupted")]
    assert failed == []  # the only other outcome is the died run's intent closed as interrupted
    assert nxt["pending"] == "reboot", nxt.get("outcome")
    assert layout_of(node_root) == before
