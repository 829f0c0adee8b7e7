"""The default chat pipeline, end to end through the workflow runner and a real HTTP LLM."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from storyloom.chat.prompt.default_pipeline import INVOKER_NODE, default_pipeline, pipeline_for
from storyloom.chat.prompt.format_guide import format_guide
from storyloom.chat.store.conversation import (
    DEFAULT_PIPELINE,
    CharacterSnapshot,
    ConversationSettings,
)
from storyloom.chat.store.snapshot import ContextSnapshot, HistoryMessage, LoreHit
from storyloom.chat.store.state import ChatState
from storyloom.core.errors import FileFormatError
from storyloom.core.settings import Settings
from storyloom.plugins import node_registry
from storyloom.testing.replay_server import ReplayLLMServer, Reply
from storyloom.workflow.events import NodeStreaming, RunEvent
from storyloom.workflow.node_type import WorkflowServices
from storyloom.workflow.runner import WorkflowRunner
from storyloom.workflow.validation import validate_workflow
from storyloom.workflow.workflow_file import WorkflowLibrary

REGISTRY = node_registry(entry_points=False)

REPLY = (
    "<thought>Finn looks tired; give him the attic.</thought>\n"
    "<state_update>\n"
    '  <set key="room" value="attic"></set>\n'
    '  <add key="gold" value="-2"></add>\n'
    "</state_update>\n"
    "<reply>Here is your key. The attic is warm.</reply>"
)


@pytest.fixture
def llm() -> Iterator[ReplayLLMServer]:
    with ReplayLLMServer(models=["user-model"]) as server:
        yield server


def runner_for(llm: ReplayLLMServer) -> WorkflowRunner:
    settings = Settings.model_validate(
        {"user_llm": {"base_url": llm.url, "model": "user-model", "max_retries": 0}}
    )
    return WorkflowRunner(REGISTRY, WorkflowServices(settings=lambda: settings))


def make_snapshot() -> ContextSnapshot:
    return ContextSnapshot(
        conversation_id="c1",
        pointer="m3",
        history=[
            HistoryMessage(id="m0", role="assistant", name="Mara", content="Welcome, {{user}}."),
            HistoryMessage(id="m1", role="user", name="Finn", content="A room, please."),
            HistoryMessage(id="m2", role="assistant", name="Mara", content="Two gold."),
            HistoryMessage(id="m3", role="user", name="Finn", content="Here you are."),
        ],
        state=ChatState(variables={"gold": 10}),
        character=CharacterSnapshot(
            card={
                "name": "Mara",
                "description": "{{char}} keeps the Crooked Inn.",
                "personality": "brisk",
                "scenario": "A stormy night.",
                "mes_example": "<START>\n{{user}}: Ale?\n{{char}}: Coming up.",
                "post_history_instructions": "Reply in under 50 words.",
            }
        ),
        settings=ConversationSettings(
            user_name="Finn",
            persona="A tired courier.",
            authors_note="[Mood: cosy]",
            authors_note_depth=1,
        ),
        lore=[
            LoreHit(
                kb_id="inn",
                entry_id="storm",
                title="Storm",
                content="Storms flood the road.",
                placement="before_character",
            )
        ],
        seed=3,
        now="2024-02-01T21:00:00+00:00",
    )


def test_default_pipeline_is_valid_and_laid_out_left_to_right() -> None:
    workflow = default_pipeline()
    assert workflow.id == DEFAULT_PIPELINE
    assert validate_workflow(workflow, REGISTRY) == []
    xs = [node.position.x for node in workflow.nodes]
    assert xs == sorted(xs) and len(set(xs)) == len(xs)
    assert [node.type for node in workflow.nodes] == [
        "core:GroupInput",
        "chat:SkeinBuilder",
        "chat:PromptAST",
        "chat:RegexCleaner",
        "chat:Script",
        "chat:TokenBudget",
        "chat:Weaver",
        "chat:TextPrompt",
        "chat:LLMInvoker",
        "chat:FilamentParser",
        "chat:StateUpdater",
        "core:GroupOutput",
    ]
    assert set(workflow.interface_outputs) == {
        "reply",
        "thought",
        "state",
        "delta",
        "skein",
        "messages",
        "prompt",
        "problems",
        "raw",
        "steps",
    }
    assert workflow.interface_inputs["snapshot"].required


async def test_a_turn_runs_end_to_end_and_sends_the_prompt_in_sillytavern_order(
    llm: ReplayLLMServer,
) -> None:
    llm.script(Reply(text=REPLY))
    events: list[RunEvent] = []
    snapshot = make_snapshot()
    result = await runner_for(llm).run(
        default_pipeline(),
        inputs={"snapshot": snapshot.model_dump(mode="json")},
        on_event=events.append,
    )
    assert result.status == "completed", result.errors
    out: dict[str, Any] = result.interface_outputs
    assert out["raw"] == REPLY
    assert out["reply"] == "Here is your key. The attic is warm."
    assert out["thought"] == "Finn looks tired; give him the attic."
    assert out["state"]["variables"] == {"gold": 8, "room": "attic"}
    assert {"op": "replace", "path": "/variables/gold", "value": 8} in out["delta"]
    assert {"op": "add", "path": "/variables/room", "value": "attic"} in out["delta"]
    assert out["problems"] == []
    streamed = "".join(
        e.chunk for e in events if isinstance(e, NodeStreaming) and e.node_id == INVOKER_NODE
    )
    assert streamed == REPLY

    skein = out["skein"]
    assert all(isinstance(block["tokens"], int) for block in skein["blocks"])
    assert skein["budget"] == 8192 - 1024

    sent = llm.chat_requests[-1]["messages"]
    assert sent == out["messages"]
    found = format_guide(snapshot)
    assert found is not None and 'Tracked state now: {"gold": 10}' in found.text
    guide = found.text
    assert sent == [
        {
            "role": "system",
            "content": "Write Mara's next reply in a fictional chat between Mara and Finn.",
        },
        {"role": "system", "content": "Storms flood the road."},
        {"role": "system", "content": "A tired courier."},
        {"role": "system", "content": "Mara keeps the Crooked Inn."},
        {"role": "system", "content": "brisk"},
        {"role": "system", "content": "A stormy night."},
        {"role": "system", "content": "[Example Chat]"},
        {"role": "system", "content": "Ale?", "name": "example_user"},
        {"role": "system", "content": "Coming up.", "name": "example_assistant"},
        {"role": "system", "content": "[Start a new Chat]"},
        {"role": "assistant", "content": "Welcome, Finn."},
        {"role": "user", "content": "A room, please."},
        {"role": "assistant", "content": "Two gold."},
        # The format guide joins the author's note at depth 1, the state as it is now.
        {"role": "system", "content": f"[Mood: cosy]\n{guide}"},
        {"role": "user", "content": "Here you are."},
        {"role": "system", "content": "Reply in under 50 words."},
    ]


async def test_a_swipe_reuses_the_prompt_and_asks_the_model_again(llm: ReplayLLMServer) -> None:
    llm.script(Reply(text="<reply>First.</reply>"), Reply(text="<reply>Second.</reply>"))
    runner = runner_for(llm)
    inputs = {"snapshot": make_snapshot().model_dump(mode="json")}
    first = await runner.run(default_pipeline(), inputs=inputs)
    second = await runner.run(default_pipeline(), inputs=inputs)
    assert first.interface_outputs["reply"] == "First."
    assert second.interface_outputs["reply"] == "Second."
    assert INVOKER_NODE in second.ran
    # the prompt comes from the cache: the walk upstream stops at the cached budget
    assert {"budget", "weaver"} <= set(second.cached)
    assert not {"builder", "ast", "regex"} & set(second.ran)
    assert llm.chat_requests[0]["messages"] == llm.chat_requests[1]["messages"]


async def test_a_reply_with_bad_updates_keeps_its_text_and_reports_problems(
    llm: ReplayLLMServer,
) -> None:
    llm.script(Reply(text='<state_update><sub key="gold" value="lots"></sub></state_update>Hi.'))
    result = await runner_for(llm).run(
        default_pipeline(), inputs={"snapshot": make_snapshot().model_dump(mode="json")}
    )
    assert result.status == "completed", result.errors
    out = result.interface_outputs
    assert out["reply"] == "Hi."
    assert out["problems"]
    assert out["state"]["variables"] == {"gold": 10}


def test_pipeline_for_prefers_the_projects_copy_and_falls_back_to_the_builtin(
    tmp_path: Path,
) -> None:
    assert pipeline_for(tmp_path, DEFAULT_PIPELINE) == default_pipeline()
    assert pipeline_for(None) == default_pipeline()
    mine = default_pipeline().model_copy(update={"name": "My chat"})
    WorkflowLibrary(tmp_path).save(mine)
    assert pipeline_for(tmp_path, DEFAULT_PIPELINE).name == "My chat"
    other = default_pipeline().model_copy(update={"id": "terse", "name": "Terse"})
    WorkflowLibrary(tmp_path).save(other)
    assert pipeline_for(tmp_path, "terse").name == "Terse"
    with pytest.raises(FileFormatError) as caught:
        pipeline_for(tmp_path, "missing")
    assert "missing.json" in str(caught.value)
    with pytest.raises(FileFormatError):
        pipeline_for(None, "missing")
