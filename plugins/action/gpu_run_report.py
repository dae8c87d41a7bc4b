# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_run_report: the run report, built and written on the controller in one step (no module runs on a host)."""

from __future__ import annotations

import datetime
import os

from ansible.errors import AnsibleActionFail

from ansible_collections.gpuops.remediation.plugins.module_utils._safe_files import UnsafePath
from ansible_collections.gpuops.remediation.plugins.plugin_utils._action_base import ControllerAction
from ansible_collections.gpuops.remediation.plugins.plugin_utils._data import plain
from ansible_collections.gpuops.remediation.plugins.plugin_utils.report._protect_check import protect_warnings
from ansible_collections.gpuops.remediation.plugins.plugin_utils.report._report_html import render_html
from ansible_collections.gpuops.remediation.plugins.plugin_utils.report._run_report import (
    build_report, host_entry, latest_name, render_markdown, report_lines, report_name, write_report)

# What a host of the play leaves for the report.
HOST_VARIABLES = ("gpu_reclaim_outcome", "gpu_inspect_snapshot", "gpu_inspect_summary", "gpu_remediate_guard_refusal",
                  "gpu_remediate_host_os")
ARGUMENT_SPEC = {
    "hosts": {"type": "list", "elements": "str"},
    "kind": {"type": "str", "default": "gpu_report", "choices": ["gpu_report", "reset_gpu"]},
    "run_id": {"type": "str", "default": ""},
    "dest": {"type": "path"},
    "write": {"type": "bool", "default": True},
    "destructive_hosts": {"type": "list", "elements": "str", "default": []},
    "protect_names": {"type": "list", "elements": "str", "default": []},
}


class ActionModule(ControllerAction):
    _requires_connection = False
    ARGUMENT_SPEC = ARGUMENT_SPEC
    REQUIRED_IF = (("write", True, ("dest",)),)
    # A dest through a link, in a directory another user can write, or not absolute: refused naming the option.
    FAILURES = (UnsafePath,)

    def act(self, args, task_vars):
        hostvars = task_vars["hostvars"]
        if args["hosts"] is None:  # left out or null: every host of the play; an empty list selects none
            args["hosts"] = list(task_vars.get("ansible_play_hosts_all") or [])
        entries = []
        for host in args["hosts"]:
            if host not in hostvars:
                raise AnsibleActionFail("hosts: %r is not a host of the inventory" % (host,))
            variables = hostvars[host]
            found = dict((name, plain(variables[name])) for name in HOST_VARIABLES if name in variables)
            entries.append(host_entry(host, found.get("gpu_reclaim_outcome"), found.get("gpu_inspect_snapshot"),
                                      found.get("gpu_inspect_summary"), found.get("gpu_remediate_guard_refusal"),
                                      found.get("gpu_remediate_host_os") or "linux"))
        now = datetime.datetime.now(datetime.timezone.utc)
        run_id = args["run_id"] or "%s-%s" % (args["kind"], now.strftime("%Y%m%dT%H%M%S.%fZ"))
        report = build_report(entries, run_id, args["kind"], bool(self._task.check_mode), now.strftime("%Y-%m-%dT%H:%M:%SZ"),
                              args["destructive_hosts"], protect_warnings(entries, args["protect_names"]))
        # The report is the controller's record of the run: written in check mode too (it is the plan then), never a change.
        # The controller's ansible-playbook process (this worker's parent): the same for every batch of this run.
        name = report_name(run_id, args["hosts"], task_vars.get("awx_job_id"), os.getppid())
        paths = write_report(args["dest"], report, render_markdown(report), render_html(report), name,
                             latest_name(args["kind"], bool(self._task.check_mode))) if args["write"] else []
        return dict(changed=False, report=report, paths=paths, summary=report["fleet"]["summary"],
                    lines=report_lines(report["fleet"]["summary"], paths))
