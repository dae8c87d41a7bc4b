# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Files that readers must never see half written: the watch's state and metrics, the run report."""

from __future__ import annotations

import os
import re
import stat
import tempfile


def write_atomic(path, text, mode=0o644):
    """Write text to a temporary file in path's directory, fsync it and rename it over path: readers see the old file
    or the new one, never half of one. The temporary name starts with a dot (node_exporter reads only *.prom)."""
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        os.makedirs(directory, 0o755, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def temporary_name_pattern(path):
    """What write_atomic's temporary files for path are named: ".<name>." and mkstemp's eight characters."""
    return re.compile(r"^\.%s\.[A-Za-z0-9_]{8}$" % re.escape(os.path.basename(path)))


def remove_stale_temporaries(path):
    """Remove the temporary files of write_atomic for path that a killed writer left beside it; returns their paths.
    Call it only while holding the lock every writer of path holds: then no temporary file there is a live writer's.
    Only regular files are removed (never a link, nor what it points to)."""
    directory = os.path.dirname(os.path.abspath(path))
    pattern = temporary_name_pattern(path)
    removed = []
    try:
        names = sorted(os.listdir(directory))
    except (FileNotFoundError, NotADirectoryError):
        return removed
    for name in names:
        if not pattern.match(name):
            continue
        stale = os.path.join(directory, name)
        try:
            if stat.S_ISREG(os.lstat(stale).st_mode):
                os.unlink(stale)
                removed.append(stale)
        except FileNotFoundError:
            continue
    return removed
