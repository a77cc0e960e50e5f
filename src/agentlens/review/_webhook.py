"""The review webhook: flagged runs POSTed as signed JSON, at least once.

Each flagged run becomes a *delivery* stored in the store (``webhook_deliveries``) before the run
is marked reviewed, so a crash never loses one. A delivery is POSTed with::

    Content-Type: application/json
    User-Agent: agentlens-webhook
    X-Agentlens-Event: run.flagged
    X-Agentlens-Delivery: <delivery id>       (the same on every attempt: drop duplicates by it)
    X-Agentlens-Signature-256: sha256=<hex>   (HMAC-SHA256 of the exact body with the secret;
                                               sent only when a secret is configured, and
                                               only to the configured webhook URL)

Verify it as GitHub's ``X-Hub-Signature-256``: compute the HMAC of the raw body with the shared
secret and compare with :func:`hmac.compare_digest` (:func:`verify_signature` does this).

A 2xx answer delivers it. Anything else (another status, a redirect, which is not followed, a
refused connection, a timeout, an answer that is not HTTP) is retried after ``webhook_backoff``
seconds, doubling after each failure (capped at 10 minutes), until ``webhook_attempts``
attempts were made; then the delivery is marked ``failed``: kept and listed by ``agentlens
review deliveries``, never silently dropped. Attempts are bounded by ``webhook_timeout`` seconds
each: the whole attempt (connecting, sending, the answer's head), not each read.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import http.client
import json
import logging
import socket
import threading
import urllib.error
import urllib.request
from datetime import UTC, datetime, timedelta
from typing import Any

from agentlens._ids import new_id
from agentlens.review._hooks import STATS, FlaggedRun
from agentlens.review._settings import ReviewSettings
from agentlens.store import TraceStore
from agentlens.store._protocol import Delivery

__all__ = [
    "DELIVERY_HEADER",
    "EVENT_HEADER",
    "SIGNATURE_HEADER",
    "deliver_all_due",
    "deliver_due",
    "new_delivery",
    "sign",
    "verify_signature",
]

logger = logging.getLogger("agentlens")

SIGNATURE_HEADER = "X-Agentlens-Signature-256"
DELIVERY_HEADER = "X-Agentlens-Delivery"
EVENT_HEADER = "X-Agentlens-Event"
_MAX_BACKOFF = 600.0


def sign(body: bytes, secret: str) -> str:
    """The signature header's value: ``sha256=`` and the hex HMAC-SHA256 of ``body``."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def verify_signature(body: bytes, secret: str, header: str | bytes | None) -> bool:
    """True when ``header`` is the signature of ``body`` with ``secret`` (constant time).

    Any header a sender may put there is an answer, never an exception: compared as bytes, a
    value with a character that is not ASCII is simply not the signature."""
    if header is None:
        return False
    given = header if isinstance(header, bytes) else header.encode("utf-8", "surrogateescape")
    return hmac.compare_digest(sign(body, secret).encode("ascii"), given)


def new_delivery(run: FlaggedRun, url: str, *, now: datetime | None = None) -> Delivery:
    """A pending delivery of ``run``'s summary to ``url``, with a new delivery id."""
    delivery_id = new_id()
    payload = {"delivery_id": delivery_id, **run.to_json()}
    body = json.dumps(payload, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    when = now or datetime.now(UTC)
    return Delivery(
        id=delivery_id,
        run_id=run.run_id,
        url=url,
        body=body,
        created_at=when,
        next_attempt_at=when,
    )


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """Follow no redirect: urllib would follow a 301/302/303 to a POST as a GET without the
    body (and with the signature header, to wherever it points), and that GET's 200 would count
    as delivered. A redirect is an attempt that failed; the webhook URL is the one configured."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class _Deadline:
    """The whole of one attempt is bounded: a socket timeout bounds each read only, so a
    receiver that trickles its answer a byte at a time held the reviewer as long as it liked.
    At the deadline the attempt's connections are shut down, and the attempt has timed out."""

    def __init__(self, seconds: float) -> None:
        self.expired = False
        self._connections: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def __enter__(self) -> _Deadline:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()

    def connection(self, http_class: Any) -> Any:
        """``http_class``, with each connection it makes watched."""

        def make(*args: Any, **kwargs: Any) -> Any:
            conn = http_class(*args, **kwargs)
            with self._lock:
                self._connections.append(conn)
                expired = self.expired
            if expired:
                conn.close()
            return conn

        return make

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            connections = list(self._connections)
        for conn in connections:
            sock = conn.sock
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def opener(self) -> urllib.request.OpenerDirector:
        deadline = self

        class Http(urllib.request.HTTPHandler):
            def do_open(self, http_class: Any, req: Any, **kwargs: Any) -> Any:
                return super().do_open(deadline.connection(http_class), req, **kwargs)

        class Https(urllib.request.HTTPSHandler):
            def do_open(self, http_class: Any, req: Any, **kwargs: Any) -> Any:
                return super().do_open(deadline.connection(http_class), req, **kwargs)

        return urllib.request.build_opener(_NoRedirects, Http, Https)


def _timed_out(exc: BaseException) -> bool:
    reason = getattr(exc, "reason", None)
    return isinstance(exc, TimeoutError) or isinstance(reason, TimeoutError)


def _post(delivery: Delivery, settings: ReviewSettings) -> tuple[str | None, bool]:
    """One attempt: ``(None, False)`` when delivered, else why not (one line) and whether the
    receiver did not answer within ``webhook_timeout``."""
    body = delivery.body.encode()
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "agentlens-webhook",
        EVENT_HEADER: "run.flagged",
        DELIVERY_HEADER: delivery.id,
    }
    if settings.webhook_secret and delivery.url == settings.webhook:
        # the secret signs only what goes to the webhook it was configured with: a delivery
        # stored for another URL (an earlier configuration) goes unsigned
        headers[SIGNATURE_HEADER] = sign(body, settings.webhook_secret)
    request = urllib.request.Request(delivery.url, data=body, headers=headers, method="POST")
    timeout = settings.webhook_timeout
    try:
        with _Deadline(timeout) as deadline:
            try:
                with deadline.opener().open(request, timeout=timeout) as response:
                    status = int(response.status)
            finally:
                if deadline.expired:  # whatever the cut-off answer looked like
                    raise TimeoutError(f"timed out: no whole answer within {timeout:g} s")
    except urllib.error.HTTPError as exc:
        with exc:
            location = exc.headers.get("Location") if exc.headers is not None else None
        if 300 <= exc.code < 400 and location:
            return f"HTTP {exc.code} (redirect to {location!r} not followed)", False
        return f"HTTP {exc.code}", False
    except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException) as exc:
        # http.client.HTTPException (a status line that is not HTTP, a truncated answer) is no
        # OSError: uncaught, it aborted every delivery after it and left the attempt unrecorded
        reason: Any = getattr(exc, "reason", exc)
        return f"{type(exc).__name__}: {reason}", _timed_out(exc)
    return (None if 200 <= status < 300 else f"HTTP {status}"), False


def _backoff(settings: ReviewSettings, attempts_made: int) -> float:
    return min(_MAX_BACKOFF, settings.webhook_backoff * (2 ** max(0, attempts_made - 1)))


def deliver_due(
    store: TraceStore, settings: ReviewSettings, *, limit: int = 100, now: datetime | None = None
) -> int:
    """Attempt every delivery that is due (at most ``limit``); return how many were delivered.

    Never raises for a failed attempt: it is recorded (and retried later, or given up). After
    an attempt that timed out, the other deliveries due to the same URL are left for the next
    call, unattempted: a receiver that does not answer costs one ``webhook_timeout`` a call,
    not one per delivery (which held the reviewer, and every run waiting for review, for
    minutes).
    """
    return _deliver_page(store, settings, limit=limit, now=now)[0]


def deliver_all_due(store: TraceStore, settings: ReviewSettings, *, page: int = 100) -> int:
    """:func:`deliver_due` page after page until no delivery is due, or one timed out (its
    URL's others wait for the next call); return how many were delivered. What reviewing
    calls: 150 flagged runs reviewed at once are 150 deliveries, not the first 100."""
    return deliver_all(store, settings, page=page)[0]


def deliver_all(store: TraceStore, settings: ReviewSettings, *, page: int = 100) -> tuple[int, int]:
    """:func:`deliver_all_due`, returning ``(delivered, attempts that failed)``."""
    delivered = failed = 0
    while True:
        sent, lost, due, stalled = _deliver_page(store, settings, limit=page, now=None)
        delivered += sent
        failed += lost
        if due < page or stalled:
            return delivered, failed


def _deliver_page(
    store: TraceStore, settings: ReviewSettings, *, limit: int, now: datetime | None
) -> tuple[int, int, int, bool]:
    """One page of due deliveries: (delivered, attempts that failed, how many were due,
    whether one timed out)."""
    delivered = failed = 0
    silent: set[str] = set()
    due = store.due_deliveries(now=now, limit=limit)
    for delivery in due:
        if delivery.url in silent:
            continue
        error, timed_out = _post(delivery, settings)
        if timed_out:
            silent.add(delivery.url)
        attempts = delivery.attempts + 1
        at = datetime.now(UTC)
        if error is None:
            store.record_delivery(delivery.id, ok=True, at=at)
            STATS.add(deliveries_sent=1)
            delivered += 1
            continue
        STATS.add(delivery_attempts_failed=1)
        failed += 1
        if attempts >= settings.webhook_attempts:
            store.record_delivery(delivery.id, ok=False, error=error, at=at)
            STATS.add(deliveries_given_up=1)
            logger.warning(
                "agentlens: webhook delivery %s of run %s failed %d times (%s); kept as failed",
                delivery.id,
                delivery.run_id,
                attempts,
                error,
            )
        else:
            retry = at + timedelta(seconds=_backoff(settings, attempts))
            store.record_delivery(delivery.id, ok=False, error=error, next_attempt_at=retry, at=at)
    return delivered, failed, len(due), bool(silent)
