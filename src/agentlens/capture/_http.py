"""The HTTP exporter: finished runs sent to an ``agentlens serve`` instead of a local store.

``agentlens.configure(endpoint="http://host:6660", api_key=...)`` (or ``AGENTLENS_ENDPOINT`` and
``AGENTLENS_API_KEY``) puts an :class:`HttpExporter` behind capture's bounded background queue.
Each batch is one gzip-compressed ``POST /api/runs`` (the trace format, a JSON array). On 429,
5xx or a connection error the batch is retried with exponential backoff (honouring
``Retry-After``) for at most ``max_attempts`` tries and ``max_retry_s`` seconds; a batch over the
server's size limit (413) is split in halves. What still cannot be sent is counted as failed in
:func:`agentlens.capture.stats` and logged: the exporter never raises into the agent, and the
agent never waits for it (it runs on capture's background thread, whose queue is bounded).

Only the standard library is used (:mod:`http.client`), so the SDK needs no extra.
"""

from __future__ import annotations

import contextlib
import gzip
import http.client
import json
import logging
import random
import threading
import time
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agentlens.capture._export import Exporter, ExportResult
from agentlens.errors import ConfigError
from agentlens.model import Trace

__all__ = ["HttpExporter"]

logger = logging.getLogger("agentlens")

_RETRY_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})


@dataclass(frozen=True, slots=True)
class _Reply:
    status: int
    body: bytes
    retry_after: float | None


class HttpExporter(Exporter):
    """Sends batches of runs to an agentlens server's ``POST /api/runs``.

    Args:
        endpoint: the server's base URL (``http://host:6660``).
        api_key: sent as ``Authorization: Bearer KEY``; ``None`` for a keyless local server.
        timeout_s: the time limit of one request.
        max_attempts: tries per batch (the first included).
        max_retry_s: the longest a batch is retried for, waits included.
        backoff_s: the first wait; doubled each retry (with jitter), capped at 30 s.

    Raises:
        ConfigError: the endpoint is not an ``http://`` or ``https://`` URL.
    """

    def __init__(
        self,
        endpoint: str,
        api_key: str | None = None,
        *,
        timeout_s: float = 10.0,
        max_attempts: int = 6,
        max_retry_s: float = 60.0,
        backoff_s: float = 0.5,
    ) -> None:
        parts = urllib.parse.urlsplit(endpoint.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"endpoint {endpoint!r} is not an http:// or https:// URL")
        self.endpoint = endpoint.rstrip("/")
        self._parts = parts
        self._path = parts.path.rstrip("/") + "/api/runs"
        self._api_key = api_key
        self._timeout_s = timeout_s
        self._max_attempts = max(1, max_attempts)
        self._max_retry_s = max_retry_s
        self._backoff_s = backoff_s
        self._stopping = threading.Event()
        self._conn: http.client.HTTPConnection | None = None

    def __repr__(self) -> str:
        return f"HttpExporter({self.endpoint!r})"

    # -- Exporter -----------------------------------------------------------------------------

    def export(self, traces: Sequence[Trace]) -> ExportResult:
        """Send one batch; a value, never an exception."""
        try:
            return self._send([t.to_dict() for t in traces])
        except Exception as exc:  # never into the agent's thread (or capture's)
            return ExportResult.failure(f"{self.endpoint}: {type(exc).__name__}: {exc}")

    def shutdown(self, timeout: float | None = None) -> bool:
        """Stop retrying (a batch being retried fails at once) and close the connection."""
        self._stopping.set()
        self._close()
        return True

    # -- sending ------------------------------------------------------------------------------

    def _send(self, docs: list[dict[str, Any]]) -> ExportResult:
        body = gzip.compress(json.dumps(docs, separators=(",", ":")).encode("utf-8"), 5)
        deadline = time.monotonic() + self._max_retry_s
        wait = self._backoff_s
        last = "no attempt"
        for attempt in range(1, self._max_attempts + 1):
            try:
                reply = self._post(body)
            except (OSError, http.client.HTTPException) as exc:
                self._close()
                last = f"cannot reach the server: {exc}"
                retry_after: float | None = None
            else:
                if 200 <= reply.status < 300:
                    return self._result(reply, len(docs))
                last = f"HTTP {reply.status}: {_message(reply.body)}"
                if reply.status == 413 and len(docs) > 1:
                    half = len(docs) // 2
                    first, second = self._send(docs[:half]), self._send(docs[half:])
                    return _combine(first, second)
                if reply.status not in _RETRY_STATUSES:
                    break
                retry_after = reply.retry_after
            if attempt == self._max_attempts:
                break
            delay = retry_after if retry_after is not None else wait * (0.5 + random.random())
            delay = min(delay, 30.0)
            if time.monotonic() + delay > deadline or self._stopping.wait(delay):
                break
            wait = min(wait * 2, 30.0)
        logger.warning("agentlens: %d runs not sent to %s: %s", len(docs), self.endpoint, last)
        return ExportResult.failure(f"{self.endpoint}: {last}")

    def _result(self, reply: _Reply, sent: int) -> ExportResult:
        try:
            data = json.loads(reply.body)
            stored = int(data.get("stored", sent))
            rejected = data.get("rejected") or []
        except (ValueError, AttributeError, TypeError):
            return ExportResult.success(sent)
        if rejected:
            reasons = "; ".join(str(r.get("error")) for r in rejected[:3] if isinstance(r, dict))
            logger.warning("agentlens: the server refused %d runs: %s", len(rejected), reasons)
            return ExportResult(ok=False, count=stored, error=f"refused {len(rejected)}: {reasons}")
        return ExportResult.success(stored)

    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is None:
            host = self._parts.hostname or ""
            port = self._parts.port
            cls = (
                http.client.HTTPSConnection
                if self._parts.scheme == "https"
                else http.client.HTTPConnection
            )
            self._conn = cls(host, port, timeout=self._timeout_s)
        return self._conn

    def _close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def _post(self, body: bytes) -> _Reply:
        headers = {
            "Content-Type": "application/json",
            "Content-Encoding": "gzip",
            "Content-Length": str(len(body)),
            "User-Agent": "agentlens-sdk",
        }
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        conn = self._connection()
        conn.request("POST", self._path, body=body, headers=headers)
        response = conn.getresponse()
        data = response.read()
        if response.getheader("Connection", "").lower() == "close":
            self._close()
        return _Reply(response.status, data, _retry_after(response.getheader("Retry-After")))


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _message(body: bytes) -> str:
    try:
        return str(json.loads(body)["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return body[:200].decode("utf-8", "replace")


def _combine(a: ExportResult, b: ExportResult) -> ExportResult:
    if a.ok and b.ok:
        return ExportResult.success(a.count + b.count)
    return ExportResult(ok=False, count=a.count + b.count, error=a.error or b.error)
