# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The site's Xid policy: parsing, its errors, and the verdict and the sources reading it through event_rung."""

import pytest

from ansible_collections.gpuops.remediation.plugins.module_utils.probes._kernel_log import parse_kernel_log
from ansible_collections.gpuops.remediation.plugins.module_utils._verdict import verdict
from ansible_collections.gpuops.remediation.plugins.module_utils._xid_policy import (
    PolicyError, apply_policy, event_rung, parse_policy,
)

XID_13 = "2026-11-30T10:00:00+00:00 node kernel: NVRM: Xid (PCI:0000:18:00): 13, pid=77, name=train, Graphics Exception"
XID_79 = "2026-11-30T10:00:01+00:00 node kernel: NVRM: Xid (PCI:0000:18:00): 79, pid=<unknown>, GPU has fallen off the bus."


def test_codes_as_yaml_ints_or_json_strings():
    assert parse_policy({13: "reset", "79": "none", " 48 ": "reboot"}) == {13: "reset", 79: "none", 48: "reboot"}
    assert parse_policy(None) == {}
    assert parse_policy({}) == {}


@pytest.mark.parametrize("policy, says", [
    ({"abc": "reset"}, "xid_policy: the Xid code 'abc' is not a number"),
    ({0: "reset"}, "the Xid code 0 is not a number 1..999"),
    ({-5: "reset"}, "the Xid code -5"),
    ({True: "reset"}, "the Xid code True is not a number"),
    ({13: "reload"}, "Xid 13 maps to 'reload', which is not a rung it can ask for (one of kill, none, reboot, reset)"),
    ({13: None}, "Xid 13 maps to None"),
    ({13: ["reset"]}, "Xid 13 maps to ['reset']"),
    ({13: "reset", "13": "kill"}, "Xid 13 is given twice, as 'reset' and 'kill'"),
    (["13"], "xid_policy must be a mapping of Xid code to rung, got ['13']"),
])
def test_bad_entries_named_with_their_value(policy, says):
    with pytest.raises(PolicyError) as caught:
        parse_policy(policy)
    assert says in str(caught.value)


def test_policy_overrides_the_catalog_and_keeps_its_action():
    events = apply_policy(parse_kernel_log(XID_13 + "\n" + XID_79), parse_policy({13: "reset", 79: "none"}))
    assert [event_rung(event) for event in events] == ["reset", None]
    assert events[0]["catalog"]["catalog_action"] == "restart_app"
    assert events[0]["catalog"]["policy"] == "site"
    assert events[1]["catalog"]["catalog_action"] == "reboot"
    plain = parse_kernel_log(XID_13 + "\n" + XID_79)
    assert [event_rung(event) for event in plain] == ["kill", "reboot"]
    assert "policy" not in plain[0]["catalog"]


def _snapshot(events):
    gpu = {"index": 0, "pci_bus_id": "00000000:18:00.0", "unattributed_mib": 0, "state": "ok"}
    for event in events:
        event["gpu_index"] = 0
        event["answered_by"] = None
    return {"gpus": [gpu], "holders": [], "xid_events": events, "probes": {"gpu": {"ok": True}}}


def test_the_verdict_reads_the_policy_written_into_the_events():
    line = XID_13.replace("pid=77, name=train, ", "")
    catalog = verdict(_snapshot(parse_kernel_log(line)), 256)
    assert catalog["rung"] == "kill"
    site = verdict(_snapshot(apply_policy(parse_kernel_log(line), parse_policy({"13": "reset"}))), 256)
    assert site["rung"] == "reset"
    assert any("Xid 13" in reason["reason"] for reason in site["reasons"])
    quiet = verdict(_snapshot(apply_policy(parse_kernel_log(XID_79), parse_policy({79: "none"}))), 256)
    assert quiet["rung"] == "none"
