# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Starting and stopping a simulated GPU node's real processes, from outside them.

Every holder and service is started by the node's supervisor (a child subreaper, _sim_programs.py): a spawn
request is a JSON file under <root>/run/spawn, answered by a ready report under <root>/run/ready. The
services (nvidia-persistenced, fabric manager, DCGM, the display manager) start and stop here, for gpu_sim and
for the simulated systemctl.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time

try:
    from ansible_collections.gpuops.remediation.plugins.module_utils.kill._freezer import frozen_cgroup
    from ansible_collections.gpuops.remediation.plugins.module_utils.probes._process import read_process
    from ansible_collections.gpuops.remediation.plugins.module_utils.simulation._sim_state import (
        SimError, dev_path, gpu_device, load_state, process_exists, update_state, write_json_atomic)
except ImportError:  # running from <root>/lib as plain modules
    from _freezer import frozen_cgroup  # type: ignore[no-redef] # pylint: disable=import-error
    from _process import read_process  # type: ignore[no-redef] # pylint: disable=import-error
    from _sim_state import (  # type: ignore[no-redef] # pylint: disable=import-error
        SimError, dev_path, gpu_device, load_state, process_exists, update_state, write_json_atomic)

SUPERVISOR_NAME = "gpu-sim-init"
SPAWN_TIMEOUT = 20.0
STOP_TIMEOUT = 5.0
SERVICES = {
    "nvidia-persistenced": {"unit": "nvidia-persistenced.service", "process": "nvidia-persistenced",
                            "description": "NVIDIA Persistence Daemon", "aliases": []},
    "nvidia-fabricmanager": {"unit": "nvidia-fabricmanager.service", "process": "nv-fabricmanager",
                             "description": "NVIDIA fabric manager service", "aliases": []},
    "nvidia-dcgm": {"unit": "nvidia-dcgm.service", "process": "nv-hostengine",
                    "description": "NVIDIA DCGM service", "aliases": ["dcgm.service"]},
    "display-manager": {"unit": "gdm.service", "process": "gdm3", "description": "GNOME Display Manager",
                        "aliases": ["display-manager.service", "gdm3.service"]},
}
# Holder kinds that stop themselves once they have reported, and the state spawn() waits for.
STOPPED_KINDS = {"stopped_checkpoint": "T"}
# Holder kinds with a TERM handler that writes <root>/run/checkpoints/<spawn id> (their record's "checkpoint").
CHECKPOINT_KINDS = ("term_checkpoint", "stopped_checkpoint", "pidns_init_checkpoint")
XORG_NAME = "Xorg"
XORG_MEMORY_MIB = 24


# ---------------------------------------------------------------- launching the node's programs

def program_path(root):
    """The program every process of the node runs (the supervisor and the holders)."""
    return os.path.join(root, "lib", "_sim_programs.py")


def launch(state, argv0, args):
    """Start our program detached: own session, stdio on /dev/null, argv[0] (the cmdline) set to argv0.

    With an argv[0] that is not its path, Python cannot find its standard library by itself: PYTHONHOME
    tells it, and -S keeps site-packages out (the programs need only the standard library).
    """
    import subprocess  # only needed here

    env = dict((key, value) for key, value in os.environ.items() if not key.startswith("PYTHON"))
    env["PYTHONHOME"] = state["python_home"]
    with open(os.devnull, "r+b") as devnull:
        return subprocess.Popen([argv0, "-S", "-s"] + args, executable=state["python"], stdin=devnull, stdout=devnull,
                                stderr=devnull, close_fds=True, start_new_session=True, cwd="/", env=env)


def start_supervisor(root, state):
    proc = launch(state, SUPERVISOR_NAME, [program_path(root), "supervisor", root])
    deadline = time.monotonic() + SPAWN_TIMEOUT
    ready = os.path.join(root, "run", "supervisor.json")
    while not os.path.exists(ready):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SimError("the node supervisor did not start (exit %s)" % proc.poll())
        time.sleep(0.02)
    with open(ready) as handle:
        info = json.load(handle)

    def record(st):
        st["supervisor"] = info
        st["processes"].append({"pid": info["pid"], "start_time": info["start_time"], "role": "supervisor"})

    update_state(root, record)


def _request_id():
    return "%d-%d-%d" % (os.getpid(), int(time.time() * 1e6), threading.get_ident() % 100000)


def spawn(root, spec):
    """Ask the supervisor to start one process from `spec`; wait until it holds what it should.

    Returns the holder program's ready report: {"pid", "start_time", "parent_pid", "parent_start_time"}.
    """
    spec = dict(spec, id=_request_id(), root=root)
    request = os.path.join(root, "run", "spawn", spec["id"] + ".json")
    write_json_atomic(request, spec)
    return wait_ready(root, spec)


def wait_ready(root, spec):
    """The ready report of the process started for `spec` (by the supervisor, or by the process that starts it)."""
    ready = os.path.join(root, "run", "ready", spec["id"] + ".json")
    failed = os.path.join(root, "run", "ready", spec["id"] + ".error")
    deadline = time.monotonic() + SPAWN_TIMEOUT
    while time.monotonic() < deadline:
        if os.path.exists(ready):
            with open(ready) as handle:
                report = json.load(handle)
            _wait_state(report["pid"], STOPPED_KINDS.get(spec.get("kind")), deadline)
            if spec.get("freeze") == "at_start":
                _wait_frozen(report["pid"], deadline)
            report["spawn_id"] = spec["id"]
            return report
        if os.path.exists(failed):
            with open(failed) as handle:
                raise SimError("%s %r did not start: %s" % (spec.get("role"), spec.get("name"), handle.read().strip()))
        time.sleep(0.02)
    raise SimError("%s %r did not report ready within %.0f s" % (spec.get("role"), spec.get("name"), SPAWN_TIMEOUT))


def _wait_state(pid, state, deadline):
    """Until pid is in state (a holder that stops itself after its report), when there is one to wait for."""
    while state and (read_process(pid) or {}).get("state") != state:
        if time.monotonic() > deadline:
            raise SimError("pid %d did not reach state %s" % (pid, state))
        time.sleep(0.02)


def _wait_frozen(pid, deadline):
    """Until pid's cgroup is frozen (a holder that freezes itself after its report)."""
    while frozen_cgroup(pid) is None or (frozen_cgroup(pid) or {}).get("state") not in ("FROZEN", "frozen"):
        if time.monotonic() > deadline:
            raise SimError("pid %d was not frozen" % pid)
        time.sleep(0.02)


def record_holder(root, spec, report):
    """Write a started holder (and the parent a zombie keeps) into the state; return the holder record."""
    holder = {"pid": report["pid"], "start_time": report["start_time"], "kind": spec["kind"], "name": spec["name"],
              "type": spec.get("type", "C"), "user": spec.get("user"),
              "gpus": dict((str(index), int(spec.get("memory_mib", 0))) for index in spec.get("gpus", [])),
              "parent_pid": report.get("parent_pid"), "parent_start_time": report.get("parent_start_time"),
              "role": spec["role"], "service": spec.get("service"),
              "checkpoint": os.path.join(root, "run", "checkpoints", report["spawn_id"])
              if spec["kind"] in CHECKPOINT_KINDS or spec.get("freeze") == "on_term" else None,
              "cgroup": spec.get("cgroup"), "running": bool(spec.get("running")), "unit": spec.get("unit"),
              # {gpu index: [GPU instance, compute instance]} of a holder inside a MIG instance
              "mig": spec.get("mig")}

    # What a unit's command put in the background runs in the session systemd opened for that command: the command's
    # pid (gone now) is the holder's session id, and systemctl lists it for the unit's current start.
    command = [spec["unit_command"], os.getsid(report["pid"])] if spec.get("unit_command") else None

    def record(state):
        if command:
            state["units"][spec["unit"]]["commands"].append(command)
        state["holders"].append(holder)
        state["processes"].append({"pid": holder["pid"], "start_time": holder["start_time"], "role": spec["role"]})
        if report.get("parent_pid"):
            state["processes"].append({"pid": report["parent_pid"], "start_time": report["parent_start_time"],
                                       "role": "parent"})

    update_state(root, record)
    return holder


# ---------------------------------------------------------------- services

def _service_specs(root, state, name):
    """The spawn spec of one service's main process; the display manager's starts its Xorg itself ("children"), so
    that Xorg is the display manager's the way the init system sees it: started by the unit's main process."""
    meta = SERVICES[name]
    devices = [dev_path(root, "nvidiactl")]
    if name == "nvidia-persistenced":
        devices = [gpu_device(root, gpu["index"]) for gpu in state["gpus"]] + devices
    spec = {"role": "service", "service": name, "kind": "fd", "name": meta["process"], "devices": devices, "children": []}
    if name == "display-manager" and state["gpus"]:
        xorg_devices = [gpu_device(root, 0), dev_path(root, "nvidiactl"), dev_path(root, "nvidia-modeset"),
                        dev_path(root, "dri/card1")]
        spec["children"].append({"role": "service_child", "service": name, "kind": "fd", "name": XORG_NAME,
                                 "devices": xorg_devices, "gpus": [0], "memory_mib": XORG_MEMORY_MIB, "type": "G",
                                 "id": _request_id() + "-%s" % XORG_NAME, "root": root})
    return spec


def start_service(root, name):
    """Start a service's real processes and mark it active; a running one is left as it is."""
    state = load_state(root)
    current = state["services"][name]
    if current["active"] and process_exists(current["pid"], current["start_time"]):
        return current
    spec = _service_specs(root, state, name)
    main = spawn(root, spec)
    children = [record_holder(root, child, wait_ready(root, child)) for child in spec["children"]]

    def record(st):
        service = st["services"][name]
        service.update({"pid": main["pid"], "start_time": main["start_time"], "active": True, "enabled": True,
                        "children": [{"pid": c["pid"], "start_time": c["start_time"], "name": c["name"]} for c in children]})
        st["processes"].append({"pid": main["pid"], "start_time": main["start_time"], "role": "service"})

    return update_state(root, record)["services"][name]


def stop_service(root, name, timeout=STOP_TIMEOUT):
    """SIGTERM the service's processes (verified by start time), wait, SIGKILL what is left; mark it inactive."""
    state = load_state(root)
    service = state["services"][name]
    targets = [(service["pid"], service["start_time"])] + [(c["pid"], c["start_time"]) for c in service.get("children", [])]
    terminate([t for t in targets if t[0]], timeout)

    def record(st):
        st["services"][name].update({"pid": 0, "start_time": None, "active": False, "children": []})

    update_state(root, record)


# ---------------------------------------------------------------- signals

def terminate(targets, timeout):
    """SIGTERM each (pid, start_time) that is still that process, wait up to timeout, then SIGKILL."""
    alive = [(pid, st) for pid, st in targets if process_exists(pid, st)]
    for pid, _st in alive:
        send_signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = [(pid, st) for pid, st in alive if _running(pid, st)]
        if not alive:
            return
        time.sleep(0.02)
    for pid, _st in alive:
        send_signal(pid, signal.SIGKILL)
    wait_gone(alive, timeout)


def _running(pid, start_time):
    """Exists and is not a zombie (a stopped service's zombie is the supervisor's to reap)."""
    record = read_process(pid)
    return bool(record) and record["start_time"] == start_time and record["state"] not in ("Z", "X")


def wait_gone(targets, timeout):
    """Wait up to timeout until none of the (pid, start_time) runs any more (a zombie counts as gone)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(_running(pid, st) for pid, st in targets):
        time.sleep(0.02)


def send_signal(pid, sig):
    """Signal a process of the node; one that has just gone is no error."""
    try:
        os.kill(pid, sig)
    except OSError:
        pass
