# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A GPU whose MIG mode change is pending (it takes effect at the next reset) is named in the verdict, and the instance
rung, which resets nothing, re-creates an instance's ghost memory on it without applying the change: the mode stays
pending, check mode alike. Through ansible-playbook on a simulated A100 split in seven whose MIG disable is pending."""

from __future__ import annotations

from ansible_collections.gpuops.remediation.plugins.module_utils.simulation import _sim_build as sim
from ansible_collections.gpuops.remediation.plugins.module_utils.simulation import _sim_state as sim_state
from ansible_collections.gpuops.remediation.tests.unit.helpers.mig_play import play

A100 = "NVIDIA A100-SXM4-80GB"


def test_a_pending_mig_mode_change_is_named_and_the_instance_rung_leaves_it_pending(tmp_path, node_root, collections_root):
    instances = [{"profile": "1g.10gb", "ghost_mib": 4096 if gi == 3 else 0} for gi in range(1, 8)]
    sim.create_node(node_root, {"gpus": [{"name": A100, "memory_mib": 81920, "mig_mode": True, "mig_instances": instances}]})
    sim_state.update_state(node_root, lambda state: state["gpus"][0].update(mig_mode={"current": True, "pending": False}))
    task = "gpuops.remediation.gpu_mig_recreate: {gpus: [0]}"
    results = play(tmp_path, collections_root, node_root, ["gpuops.remediation.gpu_holders_info: {gpus: [0]}",
                                                           task + "\n      check_mode: true", task], ["info", "plan", "real"])
    reasons = [reason["reason"] for reason in results["info"]["verdict"]["reasons"]]
    assert any("GPU 0" in reason and "MIG mode change is pending (now on, off after a reset)" in reason for reason in reasons), reasons
    assert results["info"]["verdict"]["rung"] == "instance"
    for name in ("plan", "real"):
        assert [entry["gi"] for entry in results[name]["instances"]] == [3], name
    assert results["real"]["instances"][0]["recreated"] is True
    assert sim_state.load_state(node_root)["gpus"][0]["mig_mode"] == {"current": True, "pending": False}
