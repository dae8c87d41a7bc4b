# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The watch's Prometheus text file: HELP and TYPE lines, label escaping, no memory gauge without an answer.
Checked by Debian's promtool, as node_exporter's parser reads it."""

from __future__ import annotations

import os
import subprocess

from ansible_collections.gpuops.remediation.plugins.module_utils.watch._watch import Thresholds, empty_state, judge, sample_of
from ansible_collections.gpuops.remediation.plugins.module_utils.watch._watch_metrics import escape_label_value, metric_series, render

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
T0 = 1800000000.0
ODD_NAME = 'NVIDIA "H100" \\ 80GB\nHBM3'


def promtool_check(text):
    """(rc, output) of promtool check metrics on text; the tool is installed first or the test fails."""
    subprocess.run([os.path.join(ROOT, "tools", "debian_tools.sh"), "ensure", "promtool:prometheus"], check=True, timeout=600)
    done = subprocess.run(["promtool", "check", "metrics"], input=text.encode("utf-8"), capture_output=True, check=False, timeout=60)
    return done.returncode, (done.stdout + done.stderr).decode("utf-8", "replace")


def gpu(index, ghost=0, name="NVIDIA H100 80GB HBM3"):
    return {"index": index, "uuid": "GPU-%d" % index, "name": name, "pci_bus_id": "00000000:%02X:00.0" % (0x18 + index),
            "memory_total_mib": 81559, "memory_used_mib": 4096, "attributed_mib": 4096 - ghost, "unattributed_mib": ghost,
            "holders": [11, 12], "recovery_action": "none", "state": "ok"}


def run_metrics(snapshots, state=None, events=(), remediation=None, in_progress=False):
    samples = [sample_of(snap, T0 + number) for number, snap in enumerate(snapshots)]
    now = T0 + len(samples)
    judged = judge(state or empty_state(), samples, list(events), Thresholds(ghost_samples=1), now, "node07")
    return render(metric_series(samples[-1], judged.state, judged.findings, judged.fresh_xids, remediation, now,
                                remediation_in_progress=in_progress)), judged.state


def answered(*gpus):
    return {"gpus": list(gpus), "probes": {"gpu": {"backend": "nvml", "ok": True, "timed_out": False, "error": None}}}


def hung():
    return {"gpus": [{"index": 0, "uuid": None, "name": None, "pci_bus_id": None}],
            "probes": {"gpu": {"backend": "nvml", "ok": False, "timed_out": True, "error": "NVML did not answer in 10.0 s"}}}


def lines_of(text, family):
    return [line for line in text.splitlines() if line.startswith(family + "{") or line.startswith(family + " ")]


def test_label_values_escape_backslash_quote_and_newline():
    assert escape_label_value(ODD_NAME) == 'NVIDIA \\"H100\\" \\\\ 80GB\\nHBM3'


def test_every_family_has_help_and_type_and_promtool_accepts_the_file():
    event = {"kind": "xid", "xid": 79, "gpu_index": 0, "pci_bus_id": "00000000:18:00.0", "time": "t", "time_epoch": T0,
             "line": "NVRM: Xid (PCI:0000:18:00): 79", "catalog": {"action": "reboot"}}
    text = run_metrics([answered(gpu(0, ghost=3072, name=ODD_NAME), gpu(1))], events=[event],
                       remediation={"rung": "reset", "epoch": T0 - 60}, in_progress=True)[0]
    rc, output = promtool_check(text)
    assert rc == 0, output + text
    assert output.strip() == "", output  # no lint complaint either
    assert 'name="NVIDIA \\"H100\\" \\\\ 80GB\\nHBM3"' in text
    assert lines_of(text, "gpuops_gpu_memory_ghost_bytes")[0].endswith(" %d" % (3072 * 1024 * 1024))
    assert lines_of(text, "gpuops_gpu_holders")[0].endswith(" 2")
    assert lines_of(text, "gpuops_watch_remediation_in_progress") == ["gpuops_watch_remediation_in_progress 1"]
    assert lines_of(run_metrics([answered(gpu(0))])[0], "gpuops_watch_remediation_in_progress") == [
        "gpuops_watch_remediation_in_progress 0"]
    assert lines_of(text, "gpuops_gpu_xid_events_total") == ['gpuops_gpu_xid_events_total{gpu="0",xid="79"} 1']
    assert lines_of(text, "gpuops_gpu_xid_new_events") == ['gpuops_gpu_xid_new_events{gpu="0",xid="79"} 1']
    assert lines_of(text, "gpuops_last_remediation_timestamp_seconds") == [
        'gpuops_last_remediation_timestamp_seconds{rung="reset"} %r' % (T0 - 60)]
    assert lines_of(text, "gpuops_gpu_finding") == [
        'gpuops_gpu_finding{kind="ghost_memory",gpu="0",uuid="GPU-0",pci_bus_id="00000000:18:00.0",UUID="GPU-0"} 1',
        'gpuops_gpu_finding{kind="xid",gpu="0",uuid="GPU-0",pci_bus_id="00000000:18:00.0",UUID="GPU-0"} 1']
    families = [line.split()[2] for line in text.splitlines() if line.startswith("# TYPE")]
    assert len(families) == len(set(families)) == len([line for line in text.splitlines() if line.startswith("# HELP")])


def test_a_failed_probe_writes_no_memory_gauge_and_keeps_the_last_success():
    state = run_metrics([answered(gpu(0))])[1]
    text = run_metrics([hung()], state=state)[0]
    assert promtool_check(text)[0] == 0
    assert lines_of(text, "gpuops_watch_probe_success") == ["gpuops_watch_probe_success 0"]
    assert lines_of(text, "gpuops_watch_last_success_timestamp_seconds") == ["gpuops_watch_last_success_timestamp_seconds %r" % T0]
    assert "gpuops_gpu_memory" not in text and "gpuops_gpu_holders" not in text
    # The hung GPU keeps the identity the state knows: the same series as when it answered.
    assert 'gpuops_gpu_finding{kind="unresponsive",gpu="0",uuid="GPU-0",pci_bus_id="00000000:18:00.0",UUID="GPU-0"} 1' in text


def test_a_node_never_answered_has_no_last_success_gauge():
    text = run_metrics([hung()])[0]
    assert "gpuops_watch_last_success_timestamp_seconds" not in text
    assert lines_of(text, "gpuops_watch_probe_success") == ["gpuops_watch_probe_success 0"]


def test_xid_findings_on_two_unlisted_gpus_are_two_series():
    """GPUs that fell off the bus (Xid 79) while the probe fails have no index: their findings must still be distinct
    series, or node_exporter rejects the whole file (a series collected twice)."""
    events = [{"kind": "xid", "xid": 79, "gpu_index": None, "pci_bus_id": bus, "time": "t%d" % number, "time_epoch": T0,
               "line": "NVRM: Xid (PCI:%s): 79, GPU has fallen off the bus." % bus, "catalog": {"action": "reboot"}}
              for number, bus in enumerate(("0000:18:00", "0000:2a:00"))]
    snapshot = {"gpus": [], "probes": {"gpu": {"backend": "nvml", "ok": False, "timed_out": False, "error": "GPU is lost"}}}
    text = run_metrics([snapshot], events=events)[0]
    findings = lines_of(text, "gpuops_gpu_finding")
    assert len(findings) == len(set(findings)) == 3, text  # unresponsive, and one xid per bus
    rc, output = promtool_check(text)
    assert rc == 0 and output.strip() == "", output + text


def test_a_lost_gpu_has_no_holders_gauge_that_reads_as_idle():
    lost = {"index": 1, "uuid": None, "name": None, "pci_bus_id": None, "lost": True, "processes": [], "holders": [],
            "state": "lost"}
    text = run_metrics([answered(gpu(0), lost)])[0]
    assert lines_of(text, "gpuops_watch_probe_success") == ["gpuops_watch_probe_success 1"]
    assert [line for line in text.splitlines() if 'gpu="1"' in line] == [
        'gpuops_gpu_finding{kind="unresponsive",gpu="1",uuid="",pci_bus_id="",UUID=""} 1']
    assert promtool_check(text)[0] == 0
