# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulated dcgmi, run as the executable gpu_sim writes, compared with the real captures (fixtures/dcgmi-diag)
and read by the real parser."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from ansible_collections.gpuops.remediation.plugins.module_utils.simulation import _sim_build as sim
from ansible_collections.gpuops.remediation.plugins.module_utils.simulation import _sim_processes as processes
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._dcgm import judge

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "dcgmi-diag")
HEALTHY = {"persistence_mode": True}


def fixture_text(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


def dcgmi(root, *args):
    return subprocess.run([os.path.join(root, "bin", "dcgmi")] + list(args), capture_output=True, text=True, timeout=30,
                          check=False)


def key_paths(value, prefix=""):
    """Every key path of a JSON document, list positions left out: its shape."""
    paths = set()
    if isinstance(value, dict):
        for key, item in value.items():
            paths.add(prefix + "/" + key)
            paths |= key_paths(item, prefix + "/" + key)
    elif isinstance(value, list):
        for item in value:
            paths |= key_paths(item, prefix)
    return paths


def test_dcgmi_is_absent_unless_the_node_is_built_with_dcgm(node_root):
    sim.create_node(node_root, {"gpus": [{}]})
    assert not os.path.exists(os.path.join(node_root, "bin", "dcgmi"))


def test_the_document_has_the_shape_of_the_real_one_and_its_exit_code(node_root):
    sim.create_node(node_root, {"gpus": [HEALTHY, dict(HEALTHY, dcgm_diag="fail"), {}], "dcgm": True,
                                "services": ["nvidia-dcgm"]})
    done = dcgmi(node_root, "diag", "-r", "1", "-j", "-i", "0,1")
    real = json.loads(fixture_text("v4.2.3-r1-json-gb10-software-fail-rc226.json"))
    assert done.returncode == 226  # the real run's exit status, with a failed test
    # The GB10's summary also had an info line, about a field that GPU cannot read.
    assert key_paths(real) - key_paths(json.loads(done.stdout)) == {"/DCGM Diagnostic/test_categories/tests/test_summary/info"}
    assert key_paths(json.loads(done.stdout)) <= key_paths(real)
    check = judge(1, done.returncode, done.stdout, done.stderr)
    assert check["result"] == "fail" and check["tests"] == [{"name": "software", "result": "Fail"}]
    assert "GPU 1: Page Retirement/Row Remap: GPU 1 had uncorrectable memory errors" in check["reason"]

    healthy = dcgmi(node_root, "diag", "-r", "1", "-j", "-i", "0")
    assert (healthy.returncode, judge(1, healthy.returncode, healthy.stdout, "")["result"]) == (0, "pass")

    # DCGM 4.2.3 fails the software test of a GPU without persistence mode, in its own words.
    no_persistence = dcgmi(node_root, "diag", "-r", "1", "-j", "-i", "2")
    real_warning = real["DCGM Diagnostic"]["test_categories"][0]["tests"][0]["results"][0]["warnings"][0]
    ours = json.loads(no_persistence.stdout)["DCGM Diagnostic"]["test_categories"][0]["tests"][0]["results"][0]["warnings"][0]
    assert no_persistence.returncode == 226
    assert ours["warning"] == real_warning["warning"].replace("GPU 0", "GPU 2")
    assert ours["error_id"] == real_warning["error_id"]

    # Without the host engine it says what the real one says.
    processes.stop_service(node_root, "nvidia-dcgm")
    done = dcgmi(node_root, "diag", "-r", "1", "-j")
    assert (done.returncode, done.stdout) == (235, fixture_text("no-host-engine.txt"))
    assert judge(1, done.returncode, done.stdout, done.stderr)["result"] == "fail"


def test_the_table_has_the_rows_of_the_real_one_and_a_warning_exits_0(node_root):
    sim.create_node(node_root, {"gpus": [HEALTHY] * 4 + [dict(HEALTHY, dcgm_diag="warn")], "dcgm": True,
                                "services": ["nvidia-dcgm"]})
    done = dcgmi(node_root, "diag", "-r", "2", "-i", "0,1,2,3")
    real = fixture_text("v4.2.3-table-r2-4gpu-pcie-fail.txt").splitlines()
    ours = done.stdout.splitlines()
    assert ours[:5] == real[:5]  # the banner, the rule, the heading and the Metadata rule
    assert [line[:29] for line in ours[5:8]] == [line[:29] for line in real[5:8]]
    assert ours[8:14] == real[8:14]  # Deployment: software Pass, GPU0..3
    assert all(len(line) == len(real[1]) for line in ours[1:])

    warned = dcgmi(node_root, "diag", "-r", "2", "-j", "-i", "4")
    check = judge(2, warned.returncode, warned.stdout, "")
    assert warned.returncode == 0
    assert check["tests"] == [{"name": "software", "result": "Warn"}, {"name": "memory", "result": "Warn"},
                              {"name": "pcie", "result": "Pass"}]
    assert check["result"] == "pass"


def test_a_diagnostic_that_hangs_ends_with_its_caller(node_root):
    sim.create_node(node_root, {"gpus": [HEALTHY], "dcgm": True, "dcgm_hang": True, "services": ["nvidia-dcgm"]})
    with pytest.raises(subprocess.TimeoutExpired):
        subprocess.run([os.path.join(node_root, "bin", "dcgmi"), "diag", "-r", "1", "-j"], capture_output=True, timeout=0.5,
                       check=False)


def test_a_bad_dcgm_diag_value_is_refused_naming_it(node_root):
    with pytest.raises(sim.SimError, match=r"gpus\[0\]\.dcgm_diag 'broken' is not one of pass, warn, fail"):
        sim.create_node(node_root, {"gpus": [{"dcgm_diag": "broken"}], "dcgm": True})
