# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure parser for what `nvidia-smi --gpu-reset [-i ...]` prints, per GPU."""

from __future__ import annotations

import re

from ansible_collections.gpuops.remediation.plugins.module_utils.probes._pci import normalize_bus_id

GLOBAL_KEY = "_global"

_BUS_ID_RE = re.compile(r"\b((?:[0-9A-Fa-f]{4,8}:)?[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\b")
_SUCCESS_RE = re.compile(r"successfully reset", re.IGNORECASE)

# (words in a failure text, reason); first match wins.
_REASONS = (
    (("in use", "being used"), "in_use"),
    (("primary gpu",), "primary_gpu"),
    (("not supported", "is not a supported"), "not_supported"),
    (("insufficient permissions", "permission denied", "not permitted", "root privileges"), "insufficient_permissions"),
)
# Words that make a line a failure report even when it names no GPU.
_FAILURE_WORDS = ("could not be reset", "couldn't run", "unable to reset", "failed", "error", "in use", "being used",
                  "not supported", "insufficient permissions", "primary gpu")
# The trailing explanation ("1 device is currently being used by one or more other processes ...") that
# follows per-GPU failures; it adds no GPU of its own.
_EXPLANATION_RE = re.compile(r"^\d+ devices? (?:is|are) currently being used", re.IGNORECASE)


def _reason(text):
    lowered = text.lower()
    for words, reason in _REASONS:
        if any(word in lowered for word in words):
            return reason
    return "other"


def _is_failure_text(text):
    lowered = text.lower()
    return any(word in lowered for word in _FAILURE_WORDS)


def parse_gpu_reset(stdout, stderr, rc):
    """{"<bus id>": {"reset": bool, "reason": str|None, "message": str}} for each GPU the output names.

    reason: None on success, else "in_use" | "primary_gpu" | "not_supported" | "insufficient_permissions" |
    "other". A "_global" entry appears only when the reset failed (rc != 0 or a failure line) and no line
    names a failed GPU; its message is the whole output.
    """
    text = "\n".join(part for part in (stdout or "", stderr or "") if part)
    results = {}
    unnamed_failure = False
    for raw in text.splitlines():
        line = raw.strip().rstrip("\r")
        if not line or _EXPLANATION_RE.match(line):
            continue
        match = _BUS_ID_RE.search(line)
        if match and _SUCCESS_RE.search(line):
            results[normalize_bus_id(match.group(1))] = {"reset": True, "reason": None, "message": line}
        elif match and _is_failure_text(line):
            results[normalize_bus_id(match.group(1))] = {"reset": False, "reason": _reason(line), "message": line}
        elif not match and _is_failure_text(line) and "following gpus could not be reset" not in line.lower():
            unnamed_failure = True
    any_failed_gpu = any(not entry["reset"] for entry in results.values())
    if not any_failed_gpu and (unnamed_failure or rc not in (0, None)):
        results[GLOBAL_KEY] = {"reset": False, "reason": _reason(text), "message": text.strip()}
    return results


def reset_succeeded(rc, stdout, stderr):
    """Whether every GPU of a reset was reset: exit 0 and no failure line (parse_gpu_reset). nvidia-smi's exit code alone
    is not enough for the journal, whose ok reset answers earlier Xid evidence."""
    return rc == 0 and all(entry["reset"] for entry in parse_gpu_reset(stdout, stderr, rc).values())
