"""API keys: created, listed and revoked with ``agentlens keys``; checked on every request.

A key looks like ``al_<id>_<secret>``: ``id`` (12 hex digits) is public and names the stored
row; ``secret`` (43 characters, 256 random bits) is never stored. The store keeps a random salt
and ``scrypt(secret, salt, n=2**14, r=8, p=1)`` (a slow hash), and a presented key is checked
by recomputing it and comparing in constant time (:func:`hmac.compare_digest`). A key is shown
once, when it is created.

Checking a key with scrypt takes tens of milliseconds, too slow for every request: the
:class:`KeyChecker` remembers, for a few seconds, the SHA-256 of keys it has verified (compared
in constant time too), so a revoked key stops working within ``cache_s`` seconds.

Dashboard sessions: a key given to the login form is exchanged for a session token
``s1.<key id>.<expiry>.<nonce>.<signature>`` (:meth:`KeyChecker.open_session`); the key itself is
never in the cookie. The signature is an HMAC-SHA256 under a key derived from the stored hash of
the key's secret, which never leaves the server, so every server process over the same store
accepts the token, and revoking the key ends its sessions at once. The session's CSRF token is
derived the same way from the nonce.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from agentlens.errors import ConfigError

__all__ = [
    "KEY_PATTERN",
    "CreatedKey",
    "KeyChecker",
    "Session",
    "create_key",
    "hash_secret",
    "revoke_key",
]

KEY_PATTERN = re.compile(r"al_([0-9a-f]{12})_([A-Za-z0-9_-]{43})")
"""The form of a key."""
_PROJECT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_SCRYPT = {"n": 2**14, "r": 8, "p": 1, "maxmem": 64 << 20, "dklen": 32}
_SESSION = re.compile(r"s1\.([0-9a-f]{12})\.([0-9]{1,12})\.([0-9a-f]{32})\.([0-9a-f]{64})")
SESSION_TTL_S = 12 * 3600
"""How long a dashboard session lasts."""


def hash_secret(secret: str, salt: bytes) -> bytes:
    """The stored hash of a key's secret (scrypt)."""
    return hashlib.scrypt(secret.encode("ascii"), salt=salt, **_SCRYPT)


def _now_us() -> int:
    return int(time.time() * 1_000_000)


@dataclass(frozen=True, slots=True)
class CreatedKey:
    """A key just created: ``key`` is shown once and never again."""

    id: str
    project: str
    key: str


def create_key(store: Any, project: str, name: str | None = None) -> CreatedKey:
    """Create a key for ``project`` in ``store``.

    Raises:
        ConfigError: the project name is not 1-64 letters, digits, ``.``, ``_`` or ``-``.
    """
    if not _PROJECT.fullmatch(project or ""):
        raise ConfigError(
            f"invalid project name {project!r}: use 1-64 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    key_id = secrets.token_hex(6)
    secret = secrets.token_urlsafe(32)
    salt = secrets.token_bytes(16)
    store.create_api_key(key_id, project, salt, hash_secret(secret, salt), _now_us(), name)
    return CreatedKey(id=key_id, project=project, key=f"al_{key_id}_{secret}")


def revoke_key(store: Any, key_id: str) -> bool:
    """Revoke a key by its id (``al_<id>_...``'s id, or the whole key). False when unknown."""
    match = KEY_PATTERN.fullmatch(key_id.strip())
    return bool(store.revoke_api_key(match.group(1) if match else key_id.strip(), _now_us()))


def format_us(value: int | None) -> str | None:
    """An ISO time from µs, for listings."""
    if value is None:
        return None
    return datetime.fromtimestamp(value / 1e6, tz=UTC).isoformat().replace("+00:00", "Z")


@dataclass(frozen=True, slots=True)
class Session:
    """A valid dashboard session: whose key it was opened with and its CSRF token."""

    key_id: str
    project: str
    csrf: str
    """The token every form of this session that changes something must carry."""
    expires_at: int
    """Unix seconds."""


def _session_key(record: Any) -> bytes:
    return hmac.new(bytes(record.hash), b"agentlens dashboard session", hashlib.sha256).digest()


def _sign(record: Any, payload: str) -> str:
    return hmac.new(_session_key(record), payload.encode("ascii"), hashlib.sha256).hexdigest()


class KeyChecker:
    """Checks presented keys against the store; thread-safe.

    Args:
        store: a store with the API-key methods (:class:`agentlens.store.ServerStore`).
        cache_s: how long a verified key (and the number of active keys) is remembered.
    """

    def __init__(self, store: Any, *, cache_s: float = 2.0) -> None:
        self._store = store
        self._cache_s = cache_s
        self._lock = threading.Lock()
        self._verified: dict[str, tuple[bytes, str, float]] = {}
        self._active: tuple[int, float] | None = None
        self._closed: dict[str, float] = {}

    def any_keys(self) -> bool:
        """True when at least one key is active (then every request needs one)."""
        now = time.monotonic()
        with self._lock:
            if self._active is not None and now - self._active[1] < self._cache_s:
                return self._active[0] > 0
        count = int(self._store.count_active_api_keys())
        with self._lock:
            self._active = (count, now)
        return count > 0

    def project_of(self, key: str) -> str | None:
        """The project of a valid, active key; ``None`` for anything else."""
        match = KEY_PATTERN.fullmatch(key)
        if match is None:
            return None
        key_id, secret = match.groups()
        digest = hashlib.sha256(key.encode("ascii")).digest()
        now = time.monotonic()
        with self._lock:
            cached = self._verified.get(key_id)
        if cached is not None and now - cached[2] < self._cache_s:
            return cached[1] if hmac.compare_digest(cached[0], digest) else None
        record = self._store.get_api_key(key_id)
        if record is None or record.revoked_at is not None:
            with self._lock:
                self._verified.pop(key_id, None)
            return None
        if not hmac.compare_digest(hash_secret(secret, bytes(record.salt)), bytes(record.hash)):
            return None
        with self._lock:
            if len(self._verified) > 10_000:
                self._verified.clear()
            self._verified[key_id] = (digest, record.project, now)
        return str(record.project)

    def open_session(self, key: str, *, ttl_s: int = SESSION_TTL_S) -> str | None:
        """A session token for a valid, active key (``None`` for anything else)."""
        match = KEY_PATTERN.fullmatch(key)
        if match is None or self.project_of(key) is None:
            return None
        key_id = match.group(1)
        record = self._store.get_api_key(key_id)
        if record is None:
            return None
        payload = f"s1.{key_id}.{int(time.time()) + ttl_s}.{secrets.token_hex(16)}"
        return f"{payload}.{_sign(record, payload)}"

    def session(self, token: str) -> Session | None:
        """The session of a token :meth:`open_session` made, while it has not expired, was not
        closed and its key is active; ``None`` for anything else."""
        match = _SESSION.fullmatch(token)
        if match is None:
            return None
        key_id, expires, nonce, signature = match.groups()
        if int(expires) <= time.time():
            return None
        with self._lock:
            if nonce in self._closed:
                return None
        record = self._store.get_api_key(key_id)
        if record is None or record.revoked_at is not None:
            return None
        payload = token.rpartition(".")[0]
        if not hmac.compare_digest(_sign(record, payload), signature):
            return None
        csrf = _sign(record, f"csrf.{nonce}")[:32]
        return Session(key_id, str(record.project), csrf, int(expires))

    def close_session(self, token: str) -> None:
        """End a session (logout): this process refuses the token from now on."""
        match = _SESSION.fullmatch(token)
        if match is None:
            return
        now = time.time()
        with self._lock:
            self._closed = {n: t for n, t in self._closed.items() if t > now}
            self._closed[match.group(3)] = float(match.group(2))
