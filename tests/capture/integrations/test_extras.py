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


def test_a_smaller_model_is_not_priced_as_its_family() -> None:
    # The longest prefix wins: gpt-5-nano (0.05 / 0.40 USD per million) fell to gpt-5's
    # 1.25 / 10, 25 times its price; Claude Opus 4.5 (5 / 25) to Opus 4's 15 / 75.
    from agentlens.capture.integrations import estimate_cost

    assert estimate_cost("gpt-5-nano-2025-08-07", 1_000_000, 1_000_000) == 0.45
    assert estimate_cost("gpt-5-2025-08-07", 1_000_000, 1_000_000) == 11.25
    assert estimate_cost("claude-opus-4-5-20251101", 1_000_000, 1_000_000) == 30.0
    assert estimate_cost("claude-opus-4-1-20250805", 1_000_000, 1_000_000) == 90.0
