# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The run report names MIG instances as the node's tools print them (a profile from nvidia-smi mig -lgi, a MIG UUID
from nvidia-smi -L) in the instance rung's plan lines, its message and the evidence: each stays text in the Markdown and
the HTML report, whatever markup, pipe or line break the node's words carry."""

from __future__ import annotations

from ansible_collections.gpuops.remediation.plugins.plugin_utils.report._report_html import render_html
from ansible_collections.gpuops.remediation.plugins.plugin_utils.report._run_report import build_report, host_entry, render_markdown

PROFILE = "1g.10gb<img src=x onerror=alert(1)>|[x](javascript:alert(2))"
UUID = "MIG-<script>alert(3)</script>\nforged line"


def mig_host():
    """A node whose instance rung re-created instance 0:3, the node's words in every line the report shows of it."""
    plan = "re-create MIG instance 0:3 (%s, profile 19, placement 2:1) with compute instance profile 0: 4096 MiB in it" % PROFILE
    reason = "GPU 0 (00000000:18:00.0) MIG instance 0:3 (%s, %s) has 4096 MiB in use that no live process accounts for" % (PROFILE, UUID)
    gpu = {"index": 0, "name": "NVIDIA A100-SXM4-80GB", "pci_bus_id": "00000000:18:00.0", "state_before": "stuck", "state_after": "ok",
           "memory_used_mib_before": 4096, "memory_used_mib_after": 0, "ghost_mib_before": 4096, "freed_mib": 4096}
    outcome = {"status": "fixed", "msg": "the instance rung got the memory back: " + plan, "check_mode": False, "entry_rung": "instance",
               "fixed_by": "instance", "rungs_tried": [{"rung": "instance", "changed": True, "failed": False, "msg": "", "plan": [plan]}],
               "held_by": [], "gpus": [gpu], "memory_freed_mib": 4096, "seconds": 3.0, "reasons": [reason]}
    snapshot = {"gpus": [{"index": 0, "name": gpu["name"], "pci_bus_id": gpu["pci_bus_id"], "memory_total_mib": 81920,
                          "memory_used_mib": 4096, "unattributed_mib": 4096, "state": "stuck"}],
                "holders": [], "verdict": {"rung": "instance", "reasons": [{"rung": "instance", "reason": reason}]}}
    return build_report([host_entry("gpu-node-31", outcome, snapshot)], "reset_gpu-20261206T140000Z", "reset_gpu", False, "2026-12-06T14:00:07Z")


def test_instance_profiles_and_mig_uuids_from_the_node_stay_text_in_both_reports():
    report = mig_host()
    markdown, page = render_markdown(report), render_html(report)
    for text in (markdown, page):
        assert "<img" not in text and "<script" not in text and "\nforged line" not in text
    assert "[x](javascript" not in markdown  # no link a reader could follow
    assert "onerror=alert(1)" in page and "alert(3)" in page  # there, but as text
    rung_lines = [line for line in markdown.splitlines() if "re-create MIG instance 0:3" in line]
    assert rung_lines and all("|" not in line.replace("\\|", "") for line in rung_lines), rung_lines
