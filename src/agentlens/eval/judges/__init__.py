"""Judges: decide claim by claim whether the evidence supports what the agent said.

Backends: ``offline`` (deterministic, no network), ``openai`` (any OpenAI-compatible
chat-completions endpoint: OpenAI, vLLM, Ollama, llama.cpp server...) and ``anthropic``. The
network backends import httpx only when built. Every judge follows one rule: a claim that is
correct but absent from the evidence is NOT supported; a failure is ``unverifiable``, never
``supported``.

Build one with :func:`get_judge` (arguments), or :func:`judge_from_settings` (the ``[judge]``
table of ``agentlens.toml`` and the ``AGENTLENS_JUDGE_*`` environment variables).
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Mapping
from typing import Any

from agentlens.config import JUDGE_KEYS, SETTINGS, Settings
from agentlens.errors import ConfigError
from agentlens.eval.judges._cache import VerdictCache, default_cache_path
from agentlens.eval.judges._llm import DEFAULT_BASE_URLS
from agentlens.eval.judges._offline import OfflineJudge, coverage_baseline, evidence_items
from agentlens.eval.judges._protocol import (
    RULE,
    ClaimVerdict,
    EvidenceSpan,
    Judge,
    JudgeUsage,
    Label,
    as_claims,
    unverifiable,
)

__all__ = [
    "BACKENDS",
    "RULE",
    "ClaimVerdict",
    "EvidenceSpan",
    "Judge",
    "JudgeUsage",
    "Label",
    "OfflineJudge",
    "VerdictCache",
    "as_claims",
    "check_file_base_url",
    "coverage_baseline",
    "default_cache_path",
    "evidence_items",
    "get_judge",
    "judge_from_settings",
    "judge_options",
    "unverifiable",
]

BACKENDS = ("anthropic", "offline", "openai")
"""The judge backends :func:`get_judge` knows."""

_ROWS = {s.name.removeprefix("judge."): s for s in SETTINGS if s.name.startswith("judge.")}
"""The judge's rows of the settings table: keys of ``[judge]`` and ``AGENTLENS_JUDGE_*``."""
_KEYS = frozenset(JUDGE_KEYS)


def get_judge(
    backend: str = "offline",
    *,
    model: str | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    **options: Any,
) -> Judge:
    """Build a judge.

    Args:
        backend: ``offline``, ``openai`` or ``anthropic``.
        model: the model name (required by the network backends unless
            ``AGENTLENS_JUDGE_MODEL`` is set).
        base_url: the endpoint (OpenAI-compatible: e.g. ``http://localhost:11434/v1``).
        api_key: the key; default from ``api_key_env``, ``AGENTLENS_JUDGE_API_KEY``, then
            ``OPENAI_API_KEY`` / ``ANTHROPIC_API_KEY``.
        **options: backend options: ``timeout``, ``max_concurrency``, ``max_retries``,
            ``budget_usd``, ``batch_size``, ``cache`` (a SQLite path, ``"default"``, or
            ``"memory"``/``"off"``), ``prices`` ({model: (usd per 1M input, per 1M output)}),
            ``structured_output``, ``max_tokens``, ``api_key_env``; for ``offline``: ``mode``
            and ``min_coverage``.

    Raises:
        ConfigError: an unknown backend or option.
        MissingExtraError: httpx is not installed (network backends).
    """
    name = (backend or "offline").strip().lower()
    if name == "offline":
        # network-only settings (from a shared [judge] table) are ignored by the offline judge
        bad = set(options) - set(_KEYS) - {"prices", "structured_output"}
        if bad:
            raise ConfigError(f"judge 'offline': unknown option {sorted(bad)[0]!r}")
        kwargs: dict[str, Any] = {}
        if "mode" in options:
            kwargs["mode"] = options["mode"]
        if "min_coverage" in options:
            kwargs["min_coverage"] = float(options["min_coverage"])
        return OfflineJudge(**kwargs)
    if name in ("openai", "anthropic"):
        if name == "openai":
            from agentlens.eval.judges._openai import OpenAIJudge as cls
        else:
            from agentlens.eval.judges._anthropic import AnthropicJudge as cls  # type: ignore[assignment]
        for offline_only in ("mode", "min_coverage"):
            options.pop(offline_only, None)
        params = set(inspect.signature(cls.__init__).parameters) - {"self"}
        bad = set(options) - params
        if bad:
            raise ConfigError(f"judge {name!r}: unknown option {sorted(bad)[0]!r}")
        return cls(model=model, base_url=base_url, api_key=api_key, **options)
    raise ConfigError(f"unknown judge backend {backend!r}; choose from {', '.join(BACKENDS)}")


def judge_options(table: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The judge settings: ``AGENTLENS_JUDGE_<KEY>`` environment variables over ``table`` (a
    ``[judge]`` table given in code). Unknown keys and values of the wrong type raise
    :class:`ConfigError`. (:func:`agentlens.config.load_settings` resolves the same rows.)"""
    merged: dict[str, Any] = {}
    for key, value in (table or {}).items():
        row = _ROWS.get(key)
        if row is None:
            raise ConfigError(
                f"[judge]: unknown key {key!r}; known keys: {', '.join(sorted(_KEYS))}"
            )
        merged[key] = row.parse(value, f"[judge] {key}")
    for key, row in _ROWS.items():
        raw = os.environ.get(row.env) if row.env else None
        if raw is not None and raw.strip():
            merged[key] = row.parse(raw, row.env or key)
    return merged


def judge_from_settings(settings: Any = None, **overrides: Any) -> Judge:
    """The judge configured by ``settings.judge`` (the ``[judge]`` table), the environment, and
    ``overrides`` (e.g. from the CLI's ``--judge`` and ``--model``; ``None`` values are ignored).

    Raises:
        ConfigError: a bad setting, or a ``base_url`` that came from the configuration file
            without the opt-in ``AGENTLENS_JUDGE_ALLOW_FILE_BASE_URL=1``.
    """
    if settings is None:
        from agentlens.config import load_settings

        settings = load_settings()
    opts = judge_options(getattr(settings, "judge", None) or {})
    opts.update({k: v for k, v in overrides.items() if v is not None})
    backend = opts.pop("backend", "offline")
    if "base_url" not in overrides or overrides["base_url"] is None:
        check_file_base_url(settings, backend, opts.get("base_url"))
    return get_judge(backend, **opts)


def check_file_base_url(settings: Any, backend: str | None, base_url: str | None) -> None:
    """Refuse a judge endpoint that a configuration file chose, unless the user opted in.

    A file found by searching upwards may come from someone else's repository: it must not send
    the judge's key and the traces to a host of its choosing.

    Raises:
        ConfigError: the file set a non-default ``base_url`` and
            ``AGENTLENS_JUDGE_ALLOW_FILE_BASE_URL`` is not on.
    """
    if base_url is None or not isinstance(settings, Settings):
        return
    if not settings.judge_from_file("base_url") or settings.judge_allow_file_base_url:
        return
    default = DEFAULT_BASE_URLS.get((backend or "offline").strip().lower())
    if default is None or base_url.rstrip("/") == default:
        return  # the offline judge sends nothing; the default endpoint is no choice
    raise ConfigError(
        f"{settings.origin('judge.base_url')}: a judge endpoint set in a configuration file "
        "is used only with AGENTLENS_JUDGE_ALLOW_FILE_BASE_URL=1 (or set "
        "AGENTLENS_JUDGE_BASE_URL yourself)"
    )
