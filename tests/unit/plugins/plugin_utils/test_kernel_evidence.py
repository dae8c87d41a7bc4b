# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kernel evidence only from the kernel: one rule (_kernel_log.kernel_line) for every reader of kernel lines.

The forged lines are written by a real second account (`nobody`) with util-linux's real `logger`, through a syslog
socket this test serves as rsyslogd does (it writes what it receives after the time and the host, as a syslog file
holds it); the kernel's own lines are the captures of real machines in fixtures/kernel-xid. The modules read the file
through Ansible (gpu_holders_info, gpu_watch), in check mode too.
"""

from __future__ import annotations

import glob
import os
import shutil
import threading

import pytest

from ansible_collections.gpuops.remediation.plugins.module_utils.probes._kernel_log import kernel_line, parse_kernel_log
from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda._source_shared import Throttle
from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda._kernel_log_source import FileTail, KernelLines, journal_lines

from ansible_collections.gpuops.remediation.tests.unit.helpers.playbook import run_playbook
from ansible_collections.gpuops.remediation.tests.unit.helpers.syslog_socket import SyslogSocket

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "kernel-xid")
XID79 = "NVRM: Xid (PCI:0000:01:00): 79, pid=1234, name=trainer, GPU has fallen off the bus."
NOW = 1796032800.0


def _fixture_lines():
    lines = []
    for path in sorted(glob.glob(os.path.join(FIXTURES, "*.log"))):
        with open(path, encoding="utf-8") as handle:
            lines += [line.rstrip("\n") for line in handle]
    return lines


def _shape(events):
    return [(event["kind"], event["xid"], event["pci_bus_id"], event["message"]) for event in events]


def test_every_real_kernel_line_counts_as_it_is_and_under_the_kernels_syslog_tag():
    """The captures (dmesg, dmesg -T, journalctl -k, syslog) all pass; the same lines as rsyslog writes them
    ("time host kernel: ...") give the same events."""
    lines = _fixture_lines()
    events = parse_kernel_log("\n".join(lines), now=NOW)
    assert len(events) > 30 and all(kernel_line(line) for line in lines)
    bare = [line.split("kernel: ", 1)[-1] for line in lines]
    in_syslog = parse_kernel_log("\n".join("Dec  6 04:00:00 node7 kernel: " + line for line in bare), now=NOW)
    assert _shape(in_syslog) == _shape(parse_kernel_log("\n".join(bare), now=NOW))


@pytest.mark.parametrize("line", [
    "Dec  6 04:00:00 node7 alice[4242]: " + XID79,  # logger -t 'alice[4242]'
    "Dec  6 04:00:00 node7 alice: " + XID79,  # logger, tagged with the user's name
    "Dec  6 04:00:00 node7 kernel[4242]: " + XID79,  # logger -t kernel under journald: the pid gives it away
    "Dec  6 04:00:00 node7 kernel[0]: " + XID79,
    "Dec  6 04:00:00 node7 alice[4242]: kernel: " + XID79,  # "kernel:" later in the message
    "Dec  6 04:00:00 node7 sshd[912]: Invalid user kernel: " + XID79,
    "Dec  6 04:00:00 node7 kernel: alice: " + XID79,  # a second tag after the kernel's: not how the kernel writes
    "Dec  6 04:00:00 node7 [kernel:] " + XID79,
    "Dec  6 04:00:00 node7 kernel:x " + XID79,
    "2026-12-06T04:00:00+00:00 node7 Kernel: " + XID79,
    "Dec  6 04:00:00 node7 kernel: [ 12.3] " + "[" * 600 + " " + XID79,  # a head no kernel prints
    "Dec  6 04:00:00 node7 kernel: " + XID79 + " " + "x" * 9000,  # longer than any kernel line
    # A character str.splitlines() ends a line at, inside a user's message (rsyslog escapes only ASCII controls): the
    # rest is no line of its own without a tag.
    "Dec  6 04:00:00 node7 alice[4242]: x\u2028" + XID79,
    "Dec  6 04:00:00 node7 alice[4242]: x\u2029" + XID79,
    "Dec  6 04:00:00 node7 alice[4242]: x\x85" + XID79,
    "Dec  6 04:00:00 node7 alice[4242]: x\x1c" + XID79,
    "Dec  6 04:00:00 node7 alice[4242]: x\x1e" + XID79,
    "Dec  6 04:00:00 node7 alice[4242]: x\x0b" + XID79,
    "Dec  6 04:00:00 node7 alice[4242]: x\x0c" + XID79,
    "Dec  6 04:00:00 node7 alice[4242]: x\r" + XID79,
])
def test_a_line_under_another_tag_is_no_evidence(line):
    assert not kernel_line(line)
    assert parse_kernel_log(line, now=NOW) == []
    lines_of = KernelLines("node7", {}, Throttle(0))
    assert lines_of.feed([line], NOW) == [] and len(lines_of.dropped) == 1


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\x85", "\x1c", "\x1d", "\x1e", "\x0b", "\x0c", "\r"])
def test_the_eda_file_source_ends_a_line_at_a_newline_only(tmp_path, separator):
    """The EDA source's file mode: a user's syslog line holding a character str.splitlines() ends a line at is one line,
    under the user's tag; a kernel line after it still counts."""
    path = str(tmp_path / "kern.log")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("Dec  6 04:00:00 node7 kernel: start\n")
    tail = FileTail(path)
    real = "Dec  6 04:00:06 node7 kernel: NVRM: Xid (PCI:0000:01:00): 13, pid=1, name=x, Graphics Exception"
    with open(path, "a", encoding="utf-8", newline="") as handle:
        handle.write("Dec  6 04:00:05 node7 alice[4242]: x" + separator + XID79 + "\r\n" + real + "\n")
    lines = tail.read()
    tail.close()
    assert len(lines) == 2 and lines[1] == real
    events = KernelLines("node7", {}, Throttle(0)).feed(lines, NOW)
    assert [event["gpuops"]["xid"] for event in events] == [13]


@pytest.mark.parametrize("entry, counts", [
    ({"_TRANSPORT": "kernel", "MESSAGE": XID79}, True),
    ({"_TRANSPORT": "syslog", "SYSLOG_IDENTIFIER": "kernel", "MESSAGE": XID79}, False),  # logger -t kernel
    ({"_TRANSPORT": "stdout", "SYSLOG_IDENTIFIER": "kernel", "MESSAGE": XID79}, False),  # a unit's output
    ({"_TRANSPORT": "journal", "SYSLOG_IDENTIFIER": "kernel", "MESSAGE": XID79}, False),  # sd_journal_send
    ({"_TRANSPORT": "journal", "SYSLOG_IDENTIFIER": "kernel", "_UID": "0", "MESSAGE": XID79}, False),
    ({"_TRANSPORT": ["kernel"], "MESSAGE": XID79}, False),
    ({"_TRANSPORT": "syslog", "MESSAGE": "kernel: " + XID79}, False),
])
def test_journal_entries_count_only_from_the_kernels_transport(entry, counts):
    entry = dict(entry, __REALTIME_TIMESTAMP=str(int(NOW * 1e6)), _HOSTNAME="node7")
    events = KernelLines("node7", {}, Throttle(0)).feed(journal_lines(entry), NOW)
    assert [event["gpuops"]["xid"] for event in events] == ([79] if counts else [])


# ---------------------------------------------------------------- a real second account, a real logger


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("runuser") or not shutil.which("logger"),
                    reason="needs root, runuser and util-linux logger to log as a second account")
def test_a_users_logger_lines_are_no_xid_for_the_modules_and_the_kernels_are(staged, collections_root):
    log = os.path.join(staged, "kern.log")
    syslog = SyslogSocket(staged, log)
    try:
        forged = [
            syslog.log_as("nobody", "-t", "alice[4242]", XID79),
            syslog.log_as("nobody", "--id=4242", "-t", "kernel", XID79),  # journald's form: kernel[pid]
            syslog.log_as("nobody", "-t", "alice", "kernel: " + XID79),
            syslog.log_as("nobody", "-t", "sshd[9]", "Invalid user kernel: " + XID79),
            syslog.log_as("nobody", "-t", "alice[4242]", "x\u2028" + XID79),  # a Unicode line separator inside
            syslog.log_as("nobody", "-t", "alice[4242]", "x\x85" + XID79),
        ]
    finally:
        syslog.close()
    assert forged[0].startswith("alice[4242]: NVRM: Xid") and forged[1].startswith("kernel[4242]: NVRM")
    real = "Dec  6 04:00:05 node7 kernel: [ 1843.308145] NVRM: Xid (PCI:0000:01:00): 13, pid='<unknown>', name=<unknown>, " \
           "Graphics SM Warp Exception on (GPC 7, TPC 7, SM 0): Illegal Instruction Parameter"
    with open(log, "a", encoding="utf-8") as handle:
        handle.write(real + "\n")
    result = _run_modules(staged, log, collections_root)
    for info in (result["info"], result["info_check"]):
        assert [(event["xid"], event["gpu_index"]) for event in info["xid_events"]] == [(13, 0)]
        assert info["verdict"]["rung"] != "reboot"
    watch = result["watch"]
    assert not [finding for finding in watch["findings"] if finding["kind"] == "xid" and 79 in finding.get("xids", [])]


def _run_modules(staged, log, collections_root):
    root = os.path.join(staged, "node")
    out = os.path.join(staged, "out.json")
    return run_playbook(staged, collections_root, """
    - gpuops.remediation.gpu_sim:
        root: %(root)s
        gpus: [{name: NVIDIA H100 80GB HBM3, memory_mib: 81559, pci_bus_id: "0000:01:00.0"}]
      register: node
    - block:
        - gpuops.remediation.gpu_holders_info: {kernel_log_source: file, kernel_log_path: %(log)s}
          environment: "{{ node.env }}"
          register: info
        - gpuops.remediation.gpu_holders_info: {kernel_log_source: file, kernel_log_path: %(log)s}
          environment: "{{ node.env }}"
          check_mode: true
          register: info_check
        - gpuops.remediation.gpu_watch:
            samples: 1
            interval: 0
            write_metrics: false
            state_path: %(root)s.watch.json
            kernel_log_source: file
            kernel_log_path: %(log)s
          environment: "{{ node.env }}"
          register: watch
        - ansible.builtin.copy:
            content: "{{ {'info': info, 'info_check': info_check, 'watch': watch} | to_json }}"
            dest: %(out)s
            mode: "0600"
      always:
        - gpuops.remediation.gpu_sim: {root: %(root)s, state: absent}
""" % {"root": root, "log": log, "out": out}, out)


# ---------------------------------------------------------------- a FIFO where the kernel log file is read


def test_a_fifo_at_the_kernel_log_path_never_blocks_a_module(staged, collections_root):
    """A FIFO with no writer at kernel_log_path (a user's, where the path's directory lets them): the open would block
    for ever; the modules say the log cannot be read and go on, in check mode too."""
    log = os.path.join(staged, "kern.log")
    os.mkfifo(log, 0o666)
    result = _run_modules(staged, log, collections_root)
    for info in (result["info"], result["info_check"]):
        report = info["probes"]["kernel_log"]
        assert report["ok"] is False and "not a regular file" in report["error"] and info["xid_events"] == []
    assert result["watch"] is not None


def test_a_fifo_at_the_eda_file_source_path_never_blocks_it(staged):
    log = os.path.join(staged, "kern.log")
    os.mkfifo(log, 0o666)
    read = []

    def tail_it():
        tail = FileTail(log)
        read.extend([tail.read(), tail.read()])
        tail.close()

    thread = threading.Thread(target=tail_it, daemon=True)
    thread.start()
    thread.join(30)
    if thread.is_alive():
        os.close(os.open(log, os.O_RDWR))  # let the blocked open return, so the thread ends
        raise AssertionError("the EDA file source blocked in 30 s on a FIFO at its path")
    assert read == [[], []]
