# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The journal on a Windows host: the Linux journal's records (module_utils/journal/_writer.py), written on the node.

The same JSON lines (ts, run_id, id, phase intent/outcome, action, the action's details; an interrupted intent closed
with interrupted/of_run), the same readers (unfinished, parse_records), in a file on the Windows host. Each line goes
through the node's journal_append script (_powershell_scripts), the record's JSON text as a parameter: data, never script
text. The host appends it with one write and flushes it to disk before the action goes ahead. The simulated node
keeps the file under its root.
"""

from __future__ import annotations

import base64
import binascii
import json
import re

from ansible_collections.gpuops.remediation.plugins.module_utils.journal import _writer
from ansible_collections.gpuops.remediation.plugins.module_utils.journal import _reader
from ansible_collections.gpuops.remediation.plugins.module_utils.journal import _evidence
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node._remote_node import ConnectionDropped, WindowsNodeError

DEFAULT_PATH = "C:\\ProgramData\\gpuops\\journal.jsonl"
# An absolute path on a drive: X:\dir\file, no . or .. component, no character Windows refuses in a name.
_PATH_RE = re.compile(r"^[A-Za-z]:(\\[^\\/:*?\"<>|\x00-\x1f]+)+$")
# What a record names its subject by, for the report of an interrupted action.
_SUBJECT_KEYS = ("pid", "creation_time_ms", "name", "gpu", "instance_id", "session_id", "user", "distribution")
# How many of the earlier runs' actions a snapshot reports.
RECENT_ACTIONS = 20


# Names Windows gives to devices in every folder (CON, NUL.txt, COM1.jsonl): a write there is no file.
_DEVICE_NAMES = frozenset(["con", "prn", "aux", "nul"] + ["com%d" % n for n in range(1, 10)] + ["lpt%d" % n for n in range(1, 10)])


def _bad_component(part):
    """A path component that names no ordinary file or folder: ".", "..", a device name, or one that ends in a dot
    or a space (Windows strips those, so the name is not the one written)."""
    return part in (".", "..") or part.split(".")[0].strip().lower() in _DEVICE_NAMES or part.endswith((".", " "))


def checked_path(path):
    """journal_path, or the default; ValueError naming the option and the value when it is no absolute Windows path."""
    if path is None:
        return DEFAULT_PATH
    if not isinstance(path, str) or not _PATH_RE.fullmatch(path) or any(_bad_component(part) for part in path.split("\\")[1:]):
        raise ValueError("journal_path: %r is no absolute Windows path of a file (like %s)" % (path, DEFAULT_PATH))
    return path


class WindowsJournal(_writer.Journal):
    """The node's journal at `path` (checked_path): intent() and outcome() as on Linux, each line written on the host."""

    def __init__(self, node, path=None, run_id=None):
        super().__init__(checked_path(path), run_id)
        self._node = node

    def _write(self, record):
        line = json.dumps(record, sort_keys=False, default=str)
        self._node.powershell("journal_append", {"Path": self.path, "Line": line}, read_only=False)
        self._entries.append(record)
        return record

    def check(self):
        """What the first append would refuse (a reparse point in the path, a folder or file someone else owns or may
        write), asked without writing: a check-mode run that plans an action asks it, so that it fails as the real run
        would. Raises WindowsNodeError with the append's own message."""
        self._node.powershell("journal_check", {"Path": self.path}, read_only=True)

    def resume(self, record):
        """Take up an intent that an earlier call of this run wrote (the walk pauses for the reboot), to write its outcome."""
        self._entries.append(dict(record))

    def around(self, action, call, judge, **details):
        """call() between its intent line and its outcome line -> call's answer. judge(answer) -> (ok, details) for the
        outcome. A node error (a dropped connection too) is written as the outcome, not ok, when the host still answers,
        and raised again."""
        entry = self.intent(action, **details)
        try:
            answer = call()
        except WindowsNodeError as exc:
            try:
                self.outcome(entry, False, connection_dropped=isinstance(exc, ConnectionDropped), error=str(exc), **_subject(details))
            except WindowsNodeError:
                pass  # the host is gone: the intent stays open, and the next run reports it as interrupted
            raise
        ok, more = judge(answer)
        self.outcome(entry, ok, **dict(_subject(details), **more))
        return answer

    def records(self):
        """(records of the journal's tail on the host, error or None)."""
        return read_records(self._node, self.path)

    def interrupted(self, check_mode):
        """The intents of earlier runs that have no outcome (a run died or lost its host mid-action), as the Linux
        modules report them in interrupted_actions; outside check mode their outcome is written now (not ok, marked
        interrupted), so that they are reported once."""
        records, dummy = self.records()
        dead = [record for record in _evidence.unfinished(records) if record.get("run_id") != self.run_id]
        if not check_mode:
            for record in dead:
                self.close_interrupted(record)
        return [interrupted_entry(record) for record in dead]


def _subject(details):
    return dict((key, details[key]) for key in _SUBJECT_KEYS if key in details)


def interrupted_entry(record):
    """What a report says of an interrupted intent: when, which run, what action, on what."""
    entry = dict((key, record[key]) for key in ("ts", "run_id", "action") if key in record)
    entry.update(_subject(record))
    return entry


def read_records(node, path):
    """(the whole records of the journal's last RECENT_BYTES on the node, error or None); never raises: a journal that
    cannot be read only means that no earlier run is known."""
    try:
        answer = node.powershell("journal_read", {"Path": path, "TailBytes": _reader.RECENT_BYTES}, read_only=True)
        data = base64.b64decode(answer.get("base64") or "", validate=True)
    except WindowsNodeError as exc:
        return [], "cannot read the journal %s: %s" % (path, exc)
    except (binascii.Error, ValueError) as exc:
        return [], "the journal %s came back unreadable: %s" % (path, exc)
    return _reader.parse_records(data, bool(answer.get("cut"))), None


def journal_report(node, path):
    """What a snapshot says of the journal: {"path", "ok", "error", "records", "read", "recent_actions",
    "interrupted_actions", "kills_by_name"}; earlier runs' actions, so that a leak that comes back can be traced."""
    records, error = read_records(node, path)
    outcomes = [record for record in records if record.get("phase") == "outcome"]
    kills = {}
    for record in outcomes:
        if record.get("action") in ("terminate", "taskkill") and record.get("ok") is True and isinstance(record.get("name"), str):
            kills[record["name"].lower()] = kills.get(record["name"].lower(), 0) + 1
    recent = [dict(interrupted_entry(record), ok=record.get("ok")) for record in outcomes[-RECENT_ACTIONS:]]
    return {"path": path, "ok": error is None, "error": error, "records": len(records), "read": True,
            "recent_actions": recent, "interrupted_actions": [interrupted_entry(r) for r in _evidence.unfinished(records)],
            "kills_by_name": kills}
