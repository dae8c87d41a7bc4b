# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Who holds the GPU device nodes, read straight from /proc; process identity and cgroup attribution.

A process holds the GPU when one of its file descriptors, or one of its memory mappings, points at a
device node of the NVIDIA driver under the node's dev dir. When the thread-group leader has exited while
other threads live on, /proc/<pid>/fd and /proc/<pid>/maps are empty: the live threads' views under
/proc/<pid>/task/<tid>/ are read instead.

The scan runs over every process on the node, so it is written for speed: one os.listdir and one
os.readlink per fd, the maps file read as bytes with os.read and searched for the dev dir prefix before any
line is looked at, no objects built for processes that hold nothing, and full records (stat, cmdline, uid)
only for the holders. It has two tiers: the fds of every process always, the memory maps of every process
only when asked (memory_maps=True), else only those of the pids named in map_pids. Nine tenths of a full
scan is the kernel formatting maps files, a page per read (about 1.5 us a line, measured): no buffer size or
Python change makes that cheaper, so the tier that skips them is what makes a healthy node cheap. On a large
process table the scan shares the work among a few forked workers, one per core (threads would serialise on
the GIL at every system call).

A process stuck with its mmap lock held (D state inside the driver) makes a read of its maps block, as it
does for lsof and fuser: callers that must not hang run the scan under a deadline.
"""

from __future__ import annotations

import errno
import json
import os
import pwd
import re
import threading
import time

PF_KTHREAD = 0x00200000
NVIDIA_PCI_VENDOR = "0x10de"

# Kinds of evidence, in the order they are reported in a holder's "via".
VIA_ORDER = ("fd", "mmap", "task_fd")

_DENIED = (errno.EACCES, errno.EPERM)
_DELETED_SUFFIX = " (deleted)"
_READ_SIZE = 1 << 16
_MAX_WORKERS = 8
_PROCESSES_PER_WORKER = 500


# ---------------------------------------------------------------------------------------------------------
# Device nodes


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


class _DeviceMatcher:
    """Decides whether a path (an fd link target or a mapped file) is a GPU device node under dev_dir.

    nvidia_dri: a function of a dri node's name, true for the nodes of NVIDIA cards (None: what sysfs under sys_dir
    says, as on a real node; NodeLayout.dri_node_rule gives the rule of the node in hand).
    """

    def __init__(self, dev_dir, sys_dir="/sys", nvidia_dri=None):
        # fd links and maps show resolved paths: match against the resolved dev dir.
        real_dev_dir = os.path.realpath(dev_dir)
        self.prefix = real_dev_dir.rstrip("/") + "/"
        self.prefix_bytes = os.fsencode(self.prefix)
        self._is_nvidia_dri = nvidia_dri or SysfsDriNodes(sys_dir)

    def device(self, path):
        """The device path when `path` names a GPU device node, else None."""
        if not path.startswith(self.prefix):
            return None
        if path.endswith(_DELETED_SUFFIX):
            path = path[:-len(_DELETED_SUFFIX)]
        relative = path[len(self.prefix):]
        if relative.startswith("nvidia"):
            # nvidia0..N, nvidiactl, nvidia-uvm, nvidia-uvm-tools, nvidia-modeset, nvidia-nvswitch*, ...
            if "/" not in relative or relative.startswith("nvidia-caps/"):
                return path
            return None
        if relative.startswith("dri/") and self._is_nvidia_dri(relative[4:]):
            return path
        return None


# ---------------------------------------------------------------------------------------------------------
# Reading one process's fds and maps. A process's findings: {via: [device paths]}, None when it has none.


def _fd_devices(fd_dir, matcher):
    """(number of fds, [device paths] or None) of the fds listed in fd_dir; raises OSError."""
    names = os.listdir(fd_dir)
    devices = None
    prefix = matcher.prefix
    fd_dir += "/"
    for name in names:
        try:
            target = os.readlink(fd_dir + name)
        except OSError:
            continue  # closed between the listing and the readlink
        if target.startswith(prefix):
            device = matcher.device(target)
            if device is not None:
                devices = (devices or []) + [device]
    return len(names), devices


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


def _maps_devices(path, matcher):
    """(bytes in the maps file, [device paths mapped] or None); raises OSError."""
    data = _read_all(path)
    prefix = matcher.prefix_bytes
    at = data.find(prefix)
    if at == -1:
        return len(data), None
    devices = []
    while at != -1:
        end = data.find(b"\n", at)
        if end == -1:
            end = len(data)
        # The path is the line's last field, after padding spaces: the prefix inside a longer path
        # (/tmp/x/dev/... while looking for /dev/) is no match.
        if data[at - 1:at] == b" ":
            device = matcher.device(os.fsdecode(data[at:end]))
            if device is not None:
                devices.append(device)
        at = data.find(prefix, end)
    return len(data), devices or None


def _add(found, via, devices):
    if devices:
        found = found if found is not None else {}
        found.setdefault(via, []).extend(devices)
    return found


# ---------------------------------------------------------------------------------------------------------
# The scan


def _leader_is_zombie(proc_dir):
    try:
        return _parse_stat(_read_all(proc_dir + "/stat"))["state"] == "Z"
    except (OSError, ValueError, IndexError):
        return False


def _scan_threads(proc_dir, matcher, found, read_maps):
    """Reads the fds (and, with read_maps, the maps) of the live threads of a process whose leader exited or
    hides its fds.

    Returns (found, fds_read, maps_read): whether some thread's fd table, and the shared memory map, could
    be read.
    """
    try:
        tids = os.listdir(proc_dir + "/task")
    except OSError:
        return found, False, False
    fds_read = False
    maps_read = False
    for tid in tids:
        task_dir = "%s/task/%s" % (proc_dir, tid)
        try:
            _count, devices = _fd_devices(task_dir + "/fd", matcher)
        except OSError:
            continue
        fds_read = True
        found = _add(found, "task_fd", devices)
        if read_maps and not maps_read:
            # Threads share one memory map: the first live thread shows it (an exited leader shows nothing).
            try:
                size, mapped = _maps_devices(task_dir + "/maps", matcher)
            except OSError:
                continue
            maps_read = size > 0
            found = _add(found, "mmap", mapped)
    return found, fds_read, maps_read


def _scan_process(proc_dir, matcher, read_maps):
    """(findings or None, denied: bool) of one process; (None, False) when it vanished. Its maps are read only
    with read_maps."""
    found = None
    fd_denied = maps_denied = False
    fd_count = maps_size = 0
    try:
        fd_count, devices = _fd_devices(proc_dir + "/fd", matcher)
        found = _add(found, "fd", devices)
    except OSError as error:
        if error.errno not in _DENIED:
            return None, False  # gone (ENOENT, ESRCH) or not a process directory
        fd_denied = True
    if read_maps:
        try:
            maps_size, mapped = _maps_devices(proc_dir + "/maps", matcher)
            found = _add(found, "mmap", mapped)
        except OSError as error:
            if error.errno not in _DENIED:
                return None, False
            maps_denied = True
    # Empty fds and maps: a kernel thread, a zombie, or a leader that exited while its threads live on.
    if fd_denied or (fd_count == 0 and maps_size == 0 and _leader_is_zombie(proc_dir)):
        found, fds_read, maps_read = _scan_threads(proc_dir, matcher, found, read_maps)
        fd_denied = fd_denied and not fds_read
        maps_denied = maps_denied and not maps_read
    return found, fd_denied or maps_denied


def _scan_names(names, proc_root, matcher, maps):
    """([(pid, findings)], unreadable count) for the processes named in names; maps: True (read every process's
    memory maps) or the set of names whose maps are read."""
    holders = []
    unreadable = 0
    every_map = maps is True
    for name in names:
        found, denied = _scan_process(proc_root + "/" + name, matcher, every_map or name in maps)
        if denied:
            unreadable += 1
        if found is not None:
            holders.append((int(name), found))
    return holders, unreadable


def _fork_worker(names, proc_root, matcher, maps):
    """(pid, pipe) of a child process that scans names and writes its result as JSON; None if fork fails."""
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
            payload = memoryview(json.dumps(_scan_names(names, proc_root, matcher, maps)).encode())
            while payload:
                payload = payload[os.write(write_fd, payload):]
            status = 0
        finally:
            os._exit(status)  # pylint: disable=protected-access
    os.close(write_fd)
    return pid, read_fd


def _collect_worker(worker):
    """The worker's ([(pid, findings)], unreadable), or None when it failed."""
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
        holders, unreadable = json.loads(b"".join(chunks).decode())
    except ValueError:
        return None
    if status != 0:
        return None
    return [(int(found_pid), found) for found_pid, found in holders], int(unreadable)


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


def _scan(dev_dir, proc_root, sys_dir, workers, maps, nvidia_dri):
    """({pid: findings}, unreadable count)."""
    matcher = _DeviceMatcher(dev_dir, sys_dir, nvidia_dri)
    try:
        names = [name for name in os.listdir(proc_root) if name.isdigit()]
    except OSError:
        return {}, 0
    if workers is None:
        workers = _worker_count(len(names))
    shares = [names[index::workers] for index in range(workers)]
    forked = [(_fork_worker(share, proc_root, matcher, maps), share) for share in shares[1:]]
    holders, unreadable = _scan_names(shares[0], proc_root, matcher, maps)
    for worker, share in forked:
        result = _collect_worker(worker) if worker is not None else None
        if result is None:
            result = _scan_names(share, proc_root, matcher, maps)  # the worker failed: do its share here
        holders.extend(result[0])
        unreadable += result[1]
    return dict(holders), unreadable


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
    holds a device only through a mapping is found only where its maps are read. nvidia_dri: see _DeviceMatcher.
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
    from ansible_collections.gpuops.remediation.plugins.module_utils._deadline import ProbeFailed, ProbeTimeout, run_with_deadline

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
    """{"pid", "name", "state", "ppid", "flags", "start_time"} from the bytes of /proc/<pid>/stat.

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
        "flags": int(fields[6]),
        "start_time": int(fields[19]),
    }


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
