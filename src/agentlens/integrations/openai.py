"""``agentlens.integrations.openai``: see :mod:`agentlens.capture.integrations.openai`."""

from agentlens.capture.integrations.openai import wrap

__all__ = ["wrap"]
