# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Left behind or busy: whether a live GPU holder is what a crash left, or a working program, from kernel and runtime
facts only (never a name).

Left behind: a thread group whose leader exited; a process whose process group leader exited while it lives on
(DataLoader and multiprocessing workers of a script that died), unless its parent, of its session, terminal and
another group, runs and is busy (a shell's job whose first command led the group and ended); a process whose parent exited, so that it was
re-parented to init or a subreaper that did not start it (its session is not its new parent's); a process whose session
leader exited; a process of a scheduler job or container that no longer runs (_jobs), of a systemd unit that is
inactive or failed, or of a login session that logind says is closing or gone. Everything else is busy: the fact that
makes it so is named ("its process group leader 4412 (python) runs"). A zombie is left behind too, through its
parent: the snapshot classes it before this is asked.

Identity, not pid: a leader is the live process whose pid is the group's (or session's) id, wherever it is now (a
leader that moved to another group with setpgid has not exited); the kernel never reuses a pid that is still a group's
or a session's id. A daemon that
double-forked on purpose is its own session leader (it started itself), or the main process of a systemd unit that
runs (active, activating, reloading, deactivating), and what it started is that unit's: busy, whoever its parent is now.
So is what a command of a running unit's current start put in the background (an ExecStartPre=, ExecStart=,
ExecStartPost= or ExecReload= line; a oneshot unit that RemainAfterExit keeps active, one whose later lines still run):
systemd opens a session for each command it runs, so the program's session id is that command's pid, which `systemctl show` lists (it
forgets them when the unit starts again). What an earlier start left (another session), what a start that failed left
(the unit failed, or waits to restart), and what an inactive unit left stay leftovers.
"""

from __future__ import annotations

from ansible_collections.gpuops.remediation.plugins.module_utils._command import CommandRunner
from ansible_collections.gpuops.remediation.plugins.module_utils.kill._container_runtime import namespace_init
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._process import ancestors, process_stat
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._unit_members import systemd_cgroup

BUSY = "busy"
LEFT_BEHIND = "left_behind"
# systemd unit states in which the unit no longer runs: a process left in its cgroup is a leftover.
ENDED_UNIT_STATES = ("inactive", "failed")
# systemd unit states in which the unit's processes run (starting, reloading or being stopped by the init system): its
# main process and what that process started are the unit's, not leftovers.
RUNNING_UNIT_STATES = ("active", "activating", "reloading", "refreshing", "deactivating")
# systemd service sub-states of a unit whose run ended and that waits to start again (Restart=): what is left in its
# control group is a leftover of the run that ended (ActiveState says "activating" then).
ENDED_SUB_STATES = ("auto-restart", "auto-restart-queued")
# The commands of a unit's start, as `systemctl show` names them, and how a reason names each: what one of them put in
# the background runs in the session systemd opened for it (its id is the command's pid).
# ExecReload= too: systemd forgets every command's pid when the unit starts again, so a reload's is of the current run.
START_COMMANDS = (("ExecStartPre", "ExecStartPre= command"), ("ExecStart", "start command"),
                  ("ExecStartPost", "ExecStartPost= command"), ("ExecReload", "ExecReload= command"))
# logind session states in which the session is ending: a process left in it outlived the login.
ENDED_SESSION_STATES = ("closing",)


def _what(stat):
    return "%d (%s)" % (stat["pid"], stat["name"])


def _leader(leader_pid, proc_root):
    """The stat of the live process that led a group or session of that id, or None when it exited (gone, or a zombie).
    The process with that pid is it, whatever its start time and wherever it is now: the kernel never gives a pid that
    is still a group's or a session's id to another process, a holder may join the group of a later process, and a
    leader that moved to another group of its session (setpgid) has not exited: its workers are not left behind."""
    leader = process_stat(leader_pid, proc_root)
    if leader is None or leader["state"] in ("Z", "X"):
        return None
    return leader


def _process_facts(stat, proc_root, depth=0):
    """(LEFT_BEHIND or BUSY, why) from the holder's process group, session and parent (/proc/<pid>/stat)."""
    pid, pgid, sid = stat["pid"], stat["pgid"], stat["sid"]
    if sid == pid:
        return BUSY, "it leads its own session (it started itself, as a service or a daemon does)"
    group_leader = _leader(pgid, proc_root) if pgid > 0 and pgid != pid else None
    if pgid > 0 and pgid != pid and group_leader is None:
        kept = _kept_by_parent(stat, proc_root, depth)
        if kept:
            return BUSY, "its process group leader %d has exited, but %s" % (pgid, kept)
        return LEFT_BEHIND, "its process group leader %d has exited while it lives on" % pgid
    if sid > 0 and _leader(sid, proc_root) is None:
        return LEFT_BEHIND, "its session leader %d has exited while it lives on" % sid
    parent = process_stat(stat["ppid"], proc_root) if stat["ppid"] > 0 else None
    # Not a session leader, it inherited its session from the parent that started it: a parent of another session
    # (init, a subreaper) is one it was re-parented to when that parent exited.
    if parent is not None and parent["sid"] != sid:
        return LEFT_BEHIND, "its parent exited: it was re-parented to %s, which did not start it" % _what(parent)
    if group_leader is not None:
        moved = ", in group %d now" % group_leader["pgid"] if group_leader["pgid"] != pgid else ""
        return BUSY, "its process group leader %s runs%s" % (_what(group_leader), moved)
    parent_text = _what(parent) if parent is not None else str(stat["ppid"])
    return BUSY, "it leads its own process group, started by %s, which runs" % parent_text


# How far up the parents _kept_by_parent looks (each step one /proc/<pid>/stat); no real job nests that deep.
PARENT_DEPTH = 32


def _kept_by_parent(stat, proc_root, depth):
    """Why a holder whose process group leader exited still belongs to a working program, or None.

    A shell's job is a process group led by its first command: in `cat cfg | serve` the leader (cat) exits at once while
    serve, the shell's own child, works on in the group. A shell makes a group of each job only under job control, on
    the terminal its session controls: the holder's parent is then alive, of its session, on its controlling terminal,
    in another group (the shell's), no reaper (init, or the init of a PID namespace: a container's), and busy itself. A
    worker whose parent died was re-parented instead: to init or a subreaper of another session (left behind), or to a
    parent in the dead leader's group, itself left behind. A subreaper of the same session and terminal that is no
    namespace's init cannot be told from the shell (the kernel keeps no record of who forked a process): such a holder
    is busy, and named with its parent."""
    if not stat["tty_nr"]:
        return None  # no controlling terminal: no job control put it in that group
    parent = process_stat(stat["ppid"], proc_root) if stat["ppid"] > 1 else None
    if parent is None or parent["state"] in ("Z", "X") or parent["sid"] != stat["sid"] or parent["pgid"] == stat["pgid"]:
        return None
    if parent["tty_nr"] != stat["tty_nr"]:
        return None
    if parent["start_time"] > stat["start_time"]:
        return None  # the parent exited since its pid was read, and the pid is another process's now
    if depth >= PARENT_DEPTH or namespace_init(parent["pid"], proc_root):
        return None
    standing, why = _process_facts(parent, proc_root, depth + 1)
    if standing != BUSY:
        return None
    return "its parent %s, of its session, runs and is busy (%s)" % (_what(parent), why)


def _unit_facts(stat, unit, unit_state, proc_root):
    state = unit_state(unit) if unit and unit_state else None
    if state is None:
        return None
    pid = stat["pid"]
    if state["active"] in ENDED_UNIT_STATES:
        return LEFT_BEHIND, "its systemd unit %s is %s (systemctl show): a leftover of it" % (unit, state["active"])
    if state["active"] not in RUNNING_UNIT_STATES:
        return None
    if state.get("sub") in ENDED_SUB_STATES:
        return LEFT_BEHIND, "its systemd unit %s is %s (%s, Result=%s): the run it was started by ended, and the unit " \
            "waits to start again: a leftover of that run" % (unit, state["active"], state["sub"], state.get("result") or "?")
    main_pid = state["main_pid"]
    command = _start_command_session(stat, state)
    if command:
        # A program a command of the unit's current start put in the background (a oneshot unit kept active by
        # RemainAfterExit, or whose later lines still run; an ExecStartPost= helper): systemd opened a session for that
        # command, so the session id is the command's pid. A program an earlier start of the unit left has another
        # session id (the kernel gives no pid that is still a session's id to a new process).
        return BUSY, "it runs in the session systemd unit %s's %s %d opened, and the unit is %s (%s)" % (
            unit, command[1], command[0], state["active"], state.get("sub") or "?")
    if main_pid <= 1:
        return None
    if main_pid == pid:
        # A forking service's daemon: re-parented to init by design, the init system runs it.
        return BUSY, "it is the main process of systemd unit %s, which is %s" % (unit, state["active"])
    if main_pid in ancestors(pid, proc_root):
        # A daemon that double-forked leads neither its group nor its session: what it starts is the unit's.
        return BUSY, "it was started by the main process %d of systemd unit %s, which is %s" % (main_pid, unit, state["active"])
    return None


def _start_command_session(stat, state):
    """(pid, how the reason names it) of the command of the unit's current start whose session the holder runs in, or
    None. Only a start that has not failed (Result success, where systemd printed it) vouches for what it started; the
    ExecMainPID counts only while the unit has no main process (a oneshot unit's last start line)."""
    if state.get("result") not in (None, "success"):
        return None
    sid = stat["sid"]
    if sid <= 1 or sid == stat["pid"]:
        return None
    if state["main_pid"] <= 1 and sid == (state.get("exec_main_pid") or 0):
        return sid, "start command"
    return state.get("commands", {}).get(sid)


def _session_facts(session, session_state):
    state = session_state(session) if session and session_state else None
    if state == "gone":
        return LEFT_BEHIND, "its login session %s is gone (logind lists no such session)" % session
    if state in ENDED_SESSION_STATES:
        return LEFT_BEHIND, "its login session %s is %s (logind): it outlived the login" % (session, state)
    return None


def holder_standing(pid, proc_root="/proc", job=None, unit=None, unit_state=None, session=None, session_state=None):
    """{"standing": LEFT_BEHIND or BUSY, "why"}: the one answer to "left behind or busy, and why" for a live holder.

    job: the holder's record from _jobs.JobProbe.job_of (None: no scheduler, container or pod has a word on it).
    unit / unit_state: the systemd unit of its cgroup and a callable giving parse_unit_state() of it (None: not known).
    session / session_state: the login session of its cgroup (session-N.scope) and a callable giving logind's State of
    it ("gone" when logind answered and lists none). None when the process is gone.
    """
    stat = process_stat(pid, proc_root)
    if stat is None:
        return None
    if stat["state"] == "Z":
        # Its leader's stat says Z while it lives on: a live thread group whose leader exited (read_process).
        return {"standing": LEFT_BEHIND, "why": "its thread group leader %d has exited while its threads live on" % pid}
    if job is not None:
        return {"standing": BUSY if job["running"] else LEFT_BEHIND, "why": job["why"]}
    for found in (_unit_facts(stat, unit, unit_state, proc_root), _session_facts(session, session_state)):
        if found:
            return {"standing": found[0], "why": found[1]}
    standing, why = _process_facts(stat, proc_root)
    return {"standing": standing, "why": why}


def session_of(unit):
    """The logind session id of a session-N.scope unit, or None."""
    if unit and unit.startswith("session-") and unit.endswith(".scope"):
        return unit[len("session-"):-len(".scope")] or None
    return None


def _pid_field(fields, name):
    value = fields.get(name) or "0"
    return int(value) if value.isdigit() and value.isascii() and len(value) < 12 else 0


def _command_pid(value):
    """The pid systemctl printed for one command (`{ path=... ; argv[]=... ; ... ; pid=812 ; code=exited ; status=0 }`),
    0 for one that has not run in the unit's current start. The last `; pid=` is systemctl's own: the command line,
    which its unit's author wrote, comes before it."""
    if not (value.startswith("{ ") and value.endswith(" }")) or " ; pid=" not in value:
        return 0
    return _pid_field({"pid": value.rsplit(" ; pid=", 1)[1].split(" ; ", 1)[0]}, "pid")


def parse_unit_state(out):
    """{"active": ActiveState, "main_pid", and "sub" (SubState), "result" (Result), "exec_main_pid" (ExecMainPID: the
    start command's pid, kept after it exited) and "commands" ({pid: how a reason names it} of the ExecStartPre=,
    ExecStart=, ExecStartPost= and ExecReload= commands of the unit's current start) where systemd printed them} from `systemctl show`
    of one unit (UNIT_PROPERTIES); None for a unit it does not know, or an answer that says one property twice (a unit
    whose command line carries a line break: not systemd's word alone)."""
    fields, commands = {}, {}
    labels = dict(START_COMMANDS)
    for line in out.splitlines():
        name, equals, value = line.partition("=")
        if not equals:
            continue
        if name in labels:
            pid = _command_pid(value)
            if pid > 1:
                commands[pid] = (pid, labels[name])
        elif name in fields:
            return None
        else:
            fields[name] = value
    if fields.get("LoadState") in (None, "", "not-found") or not fields.get("ActiveState"):
        return None
    state = {"active": fields["ActiveState"], "main_pid": _pid_field(fields, "MainPID")}
    for key, name in (("sub", "SubState"), ("result", "Result")):
        if fields.get(name):
            state[key] = fields[name]
    if "ExecMainPID" in fields:
        state["exec_main_pid"] = _pid_field(fields, "ExecMainPID")
    if commands:
        state["commands"] = commands
    return state


UNIT_PROPERTIES = "--property=LoadState,ActiveState,SubState,Result,MainPID,ExecMainPID," + ",".join(
    name for name, label in START_COMMANDS)


class StandingProbe:
    """The init system's and logind's word on the units and sessions of holders, asked once per unit or session.

    systemctl and loginctl: their paths on the node (the simulated node's own tools there), None where absent: then
    neither says anything, and the process facts decide."""

    def __init__(self, module, systemctl=None, loginctl=None):
        self.module = module
        self.systemctl = systemctl
        self.loginctl = loginctl
        self._units = {}
        self._sessions = None
        self._session_states = {}

    def unit_state(self, unit):
        if not self.systemctl or not unit:
            return None
        if unit not in self._units:
            rc, out, dummy = CommandRunner(self.module).probe([self.systemctl, "show", UNIT_PROPERTIES, "--", unit])
            self._units[unit] = parse_unit_state(out) if rc == 0 else None
        return self._units[unit]

    def session_state(self, session):
        """logind's State of the session, "gone" when logind answered and lists no such session, None when it did not
        answer. The list is asked again before a session is called gone: one that opened after the last listing (a login
        during this run) is not gone."""
        if not self.loginctl or not session:
            return None
        if session not in self._session_states:
            listed = self._listed_sessions(fresh=False)
            if listed is not None and session not in listed:
                listed = self._listed_sessions(fresh=True)
            if listed is None:
                return None
            self._session_states[session] = self._show_session(session) if session in listed else "gone"
        return self._session_states[session]

    def _listed_sessions(self, fresh):
        """The session ids logind lists (`loginctl list-sessions`), None when it does not answer."""
        if self._sessions is None or fresh:
            rc, out, dummy = CommandRunner(self.module).probe([self.loginctl, "list-sessions", "--no-legend", "--no-pager"])
            self._sessions = set(line.split()[0] for line in out.splitlines() if line.split()) if rc == 0 else False
        return self._sessions if self._sessions is not False else None

    def _show_session(self, session):
        rc, out, dummy = CommandRunner(self.module).probe([self.loginctl, "show-session", "--property=State", "--value", "--", session])
        return out.strip() if rc == 0 else None

    def standing(self, pid, job=None, unit=None, proc_root="/proc"):
        """holder_standing of pid with this probe's unit and session answers. A unit of a user's own service manager
        (below user@UID.service) is none of the system manager's: a system unit of the same name says nothing of it."""
        if unit and in_user_manager(pid, proc_root):
            unit = None
        return holder_standing(pid, proc_root, job=job, unit=unit, unit_state=self.unit_state,
                               session=session_of(unit), session_state=self.session_state)


def in_user_manager(pid, proc_root="/proc"):
    """Whether pid runs below a user's service manager (a user@UID.service in its systemd cgroup path)."""
    try:
        with open("%s/%d/cgroup" % (proc_root, pid), "rb") as handle:
            text = handle.read(65536).decode("utf-8", "replace")
    except OSError:
        return False
    path = systemd_cgroup(text) or ""
    return any(part.startswith("user@") and part.endswith(".service") for part in path.split("/"))


def probe_standing(module, layout):
    """The StandingProbe of the node: its systemctl and loginctl (a simulated node's own, where it has them)."""
    return StandingProbe(module, layout.command(module, "systemctl"), layout.command(module, "loginctl"))
