# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lines for humans (_summary.py): one renderer of a holder for the snapshot summary and the ladder's outcome."""

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.remediation.plugins.filter.ladder import snapshot_summary
from ansible_collections.gpuops.remediation.plugins.plugin_utils.report._summary import holder_line, snapshot_lines

TRAINER = {"pid": 4242, "name": "trainer", "user": "alice", "class": "compute", "state": "sleeping", "gpus": [0], "used_mib": 4096,
           "ppid": 1, "parent_name": "systemd"}
ZOMBIE = {"pid": 77, "name": "python3", "user": None, "class": "zombie", "state": "zombie", "gpus": [0, 1], "used_mib": None,
          "ppid": 70, "parent_name": "launcher"}
SNAPSHOT = {
    "gpus": [{"index": 0, "name": "NVIDIA H100", "pci_bus_id": "00000000:18:00.0", "memory_used_mib": 0, "memory_total_mib": 81559,
              "unattributed_mib": None, "state": "stuck"},
             {"index": 1, "name": None, "pci_bus_id": None, "memory_used_mib": None, "memory_total_mib": None,
              "unattributed_mib": 512, "state": "unresponsive"}],
    "holders": [TRAINER, ZOMBIE],
    "verdict": {"rung": "kill", "reasons": [{"rung": "kill", "reason": "pid 77 is a zombie"}]},
}


def test_a_holder_line_names_its_gpus_its_memory_and_a_zombies_parent():
    assert holder_line(TRAINER) == "  held by pid 4242 trainer (alice, compute) on GPU 0: 4096 MiB"
    assert holder_line(ZOMBIE) == "  held by pid 77 python3 (?, zombie, zombie of pid 70 launcher) on GPU 0,1: N/A MiB"
    assert holder_line(dict(TRAINER, gpus=[])).endswith("on no GPU (node-wide device files only): 4096 MiB")


def test_a_snapshot_lists_each_gpu_with_its_holders_then_the_verdict():
    assert snapshot_lines(SNAPSHOT) == [
        "GPU 0 NVIDIA H100 (00000000:18:00.0): 0/81559 MiB used, ghost ? MiB, state stuck",
        holder_line(TRAINER),
        holder_line(ZOMBIE),
        "GPU 1 (name unknown) (bus id unknown): ?/? MiB used, ghost 512 MiB, state unresponsive",
        holder_line(ZOMBIE),
        "verdict: kill",
        "  - kill: pid 77 is a zombie",
    ]


def test_the_filter_refuses_what_is_no_snapshot():
    with pytest.raises(AnsibleFilterError, match="snapshot_summary"):
        snapshot_summary({"gpus": []})
