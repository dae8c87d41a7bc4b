# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the plugins' tests share: the captures they read (tests/unit/plugins/fixtures, sources in SOURCES.md there and
in windows/), and where a test builds its simulated node."""

from __future__ import annotations

import os

import pytest

from ansible_collections.gpuops.remediation.plugins.module_utils.simulation import _sim_build

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")


class Captures:
    """Reads captures by their path under tests/unit/plugins/fixtures."""

    root = FIXTURES

    def path(self, *parts):
        return os.path.join(self.root, *parts)

    def text(self, *parts):
        with open(self.path(*parts), encoding="utf-8") as handle:
            return handle.read()

    def bytes(self, *parts):
        with open(self.path(*parts), "rb") as handle:
            return handle.read()

    def names(self, *parts):
        """The capture files of one folder (SOURCES.md left out)."""
        return sorted(name for name in os.listdir(self.path(*parts)) if name != "SOURCES.md")


@pytest.fixture
def captures():
    return Captures()


@pytest.fixture
def node_root(tmp_path):
    """Where a test builds its simulated node; the node (its supervisor and holders) is removed after the test."""
    root = tmp_path / "node"
    yield str(root)
    _sim_build.destroy_node(str(root))
