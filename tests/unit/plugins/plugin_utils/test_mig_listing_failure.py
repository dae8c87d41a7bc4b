# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A MIG listing that failed is no answer, never "this GPU has no instance": through real ansible-playbook runs on a
simulated MIG node whose listings are denied (nvidia-smi mig -lgi/-lci exit 4, NVML's MIG device calls answer
NO_PERMISSION), the snapshot carries a note for the GPU (by either backend), a MIG instance selection on it is refused
saying the listing failed with the tool's exit code, and the instance rung, a reset and the reboot's layout record
refuse rather than record an empty layout - in check mode as in the real run. Not Found (nothing to list) stays an
answer."""

from __future__ import annotations

import os

from ansible_collections.gpuops.remediation.plugins.module_utils.simulation import _sim_build as sim
from ansible_collections.gpuops.remediation.plugins.module_utils.simulation import _sim_mig as sim_mig
from ansible_collections.gpuops.remediation.plugins.module_utils.simulation import _sim_state as sim_state
from ansible_collections.gpuops.remediation.plugins.module_utils.probes import _mig_instances as mig
from ansible_collections.gpuops.remediation.tests.unit.helpers.mig_play import play
from ansible_collections.gpuops.remediation.tests.unit.plugins.plugin_utils.test_mig_layout_restore import A100, journal, layout_of, mig_node, smi

SMI_NOTE = "GPU 0: nvidia-smi mig -lgi exited 4: Failed to display GPU instances: Insufficient Permissions"
NVML_NOTE = "GPU 0: NVML nvmlDeviceGetMigDeviceHandleByIndex failed (error 4): Insufficient Permissions"  # backend auto: NVML


def denied(root):
    sim_state.update_state(root, lambda state: state.update({sim_mig.DENIED_KEY: True}))


def test_the_exit_code_decides_an_answer_from_a_failure():
    assert mig.smi_listing_failure(["nvidia-smi", "mig", "-lgi"], 0, "table", "") is None
    assert mig.smi_listing_failure(["nvidia-smi", "mig", "-lgi"], 6, "No GPU instances found: Not Found\n", "") is None
    failed = mig.smi_listing_failure(["nvidia-smi", "mig", "-lci"], 4, "", "Unable to list\nFailed to display: Insufficient Permissions\n")
    assert failed == {"command": "nvidia-smi mig -lci", "rc": 4, "message": "Failed to display: Insufficient Permissions"}
    assert mig.listing_words(failed) == "nvidia-smi mig -lci exited 4: Failed to display: Insufficient Permissions"
    assert mig.listing_words(mig.listing_failure("NVML nvmlDeviceGetMigDeviceHandleByIndex", 4, "Insufficient Permissions")) == (
        "NVML nvmlDeviceGetMigDeviceHandleByIndex failed (error 4): Insufficient Permissions")


def test_the_simulated_listing_fails_as_denied(node_root):
    mig_node(node_root)
    denied(node_root)
    listed = smi(node_root, "mig", "-lgi")
    assert listed.returncode == 4 and listed.stdout.splitlines()[-1] == "Failed to display GPU instances: Insufficient Permissions"


def test_a_failed_listing_is_a_note_and_everything_that_would_record_or_destroy_refuses(tmp_path, node_root, collections_root):
    before = mig_node(node_root)
    denied(node_root)
    results = play(tmp_path, collections_root, node_root, [
        "gpuops.remediation.gpu_holders_info: {backend: nvidia_smi}",
        "gpuops.remediation.gpu_holders_info: {backend: nvml}",
        "gpuops.remediation.gpu_holders_info: {gpus: ['0:1'], backend: nvidia_smi}\n      ignore_errors: true",
        "gpuops.remediation.gpu_mig_recreate: {gpus: [0]}\n      check_mode: true\n      ignore_errors: true",
        "gpuops.remediation.gpu_mig_recreate: {gpus: [0]}\n      ignore_errors: true",
        "gpuops.remediation.gpu_reset: {gpus: [0], force: true}\n      check_mode: true\n      ignore_errors: true",
        "gpuops.remediation.gpu_reset: {gpus: [0], force: true}\n      ignore_errors: true",
        "gpuops.remediation.gpu_mig_layout: {state: recorded}\n      check_mode: true\n      ignore_errors: true",
        "gpuops.remediation.gpu_mig_layout: {state: recorded}\n      ignore_errors: true",
        "gpuops.remediation.nvidia_driver_reload: {force: true}\n      check_mode: true\n      ignore_errors: true",
        "gpuops.remediation.nvidia_driver_reload: {force: true}\n      ignore_errors: true",
    ], ["smi", "nvml", "selected", "recreate_check", "recreate", "reset_check", "reset", "record_check", "record", "reload_check", "reload"])
    smi_gpu, nvml_gpu = results["smi"]["gpus"][0], results["nvml"]["gpus"][0]
    # the note, by either backend; no instance is claimed
    assert smi_gpu["mig_listing_error"] == {"command": "nvidia-smi mig -lgi", "rc": 4,
                                            "message": "Failed to display GPU instances: Insufficient Permissions"}
    assert nvml_gpu["mig_listing_error"] == {"command": "NVML nvmlDeviceGetMigDeviceHandleByIndex", "rc": 4, "message": "Insufficient Permissions"}
    assert smi_gpu["gpu_instances"] == [] and nvml_gpu["gpu_instances"] == []
    # a selection of an instance on it: refused saying the listing failed, with the exit code
    selected = results["selected"]
    assert selected["failed"] is True
    assert selected["msg"].startswith("gpus: '0:1' names a MIG instance, but the MIG instances could not be listed (%s)" % SMI_NOTE)
    # the instance rung, a reset (its layout record) and the reboot's layout record: refused, in check mode as for real
    for name in ("recreate_check", "recreate"):
        assert results[name]["failed"] is True and results[name]["changed"] is False, name
        assert "left alone: GPU 0: its MIG instances could not be listed (%s): none is destroyed or created" % NVML_NOTE[7:] in results[name]["msg"], name
    assert "the MIG instances could not be listed (%s)" % NVML_NOTE in results["reset_check"]["msg"]
    assert results["reset"]["failed"] is True and "the MIG instances could not be listed (%s)" % NVML_NOTE in results["reset"]["msg"]
    for name in ("record_check", "record"):
        assert results[name]["failed"] is True and results[name]["changed"] is False, name
        assert results[name]["msg"] == ("gpu_mig_layout failed: the MIG instances could not be listed (%s); nothing was recorded, "
                                        "and the reboot would lose the layout" % NVML_NOTE), name
    for name in ("reload_check", "reload"):
        assert results[name]["failed"] is True and "the MIG instances could not be listed (%s)" % NVML_NOTE in results[name]["msg"], name
    assert sim_state.load_state(node_root).get("driver_unloads", 0) == 0
    # nothing was reset, reloaded, destroyed or recorded
    sim_state.update_state(node_root, lambda state: state.update({sim_mig.DENIED_KEY: False}))
    assert layout_of(node_root) == before
    records = journal(node_root) if os.path.exists(os.path.join(node_root, "var", "lib", "gpuops", "journal.jsonl")) else []
    assert [record["action"] for record in records if record["action"] in ("mig_layout", "mig_destroy", "gpu_reset")] == []


def test_a_gpu_without_instances_is_an_answer_not_a_failure(tmp_path, node_root, collections_root):
    sim.create_node(node_root, {"gpus": [{"name": A100, "memory_mib": 81920, "mig_mode": True}]})
    results = play(tmp_path, collections_root, node_root, [
        "gpuops.remediation.gpu_holders_info: {backend: nvidia_smi}", "gpuops.remediation.gpu_holders_info: {backend: nvml}"], ["smi", "nvml"])
    for name in ("smi", "nvml"):
        gpu = results[name]["gpus"][0]
        assert gpu["gpu_instances"] == [] and "mig_listing_error" not in gpu, name
