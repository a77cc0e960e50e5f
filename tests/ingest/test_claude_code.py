"""The Claude Code session importer (``--format claude-code``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from agentlens.errors import FormatError
from agentlens.ingest import detect, get_reader
from agentlens.ingest.claude_code import (
    BOOKKEEPING_RECORDS,
    CONTENT_BLOCKS,
    CONVERSATION_RECORDS,
    read,
)
from agentlens.model import StepKind, Trace

GOLDEN = Path(__file__).resolve().parent.parent / "golden" / "claude_code"
SESSION = GOLDEN / "refund_session.jsonl"


def one(path: Path) -> Trace:
    runs = list(read(path))
    assert len(runs) == 1
    return runs[0]


def test_registered_and_detected() -> None:
    assert get_reader("claude-code") is read
    assert detect(SESSION) == "claude-code"


@pytest.mark.parametrize(
    ("per_prompt", "expected"),
    [(False, "refund_session.expected.jsonl"), (True, "refund_session.per_prompt.expected.jsonl")],
)
def test_golden_session_converts_to_the_expected_runs(per_prompt: bool, expected: str) -> None:
    got = "".join(t.to_json() + "\n" for t in read(SESSION, per_prompt=per_prompt))
    assert got == (GOLDEN / expected).read_text(encoding="utf-8")


def test_prompts_text_thinking_tools_and_results() -> None:
    trace = one(SESSION)
    assert trace.input == "Why was order ORD-7731 refunded twice?"
    assert trace.output == "The log is long; the part shown has one retry of the refund job."
    assert trace.name == "Double refund ORD-7731"  # custom-title wins over the summary
    assert trace.metadata["summary"] == "Refund order ORD-7731"
    kinds = [s.kind for s in trace.steps if s.parent_id is None]
    assert kinds[:3] == [StepKind.USER, StepKind.THINKING, StepKind.TOOL]
    bash = trace.steps[2]
    assert bash.name == "Bash" and bash.input["command"].startswith("cd /srv/shop")
    assert bash.output.startswith("REF-1 2026-11-20 49.90 EUR")
    assert bash.started_at is not None and bash.ended_at is not None
    assert bash.ended_at > bash.started_at
    assert bash.attributes["tool_use_result"]["stdout"].startswith("REF-1")
    meta = [s for s in trace.steps if s.attributes.get("meta")]
    assert len(meta) == 1 and meta[0].output.startswith("Caveat")


def test_errors_and_truncated_results_are_marked() -> None:
    trace = one(SESSION)
    grep = next(s for s in trace.steps if s.name == "Grep")
    assert grep.output is None
    assert grep.error == "Error: path /srv/shop/jobs does not exist"
    truncated = {
        s.name: s.attributes.get("truncated", False) for s in trace.steps if s.kind is StepKind.TOOL
    }
    # a Read of 1 of 2000 lines and a Bash output with "[1990 lines truncated]"
    assert truncated == {"Bash": True, "Read": True, "Task": False, "Grep": False}
    first_bash = next(s for s in trace.steps if s.name == "Bash")
    assert "truncated" not in first_bash.attributes


def test_sidechain_is_an_agent_step_under_its_task_call() -> None:
    trace = one(SESSION)
    task = next(s for s in trace.steps if s.name == "Task")
    agent = next(s for s in trace.steps if s.kind is StepKind.AGENT)
    assert agent.parent_id == task.id
    assert agent.name == "Explore"
    assert agent.input == "Find refund jobs for ORD-7731"
    assert agent.output == "No job history found for ORD-7731."
    children = [s for s in trace.steps if s.parent_id == agent.id]
    assert [s.kind for s in children] == [StepKind.USER, StepKind.TOOL, StepKind.TEXT]
    # the sub-agent's prompt is not a prompt of the session, nor its text the answer
    assert trace.input != agent.input


def test_token_usage_is_counted_once_per_response() -> None:
    trace = one(SESSION)
    thinking = trace.steps[1]
    # msg_1 is written as two records (thinking, then tool_use), each with its usage
    assert thinking.attributes["message_id"] == "msg_1"
    assert thinking.attributes["output_tokens"] == 61
    assert "output_tokens" not in trace.steps[2].attributes
    assert trace.metadata["usage"] == {
        "input_tokens": 330,
        "output_tokens": 206,
        "cache_read_tokens": 1060,
        "cache_write_tokens": 40,
    }
    assert trace.metadata["models"] == ["claude-sonnet-4-5", "claude-haiku-4-5"]


def test_bookkeeping_and_unknown_records_are_counted_not_steps() -> None:
    trace = one(SESSION)
    assert trace.metadata["records"] == {
        "custom-title": 1,
        "file-history-snapshot": 1,
        "queue-operation": 1,
    }
    assert trace.metadata["unknown_records"] == {"some-future-record": 1}


def test_one_run_per_prompt_splits_at_user_prompts() -> None:
    runs = list(read(SESSION, per_prompt=True))
    assert [r.input for r in runs] == [
        "Why was order ORD-7731 refunded twice?",
        "Show me the full refund log.",
    ]
    assert runs[0].output.startswith("ORD-7731 was refunded twice")
    assert len({r.id for r in runs}) == 2
    whole = one(SESSION)
    assert sum(len(r.steps) for r in runs) == len(whole.steps)
    agent = next(s for s in runs[0].steps if s.kind is StepKind.AGENT)
    assert all(s.parent_id in {None, *(x.id for x in runs[0].steps)} for s in runs[0].steps)
    assert agent.parent_id in {s.id for s in runs[0].steps}


def test_importing_twice_gives_the_same_ids(tmp_path: Path) -> None:
    grown = tmp_path / "grown.jsonl"
    lines = SESSION.read_text(encoding="utf-8").splitlines()
    grown.write_text("\n".join(lines[:10]) + "\n", encoding="utf-8")
    # a session that grew keeps its run id (derived from the session id and its start)
    assert one(grown).id == one(SESSION).id


# -- every record and block type of every CLI version's schema is known -------------------------


def _schema_types(data_dir: Callable[[str], Path]) -> list[tuple[str, set[str], set[str]]]:
    root = data_dir("claude_code") / "agent-schemas" / "claude-code"
    found = []
    for schema in sorted(root.glob("v*/session.schema.json")):
        doc = json.loads(schema.read_text(encoding="utf-8"))
        defs = doc["$defs"]

        def const(ref: str, defs: dict[str, object] = defs) -> str:
            node = defs[ref.rsplit("/", 1)[-1]]
            assert isinstance(node, dict)
            return str(node["properties"]["type"]["const"])

        records = {const(x["$ref"]) for x in doc["oneOf"]}
        blocks_node = defs["ContentBlock"]
        blocks = {const(x["$ref"]) for x in blocks_node.get("oneOf", blocks_node.get("anyOf"))}
        found.append((schema.parent.name, records, blocks))
    return found


@pytest.mark.data
def test_every_schema_version_record_and_block_type_is_known(
    data_dir: Callable[[str], Path],
) -> None:
    versions = _schema_types(data_dir)
    assert [v for v, _, _ in versions] == [
        "v2.0.76",
        "v2.1.1",
        "v2.1.144",
        "v2.1.59",
        "v2.1.63",
        "v2.1.72",
    ]
    for version, records, blocks in versions:
        assert records - CONVERSATION_RECORDS - BOOKKEEPING_RECORDS == set(), version
        assert blocks - CONTENT_BLOCKS == set(), version


# -- the real sessions ----------------------------------------------------------------------------


def _real_sessions(root: Path) -> list[Path]:
    return [
        *sorted(p for p in root.rglob("*.jsonl") if p.name != "edge_cases.jsonl"),
        root / "simonw_claude-code-transcripts" / "sample_session.json",
    ]


@pytest.mark.data
def test_real_sessions_import_with_every_tool_call_answered(
    data_dir: Callable[[str], Path],
) -> None:
    sessions = _real_sessions(data_dir("claude_code"))
    assert len(sessions) == 12
    for path in sessions:
        trace = one(path)
        tools = [s for s in trace.steps if s.kind is StepKind.TOOL]
        assert trace.input and trace.output, path
        chat_only = path.name == "session_b.jsonl" or "second-stop" in path.parent.name
        assert tools or chat_only, path
        assert not [s.id for s in tools if s.attributes.get("unpaired")], path
        answered = [s for s in tools if s.output is not None or s.error is not None]
        assert len(answered) >= len(tools) - 1, path  # a session may end mid-call


@pytest.mark.data
def test_a_failed_tool_call_in_a_real_session_is_its_error(
    data_dir: Callable[[str], Path],
) -> None:
    path = data_dir("claude_code") / "drmaciver_claude-reliability" / "coverage-test-fix"
    trace = one(path / "transcript.jsonl")
    failed = [s for s in trace.steps if s.error is not None]
    assert len(failed) == 1 and failed[0].kind is StepKind.TOOL and failed[0].output is None


@pytest.mark.data
def test_the_json_form_and_the_jsonl_form_read_alike(data_dir: Callable[[str], Path]) -> None:
    folder = data_dir("claude_code") / "simonw_claude-code-transcripts"
    trace = one(folder / "sample_session.json")
    assert trace.input == "Create a simple Python function to add two numbers"
    assert any(s.kind is StepKind.THINKING for s in trace.steps)


@pytest.mark.data
def test_the_malformed_edge_cases_file_is_a_clear_error(data_dir: Callable[[str], Path]) -> None:
    path = data_dir("claude_code") / "daaain_claude-code-log" / "edge_cases.jsonl"
    with pytest.raises(FormatError) as info:
        list(read(path))
    # line 10 misspells "content" ("contenst")
    assert str(info.value) == (
        "edge_cases.jsonl:10, field 'message.content': required field is missing"
    )


# -- malformed variants ---------------------------------------------------------------------------


def _variant(tmp_path: Path, line: int, replace: str | None) -> Path:
    lines = SESSION.read_text(encoding="utf-8").splitlines()
    if replace is None:
        lines[line - 1] = lines[line - 1][: len(lines[line - 1]) // 2]
    else:
        lines[line - 1] = replace
    path = tmp_path / "variant.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("line", "replace", "message"),
    [
        (5, None, "variant.jsonl:5: invalid JSON: "),
        (
            5,
            '"just a string"',
            "variant.jsonl:5: a session record must be a JSON object, not a string",
        ),
        (
            5,
            '{"type": "assistant", "message": "hi"}',
            "variant.jsonl:5, field 'message': must be an object",
        ),
        (5, '{"message": {}}', "variant.jsonl:5, field 'type': missing or non-string record type"),
        (
            5,
            '{"type": "user", "message": {"role": "user", "content": 3}}',
            "variant.jsonl:5, field 'message.content': must be a string or a list",
        ),
        (
            5,
            '{"type": "user", "timestamp": "yesterday", "message": {"content": "x"}}',
            "variant.jsonl:5, field 'timestamp': not an ISO 8601 time",
        ),
        (
            5,
            '{"type": "assistant", "message": {"content": [{"type": "tool_use", "id": "t"}]}}',
            "variant.jsonl:5, field 'message.content[0].name': a tool call needs a name",
        ),
    ],
)
def test_malformed_variants_are_clear_errors(
    tmp_path: Path, line: int, replace: str | None, message: str
) -> None:
    path = _variant(tmp_path, line, replace)
    with pytest.raises(FormatError) as info:
        list(read(path))
    assert str(info.value).startswith(message)


def test_a_file_without_conversation_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "bookkeeping.jsonl"
    path.write_text(
        json.dumps({"type": "queue-operation", "operation": "dequeue", "sessionId": "x"}) + "\n",
        encoding="utf-8",
    )
    with pytest.raises(FormatError, match="no conversation"):
        list(read(path))
