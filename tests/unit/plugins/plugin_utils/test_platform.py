# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A host's platform and its options, decided in Python (the roles pass both platforms' values and decide nothing)."""

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.remediation.plugins.filter.ladder import host_platform, needs_destructive_rung
from ansible_collections.gpuops.remediation.plugins.plugin_utils.ladder._ladder_options import platform_args

WALK = {"platform": "linux", "max_rung": "reload", "destructive_rungs": ["reset"], "journal_path": None,
        "windows": {"max_rung": "restart_adapter", "destructive_rungs": ["logoff"], "journal_path": "D:\\gpuops\\j.jsonl"},
        "option_names": {"max_rung": "gpu_reclaim_max_rung", "windows.max_rung": "gpu_reclaim_windows_max_rung",
                         "destructive_rungs": "gpu_reclaim_destructive_rungs"}}
GHOST = {"gpus": [{"index": 0, "state": "stuck", "unattributed_mib": 4096, "memory_used_mib": 4096}], "holders": [],
         "verdict": {"rung": "reset", "reasons": [{"rung": "reset", "reason": "ghost"}]}, "xid_events": []}


def test_a_linux_walk_keeps_its_own_options_and_drops_the_windows_ones():
    args = platform_args(WALK)
    assert args["max_rung"] == "reload" and args["destructive_rungs"] == ["reset"] and args["journal_path"] is None
    assert "windows" not in args
    assert args["option_names"]["max_rung"] == "gpu_reclaim_max_rung"


def test_a_windows_walk_takes_the_windows_options_and_names_them_as_the_caller_does():
    args = platform_args(dict(WALK, platform="windows"))
    assert args["max_rung"] == "restart_adapter" and args["destructive_rungs"] == ["logoff"]
    assert args["journal_path"] == "D:\\gpuops\\j.jsonl"
    assert args["option_names"]["max_rung"] == "gpu_reclaim_windows_max_rung"
    # One without a Windows name keeps its own.
    assert args["option_names"]["destructive_rungs"] == "gpu_reclaim_destructive_rungs"


def test_an_unset_windows_option_keeps_the_walks():
    args = platform_args(dict(WALK, platform="windows", windows={"max_rung": None, "destructive_rungs": None, "journal_path": None}))
    assert args["max_rung"] == "reload" and args["destructive_rungs"] == ["reset"]


@pytest.mark.parametrize("given, connection, shell, family, platform", [
    ("", "ssh", "sh", "", "linux"),
    ("", "local", "", "", "linux"),
    ("", "winrm", "", "", "windows"),
    ("", "psrp", "", "", "windows"),
    ("", "ssh", "powershell", "", "windows"),
    ("", "ssh", "cmd", "", "windows"),
    ("", "ssh", "sh", "Windows", "windows"),
    ("linux", "winrm", "powershell", "Windows", "linux"),
    ("windows", "local", "sh", "Debian", "windows"),
    (None, None, None, None, "linux"),
])
def test_the_platform_is_the_operators_word_else_how_ansible_reaches_the_host(given, connection, shell, family, platform):
    assert host_platform(given, connection, shell, family) == platform


def test_an_unknown_platform_is_refused_naming_the_variable():
    with pytest.raises(AnsibleFilterError, match="gpu_remediate_os: 'macos'"):
        host_platform("macos")


def test_the_guard_reads_the_destructive_rungs_of_the_hosts_platform():
    assert needs_destructive_rung(GHOST, ["reset"], "linux", ["restart_adapter"]) is True
    assert needs_destructive_rung(GHOST, ["reload"], "linux", ["reset"]) is False
    with pytest.raises(AnsibleFilterError, match="gpu_reclaim_windows_destructive_rungs names no rung 'reset'"):
        needs_destructive_rung(GHOST, ["reset"], "windows", ["reset"])


def test_the_flagged_hosts_keep_their_order_and_skip_unset_and_false_flags():
    from ansible_collections.gpuops.remediation.plugins.filter.ladder import flagged_hosts
    hostvars = {"a": {"flag": True}, "b": {}, "c": {"flag": "false"}, "d": {"flag": "yes"}, "e": {"flag": None}}
    assert flagged_hosts(["d", "a", "b", "c", "e", "missing"], hostvars, "flag") == ["d", "a"]
    with pytest.raises(AnsibleFilterError, match="flagged_hosts"):
        flagged_hosts(["a"], hostvars, "")
