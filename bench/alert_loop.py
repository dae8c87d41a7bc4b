# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark: from the alert firing to the node fixed, through the real daemons, and the webhook's latency in a storm.

Runs the loop of the alert_loop integration target (tests/integration/targets/alert_loop/files/alert_loop.py: Debian's
prometheus-node-exporter, prometheus and prometheus-alertmanager on 127.0.0.1 ports of their own with 1 s scrape,
evaluation and grouping intervals, gpu_alert_webhook with Alertmanager's bearer token, ansible-rulebook with the shipped
rules, reset_gpu.yml on a simulated node) --repeat times, and reports each part, dated where it happens:

- scrape: the watch's metrics file written -> the first Prometheus sample of the finding;
- rule_evaluation: that sample -> the alert's activeAt (no `for`: the first evaluation that sees it);
- alertmanager_to_webhook: activeAt -> the webhook's "accepted" line (Alertmanager's group_wait and its POST);
- rulebook_and_run: the webhook -> the run's report written (the rule, ansible-playbook's start, the ladder walk);
- ladder_walk: the walk's own span in the report; alert_to_fixed: activeAt -> the report;
- the way back: the watch's next metrics -> the scrape with the memory back -> the resolved notification delivered.

With --storm N (default 30) the last round also posts N alerts for N other hosts at once while ansible-rulebook runs
their playbooks (--max-concurrent-actions 4) and reports each answer's latency: every one is answered at once, never
behind the queued runs.

Needs Debian's prometheus, prometheus-alertmanager, prometheus-node-exporter and Java 17 (tools/debian_tools.sh
installs them as root). Run: .venv/bin/python bench/alert_loop.py   (--repeat 3 --storm 30)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration", "targets", "alert_loop", "files"))

import alert_loop  # noqa: E402  (the loop itself, shared with the integration target)

STACK = ["prometheus:prometheus", "prometheus-alertmanager:prometheus-alertmanager",
         "prometheus-node-exporter:prometheus-node-exporter", "java:openjdk-17-jre-headless"]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--storm", type=int, default=30)
    args = parser.parse_args(argv)
    done = subprocess.run(["bash", os.path.join(ROOT, "tools", "debian_tools.sh"), "ensure"] + STACK, check=False, timeout=900)
    if done.returncode != 0:
        print("alert_loop: not run: the Prometheus stack is missing and cannot be installed here")
        return 2
    alert_loop.COLLECTIONS_PATH = os.path.join(ROOT, ".collections")
    alert_loop.COLLECTION = os.path.join(alert_loop.COLLECTIONS_PATH, "ansible_collections", "gpuops", "remediation")
    rounds = []
    for number in range(args.repeat):
        work = tempfile.mkdtemp(prefix="gpuops-alert-loop-")
        try:
            result = alert_loop.run_loop(os.path.join(work, "loop"), storm=args.storm if number == args.repeat - 1 else 0)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        parts = alert_loop.parts(result)
        rounds.append(parts)
        print("round %d: %s" % (number + 1, ", ".join("%s %.2f s" % item for item in parts.items())))
        if result.get("storm"):
            codes = sorted(set(code for code, _seconds in result["storm"]))
            print("storm: %d alerts at once, answers %s, latency median %.3f s, max %.3f s"
                  % (len(result["storm"]), codes, parts["storm_webhook_median"], parts["storm_webhook_max"]))
    names = [name for name in rounds[0] if not name.startswith("storm")]
    print("| part | " + " | ".join("round %d" % (index + 1) for index in range(len(rounds))) + " |")
    print("|---|" + "---|" * len(rounds))
    for name in names:
        print("| %s | %s |" % (name, " | ".join("%.2f s" % parts[name] for parts in rounds)))
    print(json.dumps({"benchmark": "alert_loop", "rounds": rounds}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
