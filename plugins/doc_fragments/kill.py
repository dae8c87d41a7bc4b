# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:

    # How every module that ends processes ends them (module_utils._kill.KILL_ARGUMENT_SPEC): one policy, one path.
    DOCUMENTATION = r"""
options:
  signals:
    description: The signals to send in turn, waiting O(grace) seconds after each for the process to exit.
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
        crictl sees; their stop fails and is reported as failed.
    type: str
    choices: [stop, kill, skip]
    default: stop
  protect_names:
    description: Process names never to signal.
    type: list
    elements: str
    default: []
  protect_users:
    description: Users (names or uids) whose processes are never signalled.
    type: list
    elements: str
    default: []
  protect_units:
    description: systemd units whose processes are never signalled.
    type: list
    elements: str
    default: []
  allow_display:
    description: Allow signalling display servers and desktop sessions (Xorg, gdm, gnome-shell, ...).
    type: bool
    default: false
  allow_daemons:
    description: Allow signalling GPU daemons (nvidia-persistenced, nv-fabricmanager, nv-hostengine).
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
"""
