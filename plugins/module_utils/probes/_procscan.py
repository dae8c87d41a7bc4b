# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Who holds the GPU device nodes, read straight from /proc: the scan of every process's fds and memory maps.

A process holds the GPU when one of its file descriptors, or one of its memory mappings, is a GPU device of
the node, known by the file's identity, never by the text of a path (_device_nodes): a descriptor by the
device number of what it opened (a node with the same major:minor anywhere, in another mount namespace, a
chroot, a bind mount, or a deleted node, opens the same device), a mapping by the (device, inode) pair its
maps line carries. A descriptor opened with O_PATH never opened the device: it is no holder. Threads that do
not share their leader's file table (kcmp says so) have their own fds read, as do the live threads of a
process whose leader exited (_threads). A holder's record is read by _process.

The scan runs over every process on the node, so it is written for speed: one os.listdir and one os.stat
per fd, the maps file read as bytes with os.read and searched (the C library's memmem) for the few
filesystem numbers the device nodes live on before any line is looked at, no objects built for processes
that hold nothing, and full records (stat, cmdline, uid) only for the holders. It has two tiers: the fds of
every process always, the memory maps of every process only when asked (memory_maps=True), else only those
of the pids named in map_pids. Most of a full scan is the kernel formatting maps files, a page per read
(escaping each mapped file's path takes the most): no buffer size or Python change makes that cheaper, so
the tier that skips them is what makes a healthy node cheap. On a large process table the scan shares the
work among a few forked workers, one per core (threads would serialise on the GIL at every system call),
each taking small pieces of the process list from a queue as it is free; the fds are read first, so that
the device nodes other processes opened (a container's own nodes) are known when the maps are read.

A process stuck with its mmap lock held (D state inside the driver) makes a read of its maps block, as it
does for lsof and fuser: callers that must not hang run the scan under a deadline.

Process identity (_process), cgroup attribution (_cgroup) and device identity (_device_nodes) live in files of
their own, where their callers import them from.
"""

from __future__ import annotations

import json
import os
import stat as stat_module
import threading
import time

try:
    from ansible_collections.gpuops.remediation.plugins.module_utils.probes._proc_files import _DENIED, _read_all
except ImportError:  # copied flat into a simulated node's lib/, or run on its own
    from _proc_files import _DENIED, _read_all  # type: ignore[no-redef] # pylint: disable=import-error
try:
    from ansible_collections.gpuops.remediation.plugins.module_utils.probes._device_nodes import DeviceTable, _stat_fields
except ImportError:  # copied flat into a simulated node's lib/, or run on its own
    from _device_nodes import DeviceTable, _stat_fields  # type: ignore[no-redef] # pylint: disable=import-error
try:
    from ansible_collections.gpuops.remediation.plugins.module_utils.probes._threads import _kcmp_files, _other_tables, _other_threads
except ImportError:  # copied flat into a simulated node's lib/, or run on its own
    from _threads import _kcmp_files, _other_tables, _other_threads  # type: ignore[no-redef] # pylint: disable=import-error
try:
    from ansible_collections.gpuops.remediation.plugins.module_utils.probes._process import read_process
except ImportError:  # copied flat into a simulated node's lib/, or run on its own
    from _process import read_process  # type: ignore[no-redef] # pylint: disable=import-error

# Kinds of evidence, in the order they are reported in a holder's "via".
VIA_ORDER = ("fd", "mmap", "task_fd")

_MAX_WORKERS = 8
_PROCESSES_PER_WORKER = 500
O_PATH = 0o10000000  # the flags of /proc/<pid>/fdinfo/<fd> are octal


# ---------------------------------------------------------------------------------------------------------
# Reading one process's fds and maps. A process's findings: {via: [device paths]}, None when it has none.


def _opened_with_o_path(fdinfo_path):
    """True when the fdinfo says O_PATH (the fd names a file but never opened it); None when the fd is gone."""
    try:
        data = _read_all(fdinfo_path)
    except OSError:
        return None
    at = data.find(b"flags:")
    if at == -1:
        return False
    return bool(int(data[at + 6:data.index(b"\n", at)].strip(), 8) & O_PATH)


_STATX = []


def _os_stat_fields(path):
    try:
        return _stat_fields(os.stat(path))
    except OSError:
        return None


AT_STATX_DONT_SYNC = 0x4000
STATX_TYPE_MODE_INO = 0x1 | 0x2 | 0x100


def _fd_stat_function():
    """A function path -> (mode, ino, dev, rdev) of the file an fd link leads to, None when it cannot be had (the
    fd was closed, or may not be read); loaded once, before any fork.

    statx with AT_STATX_DONT_SYNC where the C library has it: a file on a network or FUSE filesystem whose
    server is gone is answered from the attributes the kernel has, where stat would wait for the server (the
    type, the inode and the device numbers never change). os.stat elsewhere.
    """
    if not _STATX:
        function = _os_stat_fields
        try:
            import ctypes  # only for statx
            import struct

            statx = ctypes.CDLL(None).statx
            statx.restype = ctypes.c_int
            # No argtypes: statx_stat passes ints (C ints) and bytes (char *) as they are, which costs a third less
            # per call than converting each argument; the call is made for every fd of every process.
            buffer = ctypes.create_string_buffer(256)
            unpack = struct.Struct("=H2xQ88xIIII").unpack_from  # stx_mode at 28, stx_ino at 32, rdev/dev at 128
            makedev = os.makedev
            at_fdcwd = -100

            def statx_stat(path):
                if statx(at_fdcwd, path.encode(), AT_STATX_DONT_SYNC, STATX_TYPE_MODE_INO, buffer) != 0:
                    return None
                mode, ino, rdev_major, rdev_minor, dev_major, dev_minor = unpack(buffer, 28)
                return mode, ino, makedev(dev_major, dev_minor), makedev(rdev_major, rdev_minor)

            if statx_stat("/") is not None:  # None on a kernel without statx (ENOSYS): os.stat then
                function = statx_stat
        except (ImportError, OSError, AttributeError):
            function = _os_stat_fields
        _STATX.append(function)
    return _STATX[0]


def _fd_devices(table_dir, table, found_nodes):
    """([fd names], [device paths] or None) of the fds of table_dir (/proc/<pid> or a task's dir); raises
    OSError. The nodes the GPU devices were opened through go into found_nodes ({(st_dev, st_ino): device})."""
    fd_dir = table_dir + "/fd/"
    names = os.listdir(fd_dir)
    devices = None
    stat = _fd_stat_function()
    device_of = table.device
    kinds = table.kinds
    for name in names:
        fields = stat(fd_dir + name)
        if fields is None or stat_module.S_IFMT(fields[0]) not in kinds:
            continue  # closed meanwhile, not ours to read, or of a kind no device of this node is
        device = device_of(fields)
        if device is not None:
            if _opened_with_o_path("%s/fdinfo/%s" % (table_dir, name)) is not False:
                continue  # O_PATH, or closed meanwhile
            devices = (devices or []) + [device]
            found_nodes[(fields[2], fields[1])] = device
    return names, devices


# The digits an inode's needle leaves out: inodes of nodes made at about the same time share the others.
_INODE_DIGITS_LEFT_OUT = 4


def _map_needles(map_fields):
    """[(needle, length of its MAJ:MIN part, {b"INODE": device path})] to search maps files with: b" MAJ:MIN "
    and the inode's digits but its last four, so that the search (bytes.find, in C) stops at few lines even where
    the device nodes share their filesystem with every library (a simulated node), and one needle covers the nodes
    of one filesystem made at about the same time: each needle is one more pass over every maps file, which costs
    more than the few lines of other files it stops at (an exact inode match decides)."""
    groups = {}
    for dev_field, inodes in map_fields.items():
        for inode, device in inodes.items():
            groups.setdefault((dev_field, inode[:-_INODE_DIGITS_LEFT_OUT]), {})[inode] = device
    return [(dev_field + prefix, len(dev_field), inodes) for (dev_field, prefix), inodes in sorted(groups.items())]


_MEMMEM = []


def _contains_function():
    """A function (data, needle) -> whether the bytes needle occurs in data; loaded once, before any fork.

    The C library's memmem where it has one: it skips through a maps file several bytes at a time, where bytes.find
    looks at nearly every byte (its skip table tells a needle's digits from the text's hex digits and path letters
    badly), and nearly every maps file holds no needle at all. `in` elsewhere.
    """
    if not _MEMMEM:
        function = bytes.__contains__
        try:
            import ctypes  # only for memmem

            memmem = ctypes.CDLL(None).memmem
            memmem.restype = ctypes.c_void_p
            memmem.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]

            def contains(data, needle):
                return memmem(data, len(data), needle, len(needle)) is not None

            if contains(b"1 fe:01 23\0 fe:01 4", b" fe:01 4") and not contains(b" fe:01 3", b" fe:01 4"):
                function = contains
        except (ImportError, OSError, AttributeError):
            function = bytes.__contains__
        _MEMMEM.append(function)
    return _MEMMEM[0]


def _maps_devices(path, needles, contains=bytes.__contains__):
    """(bytes in the maps file, [device paths mapped] or None); raises OSError.

    A line is "start-end perms offset MAJ:MIN INODE   path": a mapping is the device's when its MAJ:MIN and
    INODE are those of one of the device's nodes (needles, from _map_needles); the path is never read. contains:
    _contains_function(), which passes over the files that hold no needle.
    """
    data = _read_all(path)
    devices = None
    for needle, inode_at, inodes in needles:
        if not contains(data, needle):
            continue
        at = data.find(needle)
        while at != -1:
            start = at + inode_at
            device = inodes.get(data[start:data.find(b" ", start)])
            # The fields are the 4th and 5th of their line (two spaces before them), not text in a path.
            if device is not None and data.count(b" ", data.rfind(b"\n", 0, at) + 1, at) == 2:
                devices = (devices or []) + [device]
            at = data.find(needle, start)
    return len(data), devices


def _add(found, via, devices):
    if devices:
        found = found if found is not None else {}
        found.setdefault(via, []).extend(devices)
    return found


# ---------------------------------------------------------------------------------------------------------
# The scan: the fds of every process first, then the maps


def _scan_fds(proc_dir, pid, table, found_nodes):
    """(findings or None, denied: bool) of one process's fds and its threads' own fd tables; (None, False) when it
    is gone."""
    found = None
    try:
        names, devices = _fd_devices(proc_dir, table, found_nodes)
        found = _add(found, "fd", devices)
        denied = False
    except OSError as error:
        if error.errno not in _DENIED:
            return None, False  # gone (ENOENT, ESRCH) or not a process directory
        names, denied = [], True
    # An exited leader's table is empty and its live threads have the process's; a thread that unshared its
    # table (clone without CLONE_FILES, unshare(CLONE_FILES)) has one of its own.
    for task_dir in _other_tables(proc_dir, pid, set(names) or None):
        try:
            _count, devices = _fd_devices(task_dir, table, found_nodes)
        except OSError:
            continue
        denied = False
        found = _add(found, "task_fd", devices)
    return found, denied


def _scan_maps(proc_dir, pid, needles, contains):
    """(findings or None, denied: bool) of one process's memory maps (an exited leader's are read through a live
    thread: threads share one memory map); (None, False) when it is gone."""
    try:
        size, mapped = _maps_devices(proc_dir + "/maps", needles, contains)
    except OSError as error:
        return None, error.errno in _DENIED
    if size == 0:
        for tid in _other_threads(proc_dir, pid):
            try:
                size, mapped = _maps_devices("%s/task/%d/maps" % (proc_dir, tid), needles, contains)
            except OSError:
                continue
            if size:
                break
    return _add(None, "mmap", mapped), False


def _fds_of(names, proc_root, table):
    """The fd pass over names: [[pid, findings] of holders, [denied pids], [[st_dev, st_ino, device] of the nodes
    the devices were opened through]]."""
    holders, denied, found_nodes = [], [], {}
    for name in names:
        found, refused = _scan_fds(proc_root + "/" + name, int(name), table, found_nodes)
        if refused:
            denied.append(int(name))
        if found is not None:
            holders.append([int(name), found])
    return [holders, denied, [[dev, ino, device] for (dev, ino), device in found_nodes.items()]]


def _maps_of(names, proc_root, needles):
    """The maps pass over names: [[pid, findings] of holders, [denied pids]]."""
    holders, denied = [], []
    contains = _contains_function()
    for name in names:
        found, refused = _scan_maps(proc_root + "/" + name, int(name), needles, contains)
        if refused:
            denied.append(int(name))
        if found is not None:
            holders.append([int(name), found])
    return [holders, denied]


def _fork_worker(work):
    """(pid, pipe) of a child process that runs work() and writes its result as JSON; None if fork fails."""
    read_fd, write_fd = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(read_fd)
        os.close(write_fd)
        return None
    if pid == 0:
        # The worker: scan, report, and leave without running anything of the parent's (no atexit, no
        # flushing of inherited buffers).
        status = 1
        try:
            os.close(read_fd)
            payload = memoryview(json.dumps(work()).encode())
            while payload:
                payload = payload[os.write(write_fd, payload):]
            status = 0
        finally:
            os._exit(status)  # pylint: disable=protected-access
    os.close(write_fd)
    return pid, read_fd


def _collect_worker(worker):
    """The worker's result, or None when it failed."""
    pid, read_fd = worker
    chunks = []
    try:
        chunk = os.read(read_fd, 1 << 16)
        while chunk:
            chunks.append(chunk)
            chunk = os.read(read_fd, 1 << 16)
    finally:
        os.close(read_fd)
    try:
        _pid, status = os.waitpid(pid, 0)
    except ChildProcessError:
        status = 0  # reaped by someone else's SIGCHLD handler: judge by the output
    try:
        result = json.loads(b"".join(chunks).decode())
    except ValueError:
        return None
    return result if status == 0 else None


# Each worker takes this many pieces of the process list on average: few enough that taking one costs nothing (one
# read of a pipe), enough that a worker slowed by other work on its core leaves little for the others to wait on.
_PIECES_PER_WORKER = 64
# At most this many pieces, so that their indexes (two bytes each) fit in one write to an empty pipe, which never
# blocks (PIPE_BUF, 4096 bytes, is the least a pipe holds), whatever number of workers a caller asks for.
_MAX_PIECES = 2048
_INDEX_BYTES = 2


def _take_pieces(queue_fd, pieces, work):
    """[[index, work(piece)] of each piece taken from the queue] until the queue is empty."""
    done = []
    taken = os.read(queue_fd, _INDEX_BYTES)
    while len(taken) == _INDEX_BYTES:
        index = int.from_bytes(taken, "big")
        done.append([index, work(pieces[index])])
        taken = os.read(queue_fd, _INDEX_BYTES)
    return done


def _shared(names, workers, work):
    """[results of work(piece)] over pieces of names, shared among `workers` processes (this one and forked ones).

    The pieces wait in a pipe, each as its index, written before any worker forks and closed for writing: every
    worker (this process too) takes the next index until the pipe is empty, so a worker that gets less of its core
    (other work on the node) takes fewer pieces instead of holding the others up. A read of a pipe hands its bytes to
    one reader, so each piece is taken once; the pieces a failed worker took are done here.
    """
    if workers <= 1:
        return [work(names)]
    size = max(1, -(-len(names) // min(workers * _PIECES_PER_WORKER, _MAX_PIECES)))
    pieces = [names[at:at + size] for at in range(0, len(names), size)]
    queue_fd, write_fd = os.pipe()
    try:
        os.write(write_fd, b"".join(index.to_bytes(_INDEX_BYTES, "big") for index in range(len(pieces))))
    finally:
        os.close(write_fd)
    try:
        forked = [_fork_worker(lambda: _take_pieces(queue_fd, pieces, work)) for _worker in range(workers - 1)]
        done = _take_pieces(queue_fd, pieces, work)
    finally:
        os.close(queue_fd)
    for worker in forked:
        result = _collect_worker(worker) if worker is not None else None
        done.extend(result or [])
    results = dict((index, result) for index, result in done)
    return [results[index] if index in results else work(piece) for index, piece in enumerate(pieces)]


def _worker_count(process_count):
    """How many processes share the scan: most of its time is the kernel formatting maps files, which
    runs in parallel on several cores (threads would serialise on the GIL at every system call)."""
    if threading.active_count() > 1:
        return 1  # forking a threaded process is unsafe
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, min(_MAX_WORKERS, cores, process_count // _PROCESSES_PER_WORKER))


def _merge(findings, holders):
    for pid, found in holders:
        mine = findings.setdefault(int(pid), {})
        for via, devices in found.items():
            mine.setdefault(via, []).extend(devices)


def _scan(dev_dir, proc_root, sys_dir, workers, maps, nvidia_dri, exclude=()):
    """({pid: findings}, unreadable count)."""
    table = DeviceTable(dev_dir, sys_dir, nvidia_dri, proc_root)
    try:
        names = [name for name in os.listdir(proc_root) if name.isdigit() and name not in exclude]
    except OSError:
        return {}, 0
    _kcmp_files()  # loaded before any fork
    _fd_stat_function()
    _contains_function()
    if workers is None:
        workers = _worker_count(len(names))
    findings = {}
    denied = set()
    for holders, refused, nodes in _shared(names, workers, lambda share: _fds_of(share, proc_root, table)):
        _merge(findings, holders)
        denied.update(refused)
        for dev, ino, device in nodes:
            # A mapping of a node some process opened the device through (a container's own node) is the
            # device's too.
            table.add_map_fields(dev, ino, device)
    map_names = names if maps is True else [name for name in names if name in maps]
    needles = _map_needles(table.map_fields)
    for holders, refused in _shared(map_names, workers if maps is True else 1,
                                    lambda share: _maps_of(share, proc_root, needles)):
        _merge(findings, holders)
        denied.update(refused)
    return findings, len(denied)


def _holder(pid, found, proc_root):
    record = read_process(pid, proc_root)
    if record is None:
        return None
    record["via"] = [via for via in VIA_ORDER if via in found]
    record["devices"] = sorted(set(device for devices in found.values() for device in devices))
    return record


def scan_holders_report(dev_dir, proc_root="/proc", sys_dir="/sys", workers=None, memory_maps=True, map_pids=(),
                        nvidia_dri=None, exclude_pids=()):
    """{"holders": {pid: holder}, "unreadable_pids": int}.

    unreadable_pids counts the processes whose fds or maps this user may not read (a non-root run cannot
    see other users' processes): holders among them are missing from "holders". workers: how many
    processes share the scan (None: one per core, at most 8, one per 500 processes; 1: no fork).
    memory_maps: read every process's memory maps (True), or only those of map_pids (False): a process that
    holds a device only through a mapping is found only where its maps are read. nvidia_dri: see DeviceTable.
    exclude_pids: processes not scanned (the scan's own process).
    """
    maps = True if memory_maps else set(str(pid) for pid in map_pids)
    findings, unreadable = _scan(dev_dir, proc_root, sys_dir, workers, maps, nvidia_dri, set(str(pid) for pid in exclude_pids))
    holders = {}
    for pid, found in findings.items():
        holder = _holder(pid, found, proc_root)
        if holder is not None:
            holders[pid] = holder
    return {"holders": holders, "unreadable_pids": unreadable}


def scan_holders(dev_dir, proc_root="/proc", sys_dir="/sys", workers=None, memory_maps=True):
    """{pid: holder} of the processes that have a GPU device node under dev_dir open or mapped.

    holder: {"pid", "start_time", "ppid", "name", "cmdline", "state", "uid", "user", "via": ["fd", "mmap",
    "task_fd"] (those seen), "devices": [sorted paths]}.
    """
    return scan_holders_report(dev_dir, proc_root, sys_dir, workers, memory_maps)["holders"]


def scan_job(layout):
    """The scan as a probe child runs it: request {"memory_maps", "map_pids"} -> scan_holders_report's result. The
    process that scans is left out: the module's own child, whose NVML probe may have left a device open."""
    def scan(request):
        return scan_holders_report(layout.dev_dir, sys_dir=layout.sys_dir, memory_maps=request["memory_maps"],
                                   map_pids=request["map_pids"], nvidia_dri=layout.dri_node_rule, exclude_pids=(os.getpid(),))
    return scan


def scan_processes(layout, timeout, memory_maps=True, map_pids=(), child=None):
    """({pid: holder}, report): the scan of the layout's device nodes, in a child with a deadline, since reading
    the maps of a process stuck in D state with its memory lock held blocks the reader too. child: the snapshot's
    probe child (_deadline.ProbeChild, its second probe scan_job), which scans when it still lives.

    report: {"ok", "timed_out", "error", "unreadable_pids", "seconds"}.
    """
    # Imported here: the rest of this file is the standard library alone, so that it runs anywhere on its own.
    from ansible_collections.gpuops.remediation.plugins.module_utils.probes._deadline import ProbeFailed, ProbeTimeout, run_with_deadline

    started = time.monotonic()
    report = {"ok": False, "timed_out": False, "error": None, "unreadable_pids": None}
    holders = {}
    request = {"memory_maps": memory_maps, "map_pids": list(map_pids)}
    try:
        if child is not None:
            result = child.second_answer(request, timeout)
        else:
            scan = scan_job(layout)
            result = run_with_deadline(lambda: scan(request), timeout)
        holders = dict((int(pid), holder) for pid, holder in result["holders"].items())
        report.update(ok=True, unreadable_pids=result["unreadable_pids"])
    except ProbeTimeout as exc:
        report.update(timed_out=True, error="process scan gave %s" % exc)
    except ProbeFailed as exc:
        report["error"] = str(exc)
    report["seconds"] = round(time.monotonic() - started, 3)
    return holders, report
