"""A fleet's run report with every kind of host, from outcomes and snapshots of the shapes the roles leave
(a Linux node fixed by reset, a Windows workstation fixed by wsl whose holder has no figure under WDDM, a failed node
with a failed health check, a refused node, an unreachable one, a node without GPUs), and hostile names."""
from ansible_collections.gpuops.remediation.plugins.plugin_utils.report._run_report import build_report, host_entry

HOSTILE = "<script>document.body.dataset.pwned='1'</script>\"'><img src=x onerror=alert(1)>"


def _gpu(index, name, total, used, ghost, reserved=0, bus="00000000:18:00.0"):
    return {"index": index, "name": name, "pci_bus_id": bus, "memory_total_mib": total, "memory_used_mib": used,
            "unattributed_mib": ghost, "memory_reserved_mib": reserved, "state": "stuck" if ghost else "busy" if used else "ok"}


def _walk(gpus, after, rung, status, seconds, health=None, holders=(), msg=""):
    """A ladder outcome (the shape of _ladder_outcome.outcome) and the snapshot the run took before it."""
    outcome_gpus = [{"index": g["index"], "name": g["name"], "pci_bus_id": g["pci_bus_id"], "state_before": g["state"],
                     "state_after": "ok" if status == "fixed" else g["state"], "memory_used_mib_before": g["memory_used_mib"],
                     "memory_used_mib_after": used_after, "ghost_mib_before": g["unattributed_mib"],
                     "freed_mib": g["memory_used_mib"] - used_after} for g, used_after in zip(gpus, after)]
    outcome = {"status": status, "msg": msg, "check_mode": False, "entry_rung": rung, "fixed_by": rung if status == "fixed" else None,
               "rungs_tried": [{"rung": rung, "changed": status == "fixed", "failed": status == "failed", "msg": msg if status == "failed" else "",
                                "plan": ["%s GPU %d" % (rung, g["index"]) for g in gpus]}],
               "held_by": list(holders), "gpus": outcome_gpus, "memory_freed_mib": sum(g["freed_mib"] for g in outcome_gpus),
               "seconds": seconds, "reasons": ["GPU %d holds %d MiB of ghost memory" % (g["index"], g["unattributed_mib"] or 0) for g in gpus]}
    if health:
        outcome["health_check"] = health
    return outcome, {"gpus": gpus, "holders": [], "verdict": {"rung": rung, "reasons": []}}


HOSTILE_NAMES = {"host": HOSTILE, "gpu": HOSTILE, "process": HOSTILE, "user": HOSTILE}
PLAIN_NAMES = {"host": "gpu-node-03", "gpu": "NVIDIA H100 80GB HBM3", "process": "pt_main_thread", "user": "bob"}


def fleet_entries(odd):
    """`odd`: the names of the failed host, its GPU, its holder and the holder's user."""
    h100 = "NVIDIA H100 80GB HBM3"
    fixed, fixed_snap = _walk([_gpu(0, h100, 81559, 24576, 24576, 512), _gpu(1, h100, 81559, 12288, 0, 512, "00000000:2A:00.0")],
                              [0, 12288], "reset", "fixed", 4.2, msg="the reset rung got the memory back (24576 MiB)",
                              health={"tool": "dcgmi", "level": 1, "result": "pass", "reason": "",
                                      "tests": [{"name": "Deployment", "result": "Pass"}, {"name": "PCIe", "result": "Pass"}]},
                              holders=[{"pid": 4242, "name": "python3", "user": "alice", "class": "compute", "gpus": [1], "used_mib": 12288}])
    windows, windows_snap = _walk([_gpu(0, "NVIDIA GeForce RTX 4090", 24564, 9344, None, 0, "00000000:0C:00.0")], [128], "wsl", "fixed", 2.7,
                                  msg="the wsl rung got the memory back (9216 MiB)",
                                  holders=[{"pid": 1028, "name": "dwm.exe", "user": "Window Manager\\DWM-1", "class": "graphics_session",
                                            "gpus": [0], "used_mib": 128},
                                           {"pid": 1036, "name": "vmmemWSL", "user": None, "class": "wsl_vm", "gpus": [0], "used_mib": None}])
    failed, failed_snap = _walk([_gpu(0, odd["gpu"], 81559, 40960, 8192)], [40960], "reset", "failed", 31.0,
                                msg="reset failed: GPU 0 is in use by " + odd["process"],
                                health={"tool": "dcgmi", "level": 1, "result": "fail", "reason": "the GPU stays drained",
                                        "tests": [{"name": "Deployment", "result": "Pass"}, {"name": "Memory", "result": "Fail"}]},
                                holders=[{"pid": 777, "name": odd["process"], "user": odd["user"], "class": "unkillable", "gpus": [0], "used_mib": 32768}])
    return [
        host_entry("gpu-node-07", fixed, fixed_snap),
        host_entry("ws12.corp", windows, windows_snap),
        host_entry(odd["host"], failed, failed_snap),
        host_entry("gpu-node-09", {"status": "clean", "msg": "no GPU memory held: nothing to do", "check_mode": False, "entry_rung": "none",
                                   "fixed_by": None, "rungs_tried": [], "held_by": [], "memory_freed_mib": 0, "seconds": 0.6,
                                   "gpus": [{"index": 0, "name": h100, "pci_bus_id": "00000000:18:00.0", "state_before": "ok",
                                             "state_after": "ok", "memory_used_mib_before": 0, "memory_used_mib_after": 0,
                                             "ghost_mib_before": 0, "freed_mib": 0}]},
                   {"gpus": [_gpu(0, h100, 81559, 0, 0, 512)]}),
        host_entry("gpu-node-11", refusal="fleet guard: 3 of 12 hosts would need a destructive rung, more than the 25% allowed"),
        host_entry("gpu-node-12"),
        host_entry("login-01", {"status": "clean", "msg": "no GPU memory held: nothing to do", "check_mode": False, "entry_rung": "none",
                                "fixed_by": None, "rungs_tried": [], "held_by": [], "gpus": [], "memory_freed_mib": 0, "seconds": 0.3}),
    ]


def fleet_report(odd=None):
    """The fleet's report; hostile names by default, PLAIN_NAMES for the picture in docs/report.md."""
    odd = odd or HOSTILE_NAMES
    return build_report(fleet_entries(odd), "reset_gpu-20261201T140000Z", "reset_gpu", False, "2026-12-01T14:00:07Z",
                        ["gpu-node-07", odd["host"]])
