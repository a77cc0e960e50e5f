"""``agentlens.integrations.claude_agent_sdk``: see
:mod:`agentlens.capture.integrations.claude_agent_sdk`."""

from agentlens.capture.integrations.claude_agent_sdk import record

__all__ = ["record"]
