# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Who may be ended on a Windows node: the one answer (as module_utils/kill/_protect.refusal is on Linux).

Every path that ends a Windows process asks `refusal` (the walk before it plans a rung, win_gpu_reset method=kill
called on its own, restart_explorer) and, for a tree (the terminate script's, or the terminate_held script's where
Add-Type is refused), `tree_refusal` over every process the tree would take. Names are matched as Windows matches them: any case, with or
without `.exe`; users with or without their domain (WS12\\ada is ada). The user's shell is the process whose image
path is Winlogon's Shell (_cim_processes.is_shell), never a process of that name. With protect_users set, a process whose owner is
not known is refused (fails closed), naming its pid and what would allow it.
"""

from __future__ import annotations

from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.tools._cim_processes import base_name, is_shell, role

# The host processes of the connection Ansible runs through: ending one cuts the run itself.
# OpenSSH for Windows 9.8 and later runs each connection in sshd-session.exe (sshd-auth.exe while it authenticates).
CONNECTION_NAMES = frozenset(("wsmprovhost", "winrshost", "sshd", "sshd-session", "sshd-auth"))


class Policy:
    """What the caller allows: protect_names and protect_users (never ended), allow_dwm, allow_shell (only the
    restart_explorer method ends explorer.exe, and it alone, without /T), allow_daemons (a service's process, as a
    Linux GPU daemon: gpu_reclaim_allow_daemons through the roles)."""

    def __init__(self, protect_names=(), protect_users=(), allow_dwm=False, allow_shell=False, allow_daemons=False):
        # A name with a backslash is an executable's path (C:\Apps\render.exe): it protects the process whose image
        # path (Win32_Process.ExecutablePath) it is, any case; where the image path is not known, the process of its
        # file name.
        entries = [name.strip() for name in protect_names or ()]
        self.names = frozenset(base_name(name) for name in entries if "\\" not in name)
        self.paths = frozenset(name.lower() for name in entries if "\\" in name)
        self.users = frozenset(bare_user(user) for user in protect_users or ())
        self.allow_dwm = bool(allow_dwm)
        self.allow_shell = bool(allow_shell)
        self.allow_daemons = bool(allow_daemons)

    @classmethod
    def from_args(cls, args, allow_shell=False):
        return cls(args.get("protect_names"), args.get("protect_users"), args.get("allow_dwm"), allow_shell, args.get("allow_daemons"))


def bare_user(user):
    """A user without its domain, lower case: WS12\\ada, ada@corp (UPN) and ADA are all ada."""
    return (user or "").rsplit("\\", 1)[-1].split("@", 1)[0].strip().lower()


def label(process):
    return "pid %s (%s)" % (process.get("pid"), process.get("name"))


def refusal(process, policy):
    """Why `process` ({"pid", "name", "user"}) must never be ended under `policy` (a sentence naming it and what
    would allow it, where anything would), or None when it may be."""
    name = process.get("name")
    kind = role(name, process.get("pid"), process.get("owner_sid"))
    base = base_name(name)
    if kind == "vm":
        return ("%s is a virtual machine's memory process (the WSL VM's or a Hyper-V VM's): never killed; the WSL VM "
                "stops with its distributions (wsl --terminate / --shutdown)" % label(process))
    if kind == "protected":
        return "%s is a protected Windows system process" % label(process)
    if process.get("run_ancestor"):
        return ("%s is this Ansible run's own process or one of its ancestors (the connection the run goes through): "
                "never ended" % label(process))
    if base in CONNECTION_NAMES:
        return "%s hosts a remote connection (maybe Ansible's own): never ended" % label(process)
    caller = caller_refusal(process, policy)
    if caller:
        return caller
    service = service_refusal(process, policy)
    if service:
        return service
    if kind == "dwm" and not policy.allow_dwm:
        return "%s is the Desktop Window Manager: ending it is allowed only with allow_dwm" % label(process)
    shell = is_shell(process)
    if shell is None:
        return ("%s is named like the user's shell and its image path is not known (Win32_Process.ExecutablePath, "
                "which needs an elevated session for another user's process), so whether it is the shell Winlogon "
                "started cannot be told: never ended, neither as a program nor by method restart_explorer - run elevated so that its path "
                "is read" % label(process))
    if shell and not policy.allow_shell:
        return ("%s is the user's shell (its image path %s is Winlogon's Shell): use method restart_explorer (ending it "
                "as a tree would end every program started from it)" % (label(process), process.get("image_path")))
    return None


def desktop_refusal(step, session_id, processes, policy):
    """Why `step` (a logoff, a restart of the shell) may not end the desktop of session `session_id` - the display
    server of Windows, dwm.exe, and the user's shell - without allow_dwm (gpu_reclaim_allow_display through the roles),
    naming what it would end; None when allowed. The Windows twin of allow_display on Linux."""
    if policy.allow_dwm:
        return None
    desktop = [label(p) for p in processes if p.get("session_id") == session_id and role(p.get("name"), p.get("pid"), p.get("owner_sid")) == "dwm"]
    return "%s would end the desktop of session %s (display server %s); allow_dwm=true (gpu_reclaim_allow_display through the roles) " \
        "allows it" % (step, session_id, ", ".join(desktop) or "dwm.exe")


SERVICES_SESSION = 0


def service_refusal(process, policy):
    """Why a Windows service's process (Win32_Service.ProcessId: the services it runs, "services") is not ended, unless
    allow_daemons - as a Linux daemon known from the init system is ended only with allow_daemons. Where Win32_Service
    was not read (services None), a session-0 process may be one: refused the same way (fails closed)."""
    if policy.allow_daemons:
        return None
    services = process.get("services")
    if services:
        return ("%s is the process of the Windows service%s %s (Win32_Service.ProcessId): a service is its service "
                "manager's to stop; ended only with allow_daemons (gpu_reclaim_allow_daemons through the roles)" % (
                    label(process), "s" if len(services) > 1 else "", ", ".join(services)))
    if services is None and "services" in process and process.get("session_id") == SERVICES_SESSION:
        return ("%s runs in session 0 and whether it is a service's process is not known (Win32_Service could not be "
                "read): ended only with allow_daemons (gpu_reclaim_allow_daemons through the roles)" % label(process))
    return None


def caller_refusal(process, policy):
    """Why the caller's protect_names / protect_users keep `process` from being ended or losing its GPU, or None. What
    a rung that ends more than named processes asks (an adapter restart takes the GPU from every holder, whatever its
    class; a logoff ends every process of the session): the system's own processes are those rungs' business."""
    if base_name(process.get("name")) in policy.names:
        return "protected name: %s" % process.get("name")
    image = (process.get("image_path") or "").strip().lower()
    for path in policy.paths:
        if image == path or (not image and base_name(path.rsplit("\\", 1)[-1]) == base_name(process.get("name"))):
            return "protected name: %s (%s)" % (process.get("name"), process.get("image_path") or "its image path unknown")
    if policy.users and not bare_user(process.get("user")):
        # Fails closed: a process whose owner Windows did not tell may be a protected user's.
        return ("%s: its owner is not known (Get-Process -IncludeUserName needs an elevated session, or Windows denied "
                "the owner), so protect_users cannot clear it: never ended while protect_users is set - run elevated so "
                "that its owner is read, or leave protect_users unset" % label(process))
    if policy.users and bare_user(process.get("user")) in policy.users:
        return "protected user: %s" % process.get("user")
    return None


def descendants(processes, root, unknown_is_child=False):
    """The processes ({pid: process}) whose parent chain leads to root, as ended by a tree kill. A child is never
    older than its parent: Windows keeps a parent's pid in ParentProcessId after the parent exits, and that pid may
    name a newer process, which is no parent of it. Where either creation time is unknown, `unknown_is_child` decides
    (True for the question of what a tree may hold: such a member is never ended - no creation time to match - yet a
    protected one refuses the tree, as nothing proves it is not a child)."""
    def younger(child, parent):
        if child.get("creation_time_ms") is None or parent.get("creation_time_ms") is None:
            return unknown_is_child
        return child["creation_time_ms"] >= parent["creation_time_ms"]
    found, frontier = [], [root]
    while frontier:
        children = [p for p in processes.values() for parent in frontier
                    if p.get("ppid") == parent["pid"] and p["pid"] != parent["pid"] and p["pid"] not in found
                    and p["pid"] != root["pid"] and younger(p, parent)]
        found.extend(p["pid"] for p in children)
        frontier = children
    return found


def tree_refusal(processes, process, policy):
    """Why a tree kill of `process` must not run, or None: a process it would take with it that would be refused
    on its own (the shell always: a tree never takes the user's desktop)."""
    tree_policy = Policy(allow_dwm=policy.allow_dwm, allow_daemons=policy.allow_daemons)
    tree_policy.names, tree_policy.users, tree_policy.paths = policy.names, policy.users, policy.paths
    for pid in descendants(processes, process, unknown_is_child=True):
        why = refusal(processes[pid], tree_policy)
        if why:
            return "its tree (what ending it as a tree takes with it) holds %s, which is never ended: %s" % (label(processes[pid]), why)
    return None
