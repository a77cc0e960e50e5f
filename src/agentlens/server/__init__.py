"""The agentlens server: ``agentlens serve`` (needs the ``server`` extra).

``create_app(store)`` returns the ASGI app: OTLP/HTTP ``POST /v1/traces``, the JSON API under
``/api``, ``/openapi.json``, ``/healthz`` and ``/metrics``; see docs/server.md. The dashboard's
paths (``/``, ``/runs``, ``/content``, ``/review``, ``/trends``, ``/login``, ``/static``) are
kept free for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentlens.errors import MissingExtraError

__all__ = ["ServerConfig", "create_app", "serve"]

if TYPE_CHECKING:  # pragma: no cover
    from agentlens.server._app import ServerConfig, create_app
    from agentlens.server._serve import serve


def _require() -> None:
    for module, package in (
        ("fastapi", "fastapi"),
        ("uvicorn", "uvicorn"),
        ("opentelemetry.proto", "opentelemetry-proto"),
        ("jinja2", "jinja2"),
    ):
        try:
            __import__(module)
        except ImportError:
            raise MissingExtraError(package, "server") from None


def __getattr__(name: str) -> Any:
    if name in ("create_app", "ServerConfig"):
        _require()
        from agentlens.server import _app

        return getattr(_app, name)
    if name == "serve":
        _require()
        from agentlens.server._serve import serve

        return serve
    raise AttributeError(f"module 'agentlens.server' has no attribute {name!r}")
