# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The programs a simulated GPU node's processes run: its supervisor and its holders.

Run from the node's lib/ (gpu_sim installs this file there): `python _sim_programs.py supervisor ROOT` is the
node's init, a child subreaper that starts what <root>/run/spawn asks for and reaps whatever dies, so orphans
are re-parented to it like to init and a zombie whose parent still runs stays a zombie;
`python _sim_programs.py holder SPEC.json` holds device files the way the spec's kind says, reports ready
and waits to be killed. Their data comes in the spec file, never on the command line.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import signal
import sys
import threading
import time

try:
    from ansible_collections.gpuops.remediation.plugins.module_utils.probes._process import read_process, start_time
    from ansible_collections.gpuops.remediation.plugins.module_utils.simulation._sim_processes import (
        SUPERVISOR_NAME, launch, program_path, send_signal)
    from ansible_collections.gpuops.remediation.plugins.module_utils.simulation._sim_state import (
        DEVICE_SIZE, load_state, process_exists, write_code, write_json_atomic)
except ImportError:  # running from <root>/lib as plain modules
    from _process import read_process, start_time  # type: ignore[no-redef] # pylint: disable=import-error
    from _sim_processes import (  # type: ignore[no-redef] # pylint: disable=import-error
        SUPERVISOR_NAME, launch, program_path, send_signal)
    from _sim_state import (  # type: ignore[no-redef] # pylint: disable=import-error
        DEVICE_SIZE, load_state, process_exists, write_code, write_json_atomic)

PR_SET_NAME = 15
PR_SET_CHILD_SUBREAPER = 36
PR_SET_PDEATHSIG = 1
CLONE_NEWPID = 0x20000000
CLONE_VFORK = 0x00004000
CLONE_SYSCALL = {"x86_64": 56, "aarch64": 220}
CLONE_FILES = 0x400
CLONE_NEWNS = 0x20000
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 0x40000


def _set_process_name(name):
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_NAME, ctypes.c_char_p(name.encode("utf-8", "replace")[:15]), 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _own_identity():
    return {"pid": os.getpid(), "start_time": start_time(os.getpid())}


# ---------------------------------------------------------------- the holder program

_HELD = []  # what a holder program keeps open or mapped until it is killed


def _sleep_forever(*held):
    """Sleep until killed, keeping `held` (fds, mappings) referenced all along."""
    _HELD.extend(held)
    while True:
        time.sleep(3600)


def _open_devices(paths):
    return [os.open(path, os.O_RDWR) for path in paths]


def _report(spec, data):
    write_json_atomic(os.path.join(spec["root"], "run", "ready", spec["id"] + ".json"), data)


def _report_error(spec, exc):
    with open(os.path.join(spec["root"], "run", "ready", spec["id"] + ".error"), "w") as handle:
        handle.write("%s: %s\n" % (type(exc).__name__, exc))


def _wait_until_leader_exits(pid):
    """Until pid's thread-group leader is a zombie or gone (its other threads may live on)."""
    while True:
        record = read_process(pid)
        if record is None or record["state"] in ("Z", "X") or record["leader_exited"]:
            return
        time.sleep(0.01)


def _crash_leaves_behind():
    """Become what a crash leaves: the process that started us (the leader of our process group and session, as a
    training script is of its DataLoader workers) exits, and we live on, re-parented to the node's init (the
    supervisor, a subreaper that did not start us). Only the child returns."""
    if os.fork() != 0:
        os._exit(0)


def run_holder(spec_path):
    """The holder/service program: hold the devices the way spec['kind'] says, report, then wait."""
    with open(spec_path) as handle:
        spec = json.load(handle)
    _set_process_name(spec["name"])
    if spec.get("role") == "holder" and not spec.get("running"):
        _crash_leaves_behind()
    if spec.get("run_as"):
        write_code()  # imported while root's interpreter files can still be read
        uid, gid = spec["run_as"]
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)
    kind = spec.get("kind", "fd")
    if spec.get("cgroup"):
        _enter_cgroup(spec["cgroup"])
    if kind in ("ignores_term", "leader_exited_ignores_term"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # process-wide: the threads of the group share it
    if kind in ("term_checkpoint", "stopped_checkpoint"):
        _checkpoint_on_term(spec)
    if spec.get("freeze") == "on_term":
        _freeze_on_term(spec)
    if kind == "blocks_term":
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    if kind in ("pidns_init", "pidns_init_checkpoint"):
        _hold_as_namespace_init(spec)
    elif kind == "vfork_parent":
        _hold_as_vfork_parent(spec)
    elif kind == "stopped_checkpoint":
        fds = _open_devices(spec["devices"])
        _report(spec, _own_identity())
        os.kill(os.getpid(), signal.SIGSTOP)  # the spawner waits for state T
        _sleep_forever(fds)
    elif kind == "mmap":
        _hold_mapped(spec)
    elif kind == "inherited":
        _hold_inherited(spec)
    elif kind == "zombie":
        _hold_as_zombie(spec)
    elif kind in ("leader_exited", "leader_exited_ignores_term"):
        _hold_in_thread(spec)
    elif kind == "second_node":
        _hold_through_second_node(spec)
    elif kind == "mount_namespace":
        _hold_in_mount_namespace(spec)
    elif kind == "own_fd_table":
        _hold_in_own_fd_table(spec)
    elif kind == "o_path":
        fds = [os.open(path, os.O_PATH) for path in spec["devices"]]  # names the files, never opens them
        _report(spec, _own_identity())
        _sleep_forever(fds)
    else:
        fds = _open_devices(spec["devices"])
        _start_children(spec)
        _report(spec, _own_identity())
        if spec.get("freeze") == "at_start":
            _freeze(spec["cgroup"])
        _sleep_forever(fds)


def checkpoint_path(spec):
    """The file a holder with a TERM handler writes when its handler runs (what a job saves before it exits)."""
    return os.path.join(spec["root"], "run", "checkpoints", spec["id"])


def _checkpoint_on_term(spec):
    path = checkpoint_path(spec)

    def _on_term(signum, frame):  # pylint: disable=unused-argument
        with open(path, "w") as handle:
            handle.write("checkpoint of pid %d\n" % os.getpid())
        os._exit(0)

    signal.signal(signal.SIGTERM, _on_term)


def _enter_cgroup(cgroup):
    os.makedirs(cgroup["dir"], exist_ok=True)
    with open(os.path.join(cgroup["dir"], "cgroup.procs"), "w") as handle:
        handle.write(str(os.getpid()))


def _freeze(cgroup):
    """Freeze our own cgroup: we stop at the next return to user space."""
    name, value = ("freezer.state", "FROZEN") if cgroup["version"] == "v1" else ("cgroup.freeze", "1")
    with open(os.path.join(cgroup["dir"], name), "w") as handle:
        handle.write(value)


def _freeze_on_term(spec):
    path = checkpoint_path(spec)

    def _on_term(signum, frame):  # pylint: disable=unused-argument
        _freeze(spec["cgroup"])
        time.sleep(0.05)  # frozen here until thawed; a SIGKILL sent meanwhile ends us on the thaw
        with open(path, "w") as handle:
            handle.write("checkpoint of pid %d after a thaw\n" % os.getpid())
        os._exit(0)

    signal.signal(signal.SIGTERM, _on_term)


def _hold_as_namespace_init(spec):
    """Become the parent of the init of a new PID namespace, which holds the devices; report its pid as we see it."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWPID) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWPID) failed (needs root)")
    ready_r, ready_w = os.pipe()
    child = os.fork()
    if child == 0:  # pid 1 of the new namespace
        os.close(ready_r)
        _set_process_name(spec["name"])
        if spec["kind"] == "pidns_init_checkpoint":
            _checkpoint_on_term(spec)
        fds = _open_devices(spec["devices"])
        os.write(ready_w, b"1")
        os.close(ready_w)
        _sleep_forever(fds)
    os.close(ready_w)
    os.read(ready_r, 1)
    _report(spec, {"pid": child, "start_time": start_time(child)})
    os._exit(0)  # the supervisor, a subreaper, adopts the namespace's init


def _hold_as_vfork_parent(spec):
    """Hold the devices and vfork a child that never execs: the parent waits for it in a killable sleep, which /proc
    shows as D. The child (it closed the devices) reports the parent once the parent waits, and dies with it."""
    machine = os.uname().machine
    if machine not in CLONE_SYSCALL:
        raise OSError(0, "vfork_parent: no clone syscall number for %s" % machine)
    fds = _open_devices(spec["devices"])
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    # clone(CLONE_VFORK | SIGCHLD) without CLONE_VM: the child has its own copy of memory, so it may run Python.
    child = libc.syscall(CLONE_SYSCALL[machine], CLONE_VFORK | signal.SIGCHLD, 0, 0, 0, 0)
    if child == 0:
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        for fd in fds:
            os.close(fd)
        parent = os.getppid()
        while (read_process(parent) or {}).get("state") != "D":
            time.sleep(0.01)
        _report(spec, {"pid": parent, "start_time": start_time(parent)})
        _sleep_forever()
    if child < 0:
        raise OSError(ctypes.get_errno(), "clone(CLONE_VFORK) failed")
    os._exit(0)  # reached only if the child exited: it never does


def _start_children(spec):
    """Start the processes a service starts itself (the display manager's Xorg): our children, reaped by the kernel
    (SIGCHLD ignored) like a display manager reaps the server it started."""
    if not spec.get("children"):
        return
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    launcher = load_state(spec["root"])
    for child in spec["children"]:
        path = os.path.join(spec["root"], "run", "specs", child["id"] + ".json")
        write_json_atomic(path, child)
        launch(launcher, child["name"], [program_path(spec["root"]), "holder", path])


def _hold_mapped(spec):
    """Map each device and close its fd: only /proc/<pid>/maps shows the hold.

    libc's mmap, not Python's mmap module: that one keeps a dup of the fd open.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    maps = []
    for path in spec["devices"]:
        fd = os.open(path, os.O_RDWR)
        address = libc.mmap(None, DEVICE_SIZE, 0x1 | 0x2, 0x01, fd, 0)  # PROT_READ|PROT_WRITE, MAP_SHARED
        os.close(fd)
        if address in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), "mmap of %s failed" % path)
        maps.append(address)
    _report(spec, _own_identity())
    _sleep_forever(maps)


def _hold_inherited(spec):
    fds = _open_devices(spec["devices"])
    parent = _own_identity()
    child = os.fork()
    if child:
        os._exit(0)  # the parent leaves; the child keeps the inherited fds
    report = _own_identity()
    report.update({"opened_by_pid": parent["pid"], "opened_by_start_time": parent["start_time"]})
    _report(spec, report)
    _sleep_forever(fds)


def _hold_as_zombie(spec):
    _set_process_name(spec.get("parent_name") or "job-launcher")
    held = _open_devices(spec.get("parent_devices") or [])  # the parent's own job, when it has one
    child = os.fork()
    if child == 0:
        _set_process_name(spec["name"])
        _open_devices(spec["devices"])
        os._exit(0)  # exits while its parent never waits: a zombie
    _wait_until_leader_exits(child)
    parent = _own_identity()
    _report(spec, {"pid": child, "start_time": start_time(child), "parent_pid": parent["pid"],
                   "parent_start_time": parent["start_time"]})
    _sleep_forever(held)


def _hold_in_thread(spec):
    opened = threading.Event()
    holder = threading.Thread(target=_thread_holds, args=(spec, opened))
    holder.daemon = False
    holder.start()
    opened.wait()
    libc = ctypes.CDLL(None)
    libc.pthread_exit(None)  # the leader exits; the thread keeps the fds


def _thread_holds(spec, opened):
    fds = _open_devices(spec["devices"])
    identity = _own_identity()
    opened.set()
    _wait_until_leader_exits(identity["pid"])
    _report(spec, identity)
    _sleep_forever(fds)


def _libc_call(name, *args):
    libc = ctypes.CDLL(None, use_errno=True)
    if getattr(libc, name)(*args) != 0:
        raise OSError(ctypes.get_errno(), "%s failed" % name)


def _hold_through_second_node(spec):
    """Open each device through a node of its own (a hard link under run/: a simulated device's identity is its
    inode, as a real one's is its major:minor), in a directory that is not the node's dev/."""
    nodes_dir = os.path.join(spec["root"], "run", "nodes", spec["id"])
    os.makedirs(nodes_dir)
    fds = []
    for number, path in enumerate(spec["devices"]):
        node = os.path.join(nodes_dir, "gpu-node-%d" % number)
        os.link(path, node)
        fds.append(os.open(node, os.O_RDWR))
    _report(spec, _own_identity())
    _sleep_forever(fds)


def _hold_in_mount_namespace(spec):
    """Open each device through a bind mount of dev/ that only this process's own mount namespace has."""
    mount_point = os.path.join(spec["root"], "run", "nodes", spec["id"])
    os.makedirs(mount_point)
    _libc_call("unshare", CLONE_NEWNS)
    _libc_call("mount", None, b"/", None, MS_REC | MS_PRIVATE, None)  # nothing propagates back
    dev_dir = os.path.join(spec["root"], "dev")
    _libc_call("mount", dev_dir.encode(), mount_point.encode(), None, MS_BIND, None)
    fds = [os.open(os.path.join(mount_point, os.path.relpath(path, dev_dir)), os.O_RDWR) for path in spec["devices"]]
    _report(spec, _own_identity())
    _sleep_forever(fds)


def _hold_in_own_fd_table(spec):
    """A thread unshares its file table (CLONE_FILES) and opens the devices there: the leader, alive, has none."""
    opened = threading.Event()
    failed = []

    def hold():
        try:
            _libc_call("unshare", CLONE_FILES)
            fds = _open_devices(spec["devices"])
        except OSError as exc:
            failed.append(exc)
            opened.set()
            return
        opened.set()
        _sleep_forever(fds)

    threading.Thread(target=hold, daemon=True).start()
    opened.wait()
    if failed:
        raise failed[0]
    _report(spec, _own_identity())
    _sleep_forever()


# ---------------------------------------------------------------- the supervisor program

def run_supervisor(root):
    """The node's init: a child subreaper that starts what run/spawn asks for and reaps whatever dies."""
    _set_process_name(SUPERVISOR_NAME)
    libc = ctypes.CDLL(None)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    launcher = load_state(root)  # our own sys.executable is unreliable: argv[0] is our name
    spawn_dir = os.path.join(root, "run", "spawn")
    children = []
    write_json_atomic(os.path.join(root, "run", "supervisor.json"), _own_identity())
    while os.path.isdir(spawn_dir):
        _reap_all()
        for name in sorted(os.listdir(spawn_dir)):
            if name.endswith(".json"):
                children.append(_start_requested(root, launcher, os.path.join(spawn_dir, name)))
        time.sleep(0.02)
    # The node was removed without destroy_node: take what we started with us.
    for pid, st in children:
        if pid and process_exists(pid, st):
            send_signal(pid, signal.SIGKILL)


def _reap_all():
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except OSError as exc:
            if exc.errno == errno.ECHILD:
                return
            raise
        if pid == 0:
            return


def _start_requested(root, launcher, request):
    spec_path = os.path.join(root, "run", "specs", os.path.basename(request))
    try:
        os.rename(request, spec_path)
        with open(spec_path) as handle:
            spec = json.load(handle)
        argv0 = spec.get("parent_name") if spec.get("kind") == "zombie" else spec["name"]
        proc = launch(launcher, argv0 or spec["name"], [program_path(root), "holder", spec_path])
        return proc.pid, start_time(proc.pid)
    except Exception as exc:  # pylint: disable=broad-except
        _report_error({"root": root, "id": os.path.basename(request)[:-5]}, exc)
        return 0, None


def main(argv):
    if len(argv) == 3 and argv[1] == "supervisor":
        run_supervisor(argv[2])
    elif len(argv) == 3 and argv[1] == "holder":
        try:
            run_holder(argv[2])
        except Exception as exc:  # pylint: disable=broad-except
            with open(argv[2]) as handle:
                _report_error(json.load(handle), exc)
            return 1
    else:
        sys.stderr.write("usage: _sim_programs.py supervisor ROOT | holder SPEC.json\n")
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
