# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""An Xid line naming a MIG instance (GPU-I, GPU-CI) makes, through the gpu_kernel_log source run as ansible-rulebook
runs it, an event whose selection is that instance alone; the rulebooks' Xid rule selects by it."""

import asyncio
import os

import yaml

from ansible_collections.gpuops.remediation.plugins.module_utils._mig_selection import narrowed_instances, resolve_instance
from ansible_collections.gpuops.remediation.plugins.module_utils._snapshot import select_gpus
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._kernel_log import parse_kernel_log
from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda._kernel_log_source import KernelLines, journal_lines
from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda._source_shared import Throttle
from ansible_collections.gpuops.remediation.tests.unit.plugins.plugin_utils.test_eda_sources import ROOT, _append, _collect, following

# The driver's own example line (NVIDIA/open-gpu-kernel-modules, GA100 error containment), on a node's syslog
XID_94_MIG = ("2026-11-30T10:00:01+00:00 node7 kernel: NVRM: Xid (PCI:0000:01:00 GPU-I:05 GPU-CI:00): 94, pid=7194, "
              "Contained: CE User Channel (0x9). RST: No, D-RST: No")
XID_95_GI_ONLY = ("2026-11-30T10:00:02+00:00 node7 kernel: NVRM: Xid (PCI:0000:01:00 GPU-I:03): 95, pid=7062, name=python3, "
                  "Uncontained: LTC TAG (0x2, 0x1). RST: Yes, D-RST: No")
XID_119 = "2026-11-30T10:00:03+00:00 node7 kernel: NVRM: Xid (PCI:0000:3b:00): 119, pid=4242, name=python3, Timeout after 6s of waiting for RPC response"

# What the node's snapshot says of its GPUs (gpu_holders_info's gpus): GPU 0 on 01:00 in MIG instances 3 and 5
NODE_GPUS = [{"index": 0, "uuid": "GPU-a", "pci_bus_id": "00000000:01:00.0",
              "gpu_instances": [{"id": 3, "compute_instances": [{"id": 0, "uuid": "MIG-a3"}]},
                                {"id": 5, "compute_instances": [{"id": 0, "uuid": "MIG-a5"}]}]},
             {"index": 1, "uuid": "GPU-b", "pci_bus_id": "00000000:3B:00.0"}]


def test_an_xid_naming_an_instance_makes_an_event_for_that_instance_only(tmp_path):
    log = str(tmp_path / "syslog")
    _append(log)

    async def act():
        _append(log, XID_94_MIG, XID_95_GI_ONLY, XID_119)

    events, dummy_task = asyncio.run(_collect("gpu_kernel_log", {"path": log, "host": "node7", "poll_interval": 0.05}, act, 3,
                                              ready=following(log)))
    selections = [event["gpuops"]["selection"] for event in events]
    assert selections == ["00000000:01:00.0:5/0", "00000000:01:00.0:3", "00000000:3B:00.0"]
    assert [(e["gpuops"]["gpu_instance_id"], e["gpuops"]["compute_instance_id"]) for e in events] == [(5, 0), (3, None), (None, None)]
    # each selection, given to gpus as the rulebook gives it ("PCI:" before it), reaches that instance of GPU 0 and no other
    given = ["PCI:" + selection for selection in selections]
    assert [resolve_instance(NODE_GPUS, selection) for selection in given[:2]] == [(0, 5, 0), (0, 3, None)]
    assert narrowed_instances(NODE_GPUS, given[:1]) == {0: {(5, 0)}}
    assert narrowed_instances(NODE_GPUS, given[2:]) == {}
    assert select_gpus(NODE_GPUS, given) == [0, 1]


def test_the_rulebooks_xid_rule_selects_and_throttles_by_the_events_selection():
    for name in ("gpu_remediation.yml", "gpu_remediation_controller.yml"):
        with open(os.path.join(ROOT, "extensions", "eda", "rulebooks", name)) as handle:
            rules = yaml.safe_load(handle)[0]["rules"]
        rule = next(r for r in rules if r["condition"] == 'event.gpuops.type == "xid" and event.gpuops.rung == "reset"')
        action = rule["action"].get("run_playbook") or rule["action"].get("run_job_template")
        extra = action["extra_vars"] if "extra_vars" in action else action["job_args"]["extra_vars"]
        assert extra["gpu_reclaim_gpus"] == extra["gpu_inspect_gpus"] == ["PCI:{{ event.gpuops.selection }}"], name
        assert "event.gpuops.selection" in rule["throttle"]["group_by_attributes"], name


def test_an_xid_line_whose_numbers_no_kernel_prints_makes_no_event_and_stops_no_source():
    """The kernel prints GPU-I and GPU-CI as two ASCII digits, the Xid and the pid as small numbers. A line that a file
    holds with others (a forged or damaged one) - an instance id of three digits or of other scripts' digits, a number
    longer than Python converts (4300 digits) - names no instance the node can have: no event, neither for an instance
    nor widened to its whole GPU, and the source goes on to the next line (a ValueError stopped it)."""
    head = "2026-11-30T10:00:0%d+00:00 node7 kernel: NVRM: "
    long_number = "9" * 5000
    bad = [head % 1 + "Xid (PCI:0000:01:00 GPU-I:123 GPU-CI:00): 31, pid=7194, name=python3, Ch 00000008",
           head % 1 + "Xid (PCI:0000:01:00 GPU-I:\u0663 GPU-CI:00): 31, pid=7194, name=python3, Ch 00000008",
           head % 1 + "Xid (PCI:0000:01:00 GPU-I:03 GPU-CI:\u0660): 31, pid=7194, name=python3, Ch 00000008",
           head % 2 + "Xid (PCI:0000:01:00 GPU-I:%s GPU-CI:00): 31, pid=7194, name=python3, Ch 00000008" % long_number,
           head % 2 + "Xid (PCI:0000:01:00 GPU-I:03 GPU-CI:%s): 31, pid=7194, name=python3, Ch 00000008" % long_number,
           head % 3 + "Xid (PCI:0000:01:00 GPU-I:03 GPU-CI:00): %s, pid=7194, name=python3, Ch 00000008" % long_number,
           head % 3 + "Xid (PCI:0000:01:00 GPU-I:\u0663): \u0669\u0665, pid=7062, name=python3, RST: Yes, D-RST: No"]
    events = KernelLines("node7", {}, Throttle(0)).feed(bad + [XID_95_GI_ONLY], 1796032800.0)
    assert [event["gpuops"]["selection"] for event in events] == ["00000000:01:00.0:3"]
    for line in bad:
        assert [(event["gpu_instance_id"], event["compute_instance_id"]) for event in parse_kernel_log(line)] == [], line[:120]
    # a pid longer than Python converts is no pid, and the Xid still an event of its instance
    events = parse_kernel_log(head % 4 + "Xid (PCI:0000:01:00 GPU-I:05 GPU-CI:00): 31, pid=%s, name=python3, Ch 00000008" % long_number)
    assert [(event["xid"], event["gpu_instance_id"], event["pid"]) for event in events] == [(31, 5, None)]


def test_an_xid_naming_an_instance_counts_only_from_the_kernel():
    """A local user can log "NVRM: Xid (... GPU-I:05 ...)" with logger -t kernel: journald gives it the transport
    syslog (only the kernel's entries have _TRANSPORT=kernel), a syslog file the tag kernel[<pid>]. Neither makes an
    event for the instance; the kernel's own entry, with the same message, does."""
    message = "NVRM: Xid (PCI:0000:01:00 GPU-I:05 GPU-CI:00): 31, pid=7194, name=python3, Ch 00000008"
    forged = {"_TRANSPORT": "syslog", "SYSLOG_IDENTIFIER": "kernel", "_UID": "1000", "MESSAGE": message,
              "__REALTIME_TIMESTAMP": "1796032800000000", "_HOSTNAME": "node7"}
    kernels = dict(forged, _TRANSPORT="kernel", _UID="0")
    del kernels["SYSLOG_IDENTIFIER"]
    logged = "2026-11-30T10:00:01+00:00 node7 kernel[4242]: " + message

    def selections(lines):
        return [event["gpuops"]["selection"] for event in KernelLines("node7", {}, Throttle(0)).feed(lines, 1796032800.0)]

    assert selections(journal_lines(forged)) == []
    assert selections([logged]) == []
    assert selections(journal_lines(kernels)) == ["00000000:01:00.0:5/0"]
