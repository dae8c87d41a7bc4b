# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Names of the units that make up a node's GPU stack, and how a process name is matched (protect_names)."""

from __future__ import annotations

import os
import unicodedata

# The kernel keeps only the first 15 bytes of a command name (TASK_COMM_LEN - 1).
COMM_LEN = 15

# Which process is a GPU daemon or a display server is the init system's word (_unit_members.py), never a name.
DISPLAY_MANAGER = "display-manager.service"

# Units stopped before a reset or a driver reload and started again afterwards (in reverse), in stop order.
# Every one of these daemons holds /dev/nvidiactl, and a process holding it blocks every GPU reset (nvidia-smi:
# "Please first kill all processes using this device", naming "Fabric Manager" and "a monitoring application").
# The clients go first (the exporter, then DCGM's nv-hostengine), then nv-fabricmanager, then
# nvidia-persistenced; they start again the other way round, persistenced first.
GPU_SERVICE_UNITS = (
    DISPLAY_MANAGER,
    "dcgm-exporter.service",
    "nvidia-dcgm.service",
    "dcgm.service",
    "nvidia-fabricmanager.service",
    "nvidia-persistenced.service",
)

PROCESS_STATES = {
    "R": "running", "S": "sleeping", "D": "disk-sleep", "Z": "zombie", "T": "stopped", "t": "tracing-stop",
    "X": "dead", "I": "idle", "P": "parked", "W": "waking", "K": "wakekill",
}


def process_names(name, cmdline):
    """The names a process goes by: its command name and the base name of its argv[0]."""
    names = set()
    if name:
        names.add(name)
    if cmdline and cmdline[0]:
        names.add(os.path.basename(cmdline[0].split(" ")[0]))
    return names


def first_name_match(names, candidates):
    """The first candidate one of `names` stands for, allowing for the kernel's 15-byte cut; or None."""
    for candidate in candidates:
        for name in names:
            if name == candidate or (len(name) == COMM_LEN and candidate.startswith(name)):
                return candidate
    return None


# How long a process's name may get in a report; longer ones are cut (at a character, never inside one).
DISPLAY_NAME_CHARS = 64


def _without_torn_tail(name):
    """A kernel comm cut at 15 bytes can end inside a UTF-8 character, decoded as U+FFFD: drop that torn end."""
    return name.rstrip("\ufffd") if len(name.encode("utf-8", "replace")) >= COMM_LEN - 2 else name


def cut_text(text, limit=DISPLAY_NAME_CHARS):
    """text cut to at most limit characters (code points, never half of one, nor a mark without its base) with an
    ellipsis when cut."""
    if len(text) <= limit:
        return text
    end = limit - 1
    while end > 0 and _is_combining(text[end]):
        end -= 1  # a combining mark belongs with the character before it
    return text[:end] + "\u2026"


def _is_combining(char):
    return unicodedata.combining(char) != 0 or 0xFE00 <= ord(char) <= 0xFE0F or ord(char) == 0x200D


def display_name(name, cmdline=None, exe=None, limit=DISPLAY_NAME_CHARS):
    """A process as ps names it for a person: the base name of its argv[0] (what ps -f shows first, whole: not the
    kernel's 15-byte comm), followed by its executable's base name in parentheses when that differs (a script run by
    python3, a renamed argv[0]); "[comm]" for a process whose command line is empty (a kernel thread, a zombie), as ps
    shows it; the comm when the command line is unknown (None). Cut at limit characters, never inside a character.
    Text for people only: escape it where it is rendered."""
    argv0 = str(cmdline[0]) if cmdline and cmdline[0] else ""
    first = os.path.basename(argv0.rstrip("/")) or argv0
    exe_name = os.path.basename(exe[:-len(" (deleted)")] if exe and exe.endswith(" (deleted)") else exe) if exe else ""
    if first:
        related = not exe_name or first.startswith(exe_name) or exe_name.startswith(first)
        label = first if related else "%s (%s)" % (first, exe_name)
    elif exe_name:
        label = exe_name
    elif cmdline is None:
        label = _without_torn_tail(name or "?")  # its command line was not read (not visible here)
    else:
        label = "[%s]" % _without_torn_tail(name or "?")
    return cut_text(label, limit)


def holder_command(holder):
    """display_name of a holder of the snapshot (its comm, cmdline and exe)."""
    return display_name(holder.get("name"), holder.get("cmdline"), holder.get("exe"))
