# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The /proc scan against real processes holding real files in a temporary dev dir, and cgroup attribution
against cgroup lines published by other projects (each sample names where it came from)."""

from __future__ import annotations

import importlib.util
import json
import os
import pwd
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

import pytest

from ansible_collections.gpuops.remediation.plugins.module_utils.probes import _cgroup
from ansible_collections.gpuops.remediation.plugins.module_utils.probes import _device_nodes
from ansible_collections.gpuops.remediation.plugins.module_utils.probes import _process
from ansible_collections.gpuops.remediation.plugins.module_utils.probes import _procscan as procscan
from ansible_collections.gpuops.remediation.plugins.module_utils.probes import _threads

from ansible_collections.gpuops.remediation.tests.unit.helpers import bounded

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures")

# The scan and the files it imports (standard library only), as a simulated node's lib/ holds them.
SCAN_FILES = ["_procscan.py", "_proc_files.py", "_device_nodes.py", "_threads.py", "_process.py"]
DEVICE_FILES = ["nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm", "nvidia-caps/nvidia-cap1", "dri/card1"]


@pytest.fixture
def dev_dir(tmp_path):
    root = tmp_path / "dev"
    for name in DEVICE_FILES + ["zero"]:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"\0" * 4096)
    return str(root)


class Children:
    """Python children that block reading stdin: closing it (at teardown) ends them and any grandchild."""

    def __init__(self):
        self.procs = []
        self.strays = []  # (pid, start_time) of grandchildren, SIGKILLed at teardown if still there

    def start(self, code, *args):
        """(Popen, first line the child printed) once the child has set itself up."""
        proc = bounded.start([sys.executable, "-c", code] + list(args),
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.procs.append(proc)
        return proc, bounded.line(proc, "the child's first line")

    def adopt(self, pid):
        self.strays.append((pid, _process.start_time(pid)))

    def close(self):
        for proc in self.procs:
            proc.stdin.close()
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                bounded.wait(proc, "proc")
            proc.stdout.close()
        deadline = time.monotonic() + 10
        for pid, started in self.strays:
            while _process.same_process(pid, started) and time.monotonic() < deadline:
                time.sleep(0.02)
            if _process.same_process(pid, started):
                os.kill(pid, signal.SIGKILL)


@pytest.fixture
def children():
    kids = Children()
    yield kids
    kids.close()


def wait_for_state(pid, state, timeout=bounded.DEADLINE):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        record = _process.read_process(pid)
        if record and record["state"] == state:
            return record
        time.sleep(0.01)
    raise AssertionError("pid %d never reached state %s: %r" % (pid, state, _process.read_process(pid)))


def wait_for_leader_state(pid, state, timeout=bounded.DEADLINE):
    """Waits until the stat of pid (its thread-group leader) shows state."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        stat = _process._read_stat(pid)  # pylint: disable=protected-access
        if stat and stat["state"] == state:
            return stat
        time.sleep(0.01)
    raise AssertionError("the leader of pid %d never reached state %s" % (pid, state))


HOLD_OPEN = """
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
print(os.getpid(), flush=True)
os.read(0, 1)
"""

# Python's mmap.mmap keeps a dup of the fd: libc's mmap leaves only the mapping once the fd is closed.
MAP_THEN_CLOSE = """
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
fd = os.open(sys.argv[1], os.O_RDWR)
address = libc.mmap(None, 4096, 1, 1, fd, 0)  # PROT_READ, MAP_SHARED
assert address not in (None, ctypes.c_void_p(-1).value), ctypes.get_errno()
os.close(fd)
print(os.getpid(), flush=True)
os.read(0, 1)
"""

# The parent opens the device, forks, and exits at once: the grandchild holds the inherited fd.
DOUBLE_FORK = """
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
if os.fork() == 0:
    os.setsid()
    print(os.getpid(), flush=True)
    os.read(0, 1)
os._exit(0)
"""

# The parent holds the device and never reaps its child, which exits at once.
ZOMBIE_PARENT = """
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
child = os.fork()
if child == 0:
    os._exit(0)
print(child, flush=True)
os.read(0, 1)
"""

# The main thread (the thread-group leader) exits; a second thread keeps the process and its fds alive.
LEADER_EXITS = """
import ctypes, os, sys, threading
fd = os.open(sys.argv[1], os.O_RDWR)
threading.Thread(target=os.read, args=(0, 1)).start()
print(os.getpid(), flush=True)
ctypes.CDLL(None).pthread_exit(None)
"""

# comm set to a name with a parenthesis, a space, a newline and shell metacharacters (15 bytes at most).
ODD_NAME = """
import ctypes, os, sys
ctypes.CDLL(None).prctl(15, ctypes.c_char_p(sys.argv[2].encode()), 0, 0, 0)  # PR_SET_NAME
fd = os.open(sys.argv[1], os.O_RDWR)
print(os.getpid(), flush=True)
os.read(0, 1)
"""


def test_open_fd_holder_and_its_identity(children, dev_dir):
    device = os.path.join(dev_dir, "nvidia0")
    proc, line = children.start(HOLD_OPEN, device)
    pid = int(line)
    assert pid == proc.pid

    holder = procscan.scan_holders(dev_dir)[pid]

    assert holder["via"] == ["fd"]
    assert holder["devices"] == [os.path.realpath(device)]
    assert holder["ppid"] == os.getpid()
    assert holder["state"] in ("S", "R")
    assert holder["uid"] == os.getuid()
    assert holder["user"] == pwd.getpwuid(os.getuid()).pw_name
    assert holder["cmdline"] == [sys.executable, "-c", HOLD_OPEN, device]
    with open("/proc/%d/comm" % pid) as handle:
        assert holder["name"] == handle.read().rstrip("\n")
    assert holder["start_time"] == _process.start_time(pid)
    assert _process.same_process(pid, holder["start_time"])
    assert not _process.same_process(pid, holder["start_time"] + 1)
    assert not _process.same_process(pid, None)
    assert _process.read_process(pid) == {key: holder[key] for key in holder if key not in ("via", "devices")}


def test_map_without_fd_is_a_holder(children, dev_dir):
    device = os.path.join(dev_dir, "nvidia-uvm")
    _proc, line = children.start(MAP_THEN_CLOSE, device)
    holder = procscan.scan_holders(dev_dir)[int(line)]
    assert holder["via"] == ["mmap"]
    assert holder["devices"] == [os.path.realpath(device)]


def test_fd_inherited_from_a_parent_that_exited(children, dev_dir):
    device = os.path.join(dev_dir, "nvidiactl")
    proc, line = children.start(DOUBLE_FORK, device)
    grandchild = int(line)
    children.adopt(grandchild)
    assert proc.wait(timeout=10) == 0

    holders = procscan.scan_holders(dev_dir)

    assert proc.pid not in holders
    assert holders[grandchild]["via"] == ["fd"]
    assert holders[grandchild]["ppid"] != proc.pid  # reparented to init or a subreaper
    assert _process.ancestors(grandchild)[-1] == 1


def test_zombie_is_described_but_holds_nothing(children, dev_dir):
    proc, line = children.start(ZOMBIE_PARENT, os.path.join(dev_dir, "nvidia1"))
    zombie = int(line)

    record = wait_for_state(zombie, "Z")
    report = procscan.scan_holders_report(dev_dir)

    assert record["ppid"] == proc.pid
    assert record["cmdline"] == []
    assert zombie not in report["holders"]
    assert report["holders"][proc.pid]["via"] == ["fd"]
    assert _process.ancestors(zombie)[:2] == [proc.pid, os.getpid()]


def test_fds_of_a_live_thread_after_the_leader_exited(children, dev_dir):
    device = os.path.join(dev_dir, "nvidia0")
    proc, line = children.start(LEADER_EXITS, device)
    pid = int(line)
    assert pid == proc.pid
    wait_for_leader_state(pid, "Z")  # the leader is a zombie; the process is not
    assert os.listdir("/proc/%d/fd" % pid) == []

    holder = procscan.scan_holders(dev_dir)[pid]

    assert holder["via"] == ["task_fd"]
    assert holder["devices"] == [os.path.realpath(device)]
    # Alive: the state and the arguments of its live thread (the exited leader shows Z and an empty cmdline).
    assert holder["leader_exited"] is True
    assert holder["state"] in ("S", "R")
    assert holder["cmdline"] == [sys.executable, "-c", LEADER_EXITS, device]
    with open("/proc/%d/comm" % pid) as handle:
        assert holder["name"] == handle.read().rstrip("\n")
    assert holder["start_time"] == _process.start_time(pid)
    assert _process.live_thread(pid)[0] != pid


def test_a_real_zombie_has_no_live_thread(children, dev_dir):
    _proc, line = children.start(ZOMBIE_PARENT, os.path.join(dev_dir, "nvidia1"))
    zombie = int(line)
    record = wait_for_state(zombie, "Z")
    assert record["leader_exited"] is False
    assert _process.live_thread(zombie) is None


def test_a_leader_exited_group_whose_last_thread_ended_is_a_real_zombie(children, dev_dir):
    proc, line = children.start(LEADER_EXITS, os.path.join(dev_dir, "nvidia0"))
    pid = int(line)
    wait_for_leader_state(pid, "Z")
    assert _process.read_process(pid)["leader_exited"] is True
    proc.stdin.close()  # the live thread's read returns: the last thread exits, the group is a zombie
    deadline = time.monotonic() + 5
    while _process.live_thread(pid) is not None and time.monotonic() < deadline:
        time.sleep(0.01)
    record = _process.read_process(pid)
    assert record is None or (record["state"] == "Z" and record["leader_exited"] is False)


def test_name_and_arguments_with_shell_metacharacters_are_kept_exactly(children, dev_dir, tmp_path):
    odd_name = "a) b\n(c) x;y #"
    marker = tmp_path / "pwned"
    odd_args = ["x; touch %s #" % marker, "line one\nline two", "$(id)", "`id`", "a b", ""]
    device = os.path.join(dev_dir, "nvidia0")
    _proc, line = children.start(ODD_NAME, device, odd_name, *odd_args)
    pid = int(line)

    holder = procscan.scan_holders(dev_dir)[pid]

    assert holder["name"] == odd_name
    assert holder["cmdline"] == [sys.executable, "-c", ODD_NAME, device, odd_name] + odd_args
    assert holder["state"] in ("S", "R")  # the fields after the comm were parsed from the right place
    assert holder["ppid"] == os.getpid()
    assert not marker.exists()


def test_start_time_is_when_the_process_started():
    before = time.time()
    proc = bounded.start([sys.executable, "-c", "import os; os.read(0, 1)"], stdin=subprocess.PIPE)
    after = time.time()
    try:
        started = _process.start_time_epoch(_process.start_time(proc.pid))
    finally:
        bounded.communicate(proc, "the child reading stdin", b"x")
    tick = 1.0 / os.sysconf("SC_CLK_TCK")
    # btime is whole seconds: the start time in seconds since the epoch is exact to one second and one tick.
    assert before - 1 - tick <= started <= after + 1 + tick
    with open("/proc/stat") as handle:
        btime = [int(line.split()[1]) for line in handle if line.startswith("btime ")][0]
    assert _process.boot_time() == btime


def test_every_device_kind_and_nothing_else(children, dev_dir, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "nvidia0").write_bytes(b"\0" * 4096)
    started = {}
    for name in DEVICE_FILES + ["zero"]:
        _proc, line = children.start(HOLD_OPEN, os.path.join(dev_dir, name))
        started[name] = int(line)
    _proc, line = children.start(HOLD_OPEN, str(elsewhere / "nvidia0"))
    outsider = int(line)
    # dri/card1 is an NVIDIA card's node: sysfs says so.
    vendor = tmp_path / "sys" / "class" / "drm" / "card1" / "device" / "vendor"
    vendor.parent.mkdir(parents=True)
    vendor.write_text("0x10de\n")

    holders = procscan.scan_holders(dev_dir, sys_dir=str(tmp_path / "sys"))

    for name in DEVICE_FILES:
        assert holders[started[name]]["devices"] == [os.path.realpath(os.path.join(dev_dir, name))]
    assert started["zero"] not in holders
    assert outsider not in holders


def test_deleted_device_file_of_a_simulated_node_stays_known_through_its_registry(children, dev_dir, tmp_path):
    # The simulated node's registry (hard links under sys/, made when it is built) keeps the inode of a device
    # file deleted from dev/, as the kernel keeps a device whose node was deleted.
    registry = tmp_path / "sys" / _device_nodes.SIM_REGISTRY
    registry.mkdir(parents=True)
    device = os.path.join(dev_dir, "nvidia1")
    os.link(device, str(registry / "nvidia1"))
    _proc, line = children.start(HOLD_OPEN, device)
    os.unlink(device)
    holders = procscan.scan_holders(dev_dir, sys_dir=str(tmp_path / "sys"))
    assert holders[int(line)]["devices"] == [os.path.realpath(device)]


def _table(dev_dir, tmp_path, vendors=(), devices_text=None):
    """A DeviceTable of dev_dir, with the PCI vendors of dri nodes in a sysfs under tmp_path and, when given,
    a /proc/devices text under tmp_path."""
    sys_dir = tmp_path / "sys"
    for card, vendor in vendors:
        device = sys_dir / "class" / "drm" / card / "device"
        device.mkdir(parents=True)
        (device / "vendor").write_text(vendor + "\n")
    proc_root = tmp_path / "proc"
    proc_root.mkdir(exist_ok=True)
    if devices_text is not None:
        (proc_root / "devices").write_text(devices_text)
    return _device_nodes.DeviceTable(dev_dir, str(sys_dir), proc_root=str(proc_root))


def _device(table, path):
    return table.device(_device_nodes._stat_fields(os.stat(path)))  # pylint: disable=protected-access


def test_dri_nodes_count_only_for_nvidia_cards(dev_dir, tmp_path):
    for name in ("dri/card0", "dri/renderD129", "dri/card7"):
        (tmp_path / "dev" / name).write_bytes(b"\0" * 4096)
    table = _table(dev_dir, tmp_path, vendors=(("card0", "0x10de"), ("card1", "0x10de"), ("renderD129", "0x8086")))
    real = os.path.realpath(dev_dir)
    assert _device(table, os.path.join(dev_dir, "dri/card0")) == real + "/dri/card0"
    assert _device(table, os.path.join(dev_dir, "dri/renderD129")) is None
    assert _device(table, os.path.join(dev_dir, "dri/card7")) is None  # no sysfs entry: not known to be NVIDIA
    assert _device(table, os.path.join(dev_dir, "nvidia-caps/nvidia-cap1")) == real + "/nvidia-caps/nvidia-cap1"
    assert _device(table, os.path.join(dev_dir, "zero")) is None


def test_a_character_device_is_known_by_its_number_through_the_drivers_majors(tmp_path):
    # /dev/null is 1:3 and /dev/zero 1:5: with major 1 named as the driver's frontend, they are nvidia3 and
    # nvidia5, though no node of that name exists; the block devices' section never counts.
    dev_dir = tmp_path / "dev"
    dev_dir.mkdir()
    text = "Character devices:\n  1 nvidia-frontend\n  5 /dev/tty\n\nBlock devices:\n  7 nvidia-uvm\n"
    table = _table(str(dev_dir), tmp_path, devices_text=text)
    assert _device(table, "/dev/null") == str(dev_dir) + "/nvidia3"
    assert _device(table, "/dev/zero") == str(dev_dir) + "/nvidia5"
    assert _device(table, "/dev/tty") is None
    assert _device(table, str(tmp_path)) is None
    for name, minor, node in (("nvidia-frontend", 255, "nvidiactl"), ("nvidia-frontend", 254, "nvidia-modeset"),
                              ("nvidia-uvm", 1, "nvidia-uvm-tools"), ("nvidia-caps", 2, "nvidia-caps/nvidia-cap2")):
        assert _device_nodes._DRIVER_MAJORS[name](minor) == node  # pylint: disable=protected-access


def test_a_node_of_regular_files_never_takes_the_drivers_majors(dev_dir, tmp_path):
    # A simulated node (regular files) on a host whose driver has nodes: the host's devices are not the node's.
    table = _table(dev_dir, tmp_path, devices_text="Character devices:\n  1 nvidia-frontend\n")
    assert _device(table, "/dev/null") is None


def _char_device(path, mode, device):
    """mknod, or the test not run where the kernel refuses it (a container without CAP_MKNOD)."""
    try:
        os.mknod(path, mode, device)
    except PermissionError as exc:
        bounded.not_run("mknod", exc.errno)


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="mknod of a character device and mount namespaces need root")


@needs_root
def test_another_node_with_the_same_major_minor_is_the_same_device(children, tmp_path):
    # dev/nvidia0 made with /dev/null's numbers: a process that opened /dev/null (another node, another
    # path) holds "nvidia0"; one that opened /dev/zero does not; a node deleted after it was opened still counts.
    dev_dir = tmp_path / "dev"
    dev_dir.mkdir()
    _char_device(str(dev_dir / "nvidia0"), 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    # An alias of the same device, sorted before it: the device keeps the driver's name.
    _char_device(str(dev_dir / "nvidia-0-alias"), 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    _char_device(str(dev_dir / "nvidia1"), 0o600 | stat.S_IFCHR, os.makedev(1, 7))  # /dev/full
    other = tmp_path / "other-node"
    _char_device(str(other), 0o600 | stat.S_IFCHR, os.makedev(1, 7))
    _proc, line = children.start(HOLD_OPEN, "/dev/null")
    through_null = int(line)
    _proc, line = children.start(HOLD_OPEN, "/dev/zero")
    through_zero = int(line)
    _proc, line = children.start(HOLD_OPEN, str(other))
    through_deleted = int(line)
    other.unlink()

    holders = procscan.scan_holders(str(dev_dir), sys_dir=str(tmp_path / "sys"), memory_maps=False)

    assert holders[through_null]["devices"] == [str(dev_dir / "nvidia0")]
    assert holders[through_null]["via"] == ["fd"]
    assert through_zero not in holders
    assert holders[through_deleted]["devices"] == [str(dev_dir / "nvidia1")]


@needs_root
def test_a_node_of_the_drivers_major_is_named_by_its_number(tmp_path):
    # dev/nvidia0 made with /dev/null's numbers (1:3) where major 1 is the driver's: it is nvidia3, the name the
    # device number gives, whatever the node is called.
    dev_dir = tmp_path / "dev"
    dev_dir.mkdir()
    _char_device(str(dev_dir / "nvidia0"), 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    table = _table(str(dev_dir), tmp_path, devices_text="Character devices:\n  1 nvidia-frontend\n")
    assert _device(table, str(dev_dir / "nvidia0")) == str(dev_dir / "nvidia3")
    assert _device(table, "/dev/null") == str(dev_dir / "nvidia3")


@needs_root
def test_a_bind_mount_in_another_mount_namespace_is_the_same_device(children, dev_dir, tmp_path):
    if shutil.which("unshare") is None:
        pytest.fail("unshare(1) is missing, though this runs as root")
    bounded.require_unshare("mount")
    mount_point = tmp_path / "elsewhere"
    mount_point.mkdir()
    proc = bounded.start(
        ["unshare", "-m", "--propagation", "private", "sh", "-c",
         'mount --bind "$1" "$2" && exec "$3" -c "$4" "$2/nvidia0"', "sh", dev_dir, str(mount_point), sys.executable,
         HOLD_OPEN], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    children.procs.append(proc)
    pid = int(bounded.line(proc, "the holder in its own mount namespace"))
    assert os.listdir(str(mount_point)) == []  # the bind mount is in the holder's namespace only
    assert os.readlink("/proc/%d/fd/3" % pid) == str(mount_point / "nvidia0")

    holder = procscan.scan_holders(dev_dir)[pid]

    assert holder["devices"] == [os.path.realpath(os.path.join(dev_dir, "nvidia0"))]


def _blocked_in_read(pid, timeout=bounded.DEADLINE):
    """Wait until the helper sleeps in its read of stdin: between its line and the read it may still run (state R),
    and two scans taken across that instant differ in state alone."""
    deadline = time.monotonic() + timeout
    while _process.read_process(pid)["state"] != "S":
        if time.monotonic() > deadline:
            pytest.fail("helper %d did not block in its read within %ss" % (pid, timeout), pytrace=False)
        time.sleep(0.01)


def test_worker_processes_find_the_same_holders(children, dev_dir):
    pids = {int(children.start(HOLD_OPEN, os.path.join(dev_dir, "nvidia0"))[1]),
            int(children.start(MAP_THEN_CLOSE, os.path.join(dev_dir, "nvidia1"))[1])}
    for pid in pids:
        _blocked_in_read(pid)
    alone = procscan.scan_holders_report(dev_dir, workers=1)
    shared = procscan.scan_holders_report(dev_dir, workers=3)
    assert pids <= set(alone["holders"])
    assert alone == shared


@pytest.fixture
def world_readable_dir():
    """A directory of the test's own that every user may enter (mode 0755 up to /), removed afterwards.

    The checkout may live where only its owner can enter (root's home, a mode-700 `mktemp -d`): what another
    user must read is staged here.
    """
    path = tempfile.mkdtemp(prefix="gpuops-world-", dir="/tmp")
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run a scan as another user")
def test_a_scan_as_another_user_reports_what_it_cannot_read(children, world_readable_dir):
    # The system Python: nobody may not be allowed into the home of the interpreter that runs the tests.
    python = "/usr/bin/python3"
    if not os.access(python, os.X_OK):
        pytest.skip("no %s to run as nobody" % python)
    # The scan (stdlib only) and a dev dir, staged where nobody can read them wherever the checkout lives.
    for name in SCAN_FILES:
        shutil.copy(os.path.join(os.path.dirname(procscan.__file__), name), os.path.join(world_readable_dir, name))
        os.chmod(os.path.join(world_readable_dir, name), 0o644)
    dev_dir = os.path.join(world_readable_dir, "dev")
    os.mkdir(dev_dir)
    os.chmod(dev_dir, 0o755)
    with open(os.path.join(dev_dir, "nvidia0"), "wb") as handle:
        handle.write(b"\0" * 4096)
    os.chmod(os.path.join(dev_dir, "nvidia0"), 0o644)
    _proc, line = children.start(HOLD_OPEN, os.path.join(dev_dir, "nvidia0"))
    root_holder = int(line)
    code = ("import json, sys; sys.path.insert(0, sys.argv[1])\n"
            "from _procscan import scan_holders_report\n"
            "report = scan_holders_report(sys.argv[2])\n"
            "print(json.dumps({'holders': sorted(report['holders']), 'unreadable': report['unreadable_pids']}))\n")
    nobody = pwd.getpwnam("nobody")
    completed = subprocess.run([python, "-S", "-c", code, world_readable_dir, dev_dir],
                               stdout=subprocess.PIPE, check=True, user=nobody.pw_uid, group=nobody.pw_gid,
                               extra_groups=[], cwd="/", timeout=bounded.DEADLINE)
    seen = json.loads(completed.stdout)
    assert root_holder in procscan.scan_holders(dev_dir)  # root sees it
    assert root_holder not in seen["holders"]
    assert seen["unreadable"] >= 1


def test_processes_that_are_gone():
    proc = bounded.start([sys.executable, "-c", "pass"])
    bounded.wait(proc, "proc")
    assert _process.read_process(proc.pid) is None
    assert _process.start_time(proc.pid) is None
    assert not _process.same_process(proc.pid, 12345)
    assert _process.ancestors(proc.pid) == []
    assert not _process.is_kernel_thread(proc.pid)
    assert _cgroup.attribution(proc.pid) == {"container": None, "kubernetes_pod_uid": None, "slurm_job": None,
                                             "systemd_unit": None}


def test_ancestors_and_kernel_threads():
    chain = _process.ancestors(os.getpid())
    assert chain[0] == os.getppid()
    assert chain[-1] == 1
    assert not _process.is_kernel_thread(os.getpid())
    assert not _process.is_kernel_thread(1)
    kthreadd = _process.read_process(2)
    if kthreadd is None or kthreadd["name"] != "kthreadd":
        pytest.skip("pid 2 is not kthreadd here (a PID namespace)")
    assert _process.is_kernel_thread(2)
    workers = [int(name) for name in os.listdir("/proc") if name.isdigit()
               and (_process.read_process(int(name)) or {}).get("ppid") == 2]
    assert workers and all(_process.is_kernel_thread(pid) for pid in workers)


def test_attribution_of_this_process_reads_its_cgroup_file():
    with open("/proc/self/cgroup") as handle:
        text = handle.read()
    # Whatever container this test runs in, it is our own: a process of it is not "in a container".
    assert _cgroup.attribution(os.getpid()) == dict(_cgroup.parse_cgroup(text), container=None)
    assert _cgroup.own_cgroup() is _cgroup.own_cgroup()  # read once per process


def test_a_child_in_our_own_cgroups_is_in_no_container(children, dev_dir):
    pid = int(children.start(HOLD_OPEN, os.path.join(dev_dir, "nvidia0"))[1])
    assert _cgroup.attribution(pid)["container"] is None


def test_attribution_reads_the_own_cgroup_of_its_proc_root(tmp_path):
    own = "12:name=systemd:/docker/%s\n4:memory:/docker/%s\n" % (DOCKER_ID, DOCKER_ID)
    (tmp_path / "self").mkdir()
    (tmp_path / "self" / "cgroup").write_text(own)
    for pid, text in ((100, own), (200, own.replace("/docker/%s" % DOCKER_ID, "/docker/%s/docker/%s" % (DOCKER_ID, OTHER_ID)))):
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "cgroup").write_text(text)
    assert _cgroup.attribution(100, str(tmp_path))["container"] is None
    assert _cgroup.attribution(200, str(tmp_path))["container"] == {"runtime": "docker", "id": OTHER_ID}
    assert _cgroup.own_cgroup(str(tmp_path)).containers == [{"runtime": "docker", "id": DOCKER_ID}]


# ---------------------------------------------------------------------------------------------------------
# cgroup lines published by others. Each sample is copied as published (some cut to fewer controller lines).

NONE = {"container": None, "kubernetes_pod_uid": None, "slurm_job": None, "systemd_unit": None}

CGROUP_SAMPLES = [
    (  # neuvector/neuvector share/system/cgroup_test.go TestDockerIDUbuntu (cgroup v1, cgroupfs driver)
        "12:name=systemd:/docker/31cb02944da7a12196a193cf0e0f6c226d7c453a1db62e65ba98287593a2ee30\n"
        "11:hugetlb:/docker/31cb02944da7a12196a193cf0e0f6c226d7c453a1db62e65ba98287593a2ee30\n"
        "4:memory:/docker/31cb02944da7a12196a193cf0e0f6c226d7c453a1db62e65ba98287593a2ee30\n",
        {"container": {"runtime": "docker", "id": "31cb02944da7a12196a193cf0e0f6c226d7c453a1db62e65ba98287593a2ee30"}},
    ),
    (  # neuvector/neuvector share/system/cgroup_test.go TestDockerIDCentOS (systemd driver)
        "8:memory:/system.slice/docker-9ec39b91f3d70e1beff50a308f77067065ea6be0d91a3378375056cd4422cf3d.scope\n"
        "1:name=systemd:/system.slice/docker-9ec39b91f3d70e1beff50a308f77067065ea6be0d91a3378375056cd4422cf3d.scope\n",
        {"container": {"runtime": "docker", "id": "9ec39b91f3d70e1beff50a308f77067065ea6be0d91a3378375056cd4422cf3d"}},
    ),
    (  # neuvector/neuvector share/system/cgroup_test.go TestDockerIDRancherOS (docker in docker: the inner one)
        "9:name=systemd:/docker/a9a5ad238e59234193ee7ec3fcff5e735b3708ea1068826952255b69e3cfa413/docker/"
        "ec08435e04266c5ba381fccbb829f626d11d8ddf5f8f547263c7a2d79ab4787a\n",
        {"container": {"runtime": "docker", "id": "ec08435e04266c5ba381fccbb829f626d11d8ddf5f8f547263c7a2d79ab4787a"}},
    ),
    (  # neuvector/neuvector share/system/cgroup_test.go TestDockerIDKubepods2 (kubelet with the systemd driver)
        "8:memory:/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod045b1e35_7f13_11e7_ac42_0050568ffca0.slice/"
        "docker-b5b6f2da8008be266864f896f93789762b2ce50792114a5c5f2cc3315af0bc70.scope\n",
        {"container": {"runtime": "docker", "id": "b5b6f2da8008be266864f896f93789762b2ce50792114a5c5f2cc3315af0bc70"},
         "kubernetes_pod_uid": "045b1e35-7f13-11e7-ac42-0050568ffca0"},
    ),
    (  # neuvector/neuvector share/system/cgroup_test.go TestK8sBottleRocket (containerd, systemd driver)
        "11:cpuset:/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-poddd1bf9d1_241d_47f5_8e25_12de83135812.slice/"
        "cri-containerd-f45298cd514d1930c4fe3afc4412e59547f7e3148fddd22ca33cefce046eb830.scope\n",
        {"container": {"runtime": "containerd", "id": "f45298cd514d1930c4fe3afc4412e59547f7e3148fddd22ca33cefce046eb830"},
         "kubernetes_pod_uid": "dd1bf9d1-241d-47f5-8e25-12de83135812"},
    ),
    (  # neuvector/neuvector share/system/cgroup_test.go TestDockerIDKubepods3 (cgroupfs driver: a bare id under
        # the pod; it was dockershim in 2018, we name the CRI runtime that crictl reaches since Kubernetes 1.24)
        "3:rdma:/\n"
        "1:name=systemd:/kubepods/besteffort/pod1fe19bf5-e8ef-11e8-900c-52daee5a874d/"
        "da31e536c8d61304a6d5998d163d12400a7a9a1003e1d86369e8fadb022fc17d\n",
        {"container": {"runtime": "containerd", "id": "da31e536c8d61304a6d5998d163d12400a7a9a1003e1d86369e8fadb022fc17d"},
         "kubernetes_pod_uid": "1fe19bf5-e8ef-11e8-900c-52daee5a874d"},
    ),
    (  # neuvector/neuvector share/system/cgroup_test.go TestK8sProxyProcess (a sub-cgroup below the container)
        "1:name=systemd:/kubepods/besteffort/podf8a694f2-7c08-11e9-98da-000c29077430/"
        "c04e0a88a1de067f25bece337d4dbb897396e0b623c2a65330850fc9823f1903/kube-proxy\n",
        {"container": {"runtime": "containerd", "id": "c04e0a88a1de067f25bece337d4dbb897396e0b623c2a65330850fc9823f1903"},
         "kubernetes_pod_uid": "f8a694f2-7c08-11e9-98da-000c29077430"},
    ),
    (  # neuvector/neuvector share/system/cgroup_test.go TestHostProcess
        "13:name=systemd:/\n12:pids:/\n1:cpuset:/\n",
        {},
    ),
    (  # sustainable-computing-io/kepler internal/resource/container_test.go "valid path with cgroup 1" (CRI-O)
        "1:name=systemd:/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podd0511cd2_29d2_4215_be0f_f77bc0609d99.slice/"
        "crio-f93ee491b8ed2680d5a909eb098b14a9430173b57ca1c4efedd8768566d67e8e.scope\n",
        {"container": {"runtime": "cri-o", "id": "f93ee491b8ed2680d5a909eb098b14a9430173b57ca1c4efedd8768566d67e8e"},
         "kubernetes_pod_uid": "d0511cd2-29d2-4215-be0f-f77bc0609d99"},
    ),
    (  # sustainable-computing-io/kepler internal/resource/container_test.go "valid path with cgroup 13 and memory"
        # (containerd with the cgroupfs driver under a systemd kubelet: the ':cri-containerd:' form)
        "13:memory:/system.slice/containerd.service/kubepods-besteffort-pod0043435f_1854_4327_b76b_730f681a781d.slice"
        ":cri-containerd:01fd96f7ad292b02a8317cde4ecb8c7ef3cc06ffdd113f13410e0837eb2b2a20\n",
        {"container": {"runtime": "containerd", "id": "01fd96f7ad292b02a8317cde4ecb8c7ef3cc06ffdd113f13410e0837eb2b2a20"},
         "kubernetes_pod_uid": "0043435f-1854-4327-b76b-730f681a781d"},
    ),
    (  # sustainable-computing-io/kepler internal/resource/container_test.go "Nested containers ... (in kind cluster)"
        "0::/system.slice/docker-fd9d0ea06257a9780827cbc7fd92e3812a54fca26d63e191b73610d5d48b9cbd.scope/kubelet.slice/"
        "kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/kubelet-kubepods-besteffort-podeab5a334_93fe_48a8_b139_9e8079c1f163.slice/"
        "cri-containerd-99f3a16ea25b7724cb56a4f0c0df1113ad9474fbf5545bead97fd5c7f61c13f4.scope\n",
        {"container": {"runtime": "containerd", "id": "99f3a16ea25b7724cb56a4f0c0df1113ad9474fbf5545bead97fd5c7f61c13f4"},
         "kubernetes_pod_uid": "eab5a334-93fe-48a8-b139-9e8079c1f163"},
    ),
    (  # sustainable-computing-io/kepler internal/resource/container_test.go "podman rootless container"
        "0::/user.slice/user-1000.slice/user@1000.service/user.slice/"
        "libpod-3f05ee050f82c0145f1d88c94269c39dff0f07dbf8bba20aafd54b3a75dcaecc.scope/container\n",
        {"container": {"runtime": "podman", "id": "3f05ee050f82c0145f1d88c94269c39dff0f07dbf8bba20aafd54b3a75dcaecc"}},
    ),
    (  # public GitHub markdown notes, `cat /proc/9314/cgroup` of podman's conmon on the host (code-search index
        # id 13181329182; repository not resolved); cut to 4 of its 16 lines
        "15:name=systemd:/machine.slice/libpod-conmon-24fce7291bc6d7f8a5965a5920740b0df25dda9bb4e84ffb889d8ea2927acec5.scope\n"
        "6:devices:/machine.slice\n"
        "1:cpuset:/\n"
        "0::/machine.slice/libpod-conmon-24fce7291bc6d7f8a5965a5920740b0df25dda9bb4e84ffb889d8ea2927acec5.scope\n",
        {"container": {"runtime": "podman", "id": "24fce7291bc6d7f8a5965a5920740b0df25dda9bb4e84ffb889d8ea2927acec5"}},
    ),
    (  # NordicHPC/sonar src/slurm.rs (comment: a line of /proc/<pid>/cgroup under Slurm's cgroup v1 plugin)
        "10:devices:/slurm/uid_2101171/job_280678/step_interactive/task_0\n",
        {"slurm_job": "280678"},
    ),
    (  # public GitHub test (code-search index id 70271476973; repository not resolved): Slurm on Rocky 8, v1
        "11:cpuset:/slurm/uid_1000/job_195428/step_batch\n"
        "4:memory:/slurm/uid_1000/job_195428/step_batch\n"
        "1:name=systemd:/system.slice/slurmd.service\n",
        {"slurm_job": "195428", "systemd_unit": "slurmd.service"},
    ),
    (  # public GitHub test (code-search index id 56314173787; repository not resolved): Slurm cgroup v2 layout
        # (see https://slurm.schedmd.com/cgroup_v2.html)
        "0::/system.slice/slurmstepd.scope/job_1870/step_0\n",
        {"slurm_job": "1870", "systemd_unit": "slurmstepd.scope"},
    ),
    (  # constructed from SchedMD/slurm src/plugins/cgroup/v1/xcgroup.c: with MULTIPLE_SLURMD the CgroupPrepend
        # "/slurm_%n" names the node, then "%s/uid_%u", "%s/job_%u", "%s/step_%s" (no published capture found)
        "4:memory:/slurm_node017/uid_1000/job_42/step_0/task_1\n",
        {"slurm_job": "42"},
    ),
    (  # public GitHub test data (code-search index id 59069548440; repository not resolved)
        "0::/system.slice/nvidia-persistenced.service\n",
        {"systemd_unit": "nvidia-persistenced.service"},
    ),
    (  # neuvector/neuvector share/system/cgroup_test.go TestNsEnterProcess (an old systemd user session layout)
        "13:name=systemd:/user/1000.user/c2.session\n12:pids:/\n",
        {},
    ),
    (  # public GitHub test (code-search index id 68981824228; repository not resolved): a user session scope
        "0::/user.slice/user-1000.slice/session-3.scope\n",
        {"systemd_unit": "session-3.scope"},
    ),
]


@pytest.mark.parametrize("text,expected", CGROUP_SAMPLES, ids=["sample%02d" % i for i in range(len(CGROUP_SAMPLES))])
def test_cgroup_attribution(text, expected):
    assert _cgroup.parse_cgroup(text) == dict(NONE, **expected)


DOCKER_ID = "31cb02944da7a12196a193cf0e0f6c226d7c453a1db62e65ba98287593a2ee30"
OTHER_ID = "18e9f2af4b7d2fcafef0e2ed89abc4ee60fa1b31ffc3410a46ace6ebb0872750"
# This machine's own /proc/self/cgroup: a container whose id shows in the memory controller only.
PROCESS_API = ("9:name=systemd:/\n8:pids:/\n7:blkio:/\n6:freezer:/\n5:devices:/\n"
               "4:memory:/process_api/8f46cc31cd09d607516831bad3923544\n3:cpuset:/\n2:cpuacct:/\n1:cpu:/\n0::/\n")
# Captured on this machine: a container started by a dockerd running in it (cgroupfs driver, cgroup v1).
DIND_HERE = "".join("%s:/docker/%s\n" % (prefix, OTHER_ID) for prefix in (
    "9:name=systemd", "8:pids", "7:blkio", "6:freezer", "5:devices", "4:memory", "3:cpuset", "2:cpuacct", "1:cpu", "0:"))
BOTTLEROCKET = CGROUP_SAMPLES[4][0]
BOTTLEROCKET_ID = CGROUP_SAMPLES[4][1]["container"]["id"]
SIBLING_ID = "0f" * 32
PODMAN_ROOTLESS = CGROUP_SAMPLES[11][0]
PODMAN_CONMON = CGROUP_SAMPLES[12][0]

# (own /proc/self/cgroup, a holder's /proc/<pid>/cgroup, the attribution expected relative to our own)
OWN_CONTAINER_CASES = [
    # docker, cgroupfs driver: the holder is in the module's own container
    (CGROUP_SAMPLES[0][0], CGROUP_SAMPLES[0][0], {}),
    # docker, systemd driver: the same, and a process in a sub-cgroup of it
    (CGROUP_SAMPLES[1][0], CGROUP_SAMPLES[1][0], {}),
    (CGROUP_SAMPLES[1][0], CGROUP_SAMPLES[1][0].replace(".scope\n", ".scope/worker\n"), {}),
    # docker in docker (RancherOS): the module in the outer container, the holder in the inner one
    ("9:name=systemd:/docker/a9a5ad238e59234193ee7ec3fcff5e735b3708ea1068826952255b69e3cfa413\n", CGROUP_SAMPLES[2][0],
     {"container": CGROUP_SAMPLES[2][1]["container"]}),
    # containerd/CRI (a privileged pod): its own container is none; another container of the pod is one
    (BOTTLEROCKET, BOTTLEROCKET, {"kubernetes_pod_uid": "dd1bf9d1-241d-47f5-8e25-12de83135812"}),
    (BOTTLEROCKET, BOTTLEROCKET.replace(BOTTLEROCKET_ID, SIBLING_ID),
     {"container": {"runtime": "containerd", "id": SIBLING_ID}, "kubernetes_pod_uid": "dd1bf9d1-241d-47f5-8e25-12de83135812"}),
    # cri-o
    (CGROUP_SAMPLES[8][0], CGROUP_SAMPLES[8][0], {"kubernetes_pod_uid": "d0511cd2-29d2-4215-be0f-f77bc0609d99"}),
    # podman rootless: its own container, then the conmon of another podman container
    (PODMAN_ROOTLESS, PODMAN_ROOTLESS, {}),
    (PODMAN_ROOTLESS, PODMAN_CONMON, {"container": CGROUP_SAMPLES[12][1]["container"]}),
    # this machine: a process of its own container, and a container of the dockerd that runs in it
    (PROCESS_API, PROCESS_API, {}),
    (PROCESS_API, DIND_HERE, {"container": {"runtime": "docker", "id": OTHER_ID}}),
    # cgroup v2 with a cgroup namespace: 0::/ only, everything relative to the container's root
    ("0::/\n", "0::/\n", {}),
    ("0::/\n", "0::/system.slice/docker-%s.scope\n" % OTHER_ID, {"container": {"runtime": "docker", "id": OTHER_ID}}),
    # a runtime that shows in some controllers only: the module's container seen in another line than the holder's
    ("4:memory:/docker/%s\n1:name=systemd:/\n" % DOCKER_ID, "4:memory:/\n1:name=systemd:/docker/%s\n" % DOCKER_ID, {}),
    # the module on the host (no container): every container is another one
    ("13:name=systemd:/\n12:pids:/\n1:cpuset:/\n", CGROUP_SAMPLES[0][0], {"container": CGROUP_SAMPLES[0][1]["container"]}),
]


@pytest.mark.parametrize("own, text, expected", OWN_CONTAINER_CASES, ids=["own%02d" % i for i in range(len(OWN_CONTAINER_CASES))])
def test_container_is_relative_to_the_modules_own(own, text, expected):
    assert _cgroup.parse_cgroup(text, _cgroup.OwnCgroup(own)) == dict(NONE, **expected)


def test_without_an_own_cgroup_the_module_own_container_would_be_named():
    # What attribution gave before it read its own cgroup: the module's container as the holder's.
    assert _cgroup.parse_cgroup(CGROUP_SAMPLES[0][0])["container"] == CGROUP_SAMPLES[0][1]["container"]
    assert _cgroup.OwnCgroup(PROCESS_API).containers == []
    assert _cgroup.OwnCgroup(CGROUP_SAMPLES[0][0]).containers == [CGROUP_SAMPLES[0][1]["container"]]


def test_cgroup_of_a_real_process_on_this_machine():
    """The capture of this machine's own /proc/self/cgroup (a Firecracker VM, cgroup v1 with a v2 line)."""
    text = ("9:name=systemd:/\n8:pids:/\n7:blkio:/\n6:freezer:/\n5:devices:/\n"
            "4:memory:/process_api/ceed705c574dfab8a4f0cd3a95ee7db5\n3:cpuset:/\n2:cpuacct:/\n1:cpu:/\n0::/\n")
    assert _cgroup.parse_cgroup(text) == NONE


# ---------------------------------------------------------------------------------------------------------
# The benchmark's readers of lsof and fuser output: they decide what the benchmark says the tools saw.


@pytest.fixture
def holder_scan_bench(collection_root):
    spec = importlib.util.spec_from_file_location("holder_scan", os.path.join(collection_root, "bench", "holder_scan.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bench_reads_lsof_output(holder_scan_bench):
    with open(os.path.join(FIXTURES, "lsof", "nvidia0-xorg-compiz-partial.txt")) as handle:
        assert holder_scan_bench.parse_lsof_pids(handle.read()) == {864, 2193}


def test_bench_reads_what_fuser_prints_on_stdout(children, dev_dir, holder_scan_bench):
    if shutil.which("fuser") is None:
        pytest.skip("fuser is not installed (apt-get install -y psmisc)")
    device = os.path.join(dev_dir, "nvidia0")
    pid = int(children.start(HOLD_OPEN, device)[1])
    completed = subprocess.run(["fuser", "-v", device], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, check=False, timeout=bounded.DEADLINE)
    assert holder_scan_bench.parse_fuser_pids(completed.stdout) == {pid}


# A thread unshares its file table (CLONE_FILES) and opens the device there; the leader, alive, never has it.
# Where the kernel refuses the unshare, the thread says so (bounded.line skips the test as not run) and ends the
# helper; the leader waits for the thread with a bound.
OWN_FD_TABLE = """
import ctypes, errno, os, sys, threading
libc = ctypes.CDLL(None, use_errno=True)
opened = threading.Event()
def hold():
    if libc.unshare(0x400) != 0:
        print("REFUSED unshare", errno.errorcode.get(ctypes.get_errno(), "?"), flush=True)
        os._exit(0)
    fd = os.open(sys.argv[1], os.O_RDWR)
    print(os.getpid(), threading.get_native_id(), fd, flush=True)
    opened.set()
    os.read(0, 1)
threading.Thread(target=hold).start()
if not opened.wait(30):
    sys.exit("the thread did not open the device within 30s")
os.read(0, 1)
"""

# Threads that share the leader's table: the device is seen once, as the process's fd.
SHARED_THREADS = """
import os, sys, threading
fd = os.open(sys.argv[1], os.O_RDWR)
done = threading.Event()
threads = [threading.Thread(target=done.wait) for _ in range(3)]
for thread in threads:
    thread.start()
print(os.getpid(), flush=True)
os.read(0, 1)
done.set()
"""

# An O_PATH descriptor names the file and never opens it; the second argument, when given, is opened for real.
O_PATH_HOLDER = """
import os, sys
named = os.open(sys.argv[1], os.O_PATH)
opened = [os.open(path, os.O_RDWR) for path in sys.argv[2:]]
print(os.getpid(), named, flush=True)
os.read(0, 1)
"""


@pytest.fixture(params=["kcmp", "no kcmp"])
def kcmp(request, monkeypatch):
    """The scan with the kernel's comparison of file tables, and as where kcmp is missing or refused."""
    if request.param == "no kcmp":
        monkeypatch.setattr(_threads, "_KCMP_CALL", [lambda pid, tid: None])
    return request.param


def test_a_thread_with_a_file_table_of_its_own_is_read(children, dev_dir, kcmp):  # pylint: disable=unused-argument
    device = os.path.join(dev_dir, "nvidia0")
    _proc, line = children.start(OWN_FD_TABLE, device)
    pid, tid, fd = (int(field) for field in line.split())
    assert str(fd) not in os.listdir("/proc/%d/fd" % pid) or os.stat("/proc/%d/fd/%d" % (pid, fd)).st_ino != os.stat(device).st_ino

    for memory_maps in (True, False):
        holder = procscan.scan_holders(dev_dir, memory_maps=memory_maps)[pid]
        assert holder["via"] == ["task_fd"]
        assert holder["devices"] == [os.path.realpath(device)]
        assert holder["leader_exited"] is False
    assert procscan.scan_holders(dev_dir, workers=2)[pid]["via"] == ["task_fd"]
    assert tid != pid


def test_threads_that_share_the_table_are_read_once(children, dev_dir, kcmp):  # pylint: disable=unused-argument
    device = os.path.join(dev_dir, "nvidia1")
    _proc, line = children.start(SHARED_THREADS, device)
    pid = int(line)
    assert len(os.listdir("/proc/%d/task" % pid)) == 4
    holder = procscan.scan_holders(dev_dir)[pid]
    assert holder["via"] == ["fd"]
    assert holder["devices"] == [os.path.realpath(device)]


def test_an_o_path_descriptor_is_no_holder(children, dev_dir):
    device = os.path.join(dev_dir, "nvidia0")
    _proc, line = children.start(O_PATH_HOLDER, device)
    named_only = int(line.split()[0])
    _proc, line = children.start(O_PATH_HOLDER, device, os.path.join(dev_dir, "nvidiactl"))
    also_opened = int(line.split()[0])
    # The O_PATH fd is there, and stat through it reaches the device file: only its flags tell.
    fd = int(line.split()[1])
    assert os.stat("/proc/%d/fd/%d" % (also_opened, fd)).st_ino == os.stat(device).st_ino

    holders = procscan.scan_holders(dev_dir)

    assert named_only not in holders
    assert holders[also_opened]["devices"] == [os.path.realpath(os.path.join(dev_dir, "nvidiactl"))]


def test_another_path_to_the_same_file_is_the_same_device(children, dev_dir, tmp_path):
    # A hard link (a simulated device's second node) and a symlinked directory, opened and mapped.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.link(os.path.join(dev_dir, "nvidia0"), str(elsewhere / "gpu"))
    os.link(os.path.join(dev_dir, "nvidia-uvm"), str(elsewhere / "uvm"))
    (tmp_path / "devlink").symlink_to(dev_dir)
    _proc, line = children.start(HOLD_OPEN, str(elsewhere / "gpu"))
    opened = int(line)
    _proc, line = children.start(MAP_THEN_CLOSE, str(elsewhere / "uvm"))
    mapped = int(line)
    _proc, line = children.start(HOLD_OPEN, str(tmp_path / "devlink" / "nvidia1"))
    through_symlink = int(line)

    holders = procscan.scan_holders(dev_dir)

    real = os.path.realpath(dev_dir)
    assert holders[opened]["devices"] == [real + "/nvidia0"] and holders[opened]["via"] == ["fd"]
    assert holders[mapped]["devices"] == [real + "/nvidia-uvm"] and holders[mapped]["via"] == ["mmap"]
    assert holders[through_symlink]["devices"] == [real + "/nvidia1"]


def test_a_mapped_file_whose_path_spells_a_devices_numbers_is_no_holder(children, dev_dir, tmp_path):
    # The maps line of a mapping of this file ends with a path that holds " MAJ:MIN INODE " of nvidia0:
    # only the line's own fields count.
    st = os.stat(os.path.join(dev_dir, "nvidia0"))
    decoy = tmp_path / ("x %02x:%02x %d y" % (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino))
    decoy.write_bytes(b"\0" * 4096)
    _proc, line = children.start(MAP_THEN_CLOSE, str(decoy))
    pid = int(line)
    with open("/proc/%d/maps" % pid) as handle:
        assert str(decoy) in handle.read()
    assert pid not in procscan.scan_holders(dev_dir)


def test_nodes_made_together_are_searched_with_one_needle():
    # Each needle is one more pass over every maps file: the nodes of one filesystem whose inodes differ only in their
    # last four digits share one, and only an exact inode names a device.
    fields = {b" fe:00 ": {b"2746459": "/dev/nvidia0", b"2747137": "/dev/nvidia-uvm", b"2749999": "/dev/nvidiactl"},
              b" 00:05 ": {b"1034": "/dev/nvidia1", b"1210": "/dev/nvidia2"}}
    needles = procscan._map_needles(fields)  # pylint: disable=protected-access
    assert sorted(needle for needle, _at, _inodes in needles) == [b" 00:05 ", b" fe:00 274"]
    for needle, inode_at, inodes in needles:
        assert needle[:inode_at] in fields and inodes == fields[needle[:inode_at]]


def test_a_mapped_file_that_shares_a_devices_needle_is_no_holder(children, tmp_path):
    # A file of the devices' filesystem whose inode, as a maps line shows it, differs from nvidia0's only in its last
    # four digits: its line holds the needle nvidia0 is searched with, and it is still no device. Made right after the
    # node, in its directory (a file the table does not take for one), where the filesystem gives the next inode;
    # again in a new directory (nothing removed, so no inode is reused) when the two fall across a ten-thousand boundary.
    as_mapped = _device_nodes._fields_as_mapped  # pylint: disable=protected-access
    for attempt in range(20):
        dev_dir = tmp_path / ("dev%d" % attempt)
        dev_dir.mkdir()
        for name in ("nvidia0", "decoy"):
            (dev_dir / name).write_bytes(b"\0" * 4096)
        (dev_field, inode), decoy_fields = as_mapped(str(dev_dir / "nvidia0")), as_mapped(str(dev_dir / "decoy"))
        if decoy_fields[0] == dev_field and decoy_fields[1][:-4] == inode[:-4] and len(decoy_fields[1]) == len(inode):
            break
    else:
        raise AssertionError("no file of %s got an inode sharing all but the last four digits of its node's" % tmp_path)
    _proc, line = children.start(MAP_THEN_CLOSE, str(dev_dir / "decoy"))
    decoy_pid = int(line)
    _proc, line = children.start(MAP_THEN_CLOSE, str(dev_dir / "nvidia0"))
    mapped = int(line)
    with open("/proc/%d/maps" % decoy_pid, "rb") as handle:
        assert dev_field + inode[:-4] in handle.read()

    holders = procscan.scan_holders(str(dev_dir))

    assert decoy_pid not in holders
    assert holders[mapped]["via"] == ["mmap"] and holders[mapped]["devices"] == [os.path.realpath(str(dev_dir)) + "/nvidia0"]
