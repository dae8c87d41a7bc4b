# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Slurm, as the drain before a destructive rung needs it: read a node, drain it, resume it, list its jobs.

Pure parsers and argv builders (Slurm 22.05 and later; `scontrol --json` does not exist there). Without slurmdbd
only root can drain, so the user column cannot tell our drain from another; the reason text does: ours starts
with the marker the caller gives.
"""

from __future__ import annotations

import re

# sinfo: %N the node name (%n would be its NodeHostname), %T the long state, %U the user who set the reason,
# %H when, %E the whole reason (not cut at 20 characters like -R's default). %E goes last: a reason may hold "|".
SINFO_FORMAT = "%N|%T|%U|%H|%E"
SQUEUE_FORMAT = "%i|%u|%T|%j"
# The flags Slurm appends to a state: * not responding, ~ powered off, # powering up, ! powering down,
# % powering down, $ reservation maintenance, @ reboot pending, ^ reboot issued, - planned.
STATE_FLAGS = "*~#!%$@^-"
DRAIN_STATES = ("draining", "drained")


class SlurmNodeUnknown(Exception):
    """Slurm does not know this node name."""


def sinfo_argv(sinfo, node):
    return [sinfo, "--noheader", "--Node", "--nodes", node, "--format", SINFO_FORMAT]


def squeue_argv(squeue, node):
    return [squeue, "--noheader", "--nodelist", node, "--format", SQUEUE_FORMAT]


def drain_argv(scontrol, node, reason):
    return [scontrol, "update", "NodeName=%s" % node, "State=DRAIN", "Reason=%s" % reason]


def resume_argv(scontrol, node):
    return [scontrol, "update", "NodeName=%s" % node, "State=RESUME"]


def base_state(state):
    """'drained*' -> 'drained', 'mixed+drain' -> 'mixed+drain' (lower case, flags off)."""
    return state.strip().lower().rstrip(STATE_FLAGS)


def parse_sinfo(text, node):
    """{"node", "state", "raw_state", "reason", "reason_user", "reason_time"} of node; SlurmNodeUnknown if absent."""
    for line in text.splitlines():
        fields = line.split("|", 4)
        if len(fields) != 5 or fields[0].strip() != node:
            continue
        name, raw_state, user, when, reason = (field.strip() for field in fields)
        reason = None if reason in ("", "none", "(null)") else reason
        return {"node": name, "state": base_state(raw_state), "raw_state": raw_state, "reason": reason,
                "reason_user": None if user in ("", "Unknown", "N/A") else user,
                "reason_time": None if when in ("", "Unknown", "N/A") else when}
    raise SlurmNodeUnknown(node)


def parse_squeue(text):
    """[{"job_id", "user", "state", "name"}] of the jobs squeue listed."""
    jobs = []
    for line in text.splitlines():
        fields = line.split("|", 3)
        if len(fields) == 4 and fields[0].strip():
            jobs.append({"job_id": fields[0].strip(), "user": fields[1].strip(), "state": fields[2].strip(),
                         "name": fields[3].strip()})
    return jobs


def is_drained(node_info):
    return node_info["state"] in DRAIN_STATES


def reason_run_id(run_id):
    """The run id as written into a reason: what the reason can hold and be read back from (no ':', '(' or ')')."""
    return re.sub(r"[^A-Za-z0-9._@+-]", "_", str(run_id))


def drain_reason(marker, run_id, purpose):
    """The reason we drain with: the marker first (that is how we know it again), then the run and what for."""
    return "%s (run %s: %s)" % (marker, reason_run_id(run_id), re.sub(r"[()]", "", purpose))


HOLD_REASON_MAX = 200


def hold_reason(run_id, why):
    """The reason a node is kept out of service with once its GPUs failed the health check: not a drain_reason (it does
    not start with the marker), so that no later run resumes it; a person does, once the GPUs are repaired."""
    why = re.sub(r"\s+", " ", why).strip()
    reason = "gpuops: GPU health check failed (run %s) - %s; resume by hand once repaired" % (reason_run_id(run_id), why)
    return reason if len(reason) <= HOLD_REASON_MAX else reason[:HOLD_REASON_MAX - 3] + "..."


def drain_run(node_info, marker):
    """The run id of a gpuops drain (a drain whose reason is exactly what drain_reason writes), or None.

    A reason that only starts with the marker ("<marker> failed, RMA - do not resume") is not ours: someone wrote it.
    """
    if not is_drained(node_info):
        return None
    match = re.match(r"^%s \(run ([A-Za-z0-9._@+-]+): [^()]*\)$" % re.escape(marker), node_info.get("reason") or "")
    return match.group(1) if match else None
