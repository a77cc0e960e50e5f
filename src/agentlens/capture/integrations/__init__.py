"""Integrations with model clients and agent frameworks, each an optional extra.

Each module imports its library only when it is used, and raises
:class:`~agentlens.errors.MissingExtraError` naming the extra when the library is missing:

- :mod:`.openai`: ``wrap(openai.OpenAI())`` (extra ``openai``)
- :mod:`.anthropic`: ``wrap(anthropic.Anthropic())`` (extra ``anthropic``)
- :mod:`.langchain`: ``AgentlensCallbackHandler()`` (extra ``langchain``)
- :mod:`.openai_agents`: ``add_trace_processor(AgentlensProcessor())`` (extra ``openai-agents``)
- :mod:`.claude_agent_sdk`: ``record(query(...))`` (extra ``claude-agent-sdk``)

They are also importable as ``agentlens.integrations.openai`` and so on.
"""

from agentlens.capture.integrations._common import (
    CACHE_RATES,
    PRICES,
    end_conversations,
    estimate_cost,
)

__all__ = ["CACHE_RATES", "PRICES", "end_conversations", "estimate_cost"]
