# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The watch's metrics in the Prometheus text format (0.0.4), for node_exporter's textfile collector.

A failed probe never reads as an idle GPU: without an answer from the driver no memory gauge is written (absent,
not 0), gpuops_watch_probe_success is 0, and gpuops_watch_last_success_timestamp_seconds stays at the last answer.
"""

from __future__ import annotations

from ansible_collections.gpuops.remediation.plugins.module_utils.watch._watch import xid_gpu_key

MIB = 1024 * 1024

# name: (type, help). The order is the file's.
FAMILIES = (
    ("gpuops_watch_probe_success", "gauge", "1 when the GPU probe (NVML or nvidia-smi) answered in the watch's last sample, else 0."),
    ("gpuops_watch_last_success_timestamp_seconds", "gauge", "When the GPU probe last answered (seconds since the epoch)."),
    ("gpuops_watch_last_run_timestamp_seconds", "gauge", "When the watch last ran on this node (seconds since the epoch)."),
    ("gpuops_watch_remediation_in_progress", "gauge",
     "1 when another run held the node lock (the ladder at work) during the watch's last run, else 0."),
    ("gpuops_gpu_memory_total_bytes", "gauge", "GPU memory, total."),
    ("gpuops_gpu_memory_used_bytes", "gauge", "GPU memory in use."),
    ("gpuops_gpu_memory_attributed_bytes", "gauge", "GPU memory the processes the driver lists account for."),
    ("gpuops_gpu_memory_ghost_bytes", "gauge", "GPU memory in use that no live process accounts for (ghost memory)."),
    ("gpuops_gpu_holders", "gauge", "Processes that hold the GPU."),
    ("gpuops_gpu_ghost_samples", "gauge", "Samples in a row, across watch runs, with ghost memory above the threshold."),
    ("gpuops_gpu_finding", "gauge", "1 for each finding of the watch's last run, by kind."),
    ("gpuops_gpu_xid_events_total", "counter", "Xid events in the kernel log counted by the watch, by GPU and Xid code."),
    ("gpuops_gpu_xid_new_events", "gauge", "Xid events new since the watch's previous run, by GPU and Xid code."),
    ("gpuops_last_remediation_timestamp_seconds", "gauge", "When the ladder last acted on this node (its journal), by rung."),
)


def escape_label_value(value):
    """A label value as the text format writes it: backslash, double quote and line feed escaped."""
    return str(value).replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n")


def _labels(pairs):
    if not pairs:
        return ""
    return "{%s}" % ",".join('%s="%s"' % (name, escape_label_value("" if value is None else value)) for name, value in pairs)


def _number(value):
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    return repr(float(value))


def _gpu_labels(gpu):
    # UUID as dcgm-exporter writes it: `on(UUID)` joins the two exporters' series (docs/watch.md). Not its camelCase
    # modelName: promtool's lint refuses it, and the join brings it from dcgm-exporter's side (group_left).
    return [("gpu", gpu.get("index")), ("uuid", gpu.get("uuid")), ("name", gpu.get("name")), ("pci_bus_id", gpu.get("pci_bus_id")),
            ("UUID", gpu.get("uuid"))]


def _memory_series(gpu):
    series = []
    for family, field in (("gpuops_gpu_memory_total_bytes", "memory_total_mib"), ("gpuops_gpu_memory_used_bytes", "memory_used_mib"),
                          ("gpuops_gpu_memory_attributed_bytes", "attributed_mib"), ("gpuops_gpu_memory_ghost_bytes", "unattributed_mib")):
        if gpu.get(field) is not None:
            series.append((family, _gpu_labels(gpu), int(gpu[field]) * MIB))
    series.append(("gpuops_gpu_holders", _gpu_labels(gpu), int(gpu.get("holders") or 0)))
    return series


def metric_series(last_sample, state, findings, fresh_xids, remediation, now, remediation_in_progress=False, held=()):
    """[(family, labels, value)] of one watch run: last_sample is the run's last sample (sample_of), state the state
    it leaves, findings and fresh_xids what judge() found, remediation last_remediation() of the node's journal,
    remediation_in_progress whether the ladder held the node lock during the run, held the active findings on GPUs the
    run could not read (Judgement.held): their series stays, so that an alert on it neither resolves nor fires again."""
    probe_ok = bool(last_sample and last_sample["probe_ok"])
    series = [("gpuops_watch_probe_success", [], 1 if probe_ok else 0)]
    if state.get("last_success_epoch") is not None:
        series.append(("gpuops_watch_last_success_timestamp_seconds", [], float(state["last_success_epoch"])))
    series.append(("gpuops_watch_last_run_timestamp_seconds", [], float(now)))
    series.append(("gpuops_watch_remediation_in_progress", [], 1 if remediation_in_progress else 0))
    if probe_ok:
        # A GPU lost to the driver was not read: no gauge of its, so that it never reads as an idle GPU.
        for gpu in (gpu for gpu in last_sample["gpus"] if gpu.get("state") != "lost"):
            series.extend(_memory_series(gpu))
            track = state["gpus"].get(gpu["key"], {})
            series.append(("gpuops_gpu_ghost_samples", _gpu_labels(gpu), int(track.get("ghost_samples") or 0)))
    for finding in list(findings) + list(held):
        series.append(("gpuops_gpu_finding", [("kind", finding["kind"]), ("gpu", finding.get("gpu_index")),
                                              ("uuid", finding.get("gpu_uuid")),
                                              ("pci_bus_id", finding.get("pci_bus_id")), ("UUID", finding.get("gpu_uuid"))], 1))
    new_counts = {}
    for event in fresh_xids:
        key = (xid_gpu_key(event), str(event["xid"]))
        new_counts[key] = new_counts.get(key, 0) + 1
    for gpu_name in sorted((state.get("xid") or {}).get("counts", {})):
        for code, count in sorted(state["xid"]["counts"][gpu_name].items(), key=lambda item: int(item[0])):
            labels = [("gpu", gpu_name), ("xid", code)]
            series.append(("gpuops_gpu_xid_events_total", labels, int(count)))
            series.append(("gpuops_gpu_xid_new_events", labels, new_counts.get((gpu_name, code), 0)))
    if remediation:
        series.append(("gpuops_last_remediation_timestamp_seconds", [("rung", remediation["rung"])], float(remediation["epoch"])))
    return series


def render(series):
    """The text format: every family that has a series, with its HELP and TYPE lines, in FAMILIES order."""
    lines = []
    for name, kind, help_text in FAMILIES:
        mine = [(labels, value) for family, labels, value in series if family == name]
        if not mine:
            continue
        lines.append("# HELP %s %s" % (name, help_text))
        lines.append("# TYPE %s %s" % (name, kind))
        lines.extend("%s%s %s" % (name, _labels(labels), _number(value)) for labels, value in mine)
    return "\n".join(lines) + "\n"
