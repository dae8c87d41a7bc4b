# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Reading the node's action journal back: its records across the rotated files, under the rotation lock, a line
torn by a crash skipped, the newest part only where a window or a byte budget says so."""

from __future__ import annotations

import fcntl
import json
import os

from ansible_collections.gpuops.remediation.plugins.module_utils import _safe_files
from ansible_collections.gpuops.remediation.plugins.module_utils.journal._files import OPTION, _rotation_lock, _stamp, journal_epoch, rotated_paths

# What the acting modules read of the journal (across its rotated files): its last 4 MiB, far more than a node writes
# between two boots or during one run.
RECENT_BYTES = 4 * 1024 * 1024

# The most gpu_journal_info reads for one window: a journal past it (an old, never rotated one) answers in part.
WINDOW_MAX_BYTES = 64 * 1024 * 1024

# No line this module writes comes near it; a longer one is not ours (and would cost the reader).
MAX_LINE_BYTES = 256 * 1024


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


def load_journal(path, tail_bytes=None):
    """(records, error): read_journal that never raises; error says why the journal could not be read, else None."""
    try:
        return read_journal(path, tail_bytes), None
    except (IOError, OSError) as exc:
        return [], "cannot read the journal %s: %s" % (path, exc)
