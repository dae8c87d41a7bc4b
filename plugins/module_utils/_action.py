# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What every remediation module shares: the node lock, the journal, the snapshot before and after."""

from __future__ import annotations

import contextlib
import os

from ansible_collections.gpuops.remediation.plugins.module_utils._journal import Journal
from ansible_collections.gpuops.remediation.plugins.module_utils._lock import LockTimeout, NodeLock
from ansible_collections.gpuops.remediation.plugins.module_utils._node import current_layout
from ansible_collections.gpuops.remediation.plugins.module_utils._snapshot import (
    SNAPSHOT_ARGUMENT_SPEC, SnapshotOptions, UnknownGpu, select_gpus, snapshot_or_fail, unknown_gpu_message, validate_snapshot_params,
)

ACTION_ARGUMENT_SPEC = dict(
    journal_path=dict(type="path"),
    lock_timeout=dict(type="float", default=60.0),
    run_id=dict(type="str"),
)


def action_argument_spec(**module_options):
    spec = dict(SNAPSHOT_ARGUMENT_SPEC)
    spec.update(ACTION_ARGUMENT_SPEC)
    spec.update(module_options)
    return spec


class Remediation:
    """One remediation run on this node."""

    def __init__(self, module):
        self.module = module
        self.layout = current_layout()
        params = module.params
        validate_snapshot_params(module)
        if params["lock_timeout"] < 0:
            module.fail_json(msg="lock_timeout must be 0 or more seconds, got %r" % params["lock_timeout"])
        self.journal = Journal(params["journal_path"] or self.layout.journal_file, run_id=params["run_id"])
        self._check_journal_path()

    def _check_journal_path(self):
        """Fail naming journal_path when its directory could not be made or written. Only looks: the directory is made
        by the first line written, so a run that does nothing creates nothing."""
        path = self.journal.path
        parent = os.path.dirname(os.path.abspath(path))
        existing = parent
        while not os.path.isdir(existing):
            if os.path.lexists(existing):
                break
            existing = os.path.dirname(existing)
        problem = None
        if not os.path.isdir(existing):
            problem = "%s is not a directory" % existing
        elif not os.access(existing, os.W_OK | os.X_OK):
            problem = "%s is not writable" % existing
        elif os.path.isdir(path):
            problem = "it is a directory"
        elif os.path.exists(path) and not os.access(path, os.W_OK):
            problem = "it is not writable"
        if problem:
            given = "journal_path" if self.module.params["journal_path"] else "journal_path (default)"
            self.module.fail_json(msg="%s: %r cannot be written: %s" % (given, path, problem), changed=False)

    def snapshot(self, **overrides):
        options = SnapshotOptions.from_params(self.module.params)
        for name, value in overrides.items():
            setattr(options, name, value)
        return snapshot_or_fail(self.module, self.layout, options)

    def selected_gpus(self, snapshot):
        """Indexes of the GPUs the gpus option names, among those of a whole-node snapshot."""
        try:
            return select_gpus(snapshot["gpus"], self.module.params["gpus"])
        except UnknownGpu as exc:
            self.module.fail_json(msg=unknown_gpu_message(exc))
        return None

    @contextlib.contextmanager
    def acting(self):
        """Around the snapshot, the plan and the action: the node lock, except in check mode (which changes nothing
        and waits for nobody). Planning under the lock means a run that waited sees the node as the other one left it."""
        if self.module.check_mode:
            yield
        else:
            with self.locked():
                yield

    @contextlib.contextmanager
    def locked(self):
        """Hold the node lock; a run that cannot get it in lock_timeout fails, naming who holds it."""
        lock = NodeLock(self.layout.lock_file, self.module.params["lock_timeout"])
        try:
            lock.acquire()
        except LockTimeout as exc:
            self.module.fail_json(msg=str(exc), changed=False)
        try:
            yield
        finally:
            lock.release()
