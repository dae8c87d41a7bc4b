# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure parsers for kernel module state (lsmod, /proc/modules) and modprobe/rmmod errors, plus the
order in which the NVIDIA modules have to be unloaded; and the snapshot's driver probe (probe_driver), which reads them."""

from __future__ import annotations

import os
import re

from ansible_collections.gpuops.remediation.plugins.module_utils._command import CommandRunner
from ansible_collections.gpuops.remediation.plugins.module_utils._linear_text import RegexOnFirstUse

NVIDIA_MODULE_UNLOAD_ORDER = ("nvidia_peermem", "nvidia_drm", "nvidia_modeset", "nvidia_uvm", "nvidia")

_HEADER_RE = re.compile(r"^Module\s+Size\s+Used by", re.IGNORECASE)

# (regex on one stderr line, reason); the first line that matches any of these decides. Compiled on first use: only a
# failed modprobe is read with them, and every snapshot imports this file.
_ERROR_PATTERNS = (
    (RegexOnFirstUse(lambda: re.compile(r"Module (?P<module>\S+) is in use by:?(?P<users>.*)$")), "in_use"),  # users split on whitespace
    (RegexOnFirstUse(lambda: re.compile(r"Module (?P<module>\S+?) is in use\.?\s*$")), "in_use"),
    (RegexOnFirstUse(lambda: re.compile(r"Module (?P<module>\S+) is not currently loaded")), "not_loaded"),
    (RegexOnFirstUse(lambda: re.compile(r"Module (?P<module>\S+) does not exist in /proc/modules")), "not_loaded"),
    (RegexOnFirstUse(lambda: re.compile(r"Module (?P<module>\S+) not found")), "not_found"),
    (RegexOnFirstUse(lambda: re.compile(r"could not (?:remove|insert) (?:module )?'?(?P<module>[^':\s]+)'?: Resource temporarily unavailable")),
     "in_use"),
    (RegexOnFirstUse(lambda: re.compile(r"could not (?:remove|insert) (?:module )?'?(?P<module>[^':\s]+)'?: Device or resource busy")), "in_use"),
    (RegexOnFirstUse(lambda: re.compile(r"could not (?:remove|insert) (?:module )?'?(?P<module>[^':\s]+)'?: Operation not permitted")),
     "permission"),
    (RegexOnFirstUse(lambda: re.compile(r"could not (?:remove|insert) (?:module )?'?(?P<module>[^':\s]+)'?: No such file or directory")),
     "not_loaded"),
    (RegexOnFirstUse(lambda: re.compile(r"Operation not permitted|Permission denied|must be superuser|must be root", re.IGNORECASE)),
     "permission"),
)
# Any other ERROR/FATAL line: the module is the quoted name or the one after "for"/"module".
_OTHER_ERROR_RE = RegexOnFirstUse(lambda: re.compile(r"(?:FATAL|ERROR):"))
_OTHER_MODULE_RE = RegexOnFirstUse(lambda: re.compile(r"'(?P<quoted>[A-Za-z0-9_-]+)'|\b(?:for|module) (?P<named>[A-Za-z0-9_-]+)"))


def module_name(name):
    """Kernel module names use "_"; modprobe accepts "-" (nvidia-drm == nvidia_drm)."""
    return name.strip().replace("-", "_")


def _users(field):
    """"nvidia_uvm,nvidia_modeset," / "-" / "[permanent]" -> module names."""
    return [module_name(user) for user in field.split(",") if user.strip() and user.strip() not in ("-", "[permanent]")]


def parse_lsmod(text):
    """`lsmod` output -> {module: {"size": int, "refcount": int, "used_by": [str]}} (header optional)."""
    modules = {}
    for line in text.splitlines():
        if not line.strip() or _HEADER_RE.match(line.strip()):
            continue
        parts = line.split()
        if len(parts) < 3 or not parts[1].isdigit():
            continue
        modules[module_name(parts[0])] = {
            "size": int(parts[1]),
            "refcount": int(parts[2]) if parts[2].lstrip("-").isdigit() else None,
            "used_by": _users(parts[3]) if len(parts) > 3 else [],
        }
    return modules


def parse_proc_modules(text):
    """/proc/modules -> the parse_lsmod shape plus "state" ("Live", "Loading", "Unloading").

    Line format: `name size refcount users state address [taints]`, users "a,b," or "-".
    """
    modules = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 5 or not parts[1].isdigit():
            continue
        modules[module_name(parts[0])] = {
            "size": int(parts[1]),
            "refcount": int(parts[2]) if parts[2].lstrip("-").isdigit() else None,
            "used_by": _users(parts[3]),
            "state": parts[4],
        }
    return modules


def _classify(line):
    for pattern, reason in _ERROR_PATTERNS:
        match = pattern.search(line)
        if not match:
            continue
        groups = match.groupdict()
        module = groups.get("module")
        users = groups.get("users") or ""
        return {
            "module": module_name(module.rstrip(".")) if module else None,
            "reason": reason,
            "users": [module_name(user) for user in users.split()],
            "message": line.strip(),
        }
    if _OTHER_ERROR_RE.search(line):
        named = _OTHER_MODULE_RE.search(line)
        module = (named.group("quoted") or named.group("named")) if named else None
        return {"module": module_name(module) if module else None, "reason": "other", "users": [],
                "message": line.strip()}
    return None


def parse_modprobe_errors(stderr):
    """Every recognised error line of modprobe/rmmod stderr, in order (same dicts as parse_modprobe_error)."""
    errors = []
    for line in stderr.splitlines():
        found = _classify(line)
        if found:
            errors.append(found)
    return errors


def parse_modprobe_error(stderr):
    """The first error in modprobe/rmmod stderr: {"module", "reason", "users", "message"}.

    reason: "in_use" | "not_loaded" | "not_found" | "permission" | "other". Text with no recognised error
    gives module None, reason "other" and the stripped text as message.
    """
    errors = parse_modprobe_errors(stderr)
    if errors:
        return errors[0]
    return {"module": None, "reason": "other", "users": [], "message": stderr.strip()}


def _users_first(name, loaded, ours, ordered, visiting):
    """Depth first: modules using `name` (outside our own list) go before it."""
    if name in visiting:
        return
    visiting.add(name)
    for user in loaded.get(name, {}).get("used_by", []):
        if user in loaded and user not in ours:
            _users_first(user, loaded, ours, ordered, visiting)
            if user not in ordered:
                ordered.append(user)


def unload_plan(loaded):
    """Modules to rmmod, in order: other loaded modules that use an NVIDIA module (e.g. nvidia_fs, gdrdrv)
    first, then the loaded NVIDIA modules in NVIDIA_MODULE_UNLOAD_ORDER. `loaded` is a parse_lsmod result.
    """
    ours = [name for name in NVIDIA_MODULE_UNLOAD_ORDER if name in loaded]
    others = []
    visiting = set()
    for name in ours:
        _users_first(name, loaded, set(NVIDIA_MODULE_UNLOAD_ORDER), others, visiting)
    return others + ours


NVIDIA_MODULE_PREFIX = "nvidia"


def _nvidia_modules(module, layout):
    """The loaded nvidia* modules from /proc/modules (what lsmod reads), or from lsmod where that file is missing."""
    try:
        with open(layout.modules_file) as handle:
            modules = parse_proc_modules(handle.read())
    except (IOError, OSError):
        lsmod = layout.command(module, "lsmod")
        rc, out, dummy = CommandRunner(module).probe([lsmod]) if lsmod else (1, "", "")
        modules = parse_lsmod(out) if rc == 0 else {}
    return dict((name, dict((key, info[key]) for key in ("size", "refcount", "used_by")))
                for name, info in modules.items() if name.startswith(NVIDIA_MODULE_PREFIX))


def probe_driver(module, layout, driver_version, cuda_version):
    driver = {"version": driver_version, "cuda_version": cuda_version, "modules": {}, "nvidia_drm_modeset": None}
    driver["modules"] = _nvidia_modules(module, layout)
    try:
        with open(os.path.join(layout.sys_dir, "module", "nvidia_drm", "parameters", "modeset")) as handle:
            driver["nvidia_drm_modeset"] = handle.read().strip() or None
    except (IOError, OSError):
        pass
    return driver
