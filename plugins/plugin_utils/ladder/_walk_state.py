# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The walk's state, typed: WalkState (and its Scheduler part), turned into the plain JSON dict only where it leaves a
task (gpu_ladder's `state`, which the role hands back to the next call) and read back from it there.

The JSON form keeps the keys it has always had, each present when it was before: a call that continues a walk reads
the state an earlier call (an earlier version of the collection, too) returned.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

STATE_VERSION = 1


@dataclass
class Scheduler:
    """The scheduler's part of the walk: the drain before a destructive rung and what follows it once the walk ends."""

    taken: bool = False  # the drain was taken (checked again before each later destructive rung with Slurm)
    drained: str = ""  # "slurm" or "kubernetes" when the drain is ours
    notes: List[str] = field(default_factory=list)
    checked: Optional[str] = None  # the rung the last drain was checked for
    error: str = ""  # the drain failed: no destructive rung
    followup: Optional[str] = None  # resume, release or hold (drain_followup), once the walk ended
    undrained: str = ""
    undrain_taken: bool = False
    undrain_error: str = ""


@dataclass
class WalkState:
    """One host's walk between calls: the snapshots, the rungs tried, the pause for the controller, the outcome."""

    version: int = STATE_VERSION
    started: float = 0.0
    first: Optional[Dict[str, Any]] = None  # the snapshot the walk started from
    last: Optional[Dict[str, Any]] = None  # the latest one
    floor: int = 0  # the lightest rung the evidence allows (a rung index)
    tried: List[Dict[str, Any]] = field(default_factory=list)  # one step_result per rung taken
    inspections: List[Dict[str, Any]] = field(default_factory=list)
    pending: Optional[str] = None  # the controller step the walk waits for: drain or reboot
    pending_rung: Optional[str] = None
    refused: str = ""
    beyond: List[Dict[str, Any]] = field(default_factory=list)  # the GPUs a rung above the ceiling would help
    error: str = ""
    scheduler: Scheduler = field(default_factory=Scheduler)
    options: Dict[str, Any] = field(default_factory=dict)  # the options a continuing call must keep
    ended: bool = False  # the walk reached its end once: the health gate and the outcome are set
    health_check: Optional[Dict[str, Any]] = None
    outcome: Optional[Dict[str, Any]] = None
    run_id: Optional[str] = None
    reboot_journal: Optional[Dict[str, Any]] = None  # Windows: the reboot's intent line, while the walk waits for it
    reboot_layout: List[str] = field(default_factory=list)  # the MIG layout recorded before the reboot, as the plan says it

    def to_json(self):
        """The state as gpu_ladder returns it (the keys of the collection's earlier, untyped state)."""
        scheduler = self.scheduler
        data = {
            "version": self.version, "started": self.started, "first": self.first, "last": self.last, "floor": self.floor,
            "tried": self.tried, "inspections": self.inspections, "pending": self.pending, "pending_rung": self.pending_rung,
            "refused": self.refused, "beyond": self.beyond, "error": self.error, "drain_taken": scheduler.taken,
            "drained": scheduler.drained, "drain_notes": scheduler.notes, "undrained": scheduler.undrained,
            "undrain_taken": scheduler.undrain_taken, "options": self.options,
        }
        optional = (("drain_checked", scheduler.checked, scheduler.checked is not None),
                    ("drain_error", scheduler.error, bool(scheduler.error)),
                    ("undrain_error", scheduler.undrain_error, scheduler.undrain_taken),
                    ("health_check", self.health_check, self.ended),
                    ("drain_followup", scheduler.followup, self.ended),
                    ("outcome", self.outcome, self.ended),
                    ("run_id", self.run_id, self.run_id is not None),
                    ("reboot_journal", self.reboot_journal, self.reboot_journal is not None),
                    ("reboot_layout", self.reboot_layout, bool(self.reboot_layout)))
        data.update((key, value) for key, value, present in optional if present)
        return data

    @classmethod
    def from_json(cls, data):
        """The state from its JSON form (a key it lacks keeps its default)."""
        scheduler = Scheduler(
            taken=bool(data.get("drain_taken")), drained=data.get("drained") or "", notes=list(data.get("drain_notes") or []),
            checked=data.get("drain_checked"), error=data.get("drain_error") or "", followup=data.get("drain_followup"),
            undrained=data.get("undrained") or "", undrain_taken=bool(data.get("undrain_taken")),
            undrain_error=data.get("undrain_error") or "",
        )
        return cls(
            version=data.get("version"), started=data.get("started") or 0.0, first=data.get("first"), last=data.get("last"),
            floor=data.get("floor") or 0, tried=list(data.get("tried") or []), inspections=list(data.get("inspections") or []),
            pending=data.get("pending"), pending_rung=data.get("pending_rung"), refused=data.get("refused") or "",
            beyond=list(data.get("beyond") or []), error=data.get("error") or "", scheduler=scheduler,
            options=dict(data.get("options") or {}), ended="outcome" in data, health_check=data.get("health_check"),
            outcome=data.get("outcome"), run_id=data.get("run_id"), reboot_journal=data.get("reboot_journal"),
            reboot_layout=list(data.get("reboot_layout") or []),
        )

    # Read as the task returns it: state["outcome"], "outcome" in state (what a caller of the walk reads).

    def __getitem__(self, key):
        return self.to_json()[key]

    def __contains__(self, key):
        return key in self.to_json()

    def get(self, key, default=None):
        return self.to_json().get(key, default)


def walk_state(state):
    """The walk's state from a WalkState or its JSON form (what the decisions take)."""
    return state if isinstance(state, WalkState) else WalkState.from_json(state or {})
