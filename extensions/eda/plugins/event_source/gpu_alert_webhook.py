# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_alert_webhook: an ansible-rulebook event source receiving signed Alertmanager (or gpu_watch) webhooks."""

from __future__ import annotations

DOCUMENTATION = r"""
---
short_description: Receive the gpu_watch alerts from Alertmanager (bearer or basic auth, over TLS) or from a signing relay.
description:
  - An HTTP server that accepts a POST of an Alertmanager webhook body carrying the alerts of
    C(extensions/prometheus/gpuops.rules.yml), or of gpu_watch's own webhook (docs/watch.md), and puts one event per
    firing alert on the queue, with C(meta.hosts) the alert's host.
  - "Every request must carry the credentials of O(auth): V(hmac) (the default, for a relay that signs) -
    C(X-Gpuops-Timestamp) (seconds since the epoch) and C(X-Gpuops-Signature) (C(sha256=) and the hex HMAC-SHA256 of
    the secret over the timestamp, a dot and the body), a timestamp within O(window_seconds) and a
    signature not seen before (a replay); V(bearer) - C(Authorization: Bearer <secret>), what Alertmanager's
    C(http_config.authorization) sends; V(basic) - C(Authorization: Basic) of O(username) and the secret, what
    C(http_config.basic_auth) sends (gpu_watch's own webhook sends what C(gpu_watch_webhook_headers) holds, such as
    the bearer token). Credentials are compared in constant time. A request without them, with wrong
    ones, or with a credential header given twice is rejected with 401 and put on no queue (a bearer or basic request
    as soon as its headers are in, its body unread)."
  - With O(certfile) and O(keyfile) it serves HTTPS (TLS 1.2 or later). A bearer token or password crosses the network
    only over TLS - O(auth) V(bearer) or V(basic) on an address other than the loopback without TLS is refused.
  - A body over 1 MiB is answered 413; one that does not arrive within 10 seconds (a sender that stops half-way) 408,
    and its connection is closed. A connection whose request headers (or TLS handshake) are not all in within 10
    seconds of its opening or of its previous answer is closed.
  - Every request is answered at once - its events go to a queue of the source's own, of O(queue_size) events, which
    hands them to ansible-rulebook in order; each host may hold O(host_queue_size) of them. When they do not all fit
    (no room left, or a host past its share), none is taken and the answer is 503 with C(Retry-After) (Alertmanager
    retries it, and a relay can); one host's storm is answered 503 while the other hosts' alerts are still taken.
  - "Each event: C(event.gpuops) with C(type) (alert), C(alert) (the alert name or gpu_watch finding kind), C(host),
    C(gpu) and C(pci_bus_id), C(gpu_index), C(gpu_instance_id) and C(compute_instance_id) (dcgm-exporter's MIG labels
    C(GPU_I_ID), C(GPU_CI_ID)), C(selection) (the MIG instance as C(<bus id>:<GI>[/<CI>]), else the bus id: what the
    run selects), C(scope) (instance, gpu or node), C(rung) (reset for ghost memory and a recovery action, reboot for
    a lost or silent GPU, none otherwise), C(message), C(fingerprint)."
  - An alert naming no host, or a host that is not one host name (C(meta.hosts) is the playbook's limit, where C(all),
    C(a,b), C(node*), C(~regex) or C(@file) would name other hosts), or a C(pci_bus_id) that is not a PCI bus id or a
    C(gpu) that is not an index (the playbook's extra vars are templated - a label must never carry a template to the
    controller), or a C(GPU_I_ID) or C(GPU_CI_ID) that cannot name an instance of that GPU (not a plain number of at
    most two digits, a compute instance without its GPU instance, an instance without C(pci_bus_id) - never widened to
    the whole GPU), is answered 422 and logged, never dropped silently. A timestamp that is no number of seconds
    (C(nan), C(inf)) is rejected. Never returns; ends when cancelled.
options:
  host:
    description:
      - The address to listen on. Unset, V(127.0.0.1) without TLS and V(0.0.0.0) with it.
    type: str
  port:
    description: The port to listen on.
    type: int
    default: 5050
  auth:
    description: The credentials every request must carry (see above).
    type: str
    choices: [hmac, bearer, basic]
    default: hmac
  username:
    description: The user of O(auth=basic) (Alertmanager's C(basic_auth.username)); required with it, refused otherwise.
    type: str
  secret:
    description:
      - The HMAC secret, the bearer token or the basic-auth password, after O(auth). Give it, or O(secret_env).
    type: str
  secret_env:
    description: The environment variable holding the secret (keeps it out of the rulebook).
    type: str
    default: GPUOPS_WEBHOOK_SECRET
  certfile:
    description: The server certificate (PEM, with its chain); with O(keyfile), the source serves HTTPS.
    type: str
  keyfile:
    description:
      - The certificate's private key (PEM). It must belong to the account the source runs as (or root) and be readable
        by its owner alone (mode 0600 or 0400), else the source does not start, naming the file.
    type: str
  window_seconds:
    description: How far the signed timestamp may be from this machine's clock (O(auth=hmac)).
    type: int
    default: 300
  host_label:
    description: The Alertmanager label naming the host; V(instance) drops its port (C(node07:9100) -> C(node07)).
    type: str
    default: instance
  queue_size:
    description:
      - How many events may wait for ansible-rulebook; a request whose events do not fit is answered 503 with
        C(Retry-After) and takes nothing.
    type: int
    default: 100
  host_queue_size:
    description:
      - How many of those events one host may hold (the events of alerts that name no host share one such part). A
        request that would take a host past it is answered 503 with C(Retry-After) and takes nothing, while the other
        hosts' requests are still taken. At most O(queue_size).
      - Unset, a tenth of O(queue_size) (at least 1).
    type: int
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
- name: The watch's alerts, straight from Alertmanager (docs/eda.md, "Alertmanager to the webhook")
  hosts: all
  sources:
    - gpuops.remediation.gpu_alert_webhook:
        port: 5050
        auth: bearer
        secret_env: GPUOPS_WEBHOOK_TOKEN
        certfile: /etc/gpuops/webhook.crt
        keyfile: /etc/gpuops/webhook.key
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
        from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda import _source_shared, _alert_webhook_source, _webhook_server  # noqa: F401
    except ImportError:
        # <root>/ansible_collections/gpuops/remediation/extensions/eda/plugins/event_source/<this file>
        sys.path.insert(0, os.path.abspath(os.path.join(os.path.abspath(__file__), *[os.pardir] * 8)))
        from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda import _source_shared, _alert_webhook_source, _webhook_server  # noqa: F401
    return _source_shared, _alert_webhook_source, _webhook_server


SOURCE = "gpu_alert_webhook"
SPEC = {
    "host": {"type": "str"},
    "port": {"type": "int", "default": 5050, "min": 1},
    "auth": {"type": "str", "default": "hmac", "choices": ["hmac", "bearer", "basic"]},
    "username": {"type": "str"},
    "secret": {"type": "str"},
    "secret_env": {"type": "str", "default": "GPUOPS_WEBHOOK_SECRET"},
    "certfile": {"type": "str"},
    "keyfile": {"type": "str"},
    "window_seconds": {"type": "int", "default": 300, "min": 1},
    "host_label": {"type": "str", "default": "instance"},
    "inventory": {"type": "str"},
    "queue_size": {"type": "int", "default": 100, "min": 1},
    "host_queue_size": {"type": "int", "min": 1},
}
LOGGER = logging.getLogger(__name__)
# How long a request's body may take to arrive, and its headers (module globals: the tests shorten them). A sender that
# stops half-way through the body (slowloris) is answered 408 and its connection closed; one whose headers (or TLS
# handshake) are not all in by HEADER_SECONDS loses its connection, instead of holding it for ever.
BODY_SECONDS = 10.0
HEADER_SECONDS = 10.0
# What a 503 tells the sender (Alertmanager retries a 5xx on its own schedule; a relay can honour this).
RETRY_AFTER_SECONDS = 5


def _options(shared, alert, server, args):
    """The checked options, the secret, where to listen and the TLS context; OptionError naming what is wrong."""
    options = shared.check_args(SOURCE, args, SPEC)
    secret = options["secret"] or os.environ.get(options["secret_env"] or "")
    if not secret:
        raise shared.OptionError("%s: no secret: set option secret, or the environment variable %s (option secret_env)"
                                 % (SOURCE, options["secret_env"]))
    if options["auth"] != "hmac" and (secret != secret.strip() or not secret.isprintable()):
        # A header's value is trimmed and carries no control character: every request would be 401, saying nothing.
        raise shared.OptionError("%s: the secret in %s has spaces or control characters (a newline?) at its ends or inside: no "
                                 "Authorization header can carry it" % (SOURCE, "option secret" if options["secret"] else
                                                                        "%s (option secret_env)" % options["secret_env"]))
    if (options["auth"] == "basic") != bool(options["username"]):
        raise shared.OptionError("%s: option username goes with auth basic (and only with it): got auth %s, username %r"
                                 % (SOURCE, options["auth"], options["username"]))
    try:
        context = server.tls_context(options["certfile"], options["keyfile"])
    except ValueError as exc:
        raise shared.OptionError("%s: %s" % (SOURCE, exc)) from None
    if options["host_queue_size"] is None:
        options["host_queue_size"] = max(1, options["queue_size"] // 10)
    elif options["host_queue_size"] > options["queue_size"]:
        raise shared.OptionError("%s: option host_queue_size %d is more than option queue_size %d: one host's share is part of "
                                 "the queue" % (SOURCE, options["host_queue_size"], options["queue_size"]))
    address, why = alert.listen_address(options["host"], options["auth"], context is not None)
    if why:
        raise shared.OptionError("%s: %s" % (SOURCE, why))
    return options, secret, address, context


async def main(queue, args):
    """Serve until cancelled; each firing alert of an authenticated request becomes an event."""
    from aiohttp import web  # ansible-rulebook's own dependency

    shared, alert, server = _import_collection()
    options, secret, address, context = _options(shared, alert, server, args)
    groups = shared.inventory_groups(SOURCE, options["inventory"]) if options["inventory"] else None
    handover = server.Handover(queue, options["queue_size"], options["host_queue_size"])
    seen = {}

    def rejected(request, status, why, headers=None):
        LOGGER.warning("%s: rejected a request from %s: %s", SOURCE, request.remote, why)
        return web.json_response({"rejected": why}, status=status, headers=headers)

    def unauthorized(request, why):
        scheme = {"bearer": "Bearer", "basic": "Basic"}.get(options["auth"])
        return rejected(request, 401, why, {"WWW-Authenticate": scheme, "Connection": "close"} if scheme else None)

    def authenticate(request, body, now):
        if options["auth"] != "hmac":
            return None  # checked before the body was read
        why = alert.verify(secret, request.headers, body, now, options["window_seconds"])
        if why is None and request.headers.get(alert.SIGNATURE_HEADER) in seen:
            why = "replayed: this signature was already received"
        return why

    async def receive(request):
        if options["auth"] != "hmac":  # the headers say it all: a stranger's body is never read
            why = alert.verify_authorization(options["auth"], secret, options["username"], request.headers)
            if why:
                return unauthorized(request, why)
        try:
            body = await asyncio.wait_for(request.read(), BODY_SECONDS)
        except asyncio.TimeoutError:
            return rejected(request, 408, "the body did not arrive within %s s" % BODY_SECONDS, {"Connection": "close"})
        now = time.time()
        why = authenticate(request, body, now)
        if why:
            return unauthorized(request, why)
        try:
            payload = json.loads(body.decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            return web.json_response({"rejected": "not JSON: %s" % exc}, status=400)
        events, problems = alert.alert_events(payload, options["host_label"], groups)
        full = handover.offer(events + [shared.problem_event(SOURCE, None, problem) for problem in problems])
        if full:
            # Nothing taken and the signature not spent: the sender's retry is served once the rulebook catches up.
            return rejected(request, 503, full, {"Retry-After": str(RETRY_AFTER_SECONDS)})
        if options["auth"] == "hmac":
            for old in [key for key, when in seen.items() if now - when > 2 * options["window_seconds"]]:
                del seen[old]
            seen[request.headers.get(alert.SIGNATURE_HEADER)] = now
        for problem in problems:
            LOGGER.error("%s: %s", SOURCE, problem)
        LOGGER.info("%s: accepted %d events from %s", SOURCE, len(events), request.remote)
        return web.json_response({"events": len(events), "problems": problems}, status=422 if problems and not events else 202)

    app = web.Application()
    app.router.add_post("/{tail:.*}", receive)
    handover.start()
    stop = None
    try:
        stop = await server.serve(app, address, options["port"], context, HEADER_SECONDS)
        LOGGER.info("%s: listening on %s:%s (%s, %s)", SOURCE, address, options["port"], options["auth"],
                    "TLS" if context else "plain HTTP")
        while True:
            await asyncio.sleep(3600)
    finally:
        if stop is not None:
            await stop()
        await handover.stop()


if __name__ == "__main__":

    class _PrintQueue:
        async def put(self, event):
            print(event, flush=True)

    asyncio.run(main(_PrintQueue(), json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}))
