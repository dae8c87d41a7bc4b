#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_journal_info: read a GPU node's remediation journal, and say whose processes the runs had to end."""

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_journal_info
short_description: Read a GPU node's remediation journal, and say whose processes the runs had to end
version_added: 1.0.0
description:
  - Every acting module of the collection writes the node journal (a JSON-lines file), one line before each action
    and one after. The line before ending a process records who it was (name, user, command line, parent, and what
    owned it, a Slurm job, pod, container or systemd unit) and the GPU memory it held.
  - This module reads the journal back from its newest line as far as O(since) reaches, across the files it has
    rotated to (C(journal.jsonl.1) ... C(journal.jsonl.4); the journal rotates at 8 MiB, see docs/journal.md), and
    returns RV(sources), the users and programs whose processes the runs ended, most often first, and RV(runs), one
    line per run. Repeated entries for one user and program are the source of a repeated leak.
  - When it cannot answer the whole window (older lines rotated away, or more than 64 MiB to read), it says so in
    RV(complete) and RV(coverage), with the time from which its answer is whole.
  - It reads only; it never writes the journal.
author:
  - gpuops maintainers (@gpuops)
extends_documentation_fragment:
  - gpuops.remediation.attributes
  - gpuops.remediation.attributes.INFO_MODULE
  - gpuops.remediation.attributes.LINUX_GPU
options:
  journal_path:
    description: The journal to read; by default the one the acting modules write (C(/var/lib/gpuops/journal.jsonl)).
    type: path
  since:
    description:
      - Only what was done at or after this time. A duration back from now (V(90m), V(24h), V(7d), V(2w)), or an
        ISO 8601 time (V(2026-12-01T08:00:00Z); without a zone it is UTC).
      - Empty reads the whole journal, its rotated files included.
    type: str
  records:
    description: Also return the journal's lines themselves (RV(records)), the newest O(max_records) of them.
    type: bool
    default: false
  max_records:
    description: At most this many lines in RV(records); 1 or more.
    type: int
    default: 200
  destructive_only:
    description:
      - With O(records=true), only the lines (intents and outcomes) of the destructive actions in RV(records), before
        O(max_records) is applied - C(gpu_reset), C(module_unload), C(module_load), C(systemctl_isolate), C(reboot) - the
        circuit breaker's lean read (docs/eda.md).
    type: bool
    default: false
seealso:
  - module: gpuops.remediation.gpu_kill
  - module: gpuops.remediation.gpu_holders_info
"""

EXAMPLES = r"""
- name: Whose processes had to be ended this week
  gpuops.remediation.gpu_journal_info:
    since: 7d
  register: journal

- name: Show the most frequent source
  ansible.builtin.debug:
    msg: "{{ journal.sources[0] | default('no process was ended') }}"
"""

RETURN = r"""
journal:
  description: The journal that was read.
  returned: always
  type: str
exists:
  description: Whether the journal exists (a node no run has acted on has none).
  returned: always
  type: bool
sources:
  description: The users and programs whose processes the runs ended, the most often ended first.
  returned: always
  type: list
  elements: dict
  contains:
    user:
      description: The user the processes ran as.
      type: str
    name:
      description: The program's name (the kernel's command name, at most 15 bytes).
      type: str
    command:
      description:
        - The process as C(ps -f) names it, from the first of them - the base name of its argv[0], with its executable's
          in parentheses when that differs; the name for lines written before it was recorded.
      type: str
    ended:
      description: How many of its processes were ended (one per process and run, whatever the signals).
      type: int
    runs:
      description: In how many runs.
      type: int
    first:
      description: When the first of them was ended (the journal's C(ts)).
      type: str
    last:
      description: When the last of them was ended.
      type: str
    used_mib:
      description: The GPU memory they held, in MiB, where the driver reported it.
      type: int
    owners:
      description: Their Slurm jobs, pods, containers or systemd units, the newest first, at most 10.
      type: list
      elements: str
    cmdlines:
      description: Up to three distinct command lines, each cut at 512 characters.
      type: list
      elements: str
  sample:
    - user: alice
      name: python3
      ended: 4
      runs: 3
      first: "2026-11-28T02:10:44.120931Z"
      last: "2026-12-01T08:44:04.523112Z"
      used_mib: 301240
      owners: ["slurm job 41822", "slurm job 41790"]
      cmdlines: ["python3 train.py --config big.yaml"]
runs:
  description: One line per run that acted, the oldest first.
  returned: always
  type: list
  elements: dict
  contains:
    run_id:
      description: The run's id (the role's run id, or a module's own).
      type: str
    first:
      description: Its first line.
      type: str
    last:
      description: Its last line.
      type: str
    actions:
      description: How many actions it began.
      type: int
    failed:
      description: How many of them ended not ok.
      type: int
    interrupted:
      description: How many it began and never finished (the run was killed in between).
      type: int
records:
  description: The journal's newest lines, oldest first, with O(records=true) (only the destructive actions' with O(destructive_only=true)).
  returned: when O(records=true)
  type: list
  elements: dict
complete:
  description:
    - Whether the answer covers the whole window asked for (O(since), or the whole journal). False when lines older
      than the window's start may have been rotated away, or when more than 64 MiB had to be read; RV(coverage) says
      from when the answer is whole, and why it is not.
  returned: always
  type: bool
coverage:
  description: What was read.
  returned: always
  type: dict
  contains:
    complete:
      description: As RV(complete).
      type: bool
    from:
      description: The time (C(ts)) of the oldest line read; the answer is whole from then on. Null when none was read.
      type: str
    reason:
      description: Why the answer is not the whole window, or null.
      type: str
    since:
      description: The start of the window asked for (ISO 8601, UTC), or null for the whole journal.
      type: str
    files:
      description: The journal's files read, newest first.
      type: list
      elements: str
    bytes:
      description: How many bytes were read.
      type: int
error:
  description: Why the journal could not be read, else null.
  returned: always
  type: str
"""

import datetime
import os
import re
import time

from ansible_collections.gpuops.remediation.plugins.module_utils._payload_imports import compile_each_file_once

compile_each_file_once()  # before the collection's other imports: zipimport compiles each of them once

from ansible_collections.gpuops.remediation.plugins.module_utils.journal._files import journal_epoch
from ansible_collections.gpuops.remediation.plugins.module_utils.journal._reader import read_window
from ansible_collections.gpuops.remediation.plugins.module_utils.journal._evidence import DESTRUCTIVE_ACTIONS, leak_sources, run_summaries
from ansible_collections.gpuops.remediation.plugins.module_utils._module import GpuModule
from ansible_collections.gpuops.remediation.plugins.module_utils._node import current_layout

DURATION = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhdw])$")
UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def since_epoch(text, now):
    """The epoch `since` names (a duration back from now, or an ISO 8601 time), None when empty; ValueError if neither."""
    text = (text or "").strip()
    if not text:
        return None
    match = DURATION.match(text.lower())
    if match:
        return now - float(match.group(1)) * UNIT_SECONDS[match.group(2)]
    parsed = datetime.datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=datetime.timezone.utc)
    return parsed.timestamp()


def _iso(epoch):
    try:
        return datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")
    except (TypeError, OverflowError, ValueError, OSError):
        return None  # no window (None), or a start before any date


def record_at_or_after(record, since):
    if since is None:
        return True
    epoch = journal_epoch(record.get("ts"))
    return epoch is not None and epoch >= since


def main():
    module = GpuModule(
        argument_spec=dict(
            journal_path=dict(type="path"),
            since=dict(type="str"),
            records=dict(type="bool", default=False),
            max_records=dict(type="int", default=200),
            destructive_only=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    params = module.params
    if params["max_records"] < 1:
        module.fail_json(msg="max_records must be 1 or more, got %r" % params["max_records"])
    try:
        since = since_epoch(params["since"], time.time())
    except ValueError:
        module.fail_json(msg="since: %r is neither a duration (90m, 24h, 7d, 2w) nor an ISO 8601 time" % params["since"])
    path = params["journal_path"] or current_layout().journal_file
    try:
        records, coverage = read_window(path, since)
        error = None
    except (IOError, OSError) as exc:
        records, error = [], "cannot read the journal %s: %s" % (path, exc)
        coverage = {"complete": False, "from": None, "reason": error, "files": [], "bytes": 0}
    coverage["since"] = _iso(since)
    result = dict(changed=False, journal=path, exists=os.path.exists(path), error=error, complete=coverage["complete"],
                  coverage=coverage, sources=leak_sources(records, since=since), runs=run_summaries(records, since=since))
    if params["records"]:
        wanted = DESTRUCTIVE_ACTIONS if params["destructive_only"] else None
        result["records"] = [record for record in records if record_at_or_after(record, since)
                             and (wanted is None or record.get("action") in wanted)][-params["max_records"]:]
    module.exit_json(**result)


if __name__ == "__main__":
    main()
