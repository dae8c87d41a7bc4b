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


def test_hosts_run_in_parallel_one_hosts_runs_in_order():
    """ansible-rulebook's parallel strategy with each run's lock its host: different hosts at once (up to
    --max-concurrent-actions), one host's runs one after the other in the order their events came (asyncio's lock is
    first come, first served)."""
    for name, action in (("gpu_remediation.yml", "run_playbook"), ("gpu_remediation_controller.yml", "run_job_template")):
        rulebook = _load(name)
        assert rulebook["execution_strategy"] == "parallel"
        runs = [rule["action"][action] for rule in rulebook["rules"] if action in rule["action"]]
        assert len(runs) == 4 and all(run["lock"] == "{{ event.gpuops.host }}" for run in runs), name


def test_the_webhooks_listen_on_the_loopback_unless_tls_and_alertmanager_needs_no_relay():
    webhooks = [source for source in _load("gpu_remediation.yml")["sources"] if "gpuops.remediation.gpu_alert_webhook" in source]
    options = [source["gpuops.remediation.gpu_alert_webhook"] for source in webhooks]
    assert [option.get("auth", "hmac") for option in options] == ["bearer", "hmac"]
    assert all("host" not in option and "certfile" not in option for option in options)  # so 127.0.0.1
