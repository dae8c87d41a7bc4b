#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_input_check: check every input of a playbook once, on the controller, before any node is touched. Its
documentation only: the action plugin of the same name does the work.
"""

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_input_check
short_description: Helper of the playbooks and roles - checks every input once, on the controller, before any node is touched
version_added: 1.0.0
description:
  - A helper of the collection's playbooks (C(reset_gpu.yml), C(gpu_watch.yml)) and of role
    C(gpuops.remediation.gpu_watch), which call it first. A playbook of a site's own that includes the roles may
    call it alone, once, as its first task (see EXAMPLES), to fail early naming the wrong variables.
  - Reads the variables that the roles named in O(roles) declare in their C(meta/argument_specs.yml), and the playbooks'
    own (C(gpuops_hosts), C(gpuops_serial), C(gpuops_max_fail_percentage), C(gpuops_dry_run), C(gpuops_environment),
    C(gpuops_event_host)),
    takes those that are set for the host (inventory, play, C(-e), an AWX survey), and checks each.
  - Accepts what operators send - yes/no options as booleans or as the strings C(-e) and AWX surveys give (V(true),
    V(false), V(yes), V(no), V(on), V(off), V(1), V(0)), numbers as strings. Lists and mappings must be lists and
    mappings (C(-e '{"gpu_reclaim_protect_names":["a"]}')), since a string is never split into one.
  - Checks the values the types let through but a run cannot use - percentages (0..100), C(gpuops_serial) (N >= 1 or
    1%..100%), C(gpu_reclaim_windows_journal_path) (an absolute Windows path of a file, checked as the Windows modules
    check it), the choices of every option.
  - Fails naming every wrong variable, its value and what it must be (C(invalid input - NAME=VALUE (what it must be))),
    and nothing else; changes nothing.
  - A run started by an event (C(gpuops_event_host), the one host the event names, passed by the collection's
    rulebooks) must target exactly that inventory host; a name the inventory knows as a group (or as a host and a group
    alike), a name it does not know, or a play that targets more hosts fails the run before any node is touched.
author:
  - gpuops maintainers (@gpuops)
options:
  roles:
    description: The collection's roles whose variables the playbook passes on.
    type: list
    elements: str
    required: true
  entry_point:
    description: The entry point of the roles' argument specs (a role without it is read at V(main)).
    type: str
    default: main
extends_documentation_fragment:
  - gpuops.remediation.attributes
  - gpuops.remediation.attributes.CONTROLLER_ACTION
  - gpuops.remediation.attributes.CONTROLLER_ONLY
attributes:
  bypass_host_loop:
    details:
      - It runs per host like any task; give it C(run_once) to check the inputs once.
  check_mode:
    details:
      - It only reads; check mode is the same run.
seealso:
  - module: gpuops.remediation.gpu_ladder
"""

EXAMPLES = r"""
- name: Check the roles' inputs before touching any node
  gpuops.remediation.gpu_input_check:
    roles: [gpu_inspect, gpu_reclaim, gpu_remediate]
  run_once: true
"""

RETURN = r"""
checked:
  description: The variables that were set, and so checked.
  returned: always
  type: list
  elements: str
  sample: [gpu_reclaim_max_rung, gpuops_serial]
input_errors:
  description: One line per wrong variable, naming it, its value and what it must be; empty when all are right.
  returned: always
  type: list
  elements: str
  sample: ["gpuops_serial=0 (hosts per batch: N >= 1, or a percentage 1%..100%)"]
roles:
  description: The roles whose variables were checked (O(roles)), when all are right.
  returned: success
  type: list
  elements: str
  sample: [gpu_inspect, gpu_reclaim, gpu_remediate]
rolespec_validate:
  description:
    - For each role of RV(roles), what an C(include_role) of it passes as C(rolespec_validate) - V(false), its variables
      are checked already. The collection's playbooks register the result as C(__gpuops_input_check), so that the
      per-host argument spec validation does not check the same variables again on every host; a role included
      without it (C(default(true))) validates them.
  returned: success
  type: dict
  sample: {"gpu_inspect": false, "gpu_reclaim": false, "gpu_remediate": false}
"""
