# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""HolderKiller._thaw on the real v1 freezer: a frozen cgroup is thawed (or the run refused) only for a process the rules
let the run signal. A suspended Slurm job is a frozen cgroup whose processes are busy: thawing it would resume the job
behind Slurm's back, and refusing the whole run for it would keep every leftover (issue 17 rule 5)."""

from __future__ import annotations

import os

import pytest

from ansible_collections.gpuops.remediation.plugins.module_utils.probes import _process
from ansible_collections.gpuops.remediation.plugins.module_utils.kill._freezer import frozen_cgroup, parse_mountinfo
from ansible_collections.gpuops.remediation.plugins.module_utils.kill._kill import HolderKiller
from ansible_collections.gpuops.remediation.plugins.module_utils.kill._protect import Policy
from ansible_collections.gpuops.remediation.plugins.module_utils.kill._terminate import Target

from ansible_collections.gpuops.remediation.tests.unit.helpers import bounded


class Failed(Exception):
    pass


class Module:
    check_mode = False

    def fail_json(self, **kwargs):
        raise Failed(kwargs["msg"])


def _killer(thaw_frozen, policy):
    killer = HolderKiller.__new__(HolderKiller)
    killer.module = Module()
    killer.params = {"thaw_frozen": thaw_frozen, "grace": 2.0}
    killer.journal = None
    killer.policy = policy
    return killer


@pytest.fixture
def frozen_sleep(spawn, procs):
    mounts = parse_mountinfo(open("/proc/self/mountinfo").read())
    mounted = mounts["v1"].get("freezer")
    if not mounted:
        pytest.skip("this host has no v1 freezer mounted")
    cgroup = os.path.join(mounted[0], "gpuops-test-thaw-%d" % os.getpid())
    bounded.make_cgroup(cgroup)
    proc = spawn(["sleep", "60"])
    try:
        with open(os.path.join(cgroup, "cgroup.procs"), "w") as handle:
            handle.write(str(proc.pid))
        with open(os.path.join(cgroup, "freezer.state"), "w") as handle:
            handle.write("FROZEN")
        procs.wait_until(lambda: frozen_cgroup(proc.pid) is not None)
        yield proc, cgroup
    finally:
        with open(os.path.join(cgroup, "freezer.state"), "w") as handle:
            handle.write("THAWED")
        proc.kill()
        bounded.wait(proc, "proc")
        bounded.remove_cgroup(cgroup)


@pytest.mark.parametrize("thaw_frozen", [False, True])
def test_a_protected_process_in_a_frozen_cgroup_is_neither_thawed_nor_a_reason_to_refuse(frozen_sleep, thaw_frozen):
    proc, cgroup = frozen_sleep
    target = Target(proc.pid, _process.start_time(proc.pid))
    assert _killer(thaw_frozen, Policy(protect_names=["sleep"]))._thaw([target], check_mode=False) == []
    assert frozen_cgroup(proc.pid) is not None  # still frozen: the run left it alone


def test_a_process_the_run_may_end_still_refuses_without_thaw_frozen(frozen_sleep):
    proc, cgroup = frozen_sleep
    target = Target(proc.pid, _process.start_time(proc.pid))
    with pytest.raises(Failed, match="thaw_frozen"):
        _killer(False, Policy())._thaw([target], check_mode=False)
