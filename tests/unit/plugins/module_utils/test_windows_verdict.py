# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""_verdict.windows_verdict: the Windows rungs, defined once, picked from the evidence."""

import pytest

from ansible_collections.gpuops.remediation.plugins.module_utils import _verdict


def snapshot(holders=(), **gpu):
    base = {"index": 0, "pci_bus_id": "00000000:0C:00.0", "unattributed_mib": 0, "recovery_action": "none"}
    return {"gpus": [dict(base, **gpu)], "holders": list(holders), "probes": {"gpu": {"ok": True}}}


def holder(cls, session_id=1, used_mib=100):
    return {"pid": 1000, "name": "x.exe", "class": cls, "session_id": session_id, "used_mib": used_mib, "gpus": [0]}


def test_the_windows_ladder_is_defined_once_lightest_first():
    assert _verdict.WINDOWS_RUNGS == ("kill", "wsl", "restart_adapter", "logoff", "reboot")
    assert _verdict.NO_RUNG not in _verdict.WINDOWS_RUNGS


@pytest.mark.parametrize("snap, rung", [
    (snapshot(), "none"),
    (snapshot([holder("graphics_session")]), "none"),
    (snapshot([holder("compute")]), "kill"),
    (snapshot([holder("compute"), holder("wsl_vm", session_id=0)]), "wsl"),
    (snapshot(unattributed_mib=1000), "restart_adapter"),
    (snapshot(recovery_action="reset"), "restart_adapter"),
    (snapshot([holder("system", session_id=2)]), "logoff"),
    (snapshot([holder("system", session_id=0)]), "reboot"),
    (snapshot(lost=True), "reboot"),
])
def test_the_rung_comes_from_the_evidence(snap, rung):
    verdict = _verdict.windows_verdict(snap, 256)
    assert verdict["rung"] == rung
    assert all(reason["rung"] in _verdict.WINDOWS_RUNGS for reason in verdict["reasons"])


def test_the_linux_verdict_is_unchanged_by_the_windows_rungs():
    snap = dict(snapshot(unattributed_mib=1000), xid_events=[])
    assert _verdict.verdict(snap, 256)["rung"] == "reset"
