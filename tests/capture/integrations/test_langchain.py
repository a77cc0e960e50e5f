"""The LangChain callback handler, on real langchain-core runnables and its fake chat models."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import tool

import agentlens
from agentlens.integrations.langchain import AgentlensCallbackHandler
from agentlens.model import StepKind


@tool
def get_order(order_id: str) -> str:
    """Look an order up."""
    if order_id == "ORD-404":
        raise ValueError("no such order")
    return f"{order_id}: shipped 2026-11-20"


class Shelf(BaseRetriever):
    """A retriever over a fixed list of documents (a real LangChain retriever)."""

    docs: list[Document]

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return [d for d in self.docs if query.lower() in d.page_content.lower()]


def _model(*replies: AIMessage) -> FakeMessagesListChatModel:
    return FakeMessagesListChatModel(responses=list(replies))


CALL = AIMessage(
    "",
    tool_calls=[{"id": "call_1", "name": "get_order", "args": {"order_id": "ORD-1"}}],
    usage_metadata={"input_tokens": 30, "output_tokens": 8, "total_tokens": 38},
    response_metadata={"model_name": "gpt-4o-mini"},
)


def test_a_chain_with_model_and_tool_is_one_run_nested_by_parent(captured_traces: Any) -> None:
    handler = AgentlensCallbackHandler(agent="support")
    model = _model(CALL, AIMessage("ORD-1 shipped on 2026-11-20."))
    answer = RunnableLambda(
        lambda q, config: _agent_in(model, q, config), name="support_agent"
    ).invoke("Where is ORD-1?", config={"callbacks": [handler]})
    assert answer == "ORD-1 shipped on 2026-11-20."
    trace = captured_traces.one()
    assert trace.agent == "support" and trace.input == "Where is ORD-1?"
    assert trace.output == "ORD-1 shipped on 2026-11-20."
    root = trace.steps[0]
    assert (root.kind, root.name, root.parent_id) == (StepKind.AGENT, "support_agent", None)
    children = [s for s in trace.steps if s.parent_id == root.id]
    assert [s.kind for s in children] == [StepKind.USER, StepKind.LLM, StepKind.TOOL, StepKind.LLM]
    question, llm1, tool_step, llm2 = children
    assert question.output == "Where is ORD-1?"
    assert llm1.input == [{"role": "user", "content": "Where is ORD-1?"}]
    assert llm1.output["tool_calls"] == [
        {"id": "call_1", "name": "get_order", "arguments": {"order_id": "ORD-1"}}
    ]
    assert llm1.attributes["model"] == "gpt-4o-mini"
    assert (llm1.attributes["input_tokens"], llm1.attributes["output_tokens"]) == (30, 8)
    assert llm1.attributes["cost_usd"] == pytest.approx((30 * 0.15 + 8 * 0.6) / 1e6)
    assert tool_step.name == "get_order"
    assert tool_step.output == "ORD-1: shipped 2026-11-20"
    assert tool_step.attributes["tool_call_id"] == "call_1"
    assert llm2.output["content"] == "ORD-1 shipped on 2026-11-20."


def _agent_in(model: FakeMessagesListChatModel, q: str, config: Any) -> str:
    messages: list[Any] = [HumanMessage(q)]
    reply = model.invoke(messages, config=config)
    messages.append(reply)
    for call in reply.tool_calls:
        messages.append(get_order.invoke(call, config=config))
    return str(model.invoke(messages, config=config).content)


def test_a_tool_error_is_the_steps_error(captured_traces: Any) -> None:
    handler = AgentlensCallbackHandler()
    with pytest.raises(ValueError, match="no such order"):
        get_order.invoke({"order_id": "ORD-404"}, config={"callbacks": [handler]})
    trace = captured_traces.one()
    (step,) = trace.steps
    assert step.kind is StepKind.TOOL and step.input == {"order_id": "ORD-404"}
    assert step.error == {"type": "ValueError", "message": "no such order"}
    assert trace.status == "error"


def test_a_retriever_keeps_documents_whole_with_metadata(captured_traces: Any) -> None:
    shelf = Shelf(
        docs=[
            Document("Refunds take 5 days.", metadata={"source": "faq.md", "row": 3}, id="d1"),
            Document("Shipping is free.", metadata={"source": "faq.md"}),
        ]
    )
    with agentlens.run(agent="rag"):
        shelf.invoke("refunds", config={"callbacks": [AgentlensCallbackHandler()]})
    (step,) = captured_traces.one().steps
    assert step.kind is StepKind.RETRIEVAL and step.input == {"query": "refunds"}
    assert step.output == [
        {
            "id": "d1",
            "page_content": "Refunds take 5 days.",
            "metadata": {"source": "faq.md", "row": 3},
        }
    ]


def test_inside_a_run_the_langchain_steps_join_it_under_the_enclosing_step(
    captured_traces: Any,
) -> None:
    handler = AgentlensCallbackHandler()
    model = _model(AIMessage("hello"))
    with agentlens.run(agent="outer") as run, run.step("agent", "planner"):
        model.invoke("hi", config={"callbacks": [handler]})
    trace = captured_traces.one()
    planner, question, llm = trace.steps
    assert (question.kind, question.output, question.parent_id) == (StepKind.USER, "hi", planner.id)
    assert llm.kind is StepKind.LLM and llm.parent_id == planner.id
    assert llm.output == {"role": "assistant", "content": "hello"}


def test_a_chain_error_ends_its_run_as_an_error(captured_traces: Any) -> None:
    def boom(_: str) -> str:
        raise RuntimeError("chain broke")

    with pytest.raises(RuntimeError):
        RunnableLambda(boom).invoke("x", config={"callbacks": [AgentlensCallbackHandler()]})
    trace = captured_traces.one()
    assert trace.status == "error"
    assert trace.steps[0].error["message"] == "chain broke"


def test_a_tool_message_with_error_status_is_an_error(captured_traces: Any) -> None:
    handler = AgentlensCallbackHandler()
    model = _model(
        AIMessage(
            "", tool_calls=[{"id": "c9", "name": "get_order", "args": {"order_id": "ORD-404"}}]
        ),
        AIMessage("Not found."),
    )
    with agentlens.run():
        RunnableLambda(lambda q, config: _agent_loop_errors(model, q, config)).invoke(
            "ORD-404?", config={"callbacks": [handler]}
        )
    steps = captured_traces.one().steps
    tool_steps = [s for s in steps if s.kind is StepKind.TOOL]
    assert len(tool_steps) == 1 and tool_steps[0].error is not None


def _agent_loop_errors(model: FakeMessagesListChatModel, q: str, config: Any) -> str:
    messages: list[Any] = [HumanMessage(q)]
    reply = model.invoke(messages, config=config)
    messages.append(reply)
    for call in reply.tool_calls:
        try:
            messages.append(get_order.invoke(call, config=config))
        except ValueError as exc:
            messages.append(ToolMessage(str(exc), tool_call_id=call["id"], status="error"))
    return str(model.invoke(messages, config=config).content)


def test_a_handled_tool_exception_is_an_error_not_a_result(captured_traces: Any) -> None:
    from langchain_core.tools import StructuredTool, ToolException

    def lookup(order_id: str) -> str:
        raise ToolException(f"Error: order {order_id} not found")

    handled = StructuredTool.from_function(
        lookup, name="lookup", description="Look an order up.", handle_tool_error=True
    )
    with agentlens.run():
        message = handled.invoke(
            {"type": "tool_call", "id": "c1", "name": "lookup", "args": {"order_id": "X"}},
            config={"callbacks": [AgentlensCallbackHandler()]},
        )
    assert message.status == "error"  # LangChain hands the error back to the model
    (step,) = captured_traces.one().steps
    assert step.error == "Error: order X not found" and step.output is None


def test_a_streamed_reply_is_an_assistant_message(captured_traces: Any) -> None:
    # A streamed reply reaches the handler as an AIMessageChunk, whose type is "AIMessageChunk":
    # it was recorded as role "AIMessageChunk", in the reply and in the messages sent after it.
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import ChatMessage

    model = GenericFakeChatModel(messages=iter([AIMessage("ORD-1 shipped."), AIMessage("ok")]))
    handler = AgentlensCallbackHandler(agent="support")

    def agent(question: str, config: Any) -> str:
        reply = None
        for chunk in model.stream([HumanMessage(question)], config=config):
            reply = chunk if reply is None else reply + chunk
        assert reply is not None
        history = [ChatMessage(role="user", content=question), reply, HumanMessage("thanks")]
        model.invoke(history, config=config)
        return str(reply.content)

    RunnableLambda(agent, name="streamer").invoke("Where?", config={"callbacks": [handler]})
    streamed, second = [s for s in captured_traces.one().steps if s.kind is StepKind.LLM]
    assert streamed.output == {"role": "assistant", "content": "ORD-1 shipped."}
    assert [m["role"] for m in second.input] == ["user", "assistant", "user"]


def test_the_system_prompt_and_user_messages_are_steps_and_so_evidence(
    captured_traces: Any,
) -> None:
    # They were only in the llm step's input, which is not evidence: an answer taken from the
    # system prompt was flagged as a fabricated reference and as parametric leakage.
    from langchain_core.messages import SystemMessage

    from agentlens.eval import run_scorers

    model = _model(AIMessage("ORD-9 shipped on 2026-11-20."), AIMessage("Glad to help."))
    handler = AgentlensCallbackHandler(agent="support")

    def agent(question: str, config: Any) -> str:
        system = SystemMessage("Customer context: ORD-9 shipped on 2026-11-20.")
        messages: list[Any] = [system, HumanMessage(question)]
        reply = model.invoke(messages, config=config)
        messages += [reply, HumanMessage("thanks")]
        model.invoke(messages, config=config)
        return str(reply.content)

    RunnableLambda(agent, name="support_agent").invoke(
        "When did ORD-9 ship?", config={"callbacks": [handler]}
    )
    trace = captured_traces.one()
    assert [
        (s.kind, s.output) for s in trace.steps if s.kind in (StepKind.SYSTEM, StepKind.USER)
    ] == [
        (StepKind.SYSTEM, "Customer context: ORD-9 shipped on 2026-11-20."),
        (StepKind.USER, "When did ORD-9 ship?"),
        (StepKind.USER, "thanks"),
    ]
    assert [s.kind for s in trace.steps][1:4] == [StepKind.SYSTEM, StepKind.USER, StepKind.LLM]
    report = run_scorers(["no_fabricated_refs", "parametric_leakage"], trace=trace)
    assert all(r.passed for r in report.results.values()), report


def test_a_tool_result_the_handler_did_not_see_run_is_a_tool_step(captured_traces: Any) -> None:
    # A tool called without the callbacks (tool.invoke(args), or plain Python) and fed back as
    # a ToolMessage: its result was only in the next llm step's input, which is not evidence.
    model = _model(CALL, AIMessage("ORD-1 shipped on 2026-11-20."))
    handler = AgentlensCallbackHandler(agent="support")

    def agent(question: str, config: Any) -> str:
        messages: list[Any] = [HumanMessage(question)]
        reply = model.invoke(messages, config=config)
        messages.append(reply)
        for call in reply.tool_calls:
            result = get_order.func(**call["args"])  # plain Python: the handler sees nothing
            messages.append(ToolMessage(result, tool_call_id=call["id"], name=call["name"]))
        return str(model.invoke(messages, config=config).content)

    RunnableLambda(agent, name="support_agent").invoke("Where?", config={"callbacks": [handler]})
    steps = captured_traces.one().steps
    assert [s.kind for s in steps] == [
        StepKind.AGENT, StepKind.USER, StepKind.LLM, StepKind.TOOL, StepKind.LLM
    ]  # fmt: skip
    tool = steps[3]
    assert (tool.name, tool.output) == ("get_order", "ORD-1: shipped 2026-11-20")
    assert tool.attributes == {"tool_call_id": "call_1", "unpaired": True}


def test_a_tool_seen_without_its_call_id_is_not_recorded_twice(captured_traces: Any) -> None:
    model = _model(CALL, AIMessage("ORD-1 shipped on 2026-11-20."))
    handler = AgentlensCallbackHandler(agent="support")

    def agent(question: str, config: Any) -> str:
        messages: list[Any] = [HumanMessage(question)]
        reply = model.invoke(messages, config=config)
        messages.append(reply)
        for call in reply.tool_calls:
            result = get_order.invoke(call["args"], config=config)  # seen, but without the id
            messages.append(ToolMessage(result, tool_call_id=call["id"]))
        return str(model.invoke(messages, config=config).content)

    RunnableLambda(agent, name="support_agent").invoke("Where?", config={"callbacks": [handler]})
    tools = [s for s in captured_traces.one().steps if s.kind is StepKind.TOOL]
    assert len(tools) == 1 and "unpaired" not in tools[0].attributes
