# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The options the node modules share (the snapshot's, the journal's and lock's, the kill's) and their checks.

The ladder walk passes these options through to the modules it runs and checks them on the controller: it reads them
here, without importing the snapshot, the lock and the kill code that each of the controller's forks would compile.
"""

from __future__ import annotations

from ansible_collections.gpuops.remediation.plugins.module_utils._option_ranges import within
from ansible_collections.gpuops.remediation.plugins.module_utils._xid_policy import PolicyError, parse_policy

# Seconds a process gets to be gone after SIGKILL (the kill_grace option's default, kill/_terminate.py waits it): the
# driver's teardown of a CUDA context, in uninterruptible sleep, can take tens of seconds on a large GPU; only after this
# is it "outlived SIGKILL". Defined with the option, so that a module that ends nothing loads none of the kill code.
KILL_GRACE = 30.0

# The options every module that takes a snapshot accepts (merged into its argument_spec).
SNAPSHOT_ARGUMENT_SPEC = dict(
    gpus=dict(type="list", elements="str"),
    backend=dict(type="str", default="auto", choices=["auto", "nvml", "nvidia_smi"]),
    probe_timeout=dict(type="float", default=10.0),
    kernel_log_source=dict(type="str", default="auto", choices=["auto", "journal", "dmesg", "file", "none"]),
    kernel_log_path=dict(type="path"),
    kernel_log_window=dict(type="int"),
    ghost_threshold_mib=dict(type="int", default=256),
    xid_policy=dict(type="dict", default={}),
)

ACTION_ARGUMENT_SPEC = dict(
    journal_path=dict(type="path"),
    lock_timeout=dict(type="float", default=60.0),
    run_id=dict(type="str"),
)

KILL_ARGUMENT_SPEC = dict(
    signals=dict(type="list", elements="str", default=["TERM", "KILL"]),
    grace=dict(type="float", default=10.0),
    kill_grace=dict(type="float", default=KILL_GRACE),
    containers=dict(type="str", choices=["stop", "kill", "skip"], default="stop"),
    protect_names=dict(type="list", elements="str", default=[]),
    protect_users=dict(type="list", elements="str", default=[]),
    protect_units=dict(type="list", elements="str", default=[]),
    allow_display=dict(type="bool", default=False),
    allow_daemons=dict(type="bool", default=False),
    reap_zombies=dict(type="bool", default=True),
    allow_parent_termination=dict(type="bool", default=False),
    thaw_frozen=dict(type="bool", default=False),
    end_running_jobs=dict(type="bool", default=False),
)


def validate_snapshot_params(module):
    """Fail before anything runs when an option is out of range, naming it and its value."""
    params = module.params
    if not within("probe_timeout", params["probe_timeout"]):
        module.fail_json(msg="probe_timeout must be greater than 0, got %r" % params["probe_timeout"])
    if params["kernel_log_window"] is not None and not within("kernel_log_window", params["kernel_log_window"]):
        module.fail_json(msg="kernel_log_window must be a positive number of minutes, got %r" % params["kernel_log_window"])
    if not within("ghost_threshold_mib", params["ghost_threshold_mib"]):
        module.fail_json(msg="ghost_threshold_mib must be 0 or more, got %r" % params["ghost_threshold_mib"])
    try:
        parse_policy(params.get("xid_policy"))
    except PolicyError as exc:
        module.fail_json(msg=str(exc))
    if params["kernel_log_source"] == "file" and not params["kernel_log_path"]:
        module.fail_json(msg="kernel_log_source=file needs kernel_log_path")
    if params["kernel_log_path"] and params["kernel_log_source"] not in ("file", "auto"):
        module.fail_json(msg="kernel_log_path is only used with kernel_log_source=file, got kernel_log_source=%s" % params["kernel_log_source"])


def check_kill_options(module):
    """Fail, naming the option and the value, before anything is signalled: the kill options alone (on the node,
    validate_kill_params also resolves every protect entry there)."""
    # Imported here: the modules that end nothing (gpu_holders_info) share this file and never need them.
    from ansible_collections.gpuops.remediation.plugins.module_utils.kill._protect_entries import (  # pylint: disable=import-outside-toplevel
        ProtectEntryError, check_entries)
    from ansible_collections.gpuops.remediation.plugins.module_utils.kill._terminate import signal_number  # pylint: disable=import-outside-toplevel

    params = module.params
    if params.get("kill_grace") is not None and not within("kill_grace", params["kill_grace"]):
        module.fail_json(msg="kill_grace must be more than 0 seconds, got %r: it is how long a process gets to be gone after "
                             "SIGKILL" % params["kill_grace"])
    if not within("grace", params["grace"]):
        module.fail_json(msg="grace must be more than 0 seconds, got %r: a process needs time to exit after a signal "
                             "(to end processes at once, set signals=[KILL])" % params["grace"])
    if not params["signals"]:
        module.fail_json(msg="signals must name at least one signal, got []")
    for name in params["signals"]:
        try:
            signal_number(name)
        except (AttributeError, ValueError):
            module.fail_json(msg="signals: %r is not a signal name (TERM, INT, KILL, ...)" % name)
    try:
        check_entries(params)
    except ProtectEntryError as exc:
        module.fail_json(msg=str(exc))
