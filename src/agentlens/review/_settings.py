"""Review settings: the ``[review]`` table and each role's ``[agents.NAME.review]``.

::

    [review]
    scorers = ["no_fabricated_refs", "parametric_leakage", "repeated_tool_calls"]
    judge = "offline"            # optional: lets review run judged scorers (faithful_synthesis)
    webhook = "https://example.com/hooks/agentlens"
    webhook_secret = "..."       # or AGENTLENS_REVIEW_WEBHOOK_SECRET
    base_url = "https://agentlens.example.com"   # links to runs in webhook/callback payloads
    on_capture = true            # review captured runs in the background (default true)

    [agents.support.review]
    scorers = ["no_fabricated_refs", "excessive_steps"]

Without ``scorers`` review runs the deterministic default set (:data:`DEFAULT_REVIEW_SCORERS`).
A judged scorer (``faithful_synthesis``) runs only when ``judge`` names a judge for review; the
judged half of ``parametric_leakage`` too. Each scorer's options come from the usual
``[scorers.NAME]`` / ``[agents.NAME.scorers.NAME]`` tables.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agentlens.config import DEFAULT_REVIEW_SCORERS, SETTINGS, Settings
from agentlens.errors import ConfigError, ScorerError

__all__ = [
    "DEFAULT_REVIEW_SCORERS",
    "JUDGED_SCORERS",
    "ReviewSettings",
    "review_settings",
]


JUDGED_SCORERS = frozenset({"faithful_synthesis"})
"""Scorers that need a judge: review runs them only when ``[review] judge`` is set."""

_KEYS = {s.name.removeprefix("review.") for s in SETTINGS if s.name.startswith("review.")}
_ROLE_KEYS = {"scorers", "judge"}


@dataclass(frozen=True, slots=True)
class ReviewSettings:
    """The checked review settings."""

    scorers: tuple[str, ...]
    """The review scorers of roles without their own list."""
    on_capture: bool
    """Review captured runs in the background as they are written."""
    webhook_attempts: int
    """Attempts per delivery before it is marked failed (kept and listed)."""
    webhook_backoff: float
    """Seconds before the first retry; doubled after each failure (capped at 10 minutes)."""
    webhook_timeout: float
    """Seconds allowed per delivery attempt."""
    roles: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Review scorers per agent role that has ``[agents.NAME.review] scorers``."""
    judge: str | None = None
    """The judge review may use; ``None``: deterministic scorers only."""
    role_judges: Mapping[str, str] = field(default_factory=dict)
    webhook: str | None = None
    """The URL flagged runs are POSTed to."""
    webhook_secret: str | None = None
    """The HMAC-SHA256 key of the signature header (sent with deliveries to :attr:`webhook`
    only)."""
    base_url: str | None = None
    """The dashboard's base URL: payloads link to ``{base_url}/runs/{id}``."""
    lease: float = 300.0
    """Seconds an ``agentlens serve`` process's review claims hold (``review.lease``)."""

    def scorers_for(self, agent: str | None) -> tuple[str, ...]:
        """The review scorer names of an agent role."""
        if agent is not None and agent in self.roles:
            return self.roles[agent]
        return self.scorers

    def judge_for(self, agent: str | None) -> str | None:
        """The judge review may use for an agent role."""
        if agent is not None and agent in self.role_judges:
            return self.role_judges[agent]
        return self.judge


def _where(settings: Settings) -> str:
    return str(settings.source) if settings.source is not None else "settings"


def _names(value: Any, where: str, key: str) -> tuple[str, ...]:
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{_at(where, key)} must be a list of scorer names")
    from agentlens.eval import get_scorer

    for name in value:
        try:
            get_scorer(name)
        except ScorerError as exc:
            raise ConfigError(f"{_at(where, key)}: {exc}") from None
    return tuple(dict.fromkeys(value))


def _at(where: str, key: str) -> str:
    """``FILE: key``; or, when ``where`` already names a place (an environment variable, or
    ``FILE: key`` from the settings' origins), just that."""
    return where if where.endswith(key) or where.startswith("AGENTLENS_") else f"{where}: {key}"


def _judge(value: Any, where: str, key: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(
            f"{_at(where, key)} must name a judge backend (offline, openai, anthropic)"
        )
    return value.strip()


def _check_judged(names: tuple[str, ...], judge: str | None, where: str, key: str) -> None:
    if judge is None:
        judged = [n for n in names if n in JUDGED_SCORERS]
        if judged:
            raise ConfigError(
                f"{_at(where, key)}: {judged[0]!r} needs a judge; review runs the deterministic "
                "scorers only unless [review] judge names one"
            )


def _number(value: Any, where: str, key: str, kind: type, low: float) -> Any:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{_at(where, key)} must be a number, got {value!r}")
    if kind is int and not float(value).is_integer():
        raise ConfigError(f"{_at(where, key)} must be a whole number, got {value!r}")
    if value < low:
        raise ConfigError(f"{_at(where, key)} must be at least {low:g}, got {value!r}")
    return kind(value)


def review_settings(settings: Settings | None = None) -> ReviewSettings:
    """Check and resolve the review settings (default: :func:`agentlens.config.load_settings`).

    Raises:
        ConfigError: an unknown key, an unknown scorer, a judged scorer without a judge, a
            webhook that is not an http(s) URL... (the message names the file and the key).
    """
    if settings is None:
        from agentlens.config import load_settings

        settings = load_settings()
    where = _where(settings)
    # the rows' values (their defaults included), over the defaults for settings built by hand
    table: Mapping[str, Any] = {**Settings().review, **settings.review}
    origins: Mapping[str, str] = getattr(settings, "origins", {}) or {}

    def at(key: str) -> str:  # where a review setting came from: FILE: review.KEY, or a variable
        return origins.get(f"review.{key}", where)

    unknown = sorted(set(table) - _KEYS)
    if unknown:
        raise ConfigError(f"{where}: review: unknown key {unknown[0]!r}")
    judge = _judge(table.get("judge"), at("judge"), "review.judge")
    scorers = _names(table["scorers"], at("scorers"), "review.scorers")
    _check_judged(scorers, judge, at("scorers"), "review.scorers")
    roles: dict[str, tuple[str, ...]] = {}
    role_judges: dict[str, str] = {}
    for role, agent in getattr(settings, "agents", {}).items():
        section: Mapping[str, Any] = getattr(agent, "review", {}) or {}
        label = f"agents.{role}.review"
        bad = sorted(set(section) - _ROLE_KEYS)
        if bad:
            raise ConfigError(f"{where}: {label}: unknown key {bad[0]!r}")
        role_judge = _judge(section.get("judge"), where, f"{label}.judge")
        if role_judge is not None:
            role_judges[role] = role_judge
        if "scorers" in section:
            names = _names(section["scorers"], where, f"{label}.scorers")
            _check_judged(names, role_judge or judge, where, f"{label}.scorers")
            roles[role] = names
    webhook, secret = table.get("webhook"), table.get("webhook_secret")
    if (
        webhook is not None
        and secret is not None
        and settings.from_file("review.webhook")
        and not settings.from_file("review.webhook_secret")
        and not table.get("allow_file_webhook")
    ):
        raise ConfigError(
            f"{at('webhook')}: a webhook set in a configuration file is not sent payloads signed "
            f"with the secret from {settings.origin('review.webhook_secret')}; set "
            "AGENTLENS_REVIEW_WEBHOOK instead, or opt in with AGENTLENS_REVIEW_ALLOW_FILE_WEBHOOK=1"
        )
    base_url = table.get("base_url")
    return ReviewSettings(
        scorers=scorers,
        roles=roles,
        judge=judge,
        role_judges=role_judges,
        webhook=webhook,
        webhook_secret=secret,
        base_url=base_url.rstrip("/") if base_url is not None else None,
        on_capture=table["on_capture"],
        webhook_attempts=_number(
            table["webhook_attempts"], at("webhook_attempts"), "review.webhook_attempts", int, 1
        ),
        webhook_backoff=_number(
            table["webhook_backoff"], at("webhook_backoff"), "review.webhook_backoff", float, 0
        ),
        webhook_timeout=_number(
            table["webhook_timeout"],
            at("webhook_timeout"),
            "review.webhook_timeout",
            float,
            0.001,
        ),
        lease=_number(table["lease"], at("lease"), "review.lease", float, 0.001),
    )
