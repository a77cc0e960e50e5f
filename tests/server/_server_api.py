"""In-process access to the app for the server tests (``httpx.ASGITransport``)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import httpx


class Api:
    """Calls the ASGI app in-process (``httpx.ASGITransport``), one event loop per request."""

    def __init__(self, app: Any, client: str = "127.0.0.1", key: str | None = None) -> None:
        self.app = app
        self.client = client
        self.key = key

    def as_(self, key: str | None = None, client: str | None = None) -> Api:
        return Api(self.app, client or self.client, key)

    def request(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        headers = dict(kwargs.pop("headers", None) or {})
        if self.key is not None:
            headers.setdefault("Authorization", f"Bearer {self.key}")
        transport = httpx.ASGITransport(app=self.app, client=(self.client, 40000))

        async def go() -> httpx.Response:
            async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
                return await c.request(method, url, headers=headers, **kwargs)

        return asyncio.run(go())

    def get(self, url: str, **kwargs: Any) -> httpx.Response:
        return self.request("GET", url, **kwargs)

    def post(self, url: str, **kwargs: Any) -> httpx.Response:
        return self.request("POST", url, **kwargs)

    @property
    def store(self) -> Any:
        return self.app.state.agentlens.store


def wait_until(check: Callable[[], Any], timeout: float = 15.0) -> Any:
    """Poll ``check`` until it returns something true (bounded)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.02)
