# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""wsl.exe: the distribution lists it prints, and the argv that stop one distribution or the whole VM.

Hand the parsers text from `_output_encoding.decode_output` (wsl.exe writes UTF-16LE). What wsl.exe's own source shows
(microsoft/WSL, the list command): `--list --running --quiet` prints one name a line and exits 0, nothing at all
when nothing runs; without `--quiet` it prints a localized sentence and exits -1 instead. No sentence is read: the
exit status decides, with the process list (is a WSL VM running) where it is not 0. The STATE column of
`--list --verbose` is printed in English on every language ("Running", "Stopped", ...).

Which running distribution holds the GPU is asked of the distribution's own kernel view: a process of it with the GPU
paravirtualization device /dev/dxg open (`find` over /proc/<pid>/fd, as root, run by `wsl --distribution <name> --user
root --exec`): the paths it prints are the fact, never a sentence.
"""

from __future__ import annotations

import re
from collections import namedtuple

STORE_WSL_PATH = "C:\\Program Files\\WSL\\wsl.exe"
INBOX_WSL_PATH = "wsl.exe"

WslList = namedtuple("WslList", "status distributions message")

# `wsl --status` on a host where WSL is not installed or its optional component is not live: the inbox wsl.exe's exit
# status 50 (ERROR_NOT_SUPPORTED, as a public transcript shows it) or 0x8007019E (the optional component is not enabled),
# as PowerShell ($LASTEXITCODE, signed) and as a DWORD report them. Newer wsl.exe exits -1 and prints the error's code,
# an identifier that no language changes (Wsl/WSL_E_WSL_OPTIONAL_COMPONENT_REQUIRED after a localized "Error code:").
NOT_INSTALLED_EXIT_CODES = frozenset((50, 0x8007019E, 0x8007019E - 0x100000000))
NOT_INSTALLED_ERROR_CODE = "WSL_E_WSL_OPTIONAL_COMPONENT_REQUIRED"
GPU_DEVICE = "/dev/dxg"
_FD_PATH_RE = re.compile(r"^/proc/(\d+)/fd/\d+$")

# wsl.exe's exit status -1, as PowerShell ($LASTEXITCODE) and as an unsigned DWORD report it.
_MINUS_ONE = (-1, 0xFFFFFFFF)

# What WSL accepts as a distribution name (^[a-zA-Z0-9._-]+$, as Microsoft's DistroLauncher states it: "_work" and
# ".scratch" are names); anything else in a name list is not a name list.
_DISTRIBUTION_NAME_RE = re.compile(r"^[A-Za-z0-9._-]+$")


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


def status_argv(wsl_path=INBOX_WSL_PATH):
    """argv asking whether WSL is installed (read by its exit status only)."""
    return [wsl_path, "--status"]


def not_installed(rc, text=""):
    """Whether `wsl --status` exiting `rc` (and printing `text`) says WSL is not installed on the host: its exit status,
    or, with the generic -1, the error's code (never the sentence around it)."""
    if rc in NOT_INSTALLED_EXIT_CODES:
        return True
    return rc in _MINUS_ONE and re.search(r"\bWsl/(?:[A-Za-z]+/)*%s\b" % NOT_INSTALLED_ERROR_CODE, text or "") is not None


def gpu_probe_argv(distribution, wsl_path=INBOX_WSL_PATH):
    """argv listing, inside one running distribution and as its root, the open file descriptors of /dev/dxg (the GPU
    as WSL 2 gives it to Linux): one /proc/<pid>/fd/<n> line each. The name is an argv element, checked."""
    return [wsl_path, "--distribution", checked_distribution_name(distribution), "--user", "root", "--exec",
            "find", "/proc", "-mindepth", "3", "-maxdepth", "3", "-path", "/proc/[0-9]*/fd/*", "-lname", GPU_DEVICE]


def parse_gpu_probe(text, rc, stderr=""):
    """gpu_probe_argv's answer -> {"holds_gpu": True, False or None (not known), "pids": [pid], "error": str|None}.

    The lines decide: /proc/<pid>/fd/<n> lines are processes holding the GPU whatever the exit status (find exits 1
    when a process it was reading exited meanwhile); no line and exit 0 is none; anything else (find missing, wsl.exe
    refusing the user or the distribution, a line that is no such path) is not known."""
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    matches = [_FD_PATH_RE.match(line) for line in lines]
    if lines and all(matches):
        return {"holds_gpu": True, "pids": sorted(set(int(m.group(1)) for m in matches)), "error": None}
    if not lines and rc == 0:
        return {"holds_gpu": False, "pids": [], "error": None}
    said = " ".join(part.strip() for part in (text, stderr) if part and part.strip())
    return {"holds_gpu": None, "pids": [], "error": "the /dev/dxg probe exited %s%s" % (rc, ": " + said[:300] if said else "")}


def checked_distribution_name(name):
    """The name, or ValueError naming it when it is no WSL distribution name."""
    # a leading '-' would pass for one of wsl.exe's options
    if not isinstance(name, str) or not _DISTRIBUTION_NAME_RE.fullmatch(name) or name.startswith("-"):
        raise ValueError("not a WSL distribution name: %r (letters, digits, '.', '_' and '-', not '-' first)" % (name,))
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


def exit_report(rc, text):
    """wsl.exe's exit status and words, for the report only (what it did is read from the facts after it)."""
    message = (text or "").strip()
    return None if rc == 0 and not message else "wsl.exe exited %s%s" % (rc, ": " + message if message else "")
