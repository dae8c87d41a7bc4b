# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one command runner (_command.CommandRunner), with a real AnsibleModule and real child processes."""

from __future__ import annotations

import json
import os
import sys
import time

import pytest

from ansible.module_utils import basic
from ansible.module_utils.common.text.converters import to_bytes

from ansible_collections.gpuops.remediation.plugins.module_utils._command import CommandRunner
from ansible_collections.gpuops.remediation.plugins.module_utils.journal._writer import Journal
from ansible_collections.gpuops.remediation.plugins.module_utils.journal._reader import read_journal
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._deadline import ProbeTimeout


def real_module(monkeypatch, check_mode=False):
    args = {"ANSIBLE_MODULE_ARGS": {"_ansible_check_mode": check_mode, "_ansible_remote_tmp": "/tmp", "_ansible_keep_remote_files": False}}
    monkeypatch.setattr(basic, "_ANSIBLE_ARGS", to_bytes(json.dumps(args)))
    monkeypatch.setattr(basic, "_ANSIBLE_PROFILE", "legacy", raising=False)
    return basic.AnsibleModule(argument_spec={}, supports_check_mode=True)


def _processes_with_argv(argv):
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open("/proc/%s/cmdline" % name, "rb") as handle:
                    if handle.read().split(b"\0")[:-1] == [to_bytes(part) for part in argv]:
                        found.append(int(name))
            except OSError:
                continue
    return found


def test_a_command_past_its_deadline_raises_and_is_killed_with_its_child(monkeypatch):
    module = real_module(monkeypatch)
    argv = ["sleep", "61.2345"]
    started = time.monotonic()
    with pytest.raises(ProbeTimeout):
        CommandRunner(module).probe(argv, timeout=0.5)
    assert time.monotonic() - started < 30
    # The sleep itself is killed with the deadline's child (its process group), not left running.
    deadline = time.monotonic() + 10
    while _processes_with_argv(argv) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _processes_with_argv(argv) == [], "the timed-out sleep 61.2345 still runs after 10 s"


def test_a_command_within_its_deadline_gives_its_answer(monkeypatch):
    module = real_module(monkeypatch)
    result = CommandRunner(module).probe([sys.executable, "-c", "print('answer')"], timeout=30)
    assert (result.rc, result.out, result.err) == (0, "answer\n", "")


def test_a_non_zero_exit_is_returned_with_its_stderr(monkeypatch):
    module = real_module(monkeypatch)
    rc, out, err = CommandRunner(module).probe([sys.executable, "-c", "import sys; sys.stderr.write('broken'); sys.exit(3)"])
    assert (rc, out, err) == (3, "", "broken")


def test_the_child_runs_in_the_c_locale(monkeypatch):
    monkeypatch.setenv("LC_ALL", "de_DE.UTF-8")
    monkeypatch.setenv("LANG", "de_DE.UTF-8")
    module = real_module(monkeypatch)
    rc, out, dummy = CommandRunner(module).probe([sys.executable, "-c", "import os; print(os.environ['LC_ALL'], os.environ['LANG'])"])
    assert (rc, out) == (0, "C C\n")


def test_a_shell_string_is_refused(monkeypatch):
    module = real_module(monkeypatch)
    with pytest.raises(TypeError, match="never a shell string"):
        CommandRunner(module).probe("touch /tmp/x; rm -rf /")


def test_check_mode_runs_nothing_journals_nothing_and_says_what_would_run(monkeypatch, tmp_path):
    module = real_module(monkeypatch, check_mode=True)
    journal_path = tmp_path / "journal.jsonl"
    made = tmp_path / "made"
    result = CommandRunner(module, Journal(str(journal_path))).act(["touch", str(made)], "touch_file", gpu=0)
    assert result.skipped and result.argv == ["touch", str(made)] and result.rc == 0
    assert not made.exists()
    assert read_journal(str(journal_path)) == []


def test_an_acting_command_is_journalled_before_and_after(monkeypatch, tmp_path):
    module = real_module(monkeypatch)
    journal_path = tmp_path / "journal.jsonl"
    made = tmp_path / "made"
    script = "import sys; open(sys.argv[1], 'w').close(); print('done'); sys.stderr.write(' warned \\n'); sys.exit(4)"
    argv = [sys.executable, "-c", script, str(made)]
    runner = CommandRunner(module, Journal(str(journal_path), run_id="r1"))
    result = runner.act(argv, "make_file", keep_stdout=True, outcome={"unit": "u"}, gpu=2)
    assert made.exists() and not result.skipped and result.rc == 4
    intent, outcome = read_journal(str(journal_path))
    assert (intent["phase"], intent["action"], intent["gpu"], intent["argv"], intent["run_id"]) == ("intent", "make_file", 2, argv, "r1")
    assert outcome["id"] == intent["id"]
    assert (outcome["phase"], outcome["action"], outcome["ok"], outcome["rc"]) == ("outcome", "make_file", False, 4)
    assert (outcome["stdout"], outcome["stderr"], outcome["unit"]) == ("done", "warned", "u")


def test_the_argv_can_be_left_out_of_the_intent(monkeypatch, tmp_path):
    module = real_module(monkeypatch)
    journal_path = tmp_path / "journal.jsonl"
    CommandRunner(module, Journal(str(journal_path))).act(["true"], "noop", journal_argv=False, target="t")
    intent, outcome = read_journal(str(journal_path))
    assert "argv" not in intent and intent["target"] == "t"
    assert outcome["ok"] is True and outcome["rc"] == 0 and "stdout" not in outcome
