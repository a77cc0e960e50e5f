"""The ``openai`` judge: any OpenAI-compatible chat-completions endpoint.

OpenAI itself, vLLM, Ollama (``http://localhost:11434/v1``), llama.cpp server, LM Studio...
The base URL comes from the argument, ``[judge] base_url``, ``AGENTLENS_JUDGE_BASE_URL`` or
``OPENAI_BASE_URL`` (default ``https://api.openai.com/v1``); the key from the argument, the
variable named by ``api_key_env``, ``AGENTLENS_JUDGE_API_KEY`` or ``OPENAI_API_KEY`` (local
servers need none). Structured output (``response_format`` with a JSON schema) is asked for, and
dropped for the rest of the judge's life when the endpoint rejects it; replies are parsed
tolerantly either way (JSON in code fences, trailing prose).
"""

from __future__ import annotations

import os
from typing import Any

from agentlens.eval.judges._llm import DEFAULT_BASE_URLS, VERDICT_SCHEMA, LLMJudge, Reply

__all__ = ["OpenAIJudge"]


class OpenAIJudge(LLMJudge):
    """A judge over an OpenAI-compatible ``/chat/completions`` endpoint (see :class:`LLMJudge`)."""

    name = "openai"
    _key_env = ("OPENAI_API_KEY",)
    _default_base_url = DEFAULT_BASE_URLS["openai"]

    def _env_base_url(self) -> str | None:
        return os.environ.get("AGENTLENS_JUDGE_BASE_URL") or os.environ.get("OPENAI_BASE_URL")

    def _request(
        self, system: str, user: str, n_claims: int
    ) -> tuple[str, dict[str, str], dict[str, Any]]:
        headers = {"content-type": "application/json"}
        if self.api_key:
            headers["authorization"] = f"Bearer {self.api_key}"
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
            "temperature": 0,
            "max_tokens": self.max_tokens,
        }
        if self.structured_output:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "claim_verdicts", "strict": True, "schema": VERDICT_SCHEMA},
            }
        return f"{self.base_url}/chat/completions", headers, body

    def _parse_reply(self, data: Any) -> Reply:
        try:
            message = data["choices"][0]["message"]
        except (KeyError, IndexError, TypeError):
            raise ValueError("the reply has no choices[0].message") from None
        text = message.get("content") or ""
        if not isinstance(text, str):
            text = str(text)
        usage = data.get("usage") or {}
        return Reply(
            text, int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
        )

    def _unsupported_option(self, status: int, body: str) -> bool:
        low = body.lower()
        return "response_format" in low or "json_schema" in low
