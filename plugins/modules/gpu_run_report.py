#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_run_report: write the GPU memory report of a run on the controller, as JSON, Markdown and HTML. Its
documentation only: the action plugin of the same name does the work.
"""

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_run_report
short_description: Helper of the gpu_remediate role - writes the run's GPU memory report on the controller, as JSON, Markdown and HTML
version_added: 1.0.0
description:
  - A helper of role C(gpuops.remediation.gpu_remediate), which calls it once per batch. A play of a site's own may
    call it alone, once per play (with C(run_once)), after its hosts ran role C(gpuops.remediation.gpu_reclaim) or
    C(gpuops.remediation.gpu_inspect).
  - Builds the report of a run from the variables that the hosts of the play left, and writes it on the controller.
  - A host that walked the ladder left C(gpu_reclaim_outcome) (role gpuops.remediation.gpu_reclaim); a host that was
    only inspected, C(gpu_inspect_snapshot) (module M(gpuops.remediation.gpu_holders_info)) and, optionally,
    C(gpu_inspect_summary); a host with neither is reported as V(not_reached). A host that the fleet guard refused
    (role gpuops.remediation.gpu_remediate) left C(gpu_remediate_guard_refusal), the reason, and is reported as V(refused).
  - Writes C(<run id>.json), C(<run id>.md), C(<run id>.html), C(latest.json), C(latest.md) and C(latest.html) under
    O(dest); each file is replaced whole, so a reader never sees half a report. The plan of a V(reset_gpu) run in check
    mode goes to C(latest-plan.json), C(latest-plan.md) and C(latest-plan.html) instead, leaving the report of the last
    real run in C(latest.*).
  - The HTML file is one self-contained page (inline CSS, no script, nothing fetched) built from the JSON report alone,
    with a bar per GPU that splits its memory into attributed, ghost, reserved and free, the holders, the rungs taken,
    the memory recovered and the time taken; every string from a node is HTML-escaped. See the collection's docs/report.md.
  - Runs on the controller only, once, whatever host it is given; use it with C(run_once).
author:
  - gpuops maintainers (@gpuops)
options:
  hosts:
    description:
      - The hosts of the report, in this order.
      - Left out or null, every host of the play (C(ansible_play_hosts_all)); an empty list selects none.
    type: list
    elements: str
  kind:
    description: V(reset_gpu) for a run that walked the ladder (the summary adds the memory that came back), V(gpu_report) for a read-only report.
    type: str
    choices: [gpu_report, reset_gpu]
    default: gpu_report
  run_id:
    description: The run's identifier, the name of the report files; empty makes C(<kind>-<UTC time>).
    type: str
    default: ""
  dest:
    description: Directory on the controller for the report files, created (mode C(0750)) when missing. Required with O(write=true).
    type: path
  write:
    description: Write the files; with V(false) the report is only returned.
    type: bool
    default: true
  destructive_hosts:
    description: The hosts that the fleet guard counted as needing a destructive rung, recorded in the report.
    type: list
    elements: str
    default: []
  protect_names:
    description:
      - The run's protected process names (the role passes C(gpu_reclaim_protect_names)). An entry that no GPU holder of any
        host of the run goes by protected nobody; the report says so once, as a warning naming the closest holder name.
    type: list
    elements: str
    default: []
extends_documentation_fragment:
  - gpuops.remediation.attributes
  - gpuops.remediation.attributes.CONTROLLER_ACTION
  - gpuops.remediation.attributes.CONTROLLER_ONLY
attributes:
  bypass_host_loop:
    details:
      - It runs per host like any task; give it C(run_once) to write one report.
  check_mode:
    details:
      - The report is written in check mode too (it is the plan then); it changes nothing on the hosts, and the task never reports a change.
seealso:
  - module: gpuops.remediation.gpu_holders_info
"""

EXAMPLES = r"""
- name: Write the report of every host of the play
  gpuops.remediation.gpu_run_report:
    hosts: "{{ ansible_play_hosts_all }}"
    dest: "{{ lookup('ansible.builtin.env', 'HOME') }}/.gpuops/reports"
  run_once: true
"""

RETURN = r"""
report:
  description: The report, as written to the JSON file (layout in the collection's docs/ladder.md).
  returned: always
  type: dict
  contains:
    run_id:
      description: The run's identifier.
      type: str
      sample: gpu_report-20261129T213000Z
    kind:
      description: V(gpu_report) or V(reset_gpu).
      type: str
      sample: gpu_report
    hosts:
      description:
        - One line per host, in the order of O(hosts), with C(status) and what the host's variables told.
        - C(triage), the host's grade - C(group) (needs a human, held back, fixed, clean; "would be fixed" in a plan or a
          read-only report), C(outcome) (lost GPU, unkillable, refused, failed, busy, in use, above max rung, ...), C(why)
          and C(next), what would allow the next step.
      type: list
      elements: dict
    fleet:
      description:
        - The fleet's totals (C(hosts), C(by_status), C(count_by_status), C(fixed_by), C(memory_freed_mib), C(gpus), C(ghost_mib),
          C(seconds_longest), C(destructive_hosts), C(triage), C(warnings), C(totals), C(summary)).
        - C(triage) lists the groups that have hosts, what needs a human first, each with its hosts' C(host), C(outcome),
          C(why) and C(next).
        - Every GPU of a host has C(bars), its memory split in MiB (C(when), C(total_mib), C(attributed_mib), C(ghost_mib),
          C(in_use_mib), C(reserved_mib), C(free_mib); null when unknown).
      type: dict
paths:
  description: The files written, empty with O(write=false).
  returned: always
  type: list
  elements: str
  sample: [/root/.gpuops/reports/gpu_report-20261129T213000Z.json, /root/.gpuops/reports/gpu_report-20261129T213000Z.md,
           /root/.gpuops/reports/gpu_report-20261129T213000Z.html]
summary:
  description: The fleet's summary - what needs a human first, each group with a line per host (why, and what would allow
    the next step), the warnings, then a line per rung that fixed hosts and the memory back.
  returned: always
  type: list
  elements: str
  sample: ["gpu_report: 2 hosts", "  would be fixed (1 host):", "    node01: would be fixed by reset - the ladder would take the reset rung: ...",
           "  clean (1 host):", "    node02: clean - no GPU memory held"]
lines:
  description: What the run shows at its end - RV(summary), then a line naming the report's Markdown and HTML files, or
    saying that it was not written (O(write=false)).
  returned: always
  type: list
  elements: str
  sample: ["gpu_report: 2 hosts", "  clean (2 hosts):", "    node01: clean - no GPU memory held", "    node02: clean - no GPU memory held",
           "report: /root/.gpuops/reports/gpu_report-20261129T213000Z.md, /root/.gpuops/reports/gpu_report-20261129T213000Z.html"]
"""
