"""Fixtures for the review tests: a store file, runs that hallucinate, a loopback receiver."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from review_factories import Receiver

from agentlens.config import Settings, load_settings
from agentlens.review import clear_flagged_callbacks
from agentlens.store import TraceStore, close_shared_stores, open_store


@pytest.fixture
def store(tmp_path: Path) -> Iterator[TraceStore]:
    s = open_store(f"sqlite:///{tmp_path / 'agentlens.db'}")
    try:
        yield s
    finally:
        s.close()
        close_shared_stores()


@pytest.fixture
def settings_from(tmp_path: Path) -> Callable[[str], Settings]:
    """``settings_from(toml)``: settings read from an agentlens.toml holding ``toml``."""

    def make(text: str) -> Settings:
        path = tmp_path / "agentlens.toml"
        path.write_text(text, encoding="utf-8")
        return load_settings(config_file=path)

    return make


@pytest.fixture(autouse=True)
def _no_callbacks() -> Iterator[None]:
    clear_flagged_callbacks()
    yield
    clear_flagged_callbacks()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    box: list[Receiver] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            rec = box[0]
            length = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(length)
            entry = {"path": self.path, "headers": dict(self.headers.items()), "body": body}
            if rec.hang_s:
                threading.Event().wait(rec.hang_s)
            with rec.lock:
                rec.requests.append(entry)
                fail = len(rec.requests) <= rec.fail_first
                if not fail:
                    rec.accepted.append(entry)
            self.send_response(500 if fail else 204)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    rec = Receiver(url=f"http://127.0.0.1:{server.server_address[1]}/hook")
    box.append(rec)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        yield rec
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
