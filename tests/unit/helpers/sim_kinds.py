# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulated holder kinds this machine can start: a container's seccomp profile refuses unshare(), which the
namespace and file table kinds need; the tests over every kind keep the others, and a test of each such kind says
it was not run, and why."""

from __future__ import annotations

from ansible_collections.gpuops.remediation.plugins.module_utils.simulation import _sim_build as sim
from ansible_collections.gpuops.remediation.tests.unit.helpers import bounded

# The holder kinds that set themselves up with unshare(), and what they unshare (a key of bounded.UNSHARE_FLAGS).
UNSHARING_KINDS = {"pidns_init": "pid", "pidns_init_checkpoint": "pid", "mount_namespace": "mount", "own_fd_table": "files"}


def startable_holder_kinds():
    """Every holder kind, less those whose unshare() this machine refuses (each has a test of its own saying so)."""
    refused = set(what for what in set(UNSHARING_KINDS.values()) if bounded.unshare_refusal(what))
    return [kind for kind in sim.HOLDER_KINDS if UNSHARING_KINDS.get(kind) not in refused]
