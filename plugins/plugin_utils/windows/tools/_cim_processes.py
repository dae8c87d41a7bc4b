# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Windows processes from `Get-CimInstance Win32_Process` (or Get-Process) as ConvertTo-Json writes them, with
what they are to the ladder: a virtual machine's memory process, a protected system process, dwm.

Windows reuses pids quickly: a process is pid + creation time (milliseconds since 1970), which the CIM / JSON form
carries (tasklist does not: no plugin reads it).
"""

from __future__ import annotations

import ntpath

from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node import _convertto_json

# A virtual machine's memory process: vmmemWSL (the WSL VM's, on newer builds) or vmmem (any Hyper-V VM's, the WSL
# VM's on older builds). Which VM it is (the WSL VM or another) is a fact of the snapshot (_wsl_vm_identity), not of the name.
VM_MEMORY_NAMES = frozenset(("vmmemwsl", "vmmem"))
# Ending any of these crashes or logs off the host; Registry, Memory Compression, Secure System and LsaIso are
# kernel-run pseudo-processes of the same kind.
PROTECTED_NAMES = frozenset(("csrss", "wininit", "winlogon", "services", "lsass", "smss", "system", "idle",
                             "system idle process", "registry", "memory compression", "secure system", "lsaiso"))
PROTECTED_PIDS = frozenset((0, 4))
DWM_NAME = "dwm"
# Winlogon's Shell value where the registry gives none: Windows starts %SystemRoot%\explorer.exe.
DEFAULT_SHELL = "explorer.exe"
WINLOGON_KEY = "HKLM\\SOFTWARE\\Microsoft\\Windows NT\\CurrentVersion\\Winlogon"


def base_name(name):
    """"csrss.exe" / "CSRSS" / "vmmemWSL" -> "csrss" / "csrss" / "vmmemwsl"."""
    lowered = (name or "").strip().lower()
    return lowered[:-4] if lowered.endswith(".exe") else lowered


# The owner SID of every virtual machine's memory process: the VM's own account, NT VIRTUAL MACHINE\<vm id>.
VM_ACCOUNT_SID_PREFIX = "S-1-5-83-"
# The owner SID of Windows' own system processes (csrss, lsass, ...): LocalSystem.
SYSTEM_SID = "S-1-5-18"


def _owned_by_another(owner_sid, sid_prefix):
    return isinstance(owner_sid, str) and bool(owner_sid.strip()) and not owner_sid.strip().upper().startswith(sid_prefix)


def role(name, pid, owner_sid=None):
    """"vm" (a virtual machine's memory process), "protected", "dwm" or None (an ordinary process).

    A process named vmmem / vmmemWSL is a VM's memory process unless its owner SID (Win32_Process.GetOwnerSid, which the
    scripts ask of those names and of the system processes' names) is known and is no VM's account, and one with a
    system process's name is protected unless its owner SID is known and is not SYSTEM's: any user can name a program
    vmmem.exe or csrss.exe, and it is then an ordinary process holding the GPU (not a VM no rung may touch, nor a system
    process that only a logoff or a reboot would end). An owner not known keeps the name's answer (fails closed)."""
    base = base_name(name)
    if base in VM_MEMORY_NAMES:
        return None if _owned_by_another(owner_sid, VM_ACCOUNT_SID_PREFIX) else "vm"
    if pid in PROTECTED_PIDS:
        return "protected"
    if base in PROTECTED_NAMES:
        # Windows' own: SYSTEM owns them. A known other owner is a user's program with that name, an ordinary process.
        return None if _owned_by_another(owner_sid, SYSTEM_SID) else "protected"
    if base == DWM_NAME:
        return "dwm"
    return None


def normal_path(path, system_root=None):
    """A Windows path as compared: lower case, backslashes, no quotes, no \\?\\ prefix, %SystemRoot% / %windir%
    expanded where `system_root` is known, "." and ".." resolved; None for no path."""
    text = (path or "").strip().strip('"').strip().replace("/", "\\")
    if not text:
        return None
    for prefix in ("\\\\?\\", "\\??\\"):
        if text.startswith(prefix):
            text = text[len(prefix):]
    if system_root:
        lowered = text.lower()
        for variable in ("%systemroot%", "%windir%"):
            if lowered.startswith(variable):
                text = system_root.rstrip("\\") + text[len(variable):]
                break
    return ntpath.normpath(text).lower()


def shell_image(winlogon_shell, system_root):
    """The image path of the user's shell (normalized, normal_path): Winlogon's Shell value (HKLM ...\\Winlogon, Shell;
    DEFAULT_SHELL where it is empty), its program alone (quoted, or up to ".exe", without arguments), resolved under
    %SystemRoot% when it names no folder. None where that cannot be told (a bare name and no %SystemRoot%)."""
    value = (winlogon_shell or "").strip() or DEFAULT_SHELL
    if value.startswith('"'):
        value = value[1:].split('"', 1)[0]
    else:
        end = value.lower().find(".exe")
        value = value[:end + 4] if end >= 0 else value.split()[0]
    if "\\" not in value and "/" not in value and "%" not in value:
        if not system_root:
            return None
        value = "%s\\%s" % (system_root.rstrip("\\"), value)
    found = normal_path(value, system_root)
    return found if found and ntpath.isabs(found) else None


def shell_match(name, image_path, shell):
    """Whether a process is the user's shell: its image path is the shell's image (`shell`, shell_image), compared as
    normal_path compares - never its name (a user's program named explorer.exe in Downloads is no shell). True, False,
    or None where it cannot be told: a process whose image path Windows did not give, or a shell image not known, and
    whose name is the shell's file name (fails closed: such a process is ended neither as a program nor as the shell)."""
    image = normal_path(image_path)
    if image and shell:
        return image == shell
    shell_file = ntpath.basename(shell) if shell else DEFAULT_SHELL
    return None if base_name(name) == base_name(shell_file) else False


def is_shell(process):
    """The one answer to "is this process the user's shell" (True, False, None: not known - shell_match): what the
    process list recorded ("shell", from the image path against Winlogon's Shell), else shell_match with no shell
    image known (a process record that did not come from the process list)."""
    if "shell" in process:
        return process["shell"]
    return shell_match(process.get("name"), process.get("image_path"), None)


def script_shell(answer):
    """The shell's image (shell_image) from a processes-reading script's answer (winlogon_shell, system_root)."""
    return shell_image((answer or {}).get("winlogon_shell"), (answer or {}).get("system_root"))


def parse_cim_processes(text, shell=None):
    """ConvertTo-Json of Win32_Process (ProcessId, ParentProcessId, Name, ExecutablePath, CreationDate, SessionId,
    and a User, an OwnerSid (VM memory processes) and a VmId (WSL's own processes) the script adds) or of Get-Process
    (Id, ProcessName, Path, StartTime, SessionId) -> [process]:
    {"pid", "ppid", "name", "image_path", "creation_time_ms", "session_id", "user", "role", "owner_sid", "vm_id_arg",
    "shell", "services"}; "shell" by shell_match against `shell` (the shell's image, shell_image); "services": the names of
    the services this process runs (Win32_Service.ProcessId; [] none), None where Win32_Service was not read."""
    processes = []
    for item in _convertto_json.objects(text):
        pid = _convertto_json.integer(_first(item, "ProcessId", "Id"))
        if pid is None:
            continue
        name = _first(item, "Name", "ProcessName")
        processes.append({
            "pid": pid,
            "ppid": _convertto_json.integer(item.get("ParentProcessId")),
            "name": name,
            "image_path": _first(item, "ExecutablePath", "Path"),
            "creation_time_ms": _convertto_json.epoch_ms(_first(item, "CreationDate", "StartTime")),
            "session_id": _convertto_json.integer(_first(item, "SessionId", "SI")),
            "user": _first(item, "User", "UserName"),
            "role": role(name, pid, item.get("OwnerSid")),
            "owner_sid": item.get("OwnerSid"),
            "vm_id_arg": item.get("VmId"),
            "shell": shell_match(name, _first(item, "ExecutablePath", "Path"), shell),
            "services": _services(item),
        })
    return processes


def _services(item):
    """Services as ConvertTo-Json writes a string array (a one-element array may come as the string itself)."""
    if "Services" not in item or item["Services"] is None:
        return None
    names = item["Services"] if isinstance(item["Services"], list) else [item["Services"]]
    return [str(name) for name in names if name not in (None, "")]


def mark_run_ancestors(by_pid, own_pid):
    """Mark (run_ancestor: True) the process Ansible's module runs in (`own_pid`, PowerShell's $PID) and each of its
    ancestors in `by_pid` ({pid: process}): the connection's host (wsmprovhost, winrshost, sshd-session, a shell under
    it) and the service above it. A parent is never younger than its child: Windows keeps a parent's pid in
    ParentProcessId after the parent exits, and a younger process with that pid is no ancestor. Where a creation time
    is not known the chain goes on (fails closed: one more process refused, never one of the run's ended)."""
    pid, child, seen = _convertto_json.integer(own_pid), None, set()
    while pid is not None and pid in by_pid and pid not in seen:
        process = by_pid[pid]
        if child is not None and None not in (process.get("creation_time_ms"), child.get("creation_time_ms")) \
                and process["creation_time_ms"] > child["creation_time_ms"]:
            break
        process["run_ancestor"] = True
        seen.add(pid)
        child, pid = process, process.get("ppid")
    return by_pid


def _first(item, *keys):
    for key in keys:
        if item.get(key) is not None:
            return item[key]
    return None
