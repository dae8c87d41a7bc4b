# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""An answered Xid stays answered across a restart: gpu_kernel_log, started after a reset's remediation line was
written, reads back the answers still inside answers_seconds before it takes events - from the followed file, or from
the journal (root's entries only, through a journalctl stand-in on a real pipe) - so that a late copy of the Xid that
reset answered makes no event, while an Xid after it, one whose only answer is older than the window, or one "answered"
by a line a user logged, does."""

import asyncio
import json
import sys
import time

from ansible_collections.gpuops.remediation.tests.unit.helpers.eda_sources import _source, events_after, iso, root_reset, xid_line


def _reset_line(epoch, bus="00000000:3B:00.0", run="r1"):
    return "%s node7 gpuops-remediation[991]: host=node7 action=gpu_reset gpus=%s epoch=%.3f run=%s" % (iso(epoch), bus, epoch, run)


def test_a_restarted_file_source_reads_back_the_answers_in_its_window(tmp_path):
    now = time.time()
    log = tmp_path / "syslog"
    # Written before this source started: a reset of 3b:00 ten minutes ago (inside the window), one of 86:00 two hours
    # ago (outside it).
    log.write_text(_reset_line(now - 600) + "\n" + _reset_line(now - 7200, "00000000:86:00.0", "r0") + "\n")
    journal = str(tmp_path / "journal.jsonl")  # root's record of both resets, which confirms their lines
    root_reset(journal, float("%.3f" % (now - 600)), "00000000:3B:00.0", "r1")
    root_reset(journal, float("%.3f" % (now - 7200)), "00000000:86:00.0", "r0")

    def append(real):
        with open(str(log), "a") as handle:
            if real is None:
                handle.write(xid_line(now, "af:00") + "\n")
                return
            handle.write(xid_line(now - 660) + "\n")                # a late copy of the Xid the reset answered
            handle.write(xid_line(now - 7260, "86:00") + "\n")      # answered only by the reset outside the window
            handle.write(xid_line(now - 30, "18:00") + "\n")        # after any reset: a new one

    source = _source("gpu_kernel_log")
    args = {"source": "file", "path": str(log), "host": "node7", "poll_interval": 0.05, "throttle_seconds": 0, "journal_path": journal}
    events = asyncio.run(events_after(source.main, args, append, 2))
    assert sorted(event["gpuops"]["pci_bus_id"] for event in events) == ["00000000:18:00.0", "00000000:86:00.0"]

    # Without the read-back (answers_seconds 0), the late copy starts a second run: what a restart did before.
    log.write_text(_reset_line(now - 600) + "\n")
    events = asyncio.run(events_after(source.main, dict(args, answers_seconds=0), append, 3))
    assert sorted(event["gpuops"]["pci_bus_id"] for event in events) == ["00000000:18:00.0", "00000000:3B:00.0", "00000000:86:00.0"]


FAKE_JOURNALCTL = r'''#!%(python)s
import json, sys, time
with open(%(calls)r, "a") as handle:
    handle.write(json.dumps(sys.argv[1:]) + "\n")
if "--follow" not in sys.argv:  # the read-back: what the journal holds, then the end
    with open(%(held)r) as handle:
        for line in handle:
            sys.stdout.write(line)
    sys.exit(0)
with open(%(late)r) as handle:
    late = handle.readlines()
sys.stdout.write(late[0])  # the sentinel, at once; the rest once the test says go
sys.stdout.flush()
for _wait in range(3000):
    try:
        open(%(go)r).close()
        break
    except OSError:
        time.sleep(0.01)
sys.stdout.write("".join(late[1:]))
sys.stdout.flush()
while True:
    time.sleep(60)
'''


def _entry(message, epoch, **fields):
    return dict({"__CURSOR": "c%f" % epoch, "__REALTIME_TIMESTAMP": str(int(epoch * 1e6)), "_HOSTNAME": "node7",
                 "MESSAGE": message}, **fields)


def test_a_restarted_journal_source_reads_back_roots_answers_only(tmp_path):
    now = time.time()
    calls, held, late = tmp_path / "calls", tmp_path / "held.jsonl", tmp_path / "late.jsonl"
    ours = "host=node7 action=gpu_reset gpus=%s epoch=%.3f run=r1"
    held.write_text("\n".join(json.dumps(entry) for entry in [
        _entry(ours % ("00000000:3B:00.0", now - 600), now - 600, _TRANSPORT="syslog", SYSLOG_IDENTIFIER="gpuops-remediation",
               _UID="0", _PID="991"),
        # a user's `logger -t gpuops-remediation` line: it answers nothing
        _entry(ours % ("00000000:86:00.0", now - 600), now - 600, _TRANSPORT="syslog", SYSLOG_IDENTIFIER="gpuops-remediation",
               _UID="1000", _PID="4242"),
    ]) + "\n")
    xid = "NVRM: Xid (PCI:0000:%s): 119, pid=4242, name=python3, Timeout after 6s of waiting for RPC response"
    late.write_text("\n".join(json.dumps(_entry(xid % bus, when, _TRANSPORT="kernel"))
                              for bus, when in (("af:00", now), ("3b:00", now - 660), ("86:00", now - 660))) + "\n")
    fake = tmp_path / "journalctl"
    go = tmp_path / "go"
    fake.write_text(FAKE_JOURNALCTL % {"python": sys.executable, "calls": str(calls), "held": str(held), "late": str(late),
                                       "go": str(go)})
    fake.chmod(0o755)

    source = _source("gpu_kernel_log")
    args = {"source": "journal", "host": "node7", "journalctl": str(fake), "poll_interval": 0.05, "throttle_seconds": 0}
    events = asyncio.run(events_after(source.main, args, lambda real: go.write_text("go") if real else None, 1))
    after = time.time()
    assert [event["gpuops"]["pci_bus_id"] for event in events if event["gpuops"]["type"] == "xid"] == ["00000000:86:00.0"]
    argvs = [json.loads(line) for line in calls.read_text().splitlines()]
    assert "--follow" not in argvs[0] and "SYSLOG_IDENTIFIER=gpuops-remediation" in argvs[0]
    since = [int(arg.split("@", 1)[1]) for arg in argvs[0] if arg.startswith("--since=@")]
    assert len(since) == 1 and int(now) - 3600 <= since[0] <= after - 3600, argvs[0]  # the window: answers_seconds back
    assert "--follow" in argvs[1]


# journalctl's matches as journalctl applies them (FIELD=value terms of different fields ANDed, "+" between groups ORed),
# over what the journal holds: root's answer, then a user's `logger -t gpuops-remediation` in a loop that never stops.
FLOODED_JOURNALCTL = r'''#!%(python)s
import json, sys, time
groups = [[]]
for arg in sys.argv[1:]:
    if arg == "+":
        groups.append([])
    elif "=" in arg and not arg.startswith("-"):
        groups[-1].append(arg.split("=", 1))
def wanted(entry):
    return any(all(entry.get(name) == value for name, value in group) for group in groups)
if "--follow" in sys.argv:
    sys.stdout.write(open(%(late)r).read())
    sys.stdout.flush()
    while True:
        time.sleep(60)
out = [json.loads(line) for line in open(%(held)r)]
forged = out.pop()
for entry in out:
    if wanted(entry):
        print(json.dumps(entry), flush=True)
while wanted(forged):
    sys.stdout.write((json.dumps(forged) + "\n") * 1000)
'''


def test_a_user_flooding_forged_answers_cannot_cost_the_read_back_its_deadline(tmp_path):
    """A user logs forged remediation lines without end: the read-back asks journalctl for root's lines alone, so it
    still ends in time with root's answer, and a late copy of the Xid root's reset answered makes no event."""
    now = time.time()
    held, late, fake = tmp_path / "held.jsonl", tmp_path / "late.json", tmp_path / "journalctl"
    ours = "host=node7 action=gpu_reset gpus=%s epoch=%.3f run=r1"
    held.write_text("\n".join(json.dumps(_entry(ours % (bus, now - 600), now - 600, _TRANSPORT="syslog", SYSLOG_IDENTIFIER="gpuops-remediation",
                                                _UID=uid, _PID="991")) for bus, uid in (("00000000:3B:00.0", "0"), ("00000000:18:00.0", "1000"))) + "\n")
    xid = "NVRM: Xid (PCI:0000:%s): 119, pid=4242, name=python3, Timeout after 6s of waiting for RPC response"
    # The late copy of the Xid root's reset answered, then a new Xid on af:00 (the sentinel: the follow has got here).
    late.write_text("\n".join(json.dumps(_entry(xid % bus, when, _TRANSPORT="kernel")) for bus, when in (("3b:00", now - 660), ("af:00", now))) + "\n")
    fake.write_text(FLOODED_JOURNALCTL % {"python": sys.executable, "held": str(held), "late": str(late)})
    fake.chmod(0o755)
    source = _source("gpu_kernel_log")
    source.RECALL_SECONDS = 5.0
    args = {"source": "journal", "host": "node7", "journalctl": str(fake), "poll_interval": 0.05, "throttle_seconds": 0}

    async def until_sentinel():
        queue = asyncio.Queue()
        task = asyncio.ensure_future(source.main(queue, args))
        events = []
        try:
            while not [event for event in events if event["gpuops"].get("pci_bus_id") == "00000000:AF:00.0"]:
                events.append(await asyncio.wait_for(queue.get(), 60))
            return events
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    events = asyncio.run(until_sentinel())
    assert [(event["gpuops"]["type"], event["gpuops"].get("pci_bus_id")) for event in events] == [("xid", "00000000:AF:00.0")], events
