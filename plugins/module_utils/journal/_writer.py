# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Writing the node's action journal: one JSON object per line, an intent before each action, an outcome after.

Every line is written with a single write(2) on a descriptor opened with O_APPEND and fsync'd before the
action goes ahead, so a run that is SIGKILLed between intent and outcome still leaves the intent on disk,
and concurrent writers never interleave inside a line. The journal rotates before a line would take it past
ROTATE_BYTES; a reset or reload that went through also writes a syslog line (the EDA sources' closed loop).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shlex
import socket
import uuid

from ansible_collections.gpuops.remediation.plugins.module_utils._gpu_names import holder_command
from ansible_collections.gpuops.remediation.plugins.module_utils import _safe_files
from ansible_collections.gpuops.remediation.plugins.module_utils.journal._files import (
    DEFAULT_JOURNAL_PATH, OPTION, _open_parent, _rotation_lock, _utc_now, journal_epoch, rotated_paths,
)

# The journal rotates (journal.jsonl -> journal.jsonl.1 -> ... -> journal.jsonl.<ROTATE_KEEP>, the oldest dropped)
# before a line would take it past ROTATE_BYTES: it never takes more than (ROTATE_KEEP + 1) * ROTATE_BYTES on the node.
ROTATE_BYTES = 8 * 1024 * 1024
FILE_MODE = 0o640

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


def _reset_bus_ids(argv):
    """The bus ids of `nvidia-smi --gpu-reset -i <id>[,<id>...]`."""
    argv = list(argv or [])
    for flag in ("-i", "--id"):
        if flag in argv[:-1]:
            return [part for part in str(argv[argv.index(flag) + 1]).split(",") if ":" in part]
    return []
