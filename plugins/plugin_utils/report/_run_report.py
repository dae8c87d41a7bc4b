# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The run report, built on the controller from what every host of the play left in its variables.

A host that walked the ladder left `gpu_reclaim_outcome`; a host that was only inspected (gpu_report.yml), its
`gpu_inspect_snapshot` and `gpu_inspect_summary`; a host that failed before its inspection, neither.
The report is JSON (docs/ladder.md, "The run report"), Markdown and HTML (_report_html.py, docs/report.md), written
next to each other; every figure the Markdown and the HTML show is one of the JSON's, computed here once.
"""

from __future__ import annotations

import hashlib
import json
import os

from ansible_collections.gpuops.remediation.plugins.module_utils._escape import markdown, markdown_code, printable
from ansible_collections.gpuops.remediation.plugins.module_utils._safe_files import open_dir, write_atomic_in
from ansible_collections.gpuops.remediation.plugins.module_utils._gpu_names import holder_command
from ansible_collections.gpuops.remediation.plugins.module_utils._verdict import NO_RUNG
from ansible_collections.gpuops.remediation.plugins.plugin_utils.ladder._ladder_decisions import busy_evidence_refusal
from ansible_collections.gpuops.remediation.plugins.plugin_utils.ladder._ladder_options import WalkOptions
from ansible_collections.gpuops.remediation.plugins.plugin_utils.ladder._ladder_outcome import rung_result
from ansible_collections.gpuops.remediation.plugins.plugin_utils._words import plural
from ansible_collections.gpuops.remediation.plugins.plugin_utils.report._triage import fleet_triage, triage

STATUSES = ("fixed", "partly fixed", "clean", "planned", "failed", "refused", "inspected", "not_reached", "undetermined")
_GPU_FIELDS = ("index", "name", "pci_bus_id", "state", "memory_used_mib", "memory_total_mib", "unattributed_mib")
BAR_SEGMENTS = ("attributed_mib", "ghost_mib", "in_use_mib", "reserved_mib", "free_mib")
_HOLDER_FIELDS = ("pid", "name", "user", "class", "state", "gpus", "used_mib", "ppid", "parent_name")


def _pick(item, fields):
    return dict((key, item[key]) for key in fields if key in item)


def memory_bar(when, total, used, ghost, reserved):
    """One bar of a GPU's memory, in MiB: attributed (live processes) + ghost + reserved (the driver's) + free = total.
    With the split unknown (ghost None: a process without a figure, as under WDDM) the used memory is one `in_use`
    segment; with no figure for the GPU, every segment is None."""
    memory = dict((segment, None) for segment in BAR_SEGMENTS)
    memory.update(when=when, total_mib=total)
    if used is None:
        return memory
    reserved = reserved or 0
    if ghost is None:
        memory["in_use_mib"] = used
    else:
        memory["ghost_mib"] = min(ghost, used)
        memory["attributed_mib"] = used - memory["ghost_mib"]
    if total is not None:
        memory["reserved_mib"] = reserved
        memory["free_mib"] = max(total - used - reserved, 0)
    return memory


def _snapshot_gpus(snapshot):
    return dict((gpu.get("index"), gpu) for gpu in (snapshot or {}).get("gpus", []))


def _identity(gpu):
    """What a vendor takes a lost GPU back by: its UUID and serial, and where they came from when the driver could not
    say them (the watch's state); nothing more for a GPU the driver answers for."""
    if not gpu.get("lost") and gpu.get("state") != "lost":
        return {}
    return dict((field, gpu.get(field)) for field in ("uuid", "serial", "identity_from"))


def _walked_gpu(gpu, seen, walked):
    """A GPU of a ladder's outcome with its bars: before, and after when a rung ran; its total from the host's snapshot."""
    total, reserved = seen.get("memory_total_mib"), seen.get("memory_reserved_mib")
    bars = [memory_bar("before", total, gpu.get("memory_used_mib_before"), gpu.get("ghost_mib_before"), reserved)]
    if walked and gpu.get("memory_used_mib_after") is not None:
        bars.append(memory_bar("after", total, gpu["memory_used_mib_after"], None, reserved))
    return dict(gpu, memory_total_mib=total, bars=bars, **_identity(seen))


def _inspected_gpu(gpu):
    picked = dict((field, gpu.get(field)) for field in _GPU_FIELDS)  # a lost GPU's unknown figures are None, never missing
    picked.update(_identity(gpu))
    picked["bars"] = [memory_bar("now", gpu.get("memory_total_mib"), gpu.get("memory_used_mib"), gpu.get("unattributed_mib"),
                                 gpu.get("memory_reserved_mib"))]
    return picked


def host_entry(host, outcome=None, snapshot=None, summary=None, refusal=None, platform="linux"):
    """One host's line of the report; `refusal`: why the run refused the host before any action (the fleet guard).
    Every GPU gets its memory bars (memory_bar), the figures the HTML report draws. An inspected host (no walk) keeps
    the walk's own refusal of a GPU that working programs share (`held_back`: _ladder_decisions.busy_evidence_refusal,
    on the host's `platform`, with the walk's defaults), so that a read-only report grades it as the walk would."""
    if outcome is not None:
        entry = dict(outcome)
        entry["host"] = host
        walked = bool(outcome.get("rungs_tried")) and not outcome.get("check_mode")
        seen = _snapshot_gpus(snapshot)
        entry["gpus"] = [_walked_gpu(gpu, seen.get(gpu.get("index"), {}), walked) for gpu in outcome.get("gpus", [])]
        return entry
    if snapshot is not None:
        entry = {
            "host": host, "status": "inspected", "entry_rung": snapshot["verdict"]["rung"],
            "reasons": [reason["reason"] for reason in snapshot["verdict"].get("reasons", [])],
            "gpus": [_inspected_gpu(gpu) for gpu in snapshot.get("gpus", [])],
            "held_by": [dict(_pick(holder, _HOLDER_FIELDS), command=holder_command(holder)) for holder in snapshot.get("holders", [])
                        if holder.get("class") != "gpu_daemon"],
            "summary": list(summary or []),
        }
        options = WalkOptions.before_walk(platform=platform, option_names={"end_running_jobs": "gpu_reclaim_end_running_jobs"})
        held_back = busy_evidence_refusal(snapshot, options)
        if held_back:
            entry["held_back"] = held_back
        if refusal and entry["entry_rung"] != NO_RUNG:
            entry.update(status="refused", msg=refusal)
        elif refusal:  # a fleet-wide refusal: this host needed nothing, it stays clean
            entry.update(status="clean", msg="no GPU memory held: nothing to do")
        return entry
    if refusal:
        return {"host": host, "status": "refused", "msg": refusal}
    return {"host": host, "status": "not_reached", "msg": "failed or not reached before its inspection"}


def triage_lines(groups):
    """The console's first lines: each group with its hosts, one line each saying why and what would allow the next step."""
    lines = []
    for group in groups:
        lines.append("  %s (%s):" % (group["group"], plural(len(group["hosts"]), "host")))
        for host in group["hosts"]:
            why = " - " + host["why"] if host["why"] else ""
            lines.append("    %s: %s%s%s" % (host["host"], host["outcome"], why, "; next: " + host["next"] if host["next"] else ""))
    return lines


def build_report(entries, run_id, kind, check_mode, generated, destructive_hosts=(), warnings=()):
    """The whole report: the hosts' lines and the fleet's totals, with the summary lines printed at the end of a run."""
    for entry in entries:
        entry["triage"] = triage(entry)
    groups = fleet_triage(entries, conditional=check_mode or kind != "reset_gpu")
    by_status = dict((status, [e["host"] for e in entries if e.get("status") == status]) for status in STATUSES)
    fixed_by = {}
    for entry in entries:
        if entry.get("fixed_by"):
            fixed_by.setdefault(entry["fixed_by"], []).append(entry["host"])
    freed = sum(entry.get("memory_freed_mib") or 0 for entry in entries)
    gpus = [gpu for entry in entries for gpu in entry.get("gpus", [])]
    ghost = sum(gpu["bars"][0]["ghost_mib"] or 0 for gpu in gpus if gpu.get("bars"))
    timed = [entry["seconds"] for entry in entries if entry.get("seconds") is not None]
    title = run_id if kind == "reset_gpu" else "gpu_report"
    # The run's totals (the Markdown's Fleet section); the console's summary has the grades and warnings between.
    totals = ["%s: %s%s" % (title, plural(len(entries), "host"), " (check mode: a plan, nothing changed)" if check_mode else "")]
    totals += ["  fixed by %s: %s" % (rung, ", ".join(names)) for rung, names in fixed_by.items()]
    if kind == "reset_gpu" and not check_mode:
        totals.append("  memory back: %d MiB" % freed)
    summary = totals[:1] + triage_lines(groups) + ["  warning: %s" % warning for warning in warnings] + totals[1:]
    return {
        "run_id": run_id, "kind": kind, "generated": generated, "check_mode": check_mode, "hosts": entries,
        "fleet": {"hosts": len(entries), "by_status": by_status, "fixed_by": fixed_by, "memory_freed_mib": freed,
                  "count_by_status": dict((status, len(names)) for status, names in by_status.items()),
                  "gpus": len(gpus), "ghost_mib": ghost, "seconds_longest": max(timed) if timed else None,
                  "destructive_hosts": list(destructive_hosts), "triage": groups, "warnings": list(warnings), "totals": totals, "summary": summary},
    }


def _cell(value):
    """A Markdown table cell or list item: None and missing are empty; a name from a node stays text (_escape.markdown):
    a pipe, a newline, markup (<img src=x onerror=...>, [link](...)) or an ESC in it cannot break or forge the report."""
    return markdown(value)


def _row(cells):
    return "| " + " | ".join(_cell(cell) for cell in cells) + " |"


def _holder_name(holder):
    name = holder.get("command") or holder.get("name")
    if holder.get("class") == "zombie":
        return "%s (zombie of %s %s)" % (name, holder.get("ppid"), holder.get("parent_name"))
    return name


def _host_markdown(entry):
    lines = ["", "## %s: %s" % (_cell(entry["host"]), _cell(entry.get("status"))), ""]
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
        result = _cell(rung_result(step, entry.get("check_mode")))
        lines.append("- rung **%s**: %s" % (_cell(step.get("rung")), result))
        lines += ["  - %s" % _cell(line) for line in step.get("plan", [])]
    if entry.get("rungs_tried"):
        lines.append("")  # a paragraph after a list must be apart from it, or Markdown reads it as the list's last item
    if entry.get("drain_notes"):  # the scheduler: drained, resumed, held, left someone else's, with the reason
        lines += ["Scheduler:", ""] + ["- %s" % _cell(note) for note in entry["drain_notes"]] + [""]
    if entry.get("reasons"):
        lines += ["Evidence:", ""]
        lines += ["- %s" % _cell(reason) for reason in entry["reasons"]]
    return lines


def _triage_markdown(groups):
    """What needs a human first: a heading per group, one item per host with why and what would allow the next step."""
    lines = []
    for group in groups:
        lines += ["## %s (%s)" % (group["group"].capitalize(), plural(len(group["hosts"]), "host")), ""]
        lines += ["- **%s**: %s%s%s" % (_cell(host["host"]), _cell(host["outcome"]), " - " + _cell(host["why"]) if host["why"] else "",
                                        "; next: " + _cell(host["next"]) if host["next"] else "") for host in group["hosts"]]
        lines.append("")
    return lines + ["## Hosts", ""] if lines else lines


def render_markdown(report):
    """The report for people: one table of the hosts, the fleet's summary, then each host's holders, GPUs and rungs."""
    lines = ["# GPU memory report %s" % markdown_code(report["run_id"]), "",
             "Generated %s%s." % (_cell(report["generated"]), " in check mode: a plan, nothing was changed" if report["check_mode"] else ""),
             ""]
    warnings = ["> **Warning:** %s" % _cell(warning) for warning in report["fleet"].get("warnings", [])]
    lines += warnings + ([""] if warnings else []) + _triage_markdown(report["fleet"].get("triage", []))
    lines += ["| host | status | entry rung | fixed by | rungs tried | memory back (MiB) | seconds |", "|---|---|---|---|---|---:|---:|"]
    for entry in report["hosts"]:
        lines.append(_row([entry["host"], entry.get("status"), entry.get("entry_rung"), entry.get("fixed_by"),
                           ", ".join(step.get("rung", "") for step in entry.get("rungs_tried", [])),
                           entry.get("memory_freed_mib"), entry.get("seconds")]))
    # a code block: text as it is; the hosts' grades are above, as Markdown
    lines += ["", "## Fleet", ""] + ["    " + printable(line) for line in report["fleet"].get("totals", report["fleet"]["summary"])]
    for entry in report["hosts"]:
        lines += _host_markdown(entry)
    return "\n".join(lines) + "\n"


def latest_name(kind, check_mode):
    """The name of the copies a run's report also goes to: `latest`; a reset_gpu plan (check mode) has its own,
    `latest-plan`, so that the report of the last real run stays where readers look for it."""
    return "latest-plan" if check_mode and kind == "reset_gpu" else "latest"


def report_name(run_id, hosts, job_id=None, process_id=None):
    """The name of a run's report files: the run id, the job's id (AWX), a digest of the play's hosts (each slice of a
    sliced job has its own) and the controller process's id. Two slices of one job, or two jobs in the same second on
    a shared volume, never write the same file; the batches of one serial run (same hosts, same process) rewrite theirs."""
    digest = hashlib.sha256("\n".join(sorted(str(host) for host in hosts)).encode("utf-8")).hexdigest()[:10]
    parts = [str(run_id)] + (["job%s" % job_id] if job_id not in (None, "") else []) + ["h" + digest]
    parts += ["p%d" % process_id] if process_id is not None else []
    return "-".join(part.replace(os.sep, "_") for part in parts)


REPORT_DIR_OPTION = "dest (gpu_remediate_report_dir)"


def write_report(directory, report, markdown, page, name=None, latest="latest"):
    """<name>.json, .md and .html (`page`), and the same as <latest>.*; each replaced whole (a reader never sees half).
    name: report_name(), by default the run id; latest: latest_name()."""
    text = json.dumps(report, indent=4, sort_keys=True) + "\n"
    paths = []
    files = ((".json", text), (".md", markdown), (".html", page))
    stem = name or report["run_id"]
    # One directory, reached once without a link and refused when another user can write it (_safe_files.open_dir).
    dir_fd = open_dir(directory, REPORT_DIR_OPTION, create=True, mode=0o750)
    try:
        for name, content in [(stem + ext, content) for ext, content in files] + [(latest + ext, content) for ext, content in files]:
            write_atomic_in(dir_fd, name, content, 0o640)
            paths.append(os.path.join(directory, name))
    finally:
        os.close(dir_fd)
    return paths


def report_lines(summary, paths):
    """What a run shows at its end: the fleet's summary, then where the report is (its Markdown and HTML files,
    write_report's second and third paths), or that it was not written."""
    where = "report: " + ", ".join(paths[1:3]) if paths else "report not written (gpu_remediate_write_report=false)"
    return [printable(line) for line in list(summary) + [where]]
