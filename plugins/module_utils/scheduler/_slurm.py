# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Slurm, as the drain before a destructive rung needs it: read a node, drain it, resume it, list its jobs.

Pure parsers, argv builders and decisions (Slurm 22.05 and later; `scontrol --json` does not exist there). The node is
read with `scontrol --oneliner show node NODE`: the state with every flag (sinfo shows DOWN+DRAIN as `drained`), the
reason whole and who set it when. Without slurmdbd only root can drain, so the user cannot tell our drain from
another; the reason does: ours is exactly the whole reason drain_reason writes, nothing before, after or below it.
"""

from __future__ import annotations

import re

SQUEUE_FORMAT = "%i|%u|%T|%j"
# State flags under which a node is an administrator's (or Slurm's own) decision, left exactly as found: no drain of
# ours over it, no resume (RESUME clears DOWN and FAIL too). MAINT is how Slurm before 22.05 spelled MAINTENANCE.
HANDS_OFF_FLAGS = ("DOWN", "FAIL", "FAILING", "MAINTENANCE", "MAINT", "REBOOT_ISSUED", "REBOOT_REQUESTED", "POWER_DOWN",
                   "POWERED_DOWN", "POWERING_DOWN", "POWERING_UP", "FUTURE", "UNKNOWN")
# Under these no job can start on the node: it is out of service whoever took it out.
OUT_OF_SERVICE_FLAGS = ("DRAIN", "DOWN", "FAIL")
BUSY_STATES = ("ALLOCATED", "MIXED", "COMPLETING")
# Where a one-line node record ends its reason's first line: " [user@time]" (slurm_make_time_str's ISO form).
_REASON_STAMP = re.compile(r" \[([^\s\[\]@]+)@(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d|Unknown|None)\]")
# In one-line output, scontrol joins a reason's later lines with " " + 7 spaces; the fields it prints after the reason
# (Slurm 24.11's node_info.c: Comment, Extra, InstanceId, InstanceType, ReservationName - 22.05 prints none of the last
# three there) follow it.
_CONTINUATION = " " * 8
_AFTER_REASON = (" Comment=", " Extra=", " InstanceId=", " InstanceType=", " ReservationName=")
# The flags under which a node's reason is a decision in force: out of service, or a reboot or power-down asked for.
LIVE_REASON_FLAGS = OUT_OF_SERVICE_FLAGS + ("REBOOT_REQUESTED", "REBOOT_ISSUED", "POWER_DOWN", "POWERED_DOWN", "POWERING_DOWN")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class SlurmNodeUnknown(Exception):
    """Slurm does not know this node name."""


# --all everywhere: without it Slurm hides a partition marked Hidden (and its nodes and jobs) from anyone but root and
# SlurmUser - an operator's run would find no such node, or no job on it.
def show_node_argv(scontrol, node):
    return [scontrol, "--all", "--oneliner", "show", "node", node]


def squeue_argv(squeue, node):
    return [squeue, "--all", "--noheader", "--nodelist", node, "--format", SQUEUE_FORMAT]


def drain_argv(scontrol, node, reason):
    return [scontrol, "update", "NodeName=%s" % node, "State=DRAIN", "Reason=%s" % reason]


def resume_argv(scontrol, node):
    return [scontrol, "update", "NodeName=%s" % node, "State=RESUME"]


def unknown_node(rc, out, err):
    """Whether scontrol's answer means it knows no such node ("Node X not found", rc 1)."""
    return rc != 0 and re.search(r"^Node \S+ not found", (err or "") + (out or ""), re.M) is not None


def control_character(text):
    """The first newline or control character in text, as repr() shows it, or None."""
    found = _CONTROL.search(text or "")
    return repr(found.group(0)) if found else None


def _split_reason(tail):
    """(reason, user, time) from what follows "Reason=" in a one-line node record."""
    for stamp in _REASON_STAMP.finditer(tail):
        rest = tail[stamp.end():]
        if rest and not rest.startswith(_CONTINUATION) and not rest.startswith(_AFTER_REASON):
            continue  # text of the reason itself that looks like a stamp: the real one is further on
        lines = [tail[:stamp.start()]]
        while rest.startswith(_CONTINUATION):
            rest = rest[len(_CONTINUATION):]
            ends = [rest.find(mark) for mark in (_CONTINUATION,) + _AFTER_REASON if rest.find(mark) >= 0]
            end = min(ends) if ends else len(rest)
            lines.append(rest[:end])
            rest = rest[end:]
        user, when = stamp.group(1), stamp.group(2)
        return "\n".join(lines), user, None if when in ("Unknown", "None") else when
    ends = [tail.find(mark) for mark in _AFTER_REASON if tail.find(mark) >= 0]
    return tail[:min(ends)] if ends else tail, None, None


def long_state(base, flags):
    """Slurm's own name of a state as sinfo prints it: a DRAIN flag makes `draining` (jobs still run) or `drained`,
    whatever the base state (DOWN+DRAIN is `drained`); else FAIL makes `fail`/`failing`; else the base, lower case."""
    if "DRAIN" in flags:
        return "draining" if base in BUSY_STATES or "COMPLETING" in flags else "drained"
    if "FAIL" in flags:
        return "failing" if base in BUSY_STATES else "fail"
    return base.lower()


def _reason_is_live(states):
    """Whether a reason on a node in these states (base state and flags) is a decision still in force: the node is out
    of service (drained, down, failing) or a reboot or power-down was asked for. Otherwise (a node back in service, or
    only in a maintenance reservation, which sets no reason) it is what an ended drain left: Slurm 23.02 to 24.11
    without accounting storage (no slurmdbd) keep the reason after RESUME, where 22.05 and a cluster with slurmdbd
    clear it. Such a leftover is nobody's drain, and no gpuops drain either."""
    return any(state in LIVE_REASON_FLAGS for state in states)


def _parse_record(line):
    name = re.match(r"\ANodeName=(\S+) ", line)
    state = re.search(r" State=(\S+)", line)
    if not name or not state:
        return None
    parts = state.group(1).split("+")
    base, flags = parts[0].upper().rstrip("*~#!%$@^-"), [flag.upper() for flag in parts[1:]]
    reason, user, when = None, None, None
    at = line.find(" Reason=", state.end())
    if at >= 0 and _reason_is_live([base] + flags):
        reason, user, when = _split_reason(line[at + len(" Reason="):])
    return {"node": name.group(1), "state": long_state(base, flags), "base": base, "flags": flags,
            "raw_state": state.group(1), "reason": reason or None, "reason_user": user, "reason_time": when}


def _with_flags(node_info, flags, reason):
    base = (node_info.get("raw_state") or node_info.get("base") or "").split("+")[0]
    return dict(node_info, flags=flags, state=long_state(node_info.get("base") or "", flags), raw_state="+".join([base] + flags),
                reason=reason, reason_user=None, reason_time=None)


def as_drained(node_info, reason):
    """The node as Slurm would show it once drained with reason (check mode's prediction): the DRAIN flag right after
    the base state, as scontrol prints it (IDLE+DRAIN, MIXED+DRAIN: draining), who and when unknown yet."""
    flags = [flag for flag in node_info.get("flags") or [] if flag != "DRAIN"]
    return _with_flags(node_info, ["DRAIN"] + flags, reason)


def as_resumed(node_info):
    """The node as Slurm would show it once resumed (check mode's prediction): no DRAIN flag, no reason."""
    return _with_flags(node_info, [flag for flag in node_info.get("flags") or [] if flag != "DRAIN"], None)


def parse_nodes(text):
    """Every node of `scontrol --oneliner show node [NODE]`: {"node", "state" (as sinfo names it), "base", "flags",
    "raw_state", "reason" (whole: its lines joined by newlines), "reason_user", "reason_time"}."""
    return [record for record in (_parse_record(line) for line in text.splitlines()) if record]


def parse_node(text, node):
    """The node named `node` of parse_nodes(text); SlurmNodeUnknown if absent."""
    for record in parse_nodes(text):
        if record["node"] == node:
            return record
    raise SlurmNodeUnknown(node)


# The sinfo reading the code used before scontrol (plugin_utils/_breaker.py still reads the cluster with it): %N the
# node name, %T the long state, %U who set the reason, %H when, %E the whole reason, last (it may hold "|"). sinfo prints
# a reason's later lines as lines of their own and DOWN+DRAIN as "drained": prefer parse_nodes on scontrol's output.
SINFO_FORMAT = "%N|%T|%U|%H|%E"
SINFO_FLAGS = "*~#!%$@^-"


def sinfo_argv(sinfo, node):
    return [sinfo, "--all", "--noheader", "--Node", "--nodes", node, "--format", SINFO_FORMAT]


def base_state(state):
    """'drained*' -> 'drained' (lower case, sinfo's flag characters off)."""
    return state.strip().lower().rstrip(SINFO_FLAGS)


def parse_sinfo(text, node):
    """{"node", "state", "raw_state", "reason", "reason_user", "reason_time"} of node from sinfo's SINFO_FORMAT lines;
    SlurmNodeUnknown if absent."""
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
    """Whether the node carries the DRAIN flag (drained or draining, DOWN+DRAIN too)."""
    flags = node_info.get("flags")
    if flags is None:
        return node_info.get("state") in ("draining", "drained")
    return "DRAIN" in flags


def state_flags(node_info):
    """The base state and the flags together (DOWN is a base state, DRAIN a flag)."""
    return [node_info.get("base") or ""] + list(node_info.get("flags") or [])


def admin_flags(node_info):
    """The flags of an administrator's (or Slurm's own) decision the node carries: DOWN, FAIL, MAINTENANCE, REBOOT_..."""
    return [flag for flag in state_flags(node_info) if flag in HANDS_OFF_FLAGS]


def out_of_service(node_info):
    """Whether no job can start on the node (drained, down or failing), whoever took it out."""
    return any(flag in OUT_OF_SERVICE_FLAGS for flag in state_flags(node_info))


def reason_run_id(run_id):
    """The run id as written into a reason: what the reason can hold and be read back from (no ':', '(' or ')')."""
    return re.sub(r"[^A-Za-z0-9._@+-]", "_", str(run_id))


def drain_reason(marker, run_id, purpose):
    """The reason we drain with: the marker first (that is how we know it again), then the run and what for."""
    return "%s (run %s: %s)" % (marker, reason_run_id(run_id), re.sub(r"[()\[\]]", "", purpose))


HOLD_REASON_MAX = 200


def hold_reason(run_id, why):
    """The reason a node is kept out of service with once its GPUs failed the health check: not a drain_reason (it does
    not start with the marker), so that no later run resumes it; a person does, once the GPUs are repaired."""
    why = re.sub(r"\s+", " ", _CONTROL.sub(" ", why)).strip()
    reason = "gpuops: GPU health check failed (run %s) - %s; resume by hand once repaired" % (reason_run_id(run_id), why)
    return reason if len(reason) <= HOLD_REASON_MAX else reason[:HOLD_REASON_MAX - 3] + "..."


# scontrol cannot show every reason whole: it drops a reason's empty lines (a trailing newline is gone) and a reason
# may itself hold " [user@time] Comment=..." where the real stamp would be. sinfo's %E prints the reason as stored.
SINFO_REASON_FORMAT = "%E"


def sinfo_reason_argv(sinfo, node):
    return [sinfo, "--all", "--noheader", "--Node", "--nodes", node, "--format", SINFO_REASON_FORMAT]


def reason_read_whole(reason, sinfo_text):
    """Whether sinfo's %E lines (one per partition of the node) are exactly `reason`, once or more, and nothing else."""
    line = "%s\n" % reason
    count = len(sinfo_text or "") // len(line)
    return count >= 1 and sinfo_text == line * count


def _read_as_stored(node_info):
    """Whether the reason scontrol showed is the one Slurm stores: sinfo's reading agrees, or sinfo was not asked."""
    stored = node_info.get("sinfo_reason")
    return stored is None or reason_read_whole(node_info.get("reason"), stored)


def drain_run(node_info, marker):
    """The run id of a gpuops drain (the DRAIN flag, and the whole reason exactly what drain_reason writes), or None.

    A reason that only starts with the marker ("<marker> failed, RMA - do not resume"), or whose first line is ours and
    more lines follow, is not ours: someone wrote it. Nor is one that scontrol shows as ours while sinfo shows it
    otherwise (node_info's "sinfo_reason", where read: an empty line, a stamp of the reason's own).
    """
    if not is_drained(node_info):
        return None
    if not _read_as_stored(node_info):
        return None
    match = re.fullmatch(r"%s \(run ([A-Za-z0-9._@+-]+): [^()\[\]\x00-\x1f\x7f]*\)" % re.escape(marker),
                         node_info.get("reason") or "")
    return match.group(1) if match else None


def hands_off(node_info, marker):
    """Why the node is left exactly as found, or "": an administrator's state (DOWN, FAIL, MAINTENANCE, REBOOT_...), or
    a reason that is not a gpuops drain's (someone else's drain, note or Slurm's own)."""
    why = []
    flags = admin_flags(node_info)
    if flags:
        why.append("its state is %s (%s)" % (node_info.get("raw_state"), ", ".join(flags)))
    if node_info.get("reason") and drain_run(node_info, marker) is None:
        why.append("it carries someone else's reason %s" % describe_reason(node_info))
    return " and ".join(why)


def describe_reason(node_info):
    """'<reason>' (by <user> at <time>), for messages and reports."""
    if not node_info.get("reason"):
        return "none"
    text = repr(node_info.get("reason"))
    if not _read_as_stored(node_info):
        text += " (stored as %r, as sinfo shows it)" % node_info["sinfo_reason"]
    if node_info.get("reason_user") or node_info.get("reason_time"):
        text += " (by %s at %s)" % (node_info.get("reason_user") or "?", node_info.get("reason_time") or "?")
    return text


# The journal action of the GPUs' health check (module gpu_health_check): its intent is written before dcgmi runs.
GATE_ACTION = "health_check"


def gate_unfinished(records, run):
    """Why the drain of gpuops run `run` must not be resumed: that run began the GPUs' health check (its intent in the
    node journal) and no health check passed since (the run was killed during it, or died before acting on a failure);
    else None."""
    last = None
    for at, record in enumerate(records):
        if record.get("action") == GATE_ACTION and record.get("phase") == "intent" and reason_run_id(record.get("run_id")) == run:
            last = at
    if last is None:
        return None
    later = records[last + 1:]
    if any(record.get("action") == GATE_ACTION and record.get("phase") == "outcome" and record.get("ok") is True
           for record in later):
        return None
    intent = records[last]
    ended = [record for record in later if record.get("phase") == "outcome" and record.get("id") == intent.get("id")]
    if not ended:
        return "the health check run %s began at %s never finished" % (run, intent.get("ts"))
    return "the GPU health check of run %s failed at %s (%s), and the node was not held" % (
        run, ended[0].get("ts"), ended[0].get("reason") or ended[0].get("result"))


def drained_with_marker(nodes, marker):
    """{node name: run id} of the nodes (parse_node results) drained by gpuops with this marker: what a fleet circuit
    breaker counts as the drains of our runs."""
    return dict((node["node"], drain_run(node, marker)) for node in nodes if drain_run(node, marker) is not None)
