"""The webhook: signed, retried with backoff, at least once, failures kept (real HTTP on
loopback)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import pytest
from review_factories import Receiver, fabricated

from agentlens.config import Settings
from agentlens.errors import ConfigError
from agentlens.review import (
    DELIVERY_HEADER,
    SIGNATURE_HEADER,
    Reviewer,
    review_pending,
    sign,
    verify_signature,
)
from agentlens.store import TraceStore

SECRET = "s3cret-for-tests"


def _config(url: str, **extra: object) -> str:
    lines = [f'webhook = "{url}"', f'webhook_secret = "{SECRET}"', "webhook_backoff = 0.05"]
    lines += [f"{k} = {v}" for k, v in extra.items()]
    return "[review]\n" + "\n".join(lines) + "\n"


def _wait(condition: Callable[[], bool], timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def test_sign_and_verify() -> None:
    body = b'{"a":1}'
    assert sign(body, "k").startswith("sha256=")
    assert verify_signature(body, "k", sign(body, "k"))
    assert not verify_signature(body + b" ", "k", sign(body, "k"))
    assert not verify_signature(body, "other", sign(body, "k"))
    assert not verify_signature(body, "k", None)
    assert verify_signature(body, "k", sign(body, "k").encode())  # a framework's raw header


def test_a_header_that_is_not_ascii_is_not_the_signature() -> None:
    """hmac.compare_digest refuses str with a character that is not ASCII: a sender's
    `X-Agentlens-Signature-256: sha256=é` raised TypeError in the receiver (a 500) instead of
    failing verification."""
    body = b'{"a":1}'
    assert not verify_signature(body, "k", "sha256=\u00e9")
    assert not verify_signature(body, "k", "sha256=\udce9")  # as latin-1 decoding leaves it
    assert not verify_signature(body, "k", b"sha256=\xe9")


def test_one_signed_delivery_per_flagged_run(
    store: TraceStore, receiver: Receiver, settings_from: Callable[[str], Settings]
) -> None:
    settings = settings_from(_config(receiver.url))
    store.put_traces([fabricated("r1"), fabricated("r2", order="ORD-1234")])
    review_pending(store, settings=settings)
    assert len(receiver.accepted) == 1
    request = receiver.accepted[0]
    assert verify_signature(request["body"], SECRET, request["headers"][SIGNATURE_HEADER])
    body = json.loads(request["body"])
    assert body["run_id"] == "r1" and body["event"] == "run.flagged"
    assert body["hallucination_reason"] == "fabricated_grounding: ORD-9999 is not in the evidence"
    assert body["links"] == {"blog_post": "123"}
    assert body["delivery_id"] == request["headers"][DELIVERY_HEADER]
    (delivery,) = store.list_deliveries()
    assert delivery.status == "delivered" and delivery.attempts == 1


def test_failing_three_times_then_accepting_delivers_once_with_one_id(
    store: TraceStore, receiver: Receiver, settings_from: Callable[[str], Settings]
) -> None:
    receiver.fail_first = 3
    settings = settings_from(_config(receiver.url))
    reviewer = Reviewer(store, settings=settings, interval=0.05).start()
    try:
        store.put_traces([fabricated("r1")])
        reviewer.notify()
        assert _wait(lambda: len(receiver.accepted) == 1)
        time.sleep(0.3)  # no further attempt after the accepted one
    finally:
        reviewer.shutdown(10)
    assert len(receiver.requests) == 4
    assert len(receiver.accepted) == 1
    ids = {r["headers"][DELIVERY_HEADER] for r in receiver.requests}
    assert len(ids) == 1
    bodies = {r["body"] for r in receiver.requests}
    assert len(bodies) == 1  # the same signed body every time
    for r in receiver.requests:
        assert verify_signature(r["body"], SECRET, r["headers"][SIGNATURE_HEADER])
    (delivery,) = store.list_deliveries()
    assert delivery.status == "delivered" and delivery.attempts == 4


def test_deliveries_that_keep_failing_are_kept_as_failed(
    store: TraceStore, receiver: Receiver, settings_from: Callable[[str], Settings]
) -> None:
    receiver.fail_first = 10**6
    settings = settings_from(_config(receiver.url, webhook_attempts=2))
    reviewer = Reviewer(store, settings=settings, interval=0.05).start()
    try:
        store.put_traces([fabricated("r1")])
        reviewer.notify()
        assert _wait(lambda: bool(store.list_deliveries(status="failed")))
    finally:
        reviewer.shutdown(10)
    (failed,) = store.list_deliveries(status="failed")
    assert failed.attempts == 2 and failed.last_error == "HTTP 500" and failed.run_id == "r1"
    assert len(receiver.requests) == 2


def test_an_unreachable_receiver_is_retried_not_raised(
    store: TraceStore, settings_from: Callable[[str], Settings]
) -> None:
    settings = settings_from(_config("http://127.0.0.1:9/hook", webhook_timeout=0.5))
    store.put_traces([fabricated("r1")])
    assert review_pending(store, settings=settings) == 1
    (pending,) = store.list_deliveries()
    assert pending.status == "pending" and pending.attempts == 1 and pending.last_error


def test_the_secret_signs_only_deliveries_to_its_own_webhook(
    store: TraceStore, receiver: Receiver, settings_from: Callable[[str], Settings]
) -> None:
    """A delivery stored for another URL (an earlier configuration) is sent unsigned."""
    earlier = receiver.url + "-earlier"  # the same loopback receiver, another path
    store.put_traces([fabricated("r1")])
    review_pending(store, settings=settings_from(_config(earlier)), deliver=False)
    store.put_traces([fabricated("r2")])
    review_pending(store, settings=settings_from(_config(receiver.url)))
    by_path = {r["path"]: r["headers"] for r in receiver.accepted}
    assert set(by_path) == {"/hook-earlier", "/hook"}
    assert SIGNATURE_HEADER not in by_path["/hook-earlier"]
    (signed,) = [r for r in receiver.accepted if r["path"] == "/hook"]
    assert verify_signature(signed["body"], SECRET, signed["headers"][SIGNATURE_HEADER])


def test_every_due_delivery_is_attempted_not_the_first_hundred(
    store: TraceStore, receiver: Receiver, settings_from: Callable[[str], Settings]
) -> None:
    """Reviewing 150 flagged runs at once (`agentlens import`, `agentlens review run`) sent
    100 webhooks: deliver_due took one page of 100, and the other 50 waited for whichever
    process reviewed the store next (none, for a one-shot command)."""
    settings = settings_from(_config(receiver.url))
    store.put_traces([fabricated(f"r{i}") for i in range(150)])
    assert review_pending(store, settings=settings) == 150
    assert len(receiver.accepted) == 150
    assert store.list_deliveries(status="pending", limit=None) == []
    assert len(store.list_deliveries(status="delivered", limit=None)) == 150


def test_a_callback_that_changes_what_it_was_given_does_not_change_the_webhook(
    store: TraceStore, receiver: Receiver, settings_from: Callable[[str], Settings]
) -> None:
    """The webhook body was made from the FlaggedRun after the callbacks had it: a callback
    that popped a link or edited a finding (its own bookkeeping) changed what was sent."""
    from agentlens.review import on_flagged

    def meddle(run: object) -> None:
        run.links.clear()  # type: ignore[attr-defined]
        run.findings[0]["text"] = "edited"  # type: ignore[attr-defined]

    on_flagged(meddle)
    store.put_traces([fabricated("r1")])
    review_pending(store, settings=settings_from(_config(receiver.url)))
    (body,) = receiver.bodies()
    assert body["links"] == {"blog_post": "123"}
    assert body["findings"][0]["text"] == "ORD-9999"


@pytest.mark.parametrize(
    "url", ["https://bot:hunter2@hooks.example/x", "https://bot@hooks.example/x", "http://:pw@h/x"]
)
def test_a_webhook_url_with_credentials_is_refused(
    url: str, settings_from: Callable[[str], Settings]
) -> None:
    # they were accepted, never sent (urllib does not turn them into a header), and stored in
    # every delivery's row, shown by `agentlens review deliveries`
    with pytest.raises(ConfigError, match="a user name or password in the URL is not sent") as info:
        settings_from(f'[review]\nwebhook = "{url}"\n')
    assert "hunter2" not in str(info.value)
