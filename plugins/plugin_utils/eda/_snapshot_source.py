# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The gpu_snapshot event source's decisions: the conditions of a node's snapshot or of the watch's state file (ghost
memory, an unresponsive GPU or probe), whether that file may be believed, and the conditions that lasted long enough
to be an event.
"""

from __future__ import annotations

from ansible_collections.gpuops.remediation.plugins.module_utils import _safe_files
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._kernel_log import device_key
from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda._event_selection import selection_fields


def snapshot_conditions(snapshot, ghost_threshold_mib):
    """[{"type": "ghost_memory"|"unresponsive", "gpu", "gpu_index", "pci_bus_id", "ghost_mib", "message"}] of a
    gpu_holders_info snapshot: ghost memory above the threshold, a GPU the driver did not answer for or lost, or the
    whole probe timing out (gpu None: the node)."""
    found = []
    probe = (snapshot.get("probes") or {}).get("gpu") or {}
    for gpu in snapshot.get("gpus") or []:
        ghost = gpu.get("unattributed_mib")
        where = {"gpu": gpu.get("pci_bus_id"), "gpu_index": gpu.get("index"), "pci_bus_id": gpu.get("pci_bus_id")}
        if ghost is not None and ghost > ghost_threshold_mib:
            found.append(dict(where, type="ghost_memory", ghost_mib=ghost,
                              message="GPU %s has %s MiB in use that no live process accounts for" % (gpu.get("index"), ghost)))
        if gpu.get("state") in ("unresponsive", "lost"):
            found.append(dict(where, type="unresponsive", ghost_mib=None,
                              message="GPU %s is %s" % (gpu.get("index"), gpu.get("state"))))
    if not probe.get("ok", True) and probe.get("timed_out") and not snapshot.get("gpus"):
        found.append({"type": "unresponsive", "gpu": None, "gpu_index": None, "pci_bus_id": None, "ghost_mib": None,
                      "message": "the GPU probe timed out: %s" % probe.get("error")})
    return found


def hung_probe_condition(message):
    """The condition of a node whose probe (gpu_holders_info run by gpu_snapshot) did not answer by its deadline: the
    node is unresponsive (gpu None), as when the GPU probe inside it times out; never hidden as "nothing found"."""
    return {"type": "unresponsive", "gpu": None, "gpu_index": None, "pci_bus_id": None, "ghost_mib": None, "message": message}


def state_conditions(state, ghost_threshold_mib):
    """The same conditions read from the gpu_watch state file (its format: docs/watch.md): a GPU whose last sample
    had ghost memory above the threshold, and the watch's active unresponsive findings."""
    found = []
    for track in (state.get("gpus") or {}).values():
        ghost = track.get("last_ghost_mib")
        identity = track.get("identity") or {}
        if ghost is not None and ghost > ghost_threshold_mib:
            found.append({"type": "ghost_memory", "gpu": identity.get("pci_bus_id"), "gpu_index": identity.get("index"),
                          "pci_bus_id": identity.get("pci_bus_id"), "ghost_mib": ghost,
                          "message": "GPU %s had %s MiB of ghost memory in the watch's last sample" % (identity.get("index"), ghost)})
    for finding in (state.get("active") or {}).values():
        if finding.get("kind") == "unresponsive":
            found.append({"type": "unresponsive", "gpu": finding.get("pci_bus_id"), "gpu_index": finding.get("gpu_index"),
                          "pci_bus_id": finding.get("pci_bus_id"), "ghost_mib": None,
                          "message": "the watch finds GPU %s unresponsive" % finding.get("gpu_index")})
    return found


def state_file_problem(path):
    """Why the watch's state file at `path` is not to be believed by a source, or None (a missing one is None: nothing
    known). Whoever can write it - or replace it in its directory - can make up ghost memory, and with it a GPU reset
    (the jobs on the GPU killed): it must be reached without a link, root's or this user's, and neither it nor any
    directory above it writable by anyone else (_safe_files.path_problem)."""
    return _safe_files.path_problem(path, "option state_path", holds_trusted=True)


class Lasting:
    """Conditions of one host that lasted at least `duration` seconds (seen in every poll since they started);
    each made an event once per throttle window."""

    def __init__(self, host, duration, throttle):
        self.host = host
        self.duration = duration
        self.throttle = throttle
        self.since = {}

    def feed(self, conditions, now):
        seen = {}
        for condition in conditions:
            key = (self.host, device_key(condition["gpu"]) if condition.get("gpu") else None, condition["type"])
            seen[key] = condition
        self.since = dict((key, self.since.get(key, now)) for key in seen)
        events = []
        for key, condition in sorted(seen.items(), key=lambda item: str(item[0])):
            lasted = now - self.since[key]
            if lasted < self.duration or not self.throttle.allow(key, now):
                continue
            body = dict(condition, host=self.host, lasted_seconds=round(lasted, 1),
                        rung="reset" if condition["type"] == "ghost_memory" else "reboot")
            body.update(selection_fields(condition.get("gpu")))
            events.append({"gpuops": body, "meta": {"hosts": self.host}})
        return events
