"""``agentlens.integrations.anthropic``: see :mod:`agentlens.capture.integrations.anthropic`."""

from agentlens.capture.integrations.anthropic import wrap

__all__ = ["wrap"]
