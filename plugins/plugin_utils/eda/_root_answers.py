# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""An answer read from a log file, confirmed by what root wrote.

A file line cannot say who wrote it: any user can log `logger -t gpuops-remediation "action=gpu_reset gpus= ..."`, and
the syslog daemon writes it into /var/log/syslog just as it writes root's. So a remediation line read from a file is an
answer only when root's own record of it agrees: an ok outcome of the same action, run and time in the collection's
action journal (root's file, read through _safe_files.read_trusted: never through a link, never a file others can
write). The answer is then taken as root's record has it (its GPUs), never as the line says.
"""

from __future__ import annotations

import logging
import os
import re

from ansible_collections.gpuops.remediation.plugins.module_utils.journal._files import journal_epoch, rotated_paths
from ansible_collections.gpuops.remediation.plugins.module_utils.journal._reader import recent_records
from ansible_collections.gpuops.remediation.plugins.module_utils.journal._writer import ANSWERING_ACTIONS, _reset_bus_ids
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._kernel_log import device_key

LOGGER = logging.getLogger(__name__)


def answer_key(action, run, epoch):
    """What a remediation line and root's journal record must share: the action, the run id as the line writes it
    (blanks as "_") and the outcome's time to the millisecond (the line's "%.3f")."""
    return (action, re.sub(r"\s+", "_", str(run)), "%.3f" % epoch)


def journal_answers(records):
    """{answer_key: [bus ids]} of the ok outcomes of answering actions in journal records (Journal.outcome writes a
    remediation line for each of them, and only for them)."""
    intents, answers = {}, {}
    for record in records:
        if record.get("phase") == "intent":
            intents[record["id"]] = record
            continue
        intent = intents.get(record["id"])
        epoch = journal_epoch(record.get("ts"))
        if record.get("phase") != "outcome" or record.get("ok") is not True or intent is None or epoch is None \
                or record.get("action") not in ANSWERING_ACTIONS or intent.get("action") != record.get("action"):
            continue
        answers[answer_key(record["action"], record.get("run_id"), epoch)] = _reset_bus_ids(intent.get("argv"))
    return answers


class RootAnswers:
    """confirmed(remediation) for the lines of a log file: root's version of the answer, or None and why not. The
    journal is read again only when one of its two newest files changed (a user flooding forged lines costs no reads)."""

    def __init__(self, journal_path):
        self.path = journal_path
        self._seen = None
        self._answers = {}
        self._error = None

    def _signature(self):
        signature = []
        for path in rotated_paths(self.path)[:2]:
            try:
                info = os.stat(path)
            except OSError:
                signature.append(None)
                continue
            signature.append((info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns))
        return tuple(signature)

    def _load(self):
        signature = self._signature()
        if signature != self._seen:
            records, self._error = recent_records(self.path)
            self._answers, self._seen = journal_answers(records), signature

    def confirmed(self, remediation, host):
        """(the answer as root recorded it, for `host`, or None; why not, or None)."""
        if remediation.get("epoch") is None:
            return None, "it has no time"
        self._load()
        key = answer_key(remediation.get("action"), remediation.get("run"), remediation["epoch"])
        bus_ids = self._answers.get(key)
        if bus_ids is not None:
            return {"host": host, "action": key[0], "gpus": [device_key(bus) for bus in bus_ids if device_key(bus)],
                    "epoch": remediation["epoch"], "run": key[1]}, None
        why = "root's action journal %s %s" % (
            self.path, "cannot be read (%s)" % self._error if self._error else "has no ok %s of run %s at %s" % key)
        LOGGER.warning("gpu_kernel_log: %s: a gpuops-remediation line (action=%s run=%s epoch=%s) is no answer, its evidence "
                       "stays unanswered: %s", host, key[0], key[1], key[2], why)
        return None, "a remediation line root did not write (%s): no answer" % why
