# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How gpu_alert_webhook serves HTTP: over TLS with a key only its owner can read, a connection cut off when a
request's headers do not arrive in time (aiohttp bounds no header read), and events handed to ansible-rulebook
through a bounded queue of the source's own, so that a request is answered at once whatever the rulebook is doing.
"""

from __future__ import annotations

import asyncio
import collections
import os
import stat


class _HeaderDeadline(asyncio.Protocol):
    """aiohttp's request handler for one connection, closed when the next request's headers are not all in within
    `seconds` of the connection (or of the previous answer): a client that trickles its headers, or sends none, holds
    a connection for no longer than that."""

    def __init__(self, inner, seconds, open_requests):
        self._inner, self._seconds, self._open = inner, seconds, open_requests
        self._transport = self._timer = None

    def arm(self):
        self.disarm()
        self._timer = asyncio.get_running_loop().call_later(self._seconds, self._expire)

    def disarm(self):
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expire(self):
        self._timer = None
        self._transport.close()

    def connection_made(self, transport):
        self._transport = transport
        self._open[transport] = self
        self.arm()
        self._inner.connection_made(transport)

    def data_received(self, data):
        self._inner.data_received(data)

    def eof_received(self):
        return self._inner.eof_received()

    def pause_writing(self):
        self._inner.pause_writing()

    def resume_writing(self):
        self._inner.resume_writing()

    def connection_lost(self, exc):
        self.disarm()
        self._open.pop(self._transport, None)
        self._inner.connection_lost(exc)


def tls_context(certfile, keyfile):
    """The server's TLS context, or ValueError naming the option: both files or neither, and the key readable by its
    owner alone (the source's own account or root), as ssh requires of a private key."""
    import ssl

    if not certfile and not keyfile:
        return None
    if not certfile or not keyfile:
        raise ValueError("options certfile and keyfile go together: got certfile %r, keyfile %r" % (certfile, keyfile))
    try:
        info = os.stat(keyfile)
    except OSError as exc:
        raise ValueError("option keyfile %s: %s" % (keyfile, exc.strerror))
    if info.st_uid not in (0, os.geteuid()):
        raise ValueError("option keyfile %s belongs to uid %d, not to this account or root" % (keyfile, info.st_uid))
    if stat.S_IMODE(info.st_mode) & 0o077:
        raise ValueError("option keyfile %s has mode %04o: a private key must be readable by its owner alone (chmod 600)"
                         % (keyfile, stat.S_IMODE(info.st_mode)))
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(certfile, keyfile)
    except (OSError, ssl.SSLError) as exc:
        raise ValueError("options certfile %s / keyfile %s: %s" % (certfile, keyfile, exc))
    return context


def _host_of(event):
    meta = event.get("meta")
    return meta.get("hosts") if isinstance(meta, dict) else None


class Handover:
    """The source's bounded queue in front of ansible-rulebook's (which holds one event and is full while the rulebook
    works): a request's events go in at once or not at all, and a task of its own hands them on in order. Each host
    has a share of it (host_size events waiting, those of no host - the problems - one share together), so that one
    host's storm leaves room for the others' alerts."""

    def __init__(self, queue, size, host_size=None):
        self._queue, self._waiting = queue, asyncio.Queue(size)
        self.host_size = host_size or size
        self._of_host = collections.Counter()
        self._task = None

    def offer(self, events):
        """None when every event was taken; else why none was (no room for them all, or a host past its share)."""
        if self._waiting.maxsize - self._waiting.qsize() < len(events):
            return "%d events wait for the rulebook already (option queue_size)" % self._waiting.maxsize
        wanted = collections.Counter(_host_of(event) for event in events)
        for host, count in sorted(wanted.items(), key=lambda item: str(item[0])):
            if self._of_host[host] + count > self.host_size:
                return "%d events of %s wait for the rulebook already, its share of the queue (option host_queue_size %d)" % (
                    self._of_host[host], "host %s" % host if host is not None else "no host", self.host_size)
        for event in events:
            self._of_host[_host_of(event)] += 1
            self._waiting.put_nowait(event)
        return None

    async def _forward(self):
        while True:
            event = await self._waiting.get()
            try:
                await self._queue.put(event)
            finally:
                self._of_host[_host_of(event)] -= 1

    def start(self):
        self._task = asyncio.ensure_future(self._forward())

    async def stop(self):
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)


async def serve(app, host, port, context, header_seconds):
    """Start serving `app`; returns the coroutine function that stops it. Each connection's headers are bounded by
    header_seconds (the TLS handshake too); a request reaching the app stops its connection's clock until answered."""
    from aiohttp import web  # ansible-rulebook's own dependency

    open_requests = {}

    @web.middleware
    async def headers_in(request, handler):
        deadline = open_requests.get(request.transport)
        if deadline is not None:
            deadline.disarm()
        try:
            return await handler(request)
        finally:
            if deadline is not None:
                deadline.arm()

    app.middlewares.append(headers_in)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _HeaderDeadline(runner.server(), header_seconds, open_requests), host, port,
                                      ssl=context, ssl_handshake_timeout=header_seconds if context else None,
                                      reuse_address=True)

    async def stop():
        server.close()
        await runner.cleanup()
        await server.wait_closed()

    return stop
