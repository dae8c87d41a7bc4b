# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The gpu_alert_webhook event source's decisions: a request's credentials (an HMAC signature and its age, or the
bearer token or basic auth of Alertmanager's http_config), where it listens, and the firing alerts of an Alertmanager
or gpu_watch webhook body as events, each naming one inventory host or reported as a problem.
"""

from __future__ import annotations

import math

from ansible_collections.gpuops.remediation.plugins.module_utils._escape import printable
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._pci import normalize_bus_id
from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda._event_selection import alert_instance, gpu_uuid_label, selection_fields
from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda._event_target import inventory_host_problem
from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda._source_shared import host_problem


SIGNATURE_HEADER = "X-Gpuops-Signature"
TIMESTAMP_HEADER = "X-Gpuops-Timestamp"
# The rung each gpu_watch finding kind (or Alertmanager alert of extensions/prometheus/gpuops.rules.yml) asks for.
ALERT_RUNGS = {"ghost_memory": "reset", "GpuopsGhostMemory": "reset", "recovery_action": "reset", "GpuopsRecoveryAction": "reset",
               "unresponsive": "reboot", "GpuopsGpuLost": "reboot", "GpuopsProbeFailing": "reboot"}


def sign(secret, timestamp, body):
    """The signature a sender puts in X-Gpuops-Signature: "sha256=" + HMAC-SHA256(secret, "<timestamp>." + body)."""
    import hashlib
    import hmac

    digest = hmac.new(secret.encode("utf-8"), str(timestamp).encode("ascii") + b"." + body, hashlib.sha256).hexdigest()
    return "sha256=" + digest


def verify(secret, headers, body, now, window_seconds):
    """None when the request is signed with the secret and dated within the window, else why it is rejected."""
    import hmac

    for name in (TIMESTAMP_HEADER, SIGNATURE_HEADER):
        count = len(headers.getall(name, [])) if hasattr(headers, "getall") else int(name in headers)
        if count > 1:  # which one counts is a guess (a proxy may read the last, this the first): neither
            return "%s given %d times: one is required" % (name, count)
    stamp, given = headers.get(TIMESTAMP_HEADER), headers.get(SIGNATURE_HEADER)
    if not stamp or not given:
        return "unsigned: %s and %s are required" % (SIGNATURE_HEADER, TIMESTAMP_HEADER)
    try:
        epoch = float(stamp)
    except ValueError:
        epoch = math.nan
    if not math.isfinite(epoch):  # "nan" is within every window, "inf" within none: neither is a time
        return "%s is not a number of seconds: %r" % (TIMESTAMP_HEADER, stamp[:40])
    if abs(now - epoch) > window_seconds:
        return "stale: %s is %d s from now, more than the %d s allowed" % (TIMESTAMP_HEADER, abs(now - epoch), window_seconds)
    if not hmac.compare_digest(sign(secret, stamp, body).encode("ascii"), given.encode("ascii", "replace")):
        return "bad signature"
    return None


AUTH_SCHEMES = ("hmac", "bearer", "basic")


def _loopback(host):
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name: it may resolve to any address


def listen_address(host, auth, tls):
    """(address, None) where the webhook listens, or (None, why not).

    Unset, it listens on 127.0.0.1 without TLS and on every address with it. A bearer token or a password sent in clear
    over the network can be read and replayed by anyone on the way (an HMAC signature is dated and used once): those
    schemes listen beyond the loopback only over TLS."""
    if host is None:
        return ("0.0.0.0" if tls else "127.0.0.1"), None
    if auth != "hmac" and not tls and not _loopback(host):
        return None, ("option host %s with auth %s needs TLS (options certfile and keyfile): the %s would cross the "
                      "network in clear" % (host, auth, "token" if auth == "bearer" else "password"))
    return host, None


def _same(expected, given):
    import hmac

    return hmac.compare_digest(expected.encode("utf-8"), given.encode("utf-8", "replace"))


def verify_authorization(auth, secret, username, headers):
    """None when the Authorization header carries the bearer token (auth "bearer") or the user and password (auth
    "basic") Alertmanager's http_config sends, else why the request is rejected. Compared in constant time: the user
    and the password are both compared whichever differs."""
    import base64
    import binascii

    if hasattr(headers, "getall"):  # aiohttp's headers: every Authorization line
        given = headers.getall("Authorization", [])
    else:
        given = [headers[name] for name in headers if name.lower() == "authorization"]
    if not given:
        return "no Authorization header: %s credentials are required" % auth
    if len(given) > 1:
        return "Authorization given %d times: one is required" % len(given)
    scheme, _space, credentials = given[0].strip().partition(" ")
    wanted = "Bearer" if auth == "bearer" else "Basic"
    if scheme.lower() != wanted.lower():
        return "Authorization is not %s" % wanted
    credentials = credentials.strip()
    if auth == "bearer":
        return None if _same(secret, credentials) else "wrong bearer token"
    try:
        user, colon, password = base64.b64decode(credentials, validate=True).decode("utf-8").partition(":")
    except (binascii.Error, UnicodeDecodeError):
        return "Basic credentials are not base64 of user:password"
    user_ok, password_ok = _same(username, user), _same(secret, password)
    return None if user_ok and password_ok and colon else "wrong user or password"


def _instance_host(instance):
    """Prometheus's instance label "node07:9100" -> "node07" (an IPv6 "[::1]:9100" -> "::1")."""
    if not instance or not isinstance(instance, str):
        return instance or None  # not text: left as it is, for host_problem to name
    if instance.startswith("["):
        return instance[1:].split("]", 1)[0]
    name, _colon, port = instance.rpartition(":")
    # Only a port is dropped: "node1:node2" is no host and port, and stays whole (then refused as no host name).
    return name if instance.count(":") == 1 and port.isascii() and port.isdigit() else instance


def _text(value):
    return value if isinstance(value, str) else None


def _gpu_problem(gpu, gpu_index):
    """Why an alert's GPU cannot go to the playbook, or None. The rulebook passes it as an extra var, which ansible-core
    templates when the playbook reads it: anything but a bus id and an index (a Jinja template would run on the
    controller) is refused, never passed on."""
    if gpu and normalize_bus_id(gpu) is None:  # an empty label is Prometheus's absent one
        return "its pci_bus_id %r is not a PCI bus id" % gpu[:80]
    if gpu_index not in (None, "") and not (isinstance(gpu_index, int) or (gpu_index.isascii() and gpu_index.isdigit())):
        return "its gpu %r is not a GPU index" % gpu_index[:80]
    return None


def alert_events(payload, host_label="instance", groups=None):
    """The firing alerts of an Alertmanager webhook body, or of gpu_watch's own, as events (resolved ones make none).

    Returns (events, problems): an alert naming no host, or (with the inventory's `groups`, {name: [hosts]}) a host
    that is no one inventory host - a group's name, a name both a host and a group have, a name the inventory lacks - is
    a problem, reported, never dropped silently and never an event whose limit would take a group.
    """
    events, problems = [], []
    if not isinstance(payload, dict) or not isinstance(payload.get("alerts"), list):
        return [], ["the body is not an Alertmanager or gpu_watch webhook (no alerts list)"]
    for index, alert in enumerate(payload["alerts"]):
        if not isinstance(alert, dict) or alert.get("status", "firing") != "firing":
            continue
        labels = alert.get("labels") if isinstance(alert.get("labels"), dict) else {}
        # A value of another type than the payload's own (a list, a mapping, a number where a label is text) is taken as
        # missing: the alert is still reported or made an event, and never fails the whole request.
        instance, uuid = (None, None, None), (None, None)
        if labels:  # Alertmanager
            name = _text(labels.get("alertname"))
            host = _instance_host(labels.get("instance")) if host_label == "instance" else labels.get(host_label)
            gpu = _text(labels.get("pci_bus_id"))
            gpu_index = _text(labels.get("gpu"))
            annotations = alert.get("annotations") if isinstance(alert.get("annotations"), dict) else {}
            message = _text(annotations.get("summary"))
            # dcgm-exporter's labels of a MIG instance's series: refused, never taken as missing (that is the whole GPU)
            instance = alert_instance(labels, gpu)
            uuid = gpu_uuid_label(labels.get("UUID"))
        else:  # gpu_watch's webhook
            name = _text(alert.get("kind"))
            host = payload.get("host")
            gpu, message = _text(alert.get("pci_bus_id")), _text(alert.get("message"))
            gpu_index = alert.get("gpu_index") if isinstance(alert.get("gpu_index"), (int, str)) and not isinstance(
                alert.get("gpu_index"), bool) else None
        shown = printable(name) if name is not None else None  # the sender's text, one line of the problem
        if not host:
            problems.append("alert %d (%s) names no host" % (index, shown))
            continue
        why = host_problem(host)
        if why:
            problems.append("alert %d (%s): %s" % (index, shown, why))
            continue
        why = inventory_host_problem(host, groups) if groups is not None else None
        if why:
            problems.append("alert %d (%s): its host %s" % (index, shown, why))
            continue
        why = _gpu_problem(gpu, gpu_index) or instance[2] or uuid[1]
        if why:
            problems.append("alert %d (%s) on %s: %s" % (index, shown, host, why))
            continue
        body = {"type": "alert", "alert": name, "host": host, "gpu": gpu, "pci_bus_id": gpu, "gpu_index": gpu_index,
                "rung": ALERT_RUNGS.get(name, "none"), "message": message,
                "fingerprint": _text(alert.get("fingerprint"))}
        body.update(selection_fields(normalize_bus_id(gpu) if gpu else None, instance[0], instance[1], uuid[0]))
        events.append({"gpuops": body, "meta": {"hosts": host}})
    return events, problems
