# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The walk's options: its argument spec (its own and the modules' it passes through), the platform's values, the
checks made before any rung, and the constants the walk and its callers share."""

from __future__ import annotations

from ansible_collections.gpuops.remediation.plugins.module_utils.probes._dcgm import LEVELS as HEALTH_CHECK_LEVELS
from ansible_collections.gpuops.remediation.plugins.module_utils._argument_specs import (
    ACTION_ARGUMENT_SPEC, KILL_ARGUMENT_SPEC, SNAPSHOT_ARGUMENT_SPEC, check_kill_options, validate_snapshot_params,
)
from ansible_collections.gpuops.remediation.plugins.module_utils._option_ranges import within
from ansible_collections.gpuops.remediation.plugins.module_utils._verdict import ceiling_index
from ansible_collections.gpuops.remediation.plugins.plugin_utils.ladder._platform import ALL_RUNGS, LINUX, PLATFORMS, WINDOWS

INSPECT_MODULE = "gpuops.remediation.gpu_holders_info"
RUNG_MODULES = {
    "kill": "gpuops.remediation.gpu_kill",
    "instance": "gpuops.remediation.gpu_mig_recreate",
    "reset": "gpuops.remediation.gpu_reset",
    "reload": "gpuops.remediation.nvidia_driver_reload",
    "graphics": "gpuops.remediation.gpu_graphics_restart",
}
HEALTH_MODULE = "gpuops.remediation.gpu_health_check"
# Records the MIG layout before the reboot rung and creates it again after (the other rungs' modules keep it themselves).
LAYOUT_MODULE = "gpuops.remediation.gpu_mig_layout"
# The rungs after which the GPUs are checked (the health gate) before the node goes back into service: the ones that
# reset the GPUs' state. A kill leaves the GPUs as they were; a reboot starts them afresh.
GATED_RUNGS = ("reset", "reload")
HEALTH_CHECKS = ("auto", "never")
# Steps the controller takes between two calls of the walk.
CONTROLLER_STEPS = ("drain", "reboot", "undrain")
DRAINS = ("none", "slurm", "kubernetes")
# The walk's own options; the options of the modules it runs (snapshot, journal and lock, kill) pass through to them.
LADDER_ARGUMENT_SPEC = dict(
    platform=dict(type="str", choices=list(PLATFORMS), default=LINUX.name),
    max_rung=dict(type="str", choices=ALL_RUNGS, default=LINUX.default_max_rung),
    allow_reboot=dict(type="bool", default=False),
    destructive_rungs=dict(type="list", elements="str", choices=ALL_RUNGS),
    drain=dict(type="str", choices=list(DRAINS), default="none"),
    snapshot=dict(type="dict", default={}),
    snapshot_max_age=dict(type="float", default=300.0),
    kill_wait_timeout=dict(type="float", default=30.0),
    reload_grace=dict(type="float", default=10.0),
    health_check=dict(type="str", choices=list(HEALTH_CHECKS), default="auto"),
    health_check_level=dict(type="int", choices=list(HEALTH_CHECK_LEVELS), default=1),
    health_check_timeout=dict(type="float", default=300.0),
    continue_after=dict(type="str", choices=list(CONTROLLER_STEPS)),
    state=dict(type="dict", default={}),
    controller_result=dict(type="dict", default={}),
    option_names=dict(type="dict", default={}),
    windows=dict(type="dict", options=dict(
        max_rung=dict(type="str", choices=list(WINDOWS.rungs)),
        destructive_rungs=dict(type="list", elements="str", choices=list(WINDOWS.rungs)),
        journal_path=dict(type="str"),
    )),
)


def module_specs():
    """(snapshot, journal and lock, kill) argument specs of the modules the walk runs, which pass through to them
    (plain data: the controller's forks compile none of the node code to read them)."""
    return SNAPSHOT_ARGUMENT_SPEC, ACTION_ARGUMENT_SPEC, KILL_ARGUMENT_SPEC


def walk_argument_spec():
    spec = {}
    for part in module_specs():
        spec.update(part)
    spec.update(LADDER_ARGUMENT_SPEC)
    return spec


class WalkError(Exception):
    """The walk cannot go on: the first inspection failed, or a call does not continue the walk it names."""


class WalkOptions:
    """The walk's settings, from the gpu_ladder task's arguments (already checked against its argument spec)."""

    def __init__(self, args):
        self.platform = args.get("platform") or LINUX.name
        self.rungs = PLATFORMS[self.platform].rungs
        self.max_rung = args["max_rung"]
        self.allow_reboot = args["allow_reboot"]
        given = args.get("destructive_rungs")
        self.destructive_rungs = tuple(PLATFORMS[self.platform].destructive_rungs if given is None else given)
        self.drain = args["drain"]
        self.kill_wait_timeout = args["kill_wait_timeout"]
        self.reload_grace = args["reload_grace"]
        self.option_names = args.get("option_names") or {}
        self.health_check = args.get("health_check") or "auto"
        self.health_check_level = args.get("health_check_level") or 1
        self.health_check_timeout = args.get("health_check_timeout") or 300.0
        self.snapshot_max_age = args.get("snapshot_max_age", 300.0)
        self.kept = dict((name, args.get(name)) for name in KEPT_OPTIONS)
        snapshot_spec, action_spec, kill_spec = module_specs()
        self.snapshot_args = _present(args, snapshot_spec)
        self.action_args = _present(args, action_spec)
        self.kill_args = _present(args, kill_spec)
        # Ending a live scheduler job's processes (busy) is asked for: the kill rung then ends a running job.
        self.end_running_jobs = bool(args.get("end_running_jobs"))

    @classmethod
    def before_walk(cls, **given):
        """The options of a walk not started yet, as a question asked before it (the fleet guard's) sees them: the
        walk's own defaults, with the values `given` (platform, max_rung, allow_reboot, destructive_rungs,
        end_running_jobs)."""
        args = dict((name, spec.get("default")) for name, spec in LADDER_ARGUMENT_SPEC.items())
        args.update(given)
        return cls(args)

    @property
    def ceiling(self):
        return ceiling_index(self.max_rung, self.allow_reboot, self.rungs)

    def named(self, option, value):
        """An option as the caller set it, for messages: gpu_reclaim_max_rung=reload through the role."""
        return "%s=%s" % (self.option_names.get(option, option), value)

    def limits_text(self):
        return "%s, %s" % (self.named("max_rung", self.max_rung), self.named("allow_reboot", self.allow_reboot))


def platform_args(args):
    """The walk's arguments for its platform: on a Windows host the `windows` option's values replace the walk's own
    (each named, in messages, as the caller named the Windows one: option_names["windows.max_rung"]); an unset one
    keeps the walk's own."""
    platform = PLATFORMS.get(args.get("platform") or LINUX.name)
    resolved = dict((name, value) for name, value in args.items() if name != WINDOWS.suboption)
    if platform is None or platform.suboption is None:
        return resolved
    names = dict(args.get("option_names") or {})
    for name, value in platform.own_options(args).items():
        if value is not None:
            resolved[name] = value
            if "%s.%s" % (platform.suboption, name) in names:
                names[name] = names["%s.%s" % (platform.suboption, name)]
    resolved["option_names"] = names
    return resolved


def _present(args, names):
    return dict((name, args[name]) for name in names if args.get(name) is not None)


# The options a snapshot's verdict depends on (its "scope"): a given snapshot starts the walk only when they match.
SCOPE_OPTIONS = ("gpus", "ghost_threshold_mib", "kernel_log_source", "kernel_log_path", "kernel_log_window")
# What a walk keeps from its start: a call that continues it must not change them.
KEPT_OPTIONS = ("platform", "max_rung", "allow_reboot", "destructive_rungs", "drain", "gpus")


class _OptionCheck:
    """What the modules' option validators need of a module: the walk checks its options with the modules' own code,
    on the controller, before the first rung, so that bad input never climbs the ladder or drains the node."""

    def __init__(self, params):
        self.params = params

    def fail_json(self, msg, **kwargs):
        raise WalkError(msg)


def check_options(args):
    """Fail, naming the option and the value, when a module of the walk would refuse it, or a rung is not of the
    platform's ladder."""
    rungs = PLATFORMS[args["platform"]].rungs
    if args["max_rung"] not in rungs:
        raise WalkError("max_rung: %r is not a rung of the %s ladder (%s)" % (args["max_rung"], args["platform"], ", ".join(rungs)))
    unknown = [rung for rung in args.get("destructive_rungs") or [] if rung not in rungs]
    if unknown:
        raise WalkError("destructive_rungs: %s not a rung of the %s ladder (%s)" % (
            ", ".join(map(repr, unknown)), args["platform"], ", ".join(rungs)))
    check = _OptionCheck(args)
    validate_snapshot_params(check)
    check_kill_options(check)
    for name in ("kill_wait_timeout", "reload_grace", "lock_timeout", "snapshot_max_age"):
        if args.get(name) is not None and not within("wait_timeout" if name == "kill_wait_timeout" else name, args[name]):
            raise WalkError("%s must be 0 or more seconds, got %r" % (name, args[name]))
    if args.get("health_check_timeout") is not None and not within("health_check_timeout", args["health_check_timeout"]):
        raise WalkError("health_check_timeout must be more than 0 seconds, got %r" % args["health_check_timeout"])
