# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every file the collection writes, locks or believes, across the trust boundary (docs/safety.md, "Files").

The run (root on a node, the controller's user on the controller) trusts only itself and root. A path is walked from
`/` one directory at a time with O_DIRECTORY|O_NOFOLLOW, so no link anywhere in it is followed; a directory that
someone else can write is refused (unless it is sticky and root's, as /tmp: nobody can then move what is in it), and
the directory that holds a file whose content the run believes must be writable by the run and root alone. Files are
opened relative to that directory's descriptor with O_NOFOLLOW (temporary files with O_EXCL), their mode and owner set
on the descriptor, and renamed relative to it: nothing is ever done again by name after it was checked.
"""

from __future__ import annotations

import errno
import fcntl
import os
import pwd
import random
import re
import stat

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC
_TEMPORARY_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_"


class UnsafePath(OSError):
    """A path the run must not write through, nor believe: the message names the option and the path."""

    def __init__(self, message):
        super().__init__(errno.EPERM, message)
        self.message = message

    def __str__(self):
        return self.message


def trusted_uid(uid):
    """Root and the run's own user: the only owners whose files and directories the run trusts."""
    return uid in (0, os.geteuid())


def owner_name(uid):
    try:
        return "uid %d (%s)" % (uid, pwd.getpwuid(uid).pw_name)
    except KeyError:
        return "uid %d" % uid


def writable_by_others(info):
    """Whether someone other than its owner (and root) may write the file or directory `info` describes: anyone, or a
    group other than root's."""
    return bool(info.st_mode & stat.S_IWOTH or (info.st_mode & stat.S_IWGRP and info.st_gid != 0))


def directory_problem(info, holds_trusted=False):
    """Why a directory (its fstat) is no place for the run to write, or None. holds_trusted: it holds what the run will
    believe, so a sticky world-writable directory (where others may add files) is refused too."""
    if not holds_trusted and info.st_mode & stat.S_ISVTX and info.st_uid == 0:
        return None  # /tmp-like: others may add names, never replace or remove the run's own
    if not trusted_uid(info.st_uid):
        return "it belongs to %s" % owner_name(info.st_uid)
    return _others_write(info)


def _others_write(info):
    if info.st_mode & stat.S_IWOTH:
        return "others can write it (mode %04o)" % stat.S_IMODE(info.st_mode)
    if info.st_mode & stat.S_IWGRP and info.st_gid != 0:
        return "group %d can write it (mode %04o)" % (info.st_gid, stat.S_IMODE(info.st_mode))
    return None


def file_problem(info):
    """Why an open file (its fstat) is not one the run wrote and nobody else could change, or None."""
    if not stat.S_ISREG(info.st_mode):
        return "it is not a regular file"
    if not trusted_uid(info.st_uid):
        return "it belongs to %s" % owner_name(info.st_uid)
    if writable_by_others(info):
        return _others_write(info)
    if info.st_nlink > 1:
        return "it has %d hard links (another name could make the run write or believe another file)" % info.st_nlink
    return None


def _refuse(option, path, where, problem):
    where_text = "" if where == path else " (at %s)" % where
    return UnsafePath("%s: %r is refused%s: %s; use a path whose every directory only root (or this run's user) can write"
                      % (option, path, where_text, problem))


def open_dir(path, option, create=False, mode=0o750, holds_trusted=False, shown=None):
    """A descriptor of the directory path, opened one component at a time from `/` without following a link; missing
    directories made with `mode` when create is set (else FileNotFoundError). Raises UnsafePath naming option and path
    for a link, a non-directory, or a directory others can write (directory_problem; the last one with holds_trusted).
    shown: the path the option gave, when path is a directory on the way to it (messages name it)."""
    if not isinstance(path, str) or not os.path.isabs(path):
        raise UnsafePath("%s: %r is not an absolute path" % (option, path))
    shown = shown or path
    _no_parent_step(path, option)
    parts = [part for part in os.path.normpath(path).split("/") if part]
    fd = os.open("/", _DIR_FLAGS)
    where = "/"
    try:
        for index, part in enumerate(parts + [None]):
            problem = directory_problem(os.fstat(fd), holds_trusted and index == len(parts))
            if problem:
                raise _refuse(option, shown, where, problem)
            if part is None:
                return fd
            where = os.path.join(where, part)
            parent, fd = fd, None
            fd = _open_child_dir(parent, part, where, option, shown, create, mode)  # closes parent
    except BaseException:
        if fd is not None:
            os.close(fd)
        raise
    return fd


def _open_child_dir(parent, name, where, option, path, create, mode):
    """Open directory `name` under the descriptor parent (closed here) without following a link."""
    try:
        try:
            return os.open(name, _DIR_FLAGS, dir_fd=parent)
        except FileNotFoundError:
            if not create:
                raise
            try:
                os.mkdir(name, mode, dir_fd=parent)
            except FileExistsError:
                pass
            child = os.open(name, _DIR_FLAGS, dir_fd=parent)
            info = os.fstat(child)
            if info.st_uid == os.geteuid() and stat.S_IMODE(info.st_mode) != mode:
                os.fchmod(child, mode)  # mkdir's mode is filtered by the umask
            return child
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise _refuse(option, path, where, "it is a symbolic link or not a directory") from None
            raise
    finally:
        os.close(parent)


def open_in(dir_fd, name, flags, option, path, mode=0o600):
    """A descriptor of the file `name` in the directory dir_fd, never through a link (O_NOFOLLOW; a FIFO never blocks
    the open), refused (UnsafePath) unless file_problem finds nothing."""
    try:
        fd = _open_or_create(dir_fd, name, flags | os.O_NOFOLLOW | os.O_NONBLOCK | _CLOEXEC, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _refuse(option, path, path, "it is a symbolic link") from None
        if exc.errno == errno.ENXIO:
            raise _refuse(option, path, path, "it is not a regular file") from None
        raise
    try:
        problem = file_problem(os.fstat(fd))
        if problem:
            raise _refuse(option, path, path, problem)
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open_or_create(dir_fd, name, flags, mode):
    """Open name as it is (never O_CREAT on what is there: the kernel's protected_regular and protected_fifos would
    answer EACCES for another user's file in a sticky directory, before the run could say why), else create it with
    O_EXCL: a file made here is the run's own, and one made by someone else in between is opened as found."""
    while True:
        try:
            return os.open(name, flags & ~os.O_CREAT, mode, dir_fd=dir_fd)
        except FileNotFoundError:
            if not flags & os.O_CREAT:
                raise
        try:
            return os.open(name, flags | os.O_EXCL, mode, dir_fd=dir_fd)
        except FileExistsError:
            continue


def _no_parent_step(path, option):
    """A ".." would be resolved here by name, past a directory never checked (the kernel would follow a link there)."""
    if ".." in path.split("/"):
        raise UnsafePath("%s: %r is refused: it has a '..' component; give the path without it" % (option, path))


def _split(path, option):
    if not isinstance(path, str) or not os.path.isabs(path):
        raise UnsafePath("%s: %r is not an absolute path" % (option, path))
    _no_parent_step(path, option)
    directory, name = os.path.split(os.path.normpath(path))
    if not name:
        raise UnsafePath("%s: %r names no file" % (option, path))
    return directory, name


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def temporary_name(name):
    return ".%s.%s" % (name, "".join(random.SystemRandom().choice(_TEMPORARY_CHARS) for dummy in range(8)))


def temporary_name_pattern(path):
    """What write_atomic's temporary files for path are named: ".<name>." and eight random characters."""
    return re.compile(r"^\.%s\.[A-Za-z0-9_]{8}$" % re.escape(os.path.basename(path)))


def write_atomic(path, content, mode=0o644, option="path", dir_mode=0o755, holds_trusted=False):
    """Write content (str or bytes) to a new temporary file (O_EXCL, O_NOFOLLOW) in path's directory (made as needed,
    open_dir), set its mode on the descriptor, fsync it and rename it over path relative to the directory: readers
    see the old file or the new one, never half of one, and a link at path is replaced, never followed. The temporary
    name starts with a dot (node_exporter reads only *.prom). holds_trusted: a later run believes the file
    (read_trusted), so its directory must be writable by root and the run alone, not merely sticky."""
    directory, name = _split(path, option)
    dir_fd = open_dir(directory, option, create=True, mode=dir_mode, holds_trusted=holds_trusted, shown=path)
    try:
        write_atomic_in(dir_fd, name, content, mode)
    finally:
        os.close(dir_fd)


def write_atomic_in(dir_fd, name, content, mode=0o644):
    """write_atomic of the file `name` in the directory open as dir_fd (open_dir)."""
    data = content.encode("utf-8") if isinstance(content, str) else content
    temporary = None
    try:
        for dummy in range(100):
            temporary = temporary_name(name)
            try:
                fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _CLOEXEC, 0o600, dir_fd=dir_fd)
                break
            except FileExistsError:
                temporary = None
        else:
            raise FileExistsError(errno.EEXIST, "no free temporary name beside %s" % name)
        try:
            _write_all(fd, data)
            os.fchmod(fd, mode)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        temporary = None
        os.fsync(dir_fd)
    finally:
        if temporary is not None:
            _unlink_quietly(temporary, dir_fd)


def _unlink_quietly(name, dir_fd):
    try:
        os.unlink(name, dir_fd=dir_fd)
    except OSError:
        pass


def append(path, data, option="path", mode=0o640, dir_mode=0o750, dir_fd=None):
    """Append bytes with one write(2) on a descriptor opened O_APPEND|O_NOFOLLOW (the file and its directories made as
    needed), fsync'd before it returns; the file must be a regular file of the run's own with one link (open_in)."""
    directory, name = _split(path, option)
    own = dir_fd is None
    if own:
        dir_fd = open_dir(directory, option, create=True, mode=dir_mode, shown=path)
    try:
        fd = open_in(dir_fd, name, os.O_WRONLY | os.O_APPEND | os.O_CREAT, option, path, mode)
        try:
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
    finally:
        if own:
            os.close(dir_fd)


def read_trusted(path, option, limit=None):
    """(bytes, whether cut) of the file at path, its last `limit` bytes at most (None: all), or None when it or its
    directory is missing. Only a file the run can believe is read: its directory and every one above reached without
    a link and writable by root and the run alone (open_dir with holds_trusted), the file a regular one of theirs
    (open_in); anything else raises UnsafePath naming option, path and owner."""
    directory, name = _split(path, option)
    try:
        dir_fd = open_dir(directory, option, holds_trusted=True, shown=path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:
        try:
            fd = open_in(dir_fd, name, os.O_RDONLY, option, path)
        except FileNotFoundError:
            return None
    finally:
        os.close(dir_fd)
    try:
        size = os.fstat(fd).st_size
        cut = limit is not None and size > limit
        if cut:
            os.lseek(fd, -limit, os.SEEK_END)
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks), cut
    finally:
        os.close(fd)


def remove_stale_temporaries(path, option="path"):
    """Remove the temporary files of write_atomic for path that a killed writer left beside it; returns their paths.
    Call it only while holding the lock every writer of path holds: then no temporary file there is a live writer's.
    Only the run's (or root's) regular files are removed, relative to the directory: never a link, nor what it points
    to."""
    directory, dummy = _split(path, option)
    pattern = temporary_name_pattern(path)
    try:
        dir_fd = open_dir(directory, option, shown=path)
    except (FileNotFoundError, NotADirectoryError):
        return []
    removed = []
    try:
        for name in sorted(os.listdir(dir_fd)):
            if not pattern.match(name):
                continue
            try:
                info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                if stat.S_ISREG(info.st_mode) and trusted_uid(info.st_uid):
                    os.unlink(name, dir_fd=dir_fd)
                    removed.append(os.path.join(directory, name))
            except (FileNotFoundError, PermissionError):
                continue
    finally:
        os.close(dir_fd)
    return removed


def path_problem(path, option, holds_trusted=False):
    """Why path could not be written safely (or believed, with holds_trusted): the UnsafePath message for the part of
    it that exists, else None. Only looks: nothing is made."""
    try:
        directory, name = _split(path, option)
    except UnsafePath as exc:
        return str(exc)
    existing = directory
    while True:
        try:
            dir_fd = open_dir(existing, option, holds_trusted=holds_trusted and existing == directory, shown=path)
            break
        except UnsafePath as exc:
            return str(exc)
        except (FileNotFoundError, NotADirectoryError):
            if existing == "/":
                return None
            existing = os.path.dirname(existing)
        except OSError as exc:
            return "%s: %r cannot be reached: %s" % (option, path, exc.strerror or exc)
    try:
        if existing != directory:
            return None
        try:
            info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        if stat.S_ISLNK(info.st_mode):
            return str(_refuse(option, path, path, "it is a symbolic link"))
        if stat.S_ISREG(info.st_mode):
            problem = file_problem(info)
            return str(_refuse(option, path, path, problem)) if problem else None
        return None  # a directory, a device: the caller says what it needs
    finally:
        os.close(dir_fd)
