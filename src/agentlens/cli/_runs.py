"""CLI commands (in progress)."""

from agentlens.cli._app import app  # noqa: F401
