# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""make demo's playbook shows the operator's view: the summary the run printed (what needs a human first), the
Markdown report and the path of the HTML page, which is still there after the demo (until the next one)."""

import os
import sys

from ansible_collections.gpuops.remediation.tests.unit.helpers.playbook_run import ansible_playbook


def test_the_demo_shows_the_report_and_keeps_it(collection_root, collections_root, tmp_path):
    run = ansible_playbook([os.path.join(collection_root, "playbooks", "demo.yml"), "-e", "ansible_python_interpreter=" + sys.executable],
                           collections_root, collection_root, env={"ANSIBLE_CONFIG": os.path.join(collection_root, "ansible.cfg")}, timeout=600)
    out = run.stdout
    assert run.returncode == 0, out[-4000:]
    summary = out.split("TASK [The summary the run printed at its end", 1)[1].split("TASK [", 1)[0]
    assert ": 1 host" in summary and "fixed (1 host):" in summary and "node07: fixed - the reset rung got the memory back" in summary
    markdown = out.split("TASK [The report in Markdown", 1)[1].split("TASK [", 1)[0]
    assert "# GPU memory report" in markdown and "## Fixed (1 host)" in markdown
    page = os.path.join(collection_root, ".demo", "reports", "latest.html")
    # The default callback folds long values at spaces: compare the words.
    shown = " ".join(out.split("TASK [The report as a page", 1)[1].split())
    assert "%s (kept until the next make demo)" % page in shown
    with open(page, encoding="utf-8") as handle:
        assert 'data-group="fixed"' in handle.read()
    assert "Cryptography" not in out.split("PLAY [", 1)[1]  # nothing the collection's own run could prevent
