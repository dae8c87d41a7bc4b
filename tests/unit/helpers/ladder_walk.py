# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the Linux walk's tests share: gpu_ladder's arguments as the role gpu_reclaim passes them (its option names,
a run id), and the walk's options made from them."""

from __future__ import annotations

from ansible_collections.gpuops.remediation.plugins.plugin_utils.ladder._ladder_options import WalkOptions, walk_argument_spec


def walk_arguments(**overrides):
    """Every gpu_ladder argument at its default, with the role's option names and run id; overrides win."""
    args = dict((name, spec.get("default")) for name, spec in walk_argument_spec().items())
    args.update(option_names={"max_rung": "gpu_reclaim_max_rung", "allow_reboot": "gpu_reclaim_allow_reboot"}, run_id="run-1")
    args.update(overrides)
    return args


def walk_options(**overrides):
    """The walk's options from walk_arguments(**overrides)."""
    return WalkOptions(walk_arguments(**overrides))
