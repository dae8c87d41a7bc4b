# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The instance rung never re-creates what the selection leaves out: re-creating a GPU instance destroys every compute
instance in it, so a selection naming one compute instance (GPU:GI/CI) of a GPU instance split in several is refused,
saying which to name. (The simulated node makes only a GPU instance's full compute instance: this GPU instance with two
is written as the snapshot reads it.)"""

from __future__ import annotations

from ansible_collections.gpuops.remediation.plugins.module_utils import _mig_selection as selection
from ansible_collections.gpuops.remediation.plugins.module_utils._mig_recreate import recreate_plan
from ansible_collections.gpuops.remediation.plugins.module_utils._snapshot import _scope_instances


def split_gpu():
    """GPU 0: GPU instance 1 (3g.40gb) split into compute instances 0 and 1, 4096 MiB of ghost memory in it, nobody in it;
    GPU instance 2 (3g.40gb) whole."""
    def gi(gi_id, start, cis, ghost):
        return {"id": gi_id, "profile": "3g.40gb", "profile_id": 9, "placement": {"start": start, "size": 4}, "memory_used_mib": ghost,
                "unattributed_mib": ghost, "attributed_mib": 0, "holders": [],
                "compute_instances": [{"id": ci, "uuid": "MIG-%d-%d" % (gi_id, ci), "profile_id": 1, "placement": None} for ci in cis]}
    return {"index": 0, "uuid": "GPU-aaaa", "pci_bus_id": "00000000:18:00.0", "gpu_instances": [gi(1, 0, [0, 1], 4096), gi(2, 4, [0], 0)]}


def plan_for(names):
    gpu = split_gpu()
    instances = selection.narrowed_instances([gpu], names)
    _scope_instances(gpu, instances)
    return recreate_plan({"gpus": [gpu]}, 0, instances)


def test_one_compute_instance_of_a_split_gpu_instance_is_not_re_created_with_its_neighbour():
    to_recreate, refused = plan_for(["0:1/0"])
    assert to_recreate == []
    assert [entry["gi"] for entry in refused] == [1]
    assert "0:1/1" in refused[0]["why"] and "0:1" in refused[0]["why"], refused[0]["why"]


def test_naming_the_gpu_instance_or_all_its_compute_instances_allows_it():
    for names in (["0:1"], ["0:1/0", "0:1/1"], ["MIG-1-0", "MIG-1-1"], ["0"], None):
        to_recreate, refused = plan_for(names)
        assert ([entry["gi"] for entry in to_recreate], refused) == ([1], []), names
