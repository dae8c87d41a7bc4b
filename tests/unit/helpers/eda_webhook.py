# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the webhook source's tests share: waiting until the source listens on its 127.0.0.1 port, one raw HTTP
exchange with it, and a whole serve-exchange-collect round."""

from __future__ import annotations

import asyncio

import pytest

from ansible_collections.gpuops.remediation.tests.unit.helpers import bounded
from ansible_collections.gpuops.remediation.tests.unit.helpers.eda_sources import _free_port, _source


async def until_listening(port, seconds=30.0):
    """Returns once a connection to 127.0.0.1:port is accepted; fails the test when none is within `seconds`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while True:
        try:
            dummy, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            if loop.time() > deadline:
                raise AssertionError("the webhook source never listened on 127.0.0.1:%d" % port)
            await asyncio.sleep(0.05)
            continue
        writer.close()
        return


async def exchange(port, data, wait=5, context=None):
    """The bytes 127.0.0.1:port answers to `data` (over TLS with `context`), within `wait` seconds."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context)
    writer.write(data)
    await writer.drain()
    try:
        return await asyncio.wait_for(reader.read(65536), wait)
    finally:
        writer.close()


def bearer_post(port, body, token):
    """exchange() of one POST of `body` with a bearer token (what Alertmanager's http_config.authorization sends)."""
    return exchange(port, b"POST /alerts HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"
                    % (token.encode(), len(body), body))


def serve(options, exchange_with):
    """Run the webhook source with options on a free port, await exchange_with(port) once it listens; (its result, the
    events it queued), the source cancelled."""
    module = _source("gpu_alert_webhook")
    port = _free_port()

    async def run():
        queue = asyncio.Queue()
        task = asyncio.ensure_future(module.main(queue, dict(options, port=port)))
        try:
            await until_listening(port)
            result = await exchange_with(port)
            await bounded.settle_async(0.3, "nothing queued beyond what the exchange was answered for")
            return result, [queue.get_nowait() for _index in range(queue.qsize())]
        finally:
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    return asyncio.run(run())
