# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Who is in a MIG instance is decided by the device an open file is, never by its path or by the process's leader: a
process whose leader thread exited, holding an instance's nvidia-caps node through a hard link made elsewhere, is in that
instance, and the instance rung leaves it alone, naming it; a descriptor opened with O_PATH never opened the node and
keeps nothing, so its instance's ghost memory is got back. Where the driver's list and the nodes disagree, the process
is in both instances. Through ansible-playbook on a simulated A100 split in seven (the simulated devices are regular
files: a hard link is the same file, as a second node of the same device number is the same device on a real node),
the processes real ones."""

from __future__ import annotations

import os
import subprocess
import sys

from ansible_collections.gpuops.remediation.plugins.module_utils.simulation import _sim_build as sim
from ansible_collections.gpuops.remediation.plugins.module_utils.simulation import _sim_mig as sim_mig
from ansible_collections.gpuops.remediation.plugins.module_utils.simulation import _sim_state as sim_state
from ansible_collections.gpuops.remediation.tests.unit.helpers import bounded
from ansible_collections.gpuops.remediation.tests.unit.helpers.mig_play import narrowed_kills, play, refused_beyond

A100 = "NVIDIA A100-SXM4-80GB"
# The leader opens the files, a thread says so and waits; the leader then leaves through pthread_exit, its threads run on.
LEADER_EXITS = ("import ctypes, sys, threading\nfiles = [open(path) for path in sys.argv[1:]]\n"
                "def wait():\n    sys.stdout.write('held\\n')\n    sys.stdout.flush()\n    sys.stdin.read()\n"
                "threading.Thread(target=wait).start()\nctypes.CDLL(None).pthread_exit(None)\n")
O_PATH_ONLY = ("import os, sys\nfd = os.open(sys.argv[1], os.O_PATH)\nsys.stdout.write('held\\n')\nsys.stdout.flush()\nsys.stdin.read()\n")


def cap_node(root, gi):
    return os.path.join(root, "dev", "nvidia-caps", "nvidia-cap%d" % sim_mig.cap_minor(0, gi))


def leader_gone(pid):
    """The leader of pid has exited (its /proc/<pid>/status says zombie) while a thread runs on."""
    with open("/proc/%d/status" % pid, encoding="ascii") as handle:
        state = [line for line in handle if line.startswith("State:")][0]
    return "Z" in state and len(os.listdir("/proc/%d/task" % pid)) > 1


def test_a_hard_linked_node_held_by_a_thread_is_in_its_instance_and_an_o_path_descriptor_is_not(tmp_path, node_root, collections_root):
    instances = [{"profile": "1g.10gb", "ghost_mib": 4096 if gi in (3, 5) else 0} for gi in range(1, 8)]
    sim.create_node(node_root, {"gpus": [{"name": A100, "memory_mib": 81920, "mig_mode": True, "mig_instances": instances}]})
    link = str(tmp_path / "elsewhere-cap")
    os.link(cap_node(node_root, 3), link)
    threaded = bounded.start([sys.executable, "-c", LEADER_EXITS, os.path.join(node_root, "dev", "nvidia0"), link],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True)
    o_path = bounded.start([sys.executable, "-c", O_PATH_ONLY, cap_node(node_root, 5)],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert bounded.line(threaded, "the thread holding the linked node") == "held"
        assert bounded.line(o_path, "the process with an O_PATH descriptor") == "held"
        bounded.until(lambda: leader_gone(threaded.pid), "the leader of %d to exit, its thread running on" % threaded.pid)
        task = "gpuops.remediation.gpu_mig_recreate: {gpus: [0]}\n      ignore_errors: true"
        results = play(tmp_path, collections_root, node_root, ["gpuops.remediation.gpu_holders_info: {gpus: [0]}",
                                                               task + "\n      check_mode: true", task], ["info", "plan", "real"])
        holders = dict((h["pid"], h) for h in results["info"]["holders"])
        assert o_path.pid not in holders
        assert [(i["gpu_instance_id"], i["seen_by"]) for i in holders[threaded.pid]["mig_instances"]] == [(3, ["nvidia-caps"])]
        for name in ("plan", "real"):
            result = results[name]
            assert [entry["gi"] for entry in result["instances"]] == [5], name
            assert [(entry["gi"], entry["why"]) for entry in result["refused"]] == [
                (3, "held by pid %d: an instance is re-created only when nothing is in it" % threaded.pid)], name
        assert results["real"]["instances"][0]["recreated"] is True
        ghosts = dict((gi["start"], gi.get("ghost_mib", 0)) for gi in sim_state.load_state(node_root)["gpus"][0]["gpu_instances"])
        assert ghosts[2] == 4096 and ghosts[4] == 0  # instance 3 (placement 2) kept as it was, instance 5's memory back
        assert threaded.poll() is None and o_path.poll() is None
    finally:
        for process in (threaded, o_path):
            process.stdin.close()
            bounded.wait(process, "a holder after its stdin closed")


def test_a_holder_the_driver_lists_in_one_instance_and_its_node_puts_in_another_is_in_both(tmp_path, node_root, collections_root):
    """Neither fact wins over the other: a job the driver lists in instance 3 whose nvidia-caps node the capabilities files
    say is instance 5's is in both (seen_by says which fact put it where), so a run narrowed to either refuses it, naming
    the other, and neither instance is re-created while it runs."""
    instances = [{"profile": "1g.10gb", "ghost_mib": 4096 if gi == 5 else 0} for gi in range(1, 8)]
    sim.create_node(node_root, {"gpus": [{"name": A100, "memory_mib": 81920, "mig_mode": True, "mig_instances": instances}],
                                "holders": [{"gpus": [0], "mig_instance": 3, "memory_mib": 2048, "running": True}]})
    caps = os.path.join(node_root, "proc", "driver", "nvidia", "capabilities", "gpu0", "mig")
    for gi, other in ((3, 5), (5, 3)):  # the two instances' files swapped: each names the other's nodes
        for relative, ci in (("access", None), ("ci0/access", 0)):
            with open(os.path.join(caps, "gi%d" % gi, relative), "w", encoding="ascii") as handle:
                handle.write("DeviceFileMinor: %d\nDeviceFileMode: 292\nDeviceFileModify: 1\n" % sim_mig.cap_minor(0, other, ci))
    job = sim_state.load_state(node_root)["holders"][0]["pid"]
    results = play(tmp_path, collections_root, node_root, ["gpuops.remediation.gpu_holders_info: {gpus: [0]}"] + narrowed_kills(["0:3", "0:5"])
                   + ["gpuops.remediation.gpu_mig_recreate: {gpus: [\"0:5\"]}\n      ignore_errors: true"],
                   ["info", "plan3", "real3", "plan5", "real5", "recreate"])
    seen = [h for h in results["info"]["holders"] if h["pid"] == job][0]
    assert [(i["gpu_instance_id"], i["seen_by"]) for i in seen["mig_instances"]] == [(3, ["nvml"]), (5, ["nvidia-caps"])]
    for name, other in (("plan3", "0:5"), ("real3", "0:5"), ("plan5", "0:3"), ("real5", "0:3")):
        assert refused_beyond(results[name], name, job)["outside"].startswith("MIG instance %s" % other), name
    assert results["recreate"]["instances"] == [] and "held by pid %d" % job in results["recreate"]["refused"][0]["why"]
    assert os.path.exists("/proc/%d" % job)
