"""``agentlens.integrations.langchain``: see :mod:`agentlens.capture.integrations.langchain`."""

from agentlens.capture.integrations.langchain import AgentlensCallbackHandler

__all__ = ["AgentlensCallbackHandler"]
