# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure parser for NVIDIA driver (NVRM) lines in the kernel log, with NVIDIA's Xid catalog.

Reads the text of `dmesg`, `dmesg -T`/`--ctime`, `journalctl -k` (short, short-iso), syslog files and bare
`kernel: NVRM: ...` excerpts. Events follow docs/internals.md; `kernel_log_argv` builds the commands, and
probe_kernel_log (the snapshot's probe) runs them or reads the file.
"""

from __future__ import annotations

import calendar
import errno
import os
import re
import stat
import time

from ansible_collections.gpuops.remediation.plugins.module_utils._command import CommandRunner
from ansible_collections.gpuops.remediation.plugins.module_utils._linear_text import RegexOnFirstUse, without_trailing_brackets
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._pci import normalize_bus_id
from ansible_collections.gpuops.remediation.plugins.module_utils._xid_policy import apply_policy, parse_policy

ACTIONS = ("none", "restart_app", "reset_gpu", "reboot", "check_hw", "report")

# NVIDIA's "Resolution Bucket (Immediate Action)" -> our action.
_BUCKET_ACTIONS = {
    "IGNORE": "none",
    "RESTART_APP": "restart_app",
    "RESET_GPU": "reset_gpu",
    "RESTART_BM": "reboot",
    "RESTART_VM": "reboot",
    "CHECK_MECHANICALS": "check_hw",
    "CONTACT_SUPPORT": "report",
    "UPDATE_SWFW": "report",
    "CHECK_UVM": "report",
    # Workflows resolved to the step NVIDIA's workflow starts with:
    "WORKFLOW_XID_45": "none",  # preemptive cleanup after another Xid: follow that Xid
    "WORKFLOW_XID_48": "reset_gpu",  # DBE: the row remap / page retirement needs a GPU reset
    "WORKFLOW_NVLINK_ERR": "reset_gpu",
    "WORKFLOW_NVLINK5_ERR": "report",  # decoded per error status; the driver follows up with Xid 154
    "XID_154": "report",  # replaced per line by the recovery action the driver names
}

_SEVERITIES = {
    "none": "info",
    "restart_app": "warning",
    "report": "warning",
    "reset_gpu": "critical",
    "check_hw": "critical",
    "reboot": "fatal",
}

# (Xid, NVIDIA mnemonic, description, immediate-action bucket) from NVIDIA's Xid catalog,
# https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html (codes that apply to no product left out;
# 162-172, which the catalog gives no action, too: they stay "unknown", action "report").
_CATALOG_ROWS = (
    (8, "ROBUST_CHANNEL_FIFO_ERROR_IDLE_TIMEOUT", "GPU stopped processing", "RESTART_APP"),
    (11, "ROBUST_CHANNEL_GR_ERROR_MISSING_HW", "Invalid or corrupted push buffer stream", "RESTART_APP"),
    (13, "ROBUST_CHANNEL_GR_EXCEPTION", "Graphics Engine Exception", "RESTART_APP"),
    # Described "Unused" but applying to every product, with an action: kept (trigger condition as the name).
    (14, "ROBUST_CHANNEL_FAKE_ERROR", "Fake or injected error from userspace", "IGNORE"),
    (25, "ROBUST_CHANNEL_GR_ILLEGAL_NOTIFY", "Invalid or illegal push buffer stream", "RESTART_APP"),
    (31, "ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT", "GPU memory page fault", "RESTART_APP"),
    (32, "ROBUST_CHANNEL_PBDMA_ERROR", "Invalid or corrupted push buffer stream", "RESTART_APP"),
    (37, "ROBUST_CHANNEL_FECS_ERR_UNIMP_FIRMWARE_METHOD", "Driver firmware error", "IGNORE"),
    (38, "ROBUST_CHANNEL_FECS_ERR_WATCHDOG_TIMEOUT", "Driver firmware error", "IGNORE"),
    (39, "ROBUST_CHANNEL_CE0_ERROR", "Copy Engine Exception", "RESTART_APP"),
    (40, "ROBUST_CHANNEL_CE1_ERROR", "Copy Engine Exception", "RESTART_APP"),
    (41, "ROBUST_CHANNEL_CE2_ERROR", "Copy Engine Exception", "RESTART_APP"),
    (43, "ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR", "GPU stopped processing", "IGNORE"),
    (44, "ROBUST_CHANNEL_GR_FAULT_DURING_CTXSW", "Graphics Engine fault during context switch", "IGNORE"),
    (45, "ROBUST_CHANNEL_PREEMPTIVE_REMOVAL", "Preemptive cleanup, due to previous errors", "WORKFLOW_XID_45"),
    (46, "ROBUST_CHANNEL_GPU_TIMEOUT_ERROR", "GPU stopped processing", "RESET_GPU"),
    (48, "ROBUST_CHANNEL_GPU_ECC_DBE", "Double Bit ECC Error", "WORKFLOW_XID_48"),
    (54, "SILENT_RUNNING_PWR_REDUCED_CLOCKING", "Auxiliary power is not connected to the GPU board", "CHECK_MECHANICALS"),
    (60, "ROBUST_CHANNEL_SEC2_ERROR", "Video processor exception", "RESTART_APP"),
    (61, "PMU_BREAKPOINT", "Internal micro-controller breakpoint/warning", "CONTACT_SUPPORT"),
    (62, "PMU_HALT_ERROR", "Internal micro-controller halt", "RESET_GPU"),
    (63, "INFOROM_DRAM_RETIREMENT_EVENT", "GPU memory remapping event", "IGNORE"),
    (64, "INFOROM_DRAM_RETIREMENT_FAILURE", "GPU memory remapping failure", "RESET_GPU"),
    (66, "ROBUST_CHANNEL_FECS_ERR_REG_ACCESS_VIOLATION", "Illegal access by driver", "IGNORE"),
    (67, "ROBUST_CHANNEL_FECS_ERR_VERIF_VIOLATION", "Illegal access by driver", "IGNORE"),
    (68, "ROBUST_CHANNEL_NVDEC0_ERROR", "NVDEC0 Exception", "RESTART_APP"),
    (69, "ROBUST_CHANNEL_GR_CLASS_ERROR", "Graphics Engine class error", "RESTART_APP"),
    (70, "ROBUST_CHANNEL_CE3_ERROR", "CE3: Unknown Error", "RESTART_APP"),
    (71, "ROBUST_CHANNEL_CE4_ERROR", "CE4: Unknown Error", "RESTART_APP"),
    (72, "ROBUST_CHANNEL_CE5_ERROR", "CE5: Unknown Error", "RESTART_APP"),
    (74, "NVLINK_ERROR", "NVLINK Error", "WORKFLOW_NVLINK_ERR"),
    (75, "ROBUST_CHANNEL_CE6_ERROR", "CE6: Unknown Error", "RESTART_APP"),
    (76, "ROBUST_CHANNEL_CE7_ERROR", "CE7: Unknown Error", "RESTART_APP"),
    (77, "ROBUST_CHANNEL_CE8_ERROR", "CE8: Unknown Error", "RESTART_APP"),
    (78, "VGPU_START_ERROR", "vGPU Start Error", "UPDATE_SWFW"),
    (79, "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS", "GPU has fallen off the bus", "RESTART_BM"),
    (80, "PBDMA_PUSHBUFFER_CRC_MISMATCH", "Corrupted data sent to GPU", "RESTART_APP"),
    (82, "ROBUST_CHANNEL_NVJPG0_ERROR", "NVJPG0 Error", "RESTART_APP"),
    (83, "ROBUST_CHANNEL_NVDEC1_ERROR", "NVDEC1 Error", "RESTART_APP"),
    (84, "ROBUST_CHANNEL_NVDEC2_ERROR", "NVDEC2 Error", "RESTART_APP"),
    (85, "ROBUST_CHANNEL_CE9_ERROR", "CE9: Unknown Error", "RESTART_APP"),
    (86, "ROBUST_CHANNEL_OFA0_ERROR", "OFA Exception", "RESTART_APP"),
    (88, "ROBUST_CHANNEL_NVDEC3_ERROR", "NVDEC3 Error", "RESTART_APP"),
    (89, "ROBUST_CHANNEL_NVDEC4_ERROR", "NVDEC4 Error", "RESTART_APP"),
    (92, "EXCESSIVE_SBE_INTERRUPTS", "High single-bit ECC error rate", "IGNORE"),
    (93, "INFOROM_ERASE_LIMIT_EXCEEDED", "Non-fatal violation of provisioned InfoROM wear limit", "IGNORE"),
    (94, "ROBUST_CHANNEL_CONTAINED_ERROR", "Contained memory error", "RESTART_APP"),
    (95, "ROBUST_CHANNEL_UNCONTAINED_ERROR", "Uncontained memory error", "RESET_GPU"),
    (96, "ROBUST_CHANNEL_NVDEC5_ERROR", "NVDEC5 Error", "RESTART_APP"),
    (97, "ROBUST_CHANNEL_NVDEC6_ERROR", "NVDEC6 Error", "RESTART_APP"),
    (98, "ROBUST_CHANNEL_NVDEC7_ERROR", "NVDEC7 Error", "RESTART_APP"),
    (99, "ROBUST_CHANNEL_NVJPG1_ERROR", "NVJPG1 Error", "RESTART_APP"),
    (100, "ROBUST_CHANNEL_NVJPG2_ERROR", "NVJPG2 Error", "RESTART_APP"),
    (101, "ROBUST_CHANNEL_NVJPG3_ERROR", "NVJPG3 Error", "RESTART_APP"),
    (102, "ROBUST_CHANNEL_NVJPG4_ERROR", "NVJPG4 Error", "RESTART_APP"),
    (103, "ROBUST_CHANNEL_NVJPG5_ERROR", "NVJPG5 Error", "RESTART_APP"),
    (104, "ROBUST_CHANNEL_NVJPG6_ERROR", "NVJPG6 Error", "RESTART_APP"),
    (105, "ROBUST_CHANNEL_NVJPG7_ERROR", "NVJPG7 Error", "RESTART_APP"),
    (106, "SMBPBI_TEST_MESSAGE", "SMBPBI Test Message", "IGNORE"),
    (107, "SMBPBI_TEST_MESSAGE_SILENT", "SMBPBI Test Message Silent", "IGNORE"),
    (108, "NVLINK_REMOTE_TRANSLATION_ERROR", "NVLink remote translation error", "IGNORE"),  # described "Unused"
    (109, "ROBUST_CHANNEL_CTXSW_TIMEOUT_ERROR", "Context Switch Timeout Error", "RESET_GPU"),
    (110, "SEC_FAULT_ERROR", "Security Fault Error", "RESET_GPU"),
    (119, "GSP_RPC_TIMEOUT", "GSP RPC Timeout", "RESET_GPU"),
    (120, "GSP_ERROR", "GSP Error", "RESET_GPU"),
    (121, "C2C_ERROR", "C2C Error", "IGNORE"),
    (126, "ROBUST_CHANNEL_CE10_ERROR", "CE10: Unknown Error", "RESTART_APP"),
    (127, "ROBUST_CHANNEL_CE11_ERROR", "CE11: Unknown Error", "RESTART_APP"),
    (128, "ROBUST_CHANNEL_CE12_ERROR", "CE12: Unknown Error", "RESTART_APP"),
    (129, "ROBUST_CHANNEL_CE13_ERROR", "CE13: Unknown Error", "RESTART_APP"),
    (130, "ROBUST_CHANNEL_CE14_ERROR", "CE14: Unknown Error", "RESTART_APP"),
    (131, "ROBUST_CHANNEL_CE15_ERROR", "CE15: Unknown Error", "RESTART_APP"),
    (132, "ROBUST_CHANNEL_CE16_ERROR", "CE16: Unknown Error", "RESTART_APP"),
    (133, "ROBUST_CHANNEL_CE17_ERROR", "CE17: Unknown Error", "RESTART_APP"),
    (134, "ROBUST_CHANNEL_CE18_ERROR", "CE18: Unknown Error", "RESTART_APP"),
    (135, "ROBUST_CHANNEL_CE19_ERROR", "CE19: Unknown Error", "RESTART_APP"),
    (136, "ALI_TRAINING_FAIL", "Link Training Failed", "RESET_GPU"),
    (137, "NVLINK_PRIV_ERR", "NVLink Privilege Error", "IGNORE"),
    (139, "ROBUST_CHANNEL_OFA1_ERROR", "OFA1 Error", "RESTART_APP"),
    (140, "UNRECOVERABLE_ECC_ERROR_ESCAPE", "ECC Unrecovered Error", "RESET_GPU"),
    (141, "ROBUST_CHANNEL_FAST_PATH_ERROR", "CUDA Fast Path Error", "IGNORE"),
    (142, "ROBUST_CHANNEL_NVENC3_ERROR", "NVENC3 Error", "CONTACT_SUPPORT"),
    (143, "GPU_INIT_ERROR", "GPU Initialization Error", "RESET_GPU"),
    (144, "NVLINK_SAW_ERROR", "NVLINK: SAW Error", "WORKFLOW_NVLINK5_ERR"),
    (145, "NVLINK_RLW_ERROR", "NVLINK: RLW Error", "WORKFLOW_NVLINK5_ERR"),
    (146, "NVLINK_TLW_ERROR", "NVLINK: TLW Error", "WORKFLOW_NVLINK5_ERR"),
    (147, "NVLINK_TREX_ERROR", "NVLINK: TREX Error", "WORKFLOW_NVLINK5_ERR"),
    (148, "NVLINK_NVLPW_CTRL_ERROR", "NVLINK: NVLPW_CTRL Error", "WORKFLOW_NVLINK5_ERR"),
    (149, "NVLINK_NETIR_ERROR", "NVLINK: NETIR Error", "WORKFLOW_NVLINK5_ERR"),
    (150, "NVLINK_MSE_ERROR", "NVLINK: MSE Error", "WORKFLOW_NVLINK5_ERR"),
    (151, "ROBUST_CHANNEL_KEY_ROTATION_ERROR", "Key rotation Error", "RESTART_VM"),
    (152, "ROBUST_CHANNEL_DLA_SMMU_ERROR", "DLA SMMU Error", "IGNORE"),
    (153, "ROBUST_CHANNEL_DLA_TIMEOUT", "DLA timeout Error", "IGNORE"),
    (154, "GPU_RECOVERY_ACTION_CHANGED", "GPU Recovery Action Changed", "XID_154"),
    (155, "NVLINK_SW_DEFINED_ERROR", "NVLINK: SW Defined Error", "RESET_GPU"),
    (156, "RESOURCE_RETIREMENT_EVENT", "Resource Retirement Event", "RESET_GPU"),
    (157, "RESOURCE_RETIREMENT_FAILURE", "Resource Retirement Failure", "IGNORE"),
    (158, "GPU_FATAL_TIMEOUT", "GPU Fatal Timeout", "RESET_GPU"),
    (159, "ROBUST_CHANNEL_CHI_NON_DATA_ERROR", "CHI Non-Data Error", "CHECK_UVM"),
    (160, "CHANNEL_RETIREMENT_EVENT", "Channel Retirement Event", "IGNORE"),
    (161, "CHANNEL_RETIREMENT_FAILURE", "Channel Retirement Failure", "IGNORE"),
)


def _catalog_entry(mnemonic, description, bucket):
    action = _BUCKET_ACTIONS[bucket]
    return {"name": description, "mnemonic": mnemonic, "bucket": bucket, "action": action,
            "severity": _SEVERITIES[action]}


XID_CATALOG = dict((row[0], _catalog_entry(*row[1:])) for row in _CATALOG_ROWS)

UNKNOWN_XID = {"name": "unknown", "mnemonic": None, "bucket": None, "action": "report",
               "severity": _SEVERITIES["report"]}
FALLEN_OFF_BUS = {"name": "GPU has fallen off the bus", "mnemonic": None, "bucket": "RESTART_BM",
                  "action": "reboot", "severity": _SEVERITIES["reboot"]}

# Xid 154 names the new recovery action: "... changed from 0x0 (None) to 0x1 (GPU Reset Required)".
# "[^()]" (not "[^)]"): a scan stops at the next "(", so that "to 0x1 (" repeated is read in linear time.
_XID154_TARGET_RE = RegexOnFirstUse(lambda: re.compile(r"\bto\s+0x[0-9A-Fa-f]+\s*\(([^()]*)\)"))
_RECOVERY_TEXT = (
    ("drain and reset", "drain_and_reset", "reset_gpu"),
    ("drain p2p", "drain_p2p", "report"),
    ("reboot", "reboot", "reboot"),
    ("reset", "reset", "reset_gpu"),
    ("none", "none", "none"),
)

# Line prefixes, tried on the text before "NVRM:"; the first that matches gives the printed time and its kind. These
# patterns, and those below, are compiled on first use: a healthy node's kernel log has no NVRM line to read.
_TIME_PATTERNS = (
    ("ctime", RegexOnFirstUse(lambda: re.compile(r"\[([A-Z][a-z]{2} [A-Z][a-z]{2} +\d{1,2} \d\d:\d\d:\d\d \d{4})\]"))),  # dmesg -T / --ctime
    ("iso", RegexOnFirstUse(lambda: re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?)"))),  # journalctl -o short-iso
    ("syslog", RegexOnFirstUse(lambda: re.compile(r"([A-Z][a-z]{2} +\d{1,2} \d\d:\d\d:\d\d)"))),  # journalctl short / syslog
    ("uptime", RegexOnFirstUse(lambda: re.compile(r"\[\s*(\d+\.\d+)\]"))),  # dmesg: seconds since boot
)
_ISO_RE = RegexOnFirstUse(lambda: re.compile(r"^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:[.,](\d+))?(Z|[+-]\d\d:?\d\d)?$"))
_A_DAY = 86400.0
# "Xid (PCI:0000:01:00): 94, ...", on a MIG GPU "Xid (PCI:0000:01:00 GPU-I:05 GPU-CI:00): 94, ..." (GPU-CI optional).
# The numbers as the kernel prints them (ASCII; instance ids two digits): a line with others is no Xid line, never an
# event widened to the whole GPU, and no number is too long for int().
_XID_RE = RegexOnFirstUse(lambda: re.compile(r"^Xid \((?:PCI:)?(?P<bus>[0-9A-Fa-f:.]+)(?:\s+GPU-I:(?P<gi>[0-9]{1,2}))?(?:\s+GPU-CI:(?P<ci>[0-9]{1,2}))?\s*\):"
                                             r"\s*(?P<xid>[0-9]{1,9})(?:,\s*(?P<rest>.*))?$"))
# "pid=123, name=x, msg", "pid='<unknown>', name=<unknown>, msg", "pid=0, msg" (no name), "pid=8494,   name=x, msg".
# A pid has at most 7 digits (PID_MAX_LIMIT 4194304): a longer number is no pid.
_PID_RE = RegexOnFirstUse(lambda: re.compile(r"^pid='?(?P<pid><unknown>|[0-9]{1,7})'?(?:,\s*|$)(?P<rest>.*)$"))
_NAME_RE = RegexOnFirstUse(lambda: re.compile(r"^name='?(?P<name>.*?)'?(?:,\s*(?P<message>.*))?$"))
# Xid 94/95 end with "RST: Yes|No, D-RST: Yes|No": the driver marked the GPU for a reset (or a drain and reset).
_RESET_REQUIRED_RE = RegexOnFirstUse(lambda: re.compile(r"\b(D-)?RST:\s*Yes\b"))
_BUS_IN_TEXT_RE = RegexOnFirstUse(lambda: re.compile(r"(?:PCI:)?((?:[0-9A-Fa-f]{4,8}:)?[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-7])?)"))
_FALLEN = "fallen off the bus"
_MULTILINE_START_RE = RegexOnFirstUse(lambda: re.compile(r"^The NVIDIA GPU (?P<bus>\S+)"))
_MULTILINE_LOOKAHEAD = 4


# A kernel line is short: printk keeps at most 1 KiB of a message, and the head before it (time, host, tag, the kernel's
# own stamp) is a few hundred characters. Longer lines are no kernel line, and are never matched (bounded time).
MAX_LINE_CHARS = 8192
MAX_HEAD_CHARS = 512
# The tag the kernel's lines carry in a syslog file ("host kernel: ..."): no pid, unlike any program's ("kernel[42]:").
KERNEL_TAG = "kernel:"


def kernel_line(line):
    """Whether a line may be the kernel's: the one rule every reader of kernel lines applies (docs/safety.md).

    A line without "NVRM:" passes (nothing is read from it). An NVRM line is the kernel's when its head - the text
    before "NVRM:", less a trailing "[...]" stamp - is empty (dmesg, /dev/kmsg, the driver's continuation lines) or ends
    with the kernel's tag "kernel:" and holds no other word ending in ":" (syslog and journalctl -k: "time host
    kernel:"). A user's `logger` line is tagged with its own name ("alice[4242]:"), also `logger -t kernel` under
    journald ("kernel[4242]:"), and words further on in a message ("sshd[9]: x kernel: NVRM: ...") are that message's.
    """
    if len(line) > MAX_LINE_CHARS:
        return False
    split = _split_nvrm(line)
    if split is None:
        return True
    if len(split[0]) > MAX_HEAD_CHARS:
        return False
    words = without_trailing_brackets(split[0]).split()
    if not words:
        return True
    tags = [word for word in words if word.endswith(":")]
    return tags == [KERNEL_TAG] and words[-1] == KERNEL_TAG


def kernel_lines(lines):
    """(the lines kernel_line keeps, the NVRM lines it refuses), in order."""
    kept, refused = [], []
    for line in lines:
        (kept if kernel_line(line) else refused).append(line)
    return kept, refused


def _split_nvrm(line):
    """Return (prefix, message after "NVRM: ") or None when the line is not an NVRM line."""
    at = line.find("NVRM:")
    if at < 0:
        return None
    return line[:at], line[at + len("NVRM:"):].strip()


def _printed_time(prefix):
    """(time as printed, its kind) or (None, None)."""
    for kind, pattern in _TIME_PATTERNS:
        match = pattern.search(prefix)
        if match:
            return match.group(1), kind
    return None, None


def _iso_epoch(text):
    match = _ISO_RE.match(text)
    if not match:
        return None
    year, month, day, hour, minute, second = (int(part) for part in match.groups()[:6])
    fraction = float("0." + match.group(7)) if match.group(7) else 0.0
    zone = match.group(8)
    if zone is None:  # no offset printed: local time
        return time.mktime((year, month, day, hour, minute, second, 0, 0, -1)) + fraction
    offset = 0
    if zone != "Z":
        sign = -1 if zone[0] == "-" else 1
        digits = zone[1:].replace(":", "")
        offset = sign * (int(digits[:2]) * 3600 + int(digits[2:]) * 60)
    return calendar.timegm((year, month, day, hour, minute, second, 0, 0, 0)) + fraction - offset


def time_epoch(printed, kind, boot_time=None, now=None):
    """Seconds since the epoch of a printed kernel log time, or None when it cannot be known.

    dmesg prints seconds since boot (needs `boot_time`, the epoch of the boot); dmesg -T, journalctl short and
    syslog print the local wall clock (syslog without the year: the latest year that is not in the future);
    short-iso prints its offset.
    """
    try:
        if kind == "uptime":
            return None if boot_time is None else float(boot_time) + float(printed)
        if kind == "iso":
            return _iso_epoch(printed)
        if kind == "ctime":
            return time.mktime(time.strptime(printed, "%a %b %d %H:%M:%S %Y"))
        if kind == "syslog":
            now = time.time() if now is None else now
            year = time.localtime(now).tm_year
            stamp = time.mktime(time.strptime("%d %s" % (year, printed), "%Y %b %d %H:%M:%S"))
            return stamp if stamp <= now + _A_DAY else time.mktime(time.strptime("%d %s" % (year - 1, printed), "%Y %b %d %H:%M:%S"))
    except (ValueError, OverflowError):
        return None
    return None


def _xid154_catalog(message):
    """Catalog for Xid 154 with the action taken from the recovery action the line names."""
    entry = dict(XID_CATALOG[154])
    match = _XID154_TARGET_RE.search(message or "")
    target = (match.group(1) if match else message or "").lower()
    for text, recovery, action in _RECOVERY_TEXT:
        if text in target:
            entry.update(action=action, severity=_SEVERITIES[action], recovery_action=recovery)
            break
    return entry


def catalog_for(xid, message=None):
    """The catalog entry for an Xid (a copy); unknown codes give name "unknown", action "report".

    Xid 94/95 whose line says "RST: Yes" or "D-RST: Yes" ask for a reset whatever the catalog's immediate action.
    """
    if xid == 154:
        return _xid154_catalog(message)
    entry = dict(XID_CATALOG.get(xid, UNKNOWN_XID))
    required = _RESET_REQUIRED_RE.search(message or "") if xid in (94, 95) else None
    if required:
        entry.update(action="reset_gpu", severity=_SEVERITIES["reset_gpu"],
                     recovery_action="drain_and_reset" if required.group(1) else "reset")
    return entry


def _event(kind, line, stamp, message, bus=None, xid=None, pid=None, process_name=None, catalog=None, instances=(None, None)):
    printed, epoch = stamp
    return {
        "kind": kind,
        "xid": xid,
        "pci_bus_id": normalize_bus_id(bus) if bus else None,
        "gpu_instance_id": instances[0],
        "compute_instance_id": instances[1],
        "time": printed,
        "time_epoch": epoch,
        "pid": pid,
        "process_name": process_name,
        "message": message,
        "line": line,
        "catalog": catalog,
    }


def _owner(rest):
    """(pid, process name, message) from the text after the code; pid and name None where not printed."""
    owner = _PID_RE.match(rest)
    if not owner:
        return None, None, rest
    pid = None if owner.group("pid") == "<unknown>" else int(owner.group("pid"))
    message = owner.group("rest")
    named = _NAME_RE.match(message)
    if not named:
        return pid, None, message
    name = named.group("name").strip()
    return pid, None if name in ("<unknown>", "") else name, named.group("message") or ""


def _optional_int(text):
    return None if text is None else int(text)


def _xid_event(line, stamp, match):
    xid = int(match.group("xid"))
    pid, process_name, message = _owner(match.group("rest") or "")
    return _event("xid", line, stamp, message, bus=match.group("bus"), xid=xid, pid=pid,
                  process_name=process_name, catalog=catalog_for(xid, message),
                  instances=(_optional_int(match.group("gi")), _optional_int(match.group("ci"))))


def _multiline_fallen_off(lines, start, stamp, first_text):
    """The driver prints "The NVIDIA GPU <bus>" / "(PCI ID: ...) installed ... has" / "fallen off the bus ..."
    as one message over several lines; join them into one event. Returns (event, lines consumed) or None.
    """
    texts = [first_text]
    for offset in range(1, _MULTILINE_LOOKAHEAD):
        if start + offset >= len(lines):
            break
        split = _split_nvrm(lines[start + offset])
        if split is None:
            break
        texts.append(split[1])
        if _FALLEN in split[1]:
            bus = _MULTILINE_START_RE.match(first_text).group("bus")
            raw = "\n".join(lines[start:start + offset + 1])
            return _event("fallen_off_bus", raw, stamp, " ".join(texts), bus=bus,
                          catalog=dict(FALLEN_OFF_BUS)), offset + 1
    return None


def parse_kernel_log(text, boot_time=None, now=None):
    """NVRM Xid and "fallen off the bus" events of the kernel's lines (kernel_line), in log order (see docs/internals.md
    for the shape). Every line is read once, in time linear in its length.

    `boot_time` (epoch of the boot) turns dmesg's seconds since boot into `time_epoch`; `now` (epoch) dates
    syslog lines, which print no year (default: the current time).
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    # Lines end at "\n" only: splitlines() would also end one at U+2028, U+0085, \x1c or \x0b inside a user's syslog
    # message, and what follows would stand as a line of its own with no tag (as dmesg's lines are).
    lines = kernel_lines(line.rstrip("\r") for line in text.split("\n"))[0]
    events = []
    index = 0
    while index < len(lines):
        line = lines[index]
        split = _split_nvrm(line)
        consumed = 1
        if split is not None:
            prefix, message = split
            printed, kind = _printed_time(prefix)
            stamp = (printed, time_epoch(printed, kind, boot_time, now) if printed else None)
            xid_match = _XID_RE.match(message)
            if xid_match:
                events.append(_xid_event(line, stamp, xid_match))
            elif _FALLEN in message:
                bus = _BUS_IN_TEXT_RE.search(message)
                events.append(_event("fallen_off_bus", line, stamp, message, bus=bus.group(1) if bus else None,
                                     catalog=dict(FALLEN_OFF_BUS)))
            elif _MULTILINE_START_RE.match(message):
                joined = _multiline_fallen_off(lines, index, stamp, message)
                if joined:
                    events.append(joined[0])
                    consumed = joined[1]
        index += consumed
    return events


def device_key(bus_id):
    """"00000000:3B:00.0" -> "00000000:3B:00": kernel lines name the device, not the function."""
    normalized = normalize_bus_id(bus_id)
    return normalized.rsplit(".", 1)[0] if normalized else None


def bus_id_to_index(events, gpus):
    """Set "gpu_index" on every event (in place) from the GPU on the same domain:bus:device, else None.

    Returns the same list, so both `bus_id_to_index(events, gpus)` and `events = bus_id_to_index(...)` work.
    """
    by_device = {}
    for gpu in gpus:
        key = device_key(gpu.get("pci_bus_id"))
        if key is not None:
            by_device[key] = gpu.get("index")
    for event in events:
        event["gpu_index"] = by_device.get(device_key(event.get("pci_bus_id")))
    return events


def kernel_log_argv(source, since_minutes=None, journalctl="journalctl", dmesg="dmesg"):
    """argv that prints the kernel log: source "journal" (journalctl) or "dmesg".

    dmesg cannot select a time window; its whole ring buffer is read (`since_minutes` is ignored).
    """
    if source == "journal":
        argv = [journalctl, "-k", "-o", "short-iso", "--no-pager"]
        if since_minutes is not None:
            argv += ["--since", "-%dmin" % int(since_minutes)]
        return argv
    if source == "dmesg":
        return [dmesg, "-T"]
    raise ValueError("unknown kernel log source %r (expected 'journal' or 'dmesg')" % (source,))


# The most of a kernel log file read: its last 64 MiB (the recent lines; a syslog file may hold months).
MAX_FILE_BYTES = 64 * 1024 * 1024


def open_log_file(path):
    """The kernel log file opened for reading (binary): a FIFO or a device there never blocks the open nor a read, it
    is refused (OSError naming the path)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", path)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_log_tail(path, limit=MAX_FILE_BYTES):
    """The text of the file's last `limit` bytes, from its first whole line."""
    with open_log_file(path) as handle:
        size = os.fstat(handle.fileno()).st_size
        if size > limit:
            handle.seek(size - limit)
            data = handle.read(limit)
            return data[data.find(b"\n") + 1:].decode("utf-8", "replace")
        return handle.read(limit).decode("utf-8", "replace")


def probe_kernel_log(module, layout, options, boot_epoch=None):
    report = {"source": options.kernel_log_source, "ok": True, "error": None}
    source = options.kernel_log_source
    if source == "none":
        return [], report
    if source == "auto":
        if options.kernel_log_path or layout.kernel_log_file:
            source = "file"
        else:
            source = "journal" if module.get_bin_path("journalctl") else "dmesg"
    report["source"] = source
    if source == "file":
        path = options.kernel_log_path or layout.kernel_log_file
        try:
            text = read_log_tail(path)
        except (IOError, OSError) as exc:
            report.update(ok=False, error="cannot read %s: %s" % (path, exc))
            return [], report
    else:
        tool = module.get_bin_path("journalctl" if source == "journal" else "dmesg")
        if not tool:
            report.update(ok=False, error="%s is not installed" % ("journalctl" if source == "journal" else "dmesg"))
            return [], report
        argv = kernel_log_argv(source, options.kernel_log_window, **{("journalctl" if source == "journal" else "dmesg"): tool})
        rc, text, err = CommandRunner(module).probe(argv)
        if rc != 0:
            report.update(ok=False, error=(err or text).strip() or "exit %d" % rc)
            return [], report
    return apply_policy(parse_kernel_log(text, boot_time=boot_epoch), parse_policy(getattr(options, "xid_policy", None))), report
