# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What every remediation module shares: the node lock, the journal, the snapshot before and after."""

from __future__ import annotations

import contextlib
import signal

from ansible_collections.gpuops.remediation.plugins.module_utils.probes._gpu_probe import probe_gpus
from ansible_collections.gpuops.remediation.plugins.module_utils.journal._files import path_failure
from ansible_collections.gpuops.remediation.plugins.module_utils.journal._writer import Journal, JournalUnwritable
from ansible_collections.gpuops.remediation.plugins.module_utils.journal._reader import recent_records
from ansible_collections.gpuops.remediation.plugins.module_utils.journal._evidence import left_isolated, left_stopped, left_unrestored_layouts, unfinished
from ansible_collections.gpuops.remediation.plugins.module_utils._lock import LockTimeout, NodeLock
from ansible_collections.gpuops.remediation.plugins.module_utils._mig_keeper import failure_message, restore_left_layout
from ansible_collections.gpuops.remediation.plugins.module_utils._node import current_layout
from ansible_collections.gpuops.remediation.plugins.module_utils._services import GpuServices
from ansible_collections.gpuops.remediation.plugins.module_utils._argument_specs import ACTION_ARGUMENT_SPEC, SNAPSHOT_ARGUMENT_SPEC, validate_snapshot_params
from ansible_collections.gpuops.remediation.plugins.module_utils._snapshot import (
    SnapshotOptions, UnknownGpu, select_gpus, snapshot_or_fail, unknown_gpu_message,
)


def action_argument_spec(**module_options):
    spec = dict(SNAPSHOT_ARGUMENT_SPEC)
    spec.update(ACTION_ARGUMENT_SPEC)
    spec.update(module_options)
    return spec


def memory_before_after(before, after):
    """Used memory per GPU of the snapshot `before`, and of the snapshot `after` (None: not taken, the values null)."""
    after_gpus = dict((gpu["index"], gpu) for gpu in (after or {}).get("gpus", []))
    return [{"index": gpu["index"], "memory_used_mib_before": gpu.get("memory_used_mib"),
             "memory_used_mib_after": after_gpus.get(gpu["index"], {}).get("memory_used_mib")} for gpu in before["gpus"]]


class _ImportOutlasted(Exception):
    """nvidia-ml-py's import in the module's own process outlasted the probe deadline."""


def import_nvml_before_forks(backend, deadline):
    """nvidia-ml-py's Python module imported once in the module's own process, before its first probe child forks:
    every probe child of the run (each snapshot's, each driver view a wait polls) inherits it instead of importing it
    again, a third of what such a child costs. The import loads no library and binds nothing: nvmlInit loads
    libnvidia-ml and load_nvml binds a simulated node's, in the child, under the probe's deadline.

    The import itself is bounded by the probe's deadline too (`deadline` seconds): an import that hangs, fails or ends
    the interpreter (SystemExit) is given up here and left to the probe's child, which reports it under its deadline,
    as before."""
    if backend not in ("nvml", "auto"):
        return
    armed = [True]

    def outlasted(signum, frame):
        if armed[0]:  # an alarm handled once the import is over must not raise outside the try below
            raise _ImportOutlasted()

    previous = signal.signal(signal.SIGALRM, outlasted)
    try:
        signal.setitimer(signal.ITIMER_REAL, deadline)
        try:
            import pynvml  # noqa: F401  pylint: disable=import-error,unused-import,import-outside-toplevel
        finally:
            armed[0] = False
            signal.setitimer(signal.ITIMER_REAL, 0)
    except KeyboardInterrupt:
        raise
    except BaseException:  # pylint: disable=broad-exception-caught
        pass
    finally:
        signal.signal(signal.SIGALRM, previous)


class Interrupted(Exception):
    """A signal asked the module to stop."""


@contextlib.contextmanager
def _signals_raise():
    def _raise(signum, frame):  # pylint: disable=unused-argument
        raise Interrupted(signal.Signals(signum).name)

    previous = dict((signum, signal.signal(signum, _raise)) for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT))
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


class Remediation:
    """One remediation run on this node."""

    restored = None
    # The probes of the last snapshot (SnapshotOptions.probed): a HolderKiller planning from it under the lock reuses them.
    probed = None

    def __init__(self, module):
        self.module = module
        self.layout = current_layout()
        params = module.params
        validate_snapshot_params(module)
        if params["lock_timeout"] < 0:
            module.fail_json(msg="lock_timeout must be 0 or more seconds, got %r" % params["lock_timeout"])
        import_nvml_before_forks(params["backend"], params["probe_timeout"])
        self.journal = Journal(params["journal_path"] or self.layout.journal_file, run_id=params["run_id"],
                               syslog_file=self.layout.syslog_file)
        self._check_journal_path()

    def _check_journal_path(self):
        """Fail naming journal_path and its value when the journal could not be written there (_journal.path_failure)."""
        failure = path_failure(self.journal.path, bool(self.module.params["journal_path"]))
        if failure:
            self.module.fail_json(msg=failure, changed=False)

    def snapshot(self, **overrides):
        """The snapshot an action plans from or reports after: every memory map is read, since a destructive rung is
        about to run (or has just run) and a holder missed there is one left holding the GPU."""
        options = SnapshotOptions.from_params(self.module.params)
        options.scan_memory_maps = "acting"
        for name, value in overrides.items():
            setattr(options, name, value)
        snapshot = snapshot_or_fail(self.module, self.layout, options)
        self.probed = options.probed
        return snapshot

    def snapshot_after(self, latest):
        """What a module returns as `snapshot_after`: the node after it acted, as gpu_holders_info with the same
        options sees it. `latest` serves as it is when it was taken with the module's gpus option (a snapshot of every
        GPU when the option was left out); otherwise the node is inspected again with it."""
        if self.module.check_mode:
            return None
        gpus = self.module.params["gpus"]
        if gpus is None or (latest is not None and latest["scope"]["gpus"] == list(gpus)):
            return latest
        return self.snapshot()

    def driver_view(self):
        """{"gpus": [...]}: the driver's GPUs and the processes it lists, alone (NVML or nvidia-smi under the probe deadline,
        no /proc scan, no kernel log): what a wait for processes to leave polls. None when the driver did not answer (a
        driver that lists no process and one that says nothing are not the same)."""
        params = self.module.params
        result, report = probe_gpus(self.module, self.layout, params["backend"], params["probe_timeout"])
        return {"gpus": result.get("gpus") or []} if result and report["ok"] else None

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
        and waits for nobody). Planning under the lock means a run that waited sees the node as the other one left it.

        Under the lock, first what an interrupted run left stopped is started again (the journal says what). A TERM,
        HUP or INT (the play stopped, the connection cut) raises in the module, so that its `finally` blocks start again
        what it stopped; then the module fails, saying so.
        """
        if self.module.check_mode:
            # Reads nothing it would act on, but refuses a journal the real run would refuse (_journal_or_fail).
            self._journal_or_fail()
            yield
            return
        with self.locked(), _signals_raise():
            try:
                self._start_left_stopped()
                yield
            except Interrupted as exc:
                self.module.fail_json(msg="interrupted by %s; what this run had stopped was started again (see journal)" % exc,
                                      changed=True, journal=self.journal.entries())
            except JournalUnwritable as exc:
                # Every action is journalled before it is done: nothing was done since the last line that was written.
                self.module.fail_json(msg=str(exc), changed=bool(self.journal.entries()), journal=self.journal.entries())

    def report_restored(self, result):
        """Put into a module result what acting() found of an interrupted run, and what it started again."""
        if self.restored:
            result["interrupted_actions"] = self.restored["interrupted"]
            result["restored_units"] = self.restored["units"]
            if self.restored["target"]:
                result["restored_target"] = self.restored["target"]
            result["changed"] = result.get("changed") or bool(self.restored["units"] or self.restored["target"])
            if self.restored["errors"]:
                result.setdefault("service_errors", []).extend(self.restored["errors"])
            layouts = self.restored["mig_layouts"]
            if layouts:
                result["restored_mig_layouts"] = layouts
                result["changed"] = result["changed"] or any(report["created"] for report in layouts)
                failed = "; ".join(failure_message(report) for report in layouts if not report["ok"])
                if failed:
                    result["error"] = "; ".join(part for part in (result.get("error"), failed) if part)

    def _journal_or_fail(self):
        """The journal's recent records; what an interrupted run left stopped is known only from them, so a journal
        that cannot be read or believed (_safe_files.read_trusted: another user's file, a link) fails the module."""
        records, error = recent_records(self.journal.path)
        if error:
            self.module.fail_json(msg=error, changed=False)
        return records

    def _start_left_stopped(self):
        """Under the lock no other run acts: an intent without its outcome is a run that died mid-action."""
        records = self._journal_or_fail()
        dead = [record for record in unfinished(records) if record.get("run_id") != self.journal.run_id]
        units = left_stopped(records, run_id=self.journal.run_id)
        target = left_isolated(records, run_id=self.journal.run_id)
        layouts = left_unrestored_layouts(records, run_id=self.journal.run_id)
        if not (dead or units or target or layouts):
            return
        interrupted = [dict((key, record[key]) for key in ("ts", "run_id", "action", "unit", "target", "gpu") if key in record)
                       for record in dead]
        for record in dead:
            self.journal.close_interrupted(record)
        services = GpuServices(self.module, self.layout, self.journal)
        started, errors = services.start_left_stopped(units) if units else ([], [])
        isolated, isolate_errors = services.isolate_back(target) if target else (None, [])
        self.restored = {"interrupted": interrupted, "units": started, "target": isolated, "errors": errors + isolate_errors,
                         "mig_layouts": [restore_left_layout(self.module, self.layout, self.journal, record) for record in layouts]}

    def locked(self):
        """Hold the node lock; a run that cannot get it in lock_timeout fails, naming who holds it."""
        return node_locked(self.module, self.layout)


@contextlib.contextmanager
def node_locked(module, layout):
    """Hold the node lock of layout; a module that cannot get it in its lock_timeout fails, naming who holds it."""
    lock = NodeLock(layout.lock_file, module.params["lock_timeout"])
    try:
        lock.acquire()
    except LockTimeout as exc:
        module.fail_json(msg=str(exc), changed=False)
    try:
        yield
    finally:
        lock.release()
