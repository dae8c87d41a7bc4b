# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The policy the source applies is the policy the run applies: an Xid event carries what its source decided (the code,
site policy or NVIDIA's catalog, the rung), and a run whose own gpuops_xid_policy decides otherwise is refused before
any node is touched, naming both - the case of ansible-rulebook, which copies only the inventory file into its run
directory, so that a policy in group_vars/ beside it reached the source and not the playbook."""

import pytest

from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda._event_target import event_policy_error
from ansible_collections.gpuops.remediation.tests.unit.helpers.reset_run import idle_xid_nodes, reset_gpu, resets


@pytest.mark.parametrize("xid, policy, rung, run_policy, words", [
    (63, "site", "reset", None, "the event's source applied the site policy's reset, but this run's gpuops_xid_policy "
                                "applies NVIDIA's catalog (no site entry)"),
    ("63", "site", "reset", {63: "none"}, "applied the site policy's reset, but this run's gpuops_xid_policy applies the site policy's none"),
    (13, "catalog", "kill", {"13": "reset"}, "applied NVIDIA's catalog (no site entry), but this run's gpuops_xid_policy applies the site policy's reset"),
    (63, "site", "reset", {63: "sometimes"}, "gpuops_xid_policy: Xid 63 maps to 'sometimes'"),
    ("x63", "site", "reset", None, "gpuops_event_xid must be an Xid code, got 'x63'"),
])
def test_a_run_whose_policy_disagrees_with_the_events_source_is_refused_naming_both(xid, policy, rung, run_policy, words):
    assert words in event_policy_error(xid, policy, rung, run_policy)


@pytest.mark.parametrize("xid, policy, rung, run_policy", [
    (None, None, None, {63: "reset"}),            # not started by an Xid event
    (63, "site", "reset", {63: "reset"}),
    ("63", "site", "reset", {"63": "reset", 13: "none"}),
    (119, "catalog", "reset", {63: "reset"}),     # the same catalog on both sides
])
def test_the_same_policy_on_both_sides_goes_on(xid, policy, rung, run_policy):
    assert event_policy_error(xid, policy, rung, run_policy) is None


def test_reset_gpu_refuses_an_xid_event_whose_source_applied_another_policy_and_touches_nothing(collections_root):
    """The event of a source with {63: reset} reaches a run whose inventory has no policy (ansible-rulebook's copy of the
    inventory file alone): refused before any node is touched, naming both; with the policy in the inventory it resets."""
    event = ["-l", "gpunode", "-e", "gpuops_event_host=gpunode", "-e", "gpuops_event_xid=63", "-e", "gpuops_event_policy=site",
             "-e", "gpuops_event_rung=reset", "-e", '{"gpu_reclaim_gpus": ["00000000:18:00.0"], "gpu_inspect_gpus": ["00000000:18:00.0"]}']
    with idle_xid_nodes() as (directory, make):
        root = make(63)
        run, report, commands = reset_gpu(directory, root, collections_root, extra=event)
        assert run.returncode != 0
        assert ("Xid 63: the event's source applied the site policy's reset, but this run's gpuops_xid_policy applies NVIDIA's "
                "catalog (no site entry). Nothing was done") in run.stdout, run.stdout[-3000:]
        assert report is None and commands == [], commands  # not inspected, not touched

        run, report, commands = reset_gpu(directory, root, collections_root, policy={63: "reset"}, extra=event)
        assert run.returncode == 0, run.stdout[-3000:]
        assert (report["status"], report["fixed_by"]) == ("fixed", "reset") and len(resets(commands)) == 1, report


@pytest.mark.parametrize("policy, words", [
    ({"63": "rest"}, "gpuops_xid_policy: Xid 63 maps to 'rest', which is not a rung it can ask for"),
    ({"sixty-three": "reset"}, "gpuops_xid_policy: the Xid code 'sixty-three' is not a number 1..999"),
    (["63: reset"], "gpuops_xid_policy must be a mapping of Xid code to rung, got ['63: reset']"),
    ({"63": None}, "gpuops_xid_policy: Xid 63 maps to None"),
], ids=["bad-rung", "bad-code", "a-list", "no-rung"])
def test_a_malformed_policy_refuses_the_run_naming_the_variable_before_any_node_is_touched(collections_root, policy, words):
    """A plain run (no event): the policy of the inventory is checked with every other input, on the controller."""
    with idle_xid_nodes() as (directory, make):
        root = make(63)
        run, report, commands = reset_gpu(directory, root, collections_root, policy=policy)
        assert run.returncode != 0
        assert words in run.stdout, run.stdout[-3000:]
        assert report is None and commands == [], commands  # not inspected, not touched
