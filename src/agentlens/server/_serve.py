"""``agentlens serve``: the app on uvicorn, refusing a non-loopback address while no key exists."""

from __future__ import annotations

import ipaddress
import socket
from typing import Any

from agentlens.errors import ConfigError

__all__ = ["check_bind", "serve"]


def _loopback_address(host: str) -> bool:
    if host in ("localhost",):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    return bool(infos) and all(ipaddress.ip_address(i[4][0]).is_loopback for i in infos)


def check_bind(store: Any, host: str) -> None:
    """Refuse to listen beyond this machine while no API key exists.

    Raises:
        ConfigError: ``host`` is not a loopback address and the store has no active key.
    """
    if _loopback_address(host):
        return
    if store.count_active_api_keys() == 0:
        raise ConfigError(
            f"refusing to listen on {host}: no API key exists yet, so anyone who can reach "
            "this address could read and write runs; create one with "
            "`agentlens keys create --project NAME`, or listen on 127.0.0.1"
        )


def _shareable(url: str) -> bool:
    """True when another process can open the store at ``url`` (not an in-memory SQLite)."""
    from agentlens.config import parse_store_url

    parsed = parse_store_url(url)
    return parsed.backend != "sqlite" or parsed.sqlite_path is not None


def serve(
    *, host: str = "127.0.0.1", port: int = 6660, db: str | None = None, **options: Any
) -> None:
    """Run the server until interrupted: SIGINT/SIGTERM, to the server or to its whole process
    group, finish the accepted writes first, then stop the background process (which ignores
    both signals: the server stops it) and return (uvicorn then re-raises a SIGTERM)."""
    import uvicorn

    from agentlens.server._app import create_app
    from agentlens.store import open_store

    store = open_store(db)
    try:
        check_bind(store, host)
    except BaseException:
        store.close()
        raise
    options.setdefault("background_process", _shareable(store.url))
    app = create_app(store, **options)
    try:
        uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)
    finally:
        store.close()
