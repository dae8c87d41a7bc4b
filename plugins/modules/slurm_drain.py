#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""slurm_drain: drain a Slurm node before a destructive rung, and resume it after, only if the drain is ours."""

from __future__ import annotations

DOCUMENTATION = r"""
module: slurm_drain
short_description: Drain a Slurm node before a destructive rung, and resume it after, only if the drain is ours
version_added: 1.0.0
description:
  - With O(state=drained), drains the node with a reason that starts with O(marker) (followed by the run id and
    O(purpose)), unless it is drained already. Then, while jobs still run on it (Slurm state C(draining)), waits up
    to O(job_timeout) seconds for them to end (O(running_jobs=wait)) or fails naming them (O(running_jobs=refuse)),
    so that no GPU is reset under a running job. Succeeds once the node is C(drained).
  - A run that gives up because jobs still run leaves the node as it found it - with O(running_jobs=refuse) it drains
    nothing, and a drain taken while waiting is undone after O(job_timeout) - unless O(keep_drain=true).
  - A node under an administrator's decision is left exactly as found, and RV(left_as_found) and RV(msg) say why - a
    state flag DOWN, FAIL, MAINTENANCE, REBOOT_ISSUED or REBOOT_REQUESTED, powered down or powering, FUTURE or UNKNOWN,
    or any reason that is not exactly one this module writes (someone else's drain, a note, Slurm's own). Our drain is
    never applied over it (DRAIN would replace the reason; RESUME would clear DOWN and FAIL too). When such a node is
    out of service (drained, down or failing - no job can start) the drain succeeds without ours; otherwise it fails,
    saying that draining it yourself allows the rung. A reason on a node neither out of service nor asked to reboot
    or power down (back in service, or only in a maintenance reservation) is what an ended drain left - Slurm 23.02 to
    24.11 keep it after a resume when the cluster has no accounting storage (slurmdbd) - and counts as no reason.
  - With O(state=confirmed), before a later destructive rung of the same run, checks that the node is still out of
    service with no job on it, and fails naming what changed (an administrator resumed it, a job started). Changes
    nothing.
  - With O(state=resumed), resumes the node only while its reason is still the one this module writes. A drain by
    someone else (another reason, set before the run or replacing ours during it, or one that only starts with
    O(marker)) is left alone, and RV(msg) says why.
  - Our drain is known by its reason alone (without slurmdbd only root can drain, so the user tells nothing), and the
    reason names the run. The drain of another gpuops run is resumed only once that run has ended and handed it on
    (O(state=released)), or has shown no life for O(stale_drain_after) seconds (its last line in the node journal,
    else the time Slurm recorded the drain). So a run interrupted after its drain leaves the node drained and a later
    run resumes it, while a run still waiting for its jobs keeps its drain. A drain is not resumed while the node also
    carries an administrator's state flag (RESUME would clear it), nor when the run named in the reason began the GPUs'
    health check (M(gpuops.remediation.gpu_health_check) journals its start) and no check passed since - the node is
    held instead, as after a failed check.
  - With O(state=held), keeps the node out of service with a reason that names why (O(hold_reason)) and that no gpuops
    run resumes - the GPUs failed their health check after the memory came back, and a person must look at them. Our
    drain (this run's, or one another run left) takes the new reason; an undrained node is drained with it; a drain by
    someone else stays theirs.
  - Reads the node with C(scontrol --oneliner show node NODE) - the state with every flag (C(sinfo) shows DOWN+DRAIN
    as C(drained)), the whole reason with all its lines, who set it and when - and its jobs with C(squeue). A drain
    is ours only when its whole reason is exactly what this module writes; a reason with more lines is someone
    else's. A reason C(scontrol) shows as ours is read again as stored with C(sinfo --format %E), since C(scontrol)
    drops a reason's empty lines (an admin's reason with a trailing newline) and cannot tell its own C([user@time])
    stamp from one the reason holds; unless C(sinfo) shows it exactly, it is someone else's. Slurm commands need
    their configuration (C(SLURM_CONF) or C(/etc/slurm)); pass the environment to the task.
  - O(node), O(marker), O(purpose), O(hold_reason) and O(run_id) are refused when they hold a newline or a control
    character.
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
      - V(confirmed) checks, before a later destructive rung, that the node is still out of service with no job on it.
    type: str
    choices: [drained, resumed, released, held, confirmed]
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
  keep_drain:
    description:
      - When the module fails because jobs still run (O(running_jobs=refuse), or past O(job_timeout)), keep our drain on
        the node, so that the jobs' end frees it for the next run. By default the node is left as it was found.
    type: bool
    default: false
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
  description:
    - The node as Slurm showed it after the module ran - C(state) (as C(sinfo) names it), C(base), C(flags),
      C(raw_state) (as C(scontrol) prints it), C(reason) (whole, lines joined by newlines), C(reason_user), C(reason_time).
  returned: always
  type: dict
before:
  description: The node as Slurm showed it before.
  returned: always
  type: dict
held:
  description:
    - Whether the node is held drained with a reason no gpuops run resumes - with O(state=held), or with
      O(state=resumed) when the run named in our drain's reason began the GPUs' health check and none passed since.
  returned: always
  type: bool
left_as_found:
  description: Why the node was left exactly as found (an administrator's state flag, someone else's reason), or null.
  returned: always
  type: str
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

from ansible_collections.gpuops.remediation.plugins.module_utils._payload_imports import compile_each_file_once

compile_each_file_once()  # before the collection's other imports: zipimport compiles each of them once

from ansible_collections.gpuops.remediation.plugins.module_utils._command import CommandRunner
from ansible_collections.gpuops.remediation.plugins.module_utils.journal._files import path_failure
from ansible_collections.gpuops.remediation.plugins.module_utils.journal._writer import Journal
from ansible_collections.gpuops.remediation.plugins.module_utils.journal._reader import recent_records
from ansible_collections.gpuops.remediation.plugins.module_utils._module import GpuModule
from ansible_collections.gpuops.remediation.plugins.module_utils._node import current_layout
from ansible_collections.gpuops.remediation.plugins.module_utils._option_ranges import within
from ansible_collections.gpuops.remediation.plugins.module_utils.scheduler._slurm import (
    SlurmNodeUnknown, admin_flags, as_drained, as_resumed, control_character, describe_reason, drain_argv, drain_reason,
    drain_run, gate_unfinished, hands_off, hold_reason, is_drained, out_of_service, parse_node, parse_squeue, reason_run_id,
    resume_argv, show_node_argv, sinfo_reason_argv, squeue_argv, unknown_node,
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
        self.result = {"changed": False, "jobs": [], "waited": 0.0, "left_as_found": None, "ours": False, "held": False}

    def _fail(self, msg):
        details = dict((key, value) for key, value in self.result.items() if key != "msg")
        self.module.fail_json(msg=msg, **details)

    def _run(self, argv):
        rc, out, err = CommandRunner(self.module).probe(argv)
        if rc != 0:
            self._fail("%s failed (rc %d): %s" % (" ".join(argv[:2]), rc, (err or out).strip()))
        return out

    def read(self):
        """The node as `scontrol --oneliner show node` tells it: state with every flag, the reason whole, who and when."""
        argv = show_node_argv(self.module.get_bin_path("scontrol", required=True), self.node)
        rc, out, err = CommandRunner(self.module).probe(argv)
        try:
            if unknown_node(rc, out, err):
                raise SlurmNodeUnknown(self.node)
            if rc != 0:
                self._fail("%s failed (rc %d): %s" % (" ".join(argv[:4]), rc, (err or out).strip()))
            node = parse_node(out, self.node)
        except SlurmNodeUnknown:
            self._fail("node: Slurm knows no node %r (scontrol show node finds it not); set the Slurm node name" % self.node)
        if drain_run(node, self.params["marker"]) is not None:
            # scontrol shows it as ours: confirm that with the reason as stored, which sinfo prints whole.
            sinfo = self.module.get_bin_path("sinfo", required=True)
            node["sinfo_reason"] = self._run(sinfo_reason_argv(sinfo, self.node))
        return node

    def jobs(self):
        return parse_squeue(self._run(squeue_argv(self.module.get_bin_path("squeue", required=True), self.node)))

    def _act(self, action, argv, fail=True):
        rc, out, err = CommandRunner(self.module, self.journal).act(argv, action, node=self.node)
        if rc != 0:
            error = "%s failed (rc %d): %s" % (" ".join(argv[1:4]), rc, (err or out).strip())
            if fail:
                self._fail(error)
            return error
        self.result["changed"] = True
        return None

    @staticmethod
    def _jobs_text(jobs):
        return ", ".join("%s (%s, %s)" % (j["job_id"], j["user"], j["name"]) for j in jobs)

    def drain(self, before):
        marker = self.params["marker"]
        why = hands_off(before, marker)
        if why and not out_of_service(before):
            self.result["left_as_found"] = why
            self._fail("left as found: Slurm node %s %s; our drain is never applied over that, and jobs can still start on "
                       "it, so no destructive rung runs. Drain it yourself (scontrol update NodeName=%s State=DRAIN "
                       "Reason=...) to allow the rung" % (self.node, why, self.node))
        if why:
            self.result["left_as_found"] = why
            self.result["msg"] = "left someone else's drain as found: %s %s; our drain is not applied over it, and no job " \
                "can start on it" % (self.node, why) if is_drained(before) else \
                "left as found: %s %s; our drain is not applied over it, and no job can start on it" % (self.node, why)
            return self.wait_for_jobs(before, taken=False)
        if drain_run(before, marker):
            self.result["msg"] = "already drained by gpuops: %s" % describe_reason(before)
            return self.wait_for_jobs(before, taken=False)
        if self.params["running_jobs"] == "refuse" and not self.params["keep_drain"]:
            jobs = self.jobs()
            if jobs:
                self.result.update(jobs=jobs, node=before, ours=False)
                self._fail("jobs run on Slurm node %s: %s; no GPU is reset under a running job (running_jobs=refuse). The node "
                           "was left as found (%s); keep_drain=true would drain it so that the jobs' end frees it" % (
                               self.node, self._jobs_text(jobs), before["raw_state"]))
        reason = drain_reason(marker, self.run_id, self.params["purpose"])
        if self.module.check_mode:
            self.result.update(changed=True, msg="would drain %s with reason %r" % (self.node, reason))
            return self.wait_for_jobs(as_drained(before, reason), taken=True)
        self._act("slurm_drain", drain_argv(self.module.get_bin_path("scontrol", required=True), self.node, reason))
        self.result["msg"] = "drained with reason %r" % reason
        return self.wait_for_jobs(self.read(), taken=True)

    def _give_up(self, node, jobs, why, taken):
        """The jobs still run: fail naming them; a drain this call took is undone (the node as found) unless keep_drain."""
        self.result.update(jobs=jobs, node=node)
        undo = ""
        if taken and not self.params["keep_drain"] and not self.module.check_mode:
            node = self.read()
            if drain_run(node, self.params["marker"]) != reason_run_id(self.run_id) or admin_flags(node):
                # Someone changed the node since our drain: their decision stands.
                undo = "; our drain was not undone, since the node is now %s with reason %s" % (node["raw_state"], describe_reason(node))
            else:
                error = self._act("slurm_resume", resume_argv(self.module.get_bin_path("scontrol", required=True), self.node),
                                  fail=False)
                node = self.read()
                undo = "; our drain could not be undone: %s" % error if error else \
                    "; our drain was undone, the node is as found (keep_drain=true keeps it so that the jobs' end frees the node)"
            self.result["node"] = node
        elif taken and not self.params["keep_drain"]:
            undo = "; would undo our drain, leaving the node as found (keep_drain=true keeps it)"
        elif taken:
            undo = "; our drain stays (keep_drain=true): the node is drained once the jobs end"
        self.result["ours"] = drain_run(node, self.params["marker"]) is not None
        self._fail("jobs run on Slurm node %s: %s; no GPU is reset under a running job (%s)%s" % (
            self.node, self._jobs_text(jobs), why, undo))

    def wait_for_jobs(self, node, taken):
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
                self.result["waited"] = round(waited, 1)
                why = "running_jobs=refuse" if self.params["running_jobs"] == "refuse" else "still running after %.0f s (job_timeout)" % waited
                self._give_up(node, jobs, why, taken)
            time.sleep(self.params["poll_interval"])
            jobs = self.jobs()
        self.result["waited"] = round(time.monotonic() - started, 1)
        return self.read()

    def confirm(self, before):
        """Before a later destructive rung of the same run: the node must still be out of service, with no job on it."""
        if not out_of_service(before):
            self._fail("Slurm node %s is back in service (state %s, reason %s) since the drain before an earlier rung: someone "
                       "resumed it, so the walk stops here; no destructive rung runs on a node that can start jobs" % (
                           self.node, before["raw_state"], describe_reason(before)))
        jobs = self.jobs()
        if jobs:
            self.result.update(jobs=jobs)
            self._fail("jobs run on Slurm node %s since the drain: %s; the walk stops here" % (self.node, self._jobs_text(jobs)))
        run = drain_run(before, self.params["marker"])
        self.result["msg"] = "still drained by gpuops run %s" % run if run else \
            "still out of service (%s, reason %s), no longer by our drain" % (before["raw_state"], describe_reason(before))
        return before

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

    def hold(self, before, why=None):
        """Keep the node out of service with a reason no gpuops run resumes (its GPUs failed the health check)."""
        left = hands_off(before, self.params["marker"])
        if left:
            self.result["left_as_found"] = left
            self.result["msg"] = "left as found: %s %s; it stays as it is" % (self.node, left) if not is_drained(before) else \
                "left someone else's drain as found: %s %s; it stays out of service" % (self.node, left)
            return before
        reason = hold_reason(self.run_id, why or self.params["hold_reason"])
        self.result["held"] = True
        if before["reason"] == reason and is_drained(before):
            self.result["msg"] = "already held drained with reason %r" % reason
            return before
        if self.module.check_mode:
            self.result.update(changed=True, msg="would hold the node drained with reason %r" % reason)
            return as_drained(before, reason)
        self._act("slurm_hold", drain_argv(self.module.get_bin_path("scontrol", required=True), self.node, reason))
        self.result["msg"] = "held drained with reason %r; resume it by hand once the GPUs are repaired%s" % (
            reason, " (not resumed: %s)" % why if why else "")
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
            left = hands_off(before, self.params["marker"])
            self.result["left_as_found"] = left or None
            if is_drained(before):
                self.result["msg"] = "not resumed: left someone else's drain as found: %s" % left
            elif left:
                self.result["msg"] = "not resumed: left as found: %s" % left
            else:
                self.result["msg"] = "not resumed: the node is not drained (state %s)" % before["raw_state"]
            return before
        flags = admin_flags(before)
        if flags:
            self.result["left_as_found"] = "its state is %s (%s)" % (before["raw_state"], ", ".join(flags))
            self.result["msg"] = ("not resumed: our drain stays, since the node is now %s (%s): RESUME would clear that too; "
                                  "resume it by hand once that is over" % (before["raw_state"], ", ".join(flags)))
            return before
        records = recent_records(self.journal.path)[0]
        gate = gate_unfinished(records, run)
        if gate:
            return self.hold(before, gate)
        why = "the drain is this run's"
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
            self.result.update(changed=True, msg="would resume: %s (reason %r)" % (why, before["reason"]))
            return as_resumed(before)
        self._act("slurm_resume", resume_argv(self.module.get_bin_path("scontrol", required=True), self.node))
        self.result["msg"] = "resumed: %s (reason %r)" % (why, before["reason"])
        return self.read()

    def execute(self):
        before = self.read()
        self.result["before"] = before
        actions = {"drained": self.drain, "resumed": self.resume, "released": self.release, "held": self.hold,
                   "confirmed": self.confirm}
        after = actions[self.params["state"]](before)
        self.result.update(node=after, ours=drain_run(after, self.params["marker"]) is not None)
        self.result["diff"] = {"before": {"state": before["raw_state"], "reason": before["reason"]},
                               "after": {"state": after["raw_state"], "reason": after["reason"]}}
        self.module.exit_json(**self.result)


def main():
    module = GpuModule(
        argument_spec=dict(
            node=dict(type="str", required=True),
            state=dict(type="str", choices=["drained", "resumed", "released", "held", "confirmed"], default="drained"),
            marker=dict(type="str", default="gpuops: reclaiming stuck GPU memory"),
            purpose=dict(type="str", default="destructive rung"),
            hold_reason=dict(type="str"),
            running_jobs=dict(type="str", choices=["wait", "refuse"], default="wait"),
            keep_drain=dict(type="bool", default=False),
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
        if not within(option, module.params[option]):
            module.fail_json(msg="%s must be 0 or more seconds, got %r" % (option, module.params[option]))
    if module.params["poll_interval"] <= 0:
        module.fail_json(msg="poll_interval must be more than 0 seconds, got %r" % module.params["poll_interval"])
    for option in ("node", "marker"):
        if not (module.params[option] or "").strip():
            module.fail_json(msg="%s must not be empty, got %r" % (option, module.params[option]))
    # A reason is read back whole and must be exactly ours: nothing we write may hold a line break or a control character.
    for option in ("node", "marker", "purpose", "hold_reason", "run_id"):
        found = control_character(module.params[option])
        if found:
            module.fail_json(msg="%s must not contain a newline or a control character (%s), got %r" % (
                option, found, module.params[option]))
    SlurmDrain(module).execute()


if __name__ == "__main__":
    main()
