# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The options the node modules share (the snapshot's, the journal's and lock's, the kill's), as plain data.

The ladder walk passes these options through to the modules it runs and checks them on the controller: it reads them
here, without importing the snapshot, the lock and the kill code that each of the controller's forks would compile.
"""

from __future__ import annotations

# Seconds a process gets to be gone after SIGKILL (the kill_grace option's default): the driver's teardown of a CUDA
# context, in uninterruptible sleep, can take tens of seconds on a large GPU; only after this is it "outlived SIGKILL".
KILL_GRACE = 30.0

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
