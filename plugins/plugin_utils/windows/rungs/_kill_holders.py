# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""win_gpu_reset method=kill: each selected holder that is still the same process (pid + creation time against a fresh
process list), with its tree, ended by the terminate script (_end_by_handle); who may be ended is _who_may_end's. What
was ended is read from the process list afterwards, in any language."""

from __future__ import annotations

from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.rungs import _acting_step, _end_by_handle
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.protect import _who_may_end


def act(node, args, check_mode, _sleep, journal):
    entries, by_tree = [], {}  # by_tree: pid -> (the selected pid whose tree ended it, or would, its record)
    policy = _who_may_end.Policy.from_args(args)
    processes = _acting_step.process_list(node)
    fallback = _end_by_handle.unavailable(node) if args["holders"] else None
    for holder in args["holders"]:
        if entries and not check_mode:
            processes = _acting_step.process_list(node)  # fresh before each end: Windows reuses pids quickly
        entry = _kill_one(node, journal, holder, processes, by_tree, policy, check_mode, fallback)
        entries.append(entry)
        if entry["outcome"] in ("would_end", "taskkill_ran") and entry["tree_of"] is None:
            _note_tree(entry, processes, by_tree)
        if check_mode and entry["outcome"] == "would_end":
            # what the run's fresh list would show next: the process and its tree gone (a holder named twice, or one
            # already in an earlier holder's tree, is then predicted as the run finds it)
            gone = set([entry["pid"]] + entry["also_ended"])
            processes = dict((pid, p) for pid, p in processes.items() if pid not in gone)
    if not check_mode and any(e["outcome"] == "taskkill_ran" for e in entries):
        _judge_kills(entries, _acting_step.process_list(node))
    failures = [e for e in entries if e["outcome"] == "failed"]
    ended = [pid for e in entries if e["outcome"] in ("ended", "would_end") for pid in [e["pid"]] + e["also_ended"]]
    result = {"changed": any(e["outcome"] in ("ended", "would_end") or e["also_ended"] for e in entries),
              "processes": entries, "ended_pids": sorted(set(ended)),
              "plan": [e["line"] for e in entries] or ["no holder selected: nothing to end"]}
    if failures:
        result["msg"] = "not ended: %s" % "; ".join(e["line"] for e in failures)
    return result


def _kill_one(node, journal, holder, processes, by_tree, policy, check_mode, fallback):
    process = processes.get(holder["pid"])
    entry = {"pid": holder["pid"], "creation_time_ms": holder["creation_time_ms"], "name": holder.get("name"),
             "user": holder.get("user"), "session_id": holder.get("session_id"), "also_ended": [], "tree_of": None,
             "taskkill": None, "reason": None}
    parent, record = by_tree.get(holder["pid"], (None, None))
    if parent is not None and _acting_step.same(record, holder) and (check_mode or not _acting_step.same(process, holder)):
        verb = "would end" if check_mode else "ended"
        return dict(entry, outcome=verb.replace(" ", "_"), tree_of=parent, name=record["name"],
                    line="%s %s with the tree of pid %s" % (verb, _acting_step.who(record), parent))
    left = _left_reason(holder, process, policy)
    if left:
        outcome, reason = left
        return dict(entry, outcome=outcome, reason=reason, line="left pid %s %s: %s" % (holder["pid"], holder.get("name") or "", reason))
    entry.update(name=process["name"], user=process.get("user"), session_id=process.get("session_id"))
    refused = _who_may_end.tree_refusal(processes, process, policy)
    if refused:
        return dict(entry, outcome="refused", reason=refused, line="left pid %s %s: %s" % (holder["pid"], process["name"], refused))
    if check_mode:
        return dict(entry, outcome="would_end", line="would end %s%s" % (_acting_step.who(process), " " + _end_by_handle.HELD_WORDS if fallback else ""))
    tree = [_acting_step.identity(processes[pid]) for pid in reversed(_who_may_end.descendants(processes, process))]
    return dict(entry, outcome="taskkill_ran", taskkill=_end_by_handle.end(node, journal, process, tree), process=process)


def _note_tree(entry, processes, by_tree):
    """The tree ended (or, in check mode, that would be) with the selected process: its descendants as the process
    list shows them just before (pid + creation time), whatever a tool prints afterwards, in any language.
    In check mode they are all predicted ended; after the run, _judge_kills keeps those gone by pid + creation time."""
    pids = _who_may_end.descendants(processes, processes[entry["pid"]])
    entry["tree"] = [_acting_step.identity(processes[pid]) for pid in pids]
    entry["also_ended"] = sorted(pids)
    for pid in pids:
        by_tree.setdefault(pid, (entry["pid"], processes[pid]))


def _left_reason(holder, process, policy):
    """(outcome, reason) for a holder left alone, or None when it is to be ended."""
    if process is None:
        return "gone", "already gone"
    if not _acting_step.same(process, holder):
        return "pid_reused", "pid reused: pid %s is now %s, started at %s ms, not the process selected (started at %s ms)" % (
            holder["pid"], process.get("name"), process.get("creation_time_ms"), holder["creation_time_ms"])
    refusal = _who_may_end.refusal(process, policy)
    return ("refused", refusal) if refusal else None


def _judge_kills(entries, after):
    """The evidence: a process selected, or one of its tree, is ended only when it is gone by pid + creation time from
    the process list read afterwards (a tool's words are kept for the report: they are localized)."""
    for entry in entries:
        if "tree" in entry:
            entry["also_ended"] = sorted(member["pid"] for member in entry["tree"] if not _acting_step.same(after.get(member["pid"]), member))
        if entry["outcome"] != "taskkill_ran":
            continue
        process, answer = entry.pop("process"), entry["taskkill"]
        how = " " + _end_by_handle.HELD_WORDS if answer.get("method") == "taskkill" else ""
        if _acting_step.same(after.get(entry["pid"]), entry):
            reason = answer["outcome"] if answer["outcome"] != "ended" else "reported ended, the process still runs"
            detail = " (%s)" % answer["message"] if answer["message"] and answer["message"] != reason else ""
            entry.update(outcome="failed", reason=reason, line="could not end %s%s: %s%s" % (_acting_step.who(process), how, reason, detail))
        else:
            entry.update(outcome="ended", line="ended %s%s" % (_acting_step.who(process), how))
