# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where the node's action journal is kept: its path checked before a run acts, its rotated files, the lock that
writers rotate under and readers read under, and its time stamps."""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import os

from ansible_collections.gpuops.remediation.plugins.module_utils._lock import flock_within, open_lock
from ansible_collections.gpuops.remediation.plugins.module_utils import _safe_files

DEFAULT_JOURNAL_PATH = "/var/lib/gpuops/journal.jsonl"
# How many rotated files (journal.jsonl.1 ... journal.jsonl.<ROTATE_KEEP>) are kept beside the journal (_writer rotates).
ROTATE_KEEP = 4
DIR_MODE = 0o750

# A rotation takes milliseconds; a lock held longer is a stuck process of root's, named in the error.
ROTATION_LOCK_TIMEOUT = 30.0
OPTION = "journal_path"

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


def _stamp(epoch):
    if epoch is None:
        return None
    moment = datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc)
    return moment.isoformat(timespec="microseconds").replace("+00:00", "Z")


def journal_epoch(stamp):
    """Seconds since the epoch of a journal "ts" ("2026-12-01T08:44:04.123456Z"), or None."""
    try:
        parsed = datetime.datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=datetime.timezone.utc)
    return parsed.timestamp()
