"""The ``anthropic`` judge: the Anthropic Messages API over httpx.

The key comes from the argument, the variable named by ``api_key_env``,
``AGENTLENS_JUDGE_API_KEY`` or ``ANTHROPIC_API_KEY``; the base URL from the argument,
``[judge] base_url``, ``AGENTLENS_JUDGE_BASE_URL`` or ``ANTHROPIC_BASE_URL`` (default
``https://api.anthropic.com``). Replies are parsed tolerantly (JSON in code fences, trailing
prose); 429 and 529 (overloaded) are retried, honouring ``Retry-After``.
"""

from __future__ import annotations

import os
from typing import Any

from agentlens.eval.judges._llm import DEFAULT_BASE_URLS, LLMJudge, Reply

__all__ = ["ANTHROPIC_VERSION", "AnthropicJudge"]

ANTHROPIC_VERSION = "2023-06-01"


class AnthropicJudge(LLMJudge):
    """A judge over the Anthropic Messages API (see :class:`LLMJudge`)."""

    name = "anthropic"
    _key_env = ("ANTHROPIC_API_KEY",)
    _default_base_url = DEFAULT_BASE_URLS["anthropic"]

    def _env_base_url(self) -> str | None:
        return os.environ.get("AGENTLENS_JUDGE_BASE_URL") or os.environ.get("ANTHROPIC_BASE_URL")

    def _request(
        self, system: str, user: str, n_claims: int
    ) -> tuple[str, dict[str, str], dict[str, Any]]:
        headers = {"content-type": "application/json", "anthropic-version": ANTHROPIC_VERSION}
        if self.api_key:
            headers["x-api-key"] = self.api_key
        body = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "temperature": 0,
            "system": system,
            "messages": [{"role": "user", "content": user}],
        }
        base = self.base_url
        url = f"{base}/messages" if base.endswith("/v1") else f"{base}/v1/messages"
        return url, headers, body

    def _parse_reply(self, data: Any) -> Reply:
        if not isinstance(data, dict) or not isinstance(data.get("content"), list):
            raise ValueError("the reply has no content blocks")
        text = "".join(
            b.get("text", "")
            for b in data["content"]
            if isinstance(b, dict) and b.get("type") == "text"
        )
        usage = data.get("usage") or {}
        return Reply(
            text, int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0)
        )
