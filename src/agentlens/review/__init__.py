"""agentlens.review (see DESIGN.md)."""
