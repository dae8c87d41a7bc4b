# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What needs a human comes first, through real runs: gpu_report.yml over simulated nodes (a lost GPU, ghost memory, a
working server, an idle node) prints the groups first in its console summary, grades each node by its verdict (never
"inspected"), and its Markdown and HTML (rendered by headless chromium, read from the DOM) open with the same groups;
reset_gpu.yml refused by the fleet guard says so once, names the hosts it would have touched, keeps the healthy one
clean, and counts in words that agree."""

from __future__ import annotations

import json
import os
import sys

import pytest

from ansible_collections.gpuops.remediation.tests.unit.helpers.playbook_run import COLLECTIONS_ROOT, ansible_playbook
from ansible_collections.gpuops.remediation.tests.unit.helpers.report_browser import check, render

NODES = {
    "lost": "{gpus: [{lost: true}], xid: [{xid: 79, gpu: 0}]}",
    "ghost1": "{gpus: [{ghost_mib: 2048}]}",
    "ghost2": "{gpus: [{ghost_mib: 2048}]}",
    "serving": "{gpus: [{}], holders: [{kind: fd, gpus: [0], memory_mib: 4096, name: llm-serve, running: true}]}",
    "idle": "{gpus: [{}]}",
    "busy": "{gpus: [{ghost_mib: 2048}], holders: [{kind: fd, gpus: [0], memory_mib: 4096, name: llm-serve, running: true}]}",
    "xid79": "{gpus: [{}], xid: [{xid: 79, gpu: 0}]}",
}
SETUP = """
- hosts: localhost
  connection: local
  gather_facts: false
  tasks:
%s
    - ansible.builtin.copy:
        dest: %s/inventory.yml
        mode: "0600"
        content: |
          gpu_nodes:
            hosts:
%s
"""
TEARDOWN = """
- hosts: localhost
  connection: local
  gather_facts: false
  tasks:
%s
"""


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    collections_root = COLLECTIONS_ROOT
    tmp_path = tmp_path_factory.mktemp("triage")
    lines, hosts = [], []
    for name, spec in NODES.items():
        lines.append("    - gpuops.remediation.gpu_sim:\n        root: %s\n        gpus: %s\n        holders: %s\n        xid: %s\n" % (
            tmp_path / name, _field(spec, "gpus", "[]"), _field(spec, "holders", "[]"), _field(spec, "xid", "[]")))
        hosts.append("              %s: {ansible_connection: local, ansible_python_interpreter: %s, gpuops_environment: {GPUOPS_SIM_ROOT: %s}}"
                     % (name, sys.executable, tmp_path / name))
    (tmp_path / "setup.yml").write_text(SETUP % ("".join(lines), tmp_path, "\n".join(hosts)))
    python = ["-e", "ansible_python_interpreter=" + sys.executable]
    run = ansible_playbook([str(tmp_path / "setup.yml"), "-i", "localhost,"] + python, collections_root, str(tmp_path))
    assert run.returncode == 0, run.stdout[-3000:]
    yield tmp_path
    (tmp_path / "teardown.yml").write_text(TEARDOWN % "".join(
        "    - gpuops.remediation.gpu_sim: {root: %s, state: absent}\n" % (tmp_path / name) for name in NODES))
    ansible_playbook([str(tmp_path / "teardown.yml"), "-i", "localhost,"] + python, collections_root, str(tmp_path))


def _field(spec, key, default):
    import yaml
    return json.dumps(yaml.safe_load(spec).get(key, yaml.safe_load(default)))


def _playbook(fleet, collection_root, collections_root, name, *args):
    return ansible_playbook(["-i", str(fleet / "inventory.yml"), os.path.join(collection_root, "playbooks", name)] + list(args),
                            collections_root, str(fleet))


def _summary(stdout):
    """The lines of the task that shows the fleet summary, as the console printed them."""
    block = stdout.split("TASK [gpuops.remediation.gpu_remediate : Show the fleet summary]", 1)[1].split("PLAY RECAP")[0]
    return json.JSONDecoder().raw_decode(block[block.index("=> {") + 3:])[0]["msg"]


def test_the_read_only_report_triages_by_verdict(fleet, collection_root, collections_root, tmp_path):
    run = _playbook(fleet, collection_root, collections_root, "gpu_report.yml", "-l", "lost,ghost1,serving,idle",
                    "-e", "gpu_remediate_report_dir=%s" % (tmp_path / "reports"))
    assert run.returncode == 0, run.stdout[-4000:]
    lines = _summary(run.stdout)
    assert lines[0] == "gpu_report: 4 hosts", lines
    assert lines[1] == "  needs a human (1 host):", lines
    assert lines[2].startswith("    lost: lost GPU - GPU 0 (") and "fell off the bus" in lines[2] and "next: a reboot" in lines[2], lines
    assert lines[3] == "  would be fixed (1 host):" and lines[4].startswith("    ghost1: would be fixed by reset - "), lines
    assert lines[5] == "  clean (2 hosts):", lines
    assert lines[6].startswith("    serving: in use - working programs hold its memory") and lines[7] == "    idle: clean - no GPU memory held", lines
    assert "inspected" not in "\n".join(lines)

    report = json.loads((tmp_path / "reports" / "latest.json").read_text())
    groups = [(group["group"], [host["host"] for host in group["hosts"]]) for group in report["fleet"]["triage"]]
    assert groups == [("needs a human", ["lost"]), ("would be fixed", ["ghost1"]), ("clean", ["serving", "idle"])]
    lost_bus = [gpu for entry in report["hosts"] if entry["host"] == "lost" for gpu in entry["gpus"]][0]["pci_bus_id"]
    assert lost_bus and lost_bus in lines[2]

    markdown = (tmp_path / "reports" / "latest.md").read_text()
    headings = [line for line in markdown.splitlines() if line.startswith("## ")]
    assert headings[:4] == ["## Needs a human (1 host)", "## Would be fixed (1 host)", "## Clean (2 hosts)", "## Hosts"], headings

    dom = render(str(tmp_path / "reports" / "latest.html"), str(tmp_path / "page.png"))
    checked = check(dom, report)
    assert checked["mismatches"] == [] and checked["missing"] == [] and checked["scripts"] == 0, checked
    triage_at, hosts_at = dom.index('data-scope="triage"'), dom.index("<table>")
    assert triage_at < hosts_at
    assert dom.index('data-group="needs a human"') < dom.index('data-group="would be fixed"') < dom.index('data-group="clean"')


def test_a_fleet_refusal_is_said_once_and_the_healthy_host_stays_clean(fleet, collection_root, collections_root, tmp_path):
    run = _playbook(fleet, collection_root, collections_root, "reset_gpu.yml", "-l", "ghost1,ghost2,idle",
                    "-e", "gpu_remediate_max_destructive_percent=34", "-e", "gpu_remediate_report_dir=%s" % (tmp_path / "reports"))
    assert run.returncode == 2, run.stdout[-4000:]
    assert run.stdout.count("fatal: [") == 1, run.stdout[-4000:]
    refusal = "fleet guard: 2 of 3 hosts would need a destructive rung (ghost1, ghost2), more than the 34% allowed (1 host, "
    assert run.stdout.count("[ERROR]: Task failed: Action failed: " + refusal) == 1, run.stdout[-4000:]
    assert "TASK [gpuops.remediation.gpu_reclaim" not in run.stdout
    report = json.loads((tmp_path / "reports" / "latest.json").read_text())
    status = dict((entry["host"], entry["status"]) for entry in report["hosts"])
    assert status == {"ghost1": "refused", "ghost2": "refused", "idle": "clean"}
    groups = [(group["group"], [host["host"] for host in group["hosts"]]) for group in report["fleet"]["triage"]]
    assert groups == [("needs a human", ["ghost1", "ghost2"]), ("clean", ["idle"])]
    assert all(host["next"].startswith("narrow the run with --limit") for host in report["fleet"]["triage"][0]["hosts"])
    assert report["fleet"]["summary"][0].endswith(": 3 hosts")


def test_a_plan_speaks_in_the_conditional(fleet, collection_root, collections_root, tmp_path):
    run = _playbook(fleet, collection_root, collections_root, "reset_gpu.yml", "-l", "ghost2", "--check",
                    "-e", "gpu_remediate_report_dir=%s" % (tmp_path / "reports"))
    assert run.returncode == 0, run.stdout[-4000:]
    lines = _summary(run.stdout)
    assert lines[0].endswith(": 1 host (check mode: a plan, nothing changed)") and lines[1] == "  would be fixed (1 host):", lines
    markdown = (tmp_path / "reports" / "latest-plan.md").read_text()
    rung_lines = [line for line in markdown.splitlines() if line.startswith("- rung ")]
    assert rung_lines and all(": would " in line for line in rung_lines), rung_lines
    outcome = json.loads((tmp_path / "reports" / "latest-plan.json").read_text())["hosts"][0]
    assert [line for line in outcome["summary"] if line.startswith("  rung ")] == ["  rung reset: would change"], outcome["summary"]


def test_a_protect_entry_that_protects_nobody_is_a_warning_said_once(fleet, collection_root, collections_root, tmp_path):
    run = _playbook(fleet, collection_root, collections_root, "reset_gpu.yml", "-l", "serving,idle", "--check",
                    "-e", '{"gpu_reclaim_protect_names": ["llm-serv", "llm-serve"]}', "-e", "gpu_remediate_report_dir=%s" % (tmp_path / "reports"))
    assert run.returncode == 0, run.stdout[-4000:]
    warning = "gpu_reclaim_protect_names: 'llm-serv' matches no process holding a GPU on any host of this run; did you mean 'llm-serve'?"
    assert _summary(run.stdout).count("  warning: " + warning) == 1
    assert run.stdout.count(warning) == 1, run.stdout[-4000:]
    report = json.loads((tmp_path / "reports" / "latest-plan.json").read_text())
    assert report["fleet"]["warnings"] == [warning]
    assert "> **Warning:** " in (tmp_path / "reports" / "latest-plan.md").read_text()


def test_a_real_run_over_a_lost_a_refused_a_busy_a_fixed_and_a_clean_node(fleet, collection_root, collections_root, tmp_path):
    """The picture of docs/report.md comes from this run (GPUOPS_REPORT_PICTURE=PATH keeps the screenshot there)."""
    run = _playbook(fleet, collection_root, collections_root, "reset_gpu.yml", "-l", "lost,xid79,busy,ghost1,idle",
                    "-e", "gpu_remediate_max_destructive_percent=100", "-e", "gpu_remediate_report_dir=%s" % (tmp_path / "reports"))
    report = json.loads((tmp_path / "reports" / "latest.json").read_text())
    grades = dict((entry["host"], (entry["triage"]["group"], entry["triage"]["outcome"])) for entry in report["hosts"])
    assert grades == {"lost": ("needs a human", "lost GPU"), "xid79": ("held back", "above max rung"), "busy": ("held back", "busy"),
                      "ghost1": ("fixed", "fixed"), "idle": ("clean", "clean")}, (grades, run.stdout[-6000:])
    nexts = dict((entry["host"], entry["triage"]["next"]) for entry in report["hosts"])
    assert "gpu_reclaim_max_rung" in nexts["xid79"] and "end_running_jobs" in nexts["busy"], nexts
    lines = _summary(run.stdout)
    assert [line for line in lines if not line.startswith("    ")][:5] == [
        lines[0], "  needs a human (1 host):", "  held back (2 hosts):", "  fixed (1 host):", "  clean (1 host):"], lines
    picture = str(tmp_path / "report.png")
    dom = render(str(tmp_path / "reports" / "latest.html"), picture)
    checked = check(dom, report)
    assert checked["mismatches"] == [] and checked["missing"] == [] and checked["scripts"] == 0, checked
    if os.environ.get("GPUOPS_REPORT_PICTURE"):
        with open(picture, "rb") as source, open(os.environ["GPUOPS_REPORT_PICTURE"], "wb") as target:
            target.write(source.read())
