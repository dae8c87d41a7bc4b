# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_alert_webhook takes what Alertmanager's webhook_config sends with its http_config - a bearer token or basic auth,
over TLS with a certificate of the source's own - over a real 127.0.0.1 socket, run as ansible-rulebook runs it; the
options that would send a credential in clear, or serve a key others can read, stop it before it listens; a client
that sends its headers slowly (or none) loses its connection."""

import asyncio
import base64
import json
import os
import ssl
import time

import pytest

from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda._alert_webhook_source import listen_address, sign
from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda._source_shared import OptionError
from ansible_collections.gpuops.remediation.tests.unit.helpers import bounded
from ansible_collections.gpuops.remediation.tests.unit.helpers.eda_sources import SECRET, _alert, _free_port, _source
from ansible_collections.gpuops.remediation.tests.unit.helpers.eda_webhook import exchange as _exchange, serve, until_listening

BODY = json.dumps(_alert("node07:9100")).encode()
TRICKLED = b"POST /alerts HTTP/1.1\r\nHost: x\r\nX-Padding: " + b"a" * 40


def _request(headers=(), body=BODY):
    lines = [b"POST /alerts HTTP/1.1", b"Host: x", b"Content-Type: application/json", b"Content-Length: %d" % len(body)]
    return b"\r\n".join(lines + [header.encode() for header in headers] + [b"Connection: close", b"", body])


def _status(answer):
    return int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/1.1 ") else answer


def test_bearer_token_as_alertmanager_authorization_sends_it():
    """http_config.authorization: `Authorization: Bearer <token>`. The token right (the scheme in any case) is served
    every time - Alertmanager sends the same header again and again; a wrong token, none, another scheme, the header
    twice, or a request signed the HMAC way are 401 with WWW-Authenticate, and nothing is queued for them."""
    now = int(time.time())
    cases = [
        (["Authorization: Bearer tok3n"], 202),
        (["Authorization: bearer tok3n"], 202),
        (["Authorization: Bearer tok3n"], 202),
        (["Authorization: Bearer tok3nx"], 401),
        (["Authorization: Bearer tok3"], 401),
        ([], 401),
        (["Authorization: Basic " + base64.b64encode(b"x:tok3n").decode()], 401),
        (["Authorization: Bearer tok3n", "Authorization: Bearer other"], 401),
        (["X-Gpuops-Timestamp: %d" % now, "X-Gpuops-Signature: " + sign("tok3n", now, BODY)], 401),
    ]

    async def exchange(port):
        return [await _exchange(port, _request(headers)) for headers, _code in cases]

    answers, events = serve({"auth": "bearer", "secret": "tok3n"}, exchange)
    assert [_status(answer) for answer in answers] == [code for _headers, code in cases]
    assert all(b"WWW-Authenticate: Bearer" in answer for answer in answers if _status(answer) == 401)
    assert [event["meta"] for event in events] == [{"hosts": "node07"}] * 3


def test_basic_auth_as_alertmanager_basic_auth_sends_it(monkeypatch):
    """http_config.basic_auth: the user and the password (from the environment variable) both right, or 401."""
    monkeypatch.setenv("GPUOPS_TEST_AM_PASSWORD", "pa:ss")

    def basic(text):
        return ["Authorization: Basic " + base64.b64encode(text.encode()).decode()]

    cases = [(basic("alertmanager:pa:ss"), 202), (basic("alertmanager:pa:sx"), 401), (basic("alertmanagex:pa:ss"), 401),
             (basic("alertmanager"), 401), (["Authorization: Basic !!!"], 401), (["Authorization: Bearer pa:ss"], 401)]

    async def exchange(port):
        return [await _exchange(port, _request(headers)) for headers, _code in cases]

    answers, events = serve({"auth": "basic", "username": "alertmanager", "secret_env": "GPUOPS_TEST_AM_PASSWORD"}, exchange)
    assert [_status(answer) for answer in answers] == [code for _headers, code in cases]
    assert len(events) == 1


def _certificate(directory):
    """A self-signed certificate for 127.0.0.1 made by openssl, its key mode 0600; returns (certfile, keyfile)."""
    certfile, keyfile = os.path.join(directory, "webhook.crt"), os.path.join(directory, "webhook.key")
    done = bounded.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
                        "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", keyfile, "-out", certfile],
                       "openssl req", capture_output=True)
    assert done.returncode == 0, done.stderr
    os.chmod(keyfile, 0o600)
    return certfile, keyfile


def test_tls_with_a_certificate_of_the_sources_own(tmp_path):
    """Over TLS the bearer request is served to a client that trusts the certificate; plain HTTP to the TLS port gets
    no HTTP answer."""
    certfile, keyfile = _certificate(str(tmp_path))
    client = ssl.create_default_context(cafile=certfile)

    async def exchange(port):
        secure = await _exchange(port, _request(["Authorization: Bearer tok3n"]), context=client)
        wrong = await _exchange(port, _request(["Authorization: Bearer nope"]), context=client)
        plain = await _exchange(port, _request(["Authorization: Bearer tok3n"]))
        return secure, wrong, plain

    (secure, wrong, plain), events = serve({"auth": "bearer", "secret": "tok3n", "certfile": certfile, "keyfile": keyfile},
                                           exchange)
    assert _status(secure) == 202, secure
    assert _status(wrong) == 401, wrong
    assert not plain.startswith(b"HTTP/1.1 2"), plain
    assert [event["meta"] for event in events] == [{"hosts": "node07"}]


@pytest.mark.parametrize("options, words", [
    ({"auth": "bearer", "host": "0.0.0.0"}, "option host 0.0.0.0 with auth bearer needs TLS"),
    ({"auth": "basic", "username": "am", "host": "10.0.0.5"}, "option host 10.0.0.5 with auth basic needs TLS"),
    ({"auth": "basic"}, "option username goes with auth basic"),
    ({"auth": "bearer", "username": "am"}, "option username goes with auth basic"),
    ({"certfile": "/etc/hostname"}, "options certfile and keyfile go together"),
    ({"auth": "oauth"}, "option auth must be one of hmac, bearer, basic"),
])
def test_options_that_would_send_a_credential_in_clear_or_are_incomplete_stop_the_source(options, words):
    module = _source("gpu_alert_webhook")
    with pytest.raises(OptionError, match="gpu_alert_webhook: " + words):
        asyncio.run(module.main(asyncio.Queue(), dict(options, secret=SECRET, port=_free_port())))


def test_a_key_others_can_read_or_another_users_key_stops_the_source(tmp_path):
    certfile, keyfile = _certificate(str(tmp_path))
    module = _source("gpu_alert_webhook")
    os.chmod(keyfile, 0o640)
    with pytest.raises(OptionError, match="option keyfile %s has mode 0640: a private key must be readable by its owner alone"
                       % keyfile):
        asyncio.run(module.main(asyncio.Queue(), {"secret": SECRET, "certfile": certfile, "keyfile": keyfile}))
    os.chmod(keyfile, 0o600)
    os.chown(keyfile, 65534, -1)
    with pytest.raises(OptionError, match="option keyfile %s belongs to uid 65534" % keyfile):
        asyncio.run(module.main(asyncio.Queue(), {"secret": SECRET, "certfile": certfile, "keyfile": keyfile}))


def test_where_it_listens_unset():
    """The shipped rulebook sets no host: the loopback without TLS, every address with it."""
    assert listen_address(None, "hmac", False) == ("127.0.0.1", None)
    assert listen_address(None, "bearer", False) == ("127.0.0.1", None)
    assert listen_address(None, "bearer", True) == ("0.0.0.0", None)
    assert listen_address("::1", "basic", False) == ("::1", None)
    assert listen_address("127.0.0.5", "bearer", False) == ("127.0.0.5", None)
    # a name may resolve to any address: not taken for the loopback
    assert listen_address("eda.example.com", "bearer", False)[0] is None


def test_a_client_that_sends_its_headers_slowly_or_none_loses_its_connection():
    """aiohttp bounds no header read: a client trickling a header byte every 0.2 s, or sending nothing, held a
    connection for ever. Each is closed once HEADER_SECONDS pass without a whole request, while a request sent meanwhile
    is served, and a kept-alive connection still serves its second request."""
    module = _source("gpu_alert_webhook")
    module.HEADER_SECONDS = 1.0
    port = _free_port()

    async def trickle(data):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        started, sent = time.monotonic(), 0
        try:
            for byte in data:
                if reader.at_eof():
                    break
                writer.write(bytes([byte]))
                sent += 1
                await asyncio.sleep(0.2)
            return await asyncio.wait_for(reader.read(), 10), sent, time.monotonic() - started
        finally:
            writer.close()

    async def silent():
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        started = time.monotonic()
        try:
            return await asyncio.wait_for(reader.read(), 10), time.monotonic() - started
        finally:
            writer.close()

    async def kept_alive():
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        answers = []
        try:
            for _turn in range(2):
                writer.write(_request(["Authorization: Bearer tok3n"]).replace(b"Connection: close", b"Connection: keep-alive"))
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
                length = int(head.lower().split(b"content-length: ", 1)[1].split(b"\r\n", 1)[0])
                answers.append(head + await asyncio.wait_for(reader.readexactly(length), 5))
            return answers
        finally:
            writer.close()

    async def run():
        queue = asyncio.Queue()
        task = asyncio.ensure_future(module.main(queue, {"port": port, "auth": "bearer", "secret": "tok3n"}))
        try:
            await until_listening(port)
            slow = asyncio.ensure_future(trickle(TRICKLED))
            quiet = asyncio.ensure_future(silent())
            served = await _exchange(port, _request(["Authorization: Bearer tok3n"]))
            alive = await kept_alive()
            return served, alive, await slow, await quiet
        finally:
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    served, alive, (slow_answer, sent, slow_took), (quiet_answer, quiet_took) = asyncio.run(run())
    assert _status(served) == 202
    assert [_status(answer) for answer in alive] == [202, 202]
    # Closed while it was still trickling (the whole header line would take 16 s), not before its second was up.
    assert slow_answer == b"" and sent < len(TRICKLED) and slow_took > 0.9, (slow_answer, sent, slow_took)
    assert quiet_answer == b"" and quiet_took > 0.9, (quiet_answer, quiet_took)


def test_a_label_that_is_a_template_never_reaches_the_playbook():
    """The rulebook hands event.gpuops.gpu to the playbook as gpu_reclaim_gpus (an extra var, which ansible-core
    templates when read): a pci_bus_id or gpu label that is not a bus id or an index - a Jinja template that would run
    on the controller - makes no event; the alert is answered 422 and named as a problem."""
    forged = "{{ lookup('pipe', 'touch /tmp/gpuops-forged') }}"
    bodies = [{"alerts": [{"status": "firing", "labels": dict(_alert("node07:9100")["alerts"][0]["labels"], pci_bus_id=forged)}]},
              {"alerts": [{"status": "firing", "labels": dict(_alert("node07:9100")["alerts"][0]["labels"], gpu=forged)}]},
              {"host": "node07", "alerts": [{"kind": "ghost_memory", "pci_bus_id": forged}]},
              {"host": "node07", "alerts": [{"kind": "ghost_memory", "gpu_index": forged}]},
              {"alerts": [{"status": "firing", "labels": dict(_alert("node07:9100")["alerts"][0]["labels"],
                                                              pci_bus_id="0000:3b:00.0", gpu="2")}]}]

    async def exchange(port):
        answers = []
        for body in bodies:
            data = json.dumps(body).encode()
            answers.append(await _exchange(port, _request(["Authorization: Bearer tok3n"], data)))
        return answers

    answers, events = serve({"auth": "bearer", "secret": "tok3n"}, exchange)
    assert [_status(answer) for answer in answers] == [422, 422, 422, 422, 202]
    alerts = [event["gpuops"] for event in events if event["gpuops"]["type"] == "alert"]
    assert [(alert["gpu"], alert["gpu_index"]) for alert in alerts] == [("0000:3b:00.0", "2")]
    assert not any("{{" in json.dumps(event) and event["gpuops"]["type"] == "alert" for event in events)
    assert all("not a PCI bus id" in json.dumps(answer.decode()) or "not a GPU index" in answer.decode() for answer in answers[:4])


def test_wrong_credentials_are_refused_before_the_body_is_read():
    """A client with a wrong bearer token announces a body and never sends it: it is answered 401 at once (its headers
    say enough), not held until the body's deadline with the body buffered for a stranger."""
    head = b"\r\n".join([b"POST /alerts HTTP/1.1", b"Host: x", b"Content-Type: application/json", b"Content-Length: 900000",
                         b"Authorization: Bearer wrong", b"", b""])

    async def exchange(port):
        return await _exchange(port, head, wait=3)

    answer, events = serve({"auth": "bearer", "secret": "tok3n"}, exchange)
    assert _status(answer) == 401, answer
    assert not events


@pytest.mark.parametrize("auth, secret", [("bearer", "tok3n\n"), ("bearer", " tok3n"), ("basic", "pass word\r\n")])
def test_a_secret_no_header_can_carry_stops_the_source(monkeypatch, auth, secret):
    """A token file read into the environment with its newline (or spaces around it): no Authorization header can
    carry it (the header's value is trimmed), so every Alertmanager request would be 401 with no word of why. The source
    does not start, naming the variable, and never the secret itself."""
    monkeypatch.setenv("GPUOPS_TEST_TOKEN", secret)
    module = _source("gpu_alert_webhook")
    options = {"auth": auth, "secret_env": "GPUOPS_TEST_TOKEN", "port": _free_port()}
    if auth == "basic":
        options["username"] = "am"
    with pytest.raises(OptionError, match="gpu_alert_webhook: the secret in GPUOPS_TEST_TOKEN .option secret_env. has") as raised:
        asyncio.run(asyncio.wait_for(module.main(asyncio.Queue(), options), 10))  # a source that started: TimeoutError
    assert secret.strip() not in str(raised.value)


def test_a_certificate_and_a_key_that_do_not_match_stop_the_source(tmp_path):
    certfile, dummy = _certificate(str(tmp_path / "one") if os.mkdir(str(tmp_path / "one")) is None else None)
    dummy, keyfile = _certificate(str(tmp_path / "two") if os.mkdir(str(tmp_path / "two")) is None else None)
    module = _source("gpu_alert_webhook")
    with pytest.raises(OptionError, match="options certfile %s / keyfile %s: " % (certfile, keyfile)):
        asyncio.run(asyncio.wait_for(module.main(asyncio.Queue(), {"secret": SECRET, "certfile": certfile, "keyfile": keyfile,
                                                                   "port": _free_port()}), 10))
