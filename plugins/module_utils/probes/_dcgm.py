# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""DCGM's diagnostic as the health gate after a reset or a reload: the argv of `dcgmi diag -r N -j`, the parser of
what it prints, and the gate's result (the `health_check` shape of the run report). Pure: no I/O.

`dcgmi diag -j` prints one JSON document (the captures in tests/unit/plugins/fixtures/dcgmi-diag):
- DCGM 4.x: {"DCGM Diagnostic": {"test_categories": [{"category", "tests": [{"name", "results": [{"entity_group",
  "entity_id", "status", "warnings": [{"warning", "error_id", ...}], "info": [...]}], "test_summary": {"status"}}]}]},
  "entity_groups": [...], "metadata": {"version", "Driver Version Detected"}};
- DCGM 3.x: {"DCGM GPU Diagnostic": {"test_categories": [... "results": [{"gpu_id"|"gpu_ids", "status",
  "warnings"}] without "test_summary"], "version"}};
- a diagnostic that could not run: {"DCGM Diagnostic": {"runtime_error": "...", "version": "..."}}.
Before the document dcgmi may print a line of its own ("Successfully ran diagnostic for group."). Without a host
engine it prints no document at all: "Error: Unable to connect to host engine. Host engine connection
invalid/disconnected." and exits non-zero.
"""

from __future__ import annotations

import json

TOOL = "dcgmi"
LEVELS = (1, 2, 3, 4)
RESULTS = ("Pass", "Warn", "Skip", "Fail")
DOCUMENT_KEYS = ("DCGM Diagnostic", "DCGM GPU Diagnostic")
# The worst status of a test's results is the test's; "Not Run" is DCGM's word for a test it skipped.
_STATUS_WORDS = {"pass": "Pass", "warn": "Warn", "skip": "Skip", "not run": "Skip", "fail": "Fail"}
_SEVERITY = dict((result, rank) for rank, result in enumerate(RESULTS))
NO_HOST_ENGINE = "Unable to connect to host engine"
MAX_REASON = 600


def diag_argv(dcgmi, level, gpus):
    """dcgmi diag at `level` on `gpus` (DCGM GPU ids; every GPU when None: gpu_health_check runs nothing for an empty list), with JSON output."""
    argv = [dcgmi, "diag", "-r", str(level), "-j"]
    if gpus:
        argv += ["-i", ",".join(str(gpu) for gpu in gpus)]
    return argv


def command_text(level):
    return "dcgmi diag -r %d" % level


def status_word(text):
    """DCGM's status ("Pass", "PASS", "Not Run", ...) as one of RESULTS; a word it never used is no pass: Fail."""
    return _STATUS_WORDS.get(str(text or "").strip().lower(), "Fail")


def _worst(results):
    return max(results, key=_SEVERITY.get) if results else "Skip"


def find_document(text):
    """The JSON document in dcgmi's output (text before it skipped), or None when it printed none."""
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            document, _end = decoder.raw_decode(text, start)
        except ValueError:
            start = text.find("{", start + 1)
            continue
        if isinstance(document, dict) and any(key in document for key in DOCUMENT_KEYS):
            return document
        start = text.find("{", start + 1)
    return None


def _messages(result):
    lines = []
    for warning in result.get("warnings") or []:
        text = warning.get("warning") if isinstance(warning, dict) else warning
        if text:
            lines.append(str(text).strip())
    return lines


def _entity(result):
    for key in ("entity_id", "gpu_id", "gpu_ids"):
        if result.get(key) is not None:
            return "GPU %s" % result[key] if result.get("entity_group", "GPU") == "GPU" else "%s %s" % (result["entity_group"], result[key])
    return None


def _test(category, test):
    results = [result for result in test.get("results") or [] if isinstance(result, dict)]
    statuses = [status_word(result.get("status")) for result in results]
    summary = test.get("test_summary") or {}
    status = status_word(summary["status"]) if summary.get("status") else _worst(statuses)
    if "Fail" in statuses:  # one GPU's Fail is the test's, whatever its summary says
        status = "Fail"
    messages = []
    for result in results:
        entity = _entity(result)
        messages += ["%s: %s" % (entity, line) if entity else line for line in _messages(result)]
    messages += _messages(summary)
    failing = [_entity(result) for result, word in zip(results, statuses) if word in ("Fail", "Warn") and _entity(result)]
    return {"name": str(test.get("name") or "?"), "result": status, "category": category, "entities": failing,
            "messages": messages}


def parse_diag(document):
    """{"version", "runtime_error", "tests": [{"name", "result", "category", "entities", "messages"}]} of a document."""
    body = next(document[key] for key in DOCUMENT_KEYS if key in document)
    body = body if isinstance(body, dict) else {}
    tests = []
    for category in body.get("test_categories") or []:
        if not isinstance(category, dict):
            continue
        for test in category.get("tests") or []:
            if isinstance(test, dict):  # DCGM 3.x left nulls between the tests
                tests.append(_test(category.get("category"), test))
    metadata = document.get("metadata") or {}
    return {"version": metadata.get("version") or body.get("version"), "runtime_error": body.get("runtime_error"),
            "tests": tests}


def _clip(text):
    return text if len(text) <= MAX_REASON else text[:MAX_REASON - 3] + "..."


def _first_lines(text):
    return "; ".join(line.strip() for line in (text or "").splitlines() if line.strip())[:MAX_REASON] or "no output"


def health_check(level, result, reason, tests=(), **extra):
    """The gate's result, as the run report carries it."""
    entry = {"tool": TOOL, "level": level, "result": result, "reason": _clip(reason),
             "tests": [{"name": test["name"], "result": test["result"]} for test in tests]}
    entry.update(extra)
    return entry


def not_installed(level):
    return health_check(level, "not_installed", "%s is not installed on this node: no DCGM, no health check" % TOOL)


def timed_out(level, timeout):
    return health_check(level, "fail", "%s did not finish within %s s (the health check's timeout): the GPUs' health "
                        "is not confirmed" % (command_text(level), timeout))


def _test_lines(tests, results):
    return ["%s %s%s" % (test["name"], test["result"], " (%s)" % "; ".join(test["messages"]) if test["messages"] else "")
            for test in tests if test["result"] in results]


def judge(level, rc, stdout, stderr):
    """The gate's verdict on one run of dcgmi diag: pass only when the diagnostic ran, no test failed and some test
    passed. A diagnostic that could not run (no host engine, a runtime error) cannot confirm the GPUs' health: fail."""
    command = command_text(level)
    document = find_document(stdout or "")
    if document is None:
        output = _first_lines((stdout or "") + "\n" + (stderr or ""))
        if NO_HOST_ENGINE.lower() in output.lower():
            return health_check(level, "fail", "%s could not reach DCGM's host engine (rc %s: %s): the GPUs' health is not "
                                "confirmed; start nv-hostengine (the nvidia-dcgm service) or turn the check off" % (command, rc, output))
        return health_check(level, "fail", "%s printed no result (rc %s: %s): the GPUs' health is not confirmed" % (command, rc, output))
    parsed = parse_diag(document)
    extra = {"dcgm_version": parsed["version"]}
    if parsed["runtime_error"]:
        return health_check(level, "fail", "%s could not run (rc %s): %s" % (command, rc, str(parsed["runtime_error"]).strip()), **extra)
    tests = parsed["tests"]
    failed = _test_lines(tests, ("Fail",))
    if failed:
        return health_check(level, "fail", "%s failed: %s" % (command, "; ".join(failed)), tests, **extra)
    if not any(test["result"] in ("Pass", "Warn") for test in tests):
        return health_check(level, "fail", "%s ran no test to the end (%s): the GPUs' health is not confirmed" % (
            command, ", ".join("%s %s" % (t["name"], t["result"]) for t in tests) or "no test listed"), tests, **extra)
    if rc != 0:
        return health_check(level, "fail", "%s exited %s although no test failed: the GPUs' health is not confirmed" % (command, rc),
                            tests, **extra)
    warned = _test_lines(tests, ("Warn",))
    if warned:
        return health_check(level, "pass", "%s passed with warnings: %s" % (command, "; ".join(warned)), tests, **extra)
    return health_check(level, "pass", "%s passed (%s)" % (command, ", ".join(t["name"] for t in tests if t["result"] == "Pass")),
                        tests, **extra)
