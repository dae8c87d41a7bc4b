# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The gpu_kernel_log event source's decisions: the Xid policy it loads, the kernel lines (from a file, /dev/kmsg or
the journal, each trusted only from the kernel) turned into events, less those throttled or answered by a remediation
the same log reported (the closed loop).
"""

from __future__ import annotations

import datetime
import os
import time

from ansible_collections.gpuops.remediation.plugins.module_utils.journal._writer import SYSLOG_IDENTIFIER
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._kernel_log import (
    MAX_LINE_CHARS, _MULTILINE_START_RE, _split_nvrm, device_key, kernel_lines, open_log_file, parse_kernel_log,
)
from ansible_collections.gpuops.remediation.plugins.module_utils._xid_policy import (
    PolicyError, apply_policy, event_rung, parse_policy,
)
from ansible_collections.gpuops.remediation.plugins.module_utils._node import current_layout
from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda._event_selection import selection_fields
from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda._root_answers import RootAnswers
from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda._source_shared import OptionError


def root_answers(journal_path):
    """What confirms the answers read from files: root's action journal at journal_path, by default where the
    collection's modules write it on this machine (the simulated node's, under GPUOPS_SIM_ROOT)."""
    return RootAnswers(journal_path or current_layout().journal_file)


# The largest Xid policy file read (a policy is a few lines; a larger file is no policy).
POLICY_FILE_BYTES = 1024 * 1024


def load_policy(source, inline, path):
    """The Xid policy (_xid_policy.parse_policy) from the inline mapping and/or the file an operator keeps in the
    inventory (YAML or JSON; the mapping itself, or under the key gpuops_xid_policy as in group_vars)."""
    merged = {}
    if path:
        try:
            with open_log_file(path) as handle:  # a FIFO or a device there is refused, never waited on
                if os.fstat(handle.fileno()).st_size > POLICY_FILE_BYTES:
                    raise OptionError("%s: option xid_policy_file: %s is larger than 1 MiB: no Xid policy is" % (source, path))
                text = handle.read(POLICY_FILE_BYTES).decode("utf-8")
        except (IOError, OSError, UnicodeDecodeError) as exc:
            raise OptionError("%s: option xid_policy_file: cannot read %s: %s" % (source, path, exc))
        import yaml  # ansible-core's dependency; only this option needs it

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise OptionError("%s: option xid_policy_file: %s is not YAML: %s" % (source, path, exc))
        if isinstance(data, dict) and "gpuops_xid_policy" in data:
            data = data["gpuops_xid_policy"]
        merged.update(_parsed(source, data, "xid_policy_file (%s)" % path))
    merged.update(_parsed(source, inline, "xid_policy"))
    return merged


def _parsed(source, data, option):
    try:
        return parse_policy(data, option=option)
    except PolicyError as exc:
        raise OptionError("%s: %s" % (source, exc))


class Answers:
    """The closed loop: remediations seen in the log (host, GPU device or None for all, epoch); an event of the same
    host and GPU dated at or before one was answered by it."""

    def __init__(self):
        self._done = []

    def record(self, remediation):
        self._done.append(remediation)

    def answered_by(self, host, bus_id, epoch):
        if epoch is None:
            return None
        key = device_key(bus_id) if bus_id else None
        for done in reversed(self._done):
            if done["host"] != host or done["epoch"] is None or epoch > done["epoch"]:
                continue
            if not done["gpus"] or key is None or key in done["gpus"]:
                return done
        return None


def _remediation_tag(word):
    """Whether a syslog tag is ours: "gpuops-remediation:" or "gpuops-remediation[<pid>]:"."""
    if word == SYSLOG_IDENTIFIER + ":":
        return True
    pid = word[len(SYSLOG_IDENTIFIER) + 1:-2]
    return word.startswith(SYSLOG_IDENTIFIER + "[") and word.endswith("]:") and pid.isascii() and pid.isdigit()


def remediation_of(line, default):
    """The remediation a `gpuops-remediation` syslog line reports ({"host", "action", "gpus": [device keys],
    "epoch", "run"}), or None for any other line (also one whose tag is not gpuops-remediation: the words are in another
    program's message). `default` is the host when the line names none.

    The tag is the line's first word ending in ":" and each word after it a key=value field; read with str.split, in
    time linear in the line (a pattern of repeated fields backtracks exponentially on "a=a=a=..."), and only up to
    MAX_LINE_CHARS."""
    if len(line) > MAX_LINE_CHARS or SYSLOG_IDENTIFIER not in line:
        return None
    words = line.split()
    tag = next((at for at, word in enumerate(words) if word.endswith(":")), None)
    if tag is None or not _remediation_tag(words[tag]):
        return None  # the identifier is not the line's tag: the words are in another program's message
    fields = words[tag + 1:]
    if not fields or not all(field.find("=", 1) > 0 for field in fields):
        return None
    fields = dict(field.split("=", 1) for field in fields)
    try:
        epoch = float(fields["epoch"])
    except (KeyError, ValueError):
        epoch = None
    gpus = [device_key(bus) for bus in (fields.get("gpus") or "").split(",") if bus and device_key(bus)]
    return {"host": fields.get("host") or default, "action": fields.get("action"), "gpus": gpus, "epoch": epoch,
            "run": fields.get("run")}


def kernel_event(host, parsed):
    """The event put on the queue for one parsed kernel line (parse_kernel_log's shape, after apply_policy)."""
    catalog = parsed.get("catalog") or {}
    body = {
        "type": parsed["kind"],
        "host": host,
        "pci_bus_id": parsed.get("pci_bus_id"),
        "gpu": parsed.get("pci_bus_id"),
        "xid": parsed.get("xid"),
        "name": catalog.get("name"),
        "action": catalog.get("action"),
        "catalog_action": catalog.get("catalog_action", catalog.get("action")),
        "policy": catalog.get("policy", "catalog"),
        "rung": event_rung(parsed) or "none",
        "pid": parsed.get("pid"),
        "process_name": parsed.get("process_name"),
        "message": parsed.get("message"),
        "time": parsed.get("time"),
        "time_epoch": parsed.get("time_epoch"),
        "line": parsed.get("line"),
    }
    # The MIG instance an Xid line names (GPU-I, GPU-CI): the event selects it alone.
    body.update(selection_fields(parsed.get("pci_bus_id"), parsed.get("gpu_instance_id"), parsed.get("compute_instance_id")))
    return {"gpuops": body, "meta": {"hosts": host}}


def throttle_key(body):
    """Repeats are the same condition on the same host and GPU, or MIG instance: (host, GPU device, instance, what).
    An Xid in one instance never holds back the same Xid in a neighbour's."""
    what = body.get("xid") if body["type"] == "xid" else body["type"]
    instance = (body.get("gpu_instance_id"), body.get("compute_instance_id"))
    return (body["host"], device_key(body.get("gpu")) if body.get("gpu") else None, instance, what)


def pending_tail(lines):
    """How many of the last lines may be the start of a multi-line "fallen off the bus" message still being written."""
    for back in range(1, min(4, len(lines)) + 1):
        split = _split_nvrm(lines[-back])
        if split and _MULTILINE_START_RE.match(split[1]):
            tail = lines[-back:]
            return 0 if any("fallen off the bus" in line for line in tail) else back
    return 0


# How far a node's clock may run ahead of the rulebook's machine (a collector's files of other nodes).
CLOCK_SKEW_SECONDS = 300
# How many lines dated ahead of the clock a host's source remembers the first sighting of (the oldest forgotten first).
AHEAD_KEPT = 4096


class KernelLines:
    """Turns the lines of one host's log into events: Xid and fallen-off-the-bus lines, less those throttled or
    answered by a remediation the same log reported (the closed loop)."""

    def __init__(self, host, policy, throttle, boot_time=None, root_answers=None):
        self.host = host
        self.policy = policy
        self.throttle = throttle
        self.boot_time = boot_time
        # A file's lines (_root_answers.RootAnswers): an answer only when root's journal confirms it. None: the lines
        # come from where only root writes them (journal_lines keeps root's alone).
        self.root_answers = root_answers
        self.answers = Answers()
        self.ahead = {}  # line dated ahead of the clock -> when it first came (_placed)
        self.held = []
        self.dropped = []

    def _placed(self, body, now):
        """The time an event is answered against: its own, or - dated ahead of now beyond the clock skew, written while
        the node's clock ran ahead - when its line first came (no remediation could be dated after its own time, and
        every late copy of it would start a run again)."""
        if body["time_epoch"] is None or body["time_epoch"] <= now + CLOCK_SKEW_SECONDS:
            return body["time_epoch"]
        if body["line"] not in self.ahead:
            if len(self.ahead) >= AHEAD_KEPT:
                del self.ahead[next(iter(self.ahead))]
            self.ahead[body["line"]] = now
        return self.ahead[body["line"]]

    def _answer(self, line):
        """The remediation a line reports, as root recorded it (None: no remediation line, or one root did not write)."""
        done = remediation_of(line, self.host)
        if done is None or self.root_answers is None:
            return done
        trusted, why = self.root_answers.confirmed(done, self.host)
        if trusted is None:
            self.dropped.append({"line": line, "why": why})
        return trusted

    def recall(self, lines, now, window):
        """Record the remediations these lines report, dated within `window` seconds before now (and not after it): at
        its start, the source reads back the answers it knew before a restart, so that a late copy of an Xid a reset
        already answered starts no second run. Returns how many; the lines make no event."""
        count = 0
        for line in lines:
            done = self._answer(line)
            if done and done["epoch"] is not None and now - window <= done["epoch"] <= now + CLOCK_SKEW_SECONDS:
                self.answers.record(done)
                count += 1
        return count

    def feed(self, lines, now, final=False, since=None):
        """Events of these complete lines (a multi-line message cut at the end is held for the next call). With `since`
        (the epoch the source started; given when a file that appeared or was replaced after it was read from its
        start), a line dated before it by more than the clock skew is an old one the file already held: no event."""
        lines = self.held + list(lines)
        keep = 0 if final else pending_tail(lines)
        self.held = lines[len(lines) - keep:] if keep else []
        lines = lines[:len(lines) - keep] if keep else lines
        for line in lines:
            done = self._answer(line)
            # A remediation is dated when its line is written: one dated after now (beyond clock skew) is no answer;
            # taken, it would drop every later Xid of the host (any user can write that line with logger).
            if done and done["epoch"] is not None and done["epoch"] <= now + CLOCK_SKEW_SECONDS:
                self.answers.record(done)
        events = []
        lines, refused = kernel_lines(lines)
        self.dropped += [{"line": line, "why": "not the kernel's line (its tag is another program's)"} if len(line) <= MAX_LINE_CHARS
                         else {"line": line[:MAX_LINE_CHARS], "why": "longer than any kernel line (%d characters)" % MAX_LINE_CHARS}
                         for line in refused]
        parsed = apply_policy(parse_kernel_log("\n".join(lines), boot_time=self.boot_time, now=now), self.policy)
        for item in parsed:
            event = kernel_event(self.host, item)
            body = event["gpuops"]
            if since is not None and body["time_epoch"] is not None and body["time_epoch"] < since - CLOCK_SKEW_SECONDS:
                self.dropped.append({"event": body, "why": "dated before the source started, in a file read from its start"})
                continue
            by = self.answers.answered_by(self.host, body["gpu"], self._placed(body, now))
            if by is not None:
                self.dropped.append({"event": body, "why": "answered by %s (run %s)" % (by["action"], by["run"])})
                continue
            if not self.throttle.allow(throttle_key(body), now):
                self.dropped.append({"event": body, "why": "throttled"})
                continue
            events.append(event)
        return events


def kmsg_line(record):
    """A /dev/kmsg record ("pri,seq,usec,flags;text") as dmesg prints it ("[secs.usec] text"), or None."""
    head, sep, text = record.partition(";")
    fields = head.split(",")
    if not sep or len(fields) < 3 or not fields[2].isdigit():
        return None
    usec = int(fields[2])
    return "[%5d.%06d] %s" % (usec // 1000000, usec % 1000000, text.split("\n", 1)[0])


def _split_lines(text):
    """The lines of a file's text, ended at "\\n" (and "\\r\\n") only: str.splitlines() would also end one at U+2028,
    U+0085, \\x1c or \\x0b inside a user's syslog message, and the rest would stand as a line with no tag (as dmesg's)."""
    lines = [line[:-1] if line.endswith("\r") else line for line in text.split("\n")]
    return lines[:-1] if lines and not lines[-1] else lines


class FileTail:
    """The complete lines appended to a file since the last read, from its end at the start.

    The file is kept open between reads. A file replaced (rotated: the path names another inode) is first read to its
    end through the descriptor still open on it - the lines written just before the rotation are not lost - and its
    last line without a newline is taken as complete; then the new file is read from its start. A file truncated is read
    again from its start, also when it grew past the old end before the next read (copytruncate, then writes): the bytes
    before the old end are no longer the ones read. A file missing or unreadable for a while is tried again at the next
    read. `read_from_start` says whether the last read took a file from its start (it appeared or was replaced after
    `started`): what such a file held may predate the source (KernelLines.feed's since)."""

    MARK = 64

    def __init__(self, path):
        self.path = path
        self.started = time.time()
        self.read_from_start = False
        self.handle = None
        self.identity = None
        self.offset = 0
        self.partial = b""
        self.mark = None  # the bytes before offset, when known
        try:
            stat = os.stat(path)
        except OSError:
            return  # not there yet: read from its start once it is
        self.identity, self.offset = (stat.st_dev, stat.st_ino), stat.st_size
        self.handle = self._open(self.identity)
        if self.handle is not None:
            self.offset = os.fstat(self.handle.fileno()).st_size
            self.mark = self._mark(self.offset)
        # unreadable now: its end is still where it was, compared from the next read on

    def _open(self, identity=None):
        """The file opened for reading, or None; with `identity`, only while the path still names that file."""
        try:
            handle = open_log_file(self.path)
        except OSError:
            return None
        stat = os.fstat(handle.fileno())
        if identity is not None and (stat.st_dev, stat.st_ino) != identity:
            handle.close()
            return None
        return handle

    def _mark(self, offset):
        start = max(0, offset - self.MARK)
        self.handle.seek(start)
        return self.handle.read(offset - start)

    def _drain(self):
        """The bytes of the open file after offset (from its start again when it was truncated or rewritten)."""
        size = os.fstat(self.handle.fileno()).st_size
        if size < self.offset or (self.mark is not None and self._mark(self.offset) != self.mark):
            self.offset, self.partial = 0, b""
            self.read_from_start = True
        self.handle.seek(self.offset)
        data = self.handle.read()
        self.offset += len(data)
        self.mark = self._mark(self.offset)
        return data

    def _lines(self, data, final=False):
        """The complete lines of the bytes read, each cut one past MAX_LINE_CHARS (such a line is no kernel line: kept
        that long, it is refused as too long); a line still being written is kept as long as that, no longer."""
        data = self.partial + data
        if final:
            self.partial = b""
            return [line[:MAX_LINE_CHARS + 1] for line in _split_lines(data.decode("utf-8", "replace"))]
        complete, newline, self.partial = data.rpartition(b"\n")
        self.partial = self.partial[:4 * (MAX_LINE_CHARS + 1)]  # bytes: up to 4 a character
        return [line[:MAX_LINE_CHARS + 1] for line in _split_lines(complete.decode("utf-8", "replace"))] if complete or newline else []

    def close(self):
        if self.handle is not None:
            self.handle.close()
            self.handle = None

    def read(self):
        lines = []
        self.read_from_start = False
        try:
            if self.handle is not None:
                lines = self._lines(self._drain())
        except OSError:
            self.close()  # the open file failed (its device went away): opened again below
        try:
            stat = os.stat(self.path)
        except OSError:
            return lines  # gone for now (being rotated): the open file is read on, the new one once it is there
        identity = (stat.st_dev, stat.st_ino)
        if self.handle is not None and identity == self.identity:
            return lines
        handle = self._open()
        if handle is None:
            return lines  # unreadable for now (its mode changed, a directory there): tried again at the next read
        if self.handle is not None:
            lines += self._lines(b"", final=True)  # the old file's last line, which no newline will complete now
            self.close()
        if identity != self.identity:
            self.offset, self.partial, self.mark = 0, b"", None
            self.read_from_start = True
        self.handle, self.identity = handle, (os.fstat(handle.fileno()).st_dev, os.fstat(handle.fileno()).st_ino)
        try:
            lines += self._lines(self._drain())
        except OSError:
            self.close()
        return lines


def kmsg_problem(path, exc, opening):
    """What to report when /dev/kmsg cannot be opened or read."""
    what = "cannot open" if opening else "cannot read"
    hint = " (reading it needs root or CAP_SYSLOG; or use source: journal or file)" if isinstance(exc, PermissionError) else ""
    return "%s %s: %s%s; trying again" % (what, path, exc.strerror or exc, hint)


def kmsg_seq(record):
    """The sequence number of a /dev/kmsg record ("pri,seq,usec,flags;text"), or None."""
    fields = record.partition(";")[0].split(",")
    return int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else None


# journalctl's filter: kernel messages, and our remediation lines (which journal_line trusts only from root).
def journal_argv(journalctl, cursor=None, since=None):
    """journalctl following the journal as JSON: after `cursor` (the last entry read, when it is started again), else
    since `since` (epoch: started again before any entry was read), else from now on."""
    where = ["--after-cursor=%s" % cursor] if cursor else ["--since=@%d" % int(since)] if since is not None else ["--lines=0"]
    return [journalctl, "--follow", "--output=json", "--no-pager"] + where + [
        "_TRANSPORT=kernel", "+", "SYSLOG_IDENTIFIER=%s" % SYSLOG_IDENTIFIER]


def recall_argv(journalctl, since):
    """journalctl reading (not following) the remediation lines written since `since` (epoch): what recall takes at the
    start, root's (_UID 0, which journald sets, not the sender) alone: a user logging forged ones without end would
    otherwise fill the read-back's memory and cost it its deadline. journal_lines checks _UID again."""
    return [journalctl, "--output=json", "--no-pager", "--since=@%d" % int(since), "SYSLOG_IDENTIFIER=%s" % SYSLOG_IDENTIFIER, "_UID=0"]


# How much of a log file's end recall reads at the start (the remediation lines of the window are near the end).
RECALL_BYTES = 16 * 1024 * 1024


def recall_file_lines(path):
    """The lines at the end of a log file (its last RECALL_BYTES) holding our identifier, or [] when it cannot be read
    (the follow reports that)."""
    try:
        handle = open_log_file(path)
    except OSError:
        return []
    with handle:
        size = os.fstat(handle.fileno()).st_size
        handle.seek(max(0, size - RECALL_BYTES))
        data = handle.read(RECALL_BYTES).decode("utf-8", "replace")
    return [line for line in _split_lines(data) if SYSLOG_IDENTIFIER in line and len(line) <= MAX_LINE_CHARS]


def _journal_text(value):
    if isinstance(value, list) and all(isinstance(item, int) for item in value):  # journalctl's form of non-UTF-8 data
        return bytes(item & 0xFF for item in value).decode("utf-8", "replace")
    return value if isinstance(value, str) else None


def journal_lines(entry):
    """The lines a journal entry (one object of journalctl --output=json) stands for, as journalctl -o short-iso prints
    them, when the entry is trusted: a kernel message (_TRANSPORT=kernel, which only the kernel writes), or our
    remediation line from root (SYSLOG_IDENTIFIER gpuops-remediation and _UID 0). Anyone may log a line that calls
    itself "kernel" or "gpuops-remediation" (logger -t): the identifier alone trusts nothing. [] for any other entry."""
    if not isinstance(entry, dict):
        return []
    message = _journal_text(entry.get("MESSAGE"))
    if not message:
        return []
    try:
        when = datetime.datetime.fromtimestamp(int(entry.get("__REALTIME_TIMESTAMP")) / 1e6, datetime.timezone.utc)
    except (TypeError, ValueError, OverflowError, OSError):
        return []
    stamp = when.strftime("%Y-%m-%dT%H:%M:%S.%f+00:00")
    host = _journal_text(entry.get("_HOSTNAME")) or "localhost"
    if entry.get("_TRANSPORT") == "kernel":
        prefix = "%s %s kernel: " % (stamp, host)
    elif entry.get("SYSLOG_IDENTIFIER") == SYSLOG_IDENTIFIER and entry.get("_UID") == "0":
        pid = entry.get("_PID") if isinstance(entry.get("_PID"), str) and entry["_PID"].isdigit() else "0"
        prefix = "%s %s %s[%s]: " % (stamp, host, SYSLOG_IDENTIFIER, pid)
    else:
        return []
    return [prefix + line for line in message.splitlines() if line]
