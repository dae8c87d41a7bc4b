# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""_containers: the argv per runtime, and stop_container through a real AnsibleModule running stand-in CLIs.

The stand-ins are real executables named docker, podman and crictl that record the argv they were given, so
the tests see exactly what a runtime would receive, and that no shell ever parsed it.
"""

from __future__ import annotations

import json
import os
import stat
import sys

import pytest

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpuops.remediation.plugins.module_utils.kill._containers import (
    RUNTIME_CLIS, own_container_refusal, predict_stop, runtime_cli, stop_argv, stop_container)
from ansible_collections.gpuops.remediation.plugins.module_utils.journal._writer import Journal
from ansible_collections.gpuops.remediation.plugins.module_utils.journal._reader import read_journal

CONTAINER_ID = "1dfed29cd2cb99266ed6ca96074395c3d1d6a688536a2866ffe35f32a072ff0f"

# Records its argv (as the kernel passed it) next to itself, prints $FAKE_STDERR to stderr, exits with $FAKE_RC.
FAKE_CLI = """#!{python}
import json, os, sys
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "calls.jsonl"), "a") as handle:
    handle.write(json.dumps(sys.argv) + "\\n")
sys.stderr.write(os.environ.get("FAKE_STDERR", ""))
sys.stdout.write(os.environ.get("FAKE_STDOUT", ""))
sys.exit(int(os.environ.get("FAKE_RC", "0")))
"""


@pytest.mark.parametrize("runtime, expected", [
    ("docker", ["/usr/bin/docker", "stop", "--time", "10", CONTAINER_ID]),
    ("podman", ["/usr/bin/podman", "stop", "--time", "10", CONTAINER_ID]),
    ("containerd", ["/usr/bin/crictl", "stop", "--timeout", "10", CONTAINER_ID]),
    ("cri-o", ["/usr/bin/crictl", "stop", "--timeout", "10", CONTAINER_ID]),
])
def test_stop_argv_per_runtime(runtime, expected):
    cli_path = "/usr/bin/" + RUNTIME_CLIS[runtime]
    assert stop_argv(cli_path, runtime, CONTAINER_ID, 10.0) == expected


@pytest.mark.parametrize("grace, seconds", [(0, "0"), (0.4, "1"), (0.5, "1"), (1.0, "1"), (2.5, "3"), (2.6, "3"), (30, "30")])
def test_stop_argv_rounds_grace_up_to_whole_seconds(grace, seconds):
    assert stop_argv("/usr/bin/docker", "docker", CONTAINER_ID, grace)[3] == seconds


def test_stop_argv_keeps_a_hostile_id_as_one_argument():
    hostile = "x; touch /tmp/pwned #"
    argv = stop_argv("/usr/bin/docker", "docker", hostile, 1)
    assert argv[-1] == hostile
    assert len(argv) == 5


@pytest.fixture
def fake_bin(tmp_path, monkeypatch):
    """A directory on PATH (alone) holding the stand-in docker, podman and crictl."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("docker", "podman", "crictl"):
        path = bin_dir / name
        path.write_text(FAKE_CLI.format(python=sys.executable))
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", str(bin_dir))
    return bin_dir


def calls(bin_dir):
    path = bin_dir / "calls.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture
def module():
    with patch_module_args({}):
        yield AnsibleModule(argument_spec={})


@pytest.mark.parametrize("runtime, cli, flag", [
    ("docker", "docker", "--time"),
    ("podman", "podman", "--time"),
    ("containerd", "crictl", "--timeout"),
    ("cri-o", "crictl", "--timeout"),
])
def test_stop_container_runs_the_runtime_cli(fake_bin, module, tmp_path, runtime, cli, flag):
    journal = Journal(str(tmp_path / "journal.jsonl"), run_id="r1")
    ok, message = stop_container(module, runtime, CONTAINER_ID, 5, journal)
    assert (ok, message) == (True, "")
    assert calls(fake_bin) == [[str(fake_bin / cli), "stop", flag, "5", CONTAINER_ID]]
    intent, outcome = read_journal(str(tmp_path / "journal.jsonl"))
    assert (intent["phase"], intent["action"], intent["runtime"], intent["container"]) == ("intent", "container_stop", runtime, CONTAINER_ID)
    assert intent["argv"] == [str(fake_bin / cli), "stop", flag, "5", CONTAINER_ID]
    assert (outcome["phase"], outcome["id"], outcome["ok"], outcome["rc"]) == ("outcome", intent["id"], True, 0)


def test_no_shell_sees_the_id(fake_bin, module, tmp_path):
    marker = tmp_path / "pwned"
    hostile = "x; touch %s #$(touch %s)" % (marker, marker)
    journal = Journal(str(tmp_path / "journal.jsonl"))
    stop_container(module, "docker", hostile, 1, journal)
    assert calls(fake_bin) == [[str(fake_bin / "docker"), "stop", "--time", "1", hostile]]
    assert not marker.exists()


def test_a_failed_stop_is_reported_and_journalled(fake_bin, module, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_RC", "1")
    monkeypatch.setenv("FAKE_STDERR", "Error response from daemon: No such container: %s\n" % CONTAINER_ID)
    journal = Journal(str(tmp_path / "journal.jsonl"))
    ok, message = stop_container(module, "docker", CONTAINER_ID, 1, journal)
    assert not ok
    assert message == "Error response from daemon: No such container: %s" % CONTAINER_ID
    outcome = read_journal(str(tmp_path / "journal.jsonl"))[-1]
    assert (outcome["ok"], outcome["rc"], outcome["stderr"]) == (False, 1, message)


def test_the_stdout_is_the_message_when_stderr_is_empty(fake_bin, module, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_STDOUT", CONTAINER_ID + "\n")
    ok, message = stop_container(module, "docker", CONTAINER_ID, 1, Journal(str(tmp_path / "journal.jsonl")))
    assert (ok, message) == (True, CONTAINER_ID)


def test_a_missing_cli_is_refused_before_the_journal(fake_bin, module, tmp_path):
    os.unlink(str(fake_bin / "podman"))
    journal_path = str(tmp_path / "journal.jsonl")
    ok, message = stop_container(module, "podman", CONTAINER_ID, 1, Journal(journal_path))
    assert (ok, message) == (False, "no CLI for container runtime podman (podman) on this node")
    assert read_journal(journal_path) == []


def test_an_unknown_runtime_is_refused(fake_bin, module, tmp_path):
    journal_path = str(tmp_path / "journal.jsonl")
    ok, message = stop_container(module, "lxc", CONTAINER_ID, 1, Journal(journal_path))
    assert (ok, message) == (False, "no CLI for container runtime lxc (unknown) on this node")
    assert calls(fake_bin) == [] and read_journal(journal_path) == []


def test_runtime_cli_finds_the_cli_or_says_why_not(fake_bin, module):
    assert runtime_cli(module, "cri-o") == (str(fake_bin / "crictl"), None)
    os.unlink(str(fake_bin / "crictl"))
    assert runtime_cli(module, "containerd") == (None, "no CLI for container runtime containerd (crictl) on this node")


def test_a_failed_stop_without_output_says_how_it_failed(fake_bin, module, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_RC", "125")
    ok, message = stop_container(module, "podman", CONTAINER_ID, 1, Journal(str(tmp_path / "journal.jsonl")))
    assert (ok, message) == (False, "podman stop exited with status 125")


def test_check_mode_predicts_the_stop_without_running_it(fake_bin, module):
    assert predict_stop(module, "docker", CONTAINER_ID) == (True, "would stop")
    assert predict_stop(module, "lxc", CONTAINER_ID) == (False, "no CLI for container runtime lxc (unknown) on this node")
    assert calls(fake_bin) == []


def test_the_container_this_module_runs_in_is_never_stopped(tmp_path):
    (tmp_path / "self").mkdir()
    (tmp_path / "self" / "cgroup").write_text("12:name=systemd:/docker/%s\n4:memory:/docker/%s\n" % (CONTAINER_ID, CONTAINER_ID))
    proc_root = str(tmp_path)
    assert own_container_refusal("docker", CONTAINER_ID, proc_root) == "docker container %s is the one this module runs in" % CONTAINER_ID
    assert own_container_refusal("docker", "0" * 64, proc_root) is None
    assert own_container_refusal("podman", CONTAINER_ID, proc_root) is None
