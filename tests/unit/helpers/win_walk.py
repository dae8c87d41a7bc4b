# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the Windows walk's tests share: the walk's options as the role gpu_reclaim passes them for a Windows host, and
a simulated Windows node with ada's session."""

from __future__ import annotations

from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.simulation import _simulated_node
from ansible_collections.gpuops.remediation.plugins.plugin_utils.ladder._ladder_options import WalkOptions, walk_argument_spec
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node._remote_node import SimulatedNode


def windows_walk_options(top_rung, **overrides):
    """The walk's options for a Windows host climbing up to top_rung, with the role's option names; overrides win
    (max_rung among them)."""
    args = dict((name, spec.get("default")) for name, spec in walk_argument_spec().items())
    args.update(platform="windows", max_rung=top_rung,
                option_names={"max_rung": "gpu_reclaim_windows_max_rung", "allow_reboot": "gpu_reclaim_allow_reboot"})
    args.update(overrides)
    return WalkOptions(args)


def build(tmp_path, **scenario):
    """The simulated node WS12 under tmp_path, ada's session on it (the scenario's keys win), as ada sees it."""
    root = str(tmp_path / "ws12")
    _simulated_node.write_node(root, _simulated_node.build_state(dict({"hostname": "WS12", "sessions": [{"user": "ada"}]}, **scenario)))
    return SimulatedNode(root, "ada")
