# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Each platform's ladder, once: its rungs in order, its default max_rung, the rungs that take its node out of service
by default, and where its options come from. The walk, the circuit breaker, the filters and the role's argument-spec
test read these records; nothing else lists a platform's rungs or defaults."""

from __future__ import annotations

from dataclasses import dataclass

from ansible_collections.gpuops.remediation.plugins.module_utils._verdict import RUNGS, WINDOWS_RUNGS


@dataclass(frozen=True)
class Platform:
    name: str
    rungs: tuple
    default_max_rung: str
    destructive_rungs: tuple
    # The option of gpu_ladder and gpu_breaker that holds this platform's own max_rung and destructive_rungs (None: the
    # top-level ones), and the role's variables for them, named in messages.
    suboption: str | None
    max_rung_variable: str
    destructive_rungs_variable: str

    def own_options(self, args):
        """The options the caller gave for this platform (the `windows` suboption on Windows, else the top-level
        ones): {name: value}, a value None where unset."""
        if self.suboption is None:
            return args
        return args.get(self.suboption) or {}

    def rungs_of(self, args):
        """(max_rung, destructive_rungs) of this platform from the caller's options; unset, this platform's defaults
        (never the other platform's values)."""
        own = self.own_options(args)
        destructive = own.get("destructive_rungs")
        return own.get("max_rung") or self.default_max_rung, list(self.destructive_rungs) if destructive is None else destructive


LINUX = Platform(
    name="linux", rungs=RUNGS, default_max_rung="reload", destructive_rungs=("reset", "reload", "graphics", "reboot"),
    suboption=None, max_rung_variable="gpu_reclaim_max_rung", destructive_rungs_variable="gpu_reclaim_destructive_rungs",
)
WINDOWS = Platform(
    name="windows", rungs=WINDOWS_RUNGS, default_max_rung="restart_adapter", destructive_rungs=("restart_adapter", "logoff", "reboot"),
    suboption="windows", max_rung_variable="gpu_reclaim_windows_max_rung", destructive_rungs_variable="gpu_reclaim_windows_destructive_rungs",
)
PLATFORMS = {platform.name: platform for platform in (LINUX, WINDOWS)}
# Every rung of either ladder, each once, in ladder order (the walk's and the breaker's option choices).
ALL_RUNGS = list(RUNGS) + [rung for rung in WINDOWS_RUNGS if rung not in RUNGS]


def platform_rungs(args):
    """(max_rung, destructive_rungs) of args["platform"]'s record from the caller's options (Platform.rungs_of)."""
    return PLATFORMS[args["platform"]].rungs_of(args)
