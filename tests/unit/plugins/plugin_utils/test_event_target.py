# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A run started by an event targets exactly the event's one inventory host (plugin_utils/eda/_event_target.py)."""

import pytest

from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda._event_target import event_target_error, inventory_host_problem

FLEET = ["f%02d" % index for index in range(1, 11)]
GROUPS = {"all": FLEET + ["login1", "racks"], "ungrouped": ["login1"], "gpu_nodes": FLEET, "rack1": FLEET[:2],
          "racks": ["racks"], "empty": []}


def test_one_host_of_the_inventory_targeted_alone_goes_on():
    assert event_target_error("f03", ["f03"], GROUPS) is None
    assert event_target_error(None, FLEET, GROUPS) is None  # not started by an event: nothing to check


@pytest.mark.parametrize("host, play, says", [
    ("gpu_nodes", FLEET, "gpuops_event_host='gpu_nodes' names a group of the inventory (10 hosts: f01, f02, f03, f04, f05, "
                         "f06, f07, f08 and 2 more), not one host: the event would run the ladder on hosts it does not name"),
    ("rack1", FLEET[:2], "gpuops_event_host='rack1' names a group of the inventory (2 hosts: f01, f02), not one host"),
    ("empty", [], "gpuops_event_host='empty' names a group of the inventory (0 hosts: ), not one host"),
    ("all", FLEET, "gpuops_event_host='all' names a group of the inventory (12 hosts"),
    ("racks", ["racks"], "gpuops_event_host='racks' names both a host and a group of the inventory (1 host: racks): ambiguous"),
    ("ghost9", [], "gpuops_event_host='ghost9' is no host of the inventory"),
    ("f03", ["f03", "f04"], "the run started by the event for f03 targets 2 hosts (f03, f04), not that one alone"),
    ("f03", [], "the run started by the event for f03 targets 0 hosts (), not that one alone"),
    ("", ["f03"], "gpuops_event_host must name one inventory host, got ''"),
    (["f03"], ["f03"], "gpuops_event_host must name one inventory host, got ['f03']"),
])
def test_a_group_an_unknown_host_or_more_hosts_are_refused_naming_why(host, play, says):
    said = event_target_error(host, play, GROUPS)
    assert said is not None and said.startswith(says), said


def test_inventory_host_problem_as_the_webhook_asks_it():
    assert inventory_host_problem("f01", GROUPS) is None
    assert inventory_host_problem("gpu_nodes", GROUPS).startswith("'gpu_nodes' names a group of the inventory (10 hosts")
    assert inventory_host_problem("f01", {}) == "'f01' is no host of the inventory"
