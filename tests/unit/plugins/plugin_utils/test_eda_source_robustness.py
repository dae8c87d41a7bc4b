# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The event sources keep running on what they cannot read, report it, and never spin: /dev/kmsg that cannot be opened
or read, journalctl missing or ended (started again after its cursor), journald entries trusted only from the kernel
or root, a gpu_holders_info probe that hangs past its deadline. Each source runs as ansible-rulebook runs it (its file by
path, main() on an asyncio queue) against real files, directories and child processes."""

import asyncio
import importlib.util
import json
import os
import re
import sys

import pytest

from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda._source_shared import Retry
from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda._kernel_log_source import journal_argv, journal_lines, kmsg_problem, kmsg_seq
from ansible_collections.gpuops.remediation.tests.unit.helpers import bounded
from ansible_collections.gpuops.remediation.tests.unit.helpers.eda_webhook import until_listening

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
SOURCES = os.path.join(ROOT, "extensions", "eda", "plugins", "event_source")


def _source(name):
    spec = importlib.util.spec_from_file_location("gpuops_eda_robust_" + name, os.path.join(SOURCES, name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def _run(main, args, seconds, until=None):
    """main(queue, args) as a task for `seconds` (or until `until(events)`, within 20 s), with a ticker that counts the
    loop's turns (a source that spins without awaiting starves it); (events, ticks, task), the task cancelled."""
    queue, ticks = asyncio.Queue(), [0]

    async def ticker():
        while True:
            ticks[0] += 1
            await asyncio.sleep(0.01)

    tick = asyncio.ensure_future(ticker())
    task = asyncio.ensure_future(main(queue, args))
    events = []
    try:
        deadline = asyncio.get_running_loop().time() + (20 if until else seconds)
        while asyncio.get_running_loop().time() < deadline:
            try:
                events.append(await asyncio.wait_for(queue.get(), 0.05))
            except asyncio.TimeoutError:
                pass
            assert not task.done(), task.exception() if task.done() else None
            if until and until(events):
                break
        if until:
            await bounded.settle_async(0.2, "no event beyond what until() waited for")
        while not queue.empty():
            events.append(queue.get_nowait())
    finally:
        task.cancel()
        tick.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    return events, ticks[0], task


def _problems(events):
    return [event["gpuops"] for event in events if event["gpuops"]["type"] == "source_problem"]


# ---------------------------------------------------------------- /dev/kmsg

def test_kmsg_that_cannot_be_read_is_reported_once_and_tried_again_without_spinning(tmp_path):
    """A lasting read error (here EISDIR: the path is a directory, which opens but never reads): before, the read loop
    went round at once for ever and the event loop never got a turn. Now: one report, delays that grow, main running."""
    source = _source("gpu_kernel_log")
    source.KMSG = str(tmp_path)
    events, ticks, task = asyncio.run(_run(source.main, {"source": "kmsg", "host": "node7", "poll_interval": 0.01}, 1.0))
    assert task.cancelled()
    problems = _problems(events)
    assert len(problems) == 1, events
    assert problems[0]["source"] == "gpu_kernel_log" and problems[0]["host"] == "node7" and problems[0]["rung"] == "none"
    # (EISDIR or EINVAL, as the file system answers a read of a directory)
    assert re.fullmatch(r"cannot read %s: (Is a directory|Invalid argument); trying again" % re.escape(str(tmp_path)),
                        problems[0]["message"]), problems[0]["message"]
    assert events[0]["meta"] == {"hosts": "node7"}
    assert ticks >= 40  # the loop kept its turns (100 ticks of 10 ms a second, less the machine's load)


def test_kmsg_that_cannot_be_opened_is_reported_and_main_keeps_running(tmp_path):
    source = _source("gpu_kernel_log")
    source.KMSG = str(tmp_path / "kmsg")  # missing: as a permission error, open() fails on every try
    events, _ticks, task = asyncio.run(_run(source.main, {"source": "kmsg", "host": "node7", "poll_interval": 0.01}, 0.6))
    assert task.cancelled()
    assert [problem["message"] for problem in _problems(events)] == [
        "cannot open %s: No such file or directory; trying again" % source.KMSG]


def test_kmsg_problem_words_and_the_record_sequence():
    denied = PermissionError(13, "Permission denied")
    assert kmsg_problem("/dev/kmsg", denied, opening=True) == (
        "cannot open /dev/kmsg: Permission denied (reading it needs root or CAP_SYSLOG; or use source: journal or file);"
        " trying again")
    assert kmsg_problem("/dev/kmsg", OSError(5, "Input/output error"), opening=False) == (
        "cannot read /dev/kmsg: Input/output error; trying again")
    assert kmsg_seq("4,1234,5678,-;NVRM: Xid") == 1234
    assert kmsg_seq("garbage") is None


def test_retry_reports_a_problem_once_and_backs_off_up_to_the_most():
    retry = Retry(0.5, most=3)
    assert [retry.failed("x") for _try in range(5)] == [(True, 0.5), (False, 1.0), (False, 2.0), (False, 3), (False, 3)]
    assert retry.failed("y") == (True, 3)  # other words: reported
    retry.succeeded()
    assert retry.failed("y") == (True, 0.5)  # failed again after a success: reported again, from the first delay


# ---------------------------------------------------------------- journald

XID = "NVRM: Xid (PCI:0000:3b:00): 119, pid=4242, name=python3, Timeout after 6s of waiting for RPC response"


def _entry(cursor, message, usec, **fields):
    return dict({"__CURSOR": cursor, "__REALTIME_TIMESTAMP": str(usec), "_HOSTNAME": "node7", "MESSAGE": message}, **fields)


def test_journal_lines_trusts_the_kernel_transport_and_root_only():
    kernel = _entry("c1", XID, 1796032800000000, _TRANSPORT="kernel", SYSLOG_IDENTIFIER="kernel")
    assert journal_lines(kernel) == ["2026-11-30T10:00:00.000000+00:00 node7 kernel: " + XID]
    # logger -t kernel by a user: the identifier says kernel, the transport does not
    forged = _entry("c2", XID, 1796032800000000, _TRANSPORT="syslog", SYSLOG_IDENTIFIER="kernel", _UID="1000")
    assert journal_lines(forged) == []
    ours = "action=gpu_reset gpus=00000000:3B:00.0 epoch=1796032900.000 run=r1"
    by_root = _entry("c3", ours, 1796032900000000, _TRANSPORT="syslog", SYSLOG_IDENTIFIER="gpuops-remediation", _UID="0", _PID="77")
    assert journal_lines(by_root) == ["2026-11-30T10:01:40.000000+00:00 node7 gpuops-remediation[77]: " + ours]
    by_user = dict(by_root, _UID="1000")
    assert journal_lines(by_user) == []
    assert journal_lines(dict(by_root, _UID=None)) == []
    # journalctl's array form of a message that is not UTF-8; an entry with no time or message is nothing
    assert journal_lines(dict(kernel, MESSAGE=list(b"NVRM: \xff"))) == ["2026-11-30T10:00:00.000000+00:00 node7 kernel: NVRM: \ufffd"]
    assert journal_lines(dict(kernel, __REALTIME_TIMESTAMP="soon")) == [] and journal_lines(dict(kernel, MESSAGE=None)) == []
    assert journal_lines("not an entry") == []


def test_journal_argv_from_now_after_the_cursor_or_since_the_start():
    common = ["journalctl", "--follow", "--output=json", "--no-pager"]
    tail = ["_TRANSPORT=kernel", "+", "SYSLOG_IDENTIFIER=gpuops-remediation"]
    assert journal_argv("journalctl") == common + ["--lines=0"] + tail
    assert journal_argv("journalctl", "s=abc;i=1") == common + ["--after-cursor=s=abc;i=1"] + tail
    assert journal_argv("journalctl", None, 1796032800.7) == common + ["--since=@1796032800"] + tail


# A journalctl stand-in (a real child on a real pipe): each run appends its argv to CALLS and prints the entries of
# the next file of RUNS (one JSON object a line); the first run then exits 1 saying why, the last waits until killed.
FAKE_JOURNALCTL = r'''#!%(python)s
import json, sys, time
calls = %(calls)r
with open(calls, "a") as handle:
    handle.write(json.dumps(sys.argv[1:]) + "\n")
with open(calls) as handle:
    run = len(handle.readlines())
with open(%(runs)r) as handle:
    runs = json.load(handle)
for entry in runs[run - 1] if run <= len(runs) else []:
    print(json.dumps(entry), flush=True)
if run == 1:
    sys.stderr.write("Failed to follow the journal: the journal was rotated away\n")
    sys.exit(1)
while True:
    time.sleep(60)
'''


def test_journal_is_started_again_after_its_cursor_and_trusts_only_kernel_and_root(tmp_path):
    calls, runs = str(tmp_path / "calls"), str(tmp_path / "runs.json")
    remediation = "action=gpu_reset gpus=00000000:3B:00.0 epoch=1796032900.000 run=forged"
    first = [
        # a user's forged remediation line dated after the Xid: trusted, it would answer (drop) the Xid
        _entry("s=1;i=1", remediation, 1796032900000000, _TRANSPORT="syslog", SYSLOG_IDENTIFIER="gpuops-remediation", _UID="1000"),
        _entry("s=1;i=2", XID, 1796032800000000, _TRANSPORT="kernel"),
        # a user's Xid line under the identifier "kernel"
        _entry("s=1;i=3", XID.replace("3b:00", "86:00"), 1796032801000000, _TRANSPORT="syslog", SYSLOG_IDENTIFIER="kernel", _UID="1000"),
    ]
    second = [_entry("s=1;i=4", XID.replace("3b:00", "18:00"), 1796032802000000, _TRANSPORT="kernel")]
    with open(runs, "w") as handle:
        json.dump([first, second], handle)
    fake = tmp_path / "journalctl"
    fake.write_text(FAKE_JOURNALCTL % {"python": sys.executable, "calls": calls, "runs": runs})
    fake.chmod(0o755)

    source = _source("gpu_kernel_log")
    # answers_seconds 0: no read-back run of journalctl before the follow (test_eda_answers_recall.py has that one)
    args = {"source": "journal", "host": "node7", "journalctl": str(fake), "poll_interval": 0.05, "answers_seconds": 0}
    events, _ticks, task = asyncio.run(_run(source.main, args, 0, until=lambda got: len(got) >= 3))
    assert task.cancelled()
    xids = [(event["gpuops"]["xid"], event["gpuops"]["pci_bus_id"]) for event in events if event["gpuops"]["type"] == "xid"]
    assert xids == [(119, "00000000:3B:00.0"), (119, "00000000:18:00.0")]
    assert [problem["message"] for problem in _problems(events)] == [
        "%s ended (exit 1: Failed to follow the journal: the journal was rotated away); started again after the last entry read" % fake]
    with open(calls) as handle:
        argvs = [json.loads(line) for line in handle]
    assert "--lines=0" in argvs[0] and "--after-cursor=s=1;i=3" in argvs[1]


def test_journalctl_missing_is_reported_and_main_keeps_running(tmp_path):
    source = _source("gpu_kernel_log")
    missing = str(tmp_path / "no-journalctl")
    args = {"source": "journal", "host": "node7", "journalctl": missing, "poll_interval": 0.01}
    events, ticks, task = asyncio.run(_run(source.main, args, 0.6))
    assert task.cancelled()
    assert [problem["message"] for problem in _problems(events)] == ["cannot run %s: No such file or directory; trying again" % missing]
    assert ticks >= 20


# ---------------------------------------------------------------- gpu_snapshot, local

HANGING_PROBE = r'''import os, sys
with open(%(pid_file)r, "w") as handle:
    handle.write(str(os.getpid()))
open(%(fifo)r).read()  # no writer ever comes: it hangs as a probe stuck on a GPU does
'''


def test_snapshot_local_probe_that_hangs_past_its_deadline_is_an_unresponsive_node(tmp_path):
    """Before, a probe killed at its deadline made no condition: the hung node looked healthy."""
    fifo, pid_file = str(tmp_path / "never"), str(tmp_path / "probe.pid")
    os.mkfifo(fifo)
    (tmp_path / "hanging_probe.py").write_text(HANGING_PROBE % {"pid_file": pid_file, "fifo": fifo})
    source = _source("gpu_snapshot")
    source.MODULE = "hanging_probe"
    args = {"mode": "local", "host": "node7", "environment": {"PYTHONPATH": str(tmp_path)}, "probe_timeout": 1,
            "duration_seconds": 0, "poll_interval": 0.05}
    events, _ticks, task = asyncio.run(_run(source.main, args, 0, until=lambda got: len(got) >= 1))
    assert task.cancelled()
    assert len(events) == 1, events
    body = events[0]["gpuops"]
    assert (body["type"], body["gpu"], body["rung"], body["host"]) == ("unresponsive", None, "reboot", "node7")
    assert body["message"] == "gpu_holders_info did not answer within 1.0 s (killed)"
    # The probe of the next poll, running when the source was cancelled, was killed and reaped with it.
    with open(pid_file) as handle:
        pid = int(handle.read())
    assert not os.path.exists("/proc/%d" % pid)


def test_snapshot_local_probe_that_fails_is_reported_once(tmp_path):
    (tmp_path / "failing_probe.py").write_text("import sys\nsys.stderr.write('no NVML here\\n')\nsys.exit(3)\n")
    source = _source("gpu_snapshot")
    source.MODULE = "failing_probe"
    args = {"mode": "local", "host": "node7", "environment": {"PYTHONPATH": str(tmp_path)}, "duration_seconds": 0,
            "poll_interval": 0.05}
    events, _ticks, task = asyncio.run(_run(source.main, args, 1.5))
    assert task.cancelled()
    assert [problem["message"] for problem in _problems(events)] == ["gpu_holders_info printed no result (exit 3): no NVML here\n"]
    assert len(events) == 1


@pytest.mark.parametrize("name", ["gpu_kernel_log", "gpu_snapshot", "gpu_alert_webhook"])
def test_each_sources_documentation_is_yaml_with_its_options(name):
    """ansible.eda-style documentation, read by tools as YAML (a plain scalar holding ": " was not)."""
    import yaml

    source = _source(name)
    doc = yaml.safe_load(source.DOCUMENTATION)
    assert sorted(doc["options"]) == sorted(source.SPEC)
    assert yaml.safe_load(source.EXAMPLES)


# ---------------------------------------------------------------- the webhook: one inventory host per alert

INVENTORY = """all:
  children:
    gpu_nodes:
      hosts:
        node07:
        node08:
    racks:
      hosts:
        racks:
"""


def _post(port, body, headers):
    import urllib.error
    import urllib.request

    request = urllib.request.Request("http://127.0.0.1:%d/alerts" % port, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_webhook_with_the_inventory_reports_a_group_an_ambiguous_or_an_unknown_host(tmp_path):
    """A host label naming a group would limit the run to the whole group: no event, a report naming why."""
    import socket

    from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda._alert_webhook_source import sign

    inventory = tmp_path / "inventory.yml"
    inventory.write_text(INVENTORY)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    alerts = [{"status": "firing", "labels": {"alertname": "GpuopsGhostMemory", "instance": name, "pci_bus_id": "00000000:18:00.0"}}
              for name in ("node07:9100", "gpu_nodes", "racks", "ghost9:9100")]
    body = json.dumps({"alerts": alerts}).encode()
    answers = []

    async def main(queue, args):
        source = _source("gpu_alert_webhook")
        server = asyncio.ensure_future(source.main(queue, args))
        loop = asyncio.get_running_loop()
        try:
            await until_listening(port)
            now = int(__import__("time").time())
            headers = {"X-Gpuops-Timestamp": str(now), "X-Gpuops-Signature": sign("s3cret", now, body)}
            answers.append(await loop.run_in_executor(None, _post, port, body, headers))
            await server
        finally:
            server.cancel()

    args = {"port": port, "secret": "s3cret", "inventory": str(inventory)}
    events, _ticks, task = asyncio.run(_run(main, args, 0, until=lambda got: len(got) >= 4))
    assert task.cancelled()
    assert answers[0][0] == 202
    made = [event for event in events if event["gpuops"]["type"] == "alert"]
    assert [(event["gpuops"]["host"], event["meta"]) for event in made] == [("node07", {"hosts": "node07"})]
    assert [event["gpuops"]["message"] for event in _events_of(events, "source_problem")] == answers[0][1]["problems"] == [
        "alert 1 (GpuopsGhostMemory): its host 'gpu_nodes' names a group of the inventory (2 hosts: node07, node08), not one host",
        "alert 2 (GpuopsGhostMemory): its host 'racks' names both a host and a group of the inventory (1 host: racks): ambiguous, "
        "and a limit to it takes the group",
        "alert 3 (GpuopsGhostMemory): its host 'ghost9' is no host of the inventory"]


def _events_of(events, kind):
    return [event for event in events if event["gpuops"]["type"] == kind]


def test_webhook_inventory_that_is_not_there_is_named(tmp_path):
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda._source_shared import OptionError

    source = _source("gpu_alert_webhook")
    with pytest.raises(OptionError, match="gpu_alert_webhook: option inventory: .*/none.yml does not exist"):
        asyncio.run(source.main(asyncio.Queue(), {"secret": "s", "inventory": str(tmp_path / "none.yml")}))


@pytest.mark.parametrize("name, args, says", [
    ("gpu_kernel_log", {"paths": {"node07": "/dev/null", "gpu_nodes": "/dev/null"}},
     "gpu_kernel_log: option paths: 'gpu_nodes' names a group of the inventory (2 hosts: node07, node08), not one host"),
    ("gpu_kernel_log", {"host": "racks", "path": "/dev/null"},
     "gpu_kernel_log: option host: 'racks' names both a host and a group of the inventory (1 host: racks): ambiguous"),
    ("gpu_snapshot", {"nodes": [{"host": "node07"}, {"host": "node99"}]},
     "gpu_snapshot: option nodes: 'node99' is no host of the inventory"),
])
def test_sources_given_the_inventory_refuse_hosts_that_are_not_one_inventory_host(tmp_path, name, args, says):
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda._source_shared import OptionError

    inventory = tmp_path / "inventory.yml"
    inventory.write_text(INVENTORY)
    with pytest.raises(OptionError) as caught:
        asyncio.run(_source(name).main(asyncio.Queue(), dict(args, inventory=str(inventory))))
    assert str(caught.value).startswith(says), str(caught.value)


def test_kernel_log_given_the_inventory_follows_its_hosts(tmp_path):
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(INVENTORY)
    log = tmp_path / "kern.log"
    log.write_text("")
    source = _source("gpu_kernel_log")
    args = {"paths": {"node07": str(log)}, "inventory": str(inventory), "poll_interval": 0.02}

    done = []

    def append_once(events):
        if not done:
            with open(log, "a") as handle:
                handle.write("2026-11-30T10:00:00+00:00 node07 kernel: NVRM: Xid (PCI:0000:3b:00): 119, pid=1, name=x, t\n")
            done.append(True)
        return len(events) >= 1

    events, _ticks, task = asyncio.run(_run(source.main, args, 0, until=append_once))
    assert task.cancelled() and [event["meta"] for event in events] == [{"hosts": "node07"}]
