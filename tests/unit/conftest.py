"""Where the collection is imported from, for the tests and for the Python children they start.

ansible-test units runs the tests inside a physical ansible_collections/gpuops/remediation tree and puts the
root above it on sys.path itself. From a checkout elsewhere (make units) the root is .collections, where
make collection links the checkout as ansible_collections/gpuops/remediation.
"""
import faulthandler
import os
import shutil
import signal
import sys
import tempfile

import pytest

COLLECTION = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _collections_root():
    namespace_dir = os.path.dirname(COLLECTION)
    if os.path.basename(os.path.dirname(namespace_dir)) == "ansible_collections":
        return os.path.dirname(os.path.dirname(namespace_dir))
    linked = os.path.join(COLLECTION, ".collections")
    if not os.path.isdir(os.path.join(linked, "ansible_collections", "gpuops", "remediation")):
        raise RuntimeError("run 'make collection' first: %s is missing" % linked)
    if linked not in sys.path:
        sys.path.insert(0, linked)
    return linked


COLLECTIONS_ROOT = _collections_root()


@pytest.fixture
def collection_root():
    """The collection's own directory: the checkout, or ansible-test's copy of it."""
    return COLLECTION


@pytest.fixture
def collections_root():
    """The directory that holds ansible_collections/gpuops/remediation."""
    return COLLECTIONS_ROOT


@pytest.fixture
def child_env():
    """The environment of a Python child that imports the collection the way these tests do."""
    return dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [COLLECTIONS_ROOT, os.environ.get("PYTHONPATH")])))


@pytest.fixture
def staged():
    """A world-readable directory of the test's own, for what a second account (runuser) must reach (the tmp_path of
    root is mode 700)."""
    directory = tempfile.mkdtemp(prefix="gpuops-staged-")
    os.chmod(directory, 0o755)
    yield directory
    shutil.rmtree(directory)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):  # pylint: disable=unused-argument
    """A test not run because the kernel refused a call (bounded.not_run) is listed by pytest's -r summary under
    the test's own location, not the helper's line that skipped it."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and isinstance(report.longrepr, tuple) and report.longrepr[2].startswith("Skipped: not run: "):
        path, line, _name = item.location
        report.longrepr = (path, line + 1, report.longrepr[2])
        _record_not_run("%s: %s" % (item.nodeid, report.longrepr[2][len("Skipped: "):]))


# make test prints these at its very end (tools/not_run_summary.py), beside the integration targets that did not run.
NOT_RUN_FILE = os.path.join(COLLECTION, "tests", "output", "not-run-units.txt")


def _record_not_run(line):
    if os.environ.get("GPUOPS_CALLS_REFUSED_ON_PURPOSE"):
        return
    os.makedirs(os.path.dirname(NOT_RUN_FILE), exist_ok=True)
    with open(NOT_RUN_FILE, "a") as handle:
        handle.write(line + "\n")


# The last line of defence behind bounded.py: a test that still blocks somewhere the scan cannot see (a socket read
# without a timeout, a C call) fails after this many seconds with every thread's stack, and the whole run ends a
# minute later if even that cannot interrupt it. No unit test comes near it; GPUOPS_TEST_DEADLINE overrides it.
TEST_DEADLINE = int(os.environ.get("GPUOPS_TEST_DEADLINE", "300"))


class TestDeadlineExceeded(Exception):
    """A test ran past TEST_DEADLINE."""


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    def expired(_signum, _frame):
        raise TestDeadlineExceeded("%s ran past its %d s deadline (GPUOPS_TEST_DEADLINE)" % (item.nodeid, TEST_DEADLINE))

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(TEST_DEADLINE)
    faulthandler.dump_traceback_later(TEST_DEADLINE + 60, exit=True)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
