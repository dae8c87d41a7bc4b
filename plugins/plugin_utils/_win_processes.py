# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Windows processes from `Get-CimInstance Win32_Process` (or Get-Process) as ConvertTo-Json writes them, and
from `tasklist` (CSV or table), with what they are to the ladder: the WSL VM, a protected system process, dwm.

Windows reuses pids quickly: a process is pid + creation time (milliseconds since 1970), which only the CIM / JSON
form carries. tasklist's headers, its "no tasks" line and its user names are localized: its columns are read by
position, and a line that is not a row is recognised only when a capture showed it.
"""

from __future__ import annotations

import csv
import re
from collections import namedtuple

from ansible_collections.gpuops.remediation.plugins.plugin_utils import _win_json

# The WSL 2 VM's memory process: vmmemWSL on Windows 11, vmmem before (which other Hyper-V VMs use too).
WSL_VM_NAMES = frozenset(("vmmemwsl", "vmmem"))
# Ending any of these crashes or logs off the host; Registry, Memory Compression, Secure System and LsaIso are
# kernel-run pseudo-processes of the same kind.
PROTECTED_NAMES = frozenset(("csrss", "wininit", "winlogon", "services", "lsass", "smss", "system", "idle",
                             "system idle process", "registry", "memory compression", "secure system", "lsaiso"))
PROTECTED_PIDS = frozenset((0, 4))
DWM_NAME = "dwm"

TaskList = namedtuple("TaskList", "status processes message")

# tasklist's "no tasks match" line, as captures showed it (exit 0 either way).
_NO_TASKS_LINES = (
    "INFO: No tasks are running which match the specified criteria.",
    "INFORMATION: Es werden keine Aufgaben mit den angegebenen Kriterien ausgeführt.",
)
_TASKLIST_COLUMNS = ("name", "pid", "session_name", "session_id", "memory_kib", "status", "user", "cpu_time",
                     "window_title")
# A table row without its header (the poster trimmed it): name, pid, session name, session#, "21,796 K".
_TABLE_ROW_RE = re.compile(r"^(?P<name>\S.*?)\s+(?P<pid>\d+)\s+(?P<session_name>\S*)\s+(?P<session_id>\d+)\s+"
                           r"(?P<memory>\d[\d.,\s\u00a0\u202f]*\s?K)$")


def base_name(name):
    """"csrss.exe" / "CSRSS" / "vmmemWSL" -> "csrss" / "csrss" / "vmmemwsl"."""
    lowered = (name or "").strip().lower()
    return lowered[:-4] if lowered.endswith(".exe") else lowered


def role(name, pid):
    """"wsl_vm", "protected", "dwm" or None (an ordinary process)."""
    base = base_name(name)
    if base in WSL_VM_NAMES:
        return "wsl_vm"
    if base in PROTECTED_NAMES or pid in PROTECTED_PIDS:
        return "protected"
    if base == DWM_NAME:
        return "dwm"
    return None


def parse_cim_processes(text):
    """ConvertTo-Json of Win32_Process (ProcessId, ParentProcessId, Name, ExecutablePath, CreationDate, SessionId,
    and a User the script adds) or of Get-Process (Id, ProcessName, Path, StartTime, SessionId) -> [process]:
    {"pid", "ppid", "name", "image_path", "creation_time_ms", "session_id", "user", "role"}."""
    processes = []
    for item in _win_json.objects(text):
        pid = _win_json.integer(_first(item, "ProcessId", "Id"))
        if pid is None:
            continue
        name = _first(item, "Name", "ProcessName")
        processes.append({
            "pid": pid,
            "ppid": _win_json.integer(item.get("ParentProcessId")),
            "name": name,
            "image_path": _first(item, "ExecutablePath", "Path"),
            "creation_time_ms": _win_json.epoch_ms(_first(item, "CreationDate", "StartTime")),
            "session_id": _win_json.integer(_first(item, "SessionId", "SI")),
            "user": _first(item, "User", "UserName"),
            "role": role(name, pid),
        })
    return processes


def parse_tasklist_csv(text, rc=0):
    """`tasklist [/v] /fo csv [/nh]` -> TaskList(status, processes, message), status "ok", "no_match" or
    "unrecognised". Columns by position (5, or 9 with /v); a header row (its PID cell is no number) is skipped."""
    rows = [line for line in text.splitlines() if line.strip()]
    csv_rows = [line for line in rows if line.lstrip().startswith('"')]
    processes = [_tasklist_process(cells) for cells in csv.reader(csv_rows)]
    return _tasklist_result(rc, [p for p in processes if p is not None], rows, csv_rows)


def parse_tasklist_table(text, rc=0):
    """`tasklist` in its default table form -> TaskList; columns cut where the ===== rule line cuts them, or by
    the row's shape when the header was trimmed."""
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    rule_at = next((at for at, line in enumerate(lines) if re.match(r"^=+( +=+)+$", line)), None)
    if rule_at is not None:
        spans = [match.span() for match in re.finditer(r"=+", lines[rule_at])]
        body = lines[rule_at + 1:]
        processes = [_tasklist_process(_cut(line, spans)) for line in body]
    else:
        body = [line for line in lines if _TABLE_ROW_RE.match(line)]
        processes = [_tasklist_process(list(_TABLE_ROW_RE.match(line).groups())) for line in body]
    return _tasklist_result(rc, [p for p in processes if p is not None], lines, body)


def _tasklist_result(rc, processes, lines, row_lines):
    if rc != 0:
        return TaskList("unrecognised", processes, "tasklist exited %s: %s" % (rc, " / ".join(lines)))
    if processes:
        return TaskList("ok", processes, None)
    others = [line.strip() for line in lines if line not in row_lines]
    if len(others) == 1 and others[0] in _NO_TASKS_LINES:
        return TaskList("no_match", [], others[0])
    if not lines:
        return TaskList("unrecognised", [], "tasklist printed nothing")
    return TaskList("unrecognised", [], " / ".join(lines))


def _cut(line, spans):
    cells = []
    for at, (start, end) in enumerate(spans):
        stop = spans[at + 1][0] if at + 1 < len(spans) else len(line)
        cells.append(line[start:max(end, stop)].strip())
    return cells


def _tasklist_process(cells):
    if len(cells) < 5 or not cells[1].strip().isdigit():
        return None  # the header row (localized), or a line that is no row
    values = dict(zip(_TASKLIST_COLUMNS, (cell.strip() for cell in cells)))
    process = {
        "pid": int(values["pid"]),
        "name": values["name"],
        "session_name": values["session_name"] or None,
        "session_id": _win_json.integer(values["session_id"]),
        "memory_kib": _kib(values["memory_kib"]),
        "role": role(values["name"], int(values["pid"])),
    }
    if len(cells) >= 9:
        process.update(status=values["status"], user=_user(values["user"]), cpu_time=values["cpu_time"],
                       window_title=values["window_title"])
    return process


def _kib(text):
    """"15,612 K" (en) / "14.348 K" (de) / "1 516 K" -> 15612 / 14348 / 1516: whatever separates thousands."""
    digits = re.sub(r"\D", "", text)
    return int(digits) if digits else None


def _user(text):
    return None if text in ("", "N/A") else text


def _first(item, *keys):
    for key in keys:
        if item.get(key) is not None:
            return item[key]
    return None
