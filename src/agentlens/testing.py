"""pytest plugin for agentlens (fixtures land shortly)."""
