"""Settings: one table of every setting, resolved argument, then environment, then file, then
default.

:data:`SETTINGS` is the one place a setting is declared: its name, the argument that sets it,
its environment variable, its key in the configuration file (``agentlens.toml``, or
``[tool.agentlens]`` in ``pyproject.toml``), its type and its default. :func:`load_settings`
resolves every row in that order (first one wins) and records where each value came from
(:attr:`Settings.origins`). A command loads its settings once and passes them down.

A configuration file looks like this (in ``pyproject.toml`` every table goes under
``[tool.agentlens]``)::

    db = "sqlite:///agentlens.db"
    default_scorers = ["no_fabricated_refs", "parametric_leakage", "repeated_tool_calls"]
    evidence = ["input", "user", "system", "tool", "retrieval"]

    [scorers.no_fabricated_refs]            # options for every agent role
    patterns = ['CUST-\\d{5}', 'DOC-[a-f0-9]{8}']

    [agents.support]                         # one agent role
    evidence = ["input", "user", "tool"]
    [agents.support.scorers.excessive_steps]
    max_steps = 25

    [judge]
    backend = "offline"

What a file cannot do: name the environment variable a judge's key is read from
(``judge.api_key_env``), or send a judge's requests to another endpoint (``judge.base_url``)
unless the user opted in with ``AGENTLENS_JUDGE_ALLOW_FILE_BASE_URL=1``: a file found by
searching upwards from the working directory may come from a repository someone else wrote.

This module is a leaf: it imports nothing of agentlens but :mod:`agentlens.errors`.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from agentlens.errors import ConfigError

__all__ = [
    "DEFAULT_DB_URL",
    "DEFAULT_EVIDENCE",
    "DEFAULT_REVIEW_SCORERS",
    "DEFAULT_SCORERS",
    "LOOP_GUARD_MODES",
    "SETTINGS",
    "STORE_SCHEMES",
    "AgentSettings",
    "Setting",
    "Settings",
    "StoreURL",
    "env_flag",
    "find_config_file",
    "load_settings",
    "parse_bool",
    "parse_store_url",
    "settings_table",
]

DEFAULT_DB_URL = "sqlite:///agentlens.db"
"""The embedded default store: ``agentlens.db`` in the current directory."""

DEFAULT_EVIDENCE: tuple[str, ...] = ("input", "user", "system", "tool", "retrieval")
"""What counts as evidence by default: the run's input and these step kinds' outputs."""

EVIDENCE_CHOICES = frozenset(
    {"input", "user", "system", "tool", "retrieval", "llm", "text", "thinking", "agent"}
)

DEFAULT_SCORERS: tuple[str, ...] = (
    "no_fabricated_refs",
    "parametric_leakage",
    "repeated_tool_calls",
    "excessive_steps",
    "no_progress",
)
"""The scorers ``agentlens score`` runs when none is named."""

DEFAULT_REVIEW_SCORERS: tuple[str, ...] = DEFAULT_SCORERS
"""The scorers review runs when ``[review] scorers`` is not set: the same deterministic set."""

# --------------------------------------------------------------------------- value parsers

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"", "0", "false", "no", "off"})


def parse_bool(value: Any, where: str) -> bool:
    """A boolean setting, parsed one way everywhere: ``1 true yes on`` are on, ``0 false no off``
    and the empty string are off (any case); anything else is an error naming ``where``."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        low = value.strip().lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
    raise ConfigError(
        f"{where}: expected a boolean (1/0, true/false, yes/no, on/off), got {value!r}"
    )


def env_flag(name: str) -> bool:
    """The boolean environment setting ``name`` (a row of :data:`SETTINGS`), for code that must
    not read the configuration file (e.g. the CLI's last-resort error handler): a bad value is
    off."""
    row = _BY_ENV[name]
    try:
        return bool(row.parse(os.environ.get(name, ""), name))
    except ConfigError:
        return bool(row.default)


def _str(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"{where}: expected a string, got {value!r}")
    return value


def _http_url(value: Any, where: str) -> str:
    text = value.strip() if isinstance(value, str) else None
    parts = urlsplit(text) if text else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(f"{where} must be an http(s) URL, got {value!r}")
    return str(text)


def _webhook_url(value: Any, where: str) -> str:
    """An http(s) URL without a user name or password: a webhook is authenticated by its
    signature, and the URL is stored with every delivery and shown by ``agentlens review
    deliveries``."""
    text = _http_url(value, where)
    parts = urlsplit(text)
    if parts.username is not None or parts.password is not None:
        raise ConfigError(
            f"{where}: a user name or password in the URL is not sent, and would be stored with"
            " every delivery; remove it (the receiver checks the signature: webhook_secret)"
        )
    return text


def _secret(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{where} must be a non-empty string")
    return value


def _number(kind: type) -> Callable[[Any, str], Any]:
    def parse(value: Any, where: str) -> Any:
        if isinstance(value, bool):
            raise ConfigError(f"{where}: expected {kind.__name__}, got {value!r}")
        try:
            if kind is int and isinstance(value, float) and not value.is_integer():
                raise ValueError
            return kind(value.strip() if isinstance(value, str) else value)
        except (TypeError, ValueError):
            raise ConfigError(f"{where}: expected {kind.__name__}, got {value!r}") from None

    return parse


def _names(value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [v for v in (p.strip() for p in value.split(",")) if v]
    if not isinstance(value, list | tuple) or not all(isinstance(n, str) for n in value):
        raise ConfigError(f"{where} must be a list of scorer names")
    return tuple(value)


def _evidence(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where} must be a list of evidence sources")
    bad = [v for v in value if v not in EVIDENCE_CHOICES]
    if bad:
        raise ConfigError(
            f"{where}: unknown evidence source {bad[0]!r}; choose from {sorted(EVIDENCE_CHOICES)}"
        )
    return tuple(value)


LOOP_GUARD_MODES: tuple[str, ...] = ("off", "warn", "raise")
"""The loop guard's modes (``agentlens.configure(loop_guard=...)``, docs/capture.md)."""


def _loop_guard(value: Any, where: str) -> str:
    if not isinstance(value, str) or value.strip().lower() not in LOOP_GUARD_MODES:
        raise ConfigError(f"{where}: expected one of off, warn, raise; got {value!r}")
    return value.strip().lower()


def _table(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(f"{where} must be a table")
    return dict(value)


def _path(value: Any, where: str) -> Path:
    return Path(_str(value, where)).expanduser()


# --------------------------------------------------------------------------- store URLs

STORE_SCHEMES: Mapping[str, str] = {
    "sqlite": "sqlite",
    "postgresql": "postgresql",
    "postgres": "postgresql",
    "postgresql+psycopg": "postgresql",
}
"""The URL schemes the store accepts, and the backend each names."""


class StoreURL(str):
    """A store URL parsed once: the normalised URL (a ``str``) and the backend it names.

    Build with :func:`parse_store_url`. Whether the backend's driver is installed and its server
    reachable is for the store to say when it opens.
    """

    backend: str
    """``sqlite`` or ``postgresql``."""

    def __new__(cls, url: str, backend: str) -> StoreURL:
        self = super().__new__(cls, url)
        self.backend = backend
        return self

    def __getnewargs__(self) -> tuple[str, str]:  # type: ignore[override]
        return (str(self), self.backend)

    @property
    def sqlite_path(self) -> Path | None:
        """The file a ``sqlite`` URL names (``~`` expanded), ``None`` for an in-memory store.

        Raises:
            ConfigError: this is not a SQLite URL.
        """
        if self.backend != "sqlite":
            raise ConfigError(f"{self!r} is not a SQLite URL; expected sqlite:///PATH")
        rest = self.partition("://")[2]
        return None if rest in ("", "/:memory:") else Path(rest[1:]).expanduser()


def parse_store_url(value: str | StoreURL, where: str = "store URL") -> StoreURL:
    """Check and normalise a store URL: a bare path is a SQLite file (``sqlite:///path``).

    ``sqlite:///a/b.db`` is the relative path ``a/b.db``; ``sqlite:////a/b.db`` is ``/a/b.db``;
    ``sqlite:///:memory:`` and ``sqlite://`` are in memory.

    Raises:
        ConfigError: an empty value, a scheme the store does not accept, or a malformed SQLite
            URL (the message names ``where``).
    """
    if isinstance(value, StoreURL):
        return value
    if not isinstance(value, str):
        raise ConfigError(f"{where} must be a string (a store URL), got {value!r}")
    url = value.strip()
    if not url:
        raise ConfigError(f"{where}: the store URL is empty")
    if "://" not in url:
        scheme, colon, _ = url.partition(":")
        if colon and scheme.lower() in STORE_SCHEMES:  # not a file called "sqlite:team.db"
            raise ConfigError(
                f"{where}: {_redact(url)!r} is not a store URL: it has no '//' after"
                f" '{scheme}:' (use sqlite:///relative.db, sqlite:////abs.db or"
                " postgresql://HOST/DB)"
            )
        url = "sqlite:///" + url
    scheme, _, rest = url.partition("://")
    backend = STORE_SCHEMES.get(scheme.lower())
    if backend is None:
        raise ConfigError(
            f"{where}: unknown store URL scheme {scheme!r} in {_redact(url)!r}; "
            "expected sqlite:///PATH or postgresql://HOST/DB"
        )
    if backend == "sqlite" and rest not in ("", "/:memory:"):
        if not rest.startswith("/"):
            raise ConfigError(
                f"{where}: {url!r}: a SQLite URL has no host; "
                "use sqlite:///relative.db or sqlite:////abs.db"
            )
        if "?" in rest:
            raise ConfigError(
                f"{where}: {url!r}: query parameters are not supported in a SQLite URL"
            )
        if not rest[1:]:
            raise ConfigError(f"{where}: {url!r}: the SQLite URL names no file")
    return StoreURL(url, backend)


def _redact(url: str) -> str:
    """The URL without a password (``user:secret@host`` -> ``user:***@host``)."""
    scheme, sep, rest = url.partition("://")
    creds, at, host = rest.rpartition("@")
    if not at or ":" not in creds:
        return url
    return f"{scheme}{sep}{creds.split(':', 1)[0]}:***@{host}"


# --------------------------------------------------------------------------- the table


@dataclass(frozen=True, slots=True)
class Setting:
    """One row of the settings table."""

    name: str
    """The setting's name (and :class:`Settings` attribute, or ``judge.KEY``)."""
    type: str
    """Its type, as the docs say it."""
    default: Any
    """The value when nothing sets it (``None``: unset, the consumer decides)."""
    doc: str
    """What it does."""
    env: str | None = None
    """The environment variable that sets it, if any."""
    key: str | None = None
    """Its key in the configuration file (dotted: ``judge.model``); ``None``: a file cannot set it."""
    argument: str | None = None
    """The argument that sets it, if any (the CLI option or the function parameter)."""
    parse: Callable[[Any, str], Any] = _str
    """Checks and converts a raw value; ``parse(value, where)`` raises :class:`ConfigError`."""


def _judge(name: str, kind: str, parse: Callable[[Any, str], Any], doc: str, **kw: Any) -> Setting:
    env = kw.pop("env", f"AGENTLENS_JUDGE_{name.upper()}")
    key = kw.pop("key", f"judge.{name}")
    return Setting(f"judge.{name}", kind, None, doc, env=env, key=key, parse=parse, **kw)


def _review(name: str, kind: str, parse: Callable[[Any, str], Any], doc: str, **kw: Any) -> Setting:
    env = kw.pop("env", f"AGENTLENS_REVIEW_{name.upper()}")
    key = kw.pop("key", f"review.{name}")
    default = kw.pop("default", None)
    return Setting(f"review.{name}", kind, default, doc, env=env, key=key, parse=parse, **kw)


SETTINGS: tuple[Setting, ...] = (
    Setting(
        "db",
        "store URL",
        DEFAULT_DB_URL,
        "The store: sqlite:///relative.db, sqlite:////absolute.db, postgresql://..., or a bare "
        "SQLite file path.",
        env="AGENTLENS_DB",
        key="db",
        argument="--db, configure(db=...), load_settings(db=...)",
        parse=parse_store_url,
    ),
    Setting(
        "endpoint",
        "URL",
        None,
        "An agentlens server (http://host:6660): capture sends finished runs there (batched, "
        "gzip, retried) instead of writing a local store.",
        env="AGENTLENS_ENDPOINT",
        key="endpoint",
        argument="configure(endpoint=...)",
    ),
    Setting(
        "api_key",
        "str",
        None,
        "The API key capture sends to the endpoint (Authorization: Bearer). Not settable in a "
        "file.",
        env="AGENTLENS_API_KEY",
        argument="configure(api_key=...)",
    ),
    Setting(
        "config",
        "path",
        None,
        "The configuration file to read (it must exist) instead of searching upwards for "
        "agentlens.toml / pyproject.toml.",
        env="AGENTLENS_CONFIG",
        argument="load_settings(config_file=...)",
        parse=_path,
    ),
    Setting(
        "default_scorers",
        "list of scorer names",
        DEFAULT_SCORERS,
        "The scorers `agentlens score` runs when no --scorer is given.",
        key="default_scorers",
        argument="--scorer",
        parse=_names,
    ),
    Setting(
        "evidence",
        "list of evidence sources",
        DEFAULT_EVIDENCE,
        "What counts as evidence: `input` and step kinds (per agent role under [agents.ROLE]).",
        key="evidence",
        parse=_evidence,
    ),
    Setting(
        "disabled",
        "bool",
        False,
        "Capture records nothing, even when a store is configured.",
        env="AGENTLENS_DISABLED",
        argument="configure(enabled=...)",
        parse=parse_bool,
    ),
    Setting(
        "loop_guard",
        "off, warn or raise",
        "off",
        "The online loop guard of captured runs: warn (a warning and the on_loop callback) or "
        "raise (also agentlens.LoopDetected from the next identical call) once a tool returned "
        "the same result for the same arguments max_repeats times; per agent role under "
        "[agents.ROLE]. See docs/capture.md.",
        env="AGENTLENS_LOOP_GUARD",
        key="loop_guard",
        argument="configure(loop_guard=...)",
        parse=_loop_guard,
    ),
    Setting(
        "debug",
        "bool",
        False,
        "The CLI shows the traceback of an internal error instead of one line.",
        env="AGENTLENS_DEBUG",
        parse=parse_bool,
    ),
    Setting(
        "data",
        "path",
        None,
        "Where the public evaluation data sets are (benchmarks and data tests); "
        "default ../shared/data beside the repository.",
        env="AGENTLENS_DATA",
        parse=_path,
    ),
    _judge(
        "backend",
        "str",
        _str,
        "The judge: offline (default), openai or anthropic.",
        argument="--judge, get_judge(backend)",
    ),
    _judge("model", "str", _str, "The judge's model (network judges).", argument="--model"),
    _judge(
        "base_url",
        "URL",
        _str,
        "The judge's endpoint. Plain http only to a loopback host. From a file only with "
        "AGENTLENS_JUDGE_ALLOW_FILE_BASE_URL=1.",
        argument="get_judge(base_url=...)",
    ),
    _judge(
        "api_key",
        "str",
        _str,
        "The judge's key (default: the backend's own variable, OPENAI_API_KEY or "
        "ANTHROPIC_API_KEY). Not settable in a file.",
        key=None,
        argument="get_judge(api_key=...)",
    ),
    _judge(
        "api_key_env",
        "str",
        _str,
        "The environment variable the judge's key is read from (default: OPENAI_API_KEY or "
        "ANTHROPIC_API_KEY). Not settable in a file.",
        key=None,
        argument="get_judge(api_key_env=...)",
    ),
    _judge("timeout", "float", _number(float), "Seconds allowed per judge call."),
    _judge("max_concurrency", "int", _number(int), "Judge calls in flight at once."),
    _judge("max_retries", "int", _number(int), "Retries per judge call."),
    _judge("budget_usd", "float", _number(float), "The most one batch of claims may spend."),
    _judge("batch_size", "int", _number(int), "Claims per judge request."),
    _judge("cache", "str", _str, "The verdict cache: a SQLite path, default, memory or off."),
    _judge("mode", "str", _str, "The offline judge's mode: balanced, strict or lenient."),
    _judge("min_coverage", "float", _number(float), "The offline judge's coverage threshold."),
    _judge("max_tokens", "int", _number(int), "The judge reply's token limit."),
    _judge(
        "prices",
        "table",
        _table,
        "USD per million (input, output) tokens per model prefix, over the built-in table.",
        env=None,
    ),
    Setting(
        "judge_allow_file_base_url",
        "bool",
        False,
        "Let the configuration file's [judge] base_url be used (an explicit opt-in: a file "
        "found by searching upwards may come from someone else's repository).",
        env="AGENTLENS_JUDGE_ALLOW_FILE_BASE_URL",
        parse=parse_bool,
    ),
    _review(
        "scorers",
        "list of scorer names",
        _names,
        "The scorers review runs on a completed run; per role under [agents.ROLE.review] "
        "([review.md](review.md)).",
        default=DEFAULT_REVIEW_SCORERS,
    ),
    _review(
        "judge",
        "str",
        _str,
        "The judge review may use; without it review runs deterministic scorers only.",
        env=None,
    ),
    _review(
        "webhook",
        "http(s) URL",
        _webhook_url,
        "The URL flagged runs are POSTed to, signed (no user name or password in it: the "
        "signature authenticates). Set in a file while the secret comes from elsewhere, only "
        "with AGENTLENS_REVIEW_ALLOW_FILE_WEBHOOK=1.",
    ),
    _review(
        "webhook_secret",
        "str",
        _secret,
        "The HMAC-SHA256 key of the webhook's X-Agentlens-Signature-256 header.",
    ),
    _review(
        "allow_file_webhook",
        "bool",
        parse_bool,
        "Let a webhook URL from the configuration file be sent payloads signed with a secret "
        "from the environment or an argument (an explicit opt-in, as for a judge's base_url).",
        key=None,
        default=False,
    ),
    _review(
        "base_url",
        "http(s) URL",
        _http_url,
        "The dashboard's base URL: callbacks and webhooks link to {base_url}/runs/{id}.",
    ),
    _review(
        "on_capture",
        "bool",
        parse_bool,
        "Review captured runs in the background as agentlens.configure() writes them.",
        argument="configure(review=...)",
        default=True,
    ),
    _review(
        "webhook_attempts",
        "int",
        _number(int),
        "Attempts per delivery before it is kept as failed.",
        env=None,
        default=6,
    ),
    _review(
        "webhook_backoff",
        "float",
        _number(float),
        "Seconds before a delivery's first retry, doubled after each.",
        env=None,
        default=2.0,
    ),
    _review(
        "webhook_timeout",
        "float",
        _number(float),
        "Seconds per delivery attempt.",
        env=None,
        default=10.0,
    ),
    _review(
        "lease",
        "float",
        _number(float),
        "Seconds an agentlens serve process's review claim holds its runs: the runs a killed "
        "server held are reviewed by another process after it (agentlens worker: --lease).",
        default=300.0,
    ),
)
"""Every setting: argument, environment variable, file key, type and default in one place."""

_BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}
_BY_ENV: dict[str, Setting] = {s.env: s for s in SETTINGS if s.env}
_BY_KEY: dict[str, Setting] = {s.key: s for s in SETTINGS if s.key}
JUDGE_KEYS: tuple[str, ...] = tuple(
    s.name.removeprefix("judge.") for s in SETTINGS if s.name.startswith("judge.")
)
"""The keys of a judge's configuration (the ``[judge]`` table and ``AGENTLENS_JUDGE_*``)."""


def _defaults(prefix: str) -> dict[str, Any]:
    """The defaults of the rows named ``prefix...``, by name without the prefix."""
    return {
        s.name.removeprefix(prefix): s.default
        for s in SETTINGS
        if s.name.startswith(prefix) and s.default is not None
    }


def settings_table() -> str:
    """:data:`SETTINGS` as the Markdown table of docs/configuration.md (a test keeps the page
    in sync: paste this when a row changes)."""

    def shown(value: Any) -> str:
        if value is None:
            return "unset"
        if isinstance(value, bool):
            return "on" if value else "off"
        if isinstance(value, tuple | list):
            return ", ".join(value)
        if isinstance(value, float) and value.is_integer():
            return str(int(value))
        return str(value)

    def code(text: str | None) -> str:
        return f"`{text}`" if text else "-"

    head = [
        "| setting | argument | environment variable | file key | type | default | meaning |",
        "|---|---|---|---|---|---|---|",
    ]
    rows = [
        f"| `{s.name}` | {s.argument or '-'} | {code(s.env)} | {code(s.key)} | {s.type} | "
        f"{shown(s.default)} | {s.doc} |"
        for s in SETTINGS
    ]
    return "\n".join([*head, *rows]) + "\n"


_REFUSED_IN_FILE = {
    "judge.api_key": "a configuration file cannot hold a judge's key; set the backend's "
    "variable (OPENAI_API_KEY, ANTHROPIC_API_KEY) or AGENTLENS_JUDGE_API_KEY",
    "judge.api_key_env": "a configuration file cannot choose which environment variable a "
    "judge's key is read from; set AGENTLENS_JUDGE_API_KEY_ENV or pass api_key_env= instead",
}


# --------------------------------------------------------------------------- resolved settings


@dataclass(frozen=True, slots=True)
class AgentSettings:
    """The settings that apply to one agent role (defaults merged with the role's own)."""

    evidence: tuple[str, ...] = DEFAULT_EVIDENCE
    """The evidence sources: ``input`` and step kinds."""
    scorers: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Options per scorer name."""
    review: Mapping[str, Any] = field(default_factory=dict)
    """The role's ``[agents.NAME.review]`` table, as written (checked by
    :func:`agentlens.review.review_settings`)."""
    keys: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    """Where each scorer option was set: ``{scorer: {option: "FILE: agents.R.scorers.S.OPT"}}``."""
    loop_guard: str | None = None
    """The role's own ``[agents.NAME] loop_guard`` (``None``: the ``loop_guard`` setting)."""

    def scorer_options(self, name: str) -> dict[str, Any]:
        """The options configured for scorer ``name`` (empty when none)."""
        return dict(self.scorers.get(name, {}))

    def option_key(self, scorer: str, option: str = "") -> str:
        """Where ``scorer``'s ``option`` was set (the file and key; the scorer's table when no
        option is named), for error messages."""
        fallback = f"scorers.{scorer}" + (f".{option}" if option else "")
        return self.keys.get(scorer, {}).get(option, fallback)


@dataclass(frozen=True, slots=True)
class Settings:
    """Resolved settings. Build with :func:`load_settings`."""

    db: str = DEFAULT_DB_URL
    """The store URL (a :class:`StoreURL` when loaded)."""
    default_scorers: tuple[str, ...] = DEFAULT_SCORERS
    default: AgentSettings = field(default_factory=AgentSettings)
    agents: Mapping[str, AgentSettings] = field(default_factory=dict)
    judge: Mapping[str, Any] = field(default_factory=dict)
    """The judge configuration that was set (environment over ``[judge]``), without defaults."""
    review: Mapping[str, Any] = field(default_factory=lambda: _defaults("review."))
    """The ``review.*`` settings that were set (argument, ``AGENTLENS_REVIEW_*``, ``[review]``),
    by key without the prefix; checked further by :func:`agentlens.review.review_settings`."""
    source: Path | None = None
    """The file the settings were read from, if any."""
    disabled: bool = False
    loop_guard: str = "off"
    """The loop guard of every role without one of its own (:attr:`AgentSettings.loop_guard`)."""
    debug: bool = False
    judge_allow_file_base_url: bool = False
    endpoint: str | None = None
    """The agentlens server capture sends runs to, when set."""
    api_key: str | None = None
    """The key sent to :attr:`endpoint`."""
    origins: Mapping[str, str] = field(default_factory=dict)
    """Where each value that was set came from: ``argument``, the environment variable's name,
    or ``FILE: key``. Settings at their default are absent."""

    def for_agent(self, agent: str | None) -> AgentSettings:
        """The settings of an agent role; roles without a section get the defaults."""
        if agent is not None and agent in self.agents:
            return self.agents[agent]
        return self.default

    @property
    def store_url(self) -> StoreURL:
        """:attr:`db` parsed (it already is when the settings were loaded)."""
        return parse_store_url(self.db, self.origins.get("db", "db"))

    def origin(self, name: str) -> str:
        """Where setting ``name`` came from (``default`` when nothing set it)."""
        return self.origins.get(name, "default")

    def from_file(self, name: str) -> bool:
        """True when setting ``name`` came from the configuration file."""
        origin = self.origins.get(name, "")
        return self.source is not None and origin.startswith(f"{self.source}:")

    def judge_from_file(self, key: str) -> bool:
        """True when the judge setting ``key`` came from the configuration file."""
        return self.from_file(f"judge.{key}")


def find_config_file(start: Path | None = None) -> Path | None:
    """The configuration file: ``AGENTLENS_CONFIG``, else the nearest ``agentlens.toml``, else the
    nearest ``pyproject.toml`` with a ``[tool.agentlens]`` table, from ``start`` upwards."""
    explicit = os.environ.get("AGENTLENS_CONFIG")
    if explicit:
        path = Path(explicit)
        if not path.is_file():
            raise ConfigError(f"AGENTLENS_CONFIG={explicit!r}: no such file")
        return path
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / "agentlens.toml"
        if candidate.is_file():
            return candidate
        pyproject = folder / "pyproject.toml"
        if pyproject.is_file() and _has_tool_table(pyproject):
            return pyproject
    return None


def _has_tool_table(path: Path) -> bool:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return False  # not a file agentlens could read its table from: another tool's
    return isinstance(data.get("tool"), dict) and "agentlens" in data["tool"]


def load_settings(
    *,
    db: str | None = None,
    config_file: Path | None = None,
    use_file: bool = True,
    arguments: Mapping[str, Any] | None = None,
) -> Settings:
    """Resolve every setting of :data:`SETTINGS`: argument, then environment, then the
    configuration file, then the default.

    Args:
        db: the store URL argument (``--db``).
        config_file: the file to read instead of looking for one.
        use_file: ``False`` reads no file at all.
        arguments: other arguments by setting name, e.g. ``{"judge.backend": "openai"}``
            (``None`` values are ignored).

    Raises:
        ConfigError: the file cannot be parsed, or a value is bad (the message names the file
            and the key, or the environment variable).
    """
    path = config_file if config_file is not None else (find_config_file() if use_file else None)
    table = _read_table(path) if path is not None else {}
    where = str(path) if path is not None else "settings"
    given = {k: v for k, v in (arguments or {}).items() if v is not None}
    unknown_args = set(given) - set(_BY_NAME)
    if unknown_args:
        raise ConfigError(f"load_settings(): unknown setting {sorted(unknown_args)[0]!r}")
    if db is not None:
        given["db"] = db
    flat = _flatten(table, where)
    values: dict[str, Any] = {}
    origins: dict[str, str] = {}
    for row in SETTINGS:
        if row.name in given:
            label = (row.argument or row.name).split(", ")[0]  # "--db", "--judge"...
            values[row.name] = row.parse(given[row.name], label)
            origins[row.name] = "argument"
        elif row.env and os.environ.get(row.env, "").strip():
            values[row.name] = row.parse(os.environ[row.env], row.env)
            origins[row.name] = row.env
        elif row.key and row.key in flat:
            label = f"{where}: {row.key}"
            values[row.name] = row.parse(flat[row.key], label)
            origins[row.name] = label
        elif row.default is not None:
            values[row.name] = row.parse(row.default, row.name) if row.name == "db" else row.default
    default, agents = _parse_roles(table, where, values["evidence"])
    return Settings(
        db=values["db"],
        default_scorers=values["default_scorers"],
        default=default,
        agents=agents,
        judge={
            name.removeprefix("judge."): value
            for name, value in values.items()
            if name.startswith("judge.")
        },
        review={
            name.removeprefix("review."): value
            for name, value in values.items()
            if name.startswith("review.")
        },
        source=path,
        disabled=values["disabled"],
        loop_guard=values["loop_guard"],
        debug=values["debug"],
        judge_allow_file_base_url=values["judge_allow_file_base_url"],
        endpoint=values.get("endpoint"),
        api_key=values.get("api_key"),
        origins=origins,
    )


def _read_table(path: Path) -> dict[str, Any]:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        column = exc.start - raw.rfind(b"\n", 0, exc.start)
        raise ConfigError(
            f"{path}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at line {line}, column "
            f"{column}); a TOML file must be UTF-8"
        ) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    if path.name == "pyproject.toml":
        data = data.get("tool", {}).get("agentlens", {})
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: [tool.agentlens] must be a table")
    return data


_SECTIONS = {"scorers", "agents", "judge", "review"}


def _flatten(table: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The file's values by dotted key (``judge.model``), unknown and refused keys refused.
    The ``scorers`` and ``agents`` sections are structured and parsed by :func:`_parse_roles`."""
    flat: dict[str, Any] = {}
    for key, value in table.items():
        if key == "judge":
            if not isinstance(value, dict):
                raise ConfigError(f"{where}: 'judge' must be a table")
            for sub, item in value.items():
                dotted = f"judge.{sub}"
                if dotted in _REFUSED_IN_FILE:
                    raise ConfigError(f"{where}: [judge] {sub}: {_REFUSED_IN_FILE[dotted]}")
                if dotted not in _BY_KEY:
                    known = ", ".join(k for k in JUDGE_KEYS if f"judge.{k}" in _BY_KEY)
                    raise ConfigError(f"{where}: [judge]: unknown key {sub!r}; known keys: {known}")
                flat[dotted] = item
        elif key == "review":
            if not isinstance(value, dict):
                raise ConfigError(f"{where}: 'review' must be a table")
            for sub, item in value.items():
                if f"review.{sub}" not in _BY_KEY:
                    known = ", ".join(
                        s.name.removeprefix("review.")
                        for s in SETTINGS
                        if s.name.startswith("review.")
                    )
                    raise ConfigError(f"{where}: review: unknown key {sub!r}; known keys: {known}")
                flat[f"review.{sub}"] = item
        elif key in _SECTIONS:
            continue
        elif key in _BY_KEY:
            flat[key] = value
        else:
            raise ConfigError(f"{where}: unknown key {key!r}")
    return flat


def _parse_roles(
    table: Mapping[str, Any], where: str, evidence: tuple[str, ...]
) -> tuple[AgentSettings, dict[str, AgentSettings]]:
    options, keys = _parse_scorers(table.get("scorers", {}), where, "scorers")
    default = AgentSettings(evidence=evidence, scorers=options, keys=keys)
    agents: dict[str, AgentSettings] = {}
    raw_agents = table.get("agents", {})
    if not isinstance(raw_agents, dict):
        raise ConfigError(f"{where}: 'agents' must be a table of agent roles")
    for role, section in raw_agents.items():
        label = f"{where}: agents.{role}"
        if not isinstance(section, dict):
            raise ConfigError(f"{label} must be a table")
        bad = set(section) - {"evidence", "scorers", "review", "loop_guard"}
        if bad:
            raise ConfigError(f"{label}: unknown key {sorted(bad)[0]!r}")
        role_options, role_keys = _parse_scorers(
            section.get("scorers", {}), where, f"agents.{role}.scorers"
        )
        merged = {k: dict(v) for k, v in options.items()}
        merged_keys = {k: dict(v) for k, v in keys.items()}
        for name, opts in role_options.items():
            merged.setdefault(name, {}).update(opts)
            merged_keys.setdefault(name, {}).update(role_keys[name])
        role_evidence = (
            _evidence(section["evidence"], f"{label}.evidence")
            if "evidence" in section
            else default.evidence
        )
        agents[role] = AgentSettings(
            evidence=role_evidence,
            scorers=merged,
            review=_table(section.get("review", {}), f"{label}.review"),
            keys=merged_keys,
            loop_guard=(
                _loop_guard(section["loop_guard"], f"{label}.loop_guard")
                if "loop_guard" in section
                else None
            ),
        )
    return default, agents


def _parse_scorers(
    value: Any, where: str, prefix: str
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, str]]]:
    """``scorers`` is a table of scorer name -> table of options; also where each option is."""
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: '{prefix}' must be a table of scorer name -> options")
    options: dict[str, dict[str, Any]] = {}
    keys: dict[str, dict[str, str]] = {}
    for name, opts in value.items():
        if not isinstance(opts, dict):
            raise ConfigError(f"{where}: '{prefix}'.{name} must be a table of options")
        options[name] = dict(opts)
        keys[name] = {opt: f"{where}: {prefix}.{name}.{opt}" for opt in opts}
        keys[name][""] = f"{where}: {prefix}.{name}"
    return options, keys
