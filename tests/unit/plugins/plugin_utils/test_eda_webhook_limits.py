# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_alert_webhook over a real 127.0.0.1 socket, run as ansible-rulebook runs it: a body that stops half way is
answered 408 and the next request served, duplicated and wrong-prefix signatures refused, a signed odd body answered
with its events, not 500."""

import asyncio
import json
import time

import pytest

from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda._alert_webhook_source import sign
from ansible_collections.gpuops.remediation.tests.unit.helpers import bounded
from ansible_collections.gpuops.remediation.tests.unit.helpers.eda_sources import ODD_ALERTS, SECRET, _alert, _free_port, _source
from ansible_collections.gpuops.remediation.tests.unit.helpers.eda_webhook import exchange as _raw, serve, until_listening


# ---------------------------------------------------------------- the webhook over a real socket

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
            await bounded.settle_async(0.2, "the slow client connected before the signed one")
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

    async def exchange_all(port):
        return [(await _raw(port, data, 5)).split(b" ", 2)[1] for data in cases]

    codes, events = serve({"secret": SECRET}, exchange_all)
    queued = len(events)
    assert codes == [b"401", b"401", b"401", b"401", b"401", b"401", b"401", b"202", b"401"]
    assert queued == 1


def test_webhook_answers_a_signed_odd_body_with_its_events_not_500():
    module = _source("gpu_alert_webhook")
    port = _free_port()
    now = int(time.time())
    body = json.dumps({"alerts": ODD_ALERTS}).encode()
    data = (b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\nX-Gpuops-Timestamp: %d\r\nX-Gpuops-Signature: %s\r\n"
            b"Connection: close\r\n\r\n%s" % (len(body), now, sign(SECRET, now, body).encode(), body))

    answer, events = serve({"secret": SECRET}, lambda port: _raw(port, data, 5))
    assert answer.startswith(b"HTTP/1.1 202"), answer
    assert [event["gpuops"]["type"] for event in events] == ["alert", "alert", "alert", "source_problem"]
