# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A GPU that fell off the bus keeps an identity: the watch saw the node's two GPUs (its state file, as it wrote it),
then GPU 1 fell off the bus (Xid 79 in the kernel log, NVML answers "GPU is lost"); gpu_holders_info gives it the bus
id of the kernel's line and the UUID, serial and name the watch last saw, and the run report shows them - all through
a real ansible-playbook run."""

from __future__ import annotations

from ansible_collections.gpuops.remediation.tests.unit.helpers.playbook_run import localhost_play

TASKS = """
        - gpuops.remediation.gpu_sim: {root: %(root)s, gpus: [{}, {}]}
        - gpuops.remediation.gpu_holders_info: {}
          environment: {GPUOPS_SIM_ROOT: %(root)s}
          register: before
        - gpuops.remediation.gpu_watch: {samples: 1, interval: 0, write_metrics: false}
          environment: {GPUOPS_SIM_ROOT: %(root)s}
        - ansible.builtin.slurp: {src: "%(root)s/var/lib/gpuops/watch_state.json"}
          register: watch_state
        # GPU 1 falls off the bus: the node as the hardware now is, the watch's state file as the watch wrote it.
        - gpuops.remediation.gpu_sim: {root: %(root)s, state: absent}
        - gpuops.remediation.gpu_sim: {root: %(root)s, gpus: [{}, {lost: true}], xid: [{xid: 79, gpu: 1}]}
        - ansible.builtin.file: {path: "%(root)s/var/lib/gpuops", state: directory, mode: "0755"}
        - ansible.builtin.copy: {content: "{{ watch_state.content | b64decode }}", dest: "%(root)s/var/lib/gpuops/watch_state.json", mode: "0600"}
        - gpuops.remediation.gpu_holders_info: {}
          environment: {GPUOPS_SIM_ROOT: %(root)s}
          register: after
        - ansible.builtin.set_fact: {gpu_inspect_snapshot: "{{ after }}"}
        - gpuops.remediation.gpu_run_report: {hosts: [localhost], write: false}
          register: report
"""


def test_a_lost_gpu_keeps_the_identity_it_was_last_seen_with(tmp_path, collections_root):
    result = localhost_play(tmp_path, TASKS, ["before", "after", "report"], collections_root)
    seen = result["before"]["gpus"][1]
    assert seen["uuid"].startswith("GPU-") and seen["serial"] and seen["pci_bus_id"]
    lost = result["after"]["gpus"][1]
    assert lost["state"] == "lost" and lost["identity_from"] == "watch_state"
    assert (lost["uuid"], lost["serial"], lost["name"], lost["pci_bus_id"]) == (seen["uuid"], seen["serial"], seen["name"], seen["pci_bus_id"])
    assert result["after"]["gpus"][0].get("identity_from") is None  # the GPU the driver answers for says its own
    line = [line for line in result["report"]["summary"] if line.startswith("    localhost: lost GPU")][0]
    assert "GPU 1 (%s, UUID %s, serial %s, as the watch last saw it)" % (seen["pci_bus_id"], seen["uuid"], seen["serial"]) in line
    reported = result["report"]["report"]["hosts"][0]["gpus"][1]
    assert (reported["uuid"], reported["serial"]) == (seen["uuid"], seen["serial"])
