# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""bench/fleet.py's timer: how long each task of a play took, over all hosts, written as JSON.

Enabled only by the benchmark (ANSIBLE_CALLBACKS_ENABLED=fleet_timing, ANSIBLE_CALLBACK_PLUGINS=bench/fleet/callback_plugins);
it writes {"tasks": [{"name", "seconds", "hosts"}], "seconds", "per_host"} to the file named by GPUOPS_FLEET_TIMING.
With the linear strategy a task starts when every host finished the one before, so the spans add up.
per_host counts, for each host, the tasks that ran (not skipped) and the module executions on it: one per task
whose action runs a module, none for the actions that stay on the controller, and for gpu_ladder the modules it
ran (its result's modules_run).
"""

from __future__ import annotations

import json
import os
import time

from ansible.plugins.callback import CallbackBase

# Actions that run nothing on the host.
CONTROLLER_ONLY = frozenset(("set_fact", "debug", "include_tasks", "import_tasks", "include_role", "import_role", "assert", "fail",
                             "meta", "validate_argument_spec", "set_stats", "add_host", "group_by", "gpu_run_report", "gpu_ladder"))

DOCUMENTATION = r"""
name: fleet_timing
type: aggregate
short_description: Time each task of a benchmark run
description: Writes the span of each task to the JSON file named by the environment variable GPUOPS_FLEET_TIMING.
author: gpuops maintainers (@gpuops)
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "fleet_timing"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super(CallbackModule, self).__init__(*args, **kwargs)
        self.started = time.monotonic()
        self.tasks = []
        self.current = None
        self.per_host = {}
        self.walk_modules = {}  # {module: {"runs", "seconds"}} inside gpu_ladder's walks, all hosts

    def _close_task(self):
        if self.current is not None:
            self.current["seconds"] = round(time.monotonic() - self.current.pop("started"), 4)
            self.tasks.append(self.current)
            self.current = None

    def _start_task(self, task):
        self._close_task()
        self.current = {"name": task.get_name(), "started": time.monotonic(), "hosts": 0}

    def _count_host(self, *_args, **_kwargs):
        if self.current is not None:
            self.current["hosts"] += 1

    def _count_run(self, result, *_args, **_kwargs):
        self._count_host()
        counts = self.per_host.setdefault(result._host.get_name(), {"tasks": 0, "modules": 0})
        counts["tasks"] += 1
        action = result._task.action.rsplit(".", 1)[-1]
        modules = result._result.get("modules_run")
        counts["modules"] += len(modules) if action == "gpu_ladder" and isinstance(modules, list) else 0 if action in CONTROLLER_ONLY else 1
        if action == "gpu_ladder" and isinstance(modules, list):
            for name, seconds in zip(modules, result._result.get("module_seconds") or []):
                spent = self.walk_modules.setdefault(name, {"runs": 0, "seconds": 0.0})
                spent["runs"] += 1
                spent["seconds"] = round(spent["seconds"] + seconds, 4)

    v2_runner_on_ok = v2_runner_on_failed = v2_runner_on_unreachable = _count_run
    v2_runner_on_skipped = _count_host

    def v2_playbook_on_task_start(self, task, is_conditional):
        self._start_task(task)

    def v2_playbook_on_handler_task_start(self, task):
        self._start_task(task)

    def v2_playbook_on_stats(self, stats):
        self._close_task()
        path = os.environ.get("GPUOPS_FLEET_TIMING")
        if path:
            with open(path, "w") as handle:
                json.dump({"tasks": self.tasks, "seconds": round(time.monotonic() - self.started, 4), "per_host": self.per_host,
                           "walk_modules": self.walk_modules}, handle)
