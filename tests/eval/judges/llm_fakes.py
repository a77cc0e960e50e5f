"""Test helpers: a real HTTP server on 127.0.0.1 that speaks just enough of the OpenAI chat-completions and
Anthropic messages protocols to return scripted replies."""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

SLOW = "slow"


@dataclass
class Scripted:
    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    slow: bool = False


@dataclass
class FakeLLM:
    """The scripted server: queue replies with :meth:`push`, read :attr:`requests`."""

    url: str = ""
    replies: deque[Scripted] = field(default_factory=deque)
    requests: list[dict[str, Any]] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def push(self, *replies: Scripted) -> None:
        with self.lock:
            self.replies.extend(replies)

    def next(self) -> Scripted:
        with self.lock:
            return (
                self.replies.popleft()
                if self.replies
                else Scripted(500, {"error": "script exhausted"})
            )


def openai_reply(content: str, prompt_tokens: int = 100, completion_tokens: int = 20) -> Scripted:
    return Scripted(
        200,
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        },
    )


def anthropic_reply(text: str, input_tokens: int = 100, output_tokens: int = 20) -> Scripted:
    return Scripted(
        200,
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "m",
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
        },
    )


def verdicts_json(*labels: str, evidence: str = "") -> str:
    return json.dumps(
        {
            "verdicts": [
                {
                    "id": i,
                    "label": label,
                    "confidence": 0.9,
                    "reason": f"claim {i} is {label}",
                    "evidence": evidence,
                }
                for i, label in enumerate(labels, 1)
            ]
        }
    )


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    state = FakeLLM()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length)
            state.requests.append(
                {
                    "path": self.path,
                    "headers": {k.lower(): v for k, v in self.headers.items()},
                    "body": json.loads(raw) if raw else None,
                }
            )
            reply = state.next()
            if reply.slow:
                state.release.wait(10)  # hold the reply until the test is over
            payload = reply.body if isinstance(reply.body, str) else json.dumps(reply.body)
            data = payload.encode()
            try:
                self.send_response(reply.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for k, v in reply.headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)
            except OSError:
                pass  # the client gave up (timeout)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
    )
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield state
    finally:
        state.release.set()
        server.shutdown()
        server.server_close()
        thread.join(5)
