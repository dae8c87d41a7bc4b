# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The real Docker captures under fixtures/docker (SOURCES.md) the container tests read: the runtime's inspect answers
and the cgroup files of a container's main process and of a forged user-delegated scope."""

from __future__ import annotations

import os

from ansible_collections.gpuops.remediation.plugins.module_utils.kill._container_runtime import parse_inspect

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "plugins", "fixtures", "docker")
CONTAINER_ID = "1a22e7e63cded052f07163ac6ec0d6926b755635281d453473043e5eaeae0256"
OTHER_ID = "0" * 64
CLAIMED = {"runtime": "docker", "id": CONTAINER_ID}


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


def inspected(name):
    """The container state parse_inspect reads from one of the captured `docker container inspect` answers."""
    return parse_inspect("docker", CONTAINER_ID, 0, fixture(name))[0]


MAIN_CGROUP = fixture("cgroup-v1-cgroupfs-main.txt")
FAKE_CGROUP = fixture("cgroup-v1-user-delegated-fake.txt")
RUNNING = inspected("inspect-running.json")
