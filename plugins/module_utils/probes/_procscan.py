# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Who holds the GPU device nodes, read straight from /proc; process identity and cgroup attribution.

A process holds the GPU when one of its file descriptors, or one of its memory mappings, is a GPU device of
the node, known by the file's identity, never by the text of a path (device_identity, DeviceTable): a
descriptor by the device number of what it opened (a node with the same major:minor anywhere, in another
mount namespace, a chroot, a bind mount, or a deleted node, opens the same device), a mapping by the
(device, inode) pair its maps line carries. A descriptor opened with O_PATH never opened the device: it is
no holder. Threads that do not share their leader's file table (kcmp says so) have their own fds read, as
do the live threads of a process whose leader exited.

The scan runs over every process on the node, so it is written for speed: one os.listdir and one os.stat
per fd, the maps file read as bytes with os.read and searched for the few filesystem numbers the device
nodes live on before any line is looked at, no objects built for processes that hold nothing, and full
records (stat, cmdline, uid) only for the holders. It has two tiers: the fds of every process always, the
memory maps of every process only when asked (memory_maps=True), else only those of the pids named in
map_pids. Nine tenths of a full scan is the kernel formatting maps files, a page per read (about 1.5 us a
line, measured): no buffer size or Python change makes that cheaper, so the tier that skips them is what
makes a healthy node cheap. On a large process table the scan shares the work among a few forked workers,
one per core (threads would serialise on the GIL at every system call); the fds are read first, so that
the device nodes other processes opened (a container's own nodes) are known when the maps are read.

A process stuck with its mmap lock held (D state inside the driver) makes a read of its maps block, as it
does for lsof and fuser: callers that must not hang run the scan under a deadline.
"""

from __future__ import annotations

import errno
import json
import os
import pwd
import re
import stat as stat_module
import threading
import time

PF_KTHREAD = 0x00200000
NVIDIA_PCI_VENDOR = "0x10de"

# Kinds of evidence, in the order they are reported in a holder's "via".
VIA_ORDER = ("fd", "mmap", "task_fd")

_DENIED = (errno.EACCES, errno.EPERM)
_READ_SIZE = 1 << 16
_MAX_WORKERS = 8
_PROCESSES_PER_WORKER = 500
O_PATH = 0o10000000  # the flags of /proc/<pid>/fdinfo/<fd> are octal
# /proc/<pid>/task has 2 links plus one per thread.
_TASK_DIR_LINKS = 2
# A simulated node's registry of its device files (hard links made when it was built), under its sysfs: the
# simulation's counterpart of the kernel knowing a device whose node was deleted.
SIM_REGISTRY = os.path.join("dev", "gpuops-nodes")


# ---------------------------------------------------------------------------------------------------------
# Device nodes and their identity


class SysfsDriNodes:
    """Whether a /dev/dri node (card0, renderD128) belongs to an NVIDIA card, by the PCI vendor sysfs names."""

    def __init__(self, sys_dir="/sys"):
        self.sys_dir = sys_dir
        self._cache = {}

    def __call__(self, node):
        if node not in self._cache:
            vendor_file = os.path.join(self.sys_dir, "class", "drm", node, "device", "vendor")
            try:
                with open(vendor_file) as handle:
                    vendor = handle.read().strip().lower()
            except (OSError, UnicodeDecodeError):
                vendor = None
            self._cache[node] = vendor == NVIDIA_PCI_VENDOR
        return self._cache[node]


def device_identity(mode, ino, dev, rdev):
    """What makes two opened files the same device, from their stat fields: the one place that decides it.

    A character device is its device number: every node with that major:minor (another path, a bind mount,
    another mount namespace, a chroot, a second node made with mknod, a deleted node) opens the same device.
    A regular file (a simulated node's devices are regular files) is its (filesystem, inode) pair, which its
    hard links and bind mounts share. Anything else (a socket, a pipe, a directory) is no device: None.
    """
    kind = stat_module.S_IFMT(mode)
    if kind == stat_module.S_IFCHR:
        return ("rdev", rdev)
    if kind == stat_module.S_IFREG:
        return ("inode", dev, ino)
    return None


def _stat_fields(st):
    """(mode, ino, dev, rdev) of an os.stat result."""
    return st.st_mode, st.st_ino, st.st_dev, st.st_rdev


def _map_fields(st_dev, st_ino):
    """(b" MAJ:MIN ", b"INODE") as a /proc/<pid>/maps line shows a file: "%02x:%02x %lu"."""
    return b" %02x:%02x " % (os.major(st_dev), os.minor(st_dev)), b"%d" % st_ino


def _frontend_name(minor):
    return {255: "nvidiactl", 254: "nvidia-modeset"}.get(minor, "nvidia%d" % minor)


# The driver's character majors, by their name in /proc/devices: the node name of each minor.
_DRIVER_MAJORS = {
    "nvidia-frontend": _frontend_name,
    "nvidia": _frontend_name,
    "nvidia-uvm": lambda minor: "nvidia-uvm-tools" if minor == 1 else "nvidia-uvm",
    "nvidia-nvswitch": lambda minor: "nvidia-nvswitchctl" if minor == 255 else "nvidia-nvswitch%d" % minor,
    "nvidia-caps": lambda minor: "nvidia-caps/nvidia-cap%d" % minor,
    "nvidia-caps-imex-channels": lambda minor: "nvidia-caps-imex-channels/channel%d" % minor,
}


_CANONICAL = re.compile(r"^nvidia(?:\d+|ctl|-uvm|-uvm-tools|-modeset|-nvswitch\d+|-nvswitchctl)$")


def _driver_majors(proc_root):
    """{major: name of a minor's node} of the driver's character devices /proc/devices lists; drm's too."""
    majors = {}
    try:
        with open(proc_root + "/devices") as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError):
        return majors
    for line in text.split("Block devices:")[0].splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[0].isdigit():
            if fields[1] in _DRIVER_MAJORS:
                majors[int(fields[0])] = _DRIVER_MAJORS[fields[1]]
            elif fields[1] == "drm":
                majors[int(fields[0])] = "drm"
    return majors


class DeviceTable:
    """The GPU devices of a node, by identity: the answer to "which device is this opened file?".

    The nodes under dev_dir: nvidia* (nvidia0..N, nvidiactl, nvidia-uvm, nvidia-modeset, nvidia-caps/*, ...)
    and the dri nodes of NVIDIA cards (nvidia_dri: a function of a dri node's name, true for an NVIDIA card's;
    None: what sysfs under sys_dir says, as on a real node; NodeLayout.dri_node_rule gives the rule of the node
    in hand). On a node of character devices, also any device of the driver's majors (/proc/devices): a node
    made elsewhere for a device dev_dir has no node for, or whose node was deleted. A simulated node's devices
    are regular files: its registry (SIM_REGISTRY under sys_dir) keeps the ones deleted since.

    A device is reported by the path of its node under the real path of dev_dir.
    """

    def __init__(self, dev_dir, sys_dir="/sys", nvidia_dri=None, proc_root="/proc"):
        self.dev_dir = os.path.realpath(dev_dir)
        self._sys_dir = sys_dir
        self._is_nvidia_dri = nvidia_dri or SysfsDriNodes(sys_dir)
        self._by_identity = {}
        # {b" MAJ:MIN ": {b"INODE": device path}}: what a maps line shows for each known node.
        self.map_fields = {}
        self._majors = {}
        # The file types a device of this node can have (S_IFCHR, and S_IFREG on a simulated node).
        self.kinds = {stat_module.S_IFCHR}
        modes = set()
        for relative in self._node_names(self.dev_dir):
            st = self._add_node(os.path.join(self.dev_dir, relative), relative)
            modes.add(stat_module.S_IFMT(st.st_mode) if st is not None else None)
        registry = os.path.join(sys_dir, SIM_REGISTRY)
        for relative in self._node_names(registry):
            self._add_node(os.path.join(registry, relative), relative)
        if stat_module.S_IFCHR in modes or stat_module.S_IFREG not in modes:
            self._majors = _driver_majors(proc_root)
            self._name_by_number()

    def _name_by_number(self):
        """A character device of the driver's majors is reported by the name its number gives (nvidia<minor>),
        whatever its node under dev_dir is called."""
        renamed = {}
        for identity, device in self._by_identity.items():
            if identity[0] == "rdev":
                renamed[device] = self._by_number(identity[1]) or device
                self._by_identity[identity] = renamed[device]
        for inodes in self.map_fields.values():
            for inode, device in inodes.items():
                inodes[inode] = renamed.get(device, device)

    def _node_names(self, directory):
        """Paths relative to directory of the entries that name GPU devices (not followed below one level), the
        driver's own names first: a device with two nodes there is reported by the name the driver gives it."""
        try:
            entries = os.listdir(directory)
        except OSError:
            return []
        names = []
        for entry in sorted(entries, key=lambda entry: (_CANONICAL.match(entry) is None, entry)):
            if entry.startswith("nvidia"):
                path = os.path.join(directory, entry)
                if os.path.isdir(path):
                    names.extend(entry + "/" + sub for sub in sorted(_listdir(path)))
                else:
                    names.append(entry)
            elif entry == "dri":
                names.extend("dri/" + sub for sub in sorted(_listdir(os.path.join(directory, entry)))
                             if self._is_nvidia_dri(sub))
        return names

    def _add_node(self, path, relative):
        try:
            st = os.stat(path)
        except OSError:
            return None
        if stat_module.S_ISDIR(st.st_mode):
            return None
        device = os.path.join(self.dev_dir, relative)
        identity = device_identity(*_stat_fields(st))
        if identity is None:
            return None
        self._by_identity.setdefault(identity, device)
        self.kinds.add(stat_module.S_IFMT(st.st_mode))
        self.add_map_fields(st.st_dev, st.st_ino, device)
        if stat_module.S_ISREG(st.st_mode):
            mapped = _fields_as_mapped(path)
            if mapped is not None:
                self.map_fields.setdefault(mapped[0], {}).setdefault(mapped[1], device)
        return st

    def add_map_fields(self, st_dev, st_ino, device):
        """Know the maps fields of a node of `device`: a mapping of that node is a mapping of the device."""
        dev_field, inode = _map_fields(st_dev, st_ino)
        self.map_fields.setdefault(dev_field, {}).setdefault(inode, device)

    def device(self, fields):
        """The device path of a file, from its stat fields (mode, ino, dev, rdev), when it is a GPU device of this
        node, else None."""
        identity = device_identity(*fields)
        if identity is None:
            return None
        found = self._by_identity.get(identity)
        if found is None and identity[0] == "rdev" and self._majors:
            found = self._by_number(identity[1])
            self._by_identity[identity] = found
        return found

    def _by_number(self, rdev):
        name = self._majors.get(os.major(rdev))
        if name is None:
            return None
        if name == "drm":
            # /sys/dev/char/MAJ:MIN links to the drm device: its name (card1, renderD128) says which card.
            try:
                node = os.path.basename(os.readlink(os.path.join(self._sys_dir, "dev", "char", "%d:%d" % (
                    os.major(rdev), os.minor(rdev)))))
            except OSError:
                return None
            return os.path.join(self.dev_dir, "dri", node) if self._is_nvidia_dri(node) else None
        return os.path.join(self.dev_dir, name(os.minor(rdev)))


def _fields_as_mapped(path):
    """(b" MAJ:MIN ", b"INODE") that a maps line shows for a mapping of the regular file at path, read from a
    mapping of it made here, or None. On overlayfs and btrfs they are not the numbers stat gives (a mapping shows
    the inode of the layer below, or the filesystem's own device number). Never called for a device: mapping one
    would be an act on the driver."""
    try:
        import ctypes  # only for a simulated node's regular files

        libc = ctypes.CDLL(None, use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
        libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        try:
            address = libc.mmap(None, 1, 0x1, 0x1, fd, 0)  # PROT_READ, MAP_SHARED
        finally:
            os.close(fd)
        if address in (None, ctypes.c_void_p(-1).value):
            return None
        try:
            for line in _read_all("/proc/self/maps").splitlines():
                fields = line.split(None, 5)
                if len(fields) >= 5 and int(fields[0].split(b"-")[0], 16) == address:
                    return b" %s " % fields[3], fields[4]
        finally:
            libc.munmap(address, 1)
    except (ImportError, OSError, AttributeError, ValueError):
        pass
    return None


def _listdir(path):
    try:
        return os.listdir(path)
    except OSError:
        return []


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
            statx.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_uint, ctypes.c_char_p]
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


def _read_all(path):
    """The bytes of a /proc file, read with os.read (a maps file comes a page per read); raises OSError."""
    fd = os.open(path, os.O_RDONLY)
    try:
        data = os.read(fd, _READ_SIZE)
        if data:
            chunk = os.read(fd, _READ_SIZE)
            while chunk:
                data += chunk
                chunk = os.read(fd, _READ_SIZE)
        return data
    finally:
        os.close(fd)


def _map_needles(map_fields):
    """[(needle, length of its MAJ:MIN part, {b"INODE": device path})] to search maps files with: b" MAJ:MIN "
    and the inode's digits but its last two, so that the search (bytes.find, in C) stops at few lines even where
    the device nodes share their filesystem with every library (a simulated node)."""
    groups = {}
    for dev_field, inodes in map_fields.items():
        for inode, device in inodes.items():
            groups.setdefault((dev_field, inode[:-2]), {})[inode] = device
    return [(dev_field + prefix, len(dev_field), inodes) for (dev_field, prefix), inodes in sorted(groups.items())]


def _maps_devices(path, needles):
    """(bytes in the maps file, [device paths mapped] or None); raises OSError.

    A line is "start-end perms offset MAJ:MIN INODE   path": a mapping is the device's when its MAJ:MIN and
    INODE are those of one of the device's nodes (needles, from _map_needles); the path is never read.
    """
    data = _read_all(path)
    devices = None
    for needle, inode_at, inodes in needles:
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
# Threads with a file table of their own

KCMP_FILES = 2
# kcmp(2) system call numbers, by machine.
_KCMP = {"x86_64": 312, "aarch64": 272, "ppc64le": 354, "ppc64": 354, "s390x": 343, "riscv64": 272}
_KCMP_CALL = []


def _kcmp_files():
    """A function (pid, tid) -> True when both use one file table, False when not, None when the kernel does not
    say (no kcmp, or not permitted); loaded once, before any worker forks."""
    if not _KCMP_CALL:
        call = None
        try:
            import ctypes  # only for kcmp
            number = _KCMP.get(os.uname().machine)
            if number is not None:
                syscall = ctypes.CDLL(None, use_errno=True).syscall
                syscall.restype = ctypes.c_long

                def kcmp(pid, tid):
                    answer = syscall(number, pid, tid, KCMP_FILES, 0, 0)
                    return None if answer < 0 else answer == 0

                call = kcmp
        except (ImportError, OSError, AttributeError):
            call = None
        _KCMP_CALL.append(call or (lambda pid, tid: None))
    return _KCMP_CALL[0]


def _other_threads(proc_dir, pid):
    """The tids of a process's threads other than its leader. /proc/<pid>/task has 2 + its thread count links:
    a single-threaded process is answered with one stat."""
    try:
        if os.stat(proc_dir + "/task").st_nlink <= _TASK_DIR_LINKS + 1:
            return []
        return [int(name) for name in os.listdir(proc_dir + "/task") if name.isdigit() and int(name) != pid]
    except OSError:
        return []


def _other_tables(proc_dir, pid, leader_fds):
    """The task dirs of the threads whose file table is neither their leader's (leader_fds: the set of the leader's
    fd names, None when they could not be read or there are none) nor one already listed.

    Where the kernel does not compare two tables (kcmp missing, or refused for a process whose capabilities the
    caller lacks), a thread whose fd numbers are exactly its leader's is taken for sharing its table (an unshared
    table that reused every number of the leader's is the one thing missed then), any other is read.
    """
    tids = _other_threads(proc_dir, pid)
    if not tids:
        return []
    same_table = _kcmp_files()
    read = [pid] if leader_fds else []
    tables = []
    for tid in tids:
        answers = [same_table(other, tid) for other in read]
        if True in answers:
            continue
        if None in answers and leader_fds:
            try:
                if set(os.listdir("%s/task/%d/fd" % (proc_dir, tid))) == leader_fds:
                    continue
            except OSError:
                continue  # gone, or not ours to read
        read.append(tid)
        tables.append("%s/task/%d" % (proc_dir, tid))
    return tables


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


def _scan_maps(proc_dir, pid, needles):
    """(findings or None, denied: bool) of one process's memory maps (an exited leader's are read through a live
    thread: threads share one memory map); (None, False) when it is gone."""
    try:
        size, mapped = _maps_devices(proc_dir + "/maps", needles)
    except OSError as error:
        return None, error.errno in _DENIED
    if size == 0:
        for tid in _other_threads(proc_dir, pid):
            try:
                size, mapped = _maps_devices("%s/task/%d/maps" % (proc_dir, tid), needles)
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
    for name in names:
        found, refused = _scan_maps(proc_root + "/" + name, int(name), needles)
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


def _shared(names, workers, work):
    """[results of work(share)] with names shared among `workers` processes (this one and forked ones)."""
    shares = [names[index::workers] for index in range(workers)] if workers > 1 else [names]
    forked = [(_fork_worker(lambda share=share: work(share)), share) for share in shares[1:]]
    results = [work(shares[0])]
    for worker, share in forked:
        result = _collect_worker(worker) if worker is not None else None
        results.append(result if result is not None else work(share))  # the worker failed: do its share here
    return results


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


def _scan(dev_dir, proc_root, sys_dir, workers, maps, nvidia_dri):
    """({pid: findings}, unreadable count)."""
    table = DeviceTable(dev_dir, sys_dir, nvidia_dri, proc_root)
    try:
        names = [name for name in os.listdir(proc_root) if name.isdigit()]
    except OSError:
        return {}, 0
    _kcmp_files()  # loaded before any fork
    _fd_stat_function()
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
                        nvidia_dri=None):
    """{"holders": {pid: holder}, "unreadable_pids": int}.

    unreadable_pids counts the processes whose fds or maps this user may not read (a non-root run cannot
    see other users' processes): holders among them are missing from "holders". workers: how many
    processes share the scan (None: one per core, at most 8, one per 500 processes; 1: no fork).
    memory_maps: read every process's memory maps (True), or only those of map_pids (False): a process that
    holds a device only through a mapping is found only where its maps are read. nvidia_dri: see DeviceTable.
    """
    maps = True if memory_maps else set(str(pid) for pid in map_pids)
    findings, unreadable = _scan(dev_dir, proc_root, sys_dir, workers, maps, nvidia_dri)
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


def scan_processes(layout, timeout, memory_maps=True, map_pids=()):
    """({pid: holder}, report): the scan of the layout's device nodes, in a child with a deadline, since reading
    the maps of a process stuck in D state with its memory lock held blocks the reader too.

    report: {"ok", "timed_out", "error", "unreadable_pids", "seconds"}.
    """
    # Imported here: the rest of this file is the standard library alone, so that it runs anywhere on its own.
    from ansible_collections.gpuops.remediation.plugins.module_utils.probes._deadline import ProbeFailed, ProbeTimeout, run_with_deadline

    started = time.monotonic()
    report = {"ok": False, "timed_out": False, "error": None, "unreadable_pids": None}
    holders = {}
    try:
        result = run_with_deadline(lambda: scan_holders_report(
            layout.dev_dir, sys_dir=layout.sys_dir, memory_maps=memory_maps, map_pids=map_pids,
            nvidia_dri=layout.dri_node_rule), timeout)
        holders = dict((int(pid), holder) for pid, holder in result["holders"].items())
        report.update(ok=True, unreadable_pids=result["unreadable_pids"])
    except ProbeTimeout as exc:
        report.update(timed_out=True, error="process scan gave %s" % exc)
    except ProbeFailed as exc:
        report["error"] = str(exc)
    report["seconds"] = round(time.monotonic() - started, 3)
    return holders, report


# ---------------------------------------------------------------------------------------------------------
# One process: identity and description


def _read_bytes(path):
    with open(path, "rb") as handle:
        return handle.read()


def _parse_stat(data):
    """{"pid", "name", "state", "ppid", "pgid", "sid", "flags", "start_time"} from the bytes of /proc/<pid>/stat.

    The comm field may hold spaces, parentheses and newlines: it ends at the LAST ')'.
    """
    open_paren = data.index(b"(")
    close_paren = data.rindex(b")")
    fields = data[close_paren + 2:].split()
    return {
        "pid": int(data[:open_paren]),
        "name": data[open_paren + 1:close_paren].decode("utf-8", "replace"),
        "state": fields[0].decode("ascii", "replace"),
        "ppid": int(fields[1]),
        "pgid": int(fields[2]),
        "sid": int(fields[3]),
        "flags": int(fields[6]),
        "start_time": int(fields[19]),
    }


def process_stat(pid, proc_root="/proc"):
    """_parse_stat of /proc/<pid>/stat (pid, name, state, ppid, pgid, sid, flags, start_time), or None when it is gone."""
    return _read_stat(pid, proc_root)


def _read_stat(pid, proc_root="/proc"):
    try:
        return _parse_stat(_read_bytes("%s/%d/stat" % (proc_root, pid)))
    except (OSError, ValueError, IndexError):
        return None


def _parse_cmdline(data):
    """Arguments of /proc/<pid>/cmdline, exactly as given (NUL separated, a trailing NUL ends the last)."""
    if not data:
        return []
    if data.endswith(b"\0"):
        data = data[:-1]
    return [arg.decode("utf-8", "replace") for arg in data.split(b"\0")]


def _real_uid(status_bytes):
    for line in status_bytes.splitlines():
        if line.startswith(b"Uid:"):
            return int(line.split()[1])
    return None


_USER_NAMES = {}


def _user_name(uid):
    if uid is None:
        return None
    if uid not in _USER_NAMES:
        try:
            _USER_NAMES[uid] = pwd.getpwuid(uid).pw_name
        except KeyError:
            _USER_NAMES[uid] = str(uid)
    return _USER_NAMES[uid]


def live_thread(pid, proc_root="/proc"):
    """(tid, stat) of the first live thread (state other than Z and X) of pid besides its leader, or None.

    A leader in state Z with such a thread is a live thread group whose leader exited, not a zombie.
    """
    proc_dir = "%s/%d" % (proc_root, pid)
    try:
        tids = sorted(int(name) for name in os.listdir(proc_dir + "/task") if name.isdigit())
    except OSError:
        return None
    for tid in tids:
        if tid == pid:
            continue
        try:
            stat = _parse_stat(_read_bytes("%s/task/%d/stat" % (proc_dir, tid)))
        except (OSError, ValueError, IndexError):
            continue  # exited between the listing and the read
        if stat["state"] not in ("Z", "X"):
            return tid, stat
    return None


def read_process(pid, proc_root="/proc"):
    """{"pid", "start_time", "ppid", "name", "cmdline", "state", "uid", "user", "leader_exited"}, or None when it
    is gone.

    A process whose leader exited while other threads live on (the leader's stat says Z) is alive:
    leader_exited is True, and state and cmdline are those of a live thread (the leader's cmdline is empty).
    """
    proc_dir = "%s/%d" % (proc_root, pid)
    try:
        stat = _parse_stat(_read_bytes(proc_dir + "/stat"))
        cmdline = _parse_cmdline(_read_bytes(proc_dir + "/cmdline"))
        uid = _real_uid(_read_bytes(proc_dir + "/status"))
    except (OSError, ValueError, IndexError):
        return None
    state = stat["state"]
    live = live_thread(pid, proc_root) if state == "Z" else None
    if live is not None:
        tid, thread_stat = live
        state = thread_stat["state"]
        try:
            cmdline = _parse_cmdline(_read_bytes("%s/task/%d/cmdline" % (proc_dir, tid))) or cmdline
        except OSError:
            pass
    return {
        "pid": pid,
        "start_time": stat["start_time"],
        "ppid": stat["ppid"],
        "name": stat["name"],
        "cmdline": cmdline,
        "state": state,
        "uid": uid,
        "user": _user_name(uid),
        "leader_exited": live is not None,
    }


def start_time(pid, proc_root="/proc"):
    """Clock ticks since boot when the process started (stat field 22), or None when it is gone."""
    stat = _read_stat(pid, proc_root)
    return stat["start_time"] if stat else None


def same_process(pid, start_time, proc_root="/proc"):  # pylint: disable=redefined-outer-name
    """True when pid still names the process that started at start_time (a reused pid is another one)."""
    if start_time is None:
        return False
    stat = _read_stat(pid, proc_root)
    return stat is not None and stat["start_time"] == start_time


def ancestors(pid, proc_root="/proc"):
    """[parent, grandparent, ..., 1]; shorter when a process on the way is gone or lives outside this view."""
    chain = []
    seen = {pid}
    current = pid
    while current > 1:
        stat = _read_stat(current, proc_root)
        if stat is None or stat["ppid"] <= 0 or stat["ppid"] in seen:
            break
        current = stat["ppid"]
        chain.append(current)
        seen.add(current)
    return chain


def is_kernel_thread(pid, proc_root="/proc"):
    """True for kernel threads: PF_KTHREAD in the stat flags, or kthreadd (pid 2) and its children."""
    stat = _read_stat(pid, proc_root)
    if stat is None:
        return False
    if stat["flags"] & PF_KTHREAD:
        return True
    if pid == 2 or stat["ppid"] == 2:
        # Inside a PID namespace pid 2 is an ordinary process: trust the rule only for the real kthreadd.
        kthreadd = _read_stat(2, proc_root)
        return kthreadd is not None and kthreadd["name"] == "kthreadd" and kthreadd["ppid"] == 0
    return False


_BOOT_TIME = {}


def boot_time(proc_root="/proc"):
    """Seconds since the epoch when the node booted (btime of /proc/stat)."""
    if proc_root not in _BOOT_TIME:
        with open(proc_root + "/stat", "rb") as handle:
            for line in handle:
                if line.startswith(b"btime "):
                    _BOOT_TIME[proc_root] = int(line.split()[1])
                    break
            else:
                raise ValueError("no btime line in %s/stat" % proc_root)
    return _BOOT_TIME[proc_root]


def start_time_epoch(ticks, proc_root="/proc"):
    """A start time in clock ticks since boot, as seconds since the epoch (float)."""
    return boot_time(proc_root) + float(ticks) / os.sysconf("SC_CLK_TCK")


# ---------------------------------------------------------------------------------------------------------
# cgroup attribution

_HEX_ID = r"([0-9a-f]{64})"
# (pattern over one path component, runtime); the id is group 1.
_CONTAINER_COMPONENTS = (
    (re.compile(r"^docker-%s\.scope$" % _HEX_ID), "docker"),
    (re.compile(r"^cri-containerd-%s\.scope$" % _HEX_ID), "containerd"),
    (re.compile(r"^nerdctl-%s\.scope$" % _HEX_ID), "containerd"),
    (re.compile(r"^.*:cri-containerd:%s$" % _HEX_ID), "containerd"),
    (re.compile(r"^crio-(?:conmon-)?%s(?:\.scope)?$" % _HEX_ID), "cri-o"),
    (re.compile(r"^libpod-(?:conmon-|payload-)?%s(?:\.scope)?$" % _HEX_ID), "podman"),
)
_BARE_ID = re.compile(r"^%s$" % _HEX_ID)
# pod<uid> (cgroupfs), kubepods-<qos>-pod<uid with underscores>.slice (systemd), static pods' 32-hex uids,
# and the kubepods-...-pod<uid>.slice:cri-containerd:<id> form of a containerd with a mismatched driver.
_POD_UID = re.compile(r"(?:^|-)pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12}|[0-9a-f]{32})"
                      r"(?:\.slice)?(?:$|:)")
_SLURM_JOB = re.compile(r"^job_(\d+)$")
_SLURM_PARENT = re.compile(r"^(?:uid_\d+|(?:.+_)?slurmstepd\.scope)$")
_UNIT_SUFFIXES = (".service", ".scope")


def _cgroup_lines(text):
    """[(hierarchy, controllers, path)] of the lines of /proc/<pid>/cgroup, the systemd ones first."""
    preferred = []
    others = []
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3 or not parts[2].startswith("/"):
            continue
        hierarchy, controllers, _path = parts
        systemd = (hierarchy == "0" and controllers == "") or controllers == "name=systemd"
        (preferred if systemd else others).append(tuple(parts))
    return preferred + others, preferred


class OwnCgroup:
    """The cgroups of the process that runs the scan: a holder is in a container only when that container is
    not the one this process runs in (the Ansible target itself may be a container).

    Each line of a holder is read below this process's own cgroup of the same hierarchy, and a container seen
    in any of this process's lines (a runtime may show in some controllers only) is its own.
    """

    def __init__(self, text=""):
        lines, _systemd = _cgroup_lines(text)
        self.paths = dict(((hierarchy, controllers), _components(path)) for hierarchy, controllers, path in lines)
        self.containers = []
        for components in self.paths.values():
            container = _container(components)
            if container and container not in self.containers:
                self.containers.append(container)

    def below(self, hierarchy, controllers, components):
        """The components of a holder's path below our own cgroup of that hierarchy; all when not below it."""
        own = self.paths.get((hierarchy, controllers))
        if own and components[:len(own)] == own:
            return components[len(own):]
        return components


def _container(components):
    """{"runtime", "id"} of the innermost container in one cgroup path, or None."""
    for index in range(len(components) - 1, -1, -1):
        component = components[index]
        for pattern, runtime in _CONTAINER_COMPONENTS:
            match = pattern.match(component)
            if match:
                return {"runtime": runtime, "id": match.group(1)}
        if _BARE_ID.match(component) and index > 0:
            parent = components[index - 1]
            if parent == "docker":
                return {"runtime": "docker", "id": component}
            if _POD_UID.search(parent):
                # cgroupfs driver under kubepods: the CRI runtime (containerd since dockershim left).
                return {"runtime": "containerd", "id": component}
    return None


def _pod_uid(components):
    if not any(component.startswith("kubepods") or "-kubepods" in component for component in components):
        return None
    for component in components:
        match = _POD_UID.search(component)
        if match:
            uid = match.group(1).replace("_", "-")
            return uid
    return None


def _slurm_job(components):
    for index in range(1, len(components)):
        match = _SLURM_JOB.match(components[index])
        if match and _SLURM_PARENT.match(components[index - 1]):
            return match.group(1)
    return None


def _is_container_component(component):
    return any(pattern.match(component) for pattern, _runtime in _CONTAINER_COMPONENTS)


def _systemd_unit(components):
    """The innermost .service/.scope unit, unless a container scope sits below it."""
    for component in reversed(components):
        if _is_container_component(component):
            return None
        if component.endswith(_UNIT_SUFFIXES):
            return component
    return None


def parse_cgroup(text, own=None):
    """Attribution from the text of /proc/<pid>/cgroup (v1 and v2 lines); see attribution().

    own: an OwnCgroup; the container is then one other than the one it names (None when it is the same).
    """
    result = {"container": None, "kubernetes_pod_uid": None, "slurm_job": None, "systemd_unit": None}
    lines, systemd_lines = _cgroup_lines(text)
    for hierarchy, controllers, path in lines:
        components = _components(path)
        if result["container"] is None:
            result["container"] = _container(own.below(hierarchy, controllers, components) if own else components)
        if result["kubernetes_pod_uid"] is None:
            result["kubernetes_pod_uid"] = _pod_uid(components)
        if result["slurm_job"] is None:
            result["slurm_job"] = _slurm_job(components)
    if own is not None and result["container"] in own.containers:
        result["container"] = None
    # Units live in the systemd hierarchy: the v2 line, or name=systemd on v1 (any line when neither is there).
    for _hierarchy, _controllers, path in systemd_lines or lines:
        result["systemd_unit"] = _systemd_unit(_components(path))
        if result["systemd_unit"]:
            break
    return result


def _components(path):
    return [component for component in path.split("/") if component]


_OWN_CGROUP = {}


def _read_cgroup(path):
    try:
        return _read_bytes(path).decode("utf-8", "replace")
    except OSError:
        return ""


def own_cgroup(proc_root="/proc"):
    """The OwnCgroup of this process, read once per process (a forked child is in the same cgroups)."""
    if proc_root not in _OWN_CGROUP:
        _OWN_CGROUP[proc_root] = OwnCgroup(_read_cgroup(proc_root + "/self/cgroup"))
    return _OWN_CGROUP[proc_root]


def attribution(pid, proc_root="/proc"):
    """{"container": {"runtime", "id"}|None, "kubernetes_pod_uid", "slurm_job", "systemd_unit"} of a process.

    The container is one other than the container this process runs in (own_cgroup()): a process in the
    module's own container is not "in a container". All None when the process is gone or its cgroup file
    cannot be read.
    """
    return parse_cgroup(_read_cgroup("%s/%d/cgroup" % (proc_root, pid)), own_cgroup(proc_root))
