# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The two rulebooks (plain ansible-rulebook, EDA controller) stay twins; every rule is throttled per host (and GPU).
What they do is proven with the real ansible-rulebook by tests/integration/targets/eda_rulebook."""

import os

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
RULEBOOKS = os.path.join(ROOT, "extensions", "eda", "rulebooks")


def _load(name):
    with open(os.path.join(RULEBOOKS, name)) as handle:
        return yaml.safe_load(handle)[0]


def test_controller_rulebook_is_the_twin_of_the_plain_one():
    plain, controller = _load("gpu_remediation.yml"), _load("gpu_remediation_controller.yml")
    assert plain["sources"] == controller["sources"]
    assert [rule["name"] for rule in plain["rules"]] == [rule["name"] for rule in controller["rules"]]
    for mine, theirs in zip(plain["rules"], controller["rules"]):
        assert (mine["condition"], mine["throttle"]) == (theirs["condition"], theirs["throttle"])
        if "debug" in mine["action"]:  # a report, the same in both
            assert mine["action"] == theirs["action"]
            continue
        playbook, template = mine["action"]["run_playbook"], theirs["action"]["run_job_template"]
        assert playbook["name"] == "gpuops.remediation.reset_gpu"
        assert template["job_args"]["extra_vars"] == playbook["extra_vars"]


def test_every_rule_is_throttled_per_host_and_never_allows_reboot_itself():
    for rule in _load("gpu_remediation.yml")["rules"]:
        throttle = rule["throttle"]
        assert throttle["once_within"] and "event.gpuops.host" in throttle["group_by_attributes"]
        if "debug" in rule["action"]:  # reports only: what a source cannot read
            assert rule["condition"] == 'event.gpuops.type == "source_problem"'
            continue
        extra = rule["action"]["run_playbook"]["extra_vars"]
        assert "gpu_reclaim_allow_reboot" not in extra  # the inventory's word, never the event's
        assert extra["gpu_reclaim_max_rung"] in ("reset", "reboot")
