# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A container stop ends every process of the container: a container that also runs a holder the rules refuse
(protected, busy, a display server) is not stopped for another of its holders, in check mode and for real alike
(would_end says the same). Real processes stand for the holders; the runtime's confirmation is given."""

from __future__ import annotations

from ansible_collections.gpuops.remediation.plugins.module_utils.probes import _process
from ansible_collections.gpuops.remediation.plugins.module_utils.kill._kill import HolderKiller
from ansible_collections.gpuops.remediation.plugins.module_utils.kill._protect import Policy

CONTAINER = {"runtime": "docker", "id": "1a22e7e63cded052f07163ac6ec0d6926b755635281d453473043e5eaeae0256"}


class Witness:
    """The runtime confirms the container; a stop of it ends these holders."""

    def __init__(self, members):
        self._members = members

    def confirm(self, pid, claimed):
        return dict(claimed, confirmed=True, reason="confirmed", main_pid=self._members[0]["pid"])

    def members(self, confirmation, holders):
        return list(self._members)


def _holder(proc, name):
    return {"pid": proc.pid, "start_time": _process.start_time(proc.pid), "name": name, "class": "compute", "gpus": [0],
            "devices": ["/dev/nvidia0"], "seen_by": ["fd"], "container": dict(CONTAINER), "visible": True}


def _killer(holders, policy):
    killer = HolderKiller.__new__(HolderKiller)
    killer.params = {"containers": "stop", "reap_zombies": True}
    killer.policy = policy
    killer.witness = Witness(holders)
    return killer


def test_a_container_that_runs_a_protected_holder_is_not_stopped_for_another(spawn):
    worker = spawn(["sleep", "60"])
    notebook = spawn(["cat"], stdin=-1)  # protected by name: `cat`
    holders = [_holder(worker, "sleep"), _holder(notebook, "cat")]
    killer = _killer(holders, Policy(protect_names=["cat"]))
    result = {"left_alone": [], "unconfirmed_containers": []}
    targets, zombies, containers = killer._triage(holders, result)
    assert containers == {} and targets == [] and zombies == []
    reasons = dict((entry["pid"], entry["reason"]) for entry in result["left_alone"])
    assert reasons[notebook.pid] == "protected name: cat"
    assert reasons[worker.pid] == "in docker container %s, whose stop would also end pid %d (protected name: cat)" % (
        CONTAINER["id"], notebook.pid)
    assert killer.would_end(holders, {"holders": holders}) == []


def test_a_container_of_holders_the_rules_let_through_is_stopped(spawn):
    first, second = spawn(["sleep", "60"]), spawn(["sleep", "61"])
    holders = [_holder(first, "sleep"), _holder(second, "sleep")]
    killer = _killer(holders, Policy())
    result = {"left_alone": [], "unconfirmed_containers": []}
    _targets, _zombies, containers = killer._triage(holders, result)
    assert list(containers) == [(CONTAINER["runtime"], CONTAINER["id"])] and result["left_alone"] == []
    assert sorted(p["pid"] for p in killer.would_end(holders, {"holders": holders})) == sorted([first.pid, second.pid])
