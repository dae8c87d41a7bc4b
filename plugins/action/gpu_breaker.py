# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_breaker: the fleet-wide circuit breaker, decided and recorded on the controller under one lock."""

from __future__ import annotations

import json
import os
import time

from ansible.errors import AnsibleActionFail

from ansible_collections.gpuops.remediation.plugins.module_utils._lock import LockTimeout, NodeLock
from ansible_collections.gpuops.remediation.plugins.module_utils._option_ranges import within
from ansible_collections.gpuops.remediation.plugins.module_utils._safe_files import UnsafePath, write_atomic
from ansible_collections.gpuops.remediation.plugins.plugin_utils._action_base import ControllerAction
from ansible_collections.gpuops.remediation.plugins.plugin_utils._breaker import (
    DEFAULT_DRAIN_REASON, breaker_limit, breaker_refusal, counted_rung, default_node_name, host_is_back, journal_out, journal_reads, kubernetes_out,
    STATE_DIR_OPTION, prepare_state_dir, read_records, record_name, recorded_node_names, recorded_out, remove_record, slurm_out, unread_note,
)
from ansible_collections.gpuops.remediation.plugins.plugin_utils._data import plain
from ansible_collections.gpuops.remediation.plugins.plugin_utils.ladder._platform import LINUX, PLATFORMS, platform_rungs

ARGUMENT_SPEC = {
    "host": {"type": "str", "required": True},
    "node_name": {"type": "str"},
    "state": {"type": "str", "default": "decided", "choices": ["decided", "released"]},
    "fleet_size": {"type": "int"},
    "max_percent": {"type": "int", "default": 0},
    "max_count": {"type": "int", "default": 0},
    "window_minutes": {"type": "int", "default": 60},
    "state_dir": {"type": "path", "default": "~/.gpuops/breaker"},
    "lock_timeout": {"type": "float", "default": 60.0},
    "run_id": {"type": "str", "default": ""},
    "snapshot": {"type": "dict", "required": True},
    "platform": {"type": "str", "default": LINUX.name, "choices": list(PLATFORMS)},
    "max_rung": {"type": "str"},
    "allow_reboot": {"type": "bool", "default": False},
    "end_running_jobs": {"type": "bool", "default": False},
    "destructive_rungs": {"type": "list", "elements": "str"},
    "windows": {"type": "dict", "options": {"max_rung": {"type": "str"}, "destructive_rungs": {"type": "list", "elements": "str"}}},
    "slurm_nodes": {"type": "str"},
    "slurm_reasons": {"type": "dict"},
    "kubernetes_nodes": {"type": "list", "elements": "dict"},
    "journals": {"type": "list", "elements": "dict"},
    "kubernetes_annotation": {"type": "str", "default": "gpuops.io/cordoned-by"},
    "drain_reason": {"type": "str", "default": DEFAULT_DRAIN_REASON},
}


def fleet_node_names(task_vars, hosts):
    """{host: node} of the fleet hosts whose inventory sets gpu_reclaim_drain_node_name (the role's default,
    inventory_hostname_short, is default_node_name's answer): their journals count under the name their drains carry."""
    hostvars = task_vars.get("hostvars") or {}
    names = {}
    for host in hosts:
        if not isinstance(host, str) or host not in hostvars:
            continue
        name = hostvars[host].get("gpu_reclaim_drain_node_name")
        if isinstance(name, str) and name and "{{" not in name:
            names[host] = name
    return names


class ActionModule(ControllerAction):
    _requires_connection = False
    ARGUMENT_SPEC = ARGUMENT_SPEC
    REQUIRED_IF = (("state", "decided", ("fleet_size",)),)
    # Another user's record or lock, and a lock held past lock_timeout: the message names the path and its owner or holder.
    FAILURES = (UnsafePath, LockTimeout)

    def act(self, args, task_vars):
        if args["state"] == "released":
            return self._release(args)
        if not within("max_percent", args["max_percent"]):
            raise AnsibleActionFail("max_percent (gpu_remediate_breaker_max_percent) must be 0..100, got %r" % args["max_percent"])
        if not within("max_count", args["max_count"]):
            raise AnsibleActionFail("max_count (gpu_remediate_breaker_max_count) must be 0 or more, got %r" % args["max_count"])
        if not within("window_minutes", args["window_minutes"]):
            raise AnsibleActionFail("window_minutes (gpu_remediate_breaker_window_minutes) must be 1 or more, got %r" % args["window_minutes"])
        if not within("lock_timeout", args["lock_timeout"]):
            raise AnsibleActionFail("lock_timeout must be 0 or more seconds, got %r" % args["lock_timeout"])
        if args["fleet_size"] < 1:
            raise AnsibleActionFail("fleet_size must be 1 or more, got %r (does the group gpu_remediate_breaker_group name the fleet?)"
                                    % args["fleet_size"])
        limit = breaker_limit(args["fleet_size"], args["max_percent"], args["max_count"])
        rungs = PLATFORMS[args["platform"]].rungs
        # Unset on the host's platform: that platform's defaults, as the walk's role has them.
        args["max_rung"], args["destructive_rungs"] = platform_rungs(args)
        if args["max_rung"] not in rungs:
            raise AnsibleActionFail("max_rung must be one of %s, got %r" % (", ".join(rungs), args["max_rung"]))
        rung = counted_rung(args["snapshot"], args["platform"], args["destructive_rungs"], args["max_rung"], args["allow_reboot"],
                            args["end_running_jobs"])
        if limit is None or rung is None:
            return dict(changed=False, breaker_on=limit is not None, refuses=False, refusal="", out={}, limit=limit, recorded=False, rung=rung, unread={})
        reasons = plain(args["slurm_reasons"])
        if reasons is not None and not all(isinstance(text, str) for text in reasons.values()):
            raise AnsibleActionFail("slurm_reasons must map each node to the stdout of sinfo --format %%E (a string), got %r" % (reasons,))
        args["fleet_node_names"] = fleet_node_names(task_vars, [result.get("item") for result in plain(args["journals"] or [])])
        directory = args["state_dir"]
        problem = prepare_state_dir(directory, os.geteuid(), create=not self._task.check_mode)
        if problem:
            raise AnsibleActionFail(problem)
        if self._task.check_mode:
            # Check mode decides from the same state and creates nothing: no directory, no lock, no record.
            return self._decide(args, rung, limit, directory, reasons, record=False)
        # One decision at a time across the controller's runs: two events at once must not both pass the last place.
        with NodeLock(os.path.join(directory, ".lock"), args["lock_timeout"], option=STATE_DIR_OPTION):
            return self._decide(args, rung, limit, directory, reasons, record=True)

    def _release(self, args):
        """The host's record removed once its own inspection finds it back (host_is_back); check mode says so and
        removes nothing."""
        directory = args["state_dir"]
        if not host_is_back(args["snapshot"]):
            return dict(changed=False, released=False)
        problem = prepare_state_dir(directory, os.geteuid(), create=False)
        if problem:
            raise AnsibleActionFail(problem)
        if not os.path.isdir(directory):
            return dict(changed=False, released=False)
        if self._task.check_mode:
            there = os.path.exists(os.path.join(directory, record_name(args["host"])))
            return dict(changed=there, released=there)
        with NodeLock(os.path.join(directory, ".lock"), args["lock_timeout"], option=STATE_DIR_OPTION):
            removed = remove_record(directory, args["host"])
        return dict(changed=removed, released=removed)

    @staticmethod
    def _decide(args, rung, limit, directory, reasons, record):
        now = time.time()
        records = read_records(directory)
        out = recorded_out(records, now, args["window_minutes"])
        if args["slurm_nodes"] is not None:
            out.update(slurm_out(args["slurm_nodes"], args["drain_reason"], reasons))
        if args["kubernetes_nodes"] is not None:
            out.update(kubernetes_out(plain(args["kubernetes_nodes"]), args["kubernetes_annotation"], args["drain_reason"]))
        journals, unread = journal_reads(plain(args["journals"])) if args["journals"] is not None else ({}, {})
        journals.pop(args["host"], None)  # its own journal counts nothing against it
        unread.pop(args["host"], None)
        node_names = dict(args["fleet_node_names"] or {}, **recorded_node_names(records))
        for name, why in journal_out(journals, now, args["window_minutes"], node_names).items():
            out.setdefault(name, why)  # a node already out by another source is one node
        node = args["node_name"] or default_node_name(args["host"])
        refusal = breaker_refusal(args["host"], out, args["fleet_size"], args["max_percent"], args["max_count"],
                                  args["window_minutes"], node, unread)
        recorded = False
        if not refusal and record:
            entry = {"host": args["host"], "node": node, "epoch": now, "run": args["run_id"], "rung": rung}
            write_atomic(os.path.join(directory, record_name(args["host"])), json.dumps(entry) + "\n", 0o600, STATE_DIR_OPTION,
                         dir_mode=0o700, holds_trusted=True)
            recorded = True
        result = dict(changed=False, breaker_on=True, refuses=bool(refusal), refusal=refusal, out=out, limit=limit, recorded=recorded, rung=rung,
                      unread=unread)
        if unread and not refusal:
            result["warnings"] = [unread_note(unread)]
        return result
