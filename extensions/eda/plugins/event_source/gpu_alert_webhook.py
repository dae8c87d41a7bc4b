# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_alert_webhook: an ansible-rulebook event source receiving signed Alertmanager (or gpu_watch) webhooks."""

from __future__ import annotations

DOCUMENTATION = r"""
---
short_description: Receive the gpu_watch alerts from Alertmanager (or gpu_watch's own webhook), signed.
description:
  - An HTTP server that accepts a POST of an Alertmanager webhook body carrying the alerts of
    C(extensions/prometheus/gpuops.rules.yml), or of gpu_watch's own webhook (docs/watch.md), and puts one event per
    firing alert on the queue, with C(meta.hosts) the alert's host.
  - Every request must be signed - C(X-Gpuops-Timestamp) (seconds since the epoch) and C(X-Gpuops-Signature)
    (C(sha256=) and the hex HMAC-SHA256 of the secret over the timestamp, a dot and the body). An unsigned request,
    a bad signature (compared in constant time), a timestamp outside O(window_seconds), or a signature already seen
    (a replay), or either header given twice is rejected with 401 and put on no queue. A body over 1 MiB is answered 413; one that does not arrive
    within 10 seconds (a sender that stops half-way) 408, and its connection is closed.
  - "Each event: C(event.gpuops) with C(type) (alert), C(alert) (the alert name or gpu_watch finding kind), C(host),
    C(gpu) and C(pci_bus_id), C(gpu_index), C(rung) (reset for ghost memory and a recovery action, reboot for a lost
    or silent GPU, none otherwise), C(message), C(fingerprint)."
  - An alert naming no host, or a host that is not one host name (C(meta.hosts) is the playbook's limit, where C(all),
    C(a,b), C(node*), C(~regex) or C(@file) would name other hosts), is answered 422 and logged, never dropped
    silently. A timestamp that is no number of seconds (C(nan), C(inf)) is rejected. Never returns; ends when cancelled.
options:
  host:
    description: The address to listen on.
    type: str
    default: 127.0.0.1
  port:
    description: The port to listen on.
    type: int
    default: 5050
  secret:
    description: The shared HMAC secret. Give it, or O(secret_env).
    type: str
  secret_env:
    description: The environment variable holding the secret (keeps it out of the rulebook).
    type: str
    default: GPUOPS_WEBHOOK_SECRET
  window_seconds:
    description: How far the signed timestamp may be from this machine's clock.
    type: int
    default: 300
  host_label:
    description: The Alertmanager label naming the host; V(instance) drops its port (C(node07:9100) -> C(node07)).
    type: str
    default: instance
  inventory:
    description:
      - The inventory the rulebook runs the playbooks with (the file given to C(ansible-rulebook -i)), read with
        ansible-core at the start. An alert whose host is a group's name (its limit would take the whole group), a
        name both a host and a group have, or a name the inventory lacks makes no event - it is answered 422, logged,
        and put on the queue as C(type) V(source_problem) naming the host and why. Unset, the playbook still refuses a
        run whose host is not one inventory host (C(gpuops_event_host), checked by C(gpu_input_check)).
    type: str
"""

EXAMPLES = r"""
- name: The watch's alerts
  hosts: all
  sources:
    - gpuops.remediation.gpu_alert_webhook:
        host: 0.0.0.0
        port: 5050
        secret_env: GPUOPS_WEBHOOK_SECRET
  rules:
    - name: Ghost memory alert
      condition: event.gpuops.type == "alert" and event.gpuops.rung == "reset"
      action:
        run_playbook:
          name: gpuops.remediation.reset_gpu
"""

import asyncio
import json
import logging
import os
import sys
import time


def _import_collection():
    """ansible-rulebook runs this file by path: the collection is imported from the tree this file is in."""
    try:
        from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda import _source_shared, _alert_webhook_source  # noqa: F401
    except ImportError:
        # <root>/ansible_collections/gpuops/remediation/extensions/eda/plugins/event_source/<this file>
        sys.path.insert(0, os.path.abspath(os.path.join(os.path.abspath(__file__), *[os.pardir] * 8)))
        from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda import _source_shared, _alert_webhook_source  # noqa: F401
    return _source_shared, _alert_webhook_source


SOURCE = "gpu_alert_webhook"
SPEC = {
    "host": {"type": "str", "default": "127.0.0.1"},
    "port": {"type": "int", "default": 5050, "min": 1},
    "secret": {"type": "str"},
    "secret_env": {"type": "str", "default": "GPUOPS_WEBHOOK_SECRET"},
    "window_seconds": {"type": "int", "default": 300, "min": 1},
    "host_label": {"type": "str", "default": "instance"},
    "inventory": {"type": "str"},
}
LOGGER = logging.getLogger(__name__)
# How long a request's body may take to arrive (a module global: the tests shorten it). A sender that stops half-way
# (slowloris) is answered 408 and its connection closed, instead of holding it for ever.
BODY_SECONDS = 10.0


async def main(queue, args):
    """Serve until cancelled; each signed firing alert becomes an event."""
    from aiohttp import web  # ansible-rulebook's own dependency

    shared, alert = _import_collection()
    options = shared.check_args(SOURCE, args, SPEC)
    secret = options["secret"] or os.environ.get(options["secret_env"] or "")
    if not secret:
        raise shared.OptionError("%s: no secret: set option secret, or the environment variable %s (option secret_env)"
                                 % (SOURCE, options["secret_env"]))
    groups = shared.inventory_groups(SOURCE, options["inventory"]) if options["inventory"] else None
    seen = {}

    async def receive(request):
        try:
            body = await asyncio.wait_for(request.read(), BODY_SECONDS)
        except asyncio.TimeoutError:
            LOGGER.warning("%s: rejected a request from %s: its body did not arrive within %s s", SOURCE, request.remote, BODY_SECONDS)
            return web.json_response({"rejected": "the body did not arrive within %s s" % BODY_SECONDS}, status=408,
                                     headers={"Connection": "close"})
        now = time.time()
        why = alert.verify(secret, request.headers, body, now, options["window_seconds"])
        signature = request.headers.get(alert.SIGNATURE_HEADER)
        if why is None and signature in seen:
            why = "replayed: this signature was already received"
        if why:
            LOGGER.warning("%s: rejected a request from %s: %s", SOURCE, request.remote, why)
            return web.json_response({"rejected": why}, status=401)
        for old in [key for key, when in seen.items() if now - when > 2 * options["window_seconds"]]:
            del seen[old]
        seen[signature] = now
        try:
            payload = json.loads(body.decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            return web.json_response({"rejected": "not JSON: %s" % exc}, status=400)
        events, problems = alert.alert_events(payload, options["host_label"], groups)
        for event in events:
            await queue.put(event)
        for problem in problems:
            LOGGER.error("%s: %s", SOURCE, problem)
            await queue.put(shared.problem_event(SOURCE, None, problem))
        return web.json_response({"events": len(events), "problems": problems}, status=422 if problems and not events else 202)

    app = web.Application()
    app.router.add_post("/{tail:.*}", receive)
    runner = web.AppRunner(app)
    await runner.setup()
    try:
        await web.TCPSite(runner, options["host"], options["port"]).start()
        LOGGER.info("%s: listening on %s:%s", SOURCE, options["host"], options["port"])
        while True:
            await asyncio.sleep(3600)
    finally:
        await runner.cleanup()


if __name__ == "__main__":

    class _PrintQueue:
        async def put(self, event):
            print(event, flush=True)

    asyncio.run(main(_PrintQueue(), json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}))
