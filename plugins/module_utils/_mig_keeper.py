# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Keep a node's MIG layout across a GPU reset or a driver reload: record it in the journal (the intent `mig_layout`,
with the layout) before, create what is missing of it after (each command journalled as `mig_create`), read it back, and
write the outcome (`ok` only when nothing is missing). An intent left without an ok outcome is a layout an interrupted
run never restored: the next run that acts on the node restores it (Remediation.acting). What to create is decided by
_mig_layout.restore_steps alone."""

from __future__ import annotations

from ansible_collections.gpuops.remediation.plugins.module_utils._command import CommandRunner
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._deadline import ProbeFailed, ProbeTimeout
from ansible_collections.gpuops.remediation.plugins.module_utils._mig_layout import (
    build_layout, create_argv, create_ci_argv, created_gi, describe, follow_gpus, mig_gpus, pending_mig_change, placement_mismatches,
    restore_steps,
)
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._mig_instances import RC_NOT_FOUND, parse_lci, parse_lgi, unlisted_words

ACTION = "mig_layout"

# nvidia-smi's exit code when a GPU has fallen off the bus (GPU is lost): it still lists every other GPU, and the lost
# one's absence from the list is what follow_gpus reports.
RC_GPU_LOST = 15


_BOOT_ID_CHARS = frozenset("0123456789abcdef-")


def read_boot_id(layout):
    """The kernel's id of the current boot (a UUID), or None when it cannot be read as one."""
    try:
        with open(layout.boot_id_file) as handle:
            text = handle.read(64).strip()
    except (IOError, OSError):
        return None
    return text if len(text) == 36 and set(text) <= _BOOT_ID_CHARS else None


def lost_by_reboot(recorded_boot_id, boot_id_now):
    """Whether a layout recorded for a reboot may have been lost since: unless the node is known to be in the very boot
    it was recorded in (the reboot never came: a run that died before it, a reboot task that failed). Creating it again
    then would bring back instances the operator may have removed on purpose since."""
    return recorded_boot_id is None or boot_id_now is None or recorded_boot_id != boot_id_now


class MigLayoutError(Exception):
    """The layout could not be read: nothing that would lose it may go ahead."""


def _last_line(result):
    lines = (result.out or result.err or "").strip().splitlines()
    return lines[-1] if lines else "exit %d" % result.rc


class MigLayoutKeeper:
    """The layout of one set of MIG GPUs, from record() to restore()."""

    def __init__(self, module, layout, journal, gpus=None, uuids=None, unlisted=None):
        self.module = module
        self.unlisted = list(unlisted or [])  # the snapshot's GPUs whose MIG listing failed (mig_listing_error)
        self.gpus = sorted(gpus or [])
        self.uuids = dict((str(index), uuid) for index, uuid in (uuids or {}).items() if uuid)  # each GPU by identity
        self.journal = journal
        self.layout = layout
        self.nvidia_smi = layout.command(module, "nvidia-smi", required=True)
        self.boot_id = None  # the boot a layout recorded for a reboot was recorded in
        self.runner = CommandRunner(module, journal)
        self.recorded = None
        self.entry = None
        self.of = []
        self.of_run = None  # the run whose layout this restores, when it is an interrupted run's

    def read(self, indexes):
        """The layout of the GPUs `indexes` now, from nvidia-smi mig -lgi and -lci; raises MigLayoutError."""
        unlisted = [gpu for gpu in self.unlisted if gpu["index"] in indexes]
        if unlisted:
            # An empty layout recorded, then "restored", would lose the instances the listing did not show.
            raise MigLayoutError("the MIG instances could not be listed (%s)" % unlisted_words(unlisted))
        listings = []
        for verb in ("-lgi", "-lci"):
            try:
                result = self.runner.probe([self.nvidia_smi, "mig", verb], timeout=self.module.params["probe_timeout"])
            except (ProbeTimeout, ProbeFailed) as exc:
                raise MigLayoutError("nvidia-smi mig %s did not answer: %s" % (verb, exc))
            if result.rc not in (0, RC_NOT_FOUND):
                raise MigLayoutError("nvidia-smi mig %s failed (rc %d): %s" % (verb, result.rc, _last_line(result)))
            listings.append(result.out)
        return build_layout(parse_lgi(listings[0]), parse_lci(listings[1]), indexes)

    def record(self, indexes, reboot=False):
        """Read and journal the layout of `indexes` before they lose it (check mode: read only). Returns it. For a
        reboot the record carries the boot it was made in."""
        self.recorded = self.read(indexes)
        extra = {}
        if reboot:
            self.boot_id = read_boot_id(self.layout)
            extra["boot_id"] = self.boot_id
        if not self.module.check_mode:
            self.entry = self.journal.intent(ACTION, gpus=sorted(indexes), layout=self.recorded, uuids=self.uuids, **extra)
        return self.recorded

    def adopt(self, record):
        """Take over the layout an interrupted run recorded (its journal intent): restore() then answers it too."""
        self.recorded = record["layout"]
        self.uuids = record.get("uuids") if isinstance(record.get("uuids"), dict) else {}
        self.of_run = record.get("run_id")
        self.boot_id = record.get("boot_id") if isinstance(record.get("boot_id"), str) else None
        self.of = [record["id"]] + [entry for entry in record.get("of") or [] if isinstance(entry, str)]
        self.entry = self.journal.intent(ACTION, gpus=sorted(int(gpu) for gpu in self.recorded), layout=self.recorded, uuids=self.uuids,
                                         of=self.of)

    def restore(self):
        """Create what is missing of the recorded layout, read it back, journal the outcome. Returns the report:
        {"gpus", "recorded", "now", "created", "missing", "errors", "ok"}; never raises."""
        report = {"gpus": sorted(int(gpu) for gpu in self.recorded), "recorded": self.recorded, "now": None, "created": [],
                  "missing": [], "errors": [], "ok": False, "of_run": self.of_run}
        wanted = self.recorded
        if not lost_by_reboot(self.boot_id, read_boot_id(self.layout)):
            report.update(ok=True, not_rebooted=True)
            if self.entry is not None:
                self.journal.outcome(self.entry, True, missing=[], created=[], of=self.of, not_rebooted=True)
            return report
        try:
            wanted, lost = follow_gpus(self.recorded, self.uuids, self.indexes_now()) if self.uuids else (self.recorded, [])
            report["errors"] += lost
            gpus = sorted(int(gpu) for gpu in wanted)
            for step in restore_steps(wanted, self.read(gpus)):
                self._create(step, report)
            report["now"] = self.read(gpus)
            report["missing"] = [describe(step) for step in restore_steps(wanted, report["now"])] + placement_mismatches(wanted, report["now"])
        except MigLayoutError as exc:
            report["errors"].append(str(exc))
            report["missing"] = [describe(step) for step in restore_steps(wanted, {})]
        report["ok"] = not report["missing"] and not report["errors"]
        if self.entry is not None:
            self.journal.outcome(self.entry, report["ok"], missing=report["missing"], created=report["created"], of=self.of)
        return report

    def indexes_now(self):
        """{uuid: index} of the GPUs the driver lists now (nvidia-smi --query-gpu=index,uuid); raises MigLayoutError."""
        argv = [self.nvidia_smi, "--query-gpu=index,uuid", "--format=csv,noheader"]
        try:
            result = self.runner.probe(argv, timeout=self.module.params["probe_timeout"])
        except (ProbeTimeout, ProbeFailed) as exc:
            raise MigLayoutError("nvidia-smi --query-gpu did not answer: %s" % exc)
        if result.rc not in (0, RC_GPU_LOST):
            raise MigLayoutError("nvidia-smi --query-gpu failed (rc %d): %s" % (result.rc, _last_line(result)))
        found = {}
        for line in result.out.splitlines():
            index, comma, uuid = line.partition(",")
            if comma and index.strip().isdigit():
                found[uuid.strip()] = int(index.strip())
        return found

    def _create(self, step, report):
        gi = step["gi"]
        if gi is None:
            result = self.runner.act(create_argv(self.nvidia_smi, step), "mig_create", keep_stdout=True, gpu=step["gpu"])
            gi = created_gi(result.out) if result.rc == 0 else None
            if gi is None:
                report["errors"].append("%s: %s" % (describe(step), _last_line(result)))
                return
        if step["compute"]:
            result = self.runner.act(create_ci_argv(self.nvidia_smi, step, gi), "mig_create", keep_stdout=True, gpu=step["gpu"])
            if result.rc != 0:
                report["errors"].append("%s: %s" % (describe(step), _last_line(result)))
                return
        report["created"].append(describe(step))


def failure_message(report):
    """Why a restore failed, naming what is missing."""
    return "the MIG layout was not restored: missing %s%s" % (
        "; ".join(report["missing"]) or "nothing", " (%s)" % "; ".join(report["errors"]) if report["errors"] else "")


def restore_left_layout(module, layout, journal, record):
    """Restore the layout an interrupted run recorded (journal intent `record`); the report as restore() gives it."""
    keeper = MigLayoutKeeper(module, layout, journal)
    keeper.adopt(record)
    return keeper.restore()


def restore_plan(module, layout, journal, record):
    """Check mode's report of the restore of `record` (a journal intent `mig_layout`): what is missing of it now, which
    the real run would create; writes nothing."""
    keeper = MigLayoutKeeper(module, layout, journal, uuids=record.get("uuids") if isinstance(record.get("uuids"), dict) else {})
    recorded_boot = record.get("boot_id") if isinstance(record.get("boot_id"), str) else None
    if not lost_by_reboot(recorded_boot, read_boot_id(layout)):
        return {"gpus": sorted(int(gpu) for gpu in record["layout"]), "recorded": record["layout"], "would_restore": [], "errors": [],
                "not_rebooted": True}
    wanted, lost = follow_gpus(record["layout"], keeper.uuids, keeper.indexes_now()) if keeper.uuids else (record["layout"], [])
    steps = restore_steps(wanted, keeper.read(sorted(int(gpu) for gpu in wanted)))
    return {"gpus": sorted(int(gpu) for gpu in wanted), "recorded": record["layout"], "would_restore": [describe(step) for step in steps],
            "errors": lost}


def keeper_for(module, layout, journal, snapshot, indexes):
    """A MigLayoutKeeper of the GPUs among `indexes` with MIG mode on (a reset or reload loses their instances), or None."""
    gpus = mig_gpus(snapshot, set(indexes))
    uuids = dict((gpu["index"], gpu.get("uuid")) for gpu in snapshot["gpus"] if gpu["index"] in gpus)
    unlisted = [gpu for gpu in snapshot["gpus"] if gpu["index"] in gpus and gpu.get("mig_listing_error")]
    return MigLayoutKeeper(module, layout, journal, gpus, uuids, unlisted) if gpus else None


def planned(keeper):
    """Check mode's report: the layout read now, which the run would record and create again after the rung."""
    recorded = keeper.record(keeper.gpus)
    return {"gpus": keeper.gpus, "recorded": recorded, "would_restore": [describe(step) for step in restore_steps(recorded, {})]}


def restore_into(keeper, result):
    """After the rung: keeper's recorded layout restored (when it recorded one), its report put in the module result as
    `mig_layout`; a failure adds to result["error"], naming what is missing. Returns the report, or None."""
    if keeper is None or keeper.entry is None:
        return None
    report = keeper.restore()
    result["mig_layout"] = report
    result["changed"] = result.get("changed") or bool(report["created"])
    if not report["ok"]:
        result["error"] = "; ".join(part for part in (result.get("error"), failure_message(report)) if part)
    return report


def refuse_pending(module, snapshot, what):
    """Fail the module, changing nothing, when a GPU's MIG mode change is pending: `what` (a driver reload) would reset
    it and so apply the change as a side effect."""
    pending = ["GPU %s: %s" % (gpu["index"], pending_mig_change(gpu)) for gpu in snapshot["gpus"] if pending_mig_change(gpu)]
    if pending:
        module.fail_json(msg="%s refused: it resets every GPU, and %s; apply the change on purpose (nvidia-smi --gpu-reset, "
                             "when its jobs allow) first" % (what, "; ".join(pending)), changed=False)
