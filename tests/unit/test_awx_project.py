"""awx/: every survey question sets a variable that its playbook checks, with answers that the check accepts.

AWX surveys have no yes/no type and give every answer as a string; the playbooks' own input checks (reset_gpu.yml's
first task, the roles' argument specs) are what stands between a survey and the nodes.
"""

import os
import re

import yaml

from ansible_collections.gpuops.remediation.plugins.plugin_utils._inputs import PLAYBOOK_OPTIONS, input_errors

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROLES = ("gpu_inspect", "gpu_reclaim", "gpu_remediate", "gpu_watch")
# What reset_gpu.yml's first task (gpu_input_check) accepts for a yes/no, and what AWX survey questions may be.
YES_NO = {"true", "false", "yes", "no", "on", "off", "1", "0", "y", "n", "t", "f"}
SURVEY_TYPES = {"text", "textarea", "password", "integer", "float", "multiplechoice", "multiselect"}


def load(*parts):
    with open(os.path.join(ROOT, *parts)) as handle:
        return yaml.safe_load(handle)


def role_options():
    options = {}
    for role in ROLES:
        options.update(load("roles", role, "meta", "argument_specs.yml")["argument_specs"]["main"]["options"])
    return options


def documented_inputs(playbook):
    """The gpuops_* variables that the playbook's header documents (the lines '#   gpuops_<name>  <what>')."""
    with open(os.path.join(ROOT, playbook)) as handle:
        return set(re.findall(r"^#\s+(gpuops_[a-z_]+)\s", handle.read(), re.M))


def job_templates():
    return load("awx", "gpuops_awx.yml")["gpuops_awx_job_templates"]


def questions(template):
    return load("awx", template["survey"])["spec"]


def test_every_job_template_runs_a_playbook_of_the_project_with_a_survey():
    playbooks = [template["playbook"] for template in job_templates()]
    assert playbooks == ["playbooks/reset_gpu.yml", "playbooks/gpu_report.yml", "playbooks/gpu_watch.yml"]
    for template in job_templates():
        assert os.path.isfile(os.path.join(ROOT, template["playbook"])), template["playbook"]
        assert questions(template), template["survey"]
        assert "job_slice_count" in template, template["name"]


def test_every_survey_question_is_well_formed():
    for template in job_templates():
        for question in questions(template):
            assert question["type"] in SURVEY_TYPES, question
            assert question["question_name"] and question["variable"], question
            if question["type"] == "multiplechoice":
                assert question["default"] in question["choices"], question
                assert all(isinstance(choice, str) for choice in question["choices"]), question


def test_every_survey_variable_is_one_the_playbook_checks():
    options = role_options()
    for template in job_templates():
        known = set(options) | documented_inputs(template["playbook"])
        unknown = [question["variable"] for question in questions(template) if question["variable"] not in known]
        assert unknown == [], "%s: %s" % (template["survey"], unknown)


def test_yes_no_questions_offer_only_answers_the_input_check_accepts():
    options = role_options()
    for template in job_templates():
        for question in questions(template):
            spec = options.get(question["variable"], {})
            if spec.get("type") == "bool" or question["variable"] == "gpuops_dry_run":
                assert question["type"] == "multiplechoice", question
                assert set(question["choices"]) == {"true", "false"}, question
                assert set(question["choices"]) <= YES_NO, question


def test_choices_are_the_roles_choices_and_defaults_the_roles_defaults():
    options = role_options()
    for template in job_templates():
        for question in questions(template):
            spec = options.get(question["variable"])
            if spec is None:
                continue
            if "choices" in spec:
                assert question["choices"] == spec["choices"], question["variable"]
            if "default" in spec:
                assert str(question["default"]).lower() == str(spec["default"]).lower(), question["variable"]


def test_reset_gpu_checks_the_dry_run_answer_in_its_first_task():
    with open(os.path.join(ROOT, "playbooks", "reset_gpu.yml")) as handle:
        playbook = handle.read()
    first_task = yaml.safe_load(playbook)[0]["tasks"][0]
    assert first_task["run_once"] and "gpuops.remediation.gpu_input_check" in first_task
    assert input_errors({"gpuops_dry_run": "maybe"}, PLAYBOOK_OPTIONS) == ["gpuops_dry_run=maybe (true or false)"]
    assert input_errors({"gpuops_dry_run": "false"}, PLAYBOOK_OPTIONS) == []
    assert playbook.count('check_mode: "{{ (gpuops_dry_run | default(false) | bool) or ansible_check_mode }}"') == 2


def test_the_schedules_name_their_time_zone():
    config = load("awx", "gpuops_awx.yml")
    names = [template["name"] for template in job_templates()]
    rules = {}
    for schedule in config["gpuops_awx_schedules"]:
        assert schedule["job_template"] in names, schedule
        assert schedule["rrule"].startswith("DTSTART;TZID={{ gpuops_awx_timezone }}:"), schedule
        rules[schedule["job_template"]] = schedule["rrule"].split(" RRULE:")[1]
    assert rules == {"GPU - fleet report": "FREQ=DAILY;INTERVAL=1",
                     "GPU - watch": "FREQ=MINUTELY;INTERVAL={{ gpuops_awx_watch_minutes }}"}
    assert config["gpuops_awx_timezone"]
    # The watch judges "for 10 minutes" across runs: scheduled every 10 minutes by default.
    assert config["gpuops_awx_watch_minutes"] == 10


def test_the_watch_survey_offers_only_the_roles_answers():
    options = role_options()
    survey = dict((question["variable"], question) for question in questions(job_templates()[2]))
    assert sorted(survey) == ["gpu_watch_remediate", "gpu_watch_remediate_max_rung", "gpu_watch_samples", "gpu_watch_webhook_url",
                              "gpuops_hosts"]
    assert survey["gpu_watch_remediate"]["default"] == "false"  # off unless someone asks
    assert options["gpu_watch_samples"]["type"] == "int" and survey["gpu_watch_samples"]["type"] == "integer"
    assert survey["gpu_watch_samples"]["min"] >= 1


def test_the_reset_job_template_asks_for_its_hosts_and_has_no_fleet_wide_default():
    """A remediation names its hosts at launch: the limit is prompted, and the Nodes question is required with no
    default (an empty answer is refused by AWX), so no launch takes the whole fleet by default."""
    reset = job_templates()[0]
    assert reset["playbook"] == "playbooks/reset_gpu.yml"
    assert reset["ask_limit_on_launch"] is True
    assert "limit" not in reset
    nodes = [question for question in questions(reset) if question["variable"] == "gpuops_hosts"]
    assert len(nodes) == 1 and nodes[0]["required"] is True and nodes[0]["min"] >= 1
    assert not nodes[0].get("default")
    with open(os.path.join(ROOT, "awx", "configure.yml")) as handle:
        assert 'ask_limit_on_launch: "{{ item.ask_limit_on_launch | default(false) }}"' in handle.read()
    # The read-only templates keep their fleet-wide default, and prompt for no limit.
    for template in job_templates()[1:]:
        assert not template.get("ask_limit_on_launch"), template["name"]
