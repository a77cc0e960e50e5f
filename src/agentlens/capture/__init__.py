"""agentlens.capture (see DESIGN.md)."""
