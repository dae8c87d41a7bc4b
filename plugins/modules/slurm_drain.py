#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: slurm_drain
short_description: Drain a Slurm node before a destructive rung, and resume it after, only if the drain is ours
version_added: 1.1.0
description:
  - With O(state=drained), drains the node with a reason that starts with O(marker) (followed by the run id and
    O(purpose)), unless it is drained already. Then, while jobs still run on it (Slurm state C(draining)), waits up
    to O(job_timeout) seconds for them to end (O(running_jobs=wait)) or fails naming them (O(running_jobs=refuse)),
    so that no GPU is reset under a running job. Succeeds once the node is C(drained).
  - With O(state=resumed), resumes the node only while its reason is still the one this module writes. A drain by
    someone else (another reason, set before the run or replacing ours during it, or one that only starts with
    O(marker)) is left alone, and RV(msg) says why.
  - Our drain is known by its reason alone (without slurmdbd only root can drain, so the user tells nothing), and the
    reason names the run. The drain of another gpuops run is resumed only once that run has ended and handed it on
    (O(state=released)), or has shown no life for O(stale_drain_after) seconds (its last line in the node journal,
    else the time Slurm recorded the drain). So a run interrupted after its drain leaves the node drained and a later
    run resumes it, while a run still waiting for its jobs keeps its drain.
  - With O(state=held), keeps the node out of service with a reason that names why (O(hold_reason)) and that no gpuops
    run resumes - the GPUs failed their health check after the memory came back, and a person must look at them. Our
    drain (this run's, or one another run left) takes the new reason; an undrained node is drained with it; a drain by
    someone else stays theirs.
  - Reads the node with C(sinfo) (C(%N), the node name, not C(%n), its host name; the whole reason, C(%E), not the
    20 characters of C(sinfo -R)), and its jobs with C(squeue). Slurm commands need their configuration
    (C(SLURM_CONF) or C(/etc/slurm)); pass the environment to the task.
  - Writes the drain and the resume to the node journal, as the other acting modules do.
author:
  - gpuops maintainers (@gpuops)
extends_documentation_fragment:
  - gpuops.remediation.attributes
  - gpuops.remediation.attributes.ACTION_MODULE
options:
  node:
    description: The Slurm node name (as C(sinfo -N) shows it), which can differ from the host name.
    type: str
    required: true
  state:
    description:
      - V(drained) takes the node out of service; V(resumed) puts it back if the drain is ours.
      - V(released) is how a run that ends with the memory still held leaves its drain (the node stays out of service);
        it writes that to the node journal, so that the next run may resume the drain once it has fixed the node,
        without waiting for O(stale_drain_after). It changes nothing in Slurm.
      - V(held) keeps the node drained with a reason built from O(hold_reason), one that no gpuops run resumes.
    type: str
    choices: [drained, resumed, released, held]
    default: drained
  marker:
    description: The start of every reason we drain with; a drain whose reason starts with it is ours.
    type: str
    default: "gpuops: reclaiming stuck GPU memory"
  purpose:
    description: What the drain is for, written into the reason after the run id (for example V(reset rung)).
    type: str
    default: destructive rung
  hold_reason:
    description: With O(state=held), why the node stays out of service, written into its reason (required then).
    type: str
  running_jobs:
    description: What to do while jobs still run on the drained node.
    type: str
    choices: [wait, refuse]
    default: wait
  job_timeout:
    description: Seconds to wait for the jobs to end with O(running_jobs=wait); the module fails naming them after it.
    type: float
    default: 600.0
  stale_drain_after:
    description:
      - With O(state=resumed), seconds without a sign of life after which the drain of another gpuops run counts as
        left behind (an interrupted run) and is resumed. Keep it above the longest run, O(job_timeout) included.
    type: float
    default: 7200.0
  poll_interval:
    description: Seconds between two reads of the node while waiting for its jobs.
    type: float
    default: 2.0
  run_id:
    description: The run's identifier, written into the reason and the journal.
    type: str
  journal_path:
    description: The node journal (see M(gpuops.remediation.gpu_kill)); defaults to the node's.
    type: path
seealso:
  - module: gpuops.remediation.gpu_reset
"""

EXAMPLES = r"""
- name: Drain node07 before the reset, waiting up to 10 minutes for its jobs
  gpuops.remediation.slurm_drain:
    node: node07
    purpose: reset rung
    job_timeout: 600

- name: Put it back into service if the drain is still ours
  gpuops.remediation.slurm_drain:
    node: node07
    state: resumed
"""

RETURN = r"""
node:
  description: The node as Slurm showed it after the module ran (state without flags, raw state, reason, user, time).
  returned: always
  type: dict
before:
  description: The node as Slurm showed it before.
  returned: always
  type: dict
ours:
  description: Whether the node's drain (after the module ran) is a gpuops drain (its reason is the one this module writes).
  returned: always
  type: bool
jobs:
  description: The jobs on the node when the module finished (job_id, user, state, name).
  returned: always
  type: list
  elements: dict
waited:
  description: Seconds waited for the jobs to end.
  returned: always
  type: float
drain_run:
  description: With O(state=resumed), the run id the drain's reason names, or null when the drain is not gpuops'.
  returned: with state=resumed
  type: str
msg:
  description: What was done, or why nothing was.
  returned: always
  type: str
"""

import datetime
import time
import uuid

from ansible_collections.gpuops.remediation.plugins.module_utils._journal import Journal, path_failure, recent_records
from ansible_collections.gpuops.remediation.plugins.module_utils._module import GpuModule
from ansible_collections.gpuops.remediation.plugins.module_utils._node import current_layout
from ansible_collections.gpuops.remediation.plugins.module_utils._slurm import (
    SlurmNodeUnknown, drain_argv, drain_reason, drain_run, hold_reason, is_drained, parse_sinfo, parse_squeue, reason_run_id, resume_argv,
    sinfo_argv, squeue_argv,
)


class SlurmDrain:
    def __init__(self, module):
        self.module = module
        self.params = module.params
        self.node = self.params["node"]
        self.run_id = self.params["run_id"] or uuid.uuid4().hex
        self.journal = Journal(self.params["journal_path"] or current_layout().journal_file, run_id=self.run_id)
        failure = path_failure(self.journal.path, bool(self.params["journal_path"]))
        if failure:
            module.fail_json(msg=failure, changed=False)
        self.result = {"changed": False, "jobs": [], "waited": 0.0}

    def _fail(self, msg):
        details = dict((key, value) for key, value in self.result.items() if key != "msg")
        self.module.fail_json(msg=msg, **details)

    def _run(self, argv):
        rc, out, err = self.module.run_command(argv)
        if rc != 0:
            self._fail("%s failed (rc %d): %s" % (" ".join(argv[:2]), rc, (err or out).strip()))
        return out

    def read(self):
        try:
            return parse_sinfo(self._run(sinfo_argv(self.module.get_bin_path("sinfo", required=True), self.node)), self.node)
        except SlurmNodeUnknown:
            self._fail("node: Slurm knows no node %r (sinfo -N lists it not); set the Slurm node name" % self.node)
        return None

    def jobs(self):
        return parse_squeue(self._run(squeue_argv(self.module.get_bin_path("squeue", required=True), self.node)))

    def _act(self, action, argv):
        entry = self.journal.intent(action, node=self.node, argv=argv)
        rc, out, err = self.module.run_command(argv)
        self.journal.outcome(entry, rc == 0, rc=rc, stderr=err.strip())
        if rc != 0:
            self._fail("%s failed (rc %d): %s" % (" ".join(argv[1:4]), rc, (err or out).strip()))
        self.result["changed"] = True

    def drain(self, before):
        marker = self.params["marker"]
        if drain_run(before, marker):
            self.result["msg"] = "already drained by gpuops: %s" % before["reason"]
        elif is_drained(before):
            self.result["msg"] = "already drained by someone else (%s); it stays theirs and is never resumed by us" % before["reason"]
        else:
            reason = drain_reason(marker, self.run_id, self.params["purpose"])
            if self.module.check_mode:
                self.result.update(changed=True, msg="would drain with reason %r" % reason)
                return self.wait_for_jobs(dict(before, state="drained", reason=reason))
            self._act("slurm_drain", drain_argv(self.module.get_bin_path("scontrol", required=True), self.node, reason))
            self.result["msg"] = "drained with reason %r" % reason
        return self.wait_for_jobs(self.read())

    def wait_for_jobs(self, node):
        """Until no job runs on node (Slurm says drained), bounded; or fail naming the jobs."""
        started = time.monotonic()
        jobs = self.jobs()
        if not jobs:
            return node
        if self.module.check_mode and self.params["running_jobs"] == "wait":
            self.result.update(jobs=jobs, msg="%s; would wait up to %s s for jobs %s to end" % (
                self.result["msg"], self.params["job_timeout"], ", ".join(j["job_id"] for j in jobs)))
            return node
        while jobs:
            waited = time.monotonic() - started
            if self.params["running_jobs"] == "refuse" or waited >= self.params["job_timeout"]:
                self.result.update(jobs=jobs, waited=round(waited, 1), node=node, ours=drain_run(node, self.params["marker"]) is not None)
                why = "running_jobs=refuse" if self.params["running_jobs"] == "refuse" else "still running after %.0f s (job_timeout)" % waited
                self._fail("jobs run on Slurm node %s: %s; no GPU is reset under a running job (%s)" % (
                    self.node, ", ".join("%s (%s, %s)" % (j["job_id"], j["user"], j["name"]) for j in jobs), why))
            time.sleep(self.params["poll_interval"])
            jobs = self.jobs()
        self.result["waited"] = round(time.monotonic() - started, 1)
        return self.read()

    def released_by(self, run_id, records):
        """Whether run run_id ended and left its drain to the next run (state=released, in the node journal)."""
        return any(record.get("action") == "slurm_release" and record.get("phase") == "outcome"
                   and reason_run_id(record.get("run_id")) == run_id for record in records)

    def release(self, before):
        """A run that ends with the node still drained by it hands the drain on: the next run may resume it."""
        if drain_run(before, self.params["marker"]) != reason_run_id(self.run_id):
            self.result["msg"] = "nothing to hand on: the node is not drained by this run"
        elif self.module.check_mode:
            self.result["msg"] = "would leave the node drained for the next run"
        else:
            entry = self.journal.intent("slurm_release", node=self.node, reason=before["reason"])
            self.journal.outcome(entry, True, node=self.node)
            self.result["msg"] = "left drained for the next run (%s)" % before["reason"]
        return before

    def hold(self, before):
        """Keep the node out of service with a reason no gpuops run resumes (its GPUs failed the health check)."""
        if is_drained(before) and drain_run(before, self.params["marker"]) is None:
            self.result["msg"] = "left drained by someone else (%s); it stays out of service" % before["reason"]
            return before
        reason = hold_reason(self.run_id, self.params["hold_reason"])
        if before["reason"] == reason and is_drained(before):
            self.result["msg"] = "already held drained with reason %r" % reason
            return before
        if self.module.check_mode:
            self.result.update(changed=True, msg="would keep the node drained with reason %r" % reason)
            return dict(before, state="drained", reason=reason)
        self._act("slurm_hold", drain_argv(self.module.get_bin_path("scontrol", required=True), self.node, reason))
        self.result["msg"] = "held drained with reason %r; resume it by hand once the GPUs are repaired" % reason
        return self.read()

    @staticmethod
    def last_seen(run_id, before, records):
        """Seconds since run run_id last showed life: its latest line in the node journal, else the drain's time."""
        stamps = [record["ts"] for record in records if reason_run_id(record.get("run_id")) == run_id]
        try:
            if stamps:
                then = datetime.datetime.fromisoformat(max(stamps).replace("Z", "+00:00")).timestamp()
            else:
                then = time.mktime(time.strptime(before["reason_time"] or "", "%Y-%m-%dT%H:%M:%S"))
        except ValueError:
            return None, "journal"
        return max(time.time() - then, 0.0), "journal" if stamps else "Slurm's reason time"

    def resume(self, before):
        run = drain_run(before, self.params["marker"])
        self.result["drain_run"] = run
        if run is None:
            if is_drained(before):
                self.result["msg"] = "not resumed: the drain is someone else's (reason %r, by %s at %s)" % (
                    before["reason"], before["reason_user"], before["reason_time"])
            else:
                self.result["msg"] = "not resumed: the node is not drained (state %s)" % before["state"]
            return before
        why = "the drain is this run's"
        records = recent_records(self.journal.path)[0] if run != reason_run_id(self.run_id) else []
        if run != reason_run_id(self.run_id) and self.released_by(run, records):
            why = "run %s ended and left its drain to the next run" % run
        elif run != reason_run_id(self.run_id):
            age, source = self.last_seen(run, before, records)
            if age is None or age < self.params["stale_drain_after"]:
                self.result["msg"] = ("not resumed: the drain is gpuops run %s's, which may still be running (last seen %s "
                                      "ago in the %s; stale_drain_after=%s s)" % (
                                          run, "%.0f s" % age if age is not None else "at an unknown time", source,
                                          self.params["stale_drain_after"]))
                return before
            why = "a drain left by run %s, last seen %.0f s ago (%s)" % (run, age, source)
        if self.module.check_mode:
            self.result.update(changed=True, msg="would resume: %s" % why)
            return dict(before, state="idle", reason=None)
        self._act("slurm_resume", resume_argv(self.module.get_bin_path("scontrol", required=True), self.node))
        self.result["msg"] = "resumed: %s" % why
        return self.read()

    def execute(self):
        before = self.read()
        self.result["before"] = before
        actions = {"drained": self.drain, "resumed": self.resume, "released": self.release, "held": self.hold}
        after = actions[self.params["state"]](before)
        self.result.update(node=after, ours=drain_run(after, self.params["marker"]) is not None)
        self.result["diff"] = {"before": {"state": before["state"], "reason": before["reason"]},
                               "after": {"state": after["state"], "reason": after["reason"]}}
        self.module.exit_json(**self.result)


def main():
    module = GpuModule(
        argument_spec=dict(
            node=dict(type="str", required=True),
            state=dict(type="str", choices=["drained", "resumed", "released", "held"], default="drained"),
            marker=dict(type="str", default="gpuops: reclaiming stuck GPU memory"),
            purpose=dict(type="str", default="destructive rung"),
            hold_reason=dict(type="str"),
            running_jobs=dict(type="str", choices=["wait", "refuse"], default="wait"),
            job_timeout=dict(type="float", default=600.0),
            poll_interval=dict(type="float", default=2.0),
            stale_drain_after=dict(type="float", default=7200.0),
            run_id=dict(type="str"),
            journal_path=dict(type="path"),
        ),
        supports_check_mode=True,
        required_if=[("state", "held", ["hold_reason"])],
    )
    for option in ("job_timeout", "stale_drain_after"):
        if module.params[option] < 0:
            module.fail_json(msg="%s must be 0 or more seconds, got %r" % (option, module.params[option]))
    if module.params["poll_interval"] <= 0:
        module.fail_json(msg="poll_interval must be more than 0 seconds, got %r" % module.params["poll_interval"])
    for option in ("node", "marker"):
        if not (module.params[option] or "").strip():
            module.fail_json(msg="%s must not be empty, got %r" % (option, module.params[option]))
    SlurmDrain(module).execute()


if __name__ == "__main__":
    main()
