"""Settings: argument, then environment (``AGENTLENS_*``), then ``agentlens.toml`` or
``[tool.agentlens]`` in ``pyproject.toml``, then defaults.

Environment variables (the one place they are listed):

``AGENTLENS_DB``
    The store URL (``sqlite:///path``); a bare path is a SQLite file.
``AGENTLENS_ENDPOINT``
    An agentlens server (``http://host:6660``): capture sends finished runs there instead of
    writing a local store.
``AGENTLENS_API_KEY``
    The API key capture sends to ``AGENTLENS_ENDPOINT`` (``Authorization: Bearer``).
``AGENTLENS_CONFIG``
    The configuration file to read instead of looking for ``agentlens.toml`` / ``pyproject.toml``.
``AGENTLENS_DISABLED``
    ``1`` turns capture into a no-op even when a store is configured.
``AGENTLENS_DEBUG``
    ``1`` lets the CLI show the traceback of an internal error instead of one line.
``AGENTLENS_DATA``
    Where the public evaluation data sets are (benchmarks and data tests); default ``../shared/data``.

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
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentlens.errors import ConfigError

__all__ = [
    "DEFAULT_EVIDENCE",
    "DEFAULT_SCORERS",
    "AgentSettings",
    "Settings",
    "find_config_file",
    "load_settings",
    "set_configured_db",
]

_configured_db: str | None = None


def set_configured_db(url: str | None) -> None:
    """Record the store URL given to :func:`agentlens.configure`; it wins over the environment."""
    global _configured_db
    _configured_db = url


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

    def scorer_options(self, name: str) -> dict[str, Any]:
        """The options configured for scorer ``name`` (empty when none)."""
        return dict(self.scorers.get(name, {}))


@dataclass(frozen=True, slots=True)
class Settings:
    """Resolved settings. Build with :func:`load_settings`."""

    db: str = "sqlite:///agentlens.db"
    default_scorers: tuple[str, ...] = DEFAULT_SCORERS
    default: AgentSettings = field(default_factory=AgentSettings)
    agents: Mapping[str, AgentSettings] = field(default_factory=dict)
    judge: Mapping[str, Any] = field(default_factory=dict)
    review: Mapping[str, Any] = field(default_factory=dict)
    """The ``[review]`` table, as written (checked by :func:`agentlens.review.review_settings`)."""
    source: Path | None = None
    """The file the settings were read from, if any."""

    def for_agent(self, agent: str | None) -> AgentSettings:
        """The settings of an agent role; roles without a section get the defaults."""
        if agent is not None and agent in self.agents:
            return self.agents[agent]
        return self.default


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
    except (OSError, tomllib.TOMLDecodeError):
        return False
    return isinstance(data.get("tool"), dict) and "agentlens" in data["tool"]


def load_settings(
    *, db: str | None = None, config_file: Path | None = None, use_file: bool = True
) -> Settings:
    """Resolve settings: argument, then environment, then configuration file, then defaults.

    Raises:
        ConfigError: the file cannot be parsed or holds a bad value (the message names both).
    """
    path = config_file if config_file is not None else (find_config_file() if use_file else None)
    table: dict[str, Any] = {}
    if path is not None:
        table = _read_table(path)
    settings = _parse(table, path)
    resolved_db = db or _configured_db or os.environ.get("AGENTLENS_DB") or settings.db
    return Settings(
        db=resolved_db,
        default_scorers=settings.default_scorers,
        default=settings.default,
        agents=settings.agents,
        judge=settings.judge,
        review=settings.review,
        source=path,
    )


def _read_table(path: Path) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    if path.name == "pyproject.toml":
        data = data.get("tool", {}).get("agentlens", {})
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: [tool.agentlens] must be a table")
    return data


_TOP_KEYS = {"db", "default_scorers", "scorers", "evidence", "agents", "judge", "review"}


def _parse(table: Mapping[str, Any], path: Path | None) -> Settings:
    where = str(path) if path else "settings"
    unknown = set(table) - _TOP_KEYS
    if unknown:
        raise ConfigError(f"{where}: unknown key {sorted(unknown)[0]!r}")
    db = table.get("db", "sqlite:///agentlens.db")
    if not isinstance(db, str):
        raise ConfigError(f"{where}: 'db' must be a string")
    names = table.get("default_scorers", list(DEFAULT_SCORERS))
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ConfigError(f"{where}: 'default_scorers' must be a list of scorer names")
    options = _parse_scorers(table.get("scorers", {}), f"{where}: 'scorers'")
    default = AgentSettings(
        evidence=_parse_evidence(table.get("evidence", DEFAULT_EVIDENCE), f"{where}: 'evidence'"),
        scorers=options,
    )
    agents: dict[str, AgentSettings] = {}
    raw_agents = table.get("agents", {})
    if not isinstance(raw_agents, dict):
        raise ConfigError(f"{where}: 'agents' must be a table of agent roles")
    for role, section in raw_agents.items():
        label = f"{where}: agents.{role}"
        if not isinstance(section, dict):
            raise ConfigError(f"{label} must be a table")
        bad = set(section) - {"evidence", "scorers", "review"}
        if bad:
            raise ConfigError(f"{label}: unknown key {sorted(bad)[0]!r}")
        role_options = _parse_scorers(section.get("scorers", {}), f"{label}.scorers")
        merged = {k: dict(v) for k, v in options.items()}
        for name, opts in role_options.items():
            merged.setdefault(name, {}).update(opts)
        agents[role] = AgentSettings(
            evidence=_parse_evidence(
                section.get("evidence", default.evidence), f"{label}.evidence"
            ),
            scorers=merged,
            review=_raw_table(section.get("review", {}), f"{label}.review"),
        )
    judge = table.get("judge", {})
    if not isinstance(judge, dict):
        raise ConfigError(f"{where}: 'judge' must be a table")
    review = _raw_table(table.get("review", {}), f"{where}: 'review'")
    return Settings(
        db=db,
        default_scorers=tuple(names),
        default=default,
        agents=agents,
        judge=judge,
        review=review,
    )


def _raw_table(value: Any, label: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(f"{label} must be a table")
    return dict(value)


def _parse_scorers(value: Any, label: str) -> dict[str, dict[str, Any]]:
    """``scorers`` is a table of scorer name -> table of options."""
    if not isinstance(value, dict):
        raise ConfigError(f"{label} must be a table of scorer name -> options")
    options: dict[str, dict[str, Any]] = {}
    for name, opts in value.items():
        if not isinstance(opts, dict):
            raise ConfigError(f"{label}.{name} must be a table of options")
        options[name] = dict(opts)
    return options


def _parse_evidence(value: Any, label: str) -> tuple[str, ...]:
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{label} must be a list of evidence sources")
    bad = [v for v in value if v not in EVIDENCE_CHOICES]
    if bad:
        raise ConfigError(
            f"{label}: unknown evidence source {bad[0]!r}; choose from {sorted(EVIDENCE_CHOICES)}"
        )
    return tuple(value)
