"""agentlens.ingest (see DESIGN.md)."""
