# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the event sources' tests share: each source loaded by its file's path as ansible-rulebook loads it, a free
127.0.0.1 port, the webhook's secret, and Alertmanager alerts (well formed, and signed JSON that is not quite one)."""

import asyncio
import datetime
import importlib.util
import os
import socket

from ansible_collections.gpuops.remediation.tests.unit.helpers import bounded


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SOURCES = os.path.join(ROOT, "extensions", "eda", "plugins", "event_source")
SECRET = "s3cret"


def _source(name):
    """The event source extensions/eda/plugins/event_source/<name>.py, loaded by its path."""
    spec = importlib.util.spec_from_file_location("gpuops_eda_source_" + name, os.path.join(SOURCES, name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _free_port():
    """A 127.0.0.1 port no one listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _alert(instance):
    """An Alertmanager body of one firing GpuopsGhostMemory alert with that instance label."""
    return {"alerts": [{"status": "firing", "labels": {"alertname": "GpuopsGhostMemory", "instance": instance}}]}


# Signed JSON that is not quite an Alertmanager body: values of the wrong type where Alertmanager writes strings.
ODD_ALERTS = [
    {"status": "firing", "labels": {"alertname": "GpuopsGhostMemory", "instance": "node1:9100"}, "annotations": ["x"]},
    {"status": "firing", "labels": {"alertname": {"a": 1}, "instance": "node2:9100", "pci_bus_id": ["0"]}},
    {"status": "firing", "labels": {"alertname": "GpuopsGpuLost", "instance": 1.5}},
    {"status": "firing", "labels": {"alertname": ["GpuopsGpuLost"], "instance": "node3:9100"}, "fingerprint": {"f": 1}},
]


def root_reset(journal_path, epoch, bus, run):
    """What a reset of `bus` that ended well at `epoch` leaves in root's action journal (an intent, an ok outcome), as
    Journal writes them: what confirms its remediation line read from a file."""
    from ansible_collections.gpuops.remediation.plugins.module_utils.journal._writer import append_line

    stamp = datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")
    entry = "%s-%f" % (run, epoch)
    append_line(journal_path, {"ts": stamp, "run_id": run, "id": entry, "phase": "intent", "action": "gpu_reset",
                               "argv": ["nvidia-smi", "--gpu-reset", "-i", bus]})
    append_line(journal_path, {"ts": stamp, "run_id": run, "id": entry, "phase": "outcome", "action": "gpu_reset", "ok": True})


async def events_after(main, args, append, wanted):
    """main(queue, args) running; once it follows (a sentinel Xid on af:00, appended by append(None), came out as an
    event), append(True); the events after the sentinels once `wanted` came, and any more within 0.3 s."""
    queue = asyncio.Queue()
    task = asyncio.ensure_future(main(queue, args))
    loop = asyncio.get_running_loop()
    try:
        events, deadline = [], loop.time() + 30
        while not [event for event in events if event["gpuops"].get("pci_bus_id") == "00000000:AF:00.0"]:
            assert loop.time() < deadline, "the sentinel Xid never came out: the source does not follow"
            append(None)  # again until one comes out: one appended before the source opened the file is not followed
            try:
                events.append(await asyncio.wait_for(queue.get(), 0.5))
            except asyncio.TimeoutError:
                continue
        await bounded.settle_async(0.3, "the other sentinels' events out, then nothing but what append(True) brings")
        while not queue.empty():
            queue.get_nowait()
        append(True)
        events = []
        while len(events) < wanted:
            assert loop.time() < deadline + 30, "waited for %d events, got %r" % (wanted, events)
            events.append(await asyncio.wait_for(queue.get(), 30))
        await bounded.settle_async(0.3, "no event beyond the ones wanted")
        return events + [queue.get_nowait() for _index in range(queue.qsize())]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def iso(epoch):
    return datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S+00:00")


def xid_line(epoch, bus="3b:00"):
    """An Xid 119 line of node7's kernel at `epoch`, as a syslog file holds it."""
    return "%s node7 kernel: NVRM: Xid (PCI:0000:%s): 119, pid=4242, name=python3, Timeout after 6s of waiting for RPC response" % (
        iso(epoch), bus)
