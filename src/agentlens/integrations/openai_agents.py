"""``agentlens.integrations.openai_agents``: see
:mod:`agentlens.capture.integrations.openai_agents`."""

from agentlens.capture.integrations.openai_agents import AgentlensProcessor

__all__ = ["AgentlensProcessor"]
