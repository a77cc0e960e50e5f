"""The Claude Agent SDK adapter, on the real SDK with its CLI transport faked."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKClient, Transport, query

import agentlens
from agentlens.integrations.claude_agent_sdk import record
from agentlens.model import StepKind

SESSION = "6a1f0c3e-0000-4000-8000-00000000abcd"


def _assistant(
    mid: str, content: list[dict[str, Any]], parent: str | None = None
) -> dict[str, Any]:
    return {
        "type": "assistant",
        "session_id": SESSION,
        "parent_tool_use_id": parent,
        "uuid": f"u-{mid}-{len(content)}",
        "message": {
            "id": mid,
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-6",
            "content": content,
            "stop_reason": "tool_use"
            if any(b["type"] == "tool_use" for b in content)
            else "end_turn",
            "usage": {"input_tokens": 12, "output_tokens": 7, "cache_read_input_tokens": 300},
        },
    }


def _result_of(
    tool_id: str, content: str, error: bool = False, parent: str | None = None
) -> dict[str, Any]:
    return {
        "type": "user",
        "session_id": SESSION,
        "parent_tool_use_id": parent,
        "uuid": f"r-{tool_id}",
        "message": {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": tool_id,
                    "content": content,
                    "is_error": error,
                }
            ],
        },
    }


SCRIPT = [
    {
        "type": "system",
        "subtype": "init",
        "session_id": SESSION,
        "model": "claude-sonnet-4-6",
        "cwd": "/srv/shop",
        "tools": ["Bash", "Task"],
        "permissionMode": "default",
        "apiKeySource": "none",
        "mcp_servers": [],
        "slash_commands": [],
        "output_style": "default",
    },
    _assistant(
        "msg_1",
        [
            {"type": "thinking", "thinking": "Check payments.", "signature": "s"},
            {
                "type": "tool_use",
                "id": "toolu_1",
                "name": "Bash",
                "input": {"command": "./payments ORD-7731"},
            },
        ],
    ),
    _result_of("toolu_1", "REF-1 49.90 EUR\nREF-2 49.90 EUR"),
    _assistant(
        "msg_2",
        [
            {
                "type": "tool_use",
                "id": "toolu_2",
                "name": "Task",
                "input": {"prompt": "Find retries", "subagent_type": "Explore"},
            }
        ],
    ),
    _assistant(
        "msg_3",
        [{"type": "tool_use", "id": "toolu_3", "name": "Grep", "input": {"pattern": "ORD-7731"}}],
        parent="toolu_2",
    ),
    _result_of("toolu_3", "Error: no such directory", error=True, parent="toolu_2"),
    _assistant("msg_4", [{"type": "text", "text": "No retries found."}], parent="toolu_2"),
    _result_of("toolu_2", "No retries found."),
    _assistant("msg_5", [{"type": "text", "text": "Refunded twice: REF-1 and REF-2."}]),
    {
        "type": "result",
        "subtype": "success",
        "duration_ms": 4200,
        "duration_api_ms": 3900,
        "is_error": False,
        "num_turns": 3,
        "session_id": SESSION,
        "total_cost_usd": 0.0123,
        "usage": {"input_tokens": 60, "output_tokens": 35},
        "result": "Refunded twice: REF-1 and REF-2.",
    },
]


class FakeCLI(Transport):
    """Stands in for the Claude Code CLI process: answers the SDK's control requests and
    replies to the prompt with a scripted stream of CLI messages."""

    def __init__(self, script: list[dict[str, Any]]) -> None:
        self.script = script
        self.out: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.prompts: list[Any] = []

    async def connect(self) -> None:
        return None

    async def write(self, data: str) -> None:
        for line in data.splitlines():
            if not line.strip():
                continue
            msg = json.loads(line)
            if msg.get("type") == "control_request":
                await self.out.put(
                    {
                        "type": "control_response",
                        "response": {
                            "subtype": "success",
                            "request_id": msg["request_id"],
                            "response": {},
                        },
                    }
                )
            elif msg.get("type") == "user":
                self.prompts.append(msg["message"]["content"])
                for item in self.script:
                    await self.out.put(item)

    async def read_messages(self) -> AsyncIterator[dict[str, Any]]:
        while True:
            item = await self.out.get()
            yield item
            if item.get("type") == "result":
                return

    async def close(self) -> None:
        return None

    def is_ready(self) -> bool:
        return True

    async def end_input(self) -> None:
        return None


def _session(prompt: str, script: list[dict[str, Any]]) -> list[Any]:
    async def main() -> list[Any]:
        stream = query(prompt=prompt, options=ClaudeAgentOptions(), transport=FakeCLI(script))
        return [m async for m in record(stream, prompt=prompt)]

    return asyncio.run(main())


def test_a_session_is_one_run_with_tools_sidechains_and_usage(captured_traces: Any) -> None:
    messages = _session("Why was ORD-7731 refunded twice?", SCRIPT)
    assert type(messages[-1]).__name__ == "ResultMessage"
    trace = captured_traces.one()
    assert trace.agent == "claude-agent-sdk"
    assert trace.input == "Why was ORD-7731 refunded twice?"
    assert trace.output == "Refunded twice: REF-1 and REF-2."
    assert trace.metadata["session_id"] == SESSION
    assert trace.metadata["total_cost_usd"] == 0.0123 and trace.metadata["num_turns"] == 3
    kinds = [(s.kind, s.name) for s in trace.steps]
    assert kinds[:3] == [
        (StepKind.THINKING, None),
        (StepKind.TOOL, "Bash"),
        (StepKind.TOOL, "Task"),
    ]
    bash = trace.steps[1]
    assert bash.output == "REF-1 49.90 EUR\nREF-2 49.90 EUR"
    assert bash.ended_at is not None and bash.ended_at >= bash.started_at
    thinking = trace.steps[0]
    assert thinking.attributes["model"] == "claude-sonnet-4-6"
    assert (
        thinking.attributes["input_tokens"] == 12
        and thinking.attributes["cache_read_tokens"] == 300
    )
    task = trace.steps[2]
    sub = next(s for s in trace.steps if s.kind is StepKind.AGENT)
    assert sub.parent_id == task.id and sub.name == "Explore" and sub.input == "Find retries"
    assert sub.output == "No retries found."
    grep = next(s for s in trace.steps if s.name == "Grep")
    assert grep.parent_id == sub.id
    assert grep.error == "Error: no such directory" and grep.output is None
    assert task.output == "No retries found."
    assert trace.steps[-1].kind is StepKind.TEXT and trace.steps[-1].parent_id is None


def test_inside_a_run_the_session_joins_it(captured_traces: Any) -> None:
    script = [SCRIPT[0], _assistant("msg_x", [{"type": "text", "text": "hi"}]), SCRIPT[-1]]

    async def main() -> None:
        async with agentlens.run(agent="outer") as run:
            stream = query(prompt="hello", options=ClaudeAgentOptions(), transport=FakeCLI(script))
            async for _ in record(stream, prompt="hello"):
                pass
            run.output = "done"

    asyncio.run(main())
    trace = captured_traces.one()
    assert trace.agent == "outer" and trace.output == "done"
    assert [s.kind for s in trace.steps] == [StepKind.USER, StepKind.TEXT]


def test_an_error_result_makes_an_error_run(captured_traces: Any) -> None:
    failed = {**SCRIPT[-1], "subtype": "error_max_turns", "is_error": True, "result": None}
    _session("loop forever", [SCRIPT[0], failed])
    trace = captured_traces.one()
    assert trace.status == "error" and trace.metadata["result_subtype"] == "error_max_turns"


def test_inside_a_run_the_prompt_is_a_user_step(captured_traces: Any) -> None:
    # Joined to a run opened without input, the prompt went nowhere: the user's words, which
    # count as evidence, were missing from the run.
    script = [SCRIPT[0], _assistant("msg_x", [{"type": "text", "text": "ORD-7731 is paid."}]),
              SCRIPT[-1]]  # fmt: skip

    async def main() -> None:
        async with agentlens.run(agent="outer"):
            for prompt in ("Is ORD-7731 paid?", "And ORD-7732?"):
                stream = query(
                    prompt=prompt, options=ClaudeAgentOptions(), transport=FakeCLI(script)
                )
                async for _ in record(stream, prompt=prompt):
                    pass

    asyncio.run(main())
    steps = captured_traces.one().steps
    assert [(s.kind, s.output) for s in steps] == [
        (StepKind.USER, "Is ORD-7731 paid?"),
        (StepKind.TEXT, "ORD-7731 is paid."),
        (StepKind.USER, "And ORD-7732?"),
        (StepKind.TEXT, "ORD-7731 is paid."),
    ]


def test_a_session_left_by_break_says_it_is_incomplete(captured_traces: Any) -> None:
    # The caller stopped reading before the ResultMessage: the run was stored as a plain `ok`,
    # as if the session had finished.
    async def main() -> None:
        stream = query(prompt="Why?", options=ClaudeAgentOptions(), transport=FakeCLI(SCRIPT))
        async for message in record(stream, prompt="Why?"):
            if type(message).__name__ == "AssistantMessage":
                break
        async with agentlens.run(agent="outer"):
            stream = query(prompt="Why?", options=ClaudeAgentOptions(), transport=FakeCLI(SCRIPT))
            async for message in record(stream, prompt="Why?"):
                if type(message).__name__ == "AssistantMessage":
                    break

    asyncio.run(main())
    own, joined = captured_traces.traces
    assert own.agent == "claude-agent-sdk" and own.status == "ok"
    assert own.metadata["incomplete"] is True and own.output is None
    bash = next(s for s in own.steps if s.name == "Bash")
    assert bash.attributes["incomplete"] is True  # its result never came
    assert joined.agent == "outer" and joined.metadata["incomplete"] is True


def test_a_finished_session_is_not_incomplete(captured_traces: Any) -> None:
    _session("Why was ORD-7731 refunded twice?", SCRIPT)
    assert "incomplete" not in captured_traces.one().metadata


def test_inside_a_run_the_result_message_is_kept(captured_traces: Any) -> None:
    # Joined to a run, the session's ResultMessage (its answer, cost, turns, whether it failed)
    # was dropped.
    failed = {**SCRIPT[-1], "subtype": "error_max_turns", "is_error": True, "result": None,
              "total_cost_usd": 0.5, "num_turns": 9}  # fmt: skip

    async def session(script: list[dict[str, Any]]) -> None:
        stream = query(prompt="Why?", options=ClaudeAgentOptions(), transport=FakeCLI(script))
        async for _ in record(stream, prompt="Why?"):
            pass

    async def main() -> None:
        async with agentlens.run(agent="outer"):  # no output of its own: the answer is it
            await session(SCRIPT)
        async with agentlens.run(agent="outer") as run:
            run.output = "set by the caller"  # kept
            run.metadata["total_cost_usd"] = "the caller's"  # kept
            await session(SCRIPT)
            await session([SCRIPT[0], failed])

    asyncio.run(main())
    answered, failing = captured_traces.traces
    assert answered.output == "Refunded twice: REF-1 and REF-2." and answered.status == "ok"
    assert answered.metadata["claude_agent_sdk"] == [
        {
            "session_id": SESSION,
            "subtype": "success",
            "is_error": False,
            "total_cost_usd": 0.0123,
            "num_turns": 3,
            "duration_ms": 4200,
            "usage": {"input_tokens": 60, "output_tokens": 35},
        }
    ]
    assert failing.output == "set by the caller" and failing.status == "error"
    assert failing.metadata["total_cost_usd"] == "the caller's"
    sessions = failing.metadata["claude_agent_sdk"]
    assert [(s["subtype"], s["is_error"], s["num_turns"]) for s in sessions] == [
        ("success", False, 3),
        ("error_max_turns", True, 9),
    ]


def test_inside_a_run_the_latest_answer_is_the_output(captured_traces: Any) -> None:
    second = {**SCRIPT[-1], "result": "Second answer."}

    async def main() -> None:
        async with agentlens.run(agent="outer"):
            for script in (SCRIPT, [SCRIPT[0], second]):
                stream = query(prompt="Q", options=ClaudeAgentOptions(), transport=FakeCLI(script))
                async for _ in record(stream, prompt="Q"):
                    pass

    asyncio.run(main())
    assert captured_traces.one().output == "Second answer."


POLICY = "You are the refunds desk. Refunds are allowed within 30 days."


def test_the_system_prompt_is_a_system_step(captured_traces: Any, tmp_path: Any) -> None:
    # ClaudeAgentOptions.system_prompt goes to the CLI, never into the message stream: the
    # instructions the model had, evidence, were not recorded.
    script = [SCRIPT[0], _assistant("msg_x", [{"type": "text", "text": "30 days."}]), SCRIPT[-1]]
    (tmp_path / "prompt.md").write_text("Answer in French.", encoding="utf-8")

    async def passed_on(stream: Any) -> AsyncIterator[Any]:  # a stream record() cannot see into
        async for message in stream:
            yield message

    async def main() -> None:
        options = ClaudeAgentOptions(system_prompt=POLICY)
        async for _ in record(query(prompt="How long?", options=options, transport=FakeCLI(script)),
                              prompt="How long?"):  # fmt: skip
            pass
        preset = ClaudeAgentOptions(
            system_prompt={"type": "preset", "preset": "claude_code", "append": POLICY}
        )
        async with agentlens.run(agent="outer"):
            for _ in range(2):  # the same options again: one system step
                stream = query(prompt="How long?", options=preset, transport=FakeCLI(script))
                async for _ in record(stream, prompt="How long?"):
                    pass
        custom = ClaudeAgentOptions(system_prompt={"type": "file", "path": "prompt.md"},
                                    cwd=tmp_path)  # fmt: skip
        stream = passed_on(query(prompt="How long?", options=custom, transport=FakeCLI(script)))
        async for _ in record(stream, prompt="How long?", options=custom):
            pass

    asyncio.run(main())
    own, joined, from_file = captured_traces.traces
    assert (own.steps[0].kind, own.steps[0].output) == (StepKind.SYSTEM, POLICY)
    assert [s.kind for s in joined.steps] == [StepKind.SYSTEM] + [StepKind.USER, StepKind.TEXT] * 2
    assert joined.steps[0].output == POLICY
    assert joined.steps[0].attributes["preset"] == "claude_code"
    assert (from_file.steps[0].kind, from_file.steps[0].output) == (
        StepKind.SYSTEM,
        "Answer in French.",
    )
    assert from_file.steps[0].attributes["path"] == "prompt.md"


def test_the_system_prompt_of_a_client_session_is_a_system_step(captured_traces: Any) -> None:
    script = [SCRIPT[0], _assistant("msg_x", [{"type": "text", "text": "30 days."}]), SCRIPT[-1]]

    async def main() -> None:
        options = ClaudeAgentOptions(system_prompt={"type": "custom", "prompt": POLICY})
        async with ClaudeSDKClient(options=options, transport=FakeCLI(script)) as client:
            await client.query("How long?")
            async for _ in record(client.receive_response(), prompt="How long?"):
                pass

    asyncio.run(main())
    steps = captured_traces.one().steps
    assert [(s.kind, s.output) for s in steps] == [
        (StepKind.SYSTEM, POLICY),
        (StepKind.TEXT, "30 days."),
    ]


def test_no_system_prompt_no_system_step(captured_traces: Any) -> None:
    _session("Why was ORD-7731 refunded twice?", SCRIPT)
    assert all(s.kind is not StepKind.SYSTEM for s in captured_traces.one().steps)
