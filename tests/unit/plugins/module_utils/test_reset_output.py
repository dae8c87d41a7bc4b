# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""_reset_output against real `nvidia-smi --gpu-reset` output (fixtures/nvidia-smi-gpu-reset)."""

from __future__ import annotations

import os

import pytest

from ansible_collections.gpuops.remediation.plugins.module_utils.probes._reset_output import parse_gpu_reset, reset_succeeded

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "nvidia-smi-gpu-reset")


def read(name):
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as handle:
        return handle.read()


def ok(bus):
    return {"reset": True, "reason": None, "message": "GPU %s was successfully reset." % bus}


def failed(reason, message):
    return {"reset": False, "reason": reason, "message": message}


EIGHT = ["00000000:0%d:00.0" % n for n in range(1, 9)]
# file -> (rc nvidia-smi exits with, expected result)
EXPECTED = {
    "success-single-gpu.txt": (0, {"00000000:C1:00.0": ok("00000000:C1:00.0")}),
    "success-8gpu-all-done.txt": (0, dict((bus, ok(bus)) for bus in EIGHT)),
    "fail-4gpus-in-use-by-another-client-mig-parted.txt": (255, dict(
        (bus, failed("in_use", "GPU %s: In use by another client" % bus))
        for bus in ("00000000:01:00.0", "00000000:47:00.0", "00000000:81:00.0", "00000000:C2:00.0"))),
    "fail-in-use-by-another-client-persistence.txt": (255, {
        "00000000:1A:00.0": failed("in_use", "GPU 00000000:1A:00.0: In use by another client")}),
    "fail-in-use-by-another-process-fabric-manager-wording.txt": (255, {
        "00000000:C1:00.0": failed("in_use", "GPU 00000000:C1:00.0 is currently in use by another process.")}),
    "fail-in-use-by-another-process-legacy.txt": (255, {
        "00000000:00:18.0": failed("in_use", "GPU 00000000:00:18.0 is currently in use by another process.")}),
    "fail-primary-gpu.txt": (255, {
        "00000000:01:00.0": failed("primary_gpu", "GPU Reset couldn't run because GPU 00000000:01:00.0 is the primary GPU.")}),
}


def test_every_fixture_has_an_expectation():
    assert sorted(os.listdir(FIXTURES)) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_parse_gpu_reset(name, stream):
    rc, expected = EXPECTED[name]
    text = read(name)
    stdout, stderr = (text, "") if stream == "stdout" else ("", text)
    assert parse_gpu_reset(stdout, stderr, rc) == expected


def test_failure_naming_no_gpu_is_global():
    # The explanation paragraph of a real failure, without the line naming the GPU.
    text = read("fail-in-use-by-another-process-legacy.txt").split("\n\n", 1)[1]
    assert parse_gpu_reset("", text, 255) == {"_global": failed("in_use", text.strip())}


@pytest.mark.parametrize("stderr, reason", [
    ("Insufficient Permissions", "insufficient_permissions"),
    ("Resetting GPU is not supported on this device.", "not_supported"),
    ("Unable to reset GPU: Unknown Error", "other"),
])
def test_global_reasons(stderr, reason):
    assert parse_gpu_reset("", stderr + "\n", 3) == {"_global": failed(reason, stderr)}


def test_all_done_without_gpu_lines_and_rc_zero():
    assert parse_gpu_reset("All done.\n", "", 0) == {}


def test_nonzero_rc_with_only_successes_adds_global():
    result = parse_gpu_reset(read("success-single-gpu.txt"), "", 1)
    assert result["00000000:C1:00.0"]["reset"] is True
    assert result["_global"]["reset"] is False


def test_crlf_output():
    text = read("fail-4gpus-in-use-by-another-client-mig-parted.txt").replace("\n", "\r\n")
    assert parse_gpu_reset(text, "", 255) == EXPECTED["fail-4gpus-in-use-by-another-client-mig-parted.txt"][1]


@pytest.mark.parametrize("name", sorted(os.listdir(FIXTURES)))
@pytest.mark.parametrize("rc", [0, 255])
def test_a_reset_succeeded_only_when_every_gpu_was_reset_and_it_exited_0(name, rc):
    """What the journal records as an ok reset (which answers earlier Xids): the words and the exit code both."""
    assert reset_succeeded(rc, read(name), "") is (rc == 0 and name.startswith("success")), name
