"""``agentlens.integrations``: the client and framework integrations of
:mod:`agentlens.capture.integrations`, under a shorter name. Nothing is imported until a
submodule (``agentlens.integrations.openai``...) is."""
