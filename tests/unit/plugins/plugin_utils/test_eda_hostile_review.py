# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A hostile operator against the EDA side: the sources run as ansible-rulebook runs them (their file by path, main()
on an asyncio queue, real files and a real 127.0.0.1 socket), and the circuit breaker raced by real processes."""

import asyncio
import fcntl
import importlib.util
import json
import os
import socket
import subprocess
import sys
import time

import pytest

from ansible_collections.gpuops.remediation.plugins.module_utils._xid_policy import PolicyError, parse_policy
from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda._source_shared import OptionError
from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda._kernel_log_source import load_policy
from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda._snapshot_source import state_file_problem
from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda._alert_webhook_source import alert_events, sign
from .eda_webhook import until_listening

from .. import bounded

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
SOURCES = os.path.join(ROOT, "extensions", "eda", "plugins", "event_source")
SECRET = "s3cret"


def _source(name):
    spec = importlib.util.spec_from_file_location("gpuops_eda_hostile_" + name, os.path.join(SOURCES, name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# ---------------------------------------------------------------- the Xid policy

@pytest.mark.parametrize("code", ["\u00b2", "\u0667\u0669", "\uff17\uff19"])
def test_policy_code_in_digits_other_than_ascii_is_named(code, tmp_path):
    """str.isdigit() takes a superscript two (int() then raised a bare ValueError naming no option) and Arabic-Indic or
    full-width digits (taken as Xid 79): each is named as no Xid code, in the inline mapping and in the file."""
    with pytest.raises(PolicyError, match="xid_policy: the Xid code .* is not a number 1..999"):
        parse_policy({code: "reset"})
    path = tmp_path / "gpuops_xid_policy.yml"
    path.write_text(json.dumps({"gpuops_xid_policy": {code: "reset"}}), encoding="utf-8")
    with pytest.raises(OptionError, match="gpu_kernel_log: xid_policy_file .*: the Xid code"):
        load_policy("gpu_kernel_log", None, str(path))


def test_policy_codes_as_strings_and_integers_are_one_code():
    assert parse_policy({"79": "reboot", 79: "reboot", " 119 ": "reset"}) == {79: "reboot", 119: "reset"}
    with pytest.raises(PolicyError, match=r"Xid 79 is given twice, as 'reboot' and 'reset'"):
        parse_policy({"79": "reboot", 79: "reset"})
    with pytest.raises(PolicyError, match=r"Xid 79 maps to 'Reset', which is not a rung"):
        parse_policy({79: "Reset"})
    with pytest.raises(PolicyError, match=r"Xid 79 maps to 3"):
        parse_policy({79: 3})


# ---------------------------------------------------------------- the webhook's hosts

def _alert(instance):
    return {"alerts": [{"status": "firing", "labels": {"alertname": "GpuopsGhostMemory", "instance": instance}}]}


@pytest.mark.parametrize("instance", ["node1:node2", "node1:", "node1:9100x", "node1:\u0669\u0661\u0660\u0660"])
def test_instance_label_whose_port_is_no_number_is_no_host(instance):
    """Only a port is dropped from Prometheus's instance label: "node1:node2" was taken as host node1."""
    events, problems = alert_events(_alert(instance))
    assert events == [] and len(problems) == 1 and "not one host name" in problems[0], (events, problems)


@pytest.mark.parametrize("instance, host", [("node1:9100", "node1"), ("[::1]:9100", "::1"), ("fe80::1", "fe80::1"),
                                            ("node1.example.com:9100", "node1.example.com")])
def test_instance_label_with_a_port_is_its_host(instance, host):
    events, problems = alert_events(_alert(instance))
    assert problems == [] and [event["meta"]["hosts"] for event in events] == [host]


@pytest.mark.parametrize("host", ["node 1", "node1\n", "n\u00f6de1", "all", "node*", "!node1", "node1:node2", "node1,node2",
                                  "&gpu", "~node.*", "@hosts.txt", "-x", ""])
def test_hostile_host_labels_are_problems_never_a_limit(host):
    events, problems = alert_events({"alerts": [{"status": "firing", "labels": {"alertname": "GpuopsGpuLost", "host": host}}]},
                                    host_label="host")
    assert events == [] and len(problems) == 1, (host, events)


def test_resolved_alerts_make_no_event_in_either_shape():
    body = {"status": "resolved", "alerts": [
        {"status": "resolved", "labels": {"alertname": "GpuopsGhostMemory", "instance": "node1:9100"}}]}
    assert alert_events(body) == ([], [])
    watch = {"host": "node1", "alerts": [{"status": "resolved", "kind": "ghost_memory", "gpu_index": 0}]}
    assert alert_events(watch) == ([], [])


# ---------------------------------------------------------------- the webhook over a real socket

async def _raw(port, data, wait):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    await writer.drain()
    try:
        return await asyncio.wait_for(reader.read(4096), wait)
    finally:
        writer.close()


def test_webhook_body_that_stops_half_way_is_answered_408_and_the_next_request_served():
    """Slowloris: a sender that announces a body and stops half-way held its request (and the connection) for ever; it
    is answered 408 after BODY_SECONDS, and a signed request sent meanwhile is served."""
    module = _source("gpu_alert_webhook")
    module.BODY_SECONDS = 1.0
    port = _free_port()
    now = int(time.time())
    body = json.dumps(_alert("node07:9100")).encode()
    signed = (b"POST /alerts HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
              b"X-Gpuops-Timestamp: %d\r\nX-Gpuops-Signature: %s\r\nConnection: close\r\n\r\n%s"
              % (len(body), now, sign(SECRET, now, body).encode(), body))

    async def run():
        queue = asyncio.Queue()
        task = asyncio.ensure_future(module.main(queue, {"port": port, "secret": SECRET}))
        try:
            await until_listening(port)
            slow = asyncio.ensure_future(_raw(port, b"POST /alerts HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n"
                                                    b"X-Gpuops-Timestamp: 1\r\nX-Gpuops-Signature: sha256=0\r\n\r\n{", 5))
            await asyncio.sleep(0.2)
            served = await _raw(port, signed, 5)
            started = time.time()
            answer = await slow
            return served, answer, time.time() - started, await asyncio.wait_for(queue.get(), 5)
        finally:
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    served, answer, _took, event = asyncio.run(run())
    assert served.startswith(b"HTTP/1.1 202"), served
    assert answer.startswith(b"HTTP/1.1 408"), answer
    assert b"did not arrive within 1.0 s" in answer
    assert event["meta"] == {"hosts": "node07"}


def test_webhook_duplicated_and_wrong_prefix_signatures_over_a_socket():
    """The HMAC is over the exact bytes sent (a re-serialised body with the same JSON fails), a sha1= prefix or an
    upper-case digest fails, a signature or timestamp header given twice fails (the first was taken), and a replay of
    the same signed body in the window is refused."""
    module = _source("gpu_alert_webhook")
    port = _free_port()
    now = int(time.time())
    body = b'{"alerts": [{"status": "firing", "labels": {"alertname": "GpuopsGhostMemory", "instance": "node07:9100"}}]}'
    good = sign(SECRET, now, body)

    def request(data, signature, stamp=now, extra=b""):
        return (b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\nX-Gpuops-Timestamp: %s\r\nX-Gpuops-Signature: %s\r\n"
                b"%sConnection: close\r\n\r\n%s" % (len(data), str(stamp).encode(), signature.encode(), extra, data))

    reserialised = json.dumps(json.loads(body), separators=(",", ":")).encode()
    cases = [
        request(reserialised, good),
        request(body, "sha1=" + good.split("=", 1)[1]),
        request(body, "sha256=" + good.split("=", 1)[1].upper()),
        request(body, good, now - 330),
        request(body, sign(SECRET, now + 330, body), now + 330),
        # a header given twice: the first was taken (a proxy may read the last): neither is
        request(body, good, extra=b"X-Gpuops-Signature: sha256=00\r\n"),
        request(body, good, extra=b"x-gpuops-timestamp: %d\r\n" % (now - 1000)),
        request(body, good),
        request(body, good),  # the replay
    ]

    async def run():
        queue = asyncio.Queue()
        task = asyncio.ensure_future(module.main(queue, {"port": port, "secret": SECRET}))
        try:
            await until_listening(port)
            answers = [await _raw(port, data, 5) for data in cases]
            await asyncio.sleep(0.3)
            return [answer.split(b" ", 2)[1] for answer in answers], queue.qsize()
        finally:
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    codes, queued = asyncio.run(run())
    assert codes == [b"401", b"401", b"401", b"401", b"401", b"401", b"401", b"202", b"401"]
    assert queued == 1


# ---------------------------------------------------------------- gpu_snapshot: whose state file

def test_state_file_problem_of_another_user_or_writable_by_anyone(tmp_path):
    path = tmp_path / "watch_state.json"
    assert state_file_problem(str(path)) is None  # missing: nothing known, no problem
    path.write_text("{}")
    os.chmod(str(tmp_path), 0o755)
    os.chmod(str(path), 0o640)
    assert state_file_problem(str(path)) is None
    os.chmod(str(path), 0o646)
    assert "option state_path: %r is refused: others can write it (mode 0646)" % str(path) in state_file_problem(str(path))
    os.chmod(str(path), 0o640)
    os.chmod(str(tmp_path), 0o777)
    assert "(at %s): others can write it (mode 0777" % tmp_path in state_file_problem(str(path))
    os.chmod(str(tmp_path), 0o1777)  # sticky: others cannot replace it, but could have put it there first
    assert "(at %s): others can write it (mode 1777" % tmp_path in state_file_problem(str(path))
    os.chmod(str(tmp_path), 0o755)
    link = tmp_path / "linked.json"
    link.symlink_to(path)
    assert "it is a symbolic link" in state_file_problem(str(link))
    if os.geteuid() == 0:
        os.chown(str(path), 65534, 65534)
        assert "it belongs to uid 65534" in state_file_problem(str(path))


def _ghost_state(epoch):
    return {"version": 1, "updated_epoch": epoch, "last_success_epoch": epoch,
            "xid": {"last_epoch": None, "seen": [], "counts": {}}, "active": {},
            "gpus": {"GPU-1": {"high_usage_since": None, "ghost_samples": 3, "last_ghost_mib": 4096,
                               "identity": {"index": 0, "uuid": "GPU-1", "name": "H100", "pci_bus_id": "00000000:18:00.0"}}}}


def test_snapshot_does_not_believe_a_state_file_anyone_can_write(tmp_path):
    """A world-writable watch state file: anyone could write ghost memory into it and start a GPU reset (the jobs on that
    GPU killed). gpu_snapshot reports it once, makes no ghost_memory event, and reads it again once it is fixed."""
    from ansible_collections.gpuops.remediation.plugins.module_utils.watch._watch import load_state

    path = tmp_path / "watch_state.json"
    path.write_text(json.dumps(_ghost_state(time.time())))
    state, problem = load_state(str(path))
    assert problem is None, problem  # a state the watch writes: only its owner and mode are wrong
    os.chmod(str(path), 0o666)
    module = _source("gpu_snapshot")

    async def run():
        queue = asyncio.Queue()
        task = asyncio.ensure_future(module.main(queue, {
            "mode": "state_file", "host": "node07", "state_path": str(path), "journal_path": str(tmp_path / "none.jsonl"),
            "duration_seconds": 0, "poll_interval": 0.05, "throttle_seconds": 3600}))
        try:
            await asyncio.sleep(0.6)
            first = []
            while not queue.empty():
                first.append(queue.get_nowait())
            os.chmod(str(path), 0o640)
            fixed = await asyncio.wait_for(queue.get(), 5)
            return first, fixed
        finally:
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    first, fixed = asyncio.run(run())
    assert [event["gpuops"]["type"] for event in first] == ["source_problem"], first
    assert "option state_path" in first[0]["gpuops"]["message"] and "others can write it (mode 0666)" in first[0]["gpuops"]["message"]
    assert fixed["gpuops"]["type"] == "ghost_memory" and fixed["meta"] == {"hosts": "node07"}


# ---------------------------------------------------------------- the breaker raced by real processes

def _flock_waiters(path):
    """How many other processes have the lock file at path open (their /proc/<pid>/fd): each run opens it, then polls
    for its flock (_lock.flock_within never blocks in the kernel, so /proc/locks lists no waiter)."""
    waiting = 0
    for pid in (name for name in os.listdir("/proc") if name.isdigit() and int(name) != os.getpid()):
        try:
            links = [os.readlink("/proc/%s/fd/%s" % (pid, fd)) for fd in os.listdir("/proc/%s/fd" % pid)]
        except OSError:
            continue
        waiting += path in links
    return waiting


def test_breaker_processes_racing_for_the_last_place_one_passes(tmp_path, collections_root):
    """Four real runs (ansible, the action gpu_breaker) decide at once for the last place of max_count 1: they wait on
    the state directory's lock (held here until all have started) and exactly one passes, three are refused naming it."""
    state = tmp_path / "breaker"
    state.mkdir(mode=0o700)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collections_root, ANSIBLE_LOCALHOST_WARNING="false",
               ANSIBLE_INVENTORY_UNPARSED_WARNING="false", ANSIBLE_NOCOLOR="1", ANSIBLE_CALLBACK_RESULT_FORMAT="json")
    # The ad-hoc CLI through this Python (ansible-test's units venv has the ansible package but no `ansible` script).
    ansible = [sys.executable, "-c", "import sys; from ansible.cli.adhoc import main; main(['ansible'] + sys.argv[1:])"]
    snapshot = {"gpus": [{"index": 0, "state": "stuck"}], "verdict": {"rung": "reset", "reasons": []}}
    runs = []
    with open(str(state / ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a fresh file of this test: nobody else holds it
        for host in ("nodeA", "nodeB", "nodeC", "nodeD"):
            args = {"host": host, "fleet_size": 10, "max_count": 1, "state_dir": str(state), "snapshot": snapshot,
                    "max_rung": "reset", "run_id": "race-" + host}
            argv = ansible + ["localhost", "-c", "local", "-m", "gpuops.remediation.gpu_breaker", "-a", json.dumps(args)]
            runs.append(bounded.start(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      universal_newlines=True, cwd=str(tmp_path)))
        # Until the kernel shows all four runs with the lock open, polling for it: none decided, none recorded.
        deadline = time.monotonic() + 120
        while _flock_waiters(str(state / ".lock")) < 4:
            assert time.monotonic() < deadline and all(run.poll() is None for run in runs), \
                [bounded.communicate(run, "an ad-hoc breaker run")[0] for run in runs if run.poll() is not None]
            time.sleep(0.05)
        assert [run.poll() for run in runs] == [None] * 4
        assert [name for name in os.listdir(str(state)) if name.endswith(".breaker.json")] == []
        fcntl.flock(lock, fcntl.LOCK_UN)
    outputs = [bounded.communicate(run, "an ad-hoc breaker run", timeout=120)[0] for run in runs]
    results = []
    for output in outputs:
        assert "localhost | SUCCESS => " in output, output  # ad-hoc's own output: the task's result as JSON
        results.append(json.loads(output[output.index("localhost | SUCCESS => ") + 23:]))
    passed = [result for result in results if result["recorded"]]
    refused = [result for result in results if result["refusal"]]
    assert len(passed) == 1 and len(refused) == 3, results
    records = sorted(name for name in os.listdir(str(state)) if name.endswith(".breaker.json"))
    assert len(records) == 1
    winner = records[0].split(".")[0]
    assert all("%s (reset rung by run race-%s" % (winner, winner) in result["refusal"] for result in refused)


# ---------------------------------------------------------------- signed JSON that is not quite an Alertmanager body

ODD_ALERTS = [
    {"status": "firing", "labels": {"alertname": "GpuopsGhostMemory", "instance": "node1:9100"}, "annotations": ["x"]},
    {"status": "firing", "labels": {"alertname": {"a": 1}, "instance": "node2:9100", "pci_bus_id": ["0"]}},
    {"status": "firing", "labels": {"alertname": "GpuopsGpuLost", "instance": 1.5}},
    {"status": "firing", "labels": {"alertname": ["GpuopsGpuLost"], "instance": "node3:9100"}, "fingerprint": {"f": 1}},
]


def test_alert_values_of_the_wrong_type_are_taken_as_missing_never_an_exception():
    """A list where annotations are a mapping, a mapping or a list as the alert name, a number as the instance: each
    raised (AttributeError, TypeError: unhashable) and the webhook answered 500 for the whole request, every other alert
    of it lost; now each alert is an event or a problem of its own."""
    events, problems = alert_events({"alerts": ODD_ALERTS})
    assert [(event["meta"]["hosts"], event["gpuops"]["alert"], event["gpuops"]["rung"]) for event in events] == [
        ("node1", "GpuopsGhostMemory", "reset"), ("node2", None, "none"), ("node3", None, "none")]
    assert events[1]["gpuops"]["gpu"] is None and events[2]["gpuops"]["fingerprint"] is None
    assert problems == ["alert 2 (GpuopsGpuLost): its host 1.5 is not a host name"]
    json.dumps(events)
    watch = {"host": "node4", "alerts": [{"status": "firing", "kind": ["ghost_memory"], "gpu_index": {"i": 0},
                                          "pci_bus_id": 3, "message": ["m"]}]}
    events, problems = alert_events(watch)
    assert problems == [] and [(e["gpuops"]["alert"], e["gpuops"]["gpu_index"], e["gpuops"]["gpu"]) for e in events] == [
        (None, None, None)]


def test_webhook_answers_a_signed_odd_body_with_its_events_not_500():
    module = _source("gpu_alert_webhook")
    port = _free_port()
    now = int(time.time())
    body = json.dumps({"alerts": ODD_ALERTS}).encode()
    data = (b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\nX-Gpuops-Timestamp: %d\r\nX-Gpuops-Signature: %s\r\n"
            b"Connection: close\r\n\r\n%s" % (len(body), now, sign(SECRET, now, body).encode(), body))

    async def run():
        queue = asyncio.Queue()
        task = asyncio.ensure_future(module.main(queue, {"port": port, "secret": SECRET}))
        try:
            await until_listening(port)
            answer = await _raw(port, data, 5)
            await asyncio.sleep(0.3)
            return answer, [queue.get_nowait() for _index in range(queue.qsize())]
        finally:
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    answer, events = asyncio.run(run())
    assert answer.startswith(b"HTTP/1.1 202"), answer
    assert [event["gpuops"]["type"] for event in events] == ["alert", "alert", "alert", "source_problem"]


def test_snapshot_state_file_that_cannot_be_read_is_said_once_not_hidden(tmp_path):
    """A corrupt state file (or one the source's user cannot read) made no event and said nothing: a source that never
    sees anything looked like a healthy fleet. It is a source_problem naming state_path, once; fixed, it is read."""
    path = tmp_path / "watch_state.json"
    path.write_text('{"version": 1, "gpus": ')
    module = _source("gpu_snapshot")

    async def run():
        queue = asyncio.Queue()
        task = asyncio.ensure_future(module.main(queue, {
            "mode": "state_file", "host": "node07", "state_path": str(path), "journal_path": str(tmp_path / "none.jsonl"),
            "duration_seconds": 0, "poll_interval": 0.05, "throttle_seconds": 3600}))
        try:
            await asyncio.sleep(0.6)
            first = [queue.get_nowait() for _index in range(queue.qsize())]
            path.write_text(json.dumps(_ghost_state(time.time())))
            return first, await asyncio.wait_for(queue.get(), 5)
        finally:
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    first, fixed = asyncio.run(run())
    assert [event["gpuops"]["type"] for event in first] == ["source_problem"], first
    assert first[0]["gpuops"]["message"].startswith("option state_path: the state file %s is corrupt" % path)
    assert fixed["gpuops"]["type"] == "ghost_memory"


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


@pytest.mark.parametrize("name, option", [("gpu_kernel_log", "poll_interval"), ("gpu_kernel_log", "throttle_seconds"),
                                          ("gpu_snapshot", "duration_seconds"), ("gpu_snapshot", "poll_interval")])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_a_number_option_that_is_not_finite_is_named(name, option, value):
    """YAML's .nan passed every minimum (nan < min is false): poll_interval .nan made asyncio.sleep return at once, a
    source spinning on a core; duration_seconds .nan made every condition last; throttle_seconds .nan throttled none."""
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda._source_shared import check_args

    with pytest.raises(OptionError, match=r"^%s: option %s must be a float, got %r$" % (name, option, value)):
        check_args(name, {option: value}, _source(name).SPEC)


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
