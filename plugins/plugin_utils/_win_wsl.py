# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""wsl.exe: the distribution lists it prints, and the argv that stop one distribution or the whole VM.

Hand the parsers text from `_win_decode.decode_output` (wsl.exe writes UTF-16LE). What wsl.exe's own source shows
(microsoft/WSL, the list command): `--list --running --quiet` prints one name a line and exits 0, nothing at all
when nothing runs; without `--quiet` it prints a localized sentence and exits -1 instead. No sentence is read: the
exit status decides, with the process list (is a WSL VM running) where it is not 0. The STATE column of
`--list --verbose` is printed in English on every language ("Running", "Stopped", ...).
"""

from __future__ import annotations

import re
from collections import namedtuple

STORE_WSL_PATH = "C:\\Program Files\\WSL\\wsl.exe"
INBOX_WSL_PATH = "wsl.exe"

WslList = namedtuple("WslList", "status distributions message")

# wsl.exe's exit status -1, as PowerShell ($LASTEXITCODE) and as an unsigned DWORD report it.
_MINUS_ONE = (-1, 0xFFFFFFFF)

# What `wsl --import` accepts as a distribution name; anything else in a name list is not a name list.
_DISTRIBUTION_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def list_argv(wsl_path=INBOX_WSL_PATH, running=False):
    """argv listing the distributions by name only (language-neutral), or only the running ones."""
    argv = [wsl_path, "--list", "--quiet"]
    if running:
        argv.insert(2, "--running")
    return argv


def terminate_argv(distribution, wsl_path=INBOX_WSL_PATH):
    """argv stopping one distribution; the name is checked so that it cannot pass for an option."""
    return [wsl_path, "--terminate", checked_distribution_name(distribution)]


def shutdown_argv(wsl_path=INBOX_WSL_PATH):
    """argv stopping every distribution and the WSL VM (vmmemWSL) with them."""
    return [wsl_path, "--shutdown"]


def checked_distribution_name(name):
    """The name, or ValueError naming it when it is no WSL distribution name."""
    if not isinstance(name, str) or not _DISTRIBUTION_NAME_RE.fullmatch(name):
        raise ValueError("not a WSL distribution name: %r (letters, digits, '.', '_' and '-', not first)" % (name,))
    return name


def parse_list(text, rc, vm_running=None):
    """`wsl --list [--running] --quiet` -> WslList.

    status: "ok" (distributions: [name]), or "unrecognised" (nothing concluded; message: the output). The exit status
    and the process list decide, never the words: exit 0 is a list of names; any other exit (-1 with a sentence in the
    user's language when nothing runs, or wsl.exe's install notice on a host without WSL) is nothing running when no
    WSL VM process runs (`vm_running` False, from Win32_Process), and unrecognised otherwise.
    """
    stripped = text.strip()
    if rc != 0:
        if vm_running is False:
            return WslList("ok", [], stripped or None)
        return WslList("unrecognised", [], "wsl.exe exited %s%s: %s" % (
            rc, " while the WSL VM runs" if vm_running else "", stripped))
    names = [line.strip() for line in stripped.splitlines() if line.strip()]
    if not all(_DISTRIBUTION_NAME_RE.fullmatch(name) for name in names):
        return WslList("unrecognised", [], "not a list of distribution names: %s" % stripped)
    return WslList("ok", names, None)


def stop_outcome(rc, text):
    """What `--terminate` / `--shutdown` did, by exit status only: {"done": bool, "message": str|None}."""
    message = text.strip() or None
    return {"done": rc == 0, "message": None if rc == 0 else "wsl.exe exited %s: %s" % (rc, message)}
