# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A fresh unprivileged container on an ordinary machine: the tests that set up their cases with unshare (and the
scan, which asks kcmp) run with those calls refused by a seccomp filter of their own (refuse_calls.py), the way a
container's profile refuses them. They finish, each says it was not run and why, and the scan's fallback for a
refused kcmp passes."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from xml.etree import ElementTree

from ansible_collections.gpuops.remediation.tests.unit.helpers import bounded

HERE = os.path.dirname(os.path.abspath(__file__))
REFUSE_CALLS = os.path.join(os.path.dirname(os.path.dirname(HERE)), "helpers", "refuse_calls.py")
COLLECTION = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(HERE))))
# The tests that make their cases with unshare, ptrace or kcmp (grep tests/unit for them).
TOUCHING = ["test_procscan.py", "test_terminate_states.py", "test_container_runtime.py"]
NOT_RUN = "not run: unshare refused (EPERM)"


def _refused(calls, argv, child_env, what):
    """(exit status, output) of argv run with calls refused (EPERM); the test is not run where seccomp is."""
    proc = bounded.start([sys.executable, REFUSE_CALLS, calls, "--"] + argv, env=child_env, cwd=COLLECTION,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = bounded.communicate(proc, what, timeout=240)[0]
    if out.startswith(bounded.REFUSED):
        bounded.not_run("seccomp", out.split()[2])
    return proc.returncode, out


def _pytest(report, *args):
    return [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rs", "--junitxml", str(report)] + list(args)


def _outcomes(report):
    """{test name: "PASSED", "SKIPPED (reason)" or "FAILED"} of pytest's junit report."""
    found = {}
    for case in ElementTree.parse(str(report)).iter("testcase"):
        skipped = case.find("skipped")
        if skipped is not None:
            found[case.get("name")] = "SKIPPED (%s)" % skipped.get("message")
        elif case.find("failure") is not None or case.find("error") is not None:
            found[case.get("name")] = "FAILED"
        else:
            found[case.get("name")] = "PASSED"
    return found


def test_the_filter_refuses_unshare_and_kcmp_and_the_scan_sees_kcmp_refused(child_env):
    code = ("import ctypes, errno, os\n"
            "from ansible_collections.gpuops.remediation.plugins.module_utils.probes import _threads\n"
            "libc = ctypes.CDLL(None, use_errno=True)\n"
            "print(libc.unshare(0x400), errno.errorcode.get(ctypes.get_errno()), _threads._kcmp_files()(os.getpid(), os.getpid()))\n")
    status, out = _refused("unshare,kcmp", [sys.executable, "-c", code], child_env, "the probe under the filter")
    assert (status, out.split()) == (0, ["-1", "EPERM", "None"]), out


def test_the_tests_that_need_unshare_finish_and_say_they_were_not_run(child_env, tmp_path):
    report = tmp_path / "report.xml"
    status, out = _refused("unshare,kcmp", _pytest(report, *[os.path.join(HERE, name) for name in TOUCHING]), child_env,
                           "the unshare and kcmp tests with both refused")
    outcomes = _outcomes(report)
    assert status == 0 and outcomes, out
    assert not [test for test, outcome in outcomes.items() if not outcome.startswith(("PASSED", "SKIPPED"))], out
    for param in ("kcmp", "no kcmp"):
        assert outcomes["test_a_thread_with_a_file_table_of_its_own_is_read[%s]" % param] == "SKIPPED (%s)" % NOT_RUN
        # kcmp refused for real: the scan tells shared tables by their fd sets.
        assert outcomes["test_threads_that_share_the_table_are_read_once[%s]" % param] == "PASSED"
    for test in ("test_a_bind_mount_in_another_mount_namespace_is_the_same_device",
                 "test_the_init_of_a_pid_namespace_without_a_handler_gets_kill_at_once",
                 "test_the_init_of_a_pid_namespace_takes_its_members_along"):
        expected = "SKIPPED (%s)" % NOT_RUN if os.geteuid() == 0 else "SKIPPED ("
        assert outcomes[test].startswith(expected), (test, outcomes[test])
    # The summary lists each not run test under its own file and line.
    assert re.search(r"SKIPPED \[\d+\] \S*test_procscan\.py:\d+: " + re.escape(NOT_RUN), out), out


def test_with_kcmp_refused_the_scan_still_reads_a_thread_with_a_table_of_its_own(child_env, tmp_path):
    report = tmp_path / "report.xml"
    status, out = _refused("kcmp", _pytest(report, "-k", "table", os.path.join(HERE, "test_procscan.py")), child_env,
                           "the file table tests with kcmp refused")
    outcomes = _outcomes(report)
    assert status == 0, out
    # Where the machine itself refuses unshare(CLONE_FILES) (a container's seccomp profile), no thread can have a
    # table of its own here: those two cases say so; the fd-set comparison is still proven on shared tables.
    refusal = bounded.unshare_refusal("files")
    own_table = "SKIPPED (not run: unshare refused (%s))" % refusal if refusal else "PASSED"
    assert outcomes == {"test_a_thread_with_a_file_table_of_its_own_is_read[kcmp]": own_table,
                        "test_a_thread_with_a_file_table_of_its_own_is_read[no kcmp]": own_table,
                        "test_threads_that_share_the_table_are_read_once[kcmp]": "PASSED",
                        "test_threads_that_share_the_table_are_read_once[no kcmp]": "PASSED"}, out


def test_the_simulated_node_keeps_the_holder_kinds_it_can_start_where_unshare_is_refused(child_env, tmp_path):
    report = tmp_path / "report.xml"
    files = [os.path.join(HERE, name) for name in ("test_sim_nvml.py", "test_sim_tools.py")]
    status, out = _refused("unshare", _pytest(report, "-k", "holder_kind or unshares or destroy_kills", *files), child_env,
                           "the simulated node's holder kinds with unshare refused")
    outcomes = _outcomes(report)
    assert status == 0, out
    assert outcomes["test_every_holder_kind_is_listed_while_its_process_exists"] == "PASSED", out
    assert outcomes["test_destroy_kills_every_process_and_removes_the_root"] == "PASSED", out
    unsharing = dict((name, outcome) for name, outcome in outcomes.items() if "_that_unshares" in name)
    assert len(unsharing) == 8 and set(unsharing.values()) == {"SKIPPED (%s)" % NOT_RUN}, out
