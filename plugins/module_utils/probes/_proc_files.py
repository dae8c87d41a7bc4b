# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Reading /proc: a file's bytes and a directory's names, the few primitives the scan, the device table and the
process records share (standard library only: a simulated node runs them from its lib/)."""

from __future__ import annotations

import errno
import os

# A process whose files this user may not read answers with one of these.
_DENIED = (errno.EACCES, errno.EPERM)
_READ_SIZE = 1 << 16


def _read_all(path):
    """The bytes of a /proc file, read with os.read (a maps file comes a page per read); raises OSError."""
    fd = os.open(path, os.O_RDONLY)
    try:
        data = os.read(fd, _READ_SIZE)
        if data:
            chunk = os.read(fd, _READ_SIZE)
            if chunk:
                chunks = [data]
                while chunk:
                    chunks.append(chunk)
                    chunk = os.read(fd, _READ_SIZE)
                data = b"".join(chunks)
        return data
    finally:
        os.close(fd)


def _listdir(path):
    try:
        return os.listdir(path)
    except OSError:
        return []
