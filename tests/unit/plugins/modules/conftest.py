# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fixtures of the module tests that build simulated nodes."""

from __future__ import annotations

import pytest

from ansible_collections.gpuops.remediation.plugins.module_utils.simulation import _sim_build as sim


@pytest.fixture
def node_root(tmp_path):
    """Where a test builds its simulated node; removed (supervisor and holders) after the test."""
    root = str(tmp_path / "node")
    yield root
    sim.destroy_node(root)
