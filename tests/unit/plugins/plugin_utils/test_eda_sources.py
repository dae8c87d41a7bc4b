# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The EDA event sources (extensions/eda/plugins/event_source) run as ansible-rulebook runs them: their file by path,
main() as a task on an asyncio queue, real files appended to, cancelled at the end; and their pure helpers."""

import asyncio
import importlib.util
import json
import os
import re
import time

import pytest

from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda._source_shared import OptionError, Throttle, check_args
from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda._kernel_log_source import (
    Answers, FileTail, KernelLines, kmsg_line, load_policy, remediation_of,
)
from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda._snapshot_source import Lasting, state_conditions
from ansible_collections.gpuops.remediation.tests.unit.helpers import bounded
from ansible_collections.gpuops.remediation.tests.unit.helpers.eda_sources import root_reset

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
SOURCES = os.path.join(ROOT, "extensions", "eda", "plugins", "event_source")

XID_119 = "2026-11-30T10:00:00+00:00 node7 kernel: NVRM: Xid (PCI:0000:3b:00): 119, pid=4242, name=python3, Timeout after 6s of waiting for RPC response"
XID_79 = "2026-11-30T10:00:05+00:00 node7 kernel: NVRM: Xid (PCI:0000:18:00): 79, pid=<unknown>, GPU has fallen off the bus."
FALLEN = ("2026-11-30T10:00:06+00:00 node7 kernel: NVRM: The NVIDIA GPU 0000:5e:00.0",
          "2026-11-30T10:00:06+00:00 node7 kernel: NVRM: (PCI ID: 10de:2330) installed in this system has",
          "2026-11-30T10:00:06+00:00 node7 kernel: NVRM: fallen off the bus and is not responding to commands.")
OTHER = "2026-11-30T10:00:07+00:00 node7 kernel: usb 1-1: new high-speed USB device number 2"


def _source(name):
    """The source file's globals, loaded by path as ansible-rulebook loads it (runpy's path hooks clash with the
    collection loader ansible-test units installs)."""
    spec = importlib.util.spec_from_file_location("gpuops_eda_source_" + name, os.path.join(SOURCES, name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return vars(module)


# A line the kernel log sources turn into an event: appended until one comes back, it tells that the source is
# following the file (it starts at the file's end, so a line written before that is never read).
PROBE = "2026-11-30T09:00:00+00:00 probe kernel: NVRM: Xid (PCI:0000:ff:00): 14, pid=1, name=probe, following"


def _is_probe(event):
    return event["gpuops"].get("xid") == 14 and event["gpuops"].get("pci_bus_id") == "00000000:FF:00.0"


def following(path):
    """ready() for a kernel log source: append PROBE to path until the source puts its event."""
    async def ready(queue, task):
        while True:
            assert not task.done(), task.exception() if task.done() else None
            _append(path, PROBE)
            try:
                if _is_probe(await asyncio.wait_for(queue.get(), 0.2)):
                    return
            except asyncio.TimeoutError:
                continue
    return ready


def listening(port):
    """ready() for the webhook: until its port takes a connection."""
    async def ready(queue, task):
        while True:
            assert not task.done(), task.exception() if task.done() else None
            try:
                _reader, writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                await asyncio.sleep(0.05)
                continue
            writer.close()
            return
    return ready


async def _collect(name, args, act, count, timeout=20.0, ready=None):
    """Start the source, run act() once it is ready (or has run a while: the snapshot tests, whose conditions must
    last, do not race it), take `count` events other than probes, then cancel it; (events, task)."""
    queue = asyncio.Queue()
    task = asyncio.ensure_future(_source(name)["main"](queue, args))
    try:
        if ready:
            await asyncio.wait_for(ready(queue, task), timeout)
        else:
            await bounded.settle_async(0.3, "the source running a while (the conditions of the snapshot tests last)")
        assert not task.done(), task.exception() if task.done() else None
        await act()
        events = []
        while len(events) < count:
            event = await asyncio.wait_for(queue.get(), timeout)
            if not _is_probe(event):
                events.append(event)
        await bounded.settle_async(0.5, "nothing more put than the events counted")
        while not queue.empty():
            event = queue.get_nowait()
            if not _is_probe(event):
                events.append(event)
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    return events, task


def _append(path, *lines):
    with open(path, "a") as handle:
        handle.write("".join(line + "\n" for line in lines))


def test_kernel_log_follows_the_file_from_its_end(tmp_path):
    log = str(tmp_path / "syslog")
    _append(log, XID_79)  # already there at the start: never replayed

    async def act():
        _append(log, OTHER, XID_119)
        await bounded.settle_async(0.3, "the source's polls between the two appends (its events do not depend on it)")
        _append(log, *FALLEN)

    events, task = asyncio.run(_collect("gpu_kernel_log", {"path": log, "host": "node7", "poll_interval": 0.05}, act, 2, ready=following(log)))
    assert task.cancelled()
    assert [event["gpuops"]["type"] for event in events] == ["xid", "fallen_off_bus"]
    xid = events[0]
    assert xid["meta"] == {"hosts": "node7"}
    assert {key: xid["gpuops"][key] for key in ("host", "pci_bus_id", "xid", "action", "rung", "pid", "process_name", "policy")} == {
        "host": "node7", "pci_bus_id": "00000000:3B:00.0", "xid": 119, "action": "reset_gpu", "rung": "reset", "pid": 4242,
        "process_name": "python3", "policy": "catalog"}
    fallen = events[1]["gpuops"]
    assert (fallen["pci_bus_id"], fallen["action"], fallen["rung"]) == ("00000000:5E:00.0", "reboot", "reboot")


def test_kernel_log_throttles_repeats_per_host_and_gpu(tmp_path):
    log = str(tmp_path / "kern.log")
    _append(log)

    async def act():
        _append(log, XID_119, XID_119.replace("10:00:00", "10:00:30"), XID_119.replace("3b:00", "86:00"), XID_79)

    events, _task = asyncio.run(_collect("gpu_kernel_log", {"path": log, "host": "node7", "poll_interval": 0.05}, act, 3, ready=following(log)))
    assert [(event["gpuops"]["xid"], event["gpuops"]["pci_bus_id"]) for event in events] == [
        (119, "00000000:3B:00.0"), (119, "00000000:86:00.0"), (79, "00000000:18:00.0")]


def test_kernel_log_policy_from_the_inventory_file(tmp_path):
    log, policy = str(tmp_path / "kern.log"), tmp_path / "gpuops_xid_policy.yml"
    _append(log)
    policy.write_text("gpuops_xid_policy:\n  119: reboot\n  79: none\n")

    async def act():
        _append(log, XID_119, XID_79)

    events, _task = asyncio.run(_collect("gpu_kernel_log", {"path": log, "host": "n", "poll_interval": 0.05,
                                                            "xid_policy_file": str(policy), "xid_policy": {"79": "reset"}}, act, 2, ready=following(log)))
    assert [(e["gpuops"]["xid"], e["gpuops"]["rung"], e["gpuops"]["catalog_action"], e["gpuops"]["policy"]) for e in events] == [
        (119, "reboot", "reset_gpu", "site"), (79, "reset", "reboot", "site")]


def test_kernel_log_several_hosts_files(tmp_path):
    paths = {"n%d" % index: str(tmp_path / ("n%d.log" % index)) for index in range(3)}
    for path in paths.values():
        _append(path)

    async def act():
        _append(paths["n2"], XID_119)
        _append(paths["n0"], XID_119)

    events, _task = asyncio.run(_collect("gpu_kernel_log", {"paths": paths, "poll_interval": 0.05}, act, 2, ready=following(paths["n1"])))
    assert sorted(event["meta"]["hosts"] for event in events) == ["n0", "n2"]


def test_kernel_log_closed_loop_drops_what_a_remediation_answered(tmp_path):
    log = str(tmp_path / "syslog")
    _append(log)
    answered = ("2026-11-30T10:00:10+00:00 node7 gpuops-remediation[991]: host=node7 action=gpu_reset "
                "gpus=00000000:3B:00.0 epoch=1796032810.0 run=r1")
    root_reset(str(tmp_path / "journal.jsonl"), 1796032810.0, "00000000:3B:00.0", "r1")

    async def act():
        # the remediation's line first (a late delivery of the Xid it answered follows), then a new Xid after it
        _append(log, answered, XID_119, XID_119.replace("10:00:00", "10:05:00"))

    events, _task = asyncio.run(_collect("gpu_kernel_log", {"path": log, "host": "node7", "poll_interval": 0.05, "throttle_seconds": 0,
                                                            "journal_path": str(tmp_path / "journal.jsonl")}, act, 1, ready=following(log)))
    assert [event["gpuops"]["time"] for event in events] == ["2026-11-30T10:05:00+00:00"]


@pytest.mark.parametrize("args, says", [
    ({"source": "tape"}, "gpu_kernel_log: option source must be one of kmsg, journal, file, got 'tape'"),
    ({"poll_interval": 0}, "option poll_interval must be 0.01 or more, got 0.0"),
    ({"throttle_seconds": "5m"}, "option throttle_seconds must be a float, got '5m'"),
    ({"pathz": "/x"}, "unknown option pathz"),
    ({"xid_policy": {"x": "reset"}}, "xid_policy: the Xid code 'x' is not a number"),
    ({"xid_policy": {13: "fix"}}, "Xid 13 maps to 'fix'"),
    ({"paths": {"n1": "/x"}, "source": "kmsg"}, "option paths needs source=file, got source='kmsg'"),
    ({"paths": {"n1": ""}}, "option paths: host n1 needs a file name or a list of them, got ''"),
    ({"paths": {"n1": ["/x", 3]}}, "option paths: host n1 needs a file name or a list of them, got ['/x', 3]"),
])
def test_kernel_log_bad_options_named_before_reading(args, says):
    with pytest.raises(OptionError) as caught:
        asyncio.run(_source("gpu_kernel_log")["main"](asyncio.Queue(), args))
    assert says in str(caught.value)


def _state(path, ghost_mib, updated, unresponsive=False):
    state = {"version": 1, "updated_epoch": updated, "last_success_epoch": updated, "xid": {"last_epoch": None, "seen": [], "counts": {}},
             "gpus": {"GPU-1": {"high_usage_since": None, "ghost_samples": 3, "last_ghost_mib": ghost_mib,
                                "identity": {"index": 0, "uuid": "GPU-1", "name": "H100", "pci_bus_id": "00000000:18:00.0"}}},
             "active": {}}
    if unresponsive:
        state["active"]["f1"] = {"fingerprint": "f1", "kind": "unresponsive", "gpu": "GPU-2", "gpu_index": 1, "gpu_uuid": "GPU-2",
                                 "pci_bus_id": "00000000:86:00.0"}
    with open(path, "w") as handle:
        json.dump(state, handle)


def test_snapshot_from_the_watch_state_after_the_duration(tmp_path):
    state = str(tmp_path / "watch_state.json")
    _state(state, 100, 1.0)  # below the threshold

    async def act():
        _state(state, 2048, 2.0, unresponsive=True)

    args = {"mode": "state_file", "host": "node7", "state_path": state, "journal_path": str(tmp_path / "none.jsonl"),
            "poll_interval": 0.05, "duration_seconds": 0.3}
    events, _task = asyncio.run(_collect("gpu_snapshot", args, act, 2))
    assert sorted((e["gpuops"]["type"], e["gpuops"]["gpu"], e["gpuops"]["rung"]) for e in events) == [
        ("ghost_memory", "00000000:18:00.0", "reset"), ("unresponsive", "00000000:86:00.0", "reboot")]
    assert all(event["meta"] == {"hosts": "node7"} and event["gpuops"]["lasted_seconds"] >= 0.3 for event in events)


def test_snapshot_state_older_than_the_last_remediation_is_answered(tmp_path):
    state, journal = str(tmp_path / "watch_state.json"), str(tmp_path / "journal.jsonl")
    _state(state, 2048, 1796032800.0)
    records = [{"id": "a", "phase": "intent", "action": "gpu_reset", "ts": "2026-11-30T10:00:10Z"},
               {"id": "a", "phase": "outcome", "ok": True, "ts": "2026-11-30T10:00:20Z"}]
    with open(journal, "w") as handle:
        handle.write("".join(json.dumps(record) + "\n" for record in records))

    async def act():
        await bounded.settle_async(0.5, "the source sampling the old state first")
        _state(state, 2048, 1796032900.0)  # the watch sampled again after the reset: ghost memory again

    args = {"mode": "state_file", "host": "node7", "state_path": state, "journal_path": journal, "poll_interval": 0.05,
            "duration_seconds": 0}
    events, _task = asyncio.run(_collect("gpu_snapshot", args, act, 1))
    assert len(events) == 1 and events[0]["gpuops"]["ghost_mib"] == 2048


def test_snapshot_bad_node_entry_named():
    with pytest.raises(OptionError) as caught:
        asyncio.run(_source("gpu_snapshot")["main"](asyncio.Queue(), {"nodes": [{"host": "a", "state_file": "/x"}]}))
    assert "option nodes[0]: unknown key state_file" in str(caught.value)


def test_lasting_needs_every_poll_and_throttles():
    lasting = Lasting("h", 10, Throttle(100))
    ghost = [{"type": "ghost_memory", "gpu": "00000000:18:00.0"}]
    assert lasting.feed(ghost, 0) == []
    assert lasting.feed([], 5) == []  # it cleared: the duration starts over
    assert lasting.feed(ghost, 6) == []
    assert [event["gpuops"]["lasted_seconds"] for event in lasting.feed(ghost, 16)] == [10]
    assert lasting.feed(ghost, 50) == []
    assert len(lasting.feed(ghost, 117)) == 1


def test_state_conditions_threshold():
    state = {"gpus": {"a": {"last_ghost_mib": 256, "identity": {"index": 0, "pci_bus_id": "x"}},
                      "b": {"last_ghost_mib": 257, "identity": {"index": 1, "pci_bus_id": "y"}},
                      "c": {"last_ghost_mib": None, "identity": {}}}, "active": {}}
    assert [found["gpu_index"] for found in state_conditions(state, 256)] == [1]


def test_file_tail_rotation_truncation_and_partial_lines(tmp_path):
    path = str(tmp_path / "log")
    _append(path, "old")
    tail = FileTail(path)
    assert tail.read() == []
    with open(path, "a") as handle:
        handle.write("one\ntw")
    assert tail.read() == ["one"]
    _append(path, "o")
    assert tail.read() == ["two"]
    os.rename(path, path + ".1")
    _append(path, "fresh")
    assert tail.read() == ["fresh"]
    with open(path, "w") as handle:
        handle.write("cut\n")
    assert tail.read() == ["cut"]


def test_file_tail_rotation_keeps_the_tail_of_the_old_file(tmp_path):
    """Lines written to the old file after the last read and before the rotation (logrotate's rename, then a new file)
    come first, through the descriptor still open on it; its last line without a newline too; then the new file's."""
    path = str(tmp_path / "kern.log")
    _append(path, "before the start")
    tail = FileTail(path)
    _append(path, XID_119)
    assert tail.read() == [XID_119]
    _append(path, XID_79)
    with open(path, "a") as handle:
        handle.write("last words, no newline")
    os.rename(path, path + ".1")
    _append(path + ".1", "written to the old file after its rename")  # a writer that still holds it open
    _append(path, OTHER)
    assert tail.read() == [XID_79, "last words, no newline" + "written to the old file after its rename", OTHER]
    _append(path + ".1", "too late: the old file is closed")
    _append(path, "next")
    assert tail.read() == ["next"]
    os.remove(path)  # between logrotate's rename and the new file: nothing to read, nothing lost
    assert tail.read() == []
    _append(path, "new again")
    assert tail.read() == ["new again"]


def test_multiline_message_cut_between_reads_is_held():
    lines_of = KernelLines("h", {}, Throttle(0))
    assert lines_of.feed(list(FALLEN[:2]), 0) == []
    events = lines_of.feed([FALLEN[2]], 1)
    assert [event["gpuops"]["type"] for event in events] == ["fallen_off_bus"]
    assert KernelLines("h", {}, Throttle(0)).feed(list(FALLEN[:1]), 0, final=True) == []


def test_kmsg_record_as_dmesg_prints_it():
    assert kmsg_line("4,1234,5678901234,-;NVRM: Xid (PCI:0000:3b:00): 119, pid=1, name=x, y\n SUBSYSTEM=pci") == \
        "[ 5678.901234] NVRM: Xid (PCI:0000:3b:00): 119, pid=1, name=x, y"
    assert kmsg_line("garbage") is None


def test_remediation_line_and_answers():
    done = remediation_of("Nov 30 10:00:10 node7 gpuops-remediation[1]: host=node7 action=gpu_reset gpus=0000:3b:00.0,86:00.0 epoch=100.5 run=r",
                          "x")
    assert done == {"host": "node7", "action": "gpu_reset", "gpus": ["00000000:3B:00", "00000000:86:00"], "epoch": 100.5, "run": "r"}
    assert remediation_of("node7 kernel: gpuops-remediation is a word here", "x") is None
    answers = Answers()
    answers.record(done)
    assert answers.answered_by("node7", "00000000:3B:00.0", 100.0) is done
    assert answers.answered_by("node7", "00000000:3B:00.0", 101.0) is None
    assert answers.answered_by("node7", "00000000:18:00.0", 100.0) is None
    assert answers.answered_by("node8", "00000000:3B:00.0", 100.0) is None
    assert answers.answered_by("node7", "00000000:3B:00.0", None) is None


def test_check_args_defaults_and_kinds():
    spec = {"a": {"type": "int", "default": 3, "min": 1}, "b": {"type": "float", "default": 1.0}, "c": {"type": "bool", "default": False}}
    assert check_args("s", {"b": 2}, spec) == {"a": 3, "b": 2.0, "c": False}
    with pytest.raises(OptionError, match="option a must be a int, got True"):
        check_args("s", {"a": True}, spec)
    with pytest.raises(OptionError, match="option c must be a bool, got 'yes'"):
        check_args("s", {"c": "yes"}, spec)


def test_policy_file_errors_named(tmp_path):
    bad = tmp_path / "p.yml"
    bad.write_text("gpuops_xid_policy:\n  79: melt\n")
    with pytest.raises(OptionError, match=r"xid_policy_file \(.*p.yml\): Xid 79 maps to 'melt'"):
        load_policy("s", None, str(bad))
    with pytest.raises(OptionError, match="cannot read"):
        load_policy("s", None, str(tmp_path / "missing.yml"))


SECRET = "s3cret"
AM_BODY = {"version": "4", "status": "firing", "receiver": "eda", "alerts": [
    {"status": "firing", "labels": {"alertname": "GpuopsGhostMemory", "instance": "node07:9100", "gpu": "0",
                                    "pci_bus_id": "00000000:18:00.0", "kind": "ghost_memory"},
     "annotations": {"summary": "GPU 0 of node07:9100 holds ghost memory"}, "fingerprint": "ab12"},
    {"status": "resolved", "labels": {"alertname": "GpuopsGhostMemory", "instance": "node08:9100", "gpu": "1"}}]}


def _post(port, body, headers):
    import urllib.error
    import urllib.request

    request = urllib.request.Request("http://127.0.0.1:%d/alerts" % port, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            return answer.status
    except urllib.error.HTTPError as exc:
        return exc.code


def _free_port():
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_webhook_takes_signed_alerts_and_rejects_the_rest():
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda._alert_webhook_source import sign

    port = _free_port()
    body = json.dumps(AM_BODY).encode()
    statuses = []

    async def act():
        loop = asyncio.get_running_loop()
        now = int(__import__("time").time())

        async def post(data, headers):
            statuses.append(await loop.run_in_executor(None, _post, port, data, headers))

        await post(body, {})  # unsigned
        await post(body, {"X-Gpuops-Timestamp": str(now - 900), "X-Gpuops-Signature": sign(SECRET, now - 900, body)})  # stale
        await post(body, {"X-Gpuops-Timestamp": str(now), "X-Gpuops-Signature": sign("other", now, body)})  # wrong secret
        await post(body + b" ", {"X-Gpuops-Timestamp": str(now), "X-Gpuops-Signature": sign(SECRET, now, body)})  # body changed
        good = {"X-Gpuops-Timestamp": str(now), "X-Gpuops-Signature": sign(SECRET, now, body)}
        await post(body, good)
        await post(body, good)  # a replay
        nohost = json.dumps({"alerts": [{"status": "firing", "labels": {"alertname": "GpuopsGhostMemory"}}]}).encode()
        await post(nohost, {"X-Gpuops-Timestamp": str(now), "X-Gpuops-Signature": sign(SECRET, now, nohost)})

    events, _task = asyncio.run(_collect("gpu_alert_webhook", {"port": port, "secret": SECRET}, act, 1, ready=listening(port)))
    assert statuses == [401, 401, 401, 401, 202, 401, 422]
    problems = [event for event in events if event["gpuops"]["type"] == "source_problem"]
    events = [event for event in events if event["gpuops"]["type"] != "source_problem"]
    assert [problem["gpuops"]["message"] for problem in problems] == ["alert 0 (GpuopsGhostMemory) names no host"]
    assert "meta" not in problems[0]  # it limits nothing
    assert len(events) == 1
    assert events[0]["meta"] == {"hosts": "node07"}
    assert {key: events[0]["gpuops"][key] for key in ("type", "alert", "host", "gpu", "rung")} == {
        "type": "alert", "alert": "GpuopsGhostMemory", "host": "node07", "gpu": "00000000:18:00.0", "rung": "reset"}


def test_webhook_needs_a_secret(monkeypatch):
    monkeypatch.delenv("GPUOPS_WEBHOOK_SECRET", raising=False)
    with pytest.raises(OptionError, match="no secret: set option secret, or the environment variable GPUOPS_WEBHOOK_SECRET"):
        asyncio.run(_source("gpu_alert_webhook")["main"](asyncio.Queue(), {}))


def test_gpu_watch_body_and_instance_labels():
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda._alert_webhook_source import alert_events

    watch = {"source": "gpuops.remediation.gpu_watch", "host": "node07", "alerts": [
        {"status": "firing", "kind": "unresponsive", "gpu_index": 1, "pci_bus_id": "00000000:19:00.0"},
        {"status": "resolved", "kind": "ghost_memory", "gpu_index": 0}]}
    events, problems = alert_events(watch)
    assert problems == [] and [(e["gpuops"]["host"], e["gpuops"]["rung"]) for e in events] == [("node07", "reboot")]
    ipv6 = {"alerts": [{"labels": {"alertname": "GpuopsNewXid", "instance": "[fd00::7]:9100"}}]}
    assert alert_events(ipv6)[0][0]["gpuops"]["host"] == "fd00::7"
    assert alert_events({"alerts": [{"labels": {"alertname": "X", "node": "n9"}}]}, host_label="node")[0][0]["meta"] == {"hosts": "n9"}
    assert alert_events({"nope": 1}) == ([], ["the body is not an Alertmanager or gpu_watch webhook (no alerts list)"])


def test_closed_loop_with_the_line_the_journal_writes(tmp_path):
    """The remediation line the node's journal sends (_journal.Journal, simulated node: its var/log/syslog), read by the
    source from the host's second file: the Xid it answered, delivered late, is dropped."""
    from ansible_collections.gpuops.remediation.plugins.module_utils.journal._writer import Journal

    kernel, syslog = str(tmp_path / "kernel.log"), str(tmp_path / "syslog")
    _append(kernel)
    _append(syslog)
    journal = Journal(str(tmp_path / "journal.jsonl"), run_id="run 7", syslog_file=syslog)

    async def act():
        entry = journal.intent("gpu_reset", argv=["nvidia-smi", "--gpu-reset", "-i", "00000000:3B:00.0"])
        journal.outcome(entry, True)
        await bounded.settle_async(0.3, "the source's polls reading the answer line before the kernel lines")
        _append(kernel, XID_119.replace("2026-11-30T10:00:00", "2000-01-01T00:00:00"),  # before the reset: answered
                XID_119.replace("2026-11-30T10:00:00", "2099-01-01T00:00:00"))  # after it: new

    events, _task = asyncio.run(_collect("gpu_kernel_log", {"paths": {"node7": [kernel, syslog]}, "poll_interval": 0.05, "throttle_seconds": 0,
                                                            "journal_path": journal.path}, act, 1, ready=following(kernel)))
    assert [event["gpuops"]["time"] for event in events] == ["2099-01-01T00:00:00+00:00"]
    with open(syslog) as handle:
        line = handle.read()
    assert "gpuops-remediation[" in line and "action=gpu_reset gpus=00000000:3B:00.0 epoch=" in line and line.rstrip().endswith("run=run_7")


# ---------------------------------------------------------------- attacks of review20

def test_file_tail_truncated_then_grown_past_the_old_end_before_the_next_read(tmp_path):
    """copytruncate, then a line longer than what was there before the next poll: size >= the old offset, same inode.
    Read from the old offset, the Xid line came out cut ("10:00:00+00:00 node7 ..."); read whole from the start now."""
    path = str(tmp_path / "kern.log")
    _append(path, "a" * 10)
    tail = FileTail(path)
    with open(path, "w") as handle:
        handle.write(XID_119 + "\n")
    assert tail.read() == [XID_119]
    _append(path, OTHER)
    assert tail.read() == [OTHER]
    assert tail.read() == []


def test_file_tail_multibyte_character_split_between_reads(tmp_path):
    path = str(tmp_path / "kern.log")
    open(path, "w").close()
    tail = FileTail(path)
    data = "NVRM: GPU 0 – ü\n".encode("utf-8")
    cut = data.index("–".encode("utf-8")) + 1  # inside the 3-byte dash
    with open(path, "ab") as handle:
        handle.write(data[:cut])
    assert tail.read() == []
    with open(path, "ab") as handle:
        handle.write(data[cut:])
    assert tail.read() == ["NVRM: GPU 0 – ü"]


def test_kernel_log_keeps_following_a_file_that_cannot_be_read_for_a_while(tmp_path):
    """The log path is for a while something open() refuses (here a directory; an unreadable mode alike): main must not
    end (ansible-rulebook stops when a source returns); once a readable log is there again, its Xids come."""
    log = str(tmp_path / "kern.log")
    os.mkdir(log)
    with open(os.path.join(log, "x"), "w") as handle:
        handle.write("x")

    async def act():
        await bounded.settle_async(0.3, "the source polling a path it cannot read")
        os.remove(os.path.join(log, "x"))
        os.rmdir(log)
        # The file that replaces the directory is read from its start: its line is dated now, as a new Xid is (one dated
        # before the source started would be an old line the file held, no event).
        _append(log, XID_119.replace("2026-11-30T10:00:00+00:00", time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())))

    async def ready(queue, task):
        await bounded.settle_async(0.3, "the source started on a path it cannot read")

    events, task = asyncio.run(_collect("gpu_kernel_log", {"path": log, "host": "node7", "poll_interval": 0.05}, act, 1,
                                        ready=ready))
    assert task.cancelled()
    assert [event["gpuops"]["xid"] for event in events] == [119]


def test_kernel_log_flood_one_event_per_host_and_gpu():
    throttle = Throttle(300)
    node7, node8 = KernelLines("node7", {}, throttle), KernelLines("node8", {}, throttle)
    assert len(node7.feed([XID_119] * 500, 0)) == 1
    assert len(node7.feed([XID_119.replace("3b:00", "86:00")] * 50, 1)) == 1  # another GPU: not throttled by the first
    assert len(node8.feed([XID_119] * 50, 2)) == 1  # another host, the same bus id
    assert node7.feed([XID_119], 299) == [] and len(node7.feed([XID_119], 301)) == 1
    assert len([drop for drop in node7.dropped if drop["why"] == "throttled"]) == 499 + 49 + 1


def test_kmsg_record_with_more_fields_and_continuation_lines_is_one_event():
    record = ("3,2201,5140900,-,caller=T412;NVRM: Xid (PCI:0000:3b:00): 79, pid=<unknown>, GPU has fallen off the bus.\n"
              " SUBSYSTEM=pci\n DEVICE=+pci:0000:3b:00.0\n")
    line = kmsg_line(record)
    assert line == "[    5.140900] NVRM: Xid (PCI:0000:3b:00): 79, pid=<unknown>, GPU has fallen off the bus."
    events = KernelLines("node7", {}, Throttle(0), boot_time=1000.0).feed([line], 2000.0)
    assert [(event["gpuops"]["xid"], event["gpuops"]["rung"]) for event in events] == [(79, "reboot")]
    assert abs(events[0]["gpuops"]["time_epoch"] - 1005.1409) < 0.001


@pytest.mark.parametrize("stamp", ["nan", "NaN", "inf", "-inf", "1e999", ""])
def test_webhook_timestamp_that_is_no_time_is_rejected(stamp):
    """float("nan") is within every window (abs(now - nan) > w is False): a signed request stamped nan was never stale,
    replayable once its signature left the replay memory; inf raised OverflowError (a 500)."""
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda._alert_webhook_source import sign, verify

    body = b'{"alerts": []}'
    headers = {"X-Gpuops-Timestamp": stamp, "X-Gpuops-Signature": sign(SECRET, stamp, body)}
    why = verify(SECRET, headers, body, 1800000000.0, 300)
    assert why and ("not a number of seconds" in why or "unsigned" in why)


def test_webhook_timestamp_edges_and_the_signed_bytes():
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda._alert_webhook_source import sign, verify

    body, now = b'{"alerts": []}', 1800000000.0
    for stamp, ok in ((now + 300, True), (now + 301, False), (now - 300, True), (now - 301, False)):
        headers = {"X-Gpuops-Timestamp": "%d" % stamp, "X-Gpuops-Signature": sign(SECRET, "%d" % stamp, body)}
        assert (verify(SECRET, headers, body, now, 300) is None) is ok, stamp
    # The signature covers the timestamp: the same body and signature under another timestamp is rejected.
    headers = {"X-Gpuops-Timestamp": "%d" % (now + 1), "X-Gpuops-Signature": sign(SECRET, "%d" % now, body)}
    assert verify(SECRET, headers, body, now, 300) == "bad signature"
    headers = {"X-Gpuops-Timestamp": "%d" % now, "X-Gpuops-Signature": sign(SECRET, "%d" % now, body).upper()}
    assert verify(SECRET, headers, body, now, 300) == "bad signature"


@pytest.mark.parametrize("instance", ["all:9100", "ungrouped", "node07,node08:9100", "*:9100", "node0?", "~node.*", "@/tmp/hosts",
                                      "!node07", "&gpu_nodes", "node07 node08", "gpu[0:9]", "node07;reboot", "$(reboot)", ""])
def test_alert_whose_host_is_an_ansible_pattern_is_reported_never_a_limit(instance):
    """meta.hosts is the playbook's --limit: "all" or "a,b" or "node*" would run the ladder on other hosts."""
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda._alert_webhook_source import alert_events

    events, problems = alert_events({"alerts": [{"labels": {"alertname": "GpuopsGhostMemory", "instance": instance}}]})
    assert events == [] and len(problems) == 1 and problems[0].startswith("alert 0 (GpuopsGhostMemory)")


def test_alert_hosts_that_are_one_host():
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda._alert_webhook_source import alert_events

    for instance, host in (("node07:9100", "node07"), ("node07.example.com", "node07.example.com"), ("10.0.0.7:9100", "10.0.0.7"),
                           ("[fd00::7]:9100", "fd00::7"), ("gpu_node-7", "gpu_node-7")):
        events, problems = alert_events({"alerts": [{"labels": {"alertname": "GpuopsGhostMemory", "instance": instance}}]})
        assert problems == [] and events[0]["meta"] == {"hosts": host} and events[0]["gpuops"]["host"] == host
    events, problems = alert_events({"host": {"a": 1}, "alerts": [{"kind": "ghost_memory"}, {"kind": "unresponsive"}]})
    assert events == [] and len(problems) == 2


@pytest.mark.parametrize("name, args, says", [
    ("gpu_kernel_log", {"host": "all"}, "option host: its host 'all'"),
    ("gpu_kernel_log", {"paths": {"node07,node08": "/nonexistent"}}, "option paths: its host 'node07,node08'"),
    ("gpu_kernel_log", {"paths": {7: "/nonexistent", "node08": "/nonexistent"}}, "option paths: its host 7 is not a host name"),
    ("gpu_snapshot", {"host": "node*"}, "option host: its host 'node*'"),
    ("gpu_snapshot", {"nodes": [{"host": "~n", "state_path": "/nonexistent"}]}, "option nodes: its host '~n'"),
])
def test_source_host_options_that_are_patterns_are_named(name, args, says):
    with pytest.raises(OptionError, match=re.escape(says)):  # before anything is read (a source taking it runs forever)
        asyncio.run(asyncio.wait_for(_source(name)["main"](asyncio.Queue(), args), 10))


def test_webhook_huge_non_json_and_replayed_bodies():
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda._alert_webhook_source import sign

    port = _free_port()
    statuses = []

    async def act():
        loop = asyncio.get_running_loop()
        now = int(__import__("time").time())

        async def post(data, stamp=now):
            headers = {"X-Gpuops-Timestamp": str(stamp), "X-Gpuops-Signature": sign(SECRET, stamp, data)}
            statuses.append(await loop.run_in_executor(None, _post, port, data, headers))

        huge = json.dumps({"alerts": [], "pad": "x" * (3 << 20)}).encode()
        await post(huge)  # over aiohttp's 1 MiB: refused before any event
        await post(b"not json {")
        await post(b"\xff\xfe")
        await post(b"[1, 2]")
        await post(json.dumps(AM_BODY).encode(), now + 200)  # in the future, within the window
        await post(json.dumps(AM_BODY).encode(), now + 200)  # its replay

    events, _task = asyncio.run(_collect("gpu_alert_webhook", {"port": port, "secret": SECRET}, act, 1, ready=listening(port)))
    assert statuses == [413, 400, 400, 422, 202, 401]
    assert [event["gpuops"]["message"] for event in events if event["gpuops"]["type"] == "source_problem"] == [
        "the body is not an Alertmanager or gpu_watch webhook (no alerts list)"]
    events = [event for event in events if event["gpuops"]["type"] != "source_problem"]
    assert [event["meta"] for event in events] == [{"hosts": "node07"}]


def test_a_remediation_line_dated_in_the_future_answers_nothing():
    """Anyone on the node can write `logger -t gpuops-remediation "host=node7 ... epoch=9999999999"`: taken as an answer,
    it dropped every later Xid of node7 (each dated before 2286). A remediation dated after now (beyond the clock skew)
    is no answer; one dated within the skew still is."""
    import calendar

    now = calendar.timegm((2026, 11, 30, 9, 59, 1))
    lines_of = KernelLines("node7", {}, Throttle(0))
    forged = "2026-11-30T09:59:00+00:00 node7 gpuops-remediation[4321]: host=node7 action=gpu_reset epoch=9999999999 run=fake"
    assert lines_of.feed([forged], now) == []
    assert [event["gpuops"]["xid"] for event in lines_of.feed([XID_119], now + 60)] == [119]
    late = "2026-11-30T10:00:10+00:00 node7 gpuops-remediation[4321]: host=node7 action=gpu_reset epoch=%s run=r" % (now + 100)
    lines_of = KernelLines("node7", {}, Throttle(0))
    assert lines_of.feed([late, XID_119], now) == []
    assert lines_of.dropped[0]["why"] == "answered by gpu_reset (run r)"


def test_an_xid_dated_ahead_of_the_clock_is_answered_by_a_later_remediation_of_its_gpu():
    """A kernel line written while the node's clock ran a day ahead: no remediation can be dated after it, so a late copy
    of it after its reset started a run again. Its time says nothing: the source's first copy is an event, and once a
    remediation of its GPU came in, a copy of it is answered; another GPU's remediation answers nothing."""
    import calendar

    now = calendar.timegm((2026, 11, 30, 9, 0, 0))
    lines_of = KernelLines("node7", {}, Throttle(0))
    assert [event["gpuops"]["xid"] for event in lines_of.feed([XID_119], now)] == [119]  # dated 10:00, an hour ahead
    other = "2026-11-30T09:00:10+00:00 node7 gpuops-remediation[991]: action=gpu_reset gpus=00000000:86:00.0 epoch=%.3f run=r0" % (now + 10)
    assert [event["gpuops"]["xid"] for event in lines_of.feed([other, XID_119], now + 20)] == [119]
    reset = "2026-11-30T09:00:30+00:00 node7 gpuops-remediation[991]: action=gpu_reset gpus=00000000:3B:00.0 epoch=%.3f run=r1" % (now + 30)
    assert lines_of.feed([reset, XID_119], now + 40) == []
    assert lines_of.dropped[-1]["why"] == "answered by gpu_reset (run r1)"


def test_a_policy_file_that_is_a_fifo_or_too_big_is_refused_at_the_start_never_waited_on(tmp_path):
    """A FIFO at xid_policy_file blocked the source's start for ever (open(2) waits for a writer); a file of gigabytes
    would be read whole. Both are refused, naming the option and the path."""
    import threading

    fifo = str(tmp_path / "policy.fifo")
    os.mkfifo(fifo)
    caught = []
    loader = threading.Thread(target=lambda: caught.append(pytest.raises(OptionError, load_policy, "s", None, fifo)), daemon=True)
    loader.start()
    loader.join(10)
    if loader.is_alive():
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))  # let it go
        loader.join(10)
        pytest.fail("load_policy waited on the FIFO at xid_policy_file")
    assert "xid_policy_file: cannot read %s" % fifo in str(caught[0].value) and "not a regular file" in str(caught[0].value)
    big = tmp_path / "big.yml"
    with open(str(big), "wb") as handle:
        handle.truncate(2 * 1024 * 1024)
    with pytest.raises(OptionError, match="xid_policy_file: %s is larger than 1 MiB" % re.escape(str(big))):
        load_policy("s", None, str(big))
