"""Fixtures for the dashboard tests: a store of runs, the app in-process, the app on a real
socket (uvicorn on a port the OS picks), and Debian's Chromium driven by Playwright.

The browser tests fail, not skip, when the browser is missing on CI (``CI=true``) or when
``AGENTLENS_TEST_BROWSER=1`` says it must be there; elsewhere they skip with the reason.
Screenshots go to ``test-artifacts/dashboard/`` (ignored by git; CI uploads it).
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from dashboard_data import store_with_runs

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "dashboard"
BROWSER_REQUIRED = os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"} or (
    os.environ.get("AGENTLENS_TEST_BROWSER", "").strip() == "1"
)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Any]:
    """A SQLite file with the test runs, reviewed."""
    opened = store_with_runs(f"sqlite:///{tmp_path / 'dash.db'}")
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def app(store: Any) -> Iterator[Any]:
    from agentlens.server import create_app

    application = create_app(store, review=False)
    try:
        yield application
    finally:
        application.state.agentlens.close()


@pytest.fixture
def client(app: Any) -> Any:
    """The app in-process (Starlette's test client: a loopback client, so local use while no
    key exists)."""
    from starlette.testclient import TestClient

    return TestClient(app, follow_redirects=False)


@dataclass
class LiveServer:
    """The app served by uvicorn on a loopback socket in a background thread."""

    url: str
    app: Any
    server: Any
    thread: threading.Thread

    @property
    def store(self) -> Any:
        return self.app.state.agentlens.store

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(30)


@pytest.fixture
def live(app: Any) -> Iterator[LiveServer]:
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    live_server = LiveServer(url, app, server, thread)
    try:
        yield live_server
    finally:
        live_server.stop()
        sock.close()


# -- the browser ----------------------------------------------------------------------------------


def _unavailable(reason: str) -> None:
    if BROWSER_REQUIRED:
        pytest.fail(f"{reason} (CI=true or AGENTLENS_TEST_BROWSER=1: the browser tests must run)")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's Chromium (never a downloaded browser), headless. Module-scoped: Playwright's
    sync API keeps an event loop running while it is open, which ``asyncio.run`` in later test
    modules would trip over."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("playwright is not installed (pip install 'playwright>=1.40')")
    if not CHROMIUM.exists():
        _unavailable(f"{CHROMIUM} is missing (apt-get install chromium)")
    with sync_playwright() as p:
        launched = p.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=["--no-sandbox"]
        )
        try:
            yield launched
        finally:
            launched.close()


@dataclass
class Watch:
    """What a page did that it should not: dialogs, console errors, uncaught exceptions."""

    dialogs: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)

    def problems(self) -> list[str]:
        return self.dialogs + self.console_errors + self.page_errors


@pytest.fixture
def page(browser: Any) -> Iterator[tuple[Any, Watch]]:
    """A fresh browser context and page, with listeners on dialogs and console errors."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    tab = context.new_page()
    watch = Watch()

    def on_dialog(dialog: Any) -> None:
        watch.dialogs.append(f"dialog {dialog.type}: {dialog.message}")
        dialog.dismiss()

    tab.on("dialog", on_dialog)
    tab.on(
        "console",
        lambda msg: (
            watch.console_errors.append(f"console {msg.text} at {msg.location}")
            if msg.type == "error"
            else None
        ),
    )
    tab.on("pageerror", lambda exc: watch.page_errors.append(f"page error {exc}"))
    try:
        yield tab, watch
    finally:
        context.close()


@pytest.fixture
def shot(request: pytest.FixtureRequest) -> Callable[[Any, str], Path]:
    """``shot(page, "runs")`` saves a full-page screenshot under test-artifacts/dashboard/."""

    def save(tab: Any, name: str) -> Path:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"{request.node.name}-{name}.png"
        tab.screenshot(path=str(path), full_page=True)
        return path

    return save
