"""``@tool``, ``@retrieval``, ``@llm``: arguments, results, exceptions, generators, nesting."""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import threading
from collections.abc import AsyncGenerator, AsyncIterator, Generator, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

import agentlens
from agentlens.model import StepKind, Trace
from agentlens.testing import CapturedTraces


def _steps(trace: Trace) -> list[tuple[str, str | None, str | None]]:
    """(id, name, parent_id) of each step."""
    return [(s.id, s.name, s.parent_id) for s in trace.steps]


# -- arguments and results -----------------------------------------------------------------------


def test_bare_and_named_decorators_record_kind_and_name(captured_traces: CapturedTraces) -> None:
    @agentlens.tool
    def a() -> int:
        return 1

    @agentlens.tool(name="lookup")
    def b() -> int:
        return 2

    @agentlens.retrieval
    def c() -> int:
        return 3

    @agentlens.llm(name="gpt-4o")
    def d() -> int:
        return 4

    with agentlens.run():
        assert (a(), b(), c(), d()) == (1, 2, 3, 4)
    steps = captured_traces.one().steps
    assert [(s.kind, s.name, s.output) for s in steps] == [
        (StepKind.TOOL, "a", 1),
        (StepKind.TOOL, "lookup", 2),
        (StepKind.RETRIEVAL, "c", 3),
        (StepKind.LLM, "gpt-4o", 4),
    ]


def test_arguments_are_bound_by_name_with_defaults_varargs_and_kwargs(
    captured_traces: CapturedTraces,
) -> None:
    @agentlens.tool
    def search(query: str, /, k: int = 5, *extra: str, exact: bool = False, **opts: Any) -> None:
        return None

    with agentlens.run():
        search("refunds")
        search("refunds", 3, "x", "y", exact=True, lang="en")
        search("kw", k=1)
    first, second, third = captured_traces.one().steps
    assert first.input == {"query": "refunds", "k": 5, "exact": False}
    assert second.input == {
        "query": "refunds",
        "k": 3,
        "extra": ["x", "y"],
        "exact": True,
        "lang": "en",
    }
    assert third.input == {"query": "kw", "k": 1, "exact": False}


def test_self_and_cls_are_not_recorded(captured_traces: CapturedTraces) -> None:
    class Crm:
        @agentlens.tool
        def customer(self, customer_id: str) -> str:
            return customer_id

        @classmethod
        @agentlens.tool
        def default(cls, region: str = "eu") -> str:
            return region

        @staticmethod
        @agentlens.tool
        def ping(host: str) -> str:
            return host

    with agentlens.run():
        Crm().customer("CUST-1")
        Crm.default()
        Crm.ping("db")
    assert [s.input for s in captured_traces.one().steps] == [
        {"customer_id": "CUST-1"},
        {"region": "eu"},
        {"host": "db"},
    ]


def test_return_value_is_passed_through_unchanged(captured_traces: CapturedTraces) -> None:
    sentinel = object()

    @agentlens.tool
    def make() -> object:
        return sentinel

    with agentlens.run():
        assert make() is sentinel
    output = captured_traces.one().steps[0].output
    assert output["type"] == "object"
    assert output["repr"].startswith("<object object at")


def test_exception_is_recorded_and_reraised_unchanged(captured_traces: CapturedTraces) -> None:
    error = LookupError("no customer CUST-9")

    @agentlens.tool
    def get_customer(customer_id: str) -> None:
        raise error

    with agentlens.run():
        with pytest.raises(LookupError) as raised:
            get_customer("CUST-9")
        assert raised.value is error
    trace = captured_traces.one()
    assert trace.status == "ok"  # the agent handled it
    [step] = trace.steps
    assert step.error == {"type": "LookupError", "message": "no customer CUST-9"}
    assert step.output is None
    assert step.ended_at is not None


def test_wrappers_keep_the_function_identity() -> None:
    async def coro(x: int) -> int:
        """Doc."""
        return x

    def gen() -> Iterator[int]:
        yield 1

    async def agen() -> AsyncIterator[int]:
        yield 1

    wrapped = agentlens.tool(coro)
    assert wrapped.__name__ == "coro" and wrapped.__doc__ == "Doc."
    assert inspect.iscoroutinefunction(wrapped)
    assert inspect.isgeneratorfunction(agentlens.tool(gen))
    assert inspect.isasyncgenfunction(agentlens.retrieval(agen))
    assert inspect.signature(wrapped) == inspect.signature(coro)


def test_outside_a_run_a_decorated_function_is_transparent(
    captured_traces: CapturedTraces,
) -> None:
    calls: list[int] = []

    @agentlens.tool
    def f(x: int) -> int:
        calls.append(x)
        return x * 2

    @agentlens.tool
    def g() -> Iterator[int]:
        yield from (1, 2)

    @agentlens.tool
    async def h() -> int:
        return 3

    @agentlens.tool
    async def ag() -> AsyncIterator[int]:
        yield 4

    async def consume() -> list[int]:
        return [x async for x in ag()]

    assert f(2) == 4
    assert list(g()) == [1, 2]
    assert asyncio.run(h()) == 3
    assert asyncio.run(consume()) == [4]
    assert calls == [2]
    assert len(captured_traces) == 0


# -- nesting --------------------------------------------------------------------------------------


@agentlens.tool
def leaf(x: int) -> int:
    return x


@agentlens.tool
def middle(x: int) -> int:
    return leaf(x) + leaf(x + 1)


def test_nested_calls_get_their_parent(captured_traces: CapturedTraces) -> None:
    with agentlens.run():
        middle(1)
        leaf(9)
    assert _steps(captured_traces.one()) == [
        ("s1", "middle", None),
        ("s2", "leaf", "s1"),
        ("s3", "leaf", "s1"),
        ("s4", "leaf", None),
    ]


def test_threads_started_with_a_copied_context_keep_the_parent(
    captured_traces: CapturedTraces,
) -> None:
    @agentlens.tool
    def fan_out() -> list[int]:
        with ThreadPoolExecutor(max_workers=2) as pool:
            futures = [pool.submit(contextvars.copy_context().run, leaf, i) for i in range(4)]
            return [f.result() for f in futures]

    with agentlens.run():
        assert fan_out() == [0, 1, 2, 3]
    steps = captured_traces.one().steps
    assert steps[0].name == "fan_out"
    assert sorted(s.input["x"] for s in steps[1:]) == [0, 1, 2, 3]
    assert {s.parent_id for s in steps[1:]} == {"s1"}
    assert len({s.id for s in steps}) == 5


def test_a_plain_thread_without_the_context_records_nothing(
    captured_traces: CapturedTraces,
) -> None:
    results: list[int] = []
    with agentlens.run():
        thread = threading.Thread(target=lambda: results.append(leaf(7)))
        thread.start()
        thread.join()
    assert results == [7]
    assert captured_traces.one().steps == []


def test_concurrent_asyncio_tasks_each_get_their_own_parent(
    captured_traces: CapturedTraces,
) -> None:
    @agentlens.tool
    async def fetch(source: str) -> str:
        await asyncio.sleep(0)
        return await inner(source)

    @agentlens.tool
    async def inner(source: str) -> str:
        await asyncio.sleep(0)
        return source.upper()

    @agentlens.tool
    async def gather_all() -> list[str]:
        return list(await asyncio.gather(*(fetch(s) for s in ("a", "b", "c"))))

    async def agent() -> None:
        async with agentlens.run():
            assert await gather_all() == ["A", "B", "C"]
            assert await asyncio.to_thread(leaf, 5) == 5

    asyncio.run(agent())
    steps = captured_traces.one().steps
    by_id = {s.id: s for s in steps}
    fetches = [s for s in steps if s.name == "fetch"]
    inners = [s for s in steps if s.name == "inner"]
    assert {s.parent_id for s in fetches} == {"s1"}
    # Each inner call is the child of the fetch of the same source.
    assert sorted((by_id[s.parent_id].input["source"], s.input["source"]) for s in inners) == [  # type: ignore[index]
        ("a", "a"),
        ("b", "b"),
        ("c", "c"),
    ]
    [to_thread] = [s for s in steps if s.name == "leaf"]
    assert to_thread.parent_id is None


# -- generators -----------------------------------------------------------------------------------


def test_generator_items_become_the_output(captured_traces: CapturedTraces) -> None:
    @agentlens.retrieval
    def search(query: str) -> Iterator[dict[str, str]]:
        for i in range(3):
            leaf(i)
            yield {"id": f"DOC-{i}", "text": query}

    with agentlens.run():
        docs = list(search("refund"))
    assert [d["id"] for d in docs] == ["DOC-0", "DOC-1", "DOC-2"]
    steps = captured_traces.one().steps
    assert steps[0].output == docs
    # Calls made inside the generator body have the generator's step as parent.
    assert [(s.name, s.parent_id) for s in steps[1:]] == [("leaf", "s1")] * 3


def test_generator_return_value_send_and_throw(captured_traces: CapturedTraces) -> None:
    @agentlens.tool
    def echo() -> Generator[int, int, int]:
        received = 0
        while received < 3:
            try:
                received = yield received
            except ValueError:
                received = yield -1
        return received

    def drive() -> int:
        gen = echo()
        assert next(gen) == 0
        assert gen.send(1) == 1
        assert gen.throw(ValueError("x")) == -1
        try:
            gen.send(3)
        except StopIteration as stop:
            return int(stop.value)
        raise AssertionError("not finished")

    with agentlens.run():
        assert drive() == 3
    [step] = captured_traces.one().steps
    assert step.output == [0, 1, -1]
    assert step.error is None


def test_generator_closed_early_records_what_it_yielded(captured_traces: CapturedTraces) -> None:
    closed: list[bool] = []

    @agentlens.retrieval
    def pages() -> Iterator[int]:
        try:
            yield from range(100)
        finally:
            closed.append(True)

    with agentlens.run():
        for page in pages():
            if page == 2:
                break
    assert closed == [True]
    [step] = captured_traces.one().steps
    assert step.output == [0, 1, 2]
    assert step.attributes == {"closed_early": True}
    assert step.ended_at is not None


def test_generator_exception_is_recorded_and_reraised(captured_traces: CapturedTraces) -> None:
    @agentlens.tool
    def flaky() -> Iterator[int]:
        yield 1
        raise ConnectionError("reset")

    with agentlens.run(), pytest.raises(ConnectionError):
        list(flaky())
    [step] = captured_traces.one().steps
    assert step.output == [1]
    assert step.error == {"type": "ConnectionError", "message": "reset"}


def test_async_generator(captured_traces: CapturedTraces) -> None:
    @agentlens.retrieval
    async def stream(n: int) -> AsyncGenerator[str, None]:
        for i in range(n):
            await asyncio.sleep(0)
            leaf(i)
            yield f"chunk{i}"

    @agentlens.tool
    async def broken() -> AsyncIterator[int]:
        yield 1
        raise TimeoutError("slow")

    async def agent() -> None:
        async with agentlens.run():
            assert [c async for c in stream(2)] == ["chunk0", "chunk1"]
            early = stream(10)
            assert await early.__anext__() == "chunk0"
            await early.aclose()
            with pytest.raises(TimeoutError):
                async for _ in broken():
                    pass

    asyncio.run(agent())
    steps = captured_traces.one().steps
    full, leaf0, leaf1, early, leaf_early, failed = steps
    assert (full.name, full.output, full.input) == ("stream", ["chunk0", "chunk1"], {"n": 2})
    assert leaf0.parent_id == leaf1.parent_id == full.id
    assert early.output == ["chunk0"] and early.attributes == {"closed_early": True}
    assert leaf_early.parent_id == early.id
    assert failed.output == [1] and failed.error == {"type": "TimeoutError", "message": "slow"}


# -- llm ----------------------------------------------------------------------------------------


class _Usage:
    def __init__(self, prompt: int, completion: int) -> None:
        self.prompt_tokens = prompt
        self.completion_tokens = completion
        self.total_tokens = prompt + completion


class _ChatCompletion:
    """Shaped like an OpenAI ChatCompletion (attributes, not a dict)."""

    model = "gpt-4o-mini-2024-07-18"

    def __init__(self) -> None:
        self.usage = _Usage(11, 7)
        self.choices = [{"message": {"role": "assistant", "content": "hello"}}]


def test_llm_records_model_and_token_usage(captured_traces: CapturedTraces) -> None:
    @agentlens.llm
    def openai_chat(messages: list[dict[str, str]], model: str) -> _ChatCompletion:
        return _ChatCompletion()

    @agentlens.llm
    async def anthropic_message(messages: list[dict[str, str]], model: str) -> dict[str, Any]:
        return {
            "model": "claude-sonnet-4",
            "content": [{"type": "text", "text": "hi"}],
            "usage": {"input_tokens": 20, "output_tokens": 5, "cache_read_input_tokens": 16},
        }

    @agentlens.llm
    def langchain(messages: list[str], model: str = "llama3") -> dict[str, Any]:
        return {"content": "x", "usage_metadata": {"input_tokens": 3, "output_tokens": 2}}

    @agentlens.llm
    def plain(prompt: str) -> str:
        return "just text"

    with agentlens.run():
        openai_chat([{"role": "user", "content": "hi"}], model="gpt-4o-mini")
        asyncio.run(anthropic_message([], model="claude-sonnet-4"))
        langchain(["hi"])
        plain("p")
    a, b, c, d = captured_traces.one().steps
    assert a.attributes == {
        "model": "gpt-4o-mini-2024-07-18",
        "input_tokens": 11,
        "output_tokens": 7,
        "total_tokens": 18,
    }
    assert a.input == {"messages": [{"role": "user", "content": "hi"}], "model": "gpt-4o-mini"}
    assert b.attributes == {
        "model": "claude-sonnet-4",
        "input_tokens": 20,
        "output_tokens": 5,
        "total_tokens": 25,
        "cache_read_tokens": 16,
    }
    assert c.attributes == {
        "model": "llama3",
        "input_tokens": 3,
        "output_tokens": 2,
        "total_tokens": 5,
    }
    assert d.attributes == {}
    assert d.output == "just text"
