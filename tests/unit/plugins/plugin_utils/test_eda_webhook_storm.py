# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A storm never silences gpu_alert_webhook: with ansible-rulebook's queue (one event) full and never read - the
rulebook busy with its runs - every request is answered at once, accepted while the source's own queue has room and
503 with Retry-After after, nothing taken of a request that does not fit whole; once the rulebook reads again, the
retry is accepted and the events reach it in the order they came."""

import asyncio
import json
import time

import pytest

from ansible_collections.gpuops.remediation.tests.unit.helpers import bounded
from ansible_collections.gpuops.remediation.tests.unit.helpers.eda_sources import _alert, _free_port, _source
from ansible_collections.gpuops.remediation.tests.unit.helpers.eda_webhook import until_listening

QUEUE_SIZE = 3


def _post(port, body):
    data = (b"POST /alerts HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer tok3n\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"
            % (len(body), body))

    async def exchange():
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(data)
        await writer.drain()
        try:
            return await asyncio.wait_for(reader.read(65536), 5)  # "at once": a request held longer fails here
        finally:
            writer.close()

    return exchange()


def _one(host):
    return json.dumps(_alert(host + ":9100")).encode()


def test_a_full_rulebook_queue_is_answered_at_once_503_retry_after_then_served_in_order():
    module = _source("gpu_alert_webhook")
    port = _free_port()

    async def run():
        rulebook = asyncio.Queue(1)  # ansible-rulebook's source queue
        task = asyncio.ensure_future(module.main(rulebook, {"port": port, "auth": "bearer", "secret": "tok3n",
                                                            "queue_size": QUEUE_SIZE}))
        try:
            await until_listening(port)
            answers = []
            for number in range(1, 9):
                started = time.monotonic()
                answers.append((number, await _post(port, _one("node%d" % number)), time.monotonic() - started))
            two = json.dumps({"alerts": _alert("nodeA:9100")["alerts"] + _alert("nodeB:9100")["alerts"]}).encode()
            split = await _post(port, two)
            first = await asyncio.wait_for(rulebook.get(), 5)  # the rulebook reads one: one place is free again
            retry = await _post(port, _one("node9"))
            split_again = await _post(port, two)  # still no room for two
            got = [first] + [await asyncio.wait_for(rulebook.get(), 5) for _index in range(QUEUE_SIZE + 2)]
            await bounded.settle_async(0.3, "nothing more handed to the rulebook")
            return answers, split, retry, split_again, got, rulebook.qsize()
        finally:
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    answers, split, retry, split_again, got, left = asyncio.run(run())
    codes = [answer.split(b" ", 2)[1] for _number, answer, _took in answers]
    # One event in the rulebook's queue, one in the hands of the source's forwarder blocked on it, QUEUE_SIZE waiting.
    assert codes == [b"202"] * (QUEUE_SIZE + 2) + [b"503"] * (8 - QUEUE_SIZE - 2), codes
    for _number, answer, _took in answers[QUEUE_SIZE + 2:]:
        assert b"Retry-After: 5" in answer and b"3 events wait for the rulebook already (option queue_size)" in answer, answer
    assert split.startswith(b"HTTP/1.1 503") and split_again.startswith(b"HTTP/1.1 503")
    assert retry.startswith(b"HTTP/1.1 202"), retry
    assert [event["meta"]["hosts"] for event in got] == ["node1", "node2", "node3", "node4", "node5", "node9"]
    assert left == 0  # nothing of the two-alert request that did not fit was taken
