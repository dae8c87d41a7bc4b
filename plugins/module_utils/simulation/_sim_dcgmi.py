# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulated node's `dcgmi diag` (NVIDIA DCGM 4.x), installed only on a node built with gpu_sim's `dcgm`.

It prints what the real one prints (the captures in tests/unit/plugins/fixtures/dcgmi-diag are the reference): the
JSON document of `-j`, or the plain table, and the real exit codes (0; 226, DCGM_ST_NVVS_ERROR, when a test failed;
235, DCGM_ST_CONNECTION_NOT_VALID, without a host engine). What it reads of the node's state: whether the
nvidia-dcgm service (nv-hostengine) runs, each GPU's `dcgm_diag` (pass, warn, fail: what a faulty GPU answers) and
`persistence_mode` (DCGM 4.2.3 fails its software test on a GPU without it), and `dcgm_hang` (a diagnostic that
never ends, for the caller's timeout; it ends itself once its caller is gone, so that no test leaves it behind).
"""

from __future__ import annotations

import json
import os
import textwrap
import time

try:
    from ansible_collections.gpuops.remediation.plugins.module_utils.simulation import _sim_state as node
except ImportError:  # running from <root>/lib as plain modules
    import _sim_state as node  # type: ignore[no-redef] # pylint: disable=import-error

DCGM_VERSION = "4.2.3"
RC_OK, RC_TEST_FAILED, RC_NO_HOST_ENGINE, RC_BAD_ARGS = 0, 226, 235, 255
NO_HOST_ENGINE = ("Error: unable to establish a connection to the specified host: localhost\n"
                  "Error: Unable to connect to host engine. Host engine connection invalid/disconnected.\n")
HOST_ENGINE_SERVICE = "nvidia-dcgm"
# The tests of each level (DCGM 4 names), with their category, lightest level first.
LEVEL_TESTS = (
    (1, "software", "Deployment"),
    (2, "memory", "Hardware"), (2, "pcie", "Integration"),
    (3, "diagnostic", "Hardware"), (3, "targeted_stress", "Stress"), (3, "targeted_power", "Stress"),
    (3, "memory_bandwidth", "Stress"),
    (4, "memtest", "Hardware"), (4, "pulse_test", "Hardware"),
)
CATEGORIES = ("Deployment", "Hardware", "Integration", "Stress")
# DCGM's own messages (dcgmlib/dcgm_errors.h): (error id, "<subtest>: <message> <next step>") per GPU condition.
FINDINGS = {
    "fail": (80, "Page Retirement/Row Remap: GPU {gpu} had uncorrectable memory errors and row remapping failed. "
                 "Row remapping failure indicates unrecoverable memory hardware damage. Reset the GPU or reboot the "
                 "node immediately."),
    "warn": (85, "Page Retirement/Row Remap: GPU {gpu} had memory errors and row remappings are pending"),
    "persistence": (29, "Persistence Mode: Persistence mode for GPU {gpu} is disabled. Enable persistence mode by "
                        "running \"nvidia-smi -i <gpuId> -pm 1 \" as root."),
}
STATUS = {"pass": "Pass", "warn": "Warn", "fail": "Fail"}


def _parse(argv):
    opts = {"level": None, "json": False, "ids": None}
    args = list(argv)
    if not args or args.pop(0) != "diag":
        return None
    while args:
        arg = args.pop(0)
        if arg in ("-r", "--run") and args:
            opts["level"] = args.pop(0)
        elif arg in ("-j", "--json"):
            opts["json"] = True
        elif arg in ("-i", "--entity-id") and args:
            opts["ids"] = args.pop(0)
        else:
            return None
    return opts if opts["level"] in ("1", "2", "3", "4") else None


def _host_engine_runs(state):
    service = state["services"].get(HOST_ENGINE_SERVICE) or {}
    return bool(service.get("active") and node.process_exists(service.get("pid"), service.get("start_time")))


def _wait_while_called():
    """A diagnostic that never finishes; it ends once its caller is gone (killed at the caller's timeout)."""
    caller = os.getppid()
    while os.getppid() == caller:
        time.sleep(0.05)


def _findings(gpu, test):
    """[(status, error id, message)] of one GPU in one test."""
    found = []
    health = gpu.get("dcgm_diag") or "pass"
    if health != "pass" and test in ("software", "memory"):
        code, text = FINDINGS[health]
        found.append((STATUS[health], code, text.format(gpu=gpu["index"])))
    if test == "software" and not gpu.get("persistence_mode"):
        code, text = FINDINGS["persistence"]
        found.append(("Fail", code, text.format(gpu=gpu["index"])))
    return found


def _worst(statuses):
    for status in ("Fail", "Warn"):
        if status in statuses:
            return status
    return "Pass"


def _result(gpu, test):
    findings = _findings(gpu, test)
    result = {"entity_group": "GPU", "entity_group_id": 1, "entity_id": gpu["index"],
              "status": _worst([status for status, _code, _text in findings])}
    if findings:
        result["warnings"] = [{"error_category": 8, "error_id": code, "error_severity": 5, "warning": text}
                              for _status, code, text in findings]
    return result


def run_tests(gpus, level):
    """[(category, name, [per GPU result], summary status)] of a diagnostic at `level`."""
    tests = []
    for test_level, name, category in LEVEL_TESTS:
        if test_level <= level:
            results = [_result(gpu, name) for gpu in gpus]
            tests.append((category, name, results, _worst([r["status"] for r in results])))
    return tests


def render_json(state, gpus, tests, out):
    categories = []
    for category in CATEGORIES:
        entries = [{"name": name, "results": results, "test_summary": {"status": summary}}
                   for test_category, name, results, summary in tests if test_category == category]
        if entries:
            categories.append({"category": category, "tests": entries})
    document = {
        "DCGM Diagnostic": {"test_categories": categories},
        "entity_groups": [{"entities": [{"device_id": "2330", "entity_id": gpu["index"], "serial_num": gpu["uuid"][4:12]}
                                        for gpu in gpus], "entity_group": "GPU", "entity_group_id": 1}],
        "metadata": {"Driver Version Detected": state["driver_version"], "version": DCGM_VERSION},
    }
    out.say(json.dumps(document, indent="\t", separators=(",", " : "), sort_keys=True) + "\n")


def _row(left, right):
    return "| %-25s | %-46s |\n" % (left, right)


def render_table(state, gpus, tests, out):
    rule = "+---------------------------+------------------------------------------------+\n"
    out.say("Successfully ran diagnostic for group.\n" + rule + _row("Diagnostic", "Result"))
    out.say("+===========================+================================================+\n")
    out.say("|-----  Metadata  ----------+------------------------------------------------|\n")
    out.say(_row("DCGM Version", DCGM_VERSION) + _row("Driver Version Detected", state["driver_version"]))
    out.say(_row("GPU Device IDs Detected", ", ".join("2330" for _gpu in gpus)))
    shown = None
    for category, name, results, summary in tests:
        if category != shown:
            heading = "-----  %s  " % category
            out.say(("|%s+------------------------------------------------|\n" if shown is None else
                     "+%s+------------------------------------------------+\n") % heading.ljust(27, "-"))
            shown = category
        out.say(_row(name, summary))
        for result in results:
            for warning in result.get("warnings") or []:
                for number, line in enumerate(textwrap.wrap(warning["warning"], 46)):
                    out.say(_row("Warning" if number == 0 else "", line))
        for result in results:
            out.say(_row("", "GPU%d: %s" % (result["entity_id"], result["status"])))
    out.say(rule)


def _select(state, ids):
    if ids is None:
        return list(state["gpus"])
    wanted = [item.strip() for item in ids.split(",")]
    chosen = [gpu for gpu in state["gpus"] if str(gpu["index"]) in wanted]
    return chosen if len(chosen) == len(wanted) else None


def dcgmi(argv, root, out):
    state = node.load_state(root)
    opts = _parse(argv)
    if opts is None:
        out.warn("dcgmi: the simulation answers only 'dcgmi diag -r <1-4> [-j] [-i <ids>]'\n")
        return RC_BAD_ARGS
    if not _host_engine_runs(state):
        out.say(NO_HOST_ENGINE)
        return RC_NO_HOST_ENGINE
    if state.get("dcgm_hang"):
        _wait_while_called()
        return RC_TEST_FAILED
    gpus = _select(state, opts["ids"])
    if gpus is None:
        out.say("Error: Unable to complete diagnostic for entities %s. Return: (-19) The entity id is invalid.\n" % opts["ids"])
        return RC_TEST_FAILED
    tests = run_tests(gpus, int(opts["level"]))
    (render_json if opts["json"] else render_table)(state, gpus, tests, out)
    return RC_TEST_FAILED if any(summary == "Fail" for _c, _n, _r, summary in tests) else RC_OK
