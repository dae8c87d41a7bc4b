"""The HTML run report (plugin_utils/report/_report_html.py): every figure it shows is the JSON report's, every node string
is escaped, and it renders unknown memory, failed hosts, hosts without GPUs, empty and large fleets."""
import copy
import re

from ansible_collections.gpuops.remediation.plugins.plugin_utils.report._report_html import render_html
from ansible_collections.gpuops.remediation.plugins.plugin_utils.report._run_report import build_report, host_entry

from ansible_collections.gpuops.remediation.tests.unit.helpers.report_browser import check, read_figures, render
from ansible_collections.gpuops.remediation.tests.unit.helpers.report_fleet import HOSTILE, fleet_report


def _figures(page):
    return dict(read_figures(page).figures)


def _clean(result):
    return not (result["mismatches"] or result["missing"] or result["scripts"] or result["handlers"])


def test_every_figure_of_the_page_is_the_json_reports_and_none_is_missing():
    report = fleet_report()
    result = check(render_html(report), report)
    assert _clean(result), result
    assert result["checked"] > 100


def test_the_check_sees_a_figure_that_differs_from_the_json():
    report = fleet_report()
    page = render_html(report).replace('data-path="fleet.memory_freed_mib">33,792<', 'data-path="fleet.memory_freed_mib">33,793<')
    assert check(page, report)["mismatches"] == [{"path": "fleet.memory_freed_mib", "shown": "33,793", "report": "33792"}]
    page = re.sub(r'<span data-field="seconds" data-path="hosts\.0\.seconds">[^<]*</span>', "", render_html(report))
    assert check(page, report)["missing"] == ["hosts.0.seconds"]


def test_hostile_names_are_text_never_markup():
    page = render_html(fleet_report())
    parsed = read_figures(page)
    assert parsed.scripts == 0 and parsed.handlers == []
    assert "<script>" not in page and "<img" not in page and "onerror=alert" in page  # there, but as text
    figures = _figures(page)
    assert figures["hosts.2.host"] == HOSTILE  # the browser reads back exactly the host's name
    assert page.count("&lt;script&gt;document.body.dataset.pwned=&#x27;1&#x27;&lt;/script&gt;&quot;&#x27;&gt;") >= 6  # host, GPU, process, user, msg, rung


def test_windows_holder_without_a_figure_is_na_never_zero():
    report = fleet_report()
    figures = _figures(render_html(report))
    windows = [entry["host"] for entry in report["hosts"]].index("ws12.corp")
    assert report["hosts"][windows]["held_by"][1]["used_mib"] is None
    assert figures["hosts.%d.held_by.1.used_mib" % windows] == "n/a"
    assert figures["hosts.%d.held_by.0.used_mib" % windows] == "128"
    # the split of the GPU's memory is unknown there (WDDM): ghost n/a, the used memory one in-use segment
    assert figures["hosts.%d.gpus.0.bars.0.ghost_mib" % windows] == "n/a"
    assert figures["hosts.%d.gpus.0.bars.0.in_use_mib" % windows] == "9,344"


def test_failed_unreachable_refused_and_gpuless_hosts_say_so():
    page = render_html(fleet_report())
    figures = _figures(page)
    statuses = [figures["hosts.%d.status" % at] for at in range(7)]
    assert statuses == ["fixed", "fixed", "failed", "clean", "refused", "not_reached", "clean"]
    assert 'data-host="gpu-node-12"' in page and "no GPU figures: the host left no snapshot" in page
    assert "fleet guard: 3 of 12 hosts would need a destructive rung" in page
    assert page.count("no GPU found on this host") == 1  # login-01


def test_a_health_check_is_shown_with_its_tests():
    page = render_html(fleet_report())
    figures = _figures(page)
    assert figures["hosts.0.health_check.result"] == "pass" and figures["hosts.2.health_check.result"] == "fail"
    assert figures["hosts.2.health_check.tests.1.result"] == "Fail"
    assert "the GPU stays drained" in page


def test_an_empty_fleet_and_a_read_only_report():
    empty = build_report([], "gpu_report-1", "gpu_report", False, "t")
    result = check(render_html(empty), empty)
    assert _clean(result) and "no hosts" in render_html(empty)
    assert "memory recovered" not in render_html(empty)  # a read-only report recovers nothing


def test_check_mode_says_it_is_a_plan():
    report = build_report(fleet_report()["hosts"][:1], "r", "reset_gpu", True, "t")
    assert "Check mode: a plan, nothing was changed." in render_html(report)


def test_a_fleet_of_200_hosts_has_its_summary_first_and_stays_one_reasonable_page():
    kinds, entries = fleet_report()["hosts"][:4], []
    for at in range(200):
        template = copy.deepcopy(kinds[at % 4])
        template["host"] = "node%03d" % at
        entries.append(template)
    report = build_report(entries, "reset_gpu-200", "reset_gpu", False, "t")
    page = render_html(report)
    figures = _figures(page)
    assert figures["fleet.hosts"] == "200" and figures["fleet.count_by_status.fixed"] == "100"
    assert figures["fleet.count_by_status.failed"] == "50" and figures["fleet.memory_freed_mib"] == "{:,}".format(50 * (24576 + 9216))
    assert page.index('data-path="fleet.hosts"') < page.index('data-host="node000"')
    assert len(page) < 2500000


def test_chromium_renders_the_hostile_fleet_and_shows_the_json_figures(tmp_path):
    report = fleet_report()
    page = tmp_path / "report.html"
    page.write_text(render_html(report))
    dom = render(str(page), str(tmp_path / "report.png"))
    result = check(dom, report)
    assert _clean(result), result
    assert result["body"] == {}  # no script ran: the hostile one would have set data-pwned on the body
    assert "<title>GPU memory report reset_gpu-20261201T140000Z</title>" in dom
    assert (tmp_path / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_read_only_report_of_an_inspected_host_has_one_bar_now_and_its_holders():
    snapshot = {"verdict": {"rung": "kill", "reasons": [{"reason": "pid 4242 holds GPU 0"}]},
                "gpus": [{"index": 0, "name": "NVIDIA A100", "state": "busy", "memory_used_mib": 4096, "memory_total_mib": 40960,
                          "memory_reserved_mib": 0, "unattributed_mib": 1024}],
                "holders": [{"pid": 4242, "name": "trainer", "user": "alice", "class": "compute", "gpus": [0], "used_mib": 3072}]}
    report = build_report([host_entry("node01", snapshot=snapshot)], "gpu_report-1", "gpu_report", False, "t")
    page = render_html(report)
    figures = _figures(page)
    assert _clean(check(page, report))
    assert 'data-bar="now"' in page and 'data-bar="after"' not in page
    assert figures["hosts.0.gpus.0.bars.0.attributed_mib"] == "3,072" and figures["hosts.0.gpus.0.bars.0.ghost_mib"] == "1,024"
    assert figures["hosts.0.gpus.0.bars.0.free_mib"] == "36,864" and figures["hosts.0.held_by.0.used_mib"] == "3,072"
