# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the event sources' tests share: each source loaded by its file's path as ansible-rulebook loads it, a free
127.0.0.1 port, the webhook's secret, and Alertmanager alerts (well formed, and signed JSON that is not quite one)."""

import importlib.util
import os
import socket


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
