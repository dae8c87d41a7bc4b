"""A test of the tests: no unit test can wait on a helper without a bound.

Every helper is started, read and waited on through tests/unit/helpers/bounded.py (deadlines that fail naming
what was waited for, with the helper's stderr); any other blocking call in the tests carries a timeout."""
import ast
import os
import subprocess
import sys

UNIT = os.path.dirname(os.path.abspath(__file__))
BOUNDED = os.path.join(UNIT, "helpers", "bounded.py")

# Calls only bounded.py makes: they start a helper or read its output.
ONLY_THROUGH_BOUNDED = {"Popen": "bounded.start", "communicate": "bounded.communicate"}
# Calls that block until something happens: a timeout (keyword, or the positional argument where the call takes one).
NEEDS_TIMEOUT = {"run": None, "call": None, "check_call": None, "check_output": None, "wait": 0, "join": 0, "select": 3,
                 "acquire": 1, "get": None, "urlopen": 2, "create_connection": 1}
LOCK_CALLS = ("flock", "lockf")
SUBPROCESS_ONLY = {"run", "call", "check_call", "check_output"}


def _name(func):
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)


def _receiver(func):
    return _name(func.value) if isinstance(func, ast.Attribute) else None


def _sleeps_outside_a_loop(tree):
    """ids of the sleep calls that no loop encloses within their function: a sleep that is no poll's interval."""
    found = set()

    def visit(node, in_loop):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                visit(child, False)
                continue
            if (isinstance(child, ast.Call) and _name(child.func) == "sleep" and _receiver(child.func) in ("time", "asyncio")
                    and not in_loop and not (child.args and isinstance(child.args[0], ast.Constant) and child.args[0].value == 0)):
                found.add(id(child))
            visit(child, in_loop or isinstance(child, (ast.While, ast.For, ast.AsyncFor)))
    visit(tree, False)
    return found


def unbounded_calls(source, filename, standalone=False):
    """(line, why) of every call in source that could wait for ever; standalone: a script with no bounded.py to use,
    which may start a helper with Popen but bounds each wait on it itself."""
    found = []
    tree = ast.parse(source, filename)
    # asyncio.wait_for(queue.get(), timeout) bounds the call it is given.
    bounded_by_wait_for = {id(node.args[0]) for node in ast.walk(tree)
                           if isinstance(node, ast.Call) and _name(node.func) == "wait_for" and len(node.args) > 1}
    lone_sleeps = _sleeps_outside_a_loop(tree)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or id(node) in bounded_by_wait_for:
            continue
        if id(node) in lone_sleeps:
            found.append((node.lineno, "a sleep that is no poll's interval: wait on the fact (bounded.until), or "
                                       "bounded.settle for a window in which something must not happen"))
            continue
        name, receiver = _name(node.func), _receiver(node.func)
        if receiver == "bounded":
            continue
        keywords = {keyword.arg for keyword in node.keywords}
        if standalone and name == "Popen":
            continue
        if standalone and name == "communicate":
            if "timeout" not in keywords and len(node.args) < 2:
                found.append((node.lineno, "communicate() without a timeout"))
        elif name in ONLY_THROUGH_BOUNDED:
            found.append((node.lineno, "%s outside %s" % (name, ONLY_THROUGH_BOUNDED[name])))
        elif name == "readline" and receiver in ("stdout", "stderr"):
            found.append((node.lineno, "a helper's %s.readline() outside bounded.line" % receiver))
        elif name in LOCK_CALLS and len(node.args) > 1 and not any(
                flag in ast.unparse(node.args[1]) for flag in ("LOCK_NB", "LOCK_UN")):
            found.append((node.lineno, "%s() that may wait for ever (no LOCK_NB)" % name))
        elif name in SUBPROCESS_ONLY and receiver != "subprocess":
            continue
        elif name == "get" and receiver not in ("queue", "q"):
            continue  # dict.get: only a queue's get blocks
        elif name in NEEDS_TIMEOUT and "timeout" not in keywords:
            position = NEEDS_TIMEOUT[name]
            if position is None or len(node.args) <= position:
                found.append((node.lineno, "%s() without a timeout" % name))
    return found


def _test_sources():
    for folder, _dirs, files in os.walk(UNIT):
        for name in sorted(files):
            path = os.path.join(folder, name)
            if name.endswith(".py") and path != BOUNDED:
                yield path


INTEGRATION = os.path.join(os.path.dirname(UNIT), "integration")


def _integration_helper_sources():
    targets = os.path.join(INTEGRATION, "targets")
    for name in sorted(os.listdir(targets)):
        files = os.path.join(targets, name, "files")
        if os.path.isdir(files):
            for entry in sorted(os.listdir(files)):
                if entry.endswith(".py"):
                    yield os.path.join(files, entry)


def test_no_integration_helper_waits_without_a_bound():
    """The targets' helper scripts run alone: every wait carries its own timeout (run.py's deadline is the last resort)."""
    offenders = []
    for path in _integration_helper_sources():
        with open(path, encoding="utf-8") as handle:
            offenders += ["%s:%d: %s" % (os.path.relpath(path, INTEGRATION), line, why)
                          for line, why in unbounded_calls(handle.read(), path, standalone=True)]
    assert offenders == []


def test_no_unit_test_waits_without_a_bound():
    offenders = []
    for path in _test_sources():
        with open(path, encoding="utf-8") as handle:
            offenders += ["%s:%d: %s" % (os.path.relpath(path, UNIT), line, why) for line, why in unbounded_calls(handle.read(), path)]
    assert offenders == []


def test_the_scan_finds_each_kind_of_unbounded_wait():
    source = """
proc = subprocess.Popen(["sleep", "1"])
proc.stdout.readline()
proc.communicate(b"x")
proc.wait()
thread.join()
event.wait()
subprocess.run(["true"], check=True)
select.select([r], [], [])
lock.acquire()
queue.get()
fcntl.flock(handle, fcntl.LOCK_EX)
urllib.request.urlopen(url)
time.sleep(0.3)
await asyncio.sleep(0.3)
"""
    assert [line for line, _why in unbounded_calls(source, "example")] == list(range(2, 16))


def test_the_standalone_scan_allows_popen_and_bounds_every_wait():
    source = """
proc = subprocess.Popen(["sleep", "1"])
proc.communicate(timeout=5)
proc.communicate()
proc.wait()
os.wait()
fcntl.flock(handle, fcntl.LOCK_EX)
"""
    assert [line for line, _why in unbounded_calls(source, "example", standalone=True)] == [4, 5, 6, 7]


def test_the_scan_lets_bounded_waits_through():
    source = """
proc = bounded.start(["sleep", "1"], stdout=subprocess.PIPE)
bounded.line(proc, "the sleeper")
bounded.wait(proc, "the sleeper")
proc.wait(timeout=5)
thread.join(5)
event.wait(timeout=1)
subprocess.run(["true"], check=True, timeout=10)
select.select([r], [], [], 1.0)
settings.get("key")
await asyncio.wait_for(queue.get(), 5)
bounded.communicate(proc, "the sleeper")
fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
fcntl.flock(handle, fcntl.LOCK_UN)
urllib.request.urlopen(url, timeout=5)
await asyncio.sleep(0)
while not ready():
    time.sleep(0.05)
bounded.settle(0.2, "nobody signalled")
"""
    assert unbounded_calls(source, "example") == []


PROBE_CONFTEST = """
import importlib.util
spec = importlib.util.spec_from_file_location("gpuops_unit_conftest", %r)
unit_conftest = importlib.util.module_from_spec(spec)
spec.loader.exec_module(unit_conftest)
pytest_runtest_call = unit_conftest.pytest_runtest_call
"""

# A wait the scan above cannot see: a socket read with no timeout, on a pair whose other end never writes.
BLOCKED_TEST = """
import socket
def test_reads_a_socket_nobody_writes_to():
    here, there = socket.socketpair()
    here.recv(1)
"""


def _plain_pytest_env(**extra):
    """The environment without ansible-test's pytest plugins (PYTEST_PLUGINS), which refuse a test outside the collection."""
    env = {key: value for key, value in os.environ.items() if key != "PYTEST_PLUGINS"}
    env.update(extra)
    return env


def test_a_test_that_blocks_unseen_fails_at_the_deadline(tmp_path):
    (tmp_path / "conftest.py").write_text(PROBE_CONFTEST % os.path.join(UNIT, "conftest.py"))
    (tmp_path / "test_blocked.py").write_text(BLOCKED_TEST)
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-c", os.devnull,
                           "--rootdir", str(tmp_path), str(tmp_path / "test_blocked.py")],
                          timeout=120, capture_output=True, text=True, check=False,
                          env=_plain_pytest_env(GPUOPS_TEST_DEADLINE="2"))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "test_reads_a_socket_nobody_writes_to ran past its 2 s deadline (GPUOPS_TEST_DEADLINE)" in done.stdout
    assert "1 failed" in done.stdout
