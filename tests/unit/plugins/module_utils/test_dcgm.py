# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""_dcgm (the health gate's reading of `dcgmi diag -j`) against real dcgmi output (fixtures/dcgmi-diag)."""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.gpuops.remediation.plugins.module_utils.probes._dcgm import (
    diag_argv, find_document, judge, not_installed, parse_diag, status_word, timed_out,
)

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "dcgmi-diag")
GB10 = "v4.2.3-r1-json-gb10-software-fail-rc226.json"


def read(name):
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as handle:
        return handle.read()


def test_the_argv_asks_for_json_at_the_level_on_the_gpus():
    assert diag_argv("/usr/bin/dcgmi", 1, []) == ["/usr/bin/dcgmi", "diag", "-r", "1", "-j"]
    assert diag_argv("/usr/bin/dcgmi", 2, [0, 3]) == ["/usr/bin/dcgmi", "diag", "-r", "2", "-j", "-i", "0,3"]


@pytest.mark.parametrize("word, result", [("Pass", "Pass"), ("PASS", "Pass"), ("Warn", "Warn"), ("Skip", "Skip"),
                                          ("Not Run", "Skip"), ("Fail", "Fail"), ("", "Fail"), ("Inconclusive", "Fail")])
def test_a_status_word_dcgm_never_used_is_no_pass(word, result):
    assert status_word(word) == result


def test_the_gb10_level_1_document_fails_the_gate_naming_the_test_and_dcgms_words():
    check = judge(1, 226, read(GB10), "")
    assert check["result"] == "fail"
    assert check["tests"] == [{"name": "software", "result": "Fail"}]
    assert check["dcgm_version"] == "4.2.3"
    assert check["reason"].startswith("dcgmi diag -r 1 failed: software Fail (GPU 0: Persistence Mode: Persistence mode for GPU 0")
    assert "SRAM Threshold" not in check["reason"]  # DCGM's info lines are not why a test failed


def test_the_same_document_with_a_passing_test_passes():
    document = json.loads(read(GB10))
    test = document["DCGM Diagnostic"]["test_categories"][0]["tests"][0]
    test["results"][0]["status"] = "Pass"
    del test["results"][0]["warnings"]
    test["test_summary"] = {"status": "Pass"}
    check = judge(1, 0, "Successfully ran diagnostic for group.\n" + json.dumps(document), "")
    assert (check["result"], check["tests"], check["reason"]) == (
        "pass", [{"name": "software", "result": "Pass"}], "dcgmi diag -r 1 passed (software)")


def test_a_warning_passes_with_the_warning_in_the_reason():
    document = json.loads(read(GB10))
    test = document["DCGM Diagnostic"]["test_categories"][0]["tests"][0]
    test["results"][0]["status"] = "Warn"
    test["test_summary"]["status"] = "Warn"
    check = judge(1, 0, json.dumps(document), "")
    assert check["result"] == "pass"
    assert check["tests"] == [{"name": "software", "result": "Warn"}]
    assert check["reason"].startswith("dcgmi diag -r 1 passed with warnings: software Warn (GPU 0: Persistence Mode")


def test_the_dcgm_3_document_with_its_nulls_and_the_line_before_it():
    text = read("v3.1.0-nvvs-json-8gpu-pass.txt")
    assert text.lstrip().startswith("WARNING")
    parsed = parse_diag(find_document(text))
    assert parsed["version"] == "3.1.0"
    assert [t["name"] for t in parsed["tests"]][:3] == ["Denylist", "NVML Library", "CUDA Main Library"]
    assert len(parsed["tests"]) == 10 and {t["result"] for t in parsed["tests"]} == {"Pass"}
    assert [t["category"] for t in parsed["tests"]][-1] == "Custom"
    assert judge(1, 0, text, "")["result"] == "pass"


def test_a_dcgm_4_test_with_eight_gpus_takes_its_summary():
    test = json.loads(read("v4-r3-json-excerpt-diagnostic-8gpu.txt").rstrip().rstrip(","))
    document = {"DCGM Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [test]}]}}
    assert parse_diag(document)["tests"] == [
        {"name": "diagnostic", "result": "Pass", "category": "Hardware", "entities": [], "messages": []}]


def test_one_failing_gpu_fails_a_test_without_a_summary():
    test = json.loads(read("v4-r3-json-excerpt-diagnostic-8gpu.txt").rstrip().rstrip(","))
    del test["test_summary"]
    test["results"][5].update(status="Fail", warnings=[{"warning": "GPU 5 failed the diagnostic"}])
    parsed = parse_diag({"DCGM Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [test]}]}})
    assert parsed["tests"][0]["result"] == "Fail"
    assert parsed["tests"][0]["entities"] == ["GPU 5"]
    assert parsed["tests"][0]["messages"] == ["GPU 5: GPU 5 failed the diagnostic"]


def test_no_host_engine_fails_saying_why():
    check = judge(1, 235, read("no-host-engine.txt"), "")
    assert check["result"] == "fail" and check["tests"] == []
    assert check["reason"].startswith("dcgmi diag -r 1 could not reach DCGM's host engine (rc 235: Error: unable to establish")
    assert "start nv-hostengine" in check["reason"]


def test_a_runtime_error_fails():
    text = json.dumps({"DCGM Diagnostic": {"runtime_error": "Error: Unable to complete diagnostic for group 2147483647.",
                                           "version": "4.2.3"}})
    check = judge(2, 226, text, "")
    assert check["result"] == "fail"
    assert check["reason"] == "dcgmi diag -r 2 could not run (rc 226): Error: Unable to complete diagnostic for group 2147483647."


def test_no_document_no_test_or_only_skipped_tests_fail():
    assert judge(1, 1, "Segmentation fault\n", "")["reason"] == (
        "dcgmi diag -r 1 printed no result (rc 1: Segmentation fault): the GPUs' health is not confirmed")
    empty = json.dumps({"DCGM Diagnostic": {"test_categories": []}})
    assert judge(1, 0, empty, "")["result"] == "fail"
    skipped = json.dumps({"DCGM Diagnostic": {"test_categories": [{"category": "Deployment", "tests": [
        {"name": "software", "results": [{"entity_id": 0, "status": "Skip"}], "test_summary": {"status": "Skip"}}]}]}})
    check = judge(1, 0, skipped, "")
    assert check["result"] == "fail" and "ran no test to the end (software Skip)" in check["reason"]


def test_a_non_zero_exit_without_a_failed_test_fails():
    document = json.loads(read(GB10))
    document["DCGM Diagnostic"]["test_categories"][0]["tests"][0]["test_summary"]["status"] = "Pass"
    assert judge(1, 226, json.dumps(document), "")["result"] == "fail"


def test_not_installed_and_timeout_are_results_of_their_own():
    assert not_installed(1)["result"] == "not_installed"
    assert not_installed(1)["reason"] == "dcgmi is not installed on this node: no DCGM, no health check"
    check = timed_out(1, 90.0)
    assert (check["result"], check["reason"]) == (
        "fail", "dcgmi diag -r 1 did not finish within 90.0 s (the health check's timeout): the GPUs' health is not confirmed")


def test_every_result_has_the_report_shape():
    for check in (judge(1, 226, read(GB10), ""), judge(1, 235, read("no-host-engine.txt"), ""), not_installed(1)):
        assert set(check) >= {"tool", "level", "result", "tests", "reason"}
        assert check["tool"] == "dcgmi" and check["level"] == 1


def test_a_gpu_that_failed_fails_its_test_whatever_the_summary_says():
    """The gate keeps a node out of service on any GPU's Fail: a summary that reads Pass (or Skip, or Warn) beside a
    failed entity is not a pass of that GPU."""
    document = json.loads(read(GB10))
    test = document["DCGM Diagnostic"]["test_categories"][0]["tests"][0]
    test["test_summary"]["status"] = "Pass"
    test["results"].append({"entity_group": "GPU", "entity_id": 1, "status": "Pass"})
    check = judge(1, 0, json.dumps(document), "")
    assert check["result"] == "fail"
    assert check["tests"] == [{"name": "software", "result": "Fail"}]
