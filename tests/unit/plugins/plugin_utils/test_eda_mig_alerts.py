# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""An alert naming a MIG instance (dcgm-exporter's GPU_I_ID, GPU_CI_ID labels) makes an event for that instance alone,
with the same selection an Xid line naming it (GPU-I, GPU-CI) makes; a label that cannot name an instance is refused
naming the label and the value, never widened to the whole GPU. The rulebooks pass that selection to the run.

The alert bodies are what Alertmanager 0.25's webhook_config posts, with the labels dcgm-exporter puts on a MIG
instance's series (its gpu collector's template: gpu, UUID, pci_bus_id, device, modelName, GPU_I_PROFILE, GPU_I_ID,
Hostname; Prometheus adds instance and job), sent to the real gpu_alert_webhook over a 127.0.0.1 socket."""

import asyncio
import json
import os

import jinja2
import pytest
import yaml

from ansible_collections.gpuops.remediation.plugins.module_utils._mig_selection import narrowed_instances
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._kernel_log import parse_kernel_log
from ansible_collections.gpuops.remediation.plugins.module_utils._snapshot import select_gpus
from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda._alert_webhook_source import alert_events
from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda._kernel_log_source import kernel_event
from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda._snapshot_source import Lasting
from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda._source_shared import Throttle
from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda._webhook_server import Handover
from ansible_collections.gpuops.remediation.tests.unit.helpers.eda_webhook import bearer_post, serve
from ansible_collections.gpuops.remediation.tests.unit.plugins.plugin_utils.test_eda_sources import ROOT, _append, _collect, following

TOKEN = "mig-t0ken"
BUS = "00000000:18:00.0"
# GPU 0 split in seven 1g.10gb instances (ids 1..7), as gpu_holders_info lists them
NODE_GPUS = [{"index": 0, "uuid": "GPU-e2e9c4c7-16cc-b7a2-8b20-1a0387479491", "pci_bus_id": BUS,
              "gpu_instances": [{"id": gi, "compute_instances": [{"id": 0, "uuid": "MIG-%d" % gi}]} for gi in range(1, 8)]}]


def dcgm_labels(**extra):
    """The labels of a ghost-memory alert built on dcgm-exporter's series of MIG instance 3 of GPU 0 on node07."""
    labels = {"alertname": "GpuopsGhostMemory", "instance": "node07:9400", "job": "dcgm", "gpu": "0",
              "UUID": "GPU-e2e9c4c7-16cc-b7a2-8b20-1a0387479491", "pci_bus_id": BUS, "device": "nvidia0",
              "modelName": "NVIDIA A100-SXM4-80GB", "GPU_I_PROFILE": "1g.10gb", "GPU_I_ID": "3", "Hostname": "node07"}
    labels.update(extra)
    return dict((name, value) for name, value in labels.items() if value is not None)


def alertmanager_body(*label_sets):
    """Alertmanager 0.25's webhook body (version 4) of firing alerts with those labels."""
    alerts = [{"status": "firing", "labels": labels,
               "annotations": {"summary": "GPU %s of %s holds ghost memory" % (labels.get("gpu"), labels.get("instance"))},
               "startsAt": "2026-12-06T10:00:00.000Z", "endsAt": "0001-01-01T00:00:00Z",
               "generatorURL": "http://prometheus:9090/graph?g0.expr=...", "fingerprint": "%016x" % index}
              for index, labels in enumerate(label_sets)]
    return {"version": "4", "groupKey": "{}:{alertname=\"GpuopsGhostMemory\"}", "truncatedAlerts": 0, "status": "firing",
            "receiver": "gpuops", "groupLabels": {"alertname": "GpuopsGhostMemory"}, "commonLabels": {}, "commonAnnotations": {},
            "externalURL": "http://alertmanager:9093", "alerts": alerts}


def _post(body):
    data = json.dumps(body).encode()

    async def exchange(port):
        return await bearer_post(port, data, TOKEN)

    answer, events = serve({"auth": "bearer", "secret": TOKEN}, exchange)
    return int(answer.split(b" ", 2)[1]), json.loads(answer.split(b"\r\n\r\n", 1)[1]), events


def test_an_alert_naming_a_mig_instance_makes_an_event_for_that_instance_alone():
    status, answer, events = _post(alertmanager_body(dcgm_labels(), dcgm_labels(GPU_I_ID="5", GPU_CI_ID="0"),
                                                     dcgm_labels(GPU_I_ID=None, GPU_I_PROFILE=None)))
    assert (status, answer["problems"]) == (202, [])
    bodies = [event["gpuops"] for event in events]
    assert [(b["selection"], b["scope"], b["gpu_instance_id"], b["compute_instance_id"]) for b in bodies] == [
        (BUS + ":3", "instance", 3, None), (BUS + ":5/0", "instance", 5, 0), (BUS, "gpu", None, None)]
    assert [event["meta"] for event in events] == [{"hosts": "node07"}] * 3
    # given to gpus as the rulebooks give it, each reaches that instance of GPU 0 and nothing else of it
    given = ["PCI:" + body["selection"] for body in bodies]
    assert [narrowed_instances(NODE_GPUS, [name]) for name in given] == [{0: {(3, None)}}, {0: {(5, 0)}}, {}]
    assert [select_gpus(NODE_GPUS, [name]) for name in given] == [[0], [0], [0]]


def test_the_alert_and_the_xid_line_naming_one_instance_select_it_alike():
    """One mapping for both paths: GPU_I_ID 3 (GPU_CI_ID 0) on 00000000:18:00.0 and an Xid line's GPU-I:03 GPU-CI:00 on
    PCI:0000:18:00 are the same selection, whatever spelling of the bus id each uses."""
    line = ("2026-12-06T10:00:01+00:00 node07 kernel: NVRM: Xid (PCI:0000:18:00 GPU-I:03 GPU-CI:00): 31, pid=4242, "
            "name=python3, Ch 00000008, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f1a_00000000")
    xid = kernel_event("node07", parse_kernel_log(line)[0])["gpuops"]
    events, problems = alert_events(alertmanager_body(dcgm_labels(GPU_CI_ID="0", pci_bus_id="0000:18:00.0")))
    alert = events[0]["gpuops"]
    assert problems == []
    assert [(e["selection"], e["scope"], e["gpu_instance_id"], e["compute_instance_id"]) for e in (xid, alert)] == [
        (BUS + ":3/0", "instance", 3, 0)] * 2
    assert (xid["rung"], alert["rung"]) == ("kill", "reset")


@pytest.mark.parametrize("labels, why", [
    ({"GPU_I_ID": "3x"}, "its GPU_I_ID '3x' is not a MIG instance id"),
    ({"GPU_I_ID": "-1"}, "its GPU_I_ID '-1' is not a MIG instance id"),
    ({"GPU_I_ID": "100"}, "its GPU_I_ID '100' is not a MIG instance id"),
    ({"GPU_I_ID": " 3"}, "its GPU_I_ID ' 3' is not a MIG instance id"),
    ({"GPU_I_ID": "\uff13"}, "its GPU_I_ID '\uff13' is not a MIG instance id"),  # a full-width digit: isdigit() alone takes it
    ({"GPU_I_ID": "3.0"}, "its GPU_I_ID '3.0' is not a MIG instance id"),
    ({"GPU_I_ID": "{{ lookup('pipe', 'id') }}"}, "its GPU_I_ID \"{{ lookup('pipe', 'id') }}\" is not a MIG instance id"),
    ({"GPU_I_ID": 3}, "its GPU_I_ID 3 is not a MIG instance id"),  # a number where Alertmanager writes text
    ({"GPU_I_ID": ["3"]}, "its GPU_I_ID ['3'] is not a MIG instance id"),
    ({"GPU_CI_ID": "x"}, "its GPU_CI_ID 'x' is not a MIG instance id"),
    ({"GPU_I_ID": None, "GPU_CI_ID": "0"}, "its GPU_CI_ID '0' names a compute instance but no GPU_I_ID its GPU instance"),
    ({"pci_bus_id": None}, "its GPU_I_ID '3' names a MIG instance but no pci_bus_id its GPU"),
    ({"pci_bus_id": ""}, "its GPU_I_ID '3' names a MIG instance but no pci_bus_id its GPU"),
])
def test_a_label_that_cannot_name_an_instance_is_refused_naming_it_never_the_whole_gpu(labels, why):
    events, problems = alert_events(alertmanager_body(dcgm_labels(**labels)))
    assert events == [] and len(problems) == 1, (events, problems)
    assert problems[0].startswith("alert 0 (GpuopsGhostMemory) on node07: " + why), problems


def test_the_webhook_answers_a_refused_instance_422_and_reports_it_taking_the_good_alerts():
    """A request with one alert naming a bad instance and one naming a good one: the good one is an event, the bad one a
    source_problem event the rulebooks print (and the log), never an event for the whole GPU; a request of bad ones
    alone is answered 422 (Alertmanager does not retry a 4xx)."""
    status, answer, events = _post(alertmanager_body(dcgm_labels(GPU_I_ID="3x"), dcgm_labels(GPU_I_ID="4")))
    assert status == 202 and answer["events"] == 1 and len(answer["problems"]) == 1
    kinds = sorted((event["gpuops"]["type"], event["gpuops"].get("selection")) for event in events)
    assert kinds == [("alert", BUS + ":4"), ("source_problem", None)]
    assert [e["gpuops"]["message"] for e in events if e["gpuops"]["type"] == "source_problem"] == answer["problems"]
    status, answer, events = _post(alertmanager_body(dcgm_labels(GPU_I_ID="07x")))
    assert status == 422 and [event["gpuops"]["type"] for event in events] == ["source_problem"]
    assert "GPU_I_ID '07x'" in answer["problems"][0]


def _rule_vars(rulebook, rule, event):
    """The extra vars rule `rule` of `rulebook` passes to the run for `event`, rendered as ansible-rulebook renders them."""
    with open(os.path.join(ROOT, "extensions", "eda", "rulebooks", rulebook)) as handle:
        rules = yaml.safe_load(handle)[0]["rules"]
    action = next(item for item in rules if item["name"] == rule)["action"]
    extra = action["run_playbook"]["extra_vars"] if "run_playbook" in action else action["run_job_template"]["job_args"]["extra_vars"]

    def render(value):
        if isinstance(value, list):
            return [render(item) for item in value]
        if not isinstance(value, str):
            return value
        text = jinja2.Template(value).render(event=event)
        # a whole-value template of a list renders as its text, which ansible-core reads back as the list
        return yaml.safe_load(text) if value.startswith("{{") and text.startswith("[") else text

    return dict((name, render(value)) for name, value in extra.items())


@pytest.mark.parametrize("rulebook", ["gpu_remediation.yml", "gpu_remediation_controller.yml"])
def test_the_rulebooks_run_the_ladder_on_the_instance_an_event_names(rulebook):
    alert, = alert_events(alertmanager_body(dcgm_labels()))[0]
    ghost = Lasting("node08", 0, Throttle(0)).feed([{"type": "ghost_memory", "gpu": BUS, "gpu_index": 0, "pci_bus_id": BUS,
                                                    "ghost_mib": 2048, "message": "m"}], 0.0)[0]
    line = "2026-12-06T10:00:01+00:00 node07 kernel: NVRM: Xid (PCI:0000:18:00 GPU-I:03 GPU-CI:00): 31, pid=4242, name=python3, x"
    xid = kernel_event("node07", parse_kernel_log(line)[0])
    rule = "Ghost memory or an alert asking for a reset"
    assert _rule_vars(rulebook, rule, alert)["gpu_reclaim_gpus"] == ["PCI:%s:3@%s" % (BUS, NODE_GPUS[0]["uuid"])]  # pinned to its UUID label
    assert _rule_vars(rulebook, rule, ghost)["gpu_reclaim_gpus"] == ["PCI:%s" % BUS]  # gpu_snapshot's: the whole GPU, as before
    mine = _rule_vars(rulebook, "Xid in one MIG instance asking for its application to end", xid)
    assert (mine["gpu_inspect_gpus"], mine["gpu_reclaim_gpus"], mine["gpu_reclaim_max_rung"]) == (
        ["PCI:%s:3/0" % BUS], ["PCI:%s:3/0" % BUS], "reset")
    assert mine["gpu_remediate_run_id"] == "eda-xid31-node07-%s:3/0" % BUS
    assert (mine["gpuops_event_xid"], mine["gpuops_event_policy"], mine["gpuops_event_rung"]) == ("31", "catalog", "kill")


def test_the_kill_xid_rule_takes_only_an_instance_and_an_xid_elsewhere_holds_back_no_neighbour(tmp_path):
    """The rule's condition: an Xid asking for its application to end, in one instance (scope) - a line naming no
    instance is the whole GPU's, which no rule runs for. The source's own throttle is per instance: instance 5's Xid 31 is
    an event a moment after instance 3's, and only a repeat in instance 3 is held back."""
    log = str(tmp_path / "syslog")
    _append(log)
    lines = ["2026-12-06T10:00:0%d+00:00 node07 kernel: NVRM: Xid (PCI:0000:18:00%s): 31, pid=42, name=p, x" % (n, where)
             for n, where in enumerate([" GPU-I:03 GPU-CI:00", " GPU-I:05 GPU-CI:00", " GPU-I:03 GPU-CI:00", ""])]

    async def act():
        _append(log, *lines)

    options = {"path": log, "host": "node07", "poll_interval": 0.05, "throttle_seconds": 300}
    events, dummy_task = asyncio.run(_collect("gpu_kernel_log", options, act, 3, ready=following(log)))
    assert [(e["gpuops"]["selection"], e["gpuops"]["scope"]) for e in events] == [
        (BUS + ":3/0", "instance"), (BUS + ":5/0", "instance"), (BUS, "gpu")]
    with open(os.path.join(ROOT, "extensions", "eda", "rulebooks", "gpu_remediation.yml")) as handle:
        rule = next(r for r in yaml.safe_load(handle)[0]["rules"] if r["name"] == "Xid in one MIG instance asking for its application to end")
    assert rule["condition"] == 'event.gpuops.type == "xid" and event.gpuops.rung == "kill" and event.gpuops.scope == "instance"'
    assert rule["throttle"]["group_by_attributes"] == ["event.gpuops.host", "event.gpuops.selection"]


def test_alerts_for_many_instances_of_one_host_hold_only_that_hosts_share_of_the_queue():
    """Each instance is its own selection (its own throttle in the rulebooks), never its own share of the webhook's queue:
    node07's alerts for eleven instances (GPU instance 0 to 10, leading zeros or not) pass node07's share of ten and
    are refused whole, while node08's alert for one instance is taken."""
    handover = Handover(asyncio.Queue(1), 100, 10)
    many, dummy_problems = alert_events(alertmanager_body(*[dcgm_labels(GPU_I_ID="%02d" % gi if gi % 2 else str(gi))
                                                            for gi in range(11)]))
    assert len({event["gpuops"]["selection"] for event in many}) == 11
    assert handover.offer(many) == "0 events of host node07 wait for the rulebook already, its share of the queue (option host_queue_size 10)"
    assert handover.offer(many[:10]) is None
    assert handover.offer(many[10:]).startswith("10 events of host node07 wait")
    other, dummy_problems = alert_events(alertmanager_body(dcgm_labels(instance="node08:9400")))
    assert handover.offer(other) is None
