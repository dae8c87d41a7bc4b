# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node's action journal: one JSON object per line, an intent before each action, an outcome after.

Every line is written with a single write(2) on a descriptor opened with O_APPEND and fsync'd before the
action goes ahead, so a run that is SIGKILLed between intent and outcome still leaves the intent on disk,
and concurrent writers never interleave inside a line.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import json
import os
import re
import shlex
import socket
import time
import uuid

from ansible_collections.gpuops.remediation.plugins.module_utils._gpu_names import GPU_SERVICE_UNITS, holder_command
from ansible_collections.gpuops.remediation.plugins.module_utils._lock import flock_within, open_lock
from ansible_collections.gpuops.remediation.plugins.module_utils import _safe_files

DEFAULT_JOURNAL_PATH = "/var/lib/gpuops/journal.jsonl"
# What the acting modules read of the journal (across its rotated files): its last 4 MiB, far more than a node writes
# between two boots or during one run.
RECENT_BYTES = 4 * 1024 * 1024
# The journal rotates (journal.jsonl -> journal.jsonl.1 -> ... -> journal.jsonl.<ROTATE_KEEP>, the oldest dropped)
# before a line would take it past ROTATE_BYTES: it never takes more than (ROTATE_KEEP + 1) * ROTATE_BYTES on the node.
ROTATE_BYTES = 8 * 1024 * 1024
ROTATE_KEEP = 4
# The most gpu_journal_info reads for one window: a journal past it (an old, never rotated one) answers in part.
WINDOW_MAX_BYTES = 64 * 1024 * 1024
# No line this module writes comes near it; a longer one is not ours (and would cost the reader).
MAX_LINE_BYTES = 256 * 1024
# A line dated further in the future than this was written under a wrong clock: it answers nothing.
CLOCK_SLACK_SECONDS = 300
DIR_MODE = 0o750
FILE_MODE = 0o640
# A rotation takes milliseconds; a lock held longer is a stuck process of root's, named in the error.
ROTATION_LOCK_TIMEOUT = 30.0
OPTION = "journal_path"


# Enough of a command line to tell one job from another, not a whole argv of a launcher.
SOURCE_CMDLINE_CHARS = 512
SOURCE_KEYS = ("name", "user", "uid", "cmdline", "ppid", "parent_name", "container", "kubernetes_pod_uid", "slurm_job",
               "systemd_unit", "used_mib_per_gpu")


def holder_source(holder):
    """What the journal keeps of a holder it acts on, so that repeated leaks can be traced to who made them: the
    process, its user, its parent and what owns it (container, pod, Slurm job, systemd unit), and the memory it held."""
    source = dict((key, holder.get(key)) for key in SOURCE_KEYS if holder.get(key) is not None)
    if isinstance(holder.get("cmdline"), list) or holder.get("exe"):
        # The process as ps -f names it (argv[0], its executable), for the reports: not the 15-byte comm.
        source["command"] = holder_command(holder)
    if "cmdline" in source:
        source["cmdline"] = command_line(source["cmdline"])
    return source


def command_line(argv):
    """A process's argv (a list, or the text of an older line) as one line of at most SOURCE_CMDLINE_CHARS characters
    (and the "..." that says it was cut); each argument shell-quoted, for a person to read, never to run."""
    text = " ".join(shlex.quote(str(arg)) for arg in argv) if isinstance(argv, list) else str(argv)
    return text[:SOURCE_CMDLINE_CHARS] + "..." if len(text) > SOURCE_CMDLINE_CHARS else text


# Filesystems of the kernel's own (no file can be created there, whatever access(2) says to root) and device nodes:
# a journal path there is refused before the run acts.
PSEUDO_FILESYSTEMS = ("proc", "sysfs", "cgroup", "cgroup2", "devpts", "debugfs", "tracefs", "securityfs", "configfs",
                      "bpf", "pstore", "efivarfs", "fusectl", "mqueue", "binfmt_misc", "nsfs", "autofs", "hugetlbfs")
_NAME_MAX = 255
_PATH_MAX = 4095


def _filesystem_type(path, mountinfo="/proc/self/mountinfo"):
    """The type of the filesystem that holds the existing directory path (the longest mount point above it)."""
    best, kind = "", None
    try:
        with open(mountinfo, "r", encoding="utf-8", errors="replace") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return None
    real = os.path.realpath(path)
    for line in lines:
        left, sep, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if not sep or len(fields) < 5 or not tail:
            continue
        point = fields[4].replace("\\040", " ")
        if (real == point or real.startswith(point.rstrip("/") + "/")) and len(point) >= len(best):
            best, kind = point, tail[0]
    return kind


def path_problem(path):
    """Why a journal cannot be written at path (its directories made as needed), or None. Only looks: the directory
    is made by the first line written, so a run that does nothing creates nothing."""
    absolute = os.path.abspath(path)
    if len(absolute) > _PATH_MAX or any(len(part.encode("utf-8", "replace")) > _NAME_MAX for part in absolute.split("/")):
        return "the path is too long"
    existing = os.path.dirname(absolute)
    while not os.path.isdir(existing):
        if os.path.lexists(existing):
            break
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        return "%s is not a directory" % existing
    fstype = _filesystem_type(existing)
    if fstype in PSEUDO_FILESYSTEMS:
        return "%s is on a %s filesystem, where no journal can be created" % (existing, fstype)
    if not os.access(existing, os.W_OK | os.X_OK):
        return "%s is not writable" % existing
    if os.path.isdir(absolute):
        return "it is a directory"
    if os.path.exists(absolute):
        if not os.path.isfile(absolute):
            return "it is not a regular file (a device, FIFO or socket)"
        if not os.access(absolute, os.W_OK):
            return "it is not writable"
    return None


def path_failure(path, given):
    """The message a module fails with when the journal at path cannot be written, or cannot be believed (a link on
    its path, a directory or file another user could write: _safe_files), or None. given: whether the journal_path
    option named it (else it is the node's default)."""
    option = OPTION if given else OPTION + " (default)"
    problem = path_problem(path)
    if problem is not None:
        return "%s: %r cannot be written: %s" % (option, path, problem)
    return _safe_files.path_problem(os.path.abspath(path), option, holds_trusted=True)


def _utc_now():
    stamp = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="microseconds")
    return stamp.replace("+00:00", "Z")


def _open_parent(path, option=OPTION):
    """The journal's directory (made as needed), reached without a link and writable by root and the run alone."""
    return _safe_files.open_dir(os.path.dirname(os.path.abspath(path)), option, create=True, mode=DIR_MODE, holds_trusted=True,
                                shown=path)


def lock_path(path):
    """The lock file of the journal at path: writers rotate under it, readers read the rotated files under it."""
    directory, name = os.path.split(os.path.abspath(path))
    return os.path.join(directory, ".%s.lock" % name)


def rotated_paths(path, keep=None):
    """The journal's files, newest first: path, path.1, ..., path.<keep> (ROTATE_KEEP)."""
    keep = ROTATE_KEEP if keep is None else keep
    return [path] + ["%s.%d" % (path, number) for number in range(1, keep + 1)]


def rotate_if_full(path, incoming=0, limit=None, keep=None):
    """Rotate the journal when `incoming` more bytes would take it past `limit`: path.<keep> is dropped, every path.<n>
    becomes path.<n+1>, path becomes path.1; the next append creates path anew. Under an exclusive flock on the
    journal's directory, so that two writers never rotate twice; a writer that still holds the old file open finishes
    its line there (path.1), which readers read too. Returns whether it rotated."""
    limit = ROTATE_BYTES if limit is None else limit
    dir_fd = _open_parent(path)
    try:
        with _rotation_lock(path, fcntl.LOCK_EX):
            return _rotate_in(dir_fd, path, incoming, limit, keep)
    finally:
        os.close(dir_fd)


def _rotate_in(dir_fd, path, incoming, limit, keep):
    """rotate_if_full on the journal's directory open as dir_fd: every rename relative to it, never through a link."""
    name = os.path.basename(path)
    try:
        size = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_size
    except FileNotFoundError:
        return False
    if size == 0 or size + incoming <= limit:
        return False
    names = [os.path.basename(each) for each in rotated_paths(path, keep)]
    for older, newer in reversed(list(zip(names[:-1], names[1:]))):
        try:
            os.replace(older, newer, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except FileNotFoundError:
            continue
    return True


@contextlib.contextmanager
def _rotation_lock(path, operation):
    """The journal's lock file (lock_path, the product's own: _lock.open_lock): exclusive while a writer rotates,
    shared while a reader reads the files one after the other (a rotation between two of those reads would give a
    reader the same lines twice, or none); waited for ROTATION_LOCK_TIMEOUT at most. A reader never makes it: where
    it is missing, no writer of this version has written there, and the reader reads without it."""
    try:
        fd = open_lock(lock_path(path), OPTION, create=operation == fcntl.LOCK_EX)
    except (FileNotFoundError, NotADirectoryError):
        yield
        return
    try:
        flock_within(fd, operation, ROTATION_LOCK_TIMEOUT, lock_path(path))
        yield
    finally:
        os.close(fd)  # drops the flock


def append_line(path, record):
    """Append one record as one line: one write, fsync, close (_safe_files.append: never through a link, nor into a
    file or directory another user could write); the journal rotated first when the line would take it past
    ROTATE_BYTES."""
    data = (json.dumps(record, sort_keys=False, default=str) + "\n").encode("utf-8")
    dir_fd = _open_parent(path)
    try:
        with _rotation_lock(path, fcntl.LOCK_EX):
            _rotate_in(dir_fd, path, len(data), ROTATE_BYTES, None)
        _safe_files.append(path, data, OPTION, FILE_MODE, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)


class JournalUnwritable(OSError):
    """A journal line could not be written: the action it announces must not go ahead."""


class Journal:
    """Writes this run's intents and outcomes to the journal at path; entries() returns what it wrote."""

    def __init__(self, path=DEFAULT_JOURNAL_PATH, run_id=None, syslog_file=None):
        self.path = path
        self.run_id = run_id or uuid.uuid4().hex
        # None: syslog itself; a file (a simulated node's var/log/syslog): the same line appended there.
        self.syslog_file = syslog_file
        self._entries = []
        self._counter = 0
        self._token = uuid.uuid4().hex[:12]

    def _write(self, record):
        try:
            append_line(self.path, record)
        except OSError as exc:
            raise JournalUnwritable("journal_path: %r cannot be written: %s; the action it was to record was not done"
                                    % (self.path, exc.strerror or exc))
        self._entries.append(record)
        return record

    def intent(self, action, **details):
        """Record that action is about to be done; returns the entry id to pass to outcome()."""
        self._counter += 1
        # The process's own token too: run ids are chosen by people ("manual") and repeat; entry ids must not.
        entry_id = "%s-%s-%d" % (self.run_id, self._token, self._counter)
        record = {"ts": _utc_now(), "run_id": self.run_id, "id": entry_id, "phase": "intent", "action": action}
        record.update(details)
        self._write(record)
        return entry_id

    def outcome(self, entry_id, ok, **details):
        """Record how the action announced by intent entry_id ended."""
        action = None
        for entry in self._entries:
            if entry["id"] == entry_id and entry["phase"] == "intent":
                action = entry["action"]
        record = {"ts": _utc_now(), "run_id": self.run_id, "id": entry_id, "phase": "outcome", "action": action,
                  "ok": bool(ok)}
        record.update(details)
        written = self._write(record)
        if ok and action in ANSWERING_ACTIONS:
            intent = next((entry for entry in self._entries if entry["id"] == entry_id and entry["phase"] == "intent"), {})
            send_remediation_line(remediation_line(action, _reset_bus_ids(intent.get("argv")), journal_epoch(record["ts"]), self.run_id),
                                  self.syslog_file)
        return written

    def close_interrupted(self, record):
        """Write the outcome that an interrupted run never wrote for its intent `record` (not ok, marked interrupted),
        so that the next run does not report it again."""
        return self._write({"ts": _utc_now(), "run_id": self.run_id, "id": record["id"], "phase": "outcome",
                            "action": record.get("action"), "ok": False, "interrupted": True, "of_run": record.get("run_id")})

    def entries(self):
        """The records this run wrote, in order (copies, safe to put in a module result)."""
        return [dict(entry) for entry in self._entries]


# The actions whose success answers earlier evidence (completed_resets): each also writes a syslog line with its own
# identifier, which the event sources of extensions/eda read to drop the events it answered (the closed loop).
ANSWERING_ACTIONS = ("gpu_reset", "module_load")
# The actions that take a node's GPUs (or the node) away, as each is journalled, and what the circuit breaker calls
# them: a reset, a driver reload (nvidia_driver_reload's modprobe -r / modprobe), a graphics restart
# (gpu_graphics_restart's isolate of multi-user.target), a reboot (the Windows walk's; a Linux reboot writes none). A
# signal, a container stop, a unit stopped or started are not: the node stays up.
DESTRUCTIVE_ACTIONS = {"gpu_reset": "GPU reset", "module_unload": "driver reload", "module_load": "driver reload",
                       "systemctl_isolate": "graphics restart", "reboot": "reboot"}
SYSLOG_IDENTIFIER = "gpuops-remediation"


def remediation_line(action, bus_ids, epoch, run_id):
    """The syslog message: "action=<action> gpus=<bus ids, comma-separated; empty: every GPU> epoch=<s> run=<run id>"."""
    return "action=%s gpus=%s epoch=%.3f run=%s" % (action, ",".join(bus_ids), epoch or 0.0, re.sub(r"\s+", "_", str(run_id)))


def send_remediation_line(message, syslog_file=None):
    """To syslog with the identifier gpuops-remediation, or appended to syslog_file as a syslog daemon writes it.
    Best effort: the journal line is the record; a syslog that is down never fails the remediation."""
    if syslog_file:
        line = "%s %s %s[%d]: %s" % (_utc_now(), socket.gethostname(), SYSLOG_IDENTIFIER, os.getpid(), message)
        try:
            append_line_text(syslog_file, line)
        except (IOError, OSError):
            pass
        return
    try:
        import syslog

        syslog.openlog(SYSLOG_IDENTIFIER, syslog.LOG_PID, syslog.LOG_DAEMON)
        syslog.syslog(syslog.LOG_NOTICE, message)
    except (ImportError, OSError):
        pass


def append_line_text(path, line):
    _safe_files.append(path, (line + "\n").encode("utf-8"), "syslog_file", 0o640)


def recent_records(path):
    """(records of the journal's last RECENT_BYTES, across its rotated files, error or None); never raises."""
    return load_journal(path, RECENT_BYTES)


def _read_tail(path, tail_bytes):
    """(bytes of the file's last tail_bytes, or all of it with None; whether it was cut); (b"", False) when missing."""
    read = _safe_files.read_trusted(path, OPTION, tail_bytes)
    return read if read is not None else (b"", False)


def read_journal(path, tail_bytes=None):
    """Every whole record in the journal at path and its rotated files (path.1 ... path.<ROTATE_KEEP>), oldest first;
    [] when there is none.

    With tail_bytes, only the records of their last tail_bytes bytes. Each file is parsed apart (a line torn at the end
    of a rotated file never joins the first line of the next). A line cut short by a crash (no newline, or not JSON) is
    skipped, wherever it is: a torn line from a power loss can end up in the middle once later runs append after it.
    """
    chunks = []
    remaining = tail_bytes
    with _rotation_lock(path, fcntl.LOCK_SH):
        for each in rotated_paths(path):
            if remaining is not None and remaining <= 0:
                break
            data, cut = _read_tail(each, remaining)
            chunks.append(parse_records(data, cut))
            if remaining is not None:
                remaining -= len(data)
    return [record for chunk in reversed(chunks) for record in chunk]


def read_window(path, since=None, max_bytes=None):
    """(records at or after `since` (an epoch; None: all), coverage), read back from the newest file as far as the
    window reaches: a file whose first record is older than since is the last one read.

    coverage says whether the answer is the whole window: {"complete": bool, "from": the ts of the oldest record read
    (None when none), "reason": why it is not complete, or None, "files": the files read, "bytes": bytes read}. It is
    not complete when max_bytes stopped the reading, or when the window reaches past the oldest record kept and the
    rotation has dropped older files (path.<ROTATE_KEEP> exists)."""
    max_bytes = WINDOW_MAX_BYTES if max_bytes is None else max_bytes
    paths = rotated_paths(path)
    with _rotation_lock(path, fcntl.LOCK_SH):
        chunks, files, read, reason, oldest, reached = _read_newest_first(paths, since, max_bytes)
        rotated_away = os.path.exists(paths[-1])
    if reason is None and not reached and rotated_away and (since is None or oldest is None or oldest > since):
        reason = "older lines were rotated away (%s is the oldest file kept)" % paths[-1]
    records = [record for chunk in reversed(chunks) for record in chunk]
    if since is not None:
        records = [record for record in records if (journal_epoch(record.get("ts")) or -1) >= since]
    coverage = {"complete": reason is None, "from": _stamp(oldest), "reason": reason, "files": files, "bytes": read}
    return records, coverage


def _read_newest_first(paths, since, max_bytes):
    """read_window's reading, newest file first, until the window or max_bytes is reached."""
    chunks, files, read, reason, oldest, reached = [], [], 0, None, None, False
    for each in paths:
        budget = max_bytes - read
        if budget <= 0:
            reason = "read its newest %d bytes only (the most one answer reads)" % max_bytes
            break
        data, cut = _read_tail(each, budget)
        if not data and not os.path.exists(each):
            continue
        files.append(each)
        read += len(data)
        records = parse_records(data, cut)
        chunks.append(records)
        dated = [journal_epoch(record.get("ts")) for record in records]
        dated = [epoch for epoch in dated if epoch is not None]
        if dated:
            oldest = min(dated) if oldest is None else min(oldest, *dated)
        if cut:
            reason = "read its newest %d bytes only (the most one answer reads)" % max_bytes
            break
        if since is not None and dated and min(dated) < since:
            reached = True
            break
    return chunks, files, read, reason, oldest, reached


def _stamp(epoch):
    if epoch is None:
        return None
    moment = datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc)
    return moment.isoformat(timespec="microseconds").replace("+00:00", "Z")


def parse_records(data, cut=False):
    """The whole records in the journal bytes `data`; with `cut`, data starts inside a line (a tail), which is dropped.
    Shared with the Windows journal, whose bytes come back from the host."""
    if cut:
        data = data.split(b"\n", 1)[1] if b"\n" in data else b""
    records = []
    for line in data.split(b"\n"):
        if not line.strip():
            continue
        if len(line) > MAX_LINE_BYTES:
            continue
        try:
            record = json.loads(line.decode("utf-8"))
        except (ValueError, RecursionError):
            continue
        if _well_formed(record):
            records.append(record)
    return records


def _well_formed(record):
    """A line as Journal writes it: a mapping whose keys that readers index on are strings."""
    return isinstance(record, dict) and all(isinstance(record.get(key), str) for key in ("id", "phase", "action", "ts"))


def left_stopped(records, run_id=None):
    """Units that a run stopped (systemctl_stop ok) and never started again afterwards, in stop order, skipping the
    run run_id (the caller's own). Read under the node lock: the run that stopped them is no longer acting. Only the
    GPU units a run of the collection stops (GPU_SERVICE_UNITS) are ever named: a line naming any other unit is not
    one this collection wrote, and starting it is not ours to do."""
    stopped = {}
    for record in records:
        if record.get("phase") != "outcome" or record.get("ok") is not True or record.get("unit") not in GPU_SERVICE_UNITS \
                or record.get("run_id") == run_id:
            continue
        if record.get("action") == "systemctl_stop":
            stopped[record["unit"]] = record
        elif record.get("action") == "systemctl_start":
            stopped.pop(record["unit"], None)
    return [record["unit"] for record in sorted(stopped.values(), key=lambda record: record["ts"])]


def left_isolated(records, run_id=None):
    """graphical.target when a run (not run_id, the caller's own) isolated multi-user.target to restart the graphics
    stack and nothing got the node back to graphical.target since (that run was killed in between), else None."""
    targets = dict((record["id"], record.get("target")) for record in records
                   if record.get("action") == "systemctl_isolate" and record["phase"] == "intent")
    down = False
    for record in records:
        if record.get("action") != "systemctl_isolate":
            continue
        target = targets.get(record["id"])
        if record["phase"] == "intent" and target == "multi-user.target" and record.get("run_id") != run_id:
            down = True
        elif record["phase"] == "outcome" and record.get("ok") is True and target == "graphical.target":
            down = False
    return "graphical.target" if down else None


def unfinished(records):
    """The intents that have no outcome: actions a killed run may have left half done."""
    finished = set(record.get("id") for record in records if record.get("phase") == "outcome")
    return [record for record in records if record.get("phase") == "intent" and record.get("id") not in finished]


def load_journal(path, tail_bytes=None):
    """(records, error): read_journal that never raises; error says why the journal could not be read, else None."""
    try:
        return read_journal(path, tail_bytes), None
    except (IOError, OSError) as exc:
        return [], "cannot read the journal %s: %s" % (path, exc)


def journal_epoch(stamp):
    """Seconds since the epoch of a journal "ts" ("2026-12-01T08:44:04.123456Z"), or None."""
    try:
        parsed = datetime.datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=datetime.timezone.utc)
    return parsed.timestamp()


def _reset_bus_ids(argv):
    """The bus ids of `nvidia-smi --gpu-reset -i <id>[,<id>...]`."""
    argv = list(argv or [])
    for flag in ("-i", "--id"):
        if flag in argv[:-1]:
            return [part for part in str(argv[argv.index(flag) + 1]).split(",") if ":" in part]
    return []


def completed_resets(records, now=None):
    """The resets and driver reloads that ended well, oldest first: what answers earlier Xid evidence.

    Each: {"action": "gpu_reset" | "nvidia_driver_reload", "time": the outcome's ts, "epoch": float,
    "gpus": [indexes] (gpu_reset) or None (a reload answers every GPU), "bus_ids": [as given to nvidia-smi]}.
    A reload is a successful load of the nvidia module (it was unloaded before). Malformed lines are skipped.
    """
    latest = time.time() + CLOCK_SLACK_SECONDS if now is None else now + CLOCK_SLACK_SECONDS
    intents, done = {}, []
    for record in records:
        if record.get("phase") == "intent":
            intents[record["id"]] = record  # the nearest earlier intent of this id
            continue
        intent = intents.get(record["id"])
        if record.get("phase") != "outcome" or record.get("ok") is not True or intent is None \
                or intent.get("action") != record.get("action"):
            continue
        epoch = journal_epoch(record.get("ts"))
        if epoch is None or epoch > latest:
            continue
        if intent.get("action") == "gpu_reset":
            gpus = intent.get("gpus") if isinstance(intent.get("gpus"), list) else []
            done.append({"action": "gpu_reset", "time": record.get("ts"), "epoch": epoch,
                         "gpus": [gpu for gpu in gpus if isinstance(gpu, int)], "bus_ids": _reset_bus_ids(intent.get("argv"))})
        elif intent.get("action") == "module_load" and intent.get("module") == "nvidia":
            done.append({"action": "nvidia_driver_reload", "time": record.get("ts"), "epoch": epoch, "gpus": None, "bus_ids": []})
    return done


def outlived_kill(records):
    """{(pid, start_time): the outcome's ts} of every process a run sent SIGKILL that was still there when its bounded
    wait ran out (_terminate): the only evidence that a process is unkillable. Malformed lines are skipped."""
    intents, found = {}, {}
    for record in records:
        if record.get("phase") == "intent" and record.get("action") == "signal":
            intents[record.get("id")] = record
        elif record.get("phase") == "outcome" and record.get("outlived_kill") is True and record.get("signal") == "KILL":
            intent = intents.get(record.get("id"))
            if intent is not None and isinstance(intent.get("pid"), int) and isinstance(intent.get("start_time"), int):
                found[(intent["pid"], intent["start_time"])] = record.get("ts")
    return found


def _owner(source):
    """What owned an ended holder, as one label: its Slurm job, pod, container or systemd unit, else None."""
    if source.get("slurm_job"):
        return "slurm job %s" % source["slurm_job"]
    if source.get("kubernetes_pod_uid"):
        return "pod %s" % source["kubernetes_pod_uid"]
    container = source.get("container")
    if isinstance(container, dict) and container.get("id"):
        return "%s container %s" % (container.get("runtime") or "", str(container["id"])[:12])
    if source.get("systemd_unit"):
        return "unit %s" % source["systemd_unit"]
    return None


def _ended(records):
    """(intent, source) of each holder a run ended: a signal after which it exited, or a container stop that went
    through; one per process and run."""
    intents = dict((record["id"], record) for record in records if record["phase"] == "intent")
    seen, ended = set(), []
    for record in records:
        intent = intents.get(record["id"])
        if record["phase"] != "outcome" or record.get("ok") is not True or intent is None:
            continue
        # A signal sent is not a process ended (TERM can be ignored): the outcome says whether it exited.
        if intent["action"] == "signal" and record.get("exited") is True and isinstance(intent.get("source"), dict) and intent["source"]:
            key = (intent.get("run_id"), intent.get("pid"), intent.get("start_time"))
            if key not in seen:
                seen.add(key)
                ended.append((intent, intent["source"]))
        elif intent["action"] == "container_stop" and isinstance(intent.get("sources"), list):
            ended.extend((intent, source) for source in intent["sources"] if isinstance(source, dict) and source)
    return ended


def leak_sources(records, since=None):
    """Who the runs had to end to get GPU memory back, grouped by user and program, most often first: the answer to
    "where do our leaks come from". since: only actions at or after this epoch.

    Each: {"user", "name", "ended" (processes), "runs" (distinct runs), "first", "last" (ts), "used_mib" (what the
    ended processes held, where the driver said), "owners" (their jobs, pods, containers or units, newest first, at
    most 10), "cmdlines" (at most 3 distinct)}.
    """
    groups = {}
    for intent, source in _ended(records):
        epoch = journal_epoch(intent.get("ts"))
        if since is not None and (epoch is None or epoch < since):
            continue
        key = (str(source.get("user")), str(source.get("name")))
        group = groups.setdefault(key, {"user": source.get("user"), "name": source.get("name"),
                                        "command": source.get("command") or source.get("name"), "ended": 0, "runs": set(),
                                        "first": intent["ts"], "last": intent["ts"], "used_mib": 0, "owners": [], "cmdlines": []})
        group["ended"] += 1
        group["runs"].add(intent.get("run_id"))
        group["first"], group["last"] = min(group["first"], intent["ts"]), max(group["last"], intent["ts"])
        memory = source.get("used_mib_per_gpu")
        if isinstance(memory, dict):
            group["used_mib"] += sum(value for value in memory.values() if isinstance(value, (int, float)) and not isinstance(value, bool))
        owner = _owner(source)
        if owner and owner not in group["owners"]:
            group["owners"].insert(0, owner)
            del group["owners"][10:]
        cmdline = command_line(source["cmdline"]) if source.get("cmdline") else None
        if cmdline and cmdline not in group["cmdlines"] and len(group["cmdlines"]) < 3:
            group["cmdlines"].append(cmdline)
    result = sorted((dict(group, runs=len(group["runs"])) for group in groups.values()), key=lambda group: group["last"], reverse=True)
    return sorted(result, key=lambda group: group["ended"], reverse=True)


def run_summaries(records, since=None):
    """One line per run that acted, oldest first: {"run_id", "first", "last", "actions", "failed", "interrupted"}."""
    runs = {}
    # Left half done: no outcome yet, or the outcome a later run wrote for it (close_interrupted).
    open_intents = set(record["id"] for record in unfinished(records)) | set(record["id"] for record in records if record.get("interrupted"))
    for record in records:
        epoch = journal_epoch(record.get("ts"))
        if since is not None and (epoch is None or epoch < since):
            continue
        run = runs.setdefault(record.get("run_id"), {"run_id": record.get("run_id"), "first": record["ts"], "last": record["ts"],
                                                     "actions": 0, "failed": 0, "interrupted": 0})
        run["first"], run["last"] = min(run["first"], record["ts"]), max(run["last"], record["ts"])
        if record["phase"] == "intent":
            run["actions"] += 1
            run["interrupted"] += record["id"] in open_intents
        elif record.get("ok") is not True and not record.get("interrupted"):
            run["failed"] += 1
    return sorted(runs.values(), key=lambda run: run["first"])
