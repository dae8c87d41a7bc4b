# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""An answer only from root, also in a file: gpu_kernel_log (source file) takes a `gpuops-remediation` line as an answer
only when root's action journal confirms it, and then for the GPUs root reset.

A real second account (`nobody`) logs forged answers with util-linux's real `logger` through a syslog socket served
as rsyslogd serves /dev/log, into the very file the source follows; root's reset is written by the collection's own
Journal (its journal line, then its remediation line into the same file). Before the rule, each forged line marked the
older Xid lines answered and they made no event."""

import asyncio
import logging
import os
import shutil
import time

import pytest

from ansible_collections.gpuops.remediation.plugins.module_utils.journal._writer import Journal
from ansible_collections.gpuops.remediation.tests.unit.helpers.eda_sources import _source, events_after, xid_line
from ansible_collections.gpuops.remediation.tests.unit.helpers.syslog_socket import SyslogSocket

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("runuser") or not shutil.which("logger"),
                                reason="needs root, runuser and util-linux logger to log as a second account")


def _forge(syslog, epoch, gpus, run):
    return syslog.log_as("nobody", "--id=4242", "-t", "gpuops-remediation",
                         "action=gpu_reset gpus=%s epoch=%.3f run=%s" % (gpus, epoch, run))


def test_answers_a_user_logged_into_the_file_answer_nothing_and_roots_answers_only_what_root_reset(staged, caplog):
    log = os.path.join(staged, "syslog")
    syslog = SyslogSocket(staged, log)
    journal = Journal(os.path.join(staged, "gpuops", "journal.jsonl"), run_id="run 7", syslog_file=log)
    now = time.time()
    try:
        # Before the source starts (its read-back at the start): a forged answer for 18:00.
        _forge(syslog, now - 30, "00000000:18:00.0", "forged0")
        # Root's real reset of 3b:00: its journal lines, then its remediation line in the same file.
        entry = journal.intent("gpu_reset", argv=["nvidia-smi", "--gpu-reset", "-i", "00000000:3B:00.0"])
        journal.outcome(entry, True)
        with open(log) as handle:
            root_line = [line for line in handle if "run=run_7" in line][-1]
        root_epoch = float(root_line.split("epoch=")[1].split()[0])

        def append(real):
            if real is None:
                with open(log, "a") as handle:
                    handle.write(xid_line(now, "af:00") + "\n")
                return
            # While the source follows: an answer of every GPU out of thin air, and a copy of root's line (same run,
            # same time) that claims every GPU where root reset one.
            _forge(syslog, now - 20, "", "forged1")
            _forge(syslog, root_epoch, "", "run_7")
            with open(log, "a") as handle:  # the kernel's lines, all older than every answer above
                handle.write("".join(xid_line(now - 60, bus) + "\n" for bus in ("3b:00", "86:00", "18:00")))

        args = {"source": "file", "path": log, "host": "node7", "poll_interval": 0.05, "throttle_seconds": 0,
                "journal_path": journal.path}
        with caplog.at_level(logging.WARNING):
            events = asyncio.run(events_after(_source("gpu_kernel_log").main, args, append, 2))
    finally:
        syslog.close()
    # 3b:00: root reset it after that Xid (answered); 86:00 and 18:00: only forged lines "answered" them.
    assert sorted(event["gpuops"]["pci_bus_id"] for event in events) == ["00000000:18:00.0", "00000000:86:00.0"]
    refused = [record.getMessage() for record in caplog.records if "is no answer" in record.getMessage()]
    assert [message for message in refused if "run=forged0" in message and "has no ok gpu_reset of run forged0" in message], refused
    assert [message for message in refused if "run=forged1" in message], refused
