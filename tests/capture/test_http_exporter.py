"""The SDK's HTTP exporter against a real socket: batching, gzip, retries, Retry-After, limits."""

from __future__ import annotations

import gzip
import http.server
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from agentlens.capture import HttpExporter
from agentlens.errors import ConfigError
from agentlens.model import Trace


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    replies: list[tuple[int, dict[str, str], dict[str, Any]]]
    seen: list[dict[str, Any]]


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _Server

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        docs = json.loads(gzip.decompress(body))
        self.server.seen.append({"path": self.path, "headers": dict(self.headers), "docs": docs,
                                 "at": time.monotonic()})  # fmt: skip
        status, headers, payload = (
            self.server.replies.pop(0) if self.server.replies else (200, {}, None)
        )
        if payload is None:
            payload = {"stored": len(docs), "ids": [d["id"] for d in docs], "rejected": []}
        data = json.dumps(payload).encode()
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[_Server]:
    srv = _Server(("127.0.0.1", 0), _Handler)
    srv.replies, srv.seen = [], []
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def url(srv: _Server) -> str:
    return f"http://127.0.0.1:{srv.server_address[1]}"


def runs(n: int) -> list[Trace]:
    return [Trace(id=f"r{i}", agent="a", output="x" * 100) for i in range(n)]


def test_sends_a_gzip_batch_with_the_key(server: _Server) -> None:
    result = HttpExporter(url(server), "al_key").export(runs(3))
    assert result.ok and result.count == 3
    [req] = server.seen
    assert req["path"] == "/api/runs"
    assert req["headers"]["Authorization"] == "Bearer al_key"
    assert req["headers"]["Content-Encoding"] == "gzip"
    assert [d["id"] for d in req["docs"]] == ["r0", "r1", "r2"]


def test_retries_429_honouring_retry_after_then_5xx_with_backoff(server: _Server) -> None:
    server.replies = [
        (429, {"Retry-After": "1"}, {"error": {"code": "overloaded", "message": "busy"}}),
        (503, {}, {"error": {"code": "unavailable", "message": "down"}}),
    ]
    result = HttpExporter(url(server), backoff_s=0.05).export(runs(2))
    assert result.ok and result.count == 2
    assert len(server.seen) == 3
    assert server.seen[1]["at"] - server.seen[0]["at"] >= 0.9  # waited Retry-After


def test_gives_up_bounded_and_never_raises(server: _Server) -> None:
    server.replies = [(500, {}, {"error": {"code": "x", "message": "boom"}})] * 10
    exporter = HttpExporter(url(server), max_attempts=3, backoff_s=0.01)
    result = exporter.export(runs(1))
    assert not result.ok and "HTTP 500" in (result.error or "")
    assert len(server.seen) == 3
    # a 4xx is not retried
    server.seen.clear()
    server.replies = [(401, {}, {"error": {"code": "unauthorized", "message": "bad key"}})]
    result = exporter.export(runs(1))
    assert not result.ok and "bad key" in (result.error or "") and len(server.seen) == 1
    # nobody listening: a failure value, quickly
    dead = HttpExporter("http://127.0.0.1:9", max_attempts=2, backoff_s=0.01, timeout_s=1)
    assert not dead.export(runs(1)).ok


def test_413_splits_the_batch(server: _Server) -> None:
    server.replies = [(413, {}, {"error": {"code": "too_large", "message": "big"}})]
    result = HttpExporter(url(server)).export(runs(4))
    assert result.ok and result.count == 4
    assert [len(r["docs"]) for r in server.seen] == [4, 2, 2]


def test_partly_refused_batch(server: _Server) -> None:
    server.replies = [(200, {}, {"stored": 1, "ids": ["r0"], "rejected": [
        {"index": 1, "error": "run id 'r1' belongs to another project"}]})]  # fmt: skip
    result = HttpExporter(url(server)).export(runs(2))
    assert not result.ok and result.count == 1


def test_bad_endpoint() -> None:
    with pytest.raises(ConfigError):
        HttpExporter("ftp://x")


def test_configure_endpoint_from_environment(server: _Server, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import agentlens

    monkeypatch.setenv("AGENTLENS_ENDPOINT", url(server))
    monkeypatch.setenv("AGENTLENS_API_KEY", "al_env")
    agentlens.configure()
    try:
        with agentlens.run(agent="env", input="q") as run:
            run.output = "a"
        assert agentlens.flush(10)
        assert agentlens.capture.stats().exported == 1
    finally:
        agentlens.shutdown(5)
        agentlens.capture.reset()
    assert server.seen[0]["headers"]["Authorization"] == "Bearer al_env"
    assert server.seen[0]["docs"][0]["agent"] == "env"
    with pytest.raises(ConfigError):
        agentlens.configure(db="sqlite:///:memory:", endpoint=url(server))
