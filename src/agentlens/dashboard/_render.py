"""HTML responses: the Jinja2 environment (autoescape on for everything), the security headers
every page carries, and the filters the templates use."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from agentlens.dashboard._access import CSRF_COOKIE, Viewer, set_cookie

__all__ = ["CSP", "SECURITY_HEADERS", "page", "query_url", "secure"]

HERE = Path(__file__).parent

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)
"""No inline script or style, no foreign origin, never framed."""
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


def _segment(value: Any) -> str:
    """A value as one URL path segment: every reserved character escaped, so untrusted ids
    can never form another path, a scheme (``javascript:``) or a host."""
    return quote(str(value), safe="")


def _time(value: datetime | None) -> str:
    if value is None:
        return "—"
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def _pct(value: float | None) -> str:
    if value is None or math.isnan(value):
        return "—"
    return f"{value * 100:.1f}%"


def _seconds(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.1f} s"


def _number(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:,.4f}".rstrip("0")
    return f"{int(value):,}"


def _cost(value: Any) -> str:
    return "—" if value is None else f"${float(value):.4f}"


def _json_text(value: Any) -> str:
    """A value as indented JSON to show as text (autoescaped where it is put): the characters
    as they are, where Jinja's ``tojson`` writes ``<``, ``>``, ``&`` and ``'`` as ``\\u`` escapes
    meant for a script."""
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)


def query_url(path: str, **params: Any) -> str:
    """``path?params`` with the empty parameters left out."""
    kept = {k: v for k, v in params.items() if v not in (None, "", False)}
    return path + ("?" + urlencode(kept, doseq=True) if kept else "")


_ENV = Environment(
    loader=FileSystemLoader(HERE / "templates"),
    autoescape=True,
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
_ENV.filters.update(
    segment=_segment,
    time=_time,
    pct=_pct,
    seconds=_seconds,
    number=_number,
    cost=_cost,
    json_text=_json_text,
)
_ENV.globals["query_url"] = query_url


def secure(response: Response) -> Response:
    """Add the security headers to a response."""
    response.headers.update(SECURITY_HEADERS)
    return response


def page(
    request: Request, name: str, viewer: Viewer | None, *, status: int = 200, **context: Any
) -> HTMLResponse:
    """Render template ``name`` for ``viewer`` (``None`` on the login page)."""
    html = _ENV.get_template(name).render(viewer=viewer, path=request.url.path, **context)
    response = HTMLResponse(html, status_code=status)
    if viewer is not None and viewer.new_csrf_cookie:
        set_cookie(response, request, CSRF_COOKIE, viewer.csrf)
    secure(response)
    return response
