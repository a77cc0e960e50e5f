"""``agentlens.integrations``: the client and framework integrations of
:mod:`agentlens.capture.integrations`, under a shorter name. Nothing is imported until a
submodule (``agentlens.integrations.openai``...) or a name below is used:
``end_conversations()`` (end the open conversations of wrapped clients now), ``PRICES``,
``CACHE_RATES`` and ``estimate_cost`` (the list-price table of ``cost_usd`` and how prompt-cache
tokens are priced)."""

from __future__ import annotations

from typing import Any

__all__ = ["CACHE_RATES", "PRICES", "end_conversations", "estimate_cost"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from agentlens.capture import integrations

        return getattr(integrations, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
