#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_watch: watch a Linux GPU node across scheduled runs, and write its metrics for Prometheus."""

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_watch
short_description: Watch a Linux GPU node across scheduled runs, and write its metrics for Prometheus
version_added: 1.0.0
description:
  - Samples the node O(samples) times, O(interval) seconds apart, each sample a snapshot as
    M(gpuops.remediation.gpu_holders_info) takes it (the same probes, ghost memory and GPU states).
  - Keeps a small state file per node (O(state_path)) so that conditions are judged across runs, for a job
    scheduled every few minutes - memory used above O(high_usage_percent) for O(high_usage_minutes), ghost memory
    above O(ghost_threshold_mib) in O(ghost_samples) samples in a row, Xid events new since the last run.
  - Also finds a driver recovery action other than V(none), and GPU probes (NVML, nvidia-smi) that timed out or
    failed, which never read as an idle GPU.
  - Writes the node's metrics in the Prometheus text format for node_exporter's textfile collector
    (O(metrics_path)), to a temporary name in the same directory renamed over the old file.
  - A corrupt or unreadable state file is reported in RV(state_problem) and replaced; its streaks start over.
  - A state file older than O(state_max_age_minutes) says nothing about the time since it was written - its
    streaks start over (RV(state_restarted)).
  - Keeps the fingerprints of the findings it made (active) in the state file, and returns in RV(resolved) those
    active after the previous run that this run no longer makes, so that a receiver can close them. A replaced or
    restarted state knows of no active finding - nothing is resolved then.
  - Probes the node lock that the acting modules hold while they kill, reset or reload (without waiting, and without
    keeping it) just before and just after each snapshot. A sample taken while another run held it is marked
    (RV(remediation_in_progress)) - it raises no V(unresponsive) finding (a GPU being reset or a driver being
    reloaded does not answer, and a GPU may fall off the bus for the moment), and it neither lengthens nor ends a
    ghost memory streak (memory that a process being killed has not yet given back is no ghost, and memory that a
    reset under way has not yet freed is no proof that the ghost is gone). Its high usage still counts, and an
    V(unresponsive) finding active before stays active rather than resolved.
author:
  - gpuops maintainers (@gpuops)
extends_documentation_fragment:
  - gpuops.remediation.attributes
  - gpuops.remediation.attributes.LINUX_GPU
  - gpuops.remediation.snapshot
attributes:
  check_mode:
    support: full
    details:
      - Takes the samples and judges them, and writes neither the state file nor the metrics file.
  diff_mode:
    support: none
options:
  samples:
    description: How many samples to take in this run (at least 1).
    type: int
    default: 3
  interval:
    description:
      - Seconds between two samples of this run (0 or more).
      - The run's samples must span less than O(state_max_age_minutes) (O(samples) - 1 intervals).
    type: float
    default: 10.0
  state_path:
    description:
      - The watch's state file on the node (JSON). Defaults to C(/var/lib/gpuops/watch_state.json) (under the
        simulated root on a simulated node). A lock file C(<state_path>.lock) beside it keeps two runs from
        updating it at once.
    type: path
  metrics_path:
    description:
      - The Prometheus text file to write, in node_exporter's textfile collector directory (its
        C(--collector.textfile.directory)). Defaults to C(/var/lib/node_exporter/textfile_collector/gpuops.prom)
        (under the simulated root on a simulated node).
    type: path
  write_metrics:
    description: Write O(metrics_path).
    type: bool
    default: true
  high_usage_percent:
    description: Memory used above this share of a GPU's total (percent, more than 0 and at most 100) counts as high usage.
    type: float
    default: 90.0
  high_usage_minutes:
    description: High usage that lasted this long, across runs, is a finding (V(high_memory_usage)); more than 0.
    type: float
    default: 10.0
  ghost_samples:
    description: Ghost memory in this many samples in a row, across runs, is a finding (V(ghost_memory)); at least 1.
    type: int
    default: 3
  state_max_age_minutes:
    description: A state file last written longer ago than this starts its streaks over; more than 0.
    type: float
    default: 30.0
  lock_timeout:
    description: Seconds to wait for another run of the watch on this node to finish with the state file.
    type: float
    default: 30.0
  journal_path:
    description:
      - The journal the remediation modules write on the node, read for the last rung the ladder took and for the
        resets and reloads that answered earlier kernel log evidence. Defaults to C(/var/lib/gpuops/journal.jsonl).
    type: path
  host:
    description:
      - The name of the node in the findings' fingerprints; the role passes C(inventory_hostname). Defaults to the
        node's host name.
    type: str
  remediate_on:
    description:
      - The kinds of finding that ask for the ladder; RV(remediation) says whether any was made and on which GPUs.
      - V(high_memory_usage) is left out by default, since the ladder would end a running job on a merely busy GPU.
    type: list
    elements: str
    choices: [high_memory_usage, ghost_memory, xid, recovery_action, unresponsive]
    default: [ghost_memory, recovery_action]
notes:
  - The state and metrics files are the watch's own bookkeeping, rewritten on every run; the module reports
    C(changed=false) and changes nothing else on the node.
seealso:
  - module: gpuops.remediation.gpu_holders_info
"""

EXAMPLES = r"""
- name: Watch the node (scheduled every 10 minutes)
  gpuops.remediation.gpu_watch:
    samples: 3
    interval: 10
    host: "{{ inventory_hostname }}"
  register: watch

- name: Say what crossed a threshold
  ansible.builtin.debug:
    msg: "{{ watch.findings | map(attribute='message') | list }}"
"""

RETURN = r"""
findings:
  description:
    - What crossed a threshold, one entry per GPU and kind. Kinds - V(high_memory_usage), V(ghost_memory), V(xid)
      (new since the last run), V(recovery_action), V(unresponsive) (the GPU probe timed out or failed).
    - C(gpu) is the GPU's stable key (its UUID, else its bus id, else C(index:<n>); V(node) when the probe named no GPU
      and the state knows none), the same whatever the probe could read of the GPU this time - a GPU known to the state
      file keeps its key, UUID and bus id when it is read only by index (a hung probe's device node) or by bus id (a
      GPU lost to the driver),
      C(fingerprint) the sha256 of O(host), C(gpu) and C(kind), the same run after run.
  returned: always
  type: list
  elements: dict
  sample: [{kind: ghost_memory, gpu: GPU-5e1c0000-0000-4000-8000-000000000000, gpu_index: 0, samples: 4, ghost_mib: 3072,
            message: "GPU 0 (GPU-5e1c...) has had ghost memory ...", fingerprint: 3f2a...}]
held:
  description:
    - The findings active after the previous run, of a kind read from a GPU's memory (V(high_memory_usage),
      V(ghost_memory), V(recovery_action)), on a GPU this run could not read (its probe timed out or failed, or the GPU
      is lost to the driver) - kept active, neither made again nor resolved, C(held=true), with the fields of
      RV(resolved). Their C(gpuops_gpu_finding) series stays in the metrics, and the role posts them as still firing.
  returned: always
  type: list
  elements: dict
removed_temporary_files:
  description:
    - Temporary files of the state and metrics files (C(.<name>.XXXXXXXX) beside them) that a killed run left, removed
      under the state file's lock before this run wrote its own; empty in check mode.
  returned: always
  type: list
  elements: str
resolved:
  description:
    - The findings active after the previous run (made by it, or kept active by it) that this run no longer makes -
      C(fingerprint), C(kind), C(gpu), C(gpu_index), C(gpu_uuid), C(pci_bus_id), as when they fired.
    - Empty when the state was replaced or restarted (nothing known), and for an V(unresponsive) finding while a
      remediation is in progress (kept active instead).
  returned: always
  type: list
  elements: dict
  sample: [{kind: xid, gpu: GPU-5e1c0000-0000-4000-8000-000000000000, gpu_index: 1, gpu_uuid: GPU-5e1c0000-0000-4000-8000-000000000000,
            pci_bus_id: "00000000:19:00.0", fingerprint: 3f2a...}]
remediation_in_progress:
  description: Whether another run held the node lock (the ladder at work) while any sample of this run was taken.
  returned: always
  type: bool
remediation_holder:
  description:
    - The holder of the node lock in the latest such sample, as it wrote itself into the lock file - C(pid),
      C(start_time), C(acquired), and C(description) (the pid, its command and start time); null when none.
  returned: always
  type: dict
  sample: {"pid": 4242, "start_time": 123456, "acquired": "2026-12-01T16:05:00Z", "description": "pid 4242 (python3, start time 123456)"}
alert:
  description:
    - What the role posts to the webhook, as Alertmanager's webhook says it - C(status) (V(firing) while any finding is
      made or held, V(resolved) otherwise), C(alerts) (the findings and the held ones, each with C(status=firing), then
      the resolved ones with C(status=resolved)), C(send) (whether there is any alert to post) and C(lines) (the
      message of each finding, or one line saying nothing crossed a threshold).
  returned: always
  type: dict
  sample: {"status": "resolved", "alerts": [{"kind": "xid", "gpu_index": 1, "fingerprint": "3f2a...", "status": "resolved"}],
           "send": true, "lines": ["nothing crossed a threshold"]}
crossed:
  description: Whether any finding was made.
  returned: always
  type: bool
remediation:
  description:
    - Whether a finding of a kind in O(remediate_on) asks for the ladder (C(needed)), and the GPUs to narrow it to
      (C(gpus), indexes as strings); C(gpus) null means every GPU (a finding that names none, such as a probe
      that failed for the whole node), an empty list none.
  returned: always
  type: dict
  sample: {"needed": true, "gpus": ["0", "2"]}
samples:
  description:
    - The samples of this run, oldest first - C(epoch), C(probe_ok), C(timed_out), C(error), C(backend),
      C(remediation_in_progress), C(remediation_holder), and per GPU its memory (MiB), holders and state.
  returned: always
  type: list
  elements: dict
new_xid_events:
  description: The Xid events of the kernel log that no earlier run saw (C(xid), C(gpu_index), C(pci_bus_id), C(time), C(line)).
  returned: always
  type: list
  elements: dict
xid_counts:
  description: Xid events counted by the watch since its state file was created, per GPU index (or bus id) and Xid code.
  returned: always
  type: dict
  sample: {"0": {"79": 1}}
last_remediation:
  description: The latest action of the ladder on this node that ended well (C(rung), C(action), C(time), C(epoch)), from its journal; null when none.
  returned: always
  type: dict
journal_error:
  description: Why the node's journal could not be read for the last remediation, or null (a missing journal is no error).
  returned: always
  type: str
verdict:
  description: The verdict of the last sample (the rung the evidence needs, and why), as gpu_holders_info gives it.
  returned: always
  type: dict
state_path:
  description: The state file.
  returned: always
  type: str
state_problem:
  description: Why the state file could not be used (unreadable, corrupt), or null; it was replaced (not in check mode).
  returned: always
  type: str
state_restarted:
  description: Whether the streaks started over (no state, a replaced one, or one older than O(state_max_age_minutes)).
  returned: always
  type: bool
metrics_path:
  description: The metrics file written; null when none was (O(write_metrics=false), check mode).
  returned: always
  type: str
metrics:
  description: The metrics text, as written (or as it would be written in check mode).
  returned: always
  type: str
"""

import os
import platform
import time

from ansible_collections.gpuops.remediation.plugins.module_utils._payload_imports import compile_each_file_once

compile_each_file_once()  # before the collection's other imports: zipimport compiles each of them once

from ansible_collections.gpuops.remediation.plugins.module_utils._safe_files import UnsafePath, path_problem, remove_stale_temporaries, write_atomic
from ansible_collections.gpuops.remediation.plugins.module_utils._lock import LockTimeout, NodeLock
from ansible_collections.gpuops.remediation.plugins.module_utils._module import GpuModule
from ansible_collections.gpuops.remediation.plugins.module_utils._node import current_layout
from ansible_collections.gpuops.remediation.plugins.module_utils._argument_specs import SNAPSHOT_ARGUMENT_SPEC, validate_snapshot_params
from ansible_collections.gpuops.remediation.plugins.module_utils._snapshot import (
    SnapshotOptions, snapshot_or_fail,
)
from ansible_collections.gpuops.remediation.plugins.module_utils.watch._watch import (
    DEFAULT_STATE_FILE, FINDING_KINDS, Thresholds, alert_of, dump_state, judge, load_state, probe_node_lock, read_last_remediation, remediation_for, sample_of,
)
from ansible_collections.gpuops.remediation.plugins.module_utils.watch._watch_metrics import metric_series, render
from ansible_collections.gpuops.remediation.plugins.module_utils.watch._watch_ranges import RANGED_OPTIONS, out_of_range

STATE_FILE = DEFAULT_STATE_FILE
METRICS_FILE = os.path.join("var", "lib", "node_exporter", "textfile_collector", "gpuops.prom")

ARGUMENT_SPEC = dict(
    SNAPSHOT_ARGUMENT_SPEC,
    samples=dict(type="int", default=3),
    interval=dict(type="float", default=10.0),
    state_path=dict(type="path"),
    metrics_path=dict(type="path"),
    write_metrics=dict(type="bool", default=True),
    high_usage_percent=dict(type="float", default=90.0),
    high_usage_minutes=dict(type="float", default=10.0),
    ghost_samples=dict(type="int", default=3),
    state_max_age_minutes=dict(type="float", default=30.0),
    lock_timeout=dict(type="float", default=30.0),
    journal_path=dict(type="path"),
    host=dict(type="str"),
    remediate_on=dict(type="list", elements="str", choices=list(FINDING_KINDS), default=["ghost_memory", "recovery_action"]),
)


def validate(module):
    validate_snapshot_params(module)
    for option in RANGED_OPTIONS:
        must_be = out_of_range(option, module.params[option])
        if must_be:
            module.fail_json(msg="%s must be %s, got %r" % (option, must_be, module.params[option]))
    # A run whose samples outlast the state file's max age judges nothing the state could carry on (and sleeps on).
    params = module.params
    span = (params["samples"] - 1) * params["interval"]
    if span >= params["state_max_age_minutes"] * 60:
        module.fail_json(msg="samples=%d and interval=%r span %g s, not less than the state lasts (state_max_age_minutes=%r): "
                         "take fewer samples or a shorter interval" % (params["samples"], params["interval"], span,
                                                                       params["state_max_age_minutes"]))


def node_path(layout, given, default):
    """The given path, or the default one under the node's root (the simulated root on a simulated node)."""
    return given or os.path.join(layout.sim_root or "/", default)


def take_samples(module, layout, options):
    """(samples, last snapshot): params samples snapshots, interval seconds apart, each marked with the holder of the
    node lock when the ladder held it just before or just after the snapshot (a reset may begin or end meanwhile)."""
    samples, snapshot = [], None
    for number in range(module.params["samples"]):
        if number:
            time.sleep(module.params["interval"])
        holder = probe_node_lock(layout.lock_file)
        snapshot = snapshot_or_fail(module, layout, options)
        holder = holder or probe_node_lock(layout.lock_file)
        samples.append(sample_of(snapshot, time.time(), holder))
    return samples, snapshot


def thresholds_of(params):
    return Thresholds(high_usage_percent=params["high_usage_percent"], high_usage_minutes=params["high_usage_minutes"],
                      ghost_threshold_mib=params["ghost_threshold_mib"], ghost_samples=params["ghost_samples"],
                      state_max_age_minutes=params["state_max_age_minutes"])


def check_paths(module, paths):
    """Check mode refuses what the run would: a state path (and its lock) or metrics path through a link or in a
    directory another user can write (_safe_files.path_problem); it makes nothing."""
    # In the order the run meets them: the lock, the state, the metrics.
    problems = [path_problem(paths["state"] + ".lock", "state_path", holds_trusted=True),
                path_problem(paths["state"], "state_path", holds_trusted=True)]
    if module.params["write_metrics"]:
        problems.append(path_problem(paths["metrics"], "metrics_path"))
    problem = next((problem for problem in problems if problem), None)
    if problem:
        raise UnsafePath(problem)


def judge_and_record(module, paths, samples, snapshot):
    """Judge the samples over the state file and, unless in check mode, write the new state and the metrics."""
    params = module.params
    state, problem = load_state(paths["state"])
    now = time.time()
    host = params["host"] or platform.node()
    judged = judge(state, samples, snapshot["xid_events"], thresholds_of(params), now, host)
    remediation, journal_error = read_last_remediation(paths["journal"])
    in_progress = _holder_of(samples)
    metrics = render(metric_series(judged.samples[-1], judged.state, judged.findings, judged.fresh_xids, remediation, now,
                                   remediation_in_progress=in_progress is not None, held=judged.held))
    written, removed = None, []
    if not module.check_mode:
        # Under the state file's lock, which every writer of these files holds: a temporary file left there is a
        # killed run's, never a live one's.
        removed = remove_stale_temporaries(paths["state"], "state_path")
        if params["write_metrics"]:
            removed += remove_stale_temporaries(paths["metrics"], "metrics_path")
        write_atomic(paths["state"], dump_state(judged.state), mode=0o640, option="state_path", holds_trusted=True)
        if params["write_metrics"]:
            write_atomic(paths["metrics"], metrics, mode=0o644, option="metrics_path", dir_mode=0o755)
            written = paths["metrics"]
    return dict(findings=judged.findings, resolved=judged.resolved, held=judged.held, crossed=bool(judged.findings),
                alert=alert_of(judged.findings, judged.held, judged.resolved),
                samples=judged.samples, removed_temporary_files=removed,
                remediation_in_progress=in_progress is not None, remediation_holder=in_progress,
                remediation=remediation_for(judged.findings, params["remediate_on"]),
                new_xid_events=[_brief(event) for event in judged.fresh_xids],
                xid_counts=judged.state["xid"]["counts"], last_remediation=remediation, journal_error=journal_error,
                state_problem=problem, state_restarted=judged.restarted or problem is not None, metrics_path=written, metrics=metrics)


def _holder_of(samples):
    """The holder of the node lock in the latest sample taken while the ladder held it, or None."""
    return next((sample["remediation_holder"] for sample in reversed(samples) if sample["remediation_in_progress"]), None)


def _brief(event):
    return dict((name, event.get(name)) for name in ("xid", "gpu_index", "pci_bus_id", "time", "time_epoch", "line"))


def main():
    module = GpuModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    validate(module)
    layout = current_layout()
    paths = {"state": node_path(layout, module.params["state_path"], STATE_FILE),
             "metrics": node_path(layout, module.params["metrics_path"], METRICS_FILE),
             "journal": module.params["journal_path"] or layout.journal_file}
    options = SnapshotOptions.from_params(module.params)
    samples, snapshot = take_samples(module, layout, options)
    try:
        if module.check_mode:
            check_paths(module, paths)
            result = judge_and_record(module, paths, samples, snapshot)
        else:
            with NodeLock(paths["state"] + ".lock", module.params["lock_timeout"], option="state_path"):
                result = judge_and_record(module, paths, samples, snapshot)
    except UnsafePath as exc:
        module.fail_json(msg=str(exc), samples=samples)
    except LockTimeout as exc:
        module.fail_json(msg="another run of the watch holds the state file: %s" % exc, samples=samples)
    except (IOError, OSError) as exc:
        module.fail_json(msg="cannot write the watch's files: %s" % exc, samples=samples)
    module.exit_json(changed=False, verdict=snapshot["verdict"], state_path=paths["state"], **result)


if __name__ == "__main__":
    main()
