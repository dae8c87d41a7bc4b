"""The run report (plugin_utils/report/_run_report.py): built from the hosts' variables, rendered, written whole."""
import json
import os
import stat

from ansible_collections.gpuops.remediation.plugins.plugin_utils.report._report_html import render_html
from ansible_collections.gpuops.remediation.plugins.plugin_utils.report._run_report import (
    build_report, host_entry, latest_name, memory_bar, render_markdown, report_lines, write_report,
)

SNAPSHOT = {
    "verdict": {"rung": "kill", "reasons": [{"reason": "pid 4242 (trainer) holds GPU 1 with 4096 MiB (compute)"}]},
    "gpus": [{"index": 1, "name": "NVIDIA H100 80GB HBM3", "state": "busy", "memory_used_mib": 4096, "memory_total_mib": 81559,
              "unattributed_mib": 0, "uuid": "GPU-1", "processes": [{"pid": 4242}]}],
    "holders": [
        {"pid": 4242, "name": "train | eval\nstep", "user": "alice", "class": "compute", "state": "S", "gpus": [1], "used_mib": 4096,
         "ppid": 1, "parent_name": "init", "cmdline": ["/opt/jobs/train | eval\nstep", "--epochs", "3"]},
        {"pid": 900, "name": "nvidia-persistenced", "class": "gpu_daemon", "gpus": [], "used_mib": None},
        {"pid": 4300, "name": "worker", "user": None, "class": "zombie", "gpus": [1], "used_mib": None, "ppid": 4299,
         "parent_name": "launcher"},
    ],
}
OUTCOME = {"status": "fixed", "entry_rung": "reset", "fixed_by": "reset", "memory_freed_mib": 6144, "seconds": 3.2,
           "rungs_tried": [{"rung": "reset", "changed": True, "failed": False, "plan": ["reset GPU 0"]}],
           "gpus": [{"index": 0, "state_before": "stuck", "state_after": "idle", "memory_used_mib_before": 6144,
                     "memory_used_mib_after": 0, "ghost_mib_before": 6144, "freed_mib": 6144}]}


def test_an_inspected_host_keeps_the_report_fields_and_leaves_out_the_gpu_daemons():
    entry = host_entry("node01", snapshot=SNAPSHOT, summary=["node01: GPU 1 busy"])
    assert entry["status"] == "inspected" and entry["entry_rung"] == "kill"
    assert [h["pid"] for h in entry["held_by"]] == [4242, 4300]
    assert "cmdline" not in entry["held_by"][0] and "uuid" not in entry["gpus"][0]
    assert entry["reasons"] == ["pid 4242 (trainer) holds GPU 1 with 4096 MiB (compute)"]
    assert entry["summary"] == ["node01: GPU 1 busy"]


def test_a_host_with_neither_outcome_nor_snapshot_was_not_reached():
    assert host_entry("node09") == {"host": "node09", "status": "not_reached", "msg": "failed or not reached before its inspection"}


def test_the_fleet_totals_and_summary_of_a_reset_run():
    entries = [host_entry("node07", outcome=OUTCOME), host_entry("node03", outcome={"status": "clean", "fixed_by": None}),
               host_entry("node09")]
    report = build_report(entries, "reset_gpu-1", "reset_gpu", False, "2026-11-29T21:00:00Z", ["node07"])
    fleet = report["fleet"]
    assert fleet["by_status"]["fixed"] == ["node07"] and fleet["by_status"]["clean"] == ["node03"]
    assert fleet["by_status"]["not_reached"] == ["node09"] and fleet["fixed_by"] == {"reset": ["node07"]}
    assert fleet["memory_freed_mib"] == 6144 and fleet["destructive_hosts"] == ["node07"]
    assert fleet["summary"] == ["reset_gpu-1: 3 hosts", "  needs a human (1 host):",
                                "    node09: not reached - failed or not reached before its inspection; next: reach the host (its connection, "
                                "its Python) and run again", "  fixed (1 host):", "    node07: fixed", "  clean (1 host):", "    node03: clean",
                                "  fixed by reset: node07", "  memory back: 6144 MiB"]


def test_check_mode_says_it_is_a_plan_and_claims_no_memory_back():
    report = build_report([host_entry("node07", outcome=dict(OUTCOME, status="planned"))], "r", "reset_gpu", True, "t")
    assert report["fleet"]["summary"][0] == "r: 1 host (check mode: a plan, nothing changed)"
    assert not [line for line in report["fleet"]["summary"] if "memory back" in line]
    assert "in check mode: a plan, nothing was changed" in render_markdown(report)


def test_markdown_tables_survive_a_pipe_and_a_newline_in_a_process_name():
    report = build_report([host_entry("node01", snapshot=SNAPSHOT)], "gpu_report-1", "gpu_report", False, "t")
    text = render_markdown(report)
    # the newline is shown as an escape (\x0a, its backslash escaped for Markdown), never a line of its own
    assert "| 4242 | train \\| eval\\\\x0astep | alice | compute | 1 | 4096 |" in text
    assert "| 4300 | worker (zombie of 4299 launcher) | ? | zombie | 1 | N/A |" in text
    # every table row has as many cells as its header
    for line in text.splitlines():
        if line.startswith("| 4242"):
            assert line.replace("\\|", "").count("|") == 7


def test_markdown_of_a_fixed_host_shows_its_rungs_and_memory():
    text = render_markdown(build_report([host_entry("node07", outcome=OUTCOME)], "r", "reset_gpu", False, "t"))
    assert "| node07 | fixed | reset | reset | reset | 6144 | 3.2 |" in text
    assert "| 0 |  | stuck -> idle | 6144 | 0 | 6144 | 6144 |" in text
    assert "- rung **reset**: changed\n  - reset GPU 0" in text


def test_write_report_replaces_the_six_files_whole(tmp_path):
    directory = str(tmp_path / "reports")
    report = build_report([host_entry("node07", outcome=OUTCOME)], "reset_gpu-1", "reset_gpu", False, "t")
    paths = write_report(directory, report, render_markdown(report), "<!DOCTYPE html>page")
    assert [os.path.basename(p) for p in paths] == ["reset_gpu-1.json", "reset_gpu-1.md", "reset_gpu-1.html",
                                                    "latest.json", "latest.md", "latest.html"]
    with open(os.path.join(directory, "latest.json")) as handle:
        assert json.load(handle) == report
    with open(os.path.join(directory, "reset_gpu-1.html")) as handle:
        assert handle.read() == "<!DOCTYPE html>page"
    assert stat.S_IMODE(os.stat(paths[0]).st_mode) == 0o640
    assert stat.S_IMODE(os.stat(directory).st_mode) & 0o007 == 0
    assert sorted(os.listdir(directory)) == sorted(os.path.basename(p) for p in paths)  # no temporary file left


def test_memory_bars_split_the_total_and_say_unknown_as_none():
    assert memory_bar("now", 81559, 6144, 4096, 512) == {
        "when": "now", "total_mib": 81559, "attributed_mib": 2048, "ghost_mib": 4096, "in_use_mib": None, "reserved_mib": 512,
        "free_mib": 74903}
    wddm = memory_bar("before", 24564, 3200, None, None)
    assert wddm["in_use_mib"] == 3200 and wddm["attributed_mib"] is None and wddm["ghost_mib"] is None and wddm["free_mib"] == 21364
    unknown = dict(when="now", total_mib=None, attributed_mib=None, ghost_mib=None, in_use_mib=None, reserved_mib=None, free_mib=None)
    assert memory_bar("now", None, None, None, None) == unknown


def test_a_walked_gpu_gets_its_total_from_the_snapshot_and_bars_before_and_after():
    snapshot = {"gpus": [{"index": 0, "memory_total_mib": 81559, "memory_reserved_mib": 0}], "verdict": {"rung": "reset"}}
    gpu = host_entry("node07", outcome=OUTCOME, snapshot=snapshot)["gpus"][0]
    assert gpu["memory_total_mib"] == 81559
    assert [memory["when"] for memory in gpu["bars"]] == ["before", "after"]
    assert gpu["bars"][0]["ghost_mib"] == 6144 and gpu["bars"][0]["free_mib"] == 81559 - 6144
    assert gpu["bars"][1]["in_use_mib"] == 0 and gpu["bars"][1]["free_mib"] == 81559
    planned = host_entry("node07", outcome=dict(OUTCOME, status="planned", check_mode=True), snapshot=snapshot)["gpus"][0]
    assert [memory["when"] for memory in planned["bars"]] == ["before"]  # a plan has no after


def test_the_fleet_counts_gpus_ghost_memory_and_the_longest_host():
    entries = [host_entry("node07", outcome=OUTCOME), host_entry("node01", snapshot=SNAPSHOT), host_entry("node09")]
    fleet = build_report(entries, "r", "reset_gpu", False, "t")["fleet"]
    assert fleet["count_by_status"] == {"fixed": 1, "partly fixed": 0, "clean": 0, "planned": 0, "failed": 0, "refused": 0, "inspected": 1,
                                        "not_reached": 1, "undetermined": 0}
    assert fleet["gpus"] == 2 and fleet["ghost_mib"] == 6144 and fleet["seconds_longest"] == 3.2
    assert build_report([host_entry("node09")], "r", "gpu_report", False, "t")["fleet"]["seconds_longest"] is None


def test_markdown_evidence_is_a_paragraph_of_its_own_after_the_rungs_list():
    # Markdown continues a list item with the next line unless a blank line ends the list (CommonMark "lazy
    # continuation"): "Evidence:" right after "  - reset GPU 0" would be read as part of that item.
    outcome = dict(OUTCOME, reasons=["GPU 0 holds 6144 MiB that no process accounts for (ghost memory)"])
    lines = render_markdown(build_report([host_entry("node07", outcome=outcome)], "r", "reset_gpu", False, "t")).splitlines()
    at = lines.index("Evidence:")
    assert lines[at - 2:at + 3] == ["  - reset GPU 0", "", "Evidence:", "",
                                    "- GPU 0 holds 6144 MiB that no process accounts for (ghost memory)"]


def test_markdown_evidence_of_an_inspected_host_follows_the_gpu_table_apart():
    lines = render_markdown(build_report([host_entry("node01", snapshot=SNAPSHOT)], "g", "gpu_report", False, "t")).splitlines()
    at = lines.index("Evidence:")
    assert lines[at - 1] == "" and lines[at + 1] == "" and lines[at + 2].startswith("- pid 4242 (trainer)")


def test_a_host_the_fleet_guard_refused_is_reported_refused_with_the_reason():
    why = "fleet guard: 3 of 3 hosts would need a destructive rung (a, b, c), more than the 25% allowed"
    entries = [host_entry("a", snapshot=SNAPSHOT, refusal=why), host_entry("b", refusal=why)]
    assert entries[0]["status"] == "refused" and entries[0]["msg"] == why and entries[0]["entry_rung"] == "kill"
    assert entries[1] == {"host": "b", "status": "refused", "msg": why}
    report = build_report(entries, "reset_gpu-2", "reset_gpu", False, "t", ["a", "b"])
    assert report["fleet"]["by_status"]["refused"] == ["a", "b"]
    assert "\n## a: refused\n\n" + why + "\n" in render_markdown(report)


DRAIN_NOTES = ["slurm drain: left as found: gpunode1 its state is DOWN (DOWN) and it carries someone else's reason "
               "'admin: <down>\\n PSU | swap' (by root at 2026-12-01T21:39:45); our drain is not applied over it",
               "slurm resume: resumed: the drain is this run's (reason 'gpuops: reclaiming stuck GPU memory (run r: x)')"]


def test_the_markdown_and_the_html_say_what_the_scheduler_was_told():
    outcome = dict(OUTCOME, drain_notes=DRAIN_NOTES)
    report = build_report([host_entry("node07", outcome=outcome)], "r", "reset_gpu", False, "t")
    text = render_markdown(report)
    assert "Scheduler:\n\n- slurm drain: left as found: gpunode1 its state is DOWN" in text
    assert "'admin: &lt;down>\\\\n PSU \\| swap'" in text  # a bar or a tag in a reason cannot break the page
    assert "- slurm resume: resumed: the drain is this run's (reason 'gpuops: reclaiming" in text
    page = render_html(report)
    assert "<h3>Scheduler</h3><ul><li>slurm drain: left as found: gpunode1 its state is DOWN" in page
    assert "&#x27;admin: &lt;down&gt;" in page or "&#39;admin: &lt;down&gt;" in page
    # A host whose run drained nothing has no such section.
    plain = build_report([host_entry("node07", outcome=OUTCOME)], "r", "reset_gpu", False, "t")
    assert "Scheduler" not in render_markdown(plain) and "Scheduler" not in render_html(plain)


def test_a_plan_never_replaces_the_last_real_report(tmp_path):
    directory = str(tmp_path / "reports")
    real = build_report([host_entry("node07", outcome=OUTCOME)], "reset_gpu-1", "reset_gpu", False, "t")
    write_report(directory, real, render_markdown(real), "real page", latest=latest_name("reset_gpu", False))
    plan = build_report([host_entry("node07", outcome=dict(OUTCOME, status="planned"))], "reset_gpu-2", "reset_gpu", True, "t")
    paths = write_report(directory, plan, render_markdown(plan), "plan page", latest=latest_name("reset_gpu", True))
    assert [os.path.basename(p) for p in paths] == ["reset_gpu-2.json", "reset_gpu-2.md", "reset_gpu-2.html",
                                                    "latest-plan.json", "latest-plan.md", "latest-plan.html"]
    with open(os.path.join(directory, "latest.json")) as handle:
        assert json.load(handle) == real
    with open(os.path.join(directory, "latest.html")) as handle:
        assert handle.read() == "real page"
    # A read-only report has nothing to plan: check mode or not, it is the latest.
    assert latest_name("gpu_report", True) == "latest"


def test_two_slices_or_two_jobs_in_one_second_never_write_the_same_report_file(tmp_path):
    """Slices of one job share the run id and differ in hosts; two jobs in one second differ in job id or process."""
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.report._run_report import report_name
    slice1 = report_name("gpu_report-20261201T060000Z", ["node01", "node02"], job_id=41, process_id=23)
    slice2 = report_name("gpu_report-20261201T060000Z", ["node03", "node04"], job_id=41, process_id=23)
    other_job = report_name("gpu_report-20261201T060000Z", ["node01", "node02"], job_id=42, process_id=23)
    other_process = report_name("gpu_report-20261201T060000Z", ["node01", "node02"], process_id=24)
    names = [slice1, slice2, other_job, other_process, report_name("gpu_report-20261201T060000Z", ["node01", "node02"], process_id=23)]
    assert len(set(names)) == len(names)
    assert all(name.startswith("gpu_report-20261201T060000Z-") for name in names)
    # The batches of one serial run: the same hosts, job and process rewrite the same files.
    assert report_name("r", ["b", "a"], 41, 23) == report_name("r", ["a", "b"], 41, 23)
    assert "/" not in report_name("a/b", ["x"])
    directory = str(tmp_path / "shared")
    for name, host in ((slice1, "node01"), (slice2, "node03")):
        report = build_report([host_entry(host, outcome=OUTCOME)], "gpu_report-20261201T060000Z", "gpu_report", False, "t")
        write_report(directory, report, render_markdown(report), "<!DOCTYPE html>page", name)
    for name, host in ((slice1, "node01"), (slice2, "node03")):
        with open(os.path.join(directory, name + ".json")) as handle:
            assert json.load(handle)["hosts"][0]["host"] == host


def test_reports_name_a_process_by_its_argv0_and_executable_escaped_and_cut_at_a_character():
    """The kernel's comm is 15 bytes and can end inside a character: '<img src=x oner' and a torn UTF-8 letter. The
    reports name the process as ps -f does (argv[0]), with its executable when that differs, and escape it."""
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.report._report_html import render_html
    hostile = "<img src=x onerror=alert(1)>"
    holders = [
        {"pid": 5000, "name": hostile[:15], "cmdline": [hostile, "--x"], "exe": "/usr/bin/python3.11", "user": "eve",
         "class": "compute", "state": "S", "gpus": [1], "used_mib": 10},
        {"pid": 5001, "name": "\u00e9tude-\u00e9t\u00e9-d\ufffd", "cmdline": ["/home/a/\u00e9tude-\u00e9t\u00e9-donn\u00e9es"],
         "exe": "/home/a/\u00e9tude-\u00e9t\u00e9-donn\u00e9es", "user": "ana", "class": "compute", "state": "S", "gpus": [1], "used_mib": 10},
        {"pid": 5002, "name": "\u00e9tude-\u00e9t\u00e9-d\ufffd", "cmdline": [], "exe": None, "user": "ana", "class": "compute",
         "state": "S", "gpus": [1], "used_mib": 10},
    ]
    snapshot = dict(SNAPSHOT, holders=holders)
    report = build_report([host_entry("node01", snapshot=snapshot)], "gpu_report-1", "gpu_report", False, "t")
    commands = [holder["command"] for holder in report["hosts"][0]["held_by"]]
    assert commands == [hostile + " (python3.11)", "\u00e9tude-\u00e9t\u00e9-donn\u00e9es", "[\u00e9tude-\u00e9t\u00e9-d]"]
    markdown = render_markdown(report)
    page = render_html(report)
    assert "<img" not in markdown and "&lt;img src=x onerror=alert(1)> (python3.11)" in markdown
    assert "<img" not in page and "&lt;img src=x onerror=alert(1)&gt; (python3.11)" in page
    assert "\ufffd" not in markdown and "\ufffd" not in page


def test_a_long_name_is_cut_at_a_character_never_inside_one():
    from ansible_collections.gpuops.remediation.plugins.module_utils._gpu_names import cut_text, display_name
    long_name = "\u5b66\u7fd2" * 40 + "e\u0301" * 10
    assert display_name("x", [long_name]) == long_name[:63] + "\u2026"
    cut = cut_text("a" * 62 + "e\u0301" + "zzz", 64)
    assert cut == "a" * 62 + "\u2026"  # the accent is not left without its letter, nor the letter without its accent
    assert cut.encode("utf-8").decode("utf-8") == cut
    assert display_name("kworker/0:1", []) == "[kworker/0:1]"
    assert display_name("python3", ["python3", "train.py"], "/usr/bin/python3.11") == "python3"
    assert display_name("trainer", ["trainer"], "/usr/bin/python3.11 (deleted)") == "trainer (python3.11)"


def test_the_run_ends_with_its_summary_and_where_the_report_is(tmp_path):
    report = build_report([host_entry("node01", snapshot=SNAPSHOT)], "gpu_report-1", "gpu_report", False, "2026-11-29T21:30:00Z")
    paths = write_report(str(tmp_path), report, render_markdown(report), "<html/>")
    lines = report_lines(report["fleet"]["summary"], paths)
    assert lines[:-1] == report["fleet"]["summary"]
    assert lines[-1] == "report: %s, %s" % (tmp_path / "gpu_report-1.md", tmp_path / "gpu_report-1.html")
    assert report_lines(["gpu_report: 1 host(s)"], []) == [
        "gpu_report: 1 host(s)", "report not written (gpu_remediate_write_report=false)"]
