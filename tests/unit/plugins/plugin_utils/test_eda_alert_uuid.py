# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A dcgm-exporter alert names its GPU twice, by `pci_bus_id` and by `UUID`: the run acts on that GPU only where both
names are the same GPU on the node. The webhook checks the UUID label's form (a MIG device's UUID, a template, a newline
or a shell word makes no event), the event pins its selection to the UUID, and the node refuses a selection whose GPU
has another UUID, naming both and every GPU it has. The label text that does reach the run (the alert's name, its
summary, its fingerprint: ansible-rulebook hands the whole event to the playbook as `ansible_eda`) stays text.

The playbook runs are the real reset_gpu.yml (ansible-playbook in a child) on a simulated node whose idle GPU 0 has an
Xid 63 that the site policy answers with a reset, with the extra vars the shipped rulebook's alert rule renders."""

import json
import os

import pytest

from ansible_collections.gpuops.remediation.plugins.module_utils._snapshot import UnknownGpu, select_gpus, unknown_gpu_message
from ansible_collections.gpuops.remediation.plugins.module_utils.simulation._sim_state import load_state
from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda._alert_webhook_source import alert_events
from ansible_collections.gpuops.remediation.tests.unit.helpers.reset_run import idle_xid_nodes, reset_gpu, resets
from ansible_collections.gpuops.remediation.tests.unit.plugins.plugin_utils.test_eda_mig_alerts import (
    BUS, NODE_GPUS, _rule_vars, alertmanager_body, dcgm_labels)

UUID = NODE_GPUS[0]["uuid"]
OTHER = "GPU-00000000-1111-2222-3333-444444444444"
RULE = "Ghost memory or an alert asking for a reset"


def _gpu_alert(**labels):
    """A ghost-memory alert on dcgm-exporter's series of the whole GPU 0 of node07 (no MIG instance labels)."""
    return alertmanager_body(dcgm_labels(GPU_I_ID=None, GPU_I_PROFILE=None, **labels))


def test_an_alert_naming_its_gpu_by_bus_id_and_uuid_pins_the_selection_to_both():
    events, problems = alert_events(_gpu_alert())
    assert problems == []
    body = events[0]["gpuops"]
    assert (body["selection"], body["uuid"], body["gpus"]) == (BUS, UUID, ["PCI:%s@%s" % (BUS, UUID)])
    assert select_gpus(NODE_GPUS, body["gpus"]) == [0]
    instance, = alert_events(alertmanager_body(dcgm_labels(GPU_CI_ID="0")))[0]
    assert instance["gpuops"]["gpus"] == ["PCI:%s:3/0@%s" % (BUS, UUID)]
    assert select_gpus(NODE_GPUS, instance["gpuops"]["gpus"]) == [0]
    # an alert without a UUID label (gpu_watch's own series) selects by its bus id alone, as before
    plain, = alert_events(_gpu_alert(UUID=None))[0]
    assert plain["gpuops"]["gpus"] == ["PCI:%s" % BUS] and plain["gpuops"]["uuid"] is None


def test_an_alert_naming_its_gpu_by_uuid_alone_selects_that_gpu_not_the_node():
    """No pci_bus_id (a relabelled series): the UUID names the GPU; an empty selection would have done nothing at all."""
    body = alert_events(_gpu_alert(pci_bus_id=None))[0][0]["gpuops"]
    assert (body["selection"], body["scope"], body["gpus"]) == (UUID, "gpu", [UUID])
    assert select_gpus(NODE_GPUS, body["gpus"]) == [0]


@pytest.mark.parametrize("uuid, why", [
    ("MIG-" + UUID[4:], "its UUID %r is a MIG device's, not a GPU's (dcgm-exporter names a MIG instance by GPU_I_ID)" % ("MIG-" + UUID[4:])),
    ("{{ lookup('pipe', 'id') }}", "its UUID \"{{ lookup('pipe', 'id') }}\" is not a GPU UUID"),
    (UUID + "\n## node07: fixed", "its UUID %r is not a GPU UUID" % (UUID + "\n## node07: fixed")),
    ("GPU-$(reboot)-16cc-b7a2-8b20-1a0387479491", "its UUID 'GPU-$(reboot)-16cc-b7a2-8b20-1a0387479491' is not a GPU UUID"),
    (UUID + "@" + OTHER, "is not a GPU UUID"),  # a pinned selection of its own (shown cut at 80 characters)
    ("GPU-e2e9c4c7-16cc-b7a2-8b20-1a038747949\uff11", "is not a GPU UUID"),  # a full-width digit
    (["GPU"], "its UUID ['GPU'] is not a GPU UUID"),
])
def test_a_uuid_label_that_is_no_gpu_uuid_makes_no_event(uuid, why):
    events, problems = alert_events(_gpu_alert(UUID=uuid))
    assert events == [] and len(problems) == 1, (events, problems)
    assert problems[0].startswith("alert 0 (GpuopsGhostMemory) on node07: ") and why in problems[0], problems


def test_the_node_refuses_a_selection_whose_two_names_are_two_gpus():
    """GPU 0 at the bus id has another UUID, or no GPU of the node has that UUID: nothing is selected, and the refusal
    names the selection, the UUID the GPU has and every GPU of the node."""
    for wanted in ("PCI:%s@%s" % (BUS, OTHER), "PCI:%s:3@%s" % (BUS, OTHER)):
        with pytest.raises(UnknownGpu) as raised:
            select_gpus(NODE_GPUS, [wanted])
        assert unknown_gpu_message(raised.value) == (
            "gpus: %r names GPU 0 of this node by one name and UUID %s by the other, but GPU 0 is %s: the two names disagree "
            "and nothing was selected; this node has: 0 (%s, %s)" % (wanted, OTHER, UUID, UUID, BUS))
    with pytest.raises(UnknownGpu) as raised:  # an instance the GPU lacks is named as it is missing, the pin aside
        select_gpus(NODE_GPUS, ["PCI:%s:9@%s" % (BUS, UUID)])
    assert unknown_gpu_message(raised.value).startswith("gpus: no GPU or MIG instance on this node is named 'PCI:%s:9' (" % BUS)
    with pytest.raises(UnknownGpu) as raised:
        select_gpus(NODE_GPUS, [OTHER])
    assert unknown_gpu_message(raised.value).startswith("gpus: no GPU or MIG instance on this node is named %r" % OTHER)


@pytest.fixture
def node():
    with idle_xid_nodes() as made:
        yield made


def _alert_run(directory, root, collections_root, body, name):
    """reset_gpu.yml with what the shipped rulebook's alert rule gives ansible-playbook for the alert in `body`: the rule's
    extra vars and ansible_eda (the rule's names and the event), in an extra vars file as ansible-rulebook writes it."""
    events, problems = alert_events(body)
    assert problems == [], problems
    event = events[0]
    variables = _rule_vars("gpu_remediation.yml", RULE, event)
    variables["ansible_eda"] = {"ruleset": "GPU remediation", "rule": RULE, "event": event}
    path = os.path.join(directory, "extra-vars-%s.json" % name)
    with open(path, "w") as handle:
        json.dump(variables, handle)
    return reset_gpu(directory, root, collections_root, policy={63: "reset"}, extra=["-l", "gpunode", "-e", "@" + path])


def _node_labels(root, **labels):
    gpu = load_state(root)["gpus"][0]
    found = {"alertname": "GpuopsGhostMemory", "instance": "gpunode:9400", "job": "dcgm", "gpu": "0", "UUID": gpu["uuid"],
             "pci_bus_id": gpu["pci_bus_id"], "device": "nvidia0", "modelName": "NVIDIA A100-SXM4-80GB", "Hostname": "gpunode"}
    found.update(labels)
    return found


def test_an_alert_whose_uuid_is_another_gpus_resets_nothing(node, collections_root):
    """The UUID label names GPU 1 while pci_bus_id names GPU 0 (a relabelling gone wrong): the run is refused on the node,
    naming both names and the node's GPUs; no GPU is reset. The same alert with GPU 0's own UUID resets GPU 0."""
    directory, make = node
    root = make(63)
    gpus = load_state(root)["gpus"]
    run, report, commands = _alert_run(directory, root, collections_root, alertmanager_body(_node_labels(root, UUID=gpus[1]["uuid"])),
                                       "other")
    assert run.returncode != 0, run.stdout[-3000:]
    assert "names GPU 0 of this node by one name and UUID %s by the other, but GPU 0 is %s" % (gpus[1]["uuid"], gpus[0]["uuid"]) \
        in run.stdout, run.stdout[-3000:]
    assert resets(commands) == [], commands
    run, report, commands = _alert_run(directory, root, collections_root, alertmanager_body(_node_labels(root)), "same")
    assert run.returncode == 0, run.stdout[-3000:]
    assert (report["status"], report["fixed_by"]) == ("fixed", "reset") and len(resets(commands)) == 1, report


def test_label_text_the_run_receives_stays_text(node, collections_root):
    """The alert's name, its summary and its fingerprint reach ansible-playbook inside ansible_eda (ansible-rulebook
    passes the whole event): a template there never runs on the controller, and the run does what the alert asks."""
    directory, make = node
    root = make(63)
    mark = os.path.join(directory, "templated")
    template = "{{ lookup('ansible.builtin.pipe', 'touch %s') }}" % mark
    labels = _node_labels(root, Hostname=template + "\n## gpunode: fixed", modelName="$(touch %s)" % mark)
    body = alertmanager_body(labels)
    body["alerts"][0]["annotations"]["summary"] = template
    body["alerts"][0]["fingerprint"] = template
    assert alert_events(body)[0][0]["gpuops"]["message"] == template
    run, report, commands = _alert_run(directory, root, collections_root, body, "template")
    assert not os.path.exists(mark), "label text was templated on the controller: %s" % run.stdout[-3000:]
    assert run.returncode == 0 and (report["status"], report["fixed_by"]) == ("fixed", "reset"), run.stdout[-3000:]
    assert len(resets(commands)) == 1
