# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A Linux node's model for the walk's tests: its snapshots are judged by the real gpu_state() and verdict(), and a
module call changes it the way the module changes a node (gpu_kill ends the holders it is given, gpu_reset clears ghost
memory, the reload clears every GPU), or predicts in check mode. Any question asked of a real snapshot (the walk's, the
fleet guard's, the breaker's) can be asked of Node.snapshot()."""

from __future__ import annotations

import copy

from ansible_collections.gpuops.remediation.plugins.module_utils.probes._dcgm import health_check, not_installed
from ansible_collections.gpuops.remediation.plugins.module_utils._verdict import gpu_state, verdict
from ansible_collections.gpuops.remediation.plugins.plugin_utils.ladder._ladder_options import INSPECT_MODULE

THRESHOLD = 256
# The scope of a snapshot taken with the walk's default options.
SCOPE = {"gpus": None, "ghost_threshold_mib": THRESHOLD, "kernel_log_source": "auto", "kernel_log_path": None, "kernel_log_window": None}
PROBES = {"gpu": {"ok": True, "timed_out": False, "error": None}, "kernel_log": {"source": "none"}}


class Node:
    """GPUs with used and ghost memory, and holders; every module call is recorded."""

    def __init__(self, gpus, holders=(), lost=False, survivors=(), reset_fails=False, reload_fails=False, dcgm=None):
        self.gpus = [dict(index=i, pci_bus_id="00000000:%02X:00.0" % (0x18 + i), **gpu) for i, gpu in enumerate(gpus)]
        for gpu in self.gpus:
            gpu.setdefault("lost", lost)
        self.holders = [dict(h) for h in holders]
        self.survivors = set(survivors)
        self.reset_fails = reset_fails
        self.reload_fails = reload_fails
        self.dcgm = dcgm  # what dcgmi diag finds: None (not installed), "pass" or "fail"
        self.calls = []
        self.inspect_fails = False
        self.taken_epoch = 100  # the walk's clock starts there

    def snapshot(self):
        holders = copy.deepcopy(self.holders)
        gpus = []
        for gpu in self.gpus:
            mine = sum(h["used_mib"] for h in holders if gpu["index"] in h["gpus"])
            entry = {"index": gpu["index"], "pci_bus_id": gpu["pci_bus_id"], "lost": gpu["lost"],
                     "memory_used_mib": mine + gpu["ghost"], "unattributed_mib": gpu["ghost"], "recovery_action": None}
            entry["state"] = gpu_state(entry, holders, THRESHOLD, PROBES["gpu"])
            gpus.append(entry)
        snap = {"gpus": gpus, "holders": holders, "xid_events": [], "reset_blockers": [], "probes": copy.deepcopy(PROBES),
                "scope": dict(SCOPE, taken_epoch=self.taken_epoch)}
        snap["verdict"] = verdict(snap, THRESHOLD)
        return snap

    def execute(self, module, args, check_mode):
        self.calls.append((module.rsplit(".", 1)[1], dict(args)))
        if module == INSPECT_MODULE:
            return {"failed": True, "msg": "probe failed"} if self.inspect_fails else self.snapshot()
        return getattr(self, "_" + module.rsplit(".", 1)[1])(args, check_mode)

    def _end(self, pids, check_mode):
        ended = [h for h in self.holders if h["pid"] in pids and h["pid"] not in self.survivors]
        if not check_mode:
            self.holders = [h for h in self.holders if h not in ended]
        return [{"pid": h["pid"], "name": h["name"], "signals": ["TERM"]} for h in ended]

    def _after(self, result, check_mode):
        if not check_mode:
            result["snapshot_after"] = self.snapshot()
        return result

    def _gpu_kill(self, args, check_mode):
        signalled = self._end(set(h["pid"] for h in args["holders"]), check_mode)
        left = [{"pid": pid, "name": "survivor", "reason": "still running after KILL"} for pid in self.survivors
                if pid in set(h["pid"] for h in args["holders"])]
        result = {"changed": bool(signalled), "signalled": signalled, "left_alone": left, "zombies": [], "containers": []}
        if left:
            result.update(failed=True, msg="gpu_kill failed: pid %s survived" % left[0]["pid"])
        return self._after(result, check_mode)

    def _gpu_reset(self, args, check_mode):
        assert args["kill_holders"] is True
        if self.reset_fails:
            return self._after({"failed": True, "changed": False, "msg": "gpu_reset failed: GPU 0: Not Supported", "gpus": []}, check_mode)
        to_reset = [gpu for gpu in self.gpus if gpu["ghost"] > THRESHOLD and not gpu["lost"]]
        signalled = self._end(set(h["pid"] for h in self.holders if set(h["gpus"]) & set(g["index"] for g in to_reset)), check_mode)
        if not check_mode:
            for gpu in to_reset:
                gpu["ghost"] = 0
        result = {"changed": bool(to_reset), "killed": {"signalled": signalled},
                  "gpus": [{"index": g["index"], "pci_bus_id": g["pci_bus_id"], "reset": True, "reason": "ghost memory"} for g in to_reset],
                  "services_stopped": ["nvidia-persistenced.service"] if to_reset else []}
        return self._after(result, check_mode)

    def _nvidia_driver_reload(self, args, check_mode):
        assert args["kill_holders"] is True and args["grace"] == 10.0
        if self.reload_fails:
            return {"failed": True, "changed": False, "msg": "nvidia_driver_reload failed: modprobe -r nvidia: in use"}
        if not check_mode:
            for gpu in self.gpus:
                gpu["ghost"] = 0
        return self._after({"changed": True, "plan": ["modprobe -r nvidia", "modprobe nvidia"], "killed": {}}, check_mode)

    def _gpu_graphics_restart(self, args, check_mode):
        assert not set(args) & {"grace", "signals", "kill_holders"}  # it signals nothing itself
        return self._after({"changed": True, "plan": ["systemctl isolate multi-user.target", "systemctl isolate graphical.target"]},
                           check_mode)

    def _gpu_health_check(self, args, check_mode):
        assert not check_mode  # in check mode the walk only plans the gate
        level = args["level"]
        if self.dcgm is None:
            return {"changed": False, "health_check": not_installed(level)}
        words = {"pass": "Pass", "fail": "Fail"}
        reason = "dcgmi diag -r %d %sed: software %s" % (level, self.dcgm, words[self.dcgm])
        return {"changed": False, "health_check": health_check(level, self.dcgm, reason, [{"name": "software", "result": words[self.dcgm]}])}


ORPHAN = {"pid": 4242, "start_time": 123456, "name": "orphan-worker", "user": "alice", "class": "compute", "state": "S",
          "gpus": [0], "used_mib": 4096}
DAEMON = {"pid": 77, "start_time": 99, "name": "nvidia-persistenced", "user": "root", "class": "gpu_daemon", "state": "S",
          "gpus": [0], "used_mib": 0}
# A working program: its own process group leader, started by a live unit (_left_behind.holder_standing's answer).
BUSY = {"pid": 5353, "start_time": 223344, "name": "llm-serve", "user": "bob", "class": "busy", "state": "S", "gpus": [0],
        "used_mib": 8192, "standing": {"left_behind": False, "why": "its unit llm-serve.service is active"}}
