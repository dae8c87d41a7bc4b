# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The run report, built on the controller from what every host of the play left in its variables.

A host that walked the ladder left `gpu_reclaim_outcome`; a host that was only inspected (gpu_report.yml), its
`gpu_inspect_snapshot` and `gpu_inspect_summary`; a host that failed before its inspection, neither.
The report is JSON (docs/ladder.md, "The run report") and Markdown, written next to each other.
"""

from __future__ import annotations

import json
import os
import tempfile

STATUSES = ("fixed", "clean", "planned", "failed", "refused", "inspected", "not_reached")
_GPU_FIELDS = ("index", "name", "pci_bus_id", "state", "memory_used_mib", "memory_total_mib", "unattributed_mib")
_HOLDER_FIELDS = ("pid", "name", "user", "class", "state", "gpus", "used_mib", "ppid", "parent_name")


def _pick(item, fields):
    return dict((key, item[key]) for key in fields if key in item)


def host_entry(host, outcome=None, snapshot=None, summary=None, refusal=None):
    """One host's line of the report; `refusal`: why the run refused the host before any action (the fleet guard)."""
    if outcome is not None:
        entry = dict(outcome)
        entry["host"] = host
        return entry
    if snapshot is not None:
        entry = {
            "host": host, "status": "inspected", "entry_rung": snapshot["verdict"]["rung"],
            "reasons": [reason["reason"] for reason in snapshot["verdict"].get("reasons", [])],
            "gpus": [_pick(gpu, _GPU_FIELDS) for gpu in snapshot.get("gpus", [])],
            "held_by": [_pick(holder, _HOLDER_FIELDS) for holder in snapshot.get("holders", [])
                        if holder.get("class") != "gpu_daemon"],
            "summary": list(summary or []),
        }
        if refusal:
            entry.update(status="refused", msg=refusal)
        return entry
    if refusal:
        return {"host": host, "status": "refused", "msg": refusal}
    return {"host": host, "status": "not_reached", "msg": "failed or not reached before its inspection"}


def build_report(entries, run_id, kind, check_mode, generated, destructive_hosts=()):
    """The whole report: the hosts' lines and the fleet's totals, with the summary lines printed at the end of a run."""
    by_status = dict((status, [e["host"] for e in entries if e.get("status") == status]) for status in STATUSES)
    fixed_by = {}
    for entry in entries:
        if entry.get("fixed_by"):
            fixed_by.setdefault(entry["fixed_by"], []).append(entry["host"])
    freed = sum(entry.get("memory_freed_mib") or 0 for entry in entries)
    title = run_id if kind == "reset_gpu" else "gpu_report"
    summary = ["%s: %d host(s)%s" % (title, len(entries), " (check mode: a plan, nothing changed)" if check_mode else "")]
    summary += ["  %s: %s" % (status, ", ".join(by_status[status])) for status in STATUSES if by_status[status]]
    summary += ["  fixed by %s: %s" % (rung, ", ".join(names)) for rung, names in fixed_by.items()]
    if kind == "reset_gpu" and not check_mode:
        summary.append("  memory back: %d MiB" % freed)
    return {
        "run_id": run_id, "kind": kind, "generated": generated, "check_mode": check_mode, "hosts": entries,
        "fleet": {"hosts": len(entries), "by_status": by_status, "fixed_by": fixed_by, "memory_freed_mib": freed,
                  "destructive_hosts": list(destructive_hosts), "summary": summary},
    }


def _cell(value):
    """A Markdown table cell: None and missing are empty; a pipe or a newline in a process name cannot break the table."""
    if value is None:
        return ""
    return str(value).replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def _row(cells):
    return "| " + " | ".join(_cell(cell) for cell in cells) + " |"


def _holder_name(holder):
    if holder.get("class") == "zombie":
        return "%s (zombie of %s %s)" % (holder.get("name"), holder.get("ppid"), holder.get("parent_name"))
    return holder.get("name")


def _host_markdown(entry):
    lines = ["", "## %s: %s" % (entry["host"], entry.get("status")), ""]
    if entry.get("msg"):
        lines += [_cell(entry["msg"]), ""]
    if entry.get("held_by"):
        lines += ["Held by:", "", "| pid | name | user | class | GPUs | MiB |", "|---:|---|---|---|---|---:|"]
        lines += [_row([h.get("pid"), _holder_name(h), h.get("user") or "?", h.get("class"),
                        ", ".join(str(g) for g in h.get("gpus", [])), "N/A" if h.get("used_mib") is None else h["used_mib"]])
                  for h in entry["held_by"]]
        lines.append("")
    if "gpus" in entry:
        lines += ["| GPU | name | state | used before (MiB) | used after (MiB) | ghost (MiB) | back (MiB) |",
                  "|---:|---|---|---:|---:|---:|---:|"]
        for gpu in entry["gpus"]:
            state = gpu.get("state_before", gpu.get("state", ""))
            if "state_after" in gpu:
                state = "%s -> %s" % (state, gpu["state_after"])
            lines.append(_row([gpu.get("index"), gpu.get("name"), state,
                               gpu.get("memory_used_mib_before", gpu.get("memory_used_mib")), gpu.get("memory_used_mib_after"),
                               gpu.get("ghost_mib_before", gpu.get("unattributed_mib")), gpu.get("freed_mib")]))
        lines.append("")
    for step in entry.get("rungs_tried", []):
        result = "failed: %s" % step.get("msg") if step.get("failed") else ("changed" if step.get("changed") else "nothing to do")
        lines.append("- rung **%s**: %s" % (step.get("rung"), result))
        lines += ["  - %s" % line for line in step.get("plan", [])]
    if entry.get("rungs_tried"):
        lines.append("")  # a paragraph after a list must be apart from it, or Markdown reads it as the list's last item
    if entry.get("reasons"):
        lines += ["Evidence:", ""]
        lines += ["- %s" % _cell(reason) for reason in entry["reasons"]]
    return lines


def render_markdown(report):
    """The report for people: one table of the hosts, the fleet's summary, then each host's holders, GPUs and rungs."""
    lines = ["# GPU memory report `%s`" % report["run_id"], "",
             "Generated %s%s." % (report["generated"], " in check mode: a plan, nothing was changed" if report["check_mode"] else ""),
             "", "| host | status | entry rung | fixed by | rungs tried | memory back (MiB) | seconds |",
             "|---|---|---|---|---|---:|---:|"]
    for entry in report["hosts"]:
        lines.append(_row([entry["host"], entry.get("status"), entry.get("entry_rung"), entry.get("fixed_by"),
                           ", ".join(step.get("rung", "") for step in entry.get("rungs_tried", [])),
                           entry.get("memory_freed_mib"), entry.get("seconds")]))
    lines += ["", "## Fleet", ""] + ["    " + line for line in report["fleet"]["summary"]]
    for entry in report["hosts"]:
        lines += _host_markdown(entry)
    return "\n".join(lines) + "\n"


def _write_atomic(path, text, mode):
    directory = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), dir=directory)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_report(directory, report, markdown):
    """<run id>.json and .md, and the same as latest.json and latest.md; each replaced whole (a reader never sees half)."""
    os.makedirs(directory, mode=0o750, exist_ok=True)
    text = json.dumps(report, indent=4, sort_keys=True) + "\n"
    paths = []
    for name, content in ((report["run_id"] + ".json", text), (report["run_id"] + ".md", markdown),
                          ("latest.json", text), ("latest.md", markdown)):
        path = os.path.join(directory, name)
        _write_atomic(path, content, 0o640)
        paths.append(path)
    return paths
