"""agentlens.analytics (see DESIGN.md)."""
