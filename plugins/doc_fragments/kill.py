# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How every module that ends processes ends them: the options of the one kill path (module_utils/kill/_kill.py)."""

from __future__ import annotations


class ModuleDocFragment:

    # How every module that ends processes ends them (module_utils._argument_specs.KILL_ARGUMENT_SPEC): one policy, one path.
    DOCUMENTATION = r"""
options:
  signals:
    description:
      - The signals to send in turn, waiting O(grace) seconds after each for the process to exit.
      - Each process gets the sequence as its kernel signal state says it can act on it (C(/proc/<pid>/status) State,
        SigBlk, SigIgn, SigCgt, TracerPid, NSpid); check mode reports that plan per process (C(expected),
        C(kill_follows), C(why)) and the run carries it out. A signal the process ignores, one the init of its own PID
        namespace has no handler for, and any signal but KILL to a process stopped by its tracer (state t) is not sent
        and not waited for (listed in C(not_sent)), and the next one follows at once. A blocked signal is sent and waited
        for (it acts if the process unblocks it). A stopped process (state T) gets SIGCONT right after the signal, as
        systemd does, so that it acts on it (its handler runs).
      - Uninterruptible sleep (D) is no reason to leave a process alone, since SIGKILL ends most of it (a vfork parent, a
        killable wait). A process still there when the O(grace) after KILL runs out is recorded in the journal as having
        outlived SIGKILL; only that makes it C(unkillable), the evidence for a heavier rung.
    type: list
    elements: str
    default: [TERM, KILL]
  grace:
    description:
      - Seconds to wait after each signal for the process to exit; must be more than 0 (a process needs time to
        exit after TERM, and check mode could not predict a run that never waits). To end processes at once, set
        O(signals=[KILL]).
    type: float
    default: 10.0
  kill_grace:
    description:
      - Seconds to wait after SIGKILL for the process to be gone, at least O(grace). SIGKILL is not the end of a process
        holding a GPU - the driver tears its CUDA context down in the kernel, in uninterruptible sleep (state D), which
        can take tens of seconds - so only a process still there after this wait is journaled as having outlived
        SIGKILL (C(outlived_kill), what makes the verdict call it V(unkillable)). The wait ends as soon as the process is
        gone; it is never longer than this. Must be more than 0.
    type: float
    default: 30.0
  containers:
    description:
      - What to do with a holder inside a container (one other than the container this module runs in). V(stop)
        stops the container through its runtime (C(docker stop), C(podman stop), C(crictl stop) for containerd and
        CRI-O), V(kill) signals the process like any other, V(skip) leaves it and reports it.
      - A holder is inside a container only when its runtime confirms it (C(docker|podman container inspect),
        C(crictl inspect)), which needs that the container runs, its own cgroup (that of the main process the runtime names) names it and
        lies in no user's delegated subtree (C(user@UID.service)), and the holder's cgroup is that one or below it. A
        cgroup path that only names a container (anyone can create C(docker-<id>.scope) in their own subtree) is a plain
        process, ended as one by pid and start time whatever O(containers) says, and reported in C(unconfirmed_containers).
      - After a stop every holder of the container is checked again by pid and start time. Only those gone count as
        ended, and one that still runs fails the run, named with its container.
      - The kubelet starts a stopped pod container again; drain or cordon the node first (the C(gpu_reclaim) role does
        with C(gpu_reclaim_drain=kubernetes)). Containers that nerdctl started live outside the CRI namespace that
        crictl sees, so crictl does not confirm them and their processes are plain processes.
    type: str
    choices: [stop, kill, skip]
    default: stop
  protect_names:
    description:
      - Process names never to signal (the kernel's command name, or the base name of argv[0]).
      - An empty name fails the module, naming it.
    type: list
    elements: str
    default: []
  protect_users:
    description:
      - Users whose processes are never signalled, as user names (looked up in the node's user database) or numeric uids.
      - A group is written C(@name) or C(@gid) (looked up in the node's group database); it protects every process whose
        real, effective or supplementary groups hold it, and the processes of its member users.
      - An entry that names no user or group on the node fails the module before anything is signalled, naming it.
    type: list
    elements: str
    default: []
  protect_units:
    description:
      - systemd units whose processes are never signalled, as the init system says (the unit's main process and its
        control group).
      - A unit systemd does not know, a pattern (C(*), C(?), C([)), or any entry on a node without systemctl, fails the
        module, naming it.
    type: list
    elements: str
    default: []
  end_running_jobs:
    description:
      - End the processes of live scheduler jobs. A process is a running job's when Slurm lists it in a job step on
        this node (C(scontrol listpids)) whose state is live (C(squeue)), or when its pod runs (C(crictl pods --state
        ready)), or when its container's runtime confirms the container runs with its main process alive and the process
        is one of its (C(docker|podman container inspect), C(crictl inspect)). A cgroup path naming a job is only a
        hint, and one that Slurm does not list is a leftover, ended as before, as is a holder of a container that has
        stopped or whose main process is gone. When Slurm cannot answer, a process whose cgroup names a job is treated
        as running; a container runtime that cannot be asked confirms no container, and its holder is a plain process.
      - The same option ends working programs, on every node, with or without a scheduler - a process that no kernel
        or runtime fact shows left behind (its process group or session leader runs, it leads its own session, its
        unit or login session is active), class V(busy) in
        RV(gpuops.remediation.gpu_holders_info#module:holders[].standing).
      - By default such a process is left alone with the reason (C(busy - ...)), unless the operator selects it
        (M(gpuops.remediation.gpu_kill) given its pid in O(gpuops.remediation.gpu_kill#module:holders), or names or
        users that match it). A running container's holder is not stopped either (with O(containers=stop)), and the
        container is left running.
    type: bool
    default: false
  allow_display:
    description:
      - Allow signalling display servers, the processes of the display manager unit (C(display-manager.service)) as the
        init system says (its main process, its control group, what its main process started); never a process
        name.
      - With M(gpuops.remediation.nvidia_driver_reload), also allow stopping C(display-manager.service), which ends the
        display server and logs its users' sessions off; without it the reload refuses while the display manager runs.
    type: bool
    default: false
  allow_daemons:
    description:
      - Allow signalling GPU daemons, the processes of the GPU units (nvidia-persistenced, nvidia-fabricmanager, DCGM,
        dcgm-exporter) as the init system says (the unit's main process or its control group); never a process name.
    type: bool
    default: false
  reap_zombies:
    description: Send SIGCHLD to the parent of a zombie holder so that it reaps it.
    type: bool
    default: true
  allow_parent_termination:
    description: When SIGCHLD does not get a zombie reaped, end its parent (with O(signals)) so that init reaps it.
    type: bool
    default: false
  thaw_frozen:
    description:
      - Thaw the frozen cgroup (v1 freezer C(freezer.state) FROZEN, cgroup v2 C(cgroup.freeze) 1, on the process's own
        cgroup or an ancestor) of a process to end, before signalling it. A frozen task acts on no signal until it is
        thawed (under the v1 freezer not even on SIGKILL), and its handler cannot run.
      - Without it, a run that would signal a process of a frozen cgroup refuses before acting, naming the cgroup and
        this option. Thawing lets every task of that cgroup run again.
    type: bool
    default: false
"""
