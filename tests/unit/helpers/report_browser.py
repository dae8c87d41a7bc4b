"""The HTML run report as a browser shows it: Debian's headless chromium renders the page, and every figure of the
rendered DOM (an element with `data-path`) is checked against the JSON report at that path.

Used by the unit tests (import) and by the reset_gpu_mixed integration target, on the report of a real run:
    python report_browser.py REPORT.html REPORT.json OUT_DIR
prints what it checked as JSON, writes OUT_DIR/report.png (a screenshot) and OUT_DIR/dom.html, and exits 1 when a
figure differs, is missing, or the page runs a script. Chromium missing is a failure (exit 3), never a skip.
"""
import html.parser
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
DEBIAN_TOOLS = os.path.join(HERE, "..", "..", "..", "tools", "debian_tools.sh")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]
SEGMENTS = ("attributed_mib", "ghost_mib", "in_use_mib", "reserved_mib", "free_mib")


class BrowserMissing(RuntimeError):
    pass


def ensure_chromium():
    done = subprocess.run(["bash", DEBIAN_TOOLS, "ensure", "chromium:chromium"], capture_output=True, text=True, check=False, timeout=600)
    if done.returncode != 0:
        raise BrowserMissing("chromium is needed and could not be installed: %s" % (done.stderr.strip() or done.stdout.strip()))


def render(page, screenshot):
    """The DOM after chromium loaded the page (scripts, if any, have run), and a 1400x1000 screenshot of it."""
    ensure_chromium()
    with tempfile.TemporaryDirectory() as profile:
        argv = ["chromium"] + FLAGS + ["--user-data-dir=" + profile, "--window-size=1400,1000",
                                       "--screenshot=" + os.path.abspath(screenshot), "--dump-dom", "file://" + os.path.abspath(page)]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0 or "<html" not in done.stdout:
        raise RuntimeError("chromium exited %d: %s" % (done.returncode, done.stderr[-2000:]))
    return done.stdout


class Figures(html.parser.HTMLParser):
    """Every element with data-path and the text inside it; the elements that could run code."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.figures = []
        self.scripts = 0
        self.handlers = []
        self.body_attributes = {}
        self._open = []  # [path, depth, text parts] of the figures being read

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag in ("script", "iframe", "object", "embed") or (tag == "img" and attrs.get("src")):
            self.scripts += 1
        self.handlers += [name for name in attrs if name.startswith("on")]
        if tag == "body":
            self.body_attributes = attrs
        for item in self._open:
            item[1] += 1
        if "data-path" in attrs:
            self._open.append([attrs["data-path"], 1, []])

    def handle_endtag(self, tag):
        for item in list(self._open):
            item[1] -= 1
            if item[1] == 0:
                self._open.remove(item)
                self.figures.append((item[0], "".join(item[2]).strip()))

    def handle_data(self, data):
        for item in self._open:
            item[2].append(data)


def read_figures(dom):
    parser = Figures()
    parser.feed(dom)
    parser.close()
    return parser


def at_path(report, path):
    value = report
    for key in path.split("."):
        value = value[int(key)] if isinstance(value, list) else value[key]
    return value


def shown(value):
    """How the page prints a value of the report."""
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return "%.1f" % value
    return str(value)


def expected_paths(report):
    """The figures a reader must find: the fleet's, and per host its status, memory back, time, bars and holders."""
    paths = ["run_id", "fleet.hosts", "fleet.gpus", "fleet.ghost_mib"] + ["fleet.count_by_status." + s for s in report["fleet"]["count_by_status"]]
    if report["kind"] == "reset_gpu":
        paths += ["fleet.memory_freed_mib", "fleet.seconds_longest"]
    for number, group in enumerate(report["fleet"]["triage"]):
        paths += ["fleet.triage.%d.group" % number]
        paths += ["fleet.triage.%d.hosts.%d.%s" % (number, i, key) for i, host in enumerate(group["hosts"])
                  for key in ("host", "outcome", "why", "next") if host[key]]
    for at, entry in enumerate(report["hosts"]):
        host = "hosts.%d" % at
        paths += [host + ".host", host + ".status", host + ".triage.outcome"]
        paths += [host + "." + key for key in ("memory_freed_mib", "seconds", "entry_rung", "fixed_by") if entry.get(key) is not None]
        for i, gpu in enumerate(entry.get("gpus", [])):
            paths += ["%s.gpus.%d.memory_total_mib" % (host, i)]
            for j, memory in enumerate(gpu.get("bars", [])):
                paths += ["%s.gpus.%d.bars.%d.%s" % (host, i, j, key) for key in SEGMENTS if memory[key] is not None]
        paths += ["%s.held_by.%d.used_mib" % (host, i) for i in range(len(entry.get("held_by", [])))]
        if entry.get("health_check"):
            paths += [host + ".health_check.result"]
    return paths


def check(dom, report):
    """What the rendered page shows against the report: {checked, mismatches, missing, scripts, handlers, body}."""
    parsed = read_figures(dom)
    mismatches = []
    for path, text in parsed.figures:
        try:
            value = at_path(report, path)
        except (KeyError, IndexError, ValueError, TypeError):
            mismatches.append({"path": path, "shown": text, "report": "no such path"})
            continue
        grouped = isinstance(value, int) and not isinstance(value, bool)
        if (text.replace(",", "") if grouped else text) != shown(value):
            mismatches.append({"path": path, "shown": text, "report": shown(value)})
    seen = set(figure[0] for figure in parsed.figures)
    return {"checked": len(parsed.figures), "mismatches": mismatches,
            "missing": [path for path in expected_paths(report) if path not in seen],
            "scripts": parsed.scripts, "handlers": parsed.handlers, "body": parsed.body_attributes}


def main(page, report_path, out_dir):
    with open(report_path) as handle:
        report = json.load(handle)
    try:
        dom = render(page, os.path.join(out_dir, "report.png"))
    except BrowserMissing as error:
        print(error, file=sys.stderr)
        return 3
    with open(os.path.join(out_dir, "dom.html"), "w") as handle:
        handle.write(dom)
    result = check(dom, report)
    with open(os.path.join(out_dir, "report.png"), "rb") as handle:
        result["png"] = handle.read(8) == b"\x89PNG\r\n\x1a\n"
    print(json.dumps(result, indent=2))
    return 0 if result["png"] and not (result["mismatches"] or result["missing"] or result["scripts"] or result["handlers"]) else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
