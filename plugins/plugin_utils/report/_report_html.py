# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The run report as one self-contained HTML page (inline CSS, no script, no fetch), built from the JSON report alone.

Every figure on the page is a value of the JSON report, printed in an element whose `data-path` names where it is
in the report (`hosts.0.gpus.1.bars.0.ghost_mib`): the page computes none, and a test can check each against the JSON.
Bar widths are the only arithmetic here, and they are drawing, not figures. Every string from a node (host, process,
user and GPU names, messages) is hostile data and goes through `_text`.
"""

from __future__ import annotations

from ansible_collections.gpuops.remediation.plugins.module_utils._escape import html_text
from ansible_collections.gpuops.remediation.plugins.plugin_utils.ladder._ladder_outcome import rung_result
from ansible_collections.gpuops.remediation.plugins.plugin_utils.report._run_report import STATUSES
from ansible_collections.gpuops.remediation.plugins.plugin_utils._words import plural

# A bar's segments, in drawing order, with their legend.
SEGMENTS = (
    ("attributed_mib", "attributed", "held by live processes"),
    ("ghost_mib", "ghost", "no live process accounts for it"),
    ("in_use_mib", "in use", "not split (WDDM, or after a rung)"),
    ("reserved_mib", "reserved", "the driver's"),
    ("free_mib", "free", "not in use"),
)
_BAR_TITLES = {"now": "now", "before": "before", "after": "after"}

CSS = """
:root{--ink:#1f2328;--mute:#656d76;--line:#d0d7de;--card:#fff;--page:#f6f8fa;
--attributed:#2f6fde;--ghost:#e8590c;--in_use:#8c959f;--reserved:#57606a;--free:#dcfce7;
--fixed:#1a7f37;--partly_fixed:#bf8700;--clean:#0e7490;--planned:#0969da;--failed:#cf222e;--refused:#9a6700;--inspected:#57606a;--not_reached:#8250df;--undetermined:#6e7781}
*{box-sizing:border-box}
body{margin:0;background:var(--page);color:var(--ink);font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
main{max-width:1320px;margin:0 auto;padding:24px 28px 48px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:16px;margin:0}h3{font-size:13px;margin:14px 0 6px;color:var(--mute);text-transform:uppercase;letter-spacing:.04em}
.sub{color:var(--mute);margin:0 0 18px}.sub code{font-size:13px}
.plan{background:#ddf4ff;border:1px solid #54aeff;border-radius:6px;padding:8px 12px;margin:0 0 16px}
.cards{display:flex;flex-wrap:wrap;gap:12px;margin:0 0 16px}
.card{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:10px 16px;min-width:150px}
.card b{display:block;font-size:24px;font-weight:650;font-variant-numeric:tabular-nums}.card b small{font-size:14px;font-weight:500;color:var(--mute)}
.card .lbl{color:var(--mute);font-size:12px}
.counts{display:flex;flex-wrap:wrap;gap:8px;margin:0 0 14px}
.count{border-radius:999px;padding:3px 12px 3px 10px;background:var(--card);border:1px solid var(--line);font-size:13px}
.count b{font-variant-numeric:tabular-nums}.count.zero{opacity:.45}
.dot{display:inline-block;width:9px;height:9px;border-radius:50%;margin-right:6px;vertical-align:0}
.badge{display:inline-block;color:#fff;border-radius:4px;padding:1px 8px;font-size:12px;font-weight:600;letter-spacing:.02em}
.legend{display:flex;flex-wrap:wrap;gap:16px;margin:0 0 12px;color:var(--mute);font-size:12px}
.legend i{display:inline-block;width:14px;height:10px;border-radius:2px;margin-right:5px;vertical-align:-1px}
.seg-attributed_mib{background:var(--attributed)}.seg-ghost_mib{background:var(--ghost)}.seg-in_use_mib{background:var(--in_use)}
.seg-reserved_mib{background:repeating-linear-gradient(135deg,var(--reserved) 0 3px,#8c959f 3px 6px)}
.seg-free_mib{background:var(--free);box-shadow:inset 0 0 0 1px #a7dfb9}
table{border-collapse:collapse;width:100%;background:var(--card)}
th,td{padding:5px 10px;border-bottom:1px solid var(--line);text-align:left;vertical-align:top}
th{font-size:12px;color:var(--mute);font-weight:600;background:#f6f8fa}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.wrap{border:1px solid var(--line);border-radius:8px;overflow:hidden;margin:0 0 22px}.wrap.narrow{max-width:520px}
.mini{display:flex;gap:3px;align-items:center}.mini .bar{width:64px;height:10px}
.bar{display:flex;height:18px;border-radius:3px;overflow:hidden;background:#eaeef2}
.bar.none{background:repeating-linear-gradient(45deg,#eaeef2 0 6px,#f6f8fa 6px 12px)}
.host{background:var(--card);border:1px solid var(--line);border-left:5px solid var(--line);border-radius:8px;margin:0 0 14px}
.host>summary{list-style:none;cursor:pointer;display:flex;flex-wrap:wrap;gap:10px;align-items:center;padding:10px 14px}
.host>summary::-webkit-details-marker{display:none}
.host .body{padding:0 14px 14px}
.msg{color:var(--mute)}.facts{color:var(--mute);font-size:13px;margin-left:auto}.facts b{color:var(--ink);font-variant-numeric:tabular-nums}
.gpus{display:grid;grid-template-columns:repeat(auto-fill,minmax(380px,1fr));gap:12px}
.gpu{border:1px solid var(--line);border-radius:6px;padding:10px 12px}
.gpu .head{margin-bottom:6px}.gpu .where{color:var(--mute);font-size:12px}
.row{display:grid;grid-template-columns:52px 1fr;gap:8px;align-items:center;margin:6px 0 2px}.row .when{color:var(--mute);font-size:12px}
.figs{display:flex;flex-wrap:wrap;gap:4px 14px;font-size:12px;color:var(--mute);margin:2px 0 4px 60px}
.figs b{color:var(--ink);font-variant-numeric:tabular-nums;font-weight:600}
.back{color:var(--fixed);font-weight:600}
ul{margin:4px 0;padding-left:20px}li{margin:2px 0}.plan-line{color:var(--mute);font-size:13px}
.na{color:var(--mute);font-style:italic}.none{color:var(--mute)}
.triage{margin:0 0 18px}
.tgroup{background:var(--card);border:1px solid var(--line);border-left:6px solid var(--line);border-radius:8px;padding:8px 14px;margin:0 0 10px}
.tgroup h2{margin:0 0 4px}.tgroup li{margin:4px 0}.tgroup .next{display:block;color:var(--mute);font-size:13px}
.g-needs_a_human{--g:#cf222e}.g-held_back{--g:#bf8700}.g-fixed,.g-would_be_fixed{--g:#1a7f37}.g-clean{--g:#0e7490}
.tgroup{border-left-color:var(--g,var(--line))}
.warning{background:#fff8c5;border:1px solid #d4a72c;border-radius:6px;padding:6px 12px;margin:0 0 10px}
.gbadge{display:inline-block;color:#fff;background:var(--g);border-radius:4px;padding:1px 8px;font-size:12px;font-weight:600}
"""


def _text(value):
    """A string from the report as HTML text or an attribute value (_escape.html_text: controls shown as escapes, every
    <, >, & and quote escaped)."""
    return html_text(value)


def _figure(value, path, unit="", grouped=False):
    """A value of the report, in an element that names its place in the report; None is n/a (unknown), never 0.
    `grouped`: thousands apart (memory); a pid or an index is printed as it is."""
    field = path.rsplit(".", 1)[-1]
    if value is None:
        shown = '<span class="na">n/a</span>'
    elif isinstance(value, float):
        shown = "%.1f" % value
    elif isinstance(value, int) and not isinstance(value, bool) and grouped:
        shown = "{:,}".format(value)
    else:
        shown = _text(value)
    tail = " <small>%s</small>" % unit if unit and value is not None else ""
    return '<span data-field="%s" data-path="%s">%s</span>%s' % (_text(field), _text(path), shown, tail)


def _mib(value, path, unit=True):
    return _figure(value, path, "MiB" if unit else "", grouped=True)


def _colour(status):
    return "var(--%s)" % (status.replace(" ", "_") if status in STATUSES else "inspected")


def _badge(status, path):
    return '<span class="badge" style="background:%s">%s</span>' % (_colour(status), _figure(status, path))


def _group_class(group):
    return "g-" + str(group).replace(" ", "_")


def _triage(report):
    """What needs a human first: each group with its hosts, one line why and what would allow the next step."""
    groups = []
    for number, group in enumerate(report["fleet"].get("triage", [])):
        at = dict((entry["host"], index) for index, entry in enumerate(report["hosts"]))
        path = "fleet.triage.%d" % number
        items = "".join(
            '<li class="%s"><a href="#host-%d"><b>%s</b></a> <span class="gbadge">%s</span> %s%s</li>' % (
                _group_class(group["group"]), at.get(host["host"], 0), _figure(host["host"], "%s.hosts.%d.host" % (path, i)),
                _figure(host["outcome"], "%s.hosts.%d.outcome" % (path, i)),
                _figure(host["why"], "%s.hosts.%d.why" % (path, i)) if host["why"] else "",
                '<span class="next">next: %s</span>' % _figure(host["next"], "%s.hosts.%d.next" % (path, i)) if host["next"] else "")
            for i, host in enumerate(group["hosts"]))
        groups.append('<div class="tgroup %s" data-group="%s"><h2>%s <small>(%s)</small></h2><ul>%s</ul></div>' % (
            _group_class(group["group"]), _text(group["group"]), _figure(group["group"], path + ".group"),
            plural(len(group["hosts"]), "host"), items))
    warnings = "".join('<p class="warning">warning: %s</p>' % _figure(warning, "fleet.warnings.%d" % at)
                       for at, warning in enumerate(report["fleet"].get("warnings", [])))
    return '<section class="triage" data-scope="triage">%s%s</section>' % (warnings, "".join(groups))


def _bar(memory, css_class="bar"):
    total = memory.get("total_mib")
    if not total or all(memory.get(segment[0]) is None for segment in SEGMENTS):
        return '<div class="%s none" title="no memory figures"></div>' % css_class
    parts = []
    for key, label, _why in SEGMENTS:
        value = memory.get(key)
        if value:
            parts.append('<i class="seg-%s" style="width:%.3f%%" title="%s: %s MiB"></i>' % (
                key, 100.0 * value / total, label, "{:,}".format(value)))
    return '<div class="%s">%s</div>' % (css_class, "".join(parts))


def _labelled(label, figure):
    return "<span>%s <b>%s</b></span>" % (label, figure)


def _bar_figures(memory, path):
    # Before a rung the split is the point: attributed and ghost are shown even when unknown (n/a, as under WDDM).
    split = ("attributed_mib", "ghost_mib") if memory.get("when") != "after" else ()
    figures = [_labelled(label, _mib(memory.get(key), "%s.%s" % (path, key)))
               for key, label, _why in SEGMENTS if memory.get(key) is not None or key in split]
    return '<div class="figs">%s</div>' % "".join(figures)


def _gpu(gpu, path):
    state = _figure(gpu.get("state_before", gpu.get("state")), path + (".state_before" if "state_before" in gpu else ".state"))
    if "state_after" in gpu and gpu.get("bars") and len(gpu["bars"]) > 1:
        state += " &rarr; " + _figure(gpu["state_after"], path + ".state_after")
    rows = []
    for at, memory in enumerate(gpu.get("bars", [])):
        bar_path = "%s.bars.%d" % (path, at)
        rows.append('<div class="row" data-bar="%s"><span class="when">%s</span>%s</div>%s' % (
            _text(memory.get("when")), _text(_BAR_TITLES.get(memory.get("when"), memory.get("when"))), _bar(memory),
            _bar_figures(memory, bar_path)))
    back = ""
    if "freed_mib" in gpu and len(gpu.get("bars", [])) > 1:
        back = '<div class="figs back"><span>%s back</span></div>' % _mib(gpu["freed_mib"], path + ".freed_mib")
    total = gpu.get("memory_total_mib")
    return ('<div class="gpu" data-gpu="%s"><div class="head"><b>GPU %s &middot; %s</b><div class="where">%s &middot; %s &middot; %s total</div>'
            '</div>%s%s</div>' % (
                _text(gpu.get("index")), _figure(gpu.get("index"), path + ".index"), _text(gpu.get("name") or "unnamed GPU"),
                _text(gpu.get("pci_bus_id") or "no bus id"), state, _mib(total, path + ".memory_total_mib"), "".join(rows), back))


def _holders(entry, path):
    if not entry.get("held_by"):
        return ""
    rows = []
    for at, holder in enumerate(entry["held_by"]):
        where = "%s.held_by.%d" % (path, at)
        name = _text(holder.get("command") or holder.get("name"))
        if holder.get("class") == "zombie":
            name += ' <span class="msg">(zombie of %s %s)</span>' % (_text(holder.get("ppid")), _text(holder.get("parent_name")))
        rows.append('<tr data-pid="%s"><td class="n">%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td class="n">%s</td></tr>' % (
            _text(holder.get("pid")), _figure(holder.get("pid"), where + ".pid"), name, _text(holder.get("user") or "?"),
            _text(holder.get("class")), _text(", ".join(str(gpu) for gpu in holder.get("gpus", [])) or "none (node-wide files)"),
            _mib(holder.get("used_mib"), where + ".used_mib")))
    return ('<h3>Held by</h3><div class="wrap"><table><thead><tr><th class="n">pid</th><th>process</th><th>user</th><th>class</th>'
            '<th>GPUs</th><th class="n">memory</th></tr></thead><tbody>%s</tbody></table></div>' % "".join(rows))


def _rungs(entry):
    if not entry.get("rungs_tried"):
        return ""
    items = []
    for step in entry["rungs_tried"]:
        result = _text(rung_result(step, entry.get("check_mode")))
        plan = "".join('<li class="plan-line">%s</li>' % _text(line) for line in step.get("plan", []))
        items.append("<li><b>%s</b>: %s%s</li>" % (_text(step.get("rung")), result, "<ul>%s</ul>" % plan if plan else ""))
    return "<h3>%s</h3><ul>%s</ul>" % ("Rungs it would take" if entry.get("check_mode") else "Rungs taken", "".join(items))


def _health_check(entry, path):
    check = entry.get("health_check")
    if not check:
        return ""
    colour = {"pass": "fixed", "fail": "failed"}.get(check.get("result"), "inspected")
    tests = "".join('<tr><td>%s</td><td>%s</td></tr>' % (_text(test.get("name")), _figure(test.get("result"), "%s.health_check.tests.%d.result" % (path, at)))
                    for at, test in enumerate(check.get("tests", [])))
    table = ('<div class="wrap narrow"><table><thead><tr><th>test</th><th>result</th></tr></thead><tbody>%s</tbody></table></div>' % tests
             if tests else "")
    return ('<h3>Health check</h3><p>%s level %s: <span class="badge" style="background:var(--%s)">%s</span> <span class="msg">%s</span></p>%s' % (
        _text(check.get("tool")), _figure(check.get("level"), path + ".health_check.level"), colour,
        _figure(check.get("result"), path + ".health_check.result"), _text(check.get("reason")), table))


def _scheduler(entry):
    """What the scheduler was told: drained, resumed, held, left someone else's - with the reason."""
    if not entry.get("drain_notes"):
        return ""
    return "<h3>Scheduler</h3><ul>%s</ul>" % "".join("<li>%s</li>" % _text(note) for note in entry["drain_notes"])


def _reasons(entry):
    if not entry.get("reasons"):
        return ""
    return "<h3>Evidence</h3><ul>%s</ul>" % "".join("<li>%s</li>" % _text(reason) for reason in entry["reasons"])


def _host(entry, at):
    path = "hosts.%d" % at
    status = entry.get("status")
    facts = []
    if entry.get("entry_rung"):
        facts.append("entry rung <b>%s</b>" % _figure(entry["entry_rung"], path + ".entry_rung"))
    if entry.get("fixed_by"):
        facts.append("fixed by <b>%s</b>" % _figure(entry["fixed_by"], path + ".fixed_by"))
    if "memory_freed_mib" in entry:
        facts.append("back <b>%s</b>" % _mib(entry["memory_freed_mib"], path + ".memory_freed_mib"))
    if "seconds" in entry:
        facts.append("took <b>%s</b>" % _figure(entry["seconds"], path + ".seconds", "s"))
    gpus = entry.get("gpus")
    if gpus:
        body = '<div class="gpus">%s</div>' % "".join(_gpu(gpu, "%s.gpus.%d" % (path, i)) for i, gpu in enumerate(gpus))
    elif gpus is not None:
        body = '<p class="none">no GPU found on this host</p>'
    else:
        body = '<p class="none">no GPU figures: the host left no snapshot</p>'
    grade = entry.get("triage") or {}
    opened = "" if grade.get("group") == "clean" and not entry.get("held_by") else " open"
    return ('<details class="host %s" id="host-%d" data-host="%s" style="border-left-color:var(--g, %s)"%s><summary><h2>%s</h2>'
            '<span class="gbadge">%s</span>%s<span class="msg">%s</span><span class="facts">%s</span></summary>'
            '<div class="body">%s%s%s%s%s%s</div></details>' % (
                _group_class(grade.get("group")), at, _text(entry.get("host")), _colour(status), opened,
                _figure(entry.get("host"), path + ".host"), _figure(grade.get("outcome"), path + ".triage.outcome"),
                _badge(status, path + ".status"), _text(entry.get("msg")), " &middot; ".join(facts), body, _holders(entry, path),
                _rungs(entry), _scheduler(entry), _health_check(entry, path), _reasons(entry)))


def _overview_row(entry, at):
    path = "hosts.%d" % at
    minis = "".join(_bar(gpu["bars"][0], "bar") for gpu in entry.get("gpus", []) if gpu.get("bars")) or '<span class="none">&ndash;</span>'
    rungs = ", ".join(_text(step.get("rung")) for step in entry.get("rungs_tried", [])) or "&ndash;"
    return ('<tr data-host="%s"><td><a href="#host-%d">%s</a></td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td><div class="mini">%s</div></td>'
            '<td class="n">%s</td><td class="n">%s</td></tr>' % (
                _text(entry.get("host")), at, _text(entry.get("host")), _badge(entry.get("status"), path + ".status"),
                _text(entry.get("entry_rung")) or "&ndash;", _text(entry.get("fixed_by")) or "&ndash;", rungs, minis,
                _mib(entry.get("memory_freed_mib"), path + ".memory_freed_mib", unit=False) if "memory_freed_mib" in entry else "&ndash;",
                _figure(entry.get("seconds"), path + ".seconds") if "seconds" in entry else "&ndash;"))


def _summary(report):
    fleet = report["fleet"]
    cards = [(_mib(fleet["hosts"], "fleet.hosts", unit=False), "hosts"), (_mib(fleet.get("gpus"), "fleet.gpus", unit=False), "GPUs"),
             (_mib(fleet.get("ghost_mib"), "fleet.ghost_mib"), "ghost memory found")]
    if report["kind"] == "reset_gpu":
        cards.append((_mib(fleet.get("memory_freed_mib"), "fleet.memory_freed_mib"), "memory recovered"))
        cards.append((_figure(fleet.get("seconds_longest"), "fleet.seconds_longest", "s"), "longest host"))
    counts = fleet.get("count_by_status", {})
    chips = "".join('<span class="count%s"><i class="dot" style="background:%s"></i>%s <b>%s</b></span>' % (
        "" if counts.get(status) else " zero", _colour(status), status.replace("_", " "), _figure(counts.get(status, 0), "fleet.count_by_status." + status))
        for status in STATUSES)
    fixed_by = "".join('<span class="count">fixed by <b>%s</b>: %s</span>' % (_text(rung), _text(", ".join(names)))
                       for rung, names in fleet.get("fixed_by", {}).items())
    return ('<section data-scope="fleet"><div class="cards">%s</div><div class="counts">%s%s</div></section>' % (
        "".join('<div class="card"><b>%s</b><span class="lbl">%s</span></div>' % card for card in cards), chips, fixed_by))


def _legend():
    return '<div class="legend">%s</div>' % "".join('<span><i class="seg-%s"></i><b>%s</b> &ndash; %s</span>' % (key, label, why)
                                                    for key, label, why in SEGMENTS)


def render_html(report):
    """The report as one HTML page: the fleet's summary, a table of the hosts, then each host with its GPUs' bars."""
    hosts = report["hosts"]
    overview = "".join(_overview_row(entry, at) for at, entry in enumerate(hosts))
    title = "GPU memory report %s" % report["run_id"]
    plan = '<p class="plan">Check mode: a plan, nothing was changed.</p>' if report.get("check_mode") else ""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">'
        '<meta name="color-scheme" content="light"><title>%s</title><style>%s</style></head><body><main data-run="%s">'
        '<h1>GPU memory report</h1><p class="sub"><code>%s</code> &middot; %s &middot; generated %s</p>%s%s%s'
        '<div class="wrap"><table><thead><tr><th>host</th><th>status</th><th>entry rung</th><th>fixed by</th><th>rungs taken</th>'
        '<th>GPU memory at the start</th><th class="n">back (MiB)</th><th class="n">time (s)</th></tr></thead><tbody>%s</tbody></table></div>'
        '%s</main></body></html>\n' % (
            _text(title), CSS, _text(report["run_id"]), _figure(report["run_id"], "run_id"), _figure(report["kind"], "kind"),
            _figure(report["generated"], "generated"), plan + _triage(report), _summary(report), _legend(),
            overview or '<tr><td colspan="8" class="none">no hosts</td></tr>', "".join(_host(entry, at) for at, entry in enumerate(hosts))))
