# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""bounded.py, the one way the tests wait on a helper: a helper that never answers fails the test within the
deadline, naming what was awaited and showing the helper's stderr; a helper that reports a refused call makes the
test not run, saying which call and why."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from ansible_collections.gpuops.remediation.tests.unit.helpers import bounded

SILENT = "import sys, time; sys.stderr.write('stuck on purpose\\n'); sys.stderr.flush(); time.sleep(60)"


def _helper(code):
    return bounded.start([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)


def test_a_helper_that_never_prints_fails_within_the_deadline_with_its_stderr():
    proc = _helper(SILENT)
    began = time.monotonic()
    with pytest.raises(pytest.fail.Exception) as failed:
        bounded.line(proc, "the silent helper", timeout=1.0)
    assert time.monotonic() - began < 1.0 + bounded.DEADLINE
    assert "no line from the silent helper within 1.0s" in str(failed.value)
    assert "stuck on purpose" in str(failed.value)
    assert proc.poll() is not None  # killed, not left behind


def test_a_helper_that_never_ends_fails_the_wait_and_is_killed():
    proc = _helper(SILENT)
    with pytest.raises(pytest.fail.Exception) as failed:
        bounded.wait(proc, "the endless helper", timeout=0.5)
    assert "the endless helper did not end within 0.5s" in str(failed.value)
    assert proc.poll() is not None


def test_a_helper_that_ends_without_its_line_fails_naming_it():
    proc = _helper("import sys; sys.stderr.write('gave up\\n')")
    with pytest.raises(pytest.fail.Exception) as failed:
        bounded.line(proc, "the quitter")
    assert "the quitter ended its output without the line awaited" in str(failed.value) and "gave up" in str(failed.value)


def test_a_refused_call_makes_the_test_not_run_naming_the_call_and_the_errno():
    proc = _helper("import errno; print('REFUSED unshare', errno.errorcode[errno.EPERM], flush=True)")
    with pytest.raises(pytest.skip.Exception) as skipped:
        bounded.line(proc, "the refused helper")
    assert str(skipped.value) == "not run: unshare refused (EPERM)"
    assert proc.returncode == 0


def test_a_run_past_its_deadline_fails_naming_it():
    with pytest.raises(pytest.fail.Exception) as failed:
        bounded.run([sys.executable, "-c", SILENT], "the slow run", timeout=0.5, capture_output=True)
    assert "the slow run did not end within 0.5s" in str(failed.value)
