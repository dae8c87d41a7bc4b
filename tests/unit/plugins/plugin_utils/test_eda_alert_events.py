# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""alert_events: an Alertmanager body to events; the host from the instance label (a port that is no number is no
host, a hostile label a problem, never a limit), resolved alerts no event, values of the wrong type taken as missing."""

import json

import pytest

from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda._alert_webhook_source import alert_events
from ansible_collections.gpuops.remediation.tests.unit.helpers.eda_sources import ODD_ALERTS, _alert


@pytest.mark.parametrize("instance", ["node1:node2", "node1:", "node1:9100x", "node1:\u0669\u0661\u0660\u0660"])
def test_instance_label_whose_port_is_no_number_is_no_host(instance):
    """Only a port is dropped from Prometheus's instance label: "node1:node2" was taken as host node1."""
    events, problems = alert_events(_alert(instance))
    assert events == [] and len(problems) == 1 and "not one host name" in problems[0], (events, problems)


@pytest.mark.parametrize("instance, host", [("node1:9100", "node1"), ("[::1]:9100", "::1"), ("fe80::1", "fe80::1"),
                                            ("node1.example.com:9100", "node1.example.com")])
def test_instance_label_with_a_port_is_its_host(instance, host):
    events, problems = alert_events(_alert(instance))
    assert problems == [] and [event["meta"]["hosts"] for event in events] == [host]


@pytest.mark.parametrize("host", ["node 1", "node1\n", "n\u00f6de1", "all", "node*", "!node1", "node1:node2", "node1,node2",
                                  "&gpu", "~node.*", "@hosts.txt", "-x", ""])
def test_hostile_host_labels_are_problems_never_a_limit(host):
    events, problems = alert_events({"alerts": [{"status": "firing", "labels": {"alertname": "GpuopsGpuLost", "host": host}}]},
                                    host_label="host")
    assert events == [] and len(problems) == 1, (host, events)


def test_resolved_alerts_make_no_event_in_either_shape():
    body = {"status": "resolved", "alerts": [
        {"status": "resolved", "labels": {"alertname": "GpuopsGhostMemory", "instance": "node1:9100"}}]}
    assert alert_events(body) == ([], [])
    watch = {"host": "node1", "alerts": [{"status": "resolved", "kind": "ghost_memory", "gpu_index": 0}]}
    assert alert_events(watch) == ([], [])


def test_alert_values_of_the_wrong_type_are_taken_as_missing_never_an_exception():
    """A list where annotations are a mapping, a mapping or a list as the alert name, a number as the instance: each
    raised (AttributeError, TypeError: unhashable) and the webhook answered 500 for the whole request, every other alert
    of it lost; now each alert is an event or a problem of its own."""
    events, problems = alert_events({"alerts": ODD_ALERTS})
    assert [(event["meta"]["hosts"], event["gpuops"]["alert"], event["gpuops"]["rung"]) for event in events] == [
        ("node1", "GpuopsGhostMemory", "reset"), ("node2", None, "none"), ("node3", None, "none")]
    assert events[1]["gpuops"]["gpu"] is None and events[2]["gpuops"]["fingerprint"] is None
    assert problems == ["alert 2 (GpuopsGpuLost): its host 1.5 is not a host name"]
    json.dumps(events)
    watch = {"host": "node4", "alerts": [{"status": "firing", "kind": ["ghost_memory"], "gpu_index": {"i": 0},
                                          "pci_bus_id": 3, "message": ["m"]}]}
    events, problems = alert_events(watch)
    assert problems == [] and [(e["gpuops"]["alert"], e["gpuops"]["gpu_index"], e["gpuops"]["gpu"]) for e in events] == [
        (None, None, None)]


def test_an_alert_name_that_holds_a_line_break_is_one_line_of_its_problem():
    """The alert's name is text from the sender: in the problem (logged by the source, printed by the rulebooks) it
    cannot start a line of its own that reads as another alert's problem, nor carry terminal escapes."""
    forged = "GpuopsGhostMemory\nalert 1 (GpuopsGhostMemory) on node08: its pci_bus_id 'x' is not a PCI bus id\x1b[2J"
    body = {"alerts": [{"status": "firing", "labels": {"alertname": forged, "instance": "node07:9100", "pci_bus_id": "nope"}},
                       {"status": "firing", "labels": {"alertname": forged}}]}
    events, problems = alert_events(body)
    assert events == [] and len(problems) == 2
    assert all("\n" not in problem and "\x1b" not in problem for problem in problems), problems
    assert problems[0].startswith("alert 0 (GpuopsGhostMemory\\x0aalert 1 (GpuopsGhostMemory) on node08: ")
    assert problems[1].endswith("\\x1b[2J) names no host")
