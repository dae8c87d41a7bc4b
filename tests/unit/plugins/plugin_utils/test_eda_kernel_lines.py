# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_kernel_log: whose line it is (NVRM words in another program's message are no event, the kernel's lines in
every head are), lines dated before the start, and a log renamed into place after the start."""

import asyncio
import os
import time

import pytest

from ansible_collections.gpuops.remediation.tests.unit.helpers.eda_sources import _source


# ---------------------------------------------------------------- kernel lines: whose line is it

XID_TEXT = "NVRM: Xid (PCI:0000:3b:00): 79, pid=<unknown>, GPU has fallen off the bus."


@pytest.mark.parametrize("line", [
    "2026-11-30T10:00:00+00:00 node7 alice: " + XID_TEXT,  # logger "NVRM: ...": tagged with the user's name
    "Nov 30 10:00:00 node7 sshd[912]: Invalid user " + XID_TEXT,  # a name sent by anyone who can reach sshd
    "Nov 30 10:00:00 node7 sshd[912]: Invalid user kernel: " + XID_TEXT,
    "2026-11-30T10:00:00+00:00 node7 myapp[1]: kernel: " + XID_TEXT,
    "2026-11-30T10:00:00+00:00 node7 nginx: GET /?q=kernel: " + XID_TEXT,
])
def test_nvrm_words_in_another_programs_message_are_no_event(line):
    """The parser finds "NVRM:" anywhere in a line: in /var/log/syslog any program's message holding the words - a user's
    `logger`, a user name tried on sshd - was an Xid 79 of the node (a drain and a reboot request). Only a line whose tag
    is the kernel's is one (`logger -t kernel` still passes in a file: docs/eda.md says to use journal or kmsg)."""
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda._source_shared import Throttle
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda._kernel_log_source import KernelLines

    lines_of = KernelLines("node7", {}, Throttle(0))
    assert lines_of.feed([line], 1796032800.0) == []
    assert lines_of.dropped == [{"line": line, "why": "not the kernel's line (its tag is another program's)"}]


@pytest.mark.parametrize("line", [
    XID_TEXT,  # dmesg without a time
    "[ 1843.308145] " + XID_TEXT,  # dmesg, /dev/kmsg as kmsg_line prints it
    "[Mon Nov 30 10:00:00 2026] " + XID_TEXT,  # dmesg -T
    "Nov 30 10:00:00 node7 kernel: " + XID_TEXT,  # syslog, journalctl short
    "Nov  3 10:00:00 node7 kernel: [ 1843.308145] " + XID_TEXT,
    "2026-11-30T10:00:00.123456+00:00 node7 kernel: " + XID_TEXT,  # rsyslog RFC 3339, journalctl short-iso
    "[  1843.308145] node7 kernel: " + XID_TEXT,  # journalctl short-monotonic
    "Mon 2026-11-30 10:00:00 UTC node7 kernel: " + XID_TEXT,  # journalctl short-full
    "1796032800.123456 node7 kernel: " + XID_TEXT,  # journalctl short-unix
])
def test_the_kernels_lines_in_every_head_are_events(line):
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda._source_shared import Throttle
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda._kernel_log_source import KernelLines

    events = KernelLines("node7", {}, Throttle(0)).feed([line], 1796032800.0)
    assert [(event["gpuops"]["xid"], event["gpuops"]["gpu"], event["gpuops"]["rung"]) for event in events] == [
        (79, "00000000:3B:00.0", "reboot")]


def test_the_words_of_a_remediation_line_in_another_programs_message_answer_nothing():
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda._kernel_log_source import remediation_of

    fields = "host=node7 action=gpu_reset gpus= epoch=1796032800.0 run=r"
    assert remediation_of("2026-11-30T10:00:00+00:00 node7 gpuops-remediation[42]: " + fields, "node7")["run"] == "r"
    assert remediation_of("Nov 30 10:00:00 node7 gpuops-remediation: " + fields, "node7")["run"] == "r"
    for forged in ("2026-11-30T10:00:00+00:00 node7 alice: gpuops-remediation: ",
                   "Nov 30 10:00:00 node7 sshd[9]: Invalid user gpuops-remediation: ",
                   "2026-11-30T10:00:00+00:00 node7 xgpuops-remediation[1]: "):
        assert remediation_of(forged + fields, "node7") is None, forged


# ---------------------------------------------------------------- old Xids in a log that appears after the start

def _dated(epoch, xid=119, host="node7"):
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(epoch))
    return "%s %s kernel: NVRM: Xid (PCI:0000:3b:00): %d, pid='<unknown>', name=<unknown>, Timeout" % (stamp, host, xid)


def test_a_line_dated_before_the_start_in_a_file_read_from_its_start_is_no_event():
    """review20: a log file read from its start (it appeared, or replaced the one followed) replayed the Xids it held
    from long ago. Given since, a line dated before it by more than the clock skew is old; within the skew (a node's
    clock a little behind) it is still an event; without since (lines appended after the start) every line counts."""
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda._source_shared import Throttle
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda._kernel_log_source import CLOCK_SKEW_SECONDS, KernelLines

    started = 1796032800.0
    lines_of = KernelLines("node7", {}, Throttle(0))
    old, behind, fresh = _dated(started - 330 * 86400, 79), _dated(started - CLOCK_SKEW_SECONDS + 10, 119), _dated(started + 5, 48)
    events = lines_of.feed([old, behind, fresh], started + 10, since=started)
    assert [event["gpuops"]["xid"] for event in events] == [119, 48]
    assert [(item["event"]["xid"], item["why"]) for item in lines_of.dropped] == [
        (79, "dated before the source started, in a file read from its start")]
    assert [event["gpuops"]["xid"] for event in KernelLines("node7", {}, Throttle(0)).feed([old], started + 10)] == [79]


def test_the_file_source_on_a_log_renamed_into_place_after_its_start_gives_only_the_new_lines(tmp_path):
    """The real source (gpu_kernel_log, file mode) on a path missing at its start: a file holding an Xid from January
    and one from now is renamed there. Only the new one is an event; a line appended after it is one too."""
    module = _source("gpu_kernel_log")
    path = str(tmp_path / "kernel.log")
    staged = str(tmp_path / "kernel.log.new")

    async def run():
        queue = asyncio.Queue()
        args = {"source": "file", "path": path, "host": "node7", "poll_interval": 0.05, "throttle_seconds": 0}
        task = asyncio.ensure_future(module.main(queue, args))
        try:
            await asyncio.sleep(0)  # the source runs up to its first wait: its FileTail is made, the path missing
            assert not task.done()
            now = time.time()
            with open(staged, "w") as handle:
                handle.write(_dated(now - 330 * 86400, 79) + "\n" + _dated(now, 119) + "\n")
            os.rename(staged, path)
            first = await asyncio.wait_for(queue.get(), 30)
            with open(path, "a") as handle:
                handle.write(_dated(time.time(), 48) + "\n")
            second = await asyncio.wait_for(queue.get(), 30)
            return first, second, queue.qsize()
        finally:
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    first, second, left = asyncio.run(run())
    assert (first["gpuops"]["xid"], second["gpuops"]["xid"], left) == (119, 48, 0)
