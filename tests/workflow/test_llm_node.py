"""llm:Chat through the real runner against the replay server (real HTTP, real SSE)."""

from collections.abc import Iterator
from typing import Any

import pytest

from storyloom.core.settings import Settings
from storyloom.plugins import node_registry
from storyloom.testing.replay_server import ReplayLLMServer, Reply
from storyloom.workflow.events import NodeCached, NodeStreaming, RunEvent
from storyloom.workflow.node_type import WorkflowServices
from storyloom.workflow.runner import RunResult, WorkflowRunner
from storyloom.workflow.workflow_file import Workflow

REGISTRY = node_registry(entry_points=False)


@pytest.fixture
def llm() -> Iterator[ReplayLLMServer]:
    with ReplayLLMServer(models=["user-model", "agent-model", "other-model"]) as server:
        yield server


def runner_for(llm: ReplayLLMServer) -> WorkflowRunner:
    settings = Settings.model_validate(
        {
            "user_llm": {"base_url": llm.url, "model": "user-model", "max_retries": 0},
            "agent_llm": {"base_url": llm.url, "model": "agent-model", "max_retries": 0},
        }
    )
    return WorkflowRunner(REGISTRY, WorkflowServices(settings=lambda: settings))


def chat_workflow(config: dict[str, Any], *, history: bool = False) -> Workflow:
    nodes: list[dict[str, Any]] = [{"id": "chat", "type": "llm:Chat", "config": config}]
    edges: list[dict[str, str]] = []
    interface: dict[str, Any] = {}
    if history:
        nodes.append({"id": "in", "type": "core:GroupInput"})
        edges.append(
            {"source": "in", "sourceSlot": "history", "target": "chat", "targetSlot": "history"}
        )
        interface["history"] = {"dataFlowType": "MESSAGES"}
    return Workflow.model_validate(
        {"id": "chat", "nodes": nodes, "edges": edges, "interfaceInputs": interface}
    )


async def run_chat(
    runner: WorkflowRunner, workflow: Workflow, **inputs: Any
) -> tuple[RunResult, list[RunEvent]]:
    events: list[RunEvent] = []
    result = await runner.run(workflow, inputs=inputs, outputs=["chat"], on_event=events.append)
    return result, events


async def test_chat_streams_each_delta_and_outputs_text_and_messages(
    llm: ReplayLLMServer,
) -> None:
    # Spaced as a model streams: each delta arrives on its own and is passed on as such.
    llm.script(Reply(text="Once upon a time there was tea", chunk_delay_s=0.02))
    history = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]
    result, events = await run_chat(
        runner_for(llm),
        chat_workflow({"prompt": "Tell a story", "system": "You are terse"}, history=True),
        history=history,
    )
    assert result.status == "completed", result.errors
    chunks = [e.chunk for e in events if isinstance(e, NodeStreaming) and e.node_id == "chat"]
    assert len(chunks) > 1
    assert "".join(chunks) == "Once upon a time there was tea"
    outputs = result.outputs["chat"]
    assert outputs["text"] == "Once upon a time there was tea"
    assert outputs["messages"] == [
        *history,
        {"role": "user", "content": "Tell a story"},
        {"role": "assistant", "content": "Once upon a time there was tea"},
    ]
    request = llm.chat_requests[-1]
    assert request["model"] == "user-model"
    assert request["messages"] == [
        {"role": "system", "content": "You are terse"},
        *history,
        {"role": "user", "content": "Tell a story"},
    ]


async def test_the_agent_role_uses_the_agent_model_and_overrides_apply(
    llm: ReplayLLMServer,
) -> None:
    result, _ = await run_chat(
        runner_for(llm),
        chat_workflow({"prompt": "Plan", "role": "agent", "temperature": 0.2, "max_tokens": 50}),
    )
    assert result.status == "completed", result.errors
    request = llm.chat_requests[-1]
    assert request["model"] == "agent-model"
    assert (request["temperature"], request["max_tokens"]) == (0.2, 50)
    assert request["messages"] == [{"role": "user", "content": "Plan"}]

    await run_chat(runner_for(llm), chat_workflow({"prompt": "Plan", "model": "other-model"}))
    assert llm.chat_requests[-1]["model"] == "other-model"


async def test_an_unchanged_prompt_is_answered_from_the_cache(llm: ReplayLLMServer) -> None:
    runner = runner_for(llm)
    llm.script(Reply(text="first answer"), Reply(text="second answer"))
    first, _ = await run_chat(runner, chat_workflow({"prompt": "Same"}))
    assert first.outputs["chat"]["text"] == "first answer"
    again, events = await run_chat(runner, chat_workflow({"prompt": "Same"}))
    assert again.outputs["chat"]["text"] == "first answer"
    assert any(isinstance(e, NodeCached) and e.node_id == "chat" for e in events)
    assert len(llm.chat_requests) == 1
    changed, _ = await run_chat(runner, chat_workflow({"prompt": "Different"}))
    assert changed.outputs["chat"]["text"] == "second answer"


async def test_switching_the_model_in_settings_reruns_a_cached_chat(
    llm: ReplayLLMServer,
) -> None:
    settings = Settings.model_validate(
        {"user_llm": {"base_url": llm.url, "model": "user-model", "max_retries": 0}}
    )
    current = {"settings": settings}
    runner = WorkflowRunner(REGISTRY, WorkflowServices(settings=lambda: current["settings"]))
    llm.script(Reply(text="from user-model"), Reply(text="from other-model"))
    first, _ = await run_chat(runner, chat_workflow({"prompt": "Same"}))
    current["settings"] = settings.model_copy(
        update={"user_llm": settings.user_llm.model_copy(update={"model": "other-model"})}
    )
    switched, events = await run_chat(runner, chat_workflow({"prompt": "Same"}))
    assert first.outputs["chat"]["text"] == "from user-model"
    assert switched.outputs["chat"]["text"] == "from other-model"
    assert not any(isinstance(e, NodeCached) for e in events)
    assert [r["model"] for r in llm.chat_requests] == ["user-model", "other-model"]


async def test_an_llm_error_fails_the_node_with_the_reason(llm: ReplayLLMServer) -> None:
    llm.script(Reply(status=401, error_message="bad key"))
    result, _ = await run_chat(runner_for(llm), chat_workflow({"prompt": "Hi"}))
    assert result.status == "failed"
    assert result.errors["chat"].startswith("AuthenticationFailed: ")
    assert "rejected the API key (401)" in result.errors["chat"]


async def test_a_stream_cut_midway_fails_the_node_after_streaming_what_came(
    llm: ReplayLLMServer,
) -> None:
    llm.script(Reply(text="one two three four", cut_after_chunks=2))
    result, events = await run_chat(runner_for(llm), chat_workflow({"prompt": "Hi"}))
    assert result.status == "failed"
    streamed = "".join(e.chunk for e in events if isinstance(e, NodeStreaming))
    assert streamed == "one two "
    assert "cut off" in result.errors["chat"]


async def test_an_unconfigured_model_says_so(llm: ReplayLLMServer) -> None:
    runner = WorkflowRunner(REGISTRY, WorkflowServices(settings=lambda: Settings()))
    result, _ = await run_chat(runner, chat_workflow({"prompt": "Hi"}))
    assert result.status == "failed"
    assert result.errors["chat"].startswith("NotConfigured: No chat model is set up")
