"""Who is looking: the server's key checker and project views, a session cookie and CSRF tokens.

The dashboard never checks a key itself: the server hands it its
:class:`~agentlens.server._keys.KeyChecker` (through :class:`Access`), which opens and checks
sessions, and its project view (:func:`agentlens.server._scope.project_view`), so a page sees
exactly what the API shows the same key.

- A signed-in viewer has the session cookie (HttpOnly, SameSite=Strict; the key is never in
  it) and the session's CSRF token, which every form that changes something carries.
- A loopback client of a server with no key yet (local use, as in the API) needs no login and
  sees every project; its forms carry a random CSRF token that is also in a cookie
  (double submit), as does the login form.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from starlette.requests import Request
from starlette.responses import Response

__all__ = [
    "CSRF_COOKIE",
    "SESSION_COOKIE",
    "Access",
    "SessionKeys",
    "Viewer",
    "csrf_ok",
    "set_cookie",
    "viewer_of",
]

SESSION_COOKIE = "agentlens_session"
CSRF_COOKIE = "agentlens_csrf"


class SessionLike(Protocol):
    @property
    def project(self) -> str: ...

    @property
    def csrf(self) -> str: ...

    @property
    def key_id(self) -> str: ...


class SessionKeys(Protocol):
    """What the dashboard needs of the server's key checker."""

    def any_keys(self) -> bool: ...

    def open_session(self, key: str) -> str | None: ...

    def session(self, token: str) -> SessionLike | None: ...

    def close_session(self, token: str) -> None: ...


@dataclass(frozen=True)
class Access:
    """What the server gives the dashboard: its store, keys and project isolation."""

    store: Any
    keys: SessionKeys
    local: Callable[[Request], bool]
    """True for a client the server serves without a key (loopback, no key created yet)."""
    view: Callable[[str | None], Any]
    """The store as one project sees it (``None``: every project)."""


@dataclass(frozen=True)
class Viewer:
    """The person looking at a page."""

    project: str | None
    """Their key's project; ``None`` in local use (every project)."""
    csrf: str
    """The token their forms carry."""
    key_id: str | None = None
    """The key the session was opened with; ``None`` in local use."""
    new_csrf_cookie: bool = False
    """True when the double-submit cookie must be set on the response."""

    def owns(self, project: str) -> bool:
        """True when the viewer may see runs of ``project``."""
        return self.project is None or self.project == project


def viewer_of(request: Request, access: Access) -> Viewer | None:
    """The viewer of a request: its valid session, else local use; ``None``: must sign in."""
    token = request.cookies.get(SESSION_COOKIE)
    if token:
        session = access.keys.session(token)
        if session is not None:
            return Viewer(session.project, session.csrf, session.key_id)
    if access.local(request):
        return anonymous_viewer(request)
    return None


def anonymous_viewer(request: Request) -> Viewer:
    """A viewer without a session, with the double-submit CSRF token of the request (a new one
    when it has none)."""
    token = request.cookies.get(CSRF_COOKIE)
    if token and len(token) == 43:
        return Viewer(None, token)
    return Viewer(None, secrets.token_urlsafe(32), new_csrf_cookie=True)


def csrf_ok(request: Request, viewer: Viewer, sent: str | None) -> bool:
    """True when a form's token is the viewer's and the request comes from this site."""
    origin = request.headers.get("origin")
    if origin is not None and origin != "null":
        own = f"{request.url.scheme}://{request.headers.get('host', '')}"
        if origin != own:
            return False
    if not sent or not hmac.compare_digest(sent.encode(), viewer.csrf.encode()):
        return False
    if viewer.key_id is None:  # double submit: the cookie must carry the same token
        cookie = request.cookies.get(CSRF_COOKIE) or ""
        return hmac.compare_digest(cookie.encode(), sent.encode())
    return True


def set_cookie(response: Response, request: Request, name: str, value: str | None) -> None:
    """Set (or with ``None`` delete) one of the dashboard's cookies: HttpOnly, SameSite=Strict,
    Secure over HTTPS."""
    secure = request.url.scheme == "https"
    if value is None:
        response.delete_cookie(name, path="/", secure=secure, httponly=True, samesite="strict")
        return
    response.set_cookie(
        name, value, path="/", secure=secure, httponly=True, samesite="strict", max_age=12 * 3600
    )
