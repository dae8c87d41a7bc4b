#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_breaker: the fleet-wide circuit breaker across runs, before a destructive rung. Its documentation only: the
action plugin of the same name does the work.
"""

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_breaker
short_description: Helper of the gpu_remediate role - the fleet-wide circuit breaker across runs, before a destructive rung
version_added: 1.0.0
description:
  - A helper of role C(gpuops.remediation.gpu_remediate), which calls it before a destructive rung and sets its
    options from the C(gpu_remediate_breaker_*) variables. Operators set those variables; the module is not
    meant to be called alone.
  - Counts the nodes of the fleet already out, from state that outlives a job - the breaker records of O(state_dir)
    within O(window_minutes) (one per host that passed the breaker for a destructive rung), the Slurm nodes drained with
    our reason (O(slurm_nodes)), the Kubernetes nodes carrying our cordon annotation (O(kubernetes_nodes)), and the
    fleet hosts whose own journals show a destructive action started within O(window_minutes) (O(journals)) - and
    refuses a destructive rung on O(host) when it would make more than O(max_percent) of O(fleet_size), or more than
    O(max_count), naming the nodes already out.
  - Counts a host as the walk and the fleet guard do - by the rung its walk would start with under the run's options,
    never by the node-wide verdict - only when that rung is one of O(destructive_rungs), or would end running programs
    (O(end_running_jobs)), and the walk would not refuse it anyway (a reboot without O(allow_reboot), or a reset of a GPU
    that working programs share without O(end_running_jobs), is refused by the walk, and takes no place).
  - Decides and records under one lock on the controller, so that two runs at once never both take the last place.
    Check mode decides the same and creates nothing (no directory, lock or record).
  - With O(state=released), removes the host's record when its O(snapshot) finds it healthy (no GPU memory held, no
    reboot asked for), so that it no longer counts as out. Only the host's own later run sees that; right after its walk
    it still counts for O(window_minutes), so that a storm of resets, each fixed at once, is still counted as one.
  - O(state_dir) must be a directory of the controller's user, not writable by others (sticky or not), reached without
    a link; it is made with mode 0700 when missing. Anything else is refused with a message naming the option, since
    anyone who can write the records can open or close the breaker.
  - Role gpuops.remediation.gpu_remediate runs it when C(gpu_remediate_breaker_max_percent) or
    C(gpu_remediate_breaker_max_count) is set. See the collection's docs/eda.md.
author:
  - gpuops maintainers (@gpuops)
options:
  state:
    description:
      - V(decided) decides (and records) for a host about to take a destructive rung; V(released) removes the host's
        record when its O(snapshot) finds it healthy.
    type: str
    choices: [decided, released]
    default: decided
  host:
    description: The host about to take a destructive rung, or whose record is released.
    type: str
    required: true
  node_name:
    description:
      - The host's node name in Slurm or Kubernetes (C(gpu_reclaim_drain_node_name)); unset, the host's name up to its
        first dot, as that variable's default. A drain of this node is the host's own (not counted against it), and the
        host's record is kept under it, so that a host both recorded and drained is one node out, not two.
    type: str
  fleet_size:
    description: The number of nodes in the fleet the share is of. Required with O(state=decided).
    type: int
  max_percent:
    description: The largest share (0..100) of the fleet that may be out at once; V(0) sets no share. One node is always allowed.
    type: int
    default: 0
  max_count:
    description: The most nodes that may be out at once; V(0) sets no count. Both set, the lower wins.
    type: int
    default: 0
  window_minutes:
    description: How long a breaker record counts.
    type: int
    default: 60
  state_dir:
    description:
      - The directory of the breaker records on the controller; every run that shares the breaker must use the same.
      - Its user's own (made with mode 0700 when missing); another user's, one others may write into (sticky or not),
        or one reached through a symbolic link is refused, and so is a record that is not this user's (docs/safety.md).
        The default is in the home directory of the user the controller runs as.
    type: path
    default: ~/.gpuops/breaker
  lock_timeout:
    description:
      - Seconds to wait for the lock (C(.lock) in O(state_dir)) that makes one decision at a time; past it the task
        fails naming the process that holds it.
    type: float
    default: 60.0
  run_id:
    description: The run, written into the record.
    type: str
    default: ""
  snapshot:
    description: The host's snapshot (M(gpuops.remediation.gpu_holders_info)'s result).
    type: dict
    required: true
  platform:
    description: The host's ladder.
    type: str
    choices: [linux, windows]
    default: linux
  max_rung:
    description:
      - The walk's heaviest rung on a Linux host; unset, gpu_reclaim's default (V(reload)).
      - A Windows host reads O(windows.max_rung) instead.
    type: str
  allow_reboot:
    description: Whether the walk may reboot.
    type: bool
    default: false
  end_running_jobs:
    description:
      - Whether the walk may end running programs (C(gpu_reclaim_end_running_jobs)); a rung that would end them is
        destructive, and counted, whatever the rung.
    type: bool
    default: false
  destructive_rungs:
    description:
      - The rungs the breaker counts on a Linux host; unset, the walk's destructive rungs of Linux.
      - A Windows host reads O(windows.destructive_rungs) instead.
    type: list
    elements: str
  windows:
    description: What a Windows host (O(platform=windows)) reads instead of O(max_rung) and O(destructive_rungs).
    type: dict
    suboptions:
      max_rung:
        description: The walk's heaviest rung on Windows; unset, gpu_reclaim's default (V(restart_adapter)).
        type: str
      destructive_rungs:
        description: The rungs the breaker counts on Windows; unset, the walk's destructive rungs of Windows.
        type: list
        elements: str
  slurm_nodes:
    description:
      - The output of C(scontrol --oneliner show node) over the cluster (each reason whole, every state flag); unset
        reads no Slurm state. A node counts only when drained and its whole reason is one our drains write.
    type: str
  slurm_reasons:
    description:
      - For each node of O(slurm_nodes) that C(scontrol) shows drained with exactly our reason (filter
        C(gpuops.remediation.breaker_slurm_to_confirm)), the stdout of C(sinfo --all --noheader --Node --nodes NODE --format %E),
        whole (its trailing newline kept). A node whose reason C(sinfo) shows otherwise (an administrator's reason with an
        empty line, or with a C([user@time]) stamp of its own) does not count. A node left out is counted on C(scontrol)'s reading.
    type: dict
  kubernetes_nodes:
    description: The Node resources of C(kubernetes.core.k8s_info); unset reads no Kubernetes state.
    type: list
    elements: dict
  journals:
    description:
      - The results of M(gpuops.remediation.gpu_journal_info) (O(gpuops.remediation.gpu_journal_info#module:records=true))
        run on each fleet host, as a loop with C(delegate_to) registers them (C(item) the host's inventory name). Unset
        reads no journal.
      - A host counts as out, under its name up to the first dot, when its journal shows a destructive action (C(gpu_reset),
        a driver reload's C(module_unload) or C(module_load), a graphics restart's C(systemctl_isolate) to
        C(multi-user.target), a C(reboot)) that started within O(window_minutes) and did not fail (ok, or its outcome
        unknown - no outcome line, or an interrupted run). A signal, a container stop or a unit stopped does not count.
      - A host unreachable, whose read failed or whose journal could not be read is counted neither out nor healthy - the
        refusal names it, and an allowed run warns (RV(unread)). O(host)'s own journal counts nothing against it.
    type: list
    elements: dict
  kubernetes_annotation:
    description: Our cordon annotation.
    type: str
    default: gpuops.io/cordoned-by
  drain_reason:
    description: The reason our Slurm drains start with, and our cordon annotation's value.
    type: str
    default: "gpuops: reclaiming stuck GPU memory"
extends_documentation_fragment:
  - gpuops.remediation.attributes
  - gpuops.remediation.attributes.CONTROLLER_ACTION
  - gpuops.remediation.attributes.CONTROLLER_ONLY
attributes:
  bypass_host_loop:
    details:
      - It runs per host like any task.
  check_mode:
    details:
      - Decides the same way and creates nothing (no directory, lock or record); with O(state=released), says whether
        it would remove the record, and removes nothing.
seealso:
  - module: gpuops.remediation.gpu_ladder
"""

EXAMPLES = r"""
- name: Apply the circuit breaker
  gpuops.remediation.gpu_breaker:
    host: "{{ inventory_hostname }}"
    fleet_size: "{{ groups['gpu_nodes'] | length }}"
    max_percent: 20
    state_dir: /var/lib/gpuops/breaker
    snapshot: "{{ gpu_inspect_snapshot }}"
    max_rung: reset
    destructive_rungs: [reset, reload, graphics, reboot]
  register: breaker

- name: Give the host's place back when it is found healthy
  gpuops.remediation.gpu_breaker:
    state: released
    host: "{{ inventory_hostname }}"
    state_dir: /var/lib/gpuops/breaker
    snapshot: "{{ gpu_inspect_snapshot }}"
"""

RETURN = r"""
breaker_on:
  description: Whether the circuit breaker is on (O(max_percent) or O(max_count) above 0); off, it counts and refuses nothing.
  returned: with O(state=decided)
  type: bool
refuses:
  description: Whether the breaker refuses this host's destructive rung (RV(refusal) then says why); the roles read this.
  returned: with O(state=decided)
  type: bool
refusal:
  description: Why the destructive rung is refused (naming the nodes out), or empty.
  returned: with O(state=decided)
  type: str
out:
  description: The nodes counted as out, each with why (breaker record, Slurm drain, Kubernetes cordon, journal action).
  returned: with O(state=decided)
  type: dict
limit:
  description: How many nodes may be out at once, this one included; null when no limit is set.
  returned: with O(state=decided)
  type: int
rung:
  description: The destructive rung counted for this host, or null when the breaker does not count it.
  returned: with O(state=decided)
  type: str
recorded:
  description: Whether this host's record was written (it passed, for a destructive rung, not in check mode).
  returned: with O(state=decided)
  type: bool
unread:
  description: The fleet hosts of O(journals) whose journals could not be read, each with why; counted neither out nor healthy.
  returned: with O(state=decided)
  type: dict
released:
  description: Whether the host's record was removed (in check mode, would be).
  returned: with O(state=released)
  type: bool
"""
