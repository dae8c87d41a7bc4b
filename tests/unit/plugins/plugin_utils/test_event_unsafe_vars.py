# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The event path's extra vars as AWX hands them to a job (each string tagged !unsafe, as the controller marks what a
launch, a survey or an EDA rule passes): still validated like any input, never templated. The well-formed ones are what
the EDA controller rulebook's rule sends: ansible-core 2.19 resolves an !unsafe scalar as if it were plain, so a bus id
of digits alone ("00000000:18:00.0") arrives as the number 1080.0 - the rulebook names the GPU "PCI:<bus id>".

The real reset_gpu.yml (ansible-playbook in a child) against a simulated node with an Xid 63 on its idle GPU and the site
policy {63: reset}, the event's variables in an extra vars file of !unsafe strings: well formed, they run as the rule
meant (the Xid's reset); holding a template that would run a command on the controller, they are refused or kept as the
literal text, and the command never runs."""

import json
import os

import pytest

from ansible_collections.gpuops.remediation.tests.unit.helpers.reset_run import idle_xid_nodes, reset_gpu, resets

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))


def _rule_extra_vars(rule, event):
    """The extra vars the EDA controller rulebook's rule `rule` sends AWX for `event`, rendered as ansible-rulebook does."""
    import jinja2
    import yaml

    with open(os.path.join(ROOT, "extensions", "eda", "rulebooks", "gpu_remediation_controller.yml")) as handle:
        rules = yaml.safe_load(handle)[0]["rules"]
    extra = next(item for item in rules if item["name"] == rule)["action"]["run_job_template"]["job_args"]["extra_vars"]

    def render(value):
        if isinstance(value, list):
            return [render(item) for item in value]
        return jinja2.Template(value).render(event=event) if isinstance(value, str) else value

    return dict((name, render(value)) for name, value in extra.items())


EVENT = _rule_extra_vars("Xid asking for a GPU reset", {"gpuops": {"type": "xid", "host": "gpunode", "gpu": "00000000:18:00.0",
                                                                   "selection": "00000000:18:00.0", "xid": 63, "policy": "site",
                                                                   "rung": "reset"}})


def _unsafe_yaml(variables):
    """An extra vars file whose every string is !unsafe (AWX's form)."""
    def value(item):
        if isinstance(item, list):
            return "[%s]" % ", ".join(value(each) for each in item)
        return "!unsafe '%s'" % str(item).replace("'", "''")
    return "".join("%s: %s\n" % (name, value(item)) for name, item in variables.items())


@pytest.fixture
def node():
    with idle_xid_nodes() as made:
        yield made


def _journal_run_ids(root):
    with open(os.path.join(root, "var", "lib", "gpuops", "journal.jsonl")) as handle:
        return set(json.loads(line)["run_id"] for line in handle if line.strip())


def _run(directory, root, collections_root, variables):
    path = os.path.join(directory, "extra-vars.yml")
    with open(path, "w") as handle:
        handle.write(_unsafe_yaml(variables))
    return reset_gpu(directory, root, collections_root, policy={63: "reset"}, extra=["-l", "gpunode", "-e", "@" + path])


def test_unsafe_event_vars_that_are_well_formed_run_as_the_rule_meant(node, collections_root):
    directory, make = node
    root = make(63)
    run, report, commands = _run(directory, root, collections_root, EVENT)
    assert run.returncode == 0, run.stdout[-3000:]
    assert (report["status"], report["fixed_by"]) == ("fixed", "reset") and len(resets(commands)) == 1, report
    assert _journal_run_ids(root) == {"eda-xid63-gpunode"}, EVENT


@pytest.mark.parametrize("name, words", [
    ("gpuops_event_host", "gpuops_event_host"),
    ("gpuops_event_xid", "gpuops_event_xid must be an Xid code"),
    ("gpuops_event_rung", "gpuops_event_rung"),
])
def test_an_unsafe_event_var_holding_a_template_is_never_templated(node, collections_root, name, words):
    directory, make = node
    root = make(63)
    mark = os.path.join(directory, "templated-%s" % name)
    run, report, commands = _run(directory, root, collections_root,
                                 dict(EVENT, **{name: "{{ lookup('ansible.builtin.pipe', 'touch %s') }}" % mark}))
    assert not os.path.exists(mark), "%s was templated on the controller: %s" % (name, run.stdout[-3000:])
    assert run.returncode != 0 and words in run.stdout, run.stdout[-3000:]
    assert report is None and commands == [], commands  # refused before any node is touched


def test_an_unsafe_run_id_holding_a_template_is_kept_as_its_literal_text(node, collections_root):
    """A run id is free text (it names the run in the journal and the report): the template stays text, never runs."""
    directory, make = node
    root = make(63)
    mark = os.path.join(directory, "templated-run-id")
    run_id = "{{ lookup('ansible.builtin.pipe', 'touch %s') }}" % mark
    run, report, _commands = _run(directory, root, collections_root, dict(EVENT, gpu_remediate_run_id=run_id))
    assert not os.path.exists(mark), "gpu_remediate_run_id was templated on the controller: %s" % run.stdout[-3000:]
    assert run.returncode == 0 and report["status"] == "fixed", run.stdout[-3000:]
    assert _journal_run_ids(root) == {run_id}
