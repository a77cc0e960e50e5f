"""The webhook against receivers that misbehave: redirects, answers that are not HTTP (real
sockets on loopback)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from review_factories import fabricated

from agentlens.config import Settings
from agentlens.review import SIGNATURE_HEADER, review_pending
from agentlens.store import TraceStore


def _config(url: str) -> str:
    return f'[review]\nwebhook = "{url}"\nwebhook_secret = "k"\nwebhook_backoff = 0.05\n'


class _Redirecting:
    """POST /hook answers ``status`` with Location: /elsewhere; anything else answers 200."""

    def __init__(self, status: int) -> None:
        self.status = status
        self.requests: list[tuple[str, str, dict[str, str], bytes]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length) if length else b""
                outer.requests.append((self.command, self.path, dict(self.headers), body))
                if self.path == "/hook":
                    self.send_response(outer.status)
                    self.send_header("Location", "/elsewhere")
                else:
                    self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_GET = do_POST = _answer

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_is_not_a_delivery(
    status: int, store: TraceStore, settings_from: Callable[[str], Settings]
) -> None:
    """urllib followed a 301/302/303 to a POST as a GET without the body (and with the
    signature header), and the 200 of that GET counted as delivered: the payload reached no one.
    A redirect is an attempt that failed, retried at the configured URL."""
    receiver = _Redirecting(status)
    try:
        store.put_traces([fabricated("r1")])
        assert review_pending(store, settings=settings_from(_config(receiver.url))) == 1
    finally:
        receiver.close()
    (delivery,) = store.list_deliveries()
    assert delivery.status == "pending" and delivery.attempts == 1
    assert delivery.last_error is not None and delivery.last_error.startswith(f"HTTP {status}")
    assert "/elsewhere" in delivery.last_error
    assert [(m, p) for m, p, _, _ in receiver.requests] == [("POST", "/hook")]
    assert all(SIGNATURE_HEADER not in h for _, p, h, _ in receiver.requests if p != "/hook")


@pytest.fixture
def not_http() -> Iterator[str]:
    """A receiver that reads the request and answers a line that is not an HTTP status line."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(5)
                try:
                    conn.recv(65536)
                    conn.sendall(b"SSH-2.0-OpenSSH_9.2\r\n\r\n")
                except OSError:
                    pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/hook"
    finally:
        stop.set()
        thread.join(5)
        listener.close()


def test_an_answer_that_is_not_http_is_a_failed_attempt(
    not_http: str, store: TraceStore, settings_from: Callable[[str], Settings]
) -> None:
    """http.client.BadStatusLine is no OSError: it escaped deliver_due, so review_pending
    raised after marking the runs reviewed, the attempt was never recorded (the delivery stayed
    pending at 0 attempts, never given up) and every delivery after it was never tried."""
    store.put_traces([fabricated("r1"), fabricated("r2")])
    assert review_pending(store, settings=settings_from(_config(not_http))) == 2
    deliveries = store.list_deliveries()
    assert len(deliveries) == 2
    for delivery in deliveries:
        assert delivery.status == "pending" and delivery.attempts == 1
        assert delivery.last_error is not None and "BadStatusLine" in delivery.last_error


@pytest.fixture
def silent() -> Iterator[tuple[str, list[socket.socket]]]:
    """A receiver that accepts connections and never answers (a hung proxy, a blackhole)."""
    listener = socket.create_server(("127.0.0.1", 0), backlog=64)
    listener.settimeout(0.1)
    held: list[socket.socket] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            held.append(conn)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/hook", held
    finally:
        stop.set()
        thread.join(5)
        for conn in held:
            conn.close()
        listener.close()


def test_a_receiver_that_times_out_costs_one_timeout_per_round(
    silent: tuple[str, list[socket.socket]],
    store: TraceStore,
    settings_from: Callable[[str], Settings],
) -> None:
    """Every due delivery to a receiver that never answers waited its full webhook_timeout in
    turn: 100 due deliveries held `agentlens import` (and the reviewer, so every new run) for
    100 x 10 s. After a timeout the round leaves the URL's other deliveries due, unattempted,
    for the next round."""
    url, held = silent
    settings = settings_from(_config(url) + "webhook_timeout = 0.2\n")
    store.put_traces([fabricated(f"r{i}") for i in range(5)])
    assert review_pending(store, settings=settings) == 5
    deliveries = store.list_deliveries()
    assert len(deliveries) == 5
    assert sorted(d.attempts for d in deliveries) == [0, 0, 0, 0, 1]
    (tried,) = [d for d in deliveries if d.attempts == 1]
    assert tried.status == "pending" and "timed out" in (tried.last_error or "")
    assert len(held) == 1
    review_pending(store, settings=settings)  # the next round: the next delivery, once
    assert sorted(d.attempts for d in store.list_deliveries()) == [0, 0, 0, 1, 1]


@pytest.fixture
def trickling() -> Iterator[str]:
    """A receiver that answers 200 a byte every 50 ms (about 3 s in all): each read gets a
    byte well within a socket timeout, the whole answer does not come within 0.3 s."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)
    stop = threading.Event()
    answer = b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 60 + b"\r\nContent-Length: 0\r\n\r\n"

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                try:
                    conn.recv(65536)
                    for byte in answer:
                        if stop.wait(0.05):
                            break
                        conn.sendall(bytes([byte]))
                except OSError:
                    pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/hook"
    finally:
        stop.set()
        thread.join(10)
        listener.close()


def test_webhook_timeout_bounds_the_whole_attempt_not_each_read(
    trickling: str, store: TraceStore, settings_from: Callable[[str], Settings]
) -> None:
    """The socket timeout bounded each read only: a receiver trickling its answer held the
    attempt (and the reviewer) as long as it kept sending, and its 200 counted as delivered."""
    settings = settings_from(_config(trickling) + "webhook_timeout = 0.3\n")
    store.put_traces([fabricated("r1")])
    assert review_pending(store, settings=settings) == 1
    (delivery,) = store.list_deliveries()
    assert delivery.status == "pending" and delivery.attempts == 1
    assert delivery.last_error == "TimeoutError: timed out: no whole answer within 0.3 s"
