# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The decisions the playbooks and roles used to take in Jinja, each one named Python function now (issue 21)."""

import datetime
import os

import pytest
import yaml

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.remediation.plugins.plugin_utils.ladder._platform import platform_rungs
from ansible_collections.gpuops.remediation.plugins.action.gpu_ladder import walk_run_id
from ansible_collections.gpuops.remediation.plugins.filter.ladder import taken_snapshot
from ansible_collections.gpuops.remediation.plugins.filter.node_prep import nvml_pip_argv
from ansible_collections.gpuops.remediation.plugins.filter.watch import watch_webhook
from ansible_collections.gpuops.remediation.plugins.module_utils.watch._watch import NOTHING_CROSSED, alert_of

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
SNAPSHOT = {"gpus": [], "holders": [], "verdict": {"rung": None}}


def _role_spec(role):
    with open(os.path.join(ROOT, "roles", role, "meta", "argument_specs.yml")) as handle:
        return yaml.safe_load(handle)["argument_specs"]["main"]["options"]


FIRING = {"kind": "ghost_memory", "gpu_index": 0, "fingerprint": "a", "message": "GPU 0 has had ghost memory"}
HELD = {"kind": "high_memory_usage", "gpu_index": 1, "fingerprint": "b", "held": True}
RESOLVED = {"kind": "xid", "gpu_index": 2, "fingerprint": "c"}


def test_the_webhook_body_fires_while_a_finding_is_made_or_held_and_resolves_the_rest():
    alert = alert_of([FIRING], [HELD], [RESOLVED])
    assert alert["status"] == "firing" and alert["send"] is True
    assert [(item["fingerprint"], item["status"]) for item in alert["alerts"]] == [("a", "firing"), ("b", "firing"), ("c", "resolved")]
    assert alert["lines"] == ["GPU 0 has had ghost memory"]
    held_only = alert_of([], [HELD], [])
    assert held_only["status"] == "firing" and held_only["lines"] == [NOTHING_CROSSED]
    cleared = alert_of([], [], [RESOLVED])
    assert cleared["status"] == "resolved" and [item["status"] for item in cleared["alerts"]] == ["resolved"]
    assert alert_of([], [], []) == {"status": "resolved", "alerts": [], "send": False, "lines": [NOTHING_CROSSED]}
    assert "status" not in FIRING  # the findings themselves are left as the module returns them


def test_an_unanswered_webhook_setting_is_the_roles_default():
    spec = _role_spec("gpu_watch")
    settings = watch_webhook(None, None, None, None)
    assert settings == {"enabled": False, "url": "", "headers": spec["gpu_watch_webhook_headers"]["default"],
                        "timeout": spec["gpu_watch_webhook_timeout"]["default"],
                        "validate_certs": spec["gpu_watch_webhook_validate_certs"]["default"]}
    given = watch_webhook("https://alerts.example.com/x", {"Authorization": "t"}, 3, "false")
    assert given == {"enabled": True, "url": "https://alerts.example.com/x", "headers": {"Authorization": "t"}, "timeout": 3,
                     "validate_certs": False}
    assert watch_webhook("  ")["enabled"] is False
    assert watch_webhook("https://x", validate_certs=False)["validate_certs"] is False


@pytest.mark.parametrize("args, message", [
    ((["https://x"],), "gpu_watch_webhook_url must be a URL or empty, got ['https://x']"),
    (("https://x", "Authorization: t"), "gpu_watch_webhook_headers must be a mapping, got 'Authorization: t'"),
    (("https://x", None, None, "maybe"), "gpu_watch_webhook_validate_certs must be a boolean, got 'maybe'"),
])
def test_a_wrong_webhook_setting_is_named_with_its_value(args, message):
    with pytest.raises(AnsibleFilterError, match=message.replace("[", r"\[").replace("]", r"\]")):
        watch_webhook(*args)


def test_the_snapshot_taken_is_the_task_that_ran():
    linux, skipped = dict(SNAPSHOT, changed=False), {"changed": False, "skipped": True, "skip_reason": "Conditional result was False"}
    assert taken_snapshot(linux, skipped) is linux
    assert taken_snapshot(skipped, linux) is linux
    with pytest.raises(AnsibleFilterError, match="exactly one of the snapshot tasks must have run, 0 did"):
        taken_snapshot(skipped, skipped)
    with pytest.raises(AnsibleFilterError, match="exactly one of the snapshot tasks must have run, 2 did"):
        taken_snapshot(linux, linux)
    with pytest.raises(AnsibleFilterError, match="must be a result of gpuops.remediation.gpu_holders_info"):
        taken_snapshot({"changed": False}, skipped)


def test_the_pip_command_installs_the_pinned_version_from_the_wheels_the_mirror_or_pip_s_index():
    base = ["/v/bin/python", "-m", "pip", "install", "--disable-pip-version-check", "--no-input", "nvidia-ml-py==12.570.86"]
    assert nvml_pip_argv("/v/bin/python", "12.570.86") == base
    assert nvml_pip_argv("/v/bin/python", "12.570.86", [], None) == base
    assert nvml_pip_argv("/v/bin/python", "12.570.86", ["/srv/a", "https://w/b"], None) == base + [
        "--no-index", "--find-links=/srv/a", "--find-links=https://w/b"]
    assert nvml_pip_argv("/v/bin/python", "12.570.86", [], "https://mirror/simple") == base + ["--index-url=https://mirror/simple"]
    with pytest.raises(AnsibleFilterError, match="gpu_node_prep_pip_find_links must be a list of directories or URLs, got '/srv/a'"):
        nvml_pip_argv("/v/bin/python", "12.570.86", "/srv/a")
    with pytest.raises(AnsibleFilterError, match="gpu_node_prep_nvml_version must be a version, got None"):
        nvml_pip_argv("/v/bin/python", None)


def test_the_breaker_reads_the_rungs_of_the_hosts_platform():
    args = {"platform": "windows", "max_rung": "reset", "destructive_rungs": ["reset"],
            "windows": {"max_rung": "logoff", "destructive_rungs": ["logoff"]}}
    assert platform_rungs(args) == ("logoff", ["logoff"])
    assert platform_rungs(dict(args, platform="linux")) == ("reset", ["reset"])
    # Unset on the host's platform: that platform's defaults, never the other platform's values.
    assert platform_rungs(dict(args, windows={"max_rung": None, "destructive_rungs": None})) == (
        "restart_adapter", ["restart_adapter", "logoff", "reboot"])
    assert platform_rungs({"platform": "windows", "max_rung": "reset", "destructive_rungs": ["reset"], "windows": None}) == (
        "restart_adapter", ["restart_adapter", "logoff", "reboot"])
    assert platform_rungs({"platform": "linux", "max_rung": None, "destructive_rungs": None, "windows": None}) == (
        "reload", ["reset", "reload", "graphics", "reboot"])


def test_one_walk_names_one_run_the_given_one_or_the_one_it_started_with():
    now = datetime.datetime(2026, 12, 2, 1, 2, 3, 456789, tzinfo=datetime.timezone.utc)
    assert walk_run_id("reset_gpu-1", {"run_id": "gpu_reclaim-old"}, now) == "reset_gpu-1"
    assert walk_run_id("", {"run_id": "gpu_reclaim-20261202T000000.000001Z"}, now) == "gpu_reclaim-20261202T000000.000001Z"
    assert walk_run_id("", None, now) == "gpu_reclaim-20261202T010203.456789Z"
    assert walk_run_id(None, {}, now) == "gpu_reclaim-20261202T010203.456789Z"


@pytest.mark.parametrize("playbook", ["reset_gpu.yml", "gpu_watch.yml"])
def test_a_playbook_checks_its_roles_once_and_its_includes_do_not_check_them_again_per_host(playbook):
    with open(os.path.join(ROOT, "playbooks", playbook)) as handle:
        plays = yaml.safe_load(handle)
    check = plays[0]["tasks"][0]
    assert check["register"] == "__gpuops_input_check" and check.get("run_once") is True
    checked = check["gpuops.remediation.gpu_input_check"]["roles"]
    includes = [task["ansible.builtin.include_role"] for play in plays for task in play["tasks"] if "ansible.builtin.include_role" in task]
    assert includes
    for include in includes:
        role = include["name"].rsplit(".", 1)[-1]
        assert role in checked, role
        assert include["rolespec_validate"] == "{{ __gpuops_input_check.rolespec_validate.%s }}" % role


def test_a_role_included_by_a_role_validates_unless_the_playbook_checked_it():
    for path, role in (("gpu_remediate/tasks/guard.yml", "gpu_inspect"), ("gpu_remediate/tasks/walk.yml", "gpu_reclaim"),
                       ("gpu_watch/tasks/remediate.yml", "gpu_remediate")):
        with open(os.path.join(ROOT, "roles", path)) as handle:
            tasks = yaml.safe_load(handle)
        include = next(task["ansible.builtin.include_role"] for task in tasks if "ansible.builtin.include_role" in task)
        assert include["name"] == "gpuops.remediation." + role
        assert include["rolespec_validate"] == "{{ __gpuops_input_check.rolespec_validate.%s | default(true) }}" % role
