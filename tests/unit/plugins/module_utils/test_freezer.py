# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""_freezer: the frozen cgroup of a process, from real captures laid out in a tree, and against the real cgroup
filesystems of this host when it has a v1 freezer or cgroup2 and the run may write them (root)."""

from __future__ import annotations

import os
import signal

import pytest

from ansible_collections.gpuops.remediation.plugins.module_utils.kill._freezer import describe, frozen_cgroup, parse_mountinfo, thaw

from ansible_collections.gpuops.remediation.tests.unit.helpers import bounded

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "cgroup")


def read(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


def test_mountinfo_of_a_hybrid_host():
    mounts = parse_mountinfo(read("mountinfo-hybrid.txt"))
    assert mounts["v1"]["freezer"] == ("/sys/fs/cgroup/freezer", "/")
    assert mounts["v2"] == ("/sys/fs/cgroup/unified", "/")


def _tree(tmp_path, cgroup_file, files):
    proc = tmp_path / "proc" / "4242"
    proc.mkdir(parents=True)
    (proc / "cgroup").write_text(read(cgroup_file))
    for path, text in files.items():
        target = tmp_path / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return {"v1": {"freezer": (str(tmp_path / "freezer"), "/")}, "v2": (str(tmp_path / "unified"), "/")}


def test_v1_frozen_by_its_parent(tmp_path):
    mounts = _tree(tmp_path, "proc-pid-cgroup-v1-frozen.txt", {
        "freezer/gpuops-cap/freezer.state": "FROZEN\n", "freezer/gpuops-cap/freezer.self_freezing": "1\n",
        "freezer/gpuops-cap/job/freezer.state": "FROZEN\n", "freezer/gpuops-cap/job/freezer.self_freezing": "0\n"})
    found = frozen_cgroup(4242, str(tmp_path / "proc"), mounts)
    assert found["version"] == "v1" and found["state"] == "FROZEN"
    assert found["cgroup"] == str(tmp_path / "freezer/gpuops-cap")
    assert found["holder_cgroup"] == str(tmp_path / "freezer/gpuops-cap/job")
    assert found["thaw"] == [{"path": str(tmp_path / "freezer/gpuops-cap/freezer.state"), "value": "THAWED"}]
    assert describe(found).startswith("cgroup %s is frozen" % found["cgroup"])


def test_v1_thawed_is_not_frozen(tmp_path):
    mounts = _tree(tmp_path, "proc-pid-cgroup-v1-frozen.txt", {"freezer/gpuops-cap/job/freezer.state": "THAWED\n"})
    assert frozen_cgroup(4242, str(tmp_path / "proc"), mounts) is None


def test_v2_frozen_by_its_parent(tmp_path):
    mounts = _tree(tmp_path, "proc-pid-cgroup-v2-frozen.txt", {
        "unified/gpuops-cap/cgroup.freeze": "1\n", "unified/gpuops-cap/job/cgroup.freeze": "0\n",
        "unified/gpuops-cap/job/cgroup.events": read("cgroup.events-frozen.txt")})
    found = frozen_cgroup(4242, str(tmp_path / "proc"), mounts)
    assert found["version"] == "v2" and found["state"] == "frozen"
    assert found["file"] == str(tmp_path / "unified/gpuops-cap/cgroup.freeze")
    assert found["thaw"] == [{"path": str(tmp_path / "unified/gpuops-cap/cgroup.freeze"), "value": "0"}]


def test_no_cgroup_file_no_freeze(tmp_path):
    assert frozen_cgroup(4242, str(tmp_path), {"v1": {}, "v2": None}) is None


def _real(kind):
    base = {"v1": "/sys/fs/cgroup/freezer", "v2": "/sys/fs/cgroup/unified"}[kind]
    mounts = parse_mountinfo(open("/proc/self/mountinfo").read())
    mounted = mounts["v1"].get("freezer") if kind == "v1" else mounts["v2"]
    if not mounted:
        pytest.skip("this host has no %s freezer mounted" % kind)
    return mounted[0] or base


@pytest.mark.parametrize("kind", ["v1", "v2"])
def test_real_frozen_cgroup_found_and_thawed(kind, spawn, procs):
    mount = _real(kind)
    outer = os.path.join(mount, "gpuops-test-%d-%s" % (os.getpid(), kind))
    inner = os.path.join(outer, "job")
    bounded.make_cgroup(inner)
    proc = spawn(["sleep", "60"])
    try:
        with open(os.path.join(inner, "cgroup.procs"), "w") as handle:
            handle.write(str(proc.pid))
        with open(os.path.join(outer, "freezer.state" if kind == "v1" else "cgroup.freeze"), "w") as handle:
            handle.write("FROZEN" if kind == "v1" else "1")
        procs.wait_until(lambda: frozen_cgroup(proc.pid) is not None)
        found = frozen_cgroup(proc.pid)
        assert found["cgroup"] == outer and found["holder_cgroup"] == inner and found["version"] == kind
        if kind == "v1":
            procs.wait_until(lambda: procs.state_of(proc.pid) == "D")
            os.kill(proc.pid, signal.SIGKILL)  # a v1 frozen task outlives SIGKILL until thawed
            assert bounded.signal_pending(proc.pid, signal.SIGKILL) and proc.poll() is None
        assert thaw(proc.pid, found, 5.0) is None
        assert frozen_cgroup(proc.pid) is None
    finally:
        proc.kill()
        bounded.wait(proc, "proc")
        for path in (inner, outer):
            bounded.remove_cgroup(path)
    assert not os.path.exists(outer)
