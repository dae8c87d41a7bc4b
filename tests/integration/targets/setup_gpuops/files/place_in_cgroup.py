# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Test scaffolding (root): put a process into a cgroup, or remove a cgroup this put it in.

    place_in_cgroup.py place PATH PID   creates PATH (e.g. /user.slice/user-1000.slice/user@1000.service/docker-<id>.scope)
                                        in the hierarchy systemd names units in (cgroup v2: the unified one; v1:
                                        name=systemd) and moves PID there; prints {"directory": ...}
    place_in_cgroup.py join SOURCE PID  moves PID into every cgroup process SOURCE is in (each v1 hierarchy, or v2's)
    place_in_cgroup.py remove PATH      removes the directories of PATH it can, deepest first (they must be empty)

`place` is what a user can do in the subtree systemd delegates to them; root does it here so that the test needs no
such user. `join` is what only root can do: put a process into a container's own cgroups.
"""
import json
import os
import sys

ROOT = "/sys/fs/cgroup"


def unit_hierarchy():
    if os.path.exists(os.path.join(ROOT, "cgroup.controllers")):
        return ROOT  # cgroup v2
    if os.path.isdir(os.path.join(ROOT, "systemd")):
        return os.path.join(ROOT, "systemd")  # v1: the name=systemd hierarchy
    if os.path.exists(os.path.join(ROOT, "unified", "cgroup.controllers")):
        return os.path.join(ROOT, "unified")
    sys.exit("no cgroup hierarchy to create a unit path in under %s" % ROOT)


def mounts():
    """{(hierarchy id, controllers) as /proc/<pid>/cgroup names them: mount point}."""
    found = {}
    with open("/proc/self/mountinfo") as handle:
        for line in handle:
            fields = line.split(" - ", 1)
            left, right = fields[0].split(), fields[1].split()
            if right[0] == "cgroup2":
                found[("0", "")] = left[4]
            elif right[0] == "cgroup":
                options = [o for o in right[2].split(",") if o not in ("rw", "ro") and not o.startswith(("relatime", "nosuid",
                           "nodev", "noexec", "clone_children", "xattr", "release_agent", "nsdelegate", "noprefix"))]
                found[(None, ",".join(sorted(options)))] = left[4]
    return found


def join(source, pid):
    points = mounts()
    with open("/proc/%s/cgroup" % source) as handle:
        lines = [line.rstrip("\n").split(":", 2) for line in handle]
    moved = []
    for hierarchy, controllers, path in lines:
        key = ("0", "") if hierarchy == "0" else (None, ",".join(sorted(controllers.split(","))))
        point = points.get(key)
        if point is None:
            continue
        with open(os.path.join(point, path.lstrip("/"), "cgroup.procs"), "w") as handle:
            handle.write(pid)
        moved.append(os.path.join(point, path.lstrip("/")))
    print(json.dumps({"directories": moved}))


def main(argv):
    action = argv[1]
    if action == "join":
        join(argv[2], argv[3])
        return
    path = argv[2].strip("/")
    directory = os.path.join(unit_hierarchy(), path)
    if action == "place":
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, "cgroup.procs"), "w") as handle:
            handle.write(argv[3])
        print(json.dumps({"directory": directory}))
        return
    parts = path.split("/")
    for depth in range(len(parts), 0, -1):
        try:
            os.rmdir(os.path.join(unit_hierarchy(), *parts[:depth]))
        except OSError:
            break  # not empty (a real slice of this machine) or already gone


main(sys.argv)
