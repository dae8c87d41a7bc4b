# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Frozen cgroups: which one holds a process, and thawing it.

A task of a frozen cgroup acts on no signal until it is thawed: under the v1 freezer (freezer.state FROZEN or
FREEZING) not even on SIGKILL, and it shows in uninterruptible sleep (D); under cgroup v2 (cgroup.freeze 1, seen in
cgroup.events as "frozen 1") SIGKILL still ends it but no handler runs. The cgroup is read from /proc/<pid>/cgroup and
found through this mount namespace's cgroup mounts (/proc/self/mountinfo); a freeze set on an ancestor holds it too.
"""

from __future__ import annotations

import os
import re
import time

POLL_INTERVAL = 0.05
_ESCAPE = re.compile(r"\\([0-7]{3})")


def _unescape(text):
    return _ESCAPE.sub(lambda match: chr(int(match.group(1), 8)), text)


def parse_mountinfo(text):
    """{"v1": {controller: (mount point, mount root)}, "v2": (mount point, mount root) or None} of the cgroup mounts."""
    mounts = {"v1": {}, "v2": None}
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if not sep or len(fields) < 5 or len(tail) < 3:
            continue
        root, point = _unescape(fields[3]), _unescape(fields[4])
        if tail[0] == "cgroup2" and mounts["v2"] is None:
            mounts["v2"] = (point, root)
        elif tail[0] == "cgroup":
            for option in tail[2].split(","):
                mounts["v1"].setdefault(option, (point, root))
    return mounts


def _read(path):
    try:
        with open(path, "r", encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


def _directory(mount, path):
    point, root = mount
    if root != "/" and (path == root or path.startswith(root.rstrip("/") + "/")):
        path = path[len(root.rstrip("/")):]
    return os.path.normpath(point + "/" + path.lstrip("/"))


def _ancestry(directory, top):
    """directory, then each parent up to and including top (the mount point)."""
    chain = [directory]
    while chain[-1] != top and chain[-1].startswith(top.rstrip("/") + "/"):
        chain.append(os.path.dirname(chain[-1]))
    return chain


def _v1(mount, path):
    directory = _directory(mount, path)
    state = (_read(os.path.join(directory, "freezer.state")) or "").strip()
    if state not in ("FROZEN", "FREEZING"):
        return None
    freezing = [d for d in _ancestry(directory, mount[0]) if (_read(os.path.join(d, "freezer.self_freezing")) or "").strip() == "1"]
    freezing = freezing or [directory]
    return {"version": "v1", "cgroup": freezing[-1], "holder_cgroup": directory, "file": os.path.join(freezing[-1], "freezer.state"),
            "state": state, "thaw": [{"path": os.path.join(d, "freezer.state"), "value": "THAWED"} for d in reversed(freezing)]}


def _v2(mount, path):
    directory = _directory(mount, path)
    freezing = [d for d in _ancestry(directory, mount[0]) if (_read(os.path.join(d, "cgroup.freeze")) or "").strip() == "1"]
    if not freezing:
        return None
    events = _read(os.path.join(directory, "cgroup.events")) or ""
    frozen = "frozen 1" in events.splitlines()
    return {"version": "v2", "cgroup": freezing[-1], "holder_cgroup": directory, "file": os.path.join(freezing[-1], "cgroup.freeze"),
            "state": "frozen" if frozen else "freezing",
            "thaw": [{"path": os.path.join(d, "cgroup.freeze"), "value": "0"} for d in reversed(freezing)]}


def cgroup_mounts(proc_root="/proc"):
    """parse_mountinfo of this mount namespace: read once for many frozen_cgroup() calls."""
    return parse_mountinfo(_read(os.path.join(proc_root, "self", "mountinfo")) or "")


def frozen_cgroup(pid, proc_root="/proc", mounts=None):
    """The frozen (or freezing) cgroup that holds pid, or None: {"version": "v1" | "v2", "cgroup": the outermost
    cgroup frozen on purpose (its own or an ancestor), "holder_cgroup": pid's own, "file": the file that froze it,
    "state", "thaw": [{"path", "value"}] (what thawing writes, outermost first)}."""
    text = _read(os.path.join(proc_root, str(pid), "cgroup"))
    if not text:
        return None
    if mounts is None:
        mounts = cgroup_mounts(proc_root)
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        found = None
        if parts[0] == "0" and parts[1] == "" and mounts["v2"]:
            found = _v2(mounts["v2"], parts[2])
        elif "freezer" in parts[1].split(",") and "freezer" in mounts["v1"]:
            found = _v1(mounts["v1"]["freezer"], parts[2])
        if found:
            return found
    return None


def describe(frozen):
    """One line naming the cgroup and what says it is frozen."""
    return "cgroup %s is frozen (%s: %s; cgroup %s)" % (frozen["cgroup"], frozen["file"], frozen["state"], frozen["version"])


def thaw(pid, frozen, timeout):
    """Thaw what holds pid (frozen_cgroup's "thaw" writes), then wait up to timeout until pid is not frozen.
    Returns None when it thawed, else why not."""
    for write in frozen["thaw"]:
        try:
            with open(write["path"], "w", encoding="ascii") as handle:
                handle.write(write["value"])
        except OSError as error:
            return "cannot write %s to %s: %s" % (write["value"], write["path"], error.strerror or error)
    deadline = time.monotonic() + timeout
    while True:
        still = frozen_cgroup(pid)
        if still is None:
            return None
        if time.monotonic() >= deadline:
            return "still %s after %.1f s" % (describe(still), timeout)
        time.sleep(POLL_INTERVAL)
