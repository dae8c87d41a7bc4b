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

from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda._source_shared import OptionError
from ansible_collections.gpuops.remediation.tests.unit.helpers import bounded
from ansible_collections.gpuops.remediation.tests.unit.helpers.eda_sources import _alert, _free_port, _source
from ansible_collections.gpuops.remediation.tests.unit.helpers.eda_webhook import bearer_post, until_listening

QUEUE_SIZE = 3


def _post(port, body):
    return bearer_post(port, body, "tok3n")  # "at once": a request held longer than 5 s fails


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


def test_one_hosts_storm_is_answered_503_while_the_other_hosts_alerts_are_taken():
    """node01's storm takes node01's share of the queue (host_queue_size) and no more: its next alerts are answered 503
    with Retry-After at once, naming the host and the option, while node02's and node03's are accepted and reach the
    rulebook; once the rulebook reads again, node01's retry is taken."""
    module = _source("gpu_alert_webhook")
    port = _free_port()

    async def run():
        rulebook = asyncio.Queue(1)  # ansible-rulebook's source queue, never read until the end: the rulebook is busy
        task = asyncio.ensure_future(module.main(rulebook, {"port": port, "auth": "bearer", "secret": "tok3n", "queue_size": 20,
                                                            "host_queue_size": 2}))
        try:
            await until_listening(port)
            storm = [await _post(port, _one("node01")) for _number in range(6)]
            others = [await _post(port, _one(host)) for host in ("node02", "node03")]
            got = [await asyncio.wait_for(rulebook.get(), 5) for _index in range(5)]
            retry = await _post(port, _one("node01"))
            got.append(await asyncio.wait_for(rulebook.get(), 5))
            return storm, others, retry, got
        finally:
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    storm, others, retry, got = asyncio.run(run())
    # One of node01's events in the rulebook's queue, one in the forwarder's hands (still node01's share), one waiting.
    assert [answer.split(b" ", 2)[1] for answer in storm] == [b"202"] * 3 + [b"503"] * 3, storm
    for answer in storm[3:]:
        assert b"Retry-After: 5" in answer and b"2 events of host node01 wait for the rulebook already, its share of the queue " \
            b"(option host_queue_size 2)" in answer, answer
    assert [answer.split(b" ", 2)[1] for answer in others] == [b"202", b"202"], others
    assert retry.startswith(b"HTTP/1.1 202"), retry
    assert [event["meta"]["hosts"] for event in got] == ["node01", "node01", "node01", "node02", "node03", "node01"]


@pytest.mark.parametrize("args, says", [
    ({"queue_size": 4, "host_queue_size": 5}, "option host_queue_size 5 is more than option queue_size 4"),
    ({"host_queue_size": 0}, "option host_queue_size must be 1 or more, got 0"),
])
def test_a_host_share_that_is_no_part_of_the_queue_is_refused_naming_both(args, says):
    module = _source("gpu_alert_webhook")
    with pytest.raises(OptionError) as caught:
        asyncio.run(module.main(asyncio.Queue(1), dict(args, port=_free_port(), auth="bearer", secret="tok3n")))
    assert says in str(caught.value)
