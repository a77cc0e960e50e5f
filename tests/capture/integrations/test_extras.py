"""Each integration needs its library; without it, the error names the extra to install."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize(
    ("module", "library", "extra"),
    [
        ("agentlens.integrations.langchain", "langchain_core", "langchain"),
        ("agentlens.integrations.openai_agents", "agents", "openai-agents"),
        ("agentlens.integrations.claude_agent_sdk", "claude_agent_sdk", "claude-agent-sdk"),
        ("agentlens.integrations.openai", "openai", "openai"),
        ("agentlens.integrations.anthropic", "anthropic", "anthropic"),
    ],
)
def test_a_missing_library_names_its_extra(module: str, library: str, extra: str) -> None:
    code = (
        f"import sys; sys.modules[{library!r}] = None\n"
        "from agentlens.errors import MissingExtraError\n"
        "try:\n"
        f"    import {module} as m\n"
        "    m.wrap(object()) if hasattr(m, 'wrap') else None\n"
        "except MissingExtraError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert f"pip install 'agentlens[{extra}]'" in out.stdout, out.stderr


def test_importing_agentlens_imports_no_integration_library() -> None:
    code = (
        "import sys, agentlens, agentlens.integrations, agentlens.capture.integrations; "
        "print([m for m in ('openai', 'anthropic', 'langchain_core', 'agents', "
        "'claude_agent_sdk') if m in sys.modules])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"


def test_the_names_the_docs_give_under_agentlens_integrations_exist() -> None:
    # docs/integrations/openai.md says agentlens.integrations.end_conversations() ends the open
    # conversations: it raised AttributeError (only agentlens.capture.integrations had it).
    import agentlens.integrations as short
    from agentlens.capture import integrations

    assert short.end_conversations is integrations.end_conversations
    assert short.PRICES is integrations.PRICES
    assert short.estimate_cost("gpt-4o", 1_000_000, 0) == 2.5
    with pytest.raises(AttributeError):
        short.no_such_name  # noqa: B018
