"""The machinery shared by the network judges: prompt, batching, retries, budget, cost, cache.

Subclasses say how to build a request and read a reply (:meth:`LLMJudge._request`,
:meth:`LLMJudge._parse_reply`); everything else is here. httpx is imported when a judge is
built, never at ``import agentlens``.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import os
import random
import re
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentlens.errors import ConfigError, MissingExtraError
from agentlens.eval._claims import Claim
from agentlens.eval._evidence import EvidenceItem
from agentlens.eval.judges._cache import (
    VerdictCache,
    cache_key,
    default_cache_path,
    evidence_digest,
)
from agentlens.eval.judges._offline import evidence_items
from agentlens.eval.judges._protocol import (
    RULE,
    ClaimVerdict,
    EvidenceSpan,
    JudgeUsage,
    Label,
    as_claims,
    unverifiable,
)

__all__ = [
    "DEFAULT_BASE_URLS",
    "PRICES",
    "SYSTEM_PROMPT",
    "LLMJudge",
    "Reply",
    "check_endpoint",
    "estimate_cost",
    "parse_verdicts",
]

logger = logging.getLogger("agentlens")

PROMPT_VERSION = "llm-1"

DEFAULT_BASE_URLS: dict[str, str] = {
    "openai": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com",
}
"""Each network backend's endpoint when none is set."""

_LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})


def check_endpoint(base_url: str, judge: str) -> str:
    """``base_url`` if a key and traces may be sent there: ``https``, or plain ``http`` only to
    a loopback host (``localhost``, ``127.0.0.0/8``, ``::1``), where nothing crosses a network.

    Raises:
        ConfigError: another scheme, a URL without a host, or plain http to another host.
    """
    import ipaddress
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(base_url)
        host = parts.hostname or ""
    except ValueError:
        raise ConfigError(f"judge {judge!r}: bad base_url {base_url!r}") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not host:
        raise ConfigError(
            f"judge {judge!r}: base_url {base_url!r} must be an https:// URL "
            "(or http:// to a loopback host)"
        )
    if scheme == "http":
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = host.lower().rstrip(".") in _LOOPBACK_NAMES
        if not loopback:
            raise ConfigError(
                f"judge {judge!r}: plain http to {host!r} would send the key and the traces "
                "unencrypted; use https://, or http:// only to localhost / 127.0.0.1 / ::1"
            )
    return base_url


SYSTEM_PROMPT = f"""You check claims against evidence, one claim at a time.

{RULE}

Judge only from the EVIDENCE below, never from what you know. A claim that combines facts from the
evidence into a conclusion the evidence does not state is NOT supported. Numbers, dates and names
must match the evidence exactly; a negation on one side only means NOT supported.

Reply with JSON only, no prose, in this shape:
{{"verdicts": [{{"id": 1, "label": "supported" | "unsupported", "confidence": 0.0-1.0,
"reason": "one short sentence", "evidence": "the exact words of the evidence relied on, or empty"}}]}}
with one entry per claim id."""

VERDICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "verdicts": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "id": {"type": "integer"},
                    "label": {"type": "string", "enum": ["supported", "unsupported"]},
                    "confidence": {"type": "number"},
                    "reason": {"type": "string"},
                    "evidence": {"type": "string"},
                },
                "required": ["id", "label", "confidence", "reason", "evidence"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["verdicts"],
    "additionalProperties": False,
}

PRICES: dict[str, tuple[float, float]] = {
    # USD per million (input, output) tokens: list prices, estimates only; override with prices=.
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4o": (2.50, 10.00),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1": (2.00, 8.00),
    "o4-mini": (1.10, 4.40),
    "o3-mini": (1.10, 4.40),
    "claude-3-haiku": (0.25, 1.25),
    "claude-3-5-haiku": (0.80, 4.00),
    "claude-haiku-4": (1.00, 5.00),
    "claude-3-5-sonnet": (3.00, 15.00),
    "claude-3-7-sonnet": (3.00, 15.00),
    "claude-sonnet-4": (3.00, 15.00),
    "claude-opus-4": (15.00, 75.00),
}
"""Prices per model name prefix (the longest matching prefix wins)."""

_RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 529})


def estimate_cost(
    model: str,
    input_tokens: int,
    output_tokens: int,
    prices: Mapping[str, Sequence[float]] | None = None,
) -> float | None:
    """The cost in USD, or ``None`` when the model's price is unknown."""
    table: dict[str, Sequence[float]] = {**PRICES, **(prices or {})}
    best = ""
    for prefix in table:
        if model.startswith(prefix) and len(prefix) > len(best):
            best = prefix
    if not best:
        return None
    p_in, p_out = table[best][0], table[best][1]
    return (input_tokens * p_in + output_tokens * p_out) / 1_000_000


@dataclass(frozen=True, slots=True)
class Reply:
    """What a backend's reply boils down to."""

    text: str
    input_tokens: int = 0
    output_tokens: int = 0


class _Retryable(Exception):
    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class _Fatal(Exception):
    pass


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)


def _extract_json(text: str) -> Any:
    """The first JSON value in ``text``: the whole text, inside a code fence, or the first
    balanced object/array followed by anything."""
    text = text.strip()
    candidates = [text]
    candidates += [m.group(1).strip() for m in _FENCE.finditer(text)]
    decoder = json.JSONDecoder()
    for cand in candidates:
        try:
            return json.loads(cand)
        except ValueError:
            pass
        for i, ch in enumerate(cand):
            if ch in "{[":
                try:
                    value, _ = decoder.raw_decode(cand, i)
                    return value
                except ValueError:
                    continue
    raise ValueError("no JSON in the reply")


def _label(value: Any) -> Label | None:
    if isinstance(value, bool):
        return Label.SUPPORTED if value else Label.UNSUPPORTED
    if not isinstance(value, str):
        return None
    v = value.strip().lower().replace("-", "_").replace(" ", "_")
    if v in ("supported", "support", "entailed", "entailment", "yes", "true"):
        return Label.SUPPORTED
    if v in (
        "unsupported",
        "not_supported",
        "contradicted",
        "contradiction",
        "refuted",
        "no",
        "false",
        "not_entailed",
        "absent",
        "neutral",
        "partially_supported",
    ):
        return Label.UNSUPPORTED
    return None


def parse_verdicts(text: str, n: int) -> list[dict[str, Any] | None]:
    """Per claim (1-based ids ``1..n``), the parsed verdict entry, or ``None`` when the reply has
    no valid entry for it. Raises ``ValueError`` when the reply holds no JSON at all."""
    data = _extract_json(text)
    if isinstance(data, dict):
        entries = data.get("verdicts", data.get("results", data.get("claims")))
        if entries is None and "label" in data:
            entries = [data]
    else:
        entries = data
    if not isinstance(entries, list):
        raise ValueError("the reply has no list of verdicts")
    out: list[dict[str, Any] | None] = [None] * n
    for pos, entry in enumerate(entries):
        if not isinstance(entry, dict):
            continue
        raw_id: Any = entry.get("id", entry.get("claim_id", pos + 1))
        try:
            idx = int(raw_id) - 1
        except (TypeError, ValueError):
            continue
        if not 0 <= idx < n or out[idx] is not None:
            continue
        label = _label(entry.get("label", entry.get("verdict", entry.get("supported"))))
        if label is None:
            continue
        try:
            conf = float(entry.get("confidence", 0.5))
        except (TypeError, ValueError):
            conf = 0.5
        if conf != conf:  # NaN
            conf = 0.5
        out[idx] = {
            "label": label,
            "confidence": min(1.0, max(0.0, conf)),
            "reason": str(entry.get("reason", "") or "")[:500],
            "evidence": str(entry.get("evidence", "") or ""),
        }
    return out


def _retry_after(headers: Mapping[str, str]) -> float | None:
    raw = headers.get("retry-after")
    if raw is None:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _resolve_key(
    api_key: str | None, api_key_env: str | None, defaults: Sequence[str]
) -> str | None:
    if api_key:
        return api_key
    names = ([api_key_env] if api_key_env else []) + ["AGENTLENS_JUDGE_API_KEY", *defaults]
    for name in names:
        value = os.environ.get(name)
        if value:
            return value
    return None


class LLMJudge:
    """A judge that asks a language model over HTTP. See the subclasses for the protocols.

    Args:
        model: the model name.
        base_url: the endpoint root.
        api_key: the key (else from ``api_key_env`` and the backend's environment variables).
        timeout: seconds allowed per HTTP call.
        max_concurrency: calls in flight at once.
        max_retries: retries per call on 429, 5xx, timeouts and connection errors.
        budget_usd: the most one :meth:`judge` call may spend; further claims are unverifiable.
        batch_size: claims per request.
        cache: a :class:`VerdictCache`, a SQLite path, ``"default"`` (the user cache file),
            ``"memory"`` (default) or ``"off"``.
        prices: {model prefix: (USD per 1M input tokens, per 1M output tokens)} over the table.
        max_tokens: the reply's token limit.
        max_evidence_chars: evidence beyond this is cut; then no claim is called unsupported
            (only unverifiable), since the judge did not see everything.
        backoff: the first retry delay in seconds (doubled per retry, with jitter).
        max_backoff: the longest delay between retries (also caps ``Retry-After``).
        transport: an httpx transport (for tests).
    """

    name = "llm"
    prompt_version = PROMPT_VERSION
    _key_env: tuple[str, ...] = ()
    _default_base_url = ""

    def __init__(
        self,
        *,
        model: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        api_key_env: str | None = None,
        timeout: float = 60.0,
        max_concurrency: int = 4,
        max_retries: int = 3,
        budget_usd: float | None = None,
        batch_size: int = 8,
        cache: VerdictCache | str | Path | None = "memory",
        prices: Mapping[str, Sequence[float]] | None = None,
        max_tokens: int = 1024,
        max_evidence_chars: int = 100_000,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        transport: Any = None,
        structured_output: bool = True,
    ) -> None:
        try:
            import httpx  # noqa: F401
        except ImportError:
            raise MissingExtraError("httpx", self.name) from None
        model = model or os.environ.get("AGENTLENS_JUDGE_MODEL")
        if not model:
            raise ConfigError(
                f"judge {self.name!r} needs a model: --model, [judge] model, or AGENTLENS_JUDGE_MODEL"
            )
        if max_concurrency < 1 or batch_size < 1 or max_retries < 0 or timeout <= 0:
            raise ConfigError(
                f"judge {self.name!r}: max_concurrency and batch_size must be >= 1, "
                "max_retries >= 0 and timeout > 0"
            )
        self.model = model
        self.base_url = check_endpoint(
            (base_url or self._env_base_url() or self._default_base_url).rstrip("/"), self.name
        )
        self.api_key = _resolve_key(api_key, api_key_env, self._key_env)
        self.timeout = float(timeout)
        self.max_concurrency = int(max_concurrency)
        self.max_retries = int(max_retries)
        self.budget_usd = None if budget_usd is None else float(budget_usd)
        self.batch_size = int(batch_size)
        self.cache = _make_cache(cache)
        self.prices = dict(prices or {})
        self.max_tokens = int(max_tokens)
        self.max_evidence_chars = int(max_evidence_chars)
        self.backoff = float(backoff)
        self.max_backoff = float(max_backoff)
        self.transport = transport
        self.structured_output = structured_output
        self.usage = JudgeUsage()
        self._sleep: Callable[[float], Awaitable[None]] = asyncio.sleep

    @property
    def who(self) -> str:
        """``backend/model``."""
        return f"{self.name}/{self.model}"

    def _env_base_url(self) -> str | None:
        return None

    # -- to implement -------------------------------------------------------------------------

    def _request(
        self, system: str, user: str, n_claims: int
    ) -> tuple[str, dict[str, str], dict[str, Any]]:
        """(url, headers, JSON body) of one call."""
        raise NotImplementedError

    def _parse_reply(self, data: Any) -> Reply:
        """The text and token usage of a decoded JSON reply (raise ValueError when malformed)."""
        raise NotImplementedError

    def _unsupported_option(self, status: int, body: str) -> bool:
        """True when a 400 says the structured-output option is not supported."""
        return False

    # -- the judge -----------------------------------------------------------------------------

    async def judge(
        self, *, claims: Sequence[Claim | str], evidence: Sequence[EvidenceItem] | str
    ) -> list[ClaimVerdict]:
        """One verdict per claim; failures are ``unverifiable``, never ``supported``."""
        import httpx

        items = evidence_items(evidence)
        ev_text, truncated = self._render_evidence(items)
        digest = evidence_digest(ev_text)
        claim_list = as_claims(claims)
        verdicts: list[ClaimVerdict | None] = [None] * len(claim_list)
        pending: list[int] = []
        keys: list[str] = []
        for i, claim in enumerate(claim_list):
            key = cache_key(self.name, self.model, self.prompt_version, claim.text, digest)
            keys.append(key)
            hit = self.cache.get(key) if self.cache is not None else None
            if hit is not None:
                verdicts[i] = _with_claim(hit, claim)
                self.usage.cache_hits += 1
            else:
                pending.append(i)
        if pending:
            batches = [
                pending[i : i + self.batch_size] for i in range(0, len(pending), self.batch_size)
            ]
            budget = _Budget(self.budget_usd)
            sem = asyncio.Semaphore(self.max_concurrency)
            timeout = httpx.Timeout(self.timeout)
            async with httpx.AsyncClient(timeout=timeout, transport=self.transport) as client:
                results = await asyncio.gather(
                    *(
                        self._batch(
                            client, sem, budget, [claim_list[i] for i in batch], items, ev_text
                        )
                        for batch in batches
                    )
                )
            for batch, batch_verdicts in zip(batches, results, strict=True):
                for i, v in zip(batch, batch_verdicts, strict=True):
                    if truncated and v.label is Label.UNSUPPORTED:
                        v = unverifiable(
                            claim_list[i],
                            "the evidence was too long for the judge and "
                            "was cut; not shown to be absent",
                            judge=self.who,
                        )
                    elif self.cache is not None and not truncated:
                        self.cache.put(keys[i], v)
                    verdicts[i] = v
        return [
            v if v is not None else unverifiable(c, "no verdict", judge=self.who)
            for v, c in zip(verdicts, claim_list, strict=True)
        ]

    def _render_evidence(self, items: list[tuple[str, str]]) -> tuple[str, bool]:
        parts = [f"[{source}]\n{text}" for source, text in items if text]
        text = "\n\n".join(parts) if parts else "(no evidence)"
        if len(text) > self.max_evidence_chars:
            return text[: self.max_evidence_chars], True
        return text, False

    def _user_message(self, claims: list[Claim], evidence: str) -> str:
        numbered = "\n".join(f"{i}. {' '.join(c.text.split())}" for i, c in enumerate(claims, 1))
        return (
            f"EVIDENCE:\n<<<\n{evidence}\n>>>\n\nCLAIMS:\n{numbered}\n\n"
            f"Return one verdict for each of the {len(claims)} claim ids, as JSON."
        )

    async def _batch(
        self,
        client: Any,
        sem: asyncio.Semaphore,
        budget: _Budget,
        claims: list[Claim],
        items: list[tuple[str, str]],
        evidence: str,
    ) -> list[ClaimVerdict]:
        user = self._user_message(claims, evidence)
        est_in = (len(SYSTEM_PROMPT) + len(user)) // 3 + 16
        est_out = min(self.max_tokens, 80 * len(claims) + 32)
        estimate = estimate_cost(self.model, est_in, est_out, self.prices) or 0.0
        async with sem:
            if not budget.reserve(estimate):
                self.usage.budget_exhausted += len(claims)
                return [
                    unverifiable(
                        c,
                        f"judge budget of ${budget.limit:g} per batch reached; not judged",
                        judge=self.who,
                        error="budget",
                    )
                    for c in claims
                ]
            try:
                reply = await self._call(client, SYSTEM_PROMPT, user, len(claims))
            except Exception as exc:  # every failure becomes unverifiable, never supported
                budget.settle(estimate, 0.0)
                self.usage.failures += 1
                message = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
                self.usage.note_error(message)
                logger.debug("judge %s failed", self.who, exc_info=True)
                return [
                    unverifiable(c, f"judge failed: {message}", judge=self.who, error=message)
                    for c in claims
                ]
        cost = (
            estimate_cost(self.model, reply.input_tokens, reply.output_tokens, self.prices) or 0.0
        )
        budget.settle(estimate, cost)
        self.usage.input_tokens += reply.input_tokens
        self.usage.output_tokens += reply.output_tokens
        self.usage.cost_usd += cost
        share_in = reply.input_tokens // len(claims)
        share_out = reply.output_tokens // len(claims)
        share_cost = cost / len(claims)
        try:
            parsed = parse_verdicts(reply.text, len(claims))
        except ValueError as exc:
            self.usage.failures += 1
            self.usage.note_error(f"malformed reply: {exc}")
            parsed = [None] * len(claims)
        out = []
        for claim, entry in zip(claims, parsed, strict=True):
            if entry is None:
                out.append(
                    ClaimVerdict(
                        Label.UNVERIFIABLE,
                        0.0,
                        "the judge's reply had no valid verdict for this claim",
                        None,
                        claim,
                        self.who,
                        False,
                        share_in,
                        share_out,
                        share_cost,
                        "malformed reply",
                    )
                )
                continue
            out.append(
                ClaimVerdict(
                    entry["label"],
                    entry["confidence"],
                    entry["reason"] or str(entry["label"]),
                    _locate(entry["evidence"], items),
                    claim,
                    self.who,
                    False,
                    share_in,
                    share_out,
                    share_cost,
                )
            )
        return out

    async def _call(self, client: Any, system: str, user: str, n_claims: int) -> Reply:
        """One logical call, with retries on 429/5xx/timeouts/connection errors."""
        import httpx

        attempt = 0
        while True:
            url, headers, body = self._request(system, user, n_claims)
            self.usage.calls += 1
            if attempt:
                self.usage.retries += 1
            started = time.perf_counter()
            try:
                try:
                    response = await client.post(url, headers=headers, json=body)
                finally:
                    self.usage.latency_s += time.perf_counter() - started
                if response.status_code in _RETRY_STATUS:
                    raise _Retryable(f"HTTP {response.status_code}", _retry_after(response.headers))
                if (
                    response.status_code == 400
                    and self.structured_output
                    and self._unsupported_option(response.status_code, response.text)
                ):
                    self.structured_output = False  # fall back to tolerant parsing; not a retry
                    attempt += 0
                    continue
                if response.status_code >= 400:
                    raise _Fatal(f"HTTP {response.status_code}: {_snippet(response.text)}")
                try:
                    data = response.json()
                except ValueError:
                    raise _Fatal(
                        f"the endpoint returned non-JSON: {_snippet(response.text)}"
                    ) from None
                return self._parse_reply(data)
            except (_Retryable, httpx.TimeoutException, httpx.TransportError) as exc:
                if attempt >= self.max_retries:
                    if isinstance(exc, httpx.TimeoutException):
                        raise TimeoutError(
                            f"no reply within {self.timeout:g}s ({attempt + 1} attempts)"
                        ) from None
                    raise
                retry_after = exc.retry_after if isinstance(exc, _Retryable) else None
                delay = min(self.max_backoff, self.backoff * (2**attempt)) * (0.5 + random.random())
                if retry_after is not None:
                    delay = min(self.max_backoff, max(delay, retry_after))
                attempt += 1
                await self._sleep(delay)


@dataclass
class _Budget:
    limit: float | None
    spent: float = 0.0
    reserved: float = 0.0

    def reserve(self, estimate: float) -> bool:
        if self.limit is None:
            return True
        if self.spent + self.reserved + estimate > self.limit:
            return False
        self.reserved += estimate
        return True

    def settle(self, estimate: float, actual: float) -> None:
        if self.limit is not None:
            self.reserved = max(0.0, self.reserved - estimate)
        self.spent += actual


def _make_cache(cache: VerdictCache | str | Path | None) -> VerdictCache | None:
    if cache is None or cache in ("off", "none", ""):
        return None
    if isinstance(cache, VerdictCache):
        return cache
    if cache == "memory":
        return VerdictCache()
    if cache == "default":
        return VerdictCache(default_cache_path())
    return VerdictCache(Path(cache).expanduser())


def _with_claim(verdict: ClaimVerdict, claim: Claim) -> ClaimVerdict:
    from dataclasses import replace

    return replace(verdict, claim=claim)


def _locate(quote: str, items: list[tuple[str, str]]) -> EvidenceSpan | None:
    """The span of the judge's quote in the evidence: exact, then case- and space-insensitive."""
    quote = quote.strip().strip('"').strip()
    if len(quote) < 3:
        return None
    for source, text in items:
        at = text.find(quote)
        if at >= 0:
            return EvidenceSpan(source, at, at + len(quote), quote[:240])
    pattern = re.compile(r"\s+".join(re.escape(w) for w in quote.split()), re.IGNORECASE)
    for source, text in items:
        m = pattern.search(text)
        if m:
            return EvidenceSpan(source, m.start(), m.end(), m.group(0)[:240])
    return None


def _snippet(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "…"
