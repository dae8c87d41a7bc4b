# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Who may be signalled: the rules that always hold (PID 1, kernel threads, this Ansible run's own lineage, a
reused pid, another user's process without the capability; uninterruptible sleep is none of them), the policy's protected names,
users and units, display servers and GPU daemons, and the triage that applies them before _terminate sends
anything. Zombies met are reported with the parent that has to reap them.
"""

from __future__ import annotations

import copy
import os

from ansible_collections.gpuops.remediation.plugins.module_utils.probes import _cgroup
from ansible_collections.gpuops.remediation.plugins.module_utils.probes import _process
from ansible_collections.gpuops.remediation.plugins.module_utils._gpu_names import first_name_match, process_names
from ansible_collections.gpuops.remediation.plugins.module_utils.kill._left_behind import BUSY
from ansible_collections.gpuops.remediation.plugins.module_utils._verdict import BUSY_CLASS
from ansible_collections.gpuops.remediation.plugins.module_utils.kill._protect_entries import ProtectedUsers, primary_gid, process_gids
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._unit_members import (
    DAEMON, DISPLAY, read_text, by_text, member_of, systemd_cgroup)
from ansible_collections.gpuops.remediation.plugins.module_utils.kill._terminate import terminate


class Policy:
    """What may be signalled beyond the rules that always hold.

    members: UnitMembers of the GPU units (who is a GPU daemon or a display server, as the init system says; None:
    nobody is). unit_states: protect_units as `systemctl show` gave them (_services.unit_states). protect_users is
    resolved here through the node's user and group database: ProtectEntryError for an entry that names nobody.
    jobs: a _jobs.JobProbe (None: no scheduler is asked); standing: a _left_behind.StandingProbe (None: no process is
    told busy but a live job's). A busy process (a live job's, or a working program: _left_behind.holder_standing) is
    refused unless end_running_jobs, or the operator selected it (explicit: by pid, name, command line or user).
    compute_contexts: the (pid, start time) of the holders the snapshot classed as compute contexts (class compute or
    busy): what they run under, a graphical session included, does not make them a display server. graphics_contexts:
    {(pid, start time): GPU indexes} of the holders the driver lists with graphics contexts only (NVML or nvidia-smi type
    G, class graphics_session): a display server (or a part of the desktop it draws) even in no unit of the init
    system, as a hand-started Xorg or compositor (startx from a VT) is.
    """

    def __init__(self, protect_names=(), protect_users=(), protect_units=(), allow_display=False,
                 allow_daemons=False, allow_parents=False, members=None, unit_states=None, jobs=None,
                 end_running_jobs=False, standing=None, explicit=False):
        self.protect_names = tuple(protect_names or ())
        self.protect_users = ProtectedUsers(protect_users or ())
        self.protect_units = tuple(protect_units or ())
        self.allow_display = allow_display
        self.allow_daemons = allow_daemons
        self.allow_parents = allow_parents
        self.members = members
        self.unit_states = unit_states or {}
        self.jobs = jobs
        self.end_running_jobs = end_running_jobs
        self.standing = standing
        self.explicit = explicit
        self.compute_contexts = set()
        self.graphics_contexts = {}

    def know_contexts(self, holders):
        """Which snapshot holders are compute contexts and which hold graphics contexts only (a display server, in a
        unit or not). A compute context (class compute or busy) that draws too (type C+G, as an Xorg with a CUDA context
        is) is not taken out of the display manager's: a desktop is a destructive step, so a process the init system
        puts in the display manager's and that holds a graphics context stays its display server."""
        self.compute_contexts = set((h["pid"], h.get("start_time")) for h in holders
                                    if h["class"] in ("compute", BUSY_CLASS) and "G" not in (h.get("process_type") or "").split("+"))
        self.graphics_contexts = dict(((h["pid"], h.get("start_time")), h.get("gpus") or []) for h in holders
                                      if h["class"] == "graphics_session")

    def unselected(self):
        """This policy for a process the operator did not select (the parent of a zombie they selected): their
        selection is not its, so a busy one is ended only with end_running_jobs."""
        other = copy.copy(self)
        other.explicit = False
        return other


# --- who is this process --------------------------------------------------------------------------------

def _names(info):
    return process_names(info.get("name"), info.get("cmdline"))


def _protection(pid, info, policy, ending=True):
    """Why the policy protects this process, or None. Units, daemons and display servers as the init system says.
    ending False: only a signal that ends nothing is to be sent (SIGCHLD to a zombie's parent): a busy process may get it."""
    name = first_name_match(_names(info), policy.protect_names)
    if name:
        return "protected name: %s" % name
    uid = info.get("uid")
    why = policy.protect_users.why(uid, info.get("user"), process_gids(pid), primary_gid(uid) if policy.protect_users.groups else None)
    if why:
        return why
    if policy.protect_units:
        cgroup = systemd_cgroup(read_text("/proc/%d/cgroup" % pid))
        for wanted in policy.protect_units:
            state = policy.unit_states.get(wanted)
            by = member_of(pid, state, cgroup)
            if by:
                return "protected unit: %s (%s)" % (state.get("id") or wanted, by.replace("_", " "))
    role = _display_or_daemon(pid, info, policy)
    busy = _busy(pid, policy, role) if ending else None
    if busy:
        return "busy: %s (end_running_jobs to end it)" % busy
    if role and role["role"] == DISPLAY and not policy.allow_display:
        server = role["unit"] or "pid %d %s" % (pid, info.get("name") or "")
        return "display server: %s (%s; allow_display to end it)" % (server, by_text(role))
    if role and role["role"] == DAEMON and not policy.allow_daemons:
        return "GPU daemon: %s (%s; allow_daemons to end it)" % (role["unit"], by_text(role))
    return None


def _display_or_daemon(pid, info, policy):
    """{"role": DISPLAY or DAEMON, "unit", "by"} from facts, or None: the init system's word for its GPU units (a compute
    context is no display server, whatever session it runs in), else the driver's: a process whose only contexts are
    graphics contexts is a display server in no unit (unit None)."""
    identity = (pid, info.get("start_time"))
    role = policy.members.role(pid) if policy.members is not None else None
    if role and role["role"] == DISPLAY and identity in policy.compute_contexts:
        role = None  # a compute context: a graphical session it runs in makes it no display server
    if role is None and identity in policy.graphics_contexts:
        gpus = ",".join(str(index) for index in policy.graphics_contexts[identity])
        role = {"role": DISPLAY, "unit": None, "by": "graphics_context", "gpus": gpus}
    return role


def _busy(pid, policy, role):
    """Why pid is busy (a live job's process, or a working program), or None: also None when the operator said to end
    it (end_running_jobs, or an explicit selection). A GPU daemon or a display server has refusals of its own."""
    if policy.end_running_jobs or policy.explicit:
        return None
    attribution = _cgroup.attribution(pid)
    job = policy.jobs.job_of(pid, attribution) if policy.jobs is not None else None
    if job and job["running"]:
        return job["why"]
    if role is not None or policy.standing is None:
        return None
    standing = policy.standing.standing(pid, job=job, unit=attribution.get("systemd_unit"))
    return standing["why"] if standing and standing["standing"] == BUSY else None


def _own_lineage(self_pid):
    return set(_process.ancestors(self_pid) or ()) | {self_pid}


def refusal(target, policy, self_pid=None, ending=True):
    """None when target may be signalled, else why not. The checks run in the documented order. ending False: the
    signal ends nothing (SIGCHLD), and a busy process is not refused it."""
    self_pid = os.getpid() if self_pid is None else self_pid
    pid = target.pid
    if pid == 1:
        return "pid 1"
    if pid < 1:
        return "invalid pid %d" % pid
    if _process.is_kernel_thread(pid):
        return "kernel thread"
    info = _process.read_process(pid)
    if info is None:
        return "exited"
    if info.get("start_time") != target.start_time:
        return "pid reused: start time %s, expected %s" % (info.get("start_time"), target.start_time)
    if pid in _own_lineage(self_pid):
        return "ancestor of this Ansible run"
    permission = _permission(pid)
    if permission:
        return permission
    return _protection(pid, info, policy, ending)


def _permission(pid):
    """Why this run may not signal pid (another user's process, without the capability), or None; check mode and
    the real run refuse alike."""
    try:
        os.kill(pid, 0)
    except PermissionError:
        return "not permitted: this run (uid %d) may not signal it" % os.geteuid()
    except ProcessLookupError:
        return "exited"
    return None


# A parent that supervises others (a job step, a container's shim, a session, a service manager) has live children
# besides the zombie: ending it to get the zombie reaped would end or orphan them, so allow_parents never reaches it.
# What the kernel says of its children decides, not its name (any process can call itself slurmstepd).

def live_children(pid, proc_root="/proc"):
    """The pids of pid's children that are not zombies (/proc/<pid>/task/<tid>/children, every thread's)."""
    children = set()
    try:
        tids = os.listdir("%s/%d/task" % (proc_root, pid))
    except OSError:
        return []
    for tid in tids:
        try:
            with open("%s/%d/task/%s/children" % (proc_root, pid, tid)) as handle:
                children.update(int(child) for child in handle.read().split())
        except (OSError, ValueError):
            continue
    return sorted(child for child in children
                  if (_process.read_process(child, proc_root) or {}).get("state") not in (None, "Z", "X"))


def supervisor(parent):
    """Why the parent supervises others ("N other live processes: pids ..."), or None."""
    others = live_children(parent["pid"])
    if not others:
        return None
    return "%d other live process%s (pid %s)" % (len(others), "" if len(others) == 1 else "es", ", ".join(map(str, others[:5])))


# --- triage ---------------------------------------------------------------------------------------------

def parent_of(pid):
    """{"pid", "name", "start_time"} of pid's parent (name and start time None when unreadable), or None."""
    info = _process.read_process(pid)
    if info is None:
        return None
    parent = _process.read_process(info["ppid"]) if info.get("ppid") else None
    parent = parent or {}
    return {"pid": info.get("ppid"), "name": parent.get("name"), "start_time": parent.get("start_time")}


def zombie_entry(pid, start_time, name):
    return {"pid": pid, "start_time": start_time, "name": name, "parent": parent_of(pid)}


def triage(targets, policy, self_pid):
    """Split targets into (to signal: [(Target, name)], skipped, zombies), each pid once."""
    to_signal, skipped, zombies, seen = [], [], [], set()
    for target in targets:
        if target.pid in seen:
            continue
        seen.add(target.pid)
        reason = refusal(target, policy, self_pid)
        info = _process.read_process(target.pid) or {}
        if reason:
            skipped.append(target.skipped(reason, info.get("name") if info.get("start_time") == target.start_time else None))
        elif info.get("state") in ("Z", "X"):  # a real zombie: a leader-exited group has a live thread's state
            skipped.append(target.skipped("zombie: only its parent can reap it", info.get("name")))
            zombies.append(zombie_entry(target.pid, target.start_time, info.get("name")))
        else:
            to_signal.append((target, info.get("name")))
    return to_signal, skipped, zombies


def terminate_permitted(targets, policy, signals=("TERM", "KILL"), grace=10.0, journal=None, check_mode=False,
                        self_pid=None, kill_grace=None):
    """_terminate.terminate() for the targets the rules and the policy permit; the others are skipped, and the
    zombies among them, or left by them, are reported with their parent.

    Returns {"signalled": [{"pid", "start_time", "name", "signals", "exited", "seconds"}],
    "skipped": [{"pid", "start_time", "name", "reason"}], "zombies": [{"pid", "start_time", "name", "parent"}]}.
    """
    self_pid = os.getpid() if self_pid is None else self_pid
    permitted, skipped, zombies = triage(targets, policy, self_pid)
    outcome = terminate(permitted, signals, grace, journal, check_mode, kill_grace=kill_grace)
    zombies.extend(zombie_entry(zombie["pid"], zombie["start_time"], zombie["name"]) for zombie in outcome["zombies"])
    return {"signalled": outcome["signalled"], "skipped": skipped + outcome["skipped"], "zombies": zombies}
