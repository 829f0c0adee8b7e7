"""A SillyTavern chat-completion preset imports as a chat pipeline workflow.

The fixture is written by hand in the shape of SillyTavern's
``default/content/presets/openai/Default.json`` (prompts with markers, two prompt orders
keyed by character id, sampling and format fields), with a custom relative prompt and a
custom in-chat prompt added, as users' presets have.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from storyloom.chat.prompt.preset_pipeline import import_st_preset, workflow_id_for
from storyloom.chat.store.conversation import CharacterSnapshot, ConversationSettings
from storyloom.chat.store.snapshot import ContextSnapshot, HistoryMessage
from storyloom.chat.store.state import ChatState
from storyloom.core.errors import FileFormatError
from storyloom.core.settings import Settings
from storyloom.plugins import node_registry
from storyloom.testing.replay_server import ReplayLLMServer, Reply
from storyloom.workflow.node_type import WorkflowServices
from storyloom.workflow.runner import WorkflowRunner
from storyloom.workflow.validation import validate_workflow
from storyloom.workflow.workflow_file import WorkflowLibrary

REGISTRY = node_registry(entry_points=False)


def preset() -> dict[str, Any]:
    return {
        "chat_completion_source": "openai",
        "openai_model": "gpt-4o",
        "temperature": 0.8,
        "frequency_penalty": 0.3,
        "presence_penalty": 0,
        "top_p": 0.95,
        "top_k": 40,
        "openai_max_context": 16000,
        "openai_max_tokens": 500,
        "names_behavior": 2,
        "new_chat_prompt": "[New scene]",
        "new_example_chat_prompt": "[Sample]",
        "wi_format": "[Lore: {0}]",
        "scenario_format": "Scene: {{scenario}}",
        "personality_format": "{{char}} is {{personality}}",
        "squash_system_messages": True,
        "seed": 42,
        "stream_openai": True,
        "prompts": [
            {
                "name": "Main Prompt",
                "system_prompt": True,
                "role": "system",
                "content": "You are {{char}}. Never speak for {{user}}.",
                "identifier": "main",
            },
            {
                "name": "Auxiliary Prompt",
                "system_prompt": True,
                "role": "system",
                "content": "",
                "identifier": "nsfw",
            },
            {
                "identifier": "dialogueExamples",
                "name": "Chat Examples",
                "system_prompt": True,
                "marker": True,
            },
            {
                "name": "Post-History Instructions",
                "system_prompt": True,
                "role": "system",
                "content": "Stay terse.",
                "identifier": "jailbreak",
            },
            {
                "identifier": "chatHistory",
                "name": "Chat History",
                "system_prompt": True,
                "marker": True,
            },
            {
                "identifier": "charDescription",
                "name": "Char Description",
                "system_prompt": True,
                "marker": True,
            },
            {"identifier": "scenario", "name": "Scenario", "system_prompt": True, "marker": True},
            {
                "identifier": "house-style",
                "name": "House style",
                "system_prompt": False,
                "role": "system",
                "content": "Use present tense.",
                "injection_position": 0,
                "injection_depth": 4,
                "forbid_overrides": False,
            },
            {
                "identifier": "reminder",
                "name": "Reminder",
                "system_prompt": False,
                "role": "user",
                "content": "(Remember the storm.)",
                "injection_position": 1,
                "injection_depth": 0,
                "injection_order": 100,
            },
        ],
        "prompt_order": [
            {"character_id": 100000, "order": [{"identifier": "main", "enabled": True}]},
            {
                "character_id": 100001,
                "order": [
                    {"identifier": "main", "enabled": True},
                    {"identifier": "house-style", "enabled": True},
                    {"identifier": "charDescription", "enabled": True},
                    {"identifier": "scenario", "enabled": True},
                    {"identifier": "nsfw", "enabled": True},
                    {"identifier": "dialogueExamples", "enabled": False},
                    {"identifier": "chatHistory", "enabled": True},
                    {"identifier": "reminder", "enabled": True},
                    {"identifier": "jailbreak", "enabled": True},
                ],
            },
        ],
    }


def nodes_config(workflow: Any) -> dict[str, dict[str, Any]]:
    return {node.id: node.config for node in workflow.nodes}


def test_preset_becomes_the_pipeline_with_its_layout_and_sampling() -> None:
    workflow = import_st_preset(preset(), name="Terse Storm")
    assert workflow.id == "st-terse-storm"
    assert workflow.name == "Terse Storm"
    assert validate_workflow(workflow, REGISTRY) == []
    config = nodes_config(workflow)
    builder = config["builder"]
    assert [e["identifier"] for e in builder["prompt_order"]] == [
        "main",
        "house-style",
        "charDescription",
        "scenario",
        "nsfw",
        "dialogueExamples",
        "chatHistory",
        "reminder",
        "jailbreak",
    ]
    assert builder["prompt_order"][5] == {"identifier": "dialogueExamples", "enabled": False}
    prompts = {p["identifier"]: p for p in builder["prompts"]}
    assert prompts["main"]["content"] == "You are {{char}}. Never speak for {{user}}."
    assert prompts["reminder"]["injection_position"] == 1
    assert prompts["chatHistory"]["marker"] is True
    assert prompts["chatHistory"]["role"] == "system"
    assert builder["new_chat_prompt"] == "[New scene]"
    assert builder["wi_format"] == "[Lore: {0}]"
    assert config["budget"] == {"max_context_tokens": 16000, "reserve_tokens": 500}
    assert config["weaver"] == {"names_behavior": "content", "squash_system": True}
    assert config["invoker"] == {
        "temperature": 0.8,
        "top_p": 0.95,
        "frequency_penalty": 0.3,
        "presence_penalty": 0.0,
        "max_tokens": 500,
        "seed": 42,
    }


async def test_imported_preset_shapes_the_request() -> None:
    workflow = import_st_preset(preset(), name="Terse Storm")
    snapshot = ContextSnapshot(
        conversation_id="c",
        pointer="m1",
        history=[
            HistoryMessage(id="m0", role="assistant", content="Rain hammers the roof."),
            HistoryMessage(id="m1", role="user", content="I knock."),
        ],
        state=ChatState(),
        character=CharacterSnapshot(
            card={
                "name": "Mara",
                "description": "An innkeeper.",
                "scenario": "A storm.",
                "personality": "brisk",
                "mes_example": "<START>\n{{user}}: Hi\n{{char}}: Yo",
            }
        ),
        settings=ConversationSettings(user_name="Finn"),
    )
    with ReplayLLMServer(models=["m"]) as llm:
        llm.script(Reply(text="<reply>Come in.</reply>"))
        settings = Settings.model_validate({"user_llm": {"base_url": llm.url, "model": "m"}})
        runner = WorkflowRunner(REGISTRY, WorkflowServices(settings=lambda: settings))
        result = await runner.run(workflow, inputs={"snapshot": snapshot.model_dump(mode="json")})
        assert result.status == "completed", result.errors
        request = llm.chat_requests[-1]
    assert result.interface_outputs["reply"] == "Come in."
    assert (request["temperature"], request["top_p"], request["max_tokens"]) == (0.8, 0.95, 500)
    assert request["seed"] == 42
    assert request["messages"] == [
        {
            "role": "system",
            "content": "You are Mara. Never speak for Finn.\nUse present tense.\n"
            "An innkeeper.\nScene: A storm.",
        },
        {"role": "system", "content": "[New scene]"},
        {"role": "assistant", "content": "Mara: Rain hammers the roof."},
        {"role": "user", "content": "Finn: I knock."},
        {"role": "user", "content": "(Remember the storm.)"},
        {"role": "system", "content": "Stay terse."},
    ]


def test_preset_file_imports_and_saves_as_a_project_workflow(tmp_path: Path) -> None:
    path = tmp_path / "My Preset.json"
    path.write_text(json.dumps(preset()), encoding="utf-8")
    workflow = import_st_preset(path)
    assert workflow.name == "My Preset"
    assert workflow.id == "st-my-preset"
    library = WorkflowLibrary(tmp_path / "project")
    library.save(workflow)
    assert library.load(workflow.id) == workflow
    assert workflow_id_for("日本語 preset!") == "st-preset"


def test_legacy_preset_without_the_prompt_manager_imports() -> None:
    legacy = {
        "main_prompt": "Old main.",
        "jailbreak_prompt": "Old jb.",
        "temperature": 1,
        "names_behavior": -1,
        "seed": -1,
    }
    workflow = import_st_preset(legacy, name="old", workflow_id="legacy")
    config = nodes_config(workflow)
    prompts = {p["identifier"]: p["content"] for p in config["builder"]["prompts"]}
    assert prompts == {"main": "Old main.", "jailbreak": "Old jb."}
    assert config["builder"]["prompt_order"][0] == {"identifier": "main", "enabled": True}
    assert config["weaver"] == {"names_behavior": "none"}
    assert config["invoker"] == {"temperature": 1.0}  # seed -1 means "random": not sent
    assert workflow.id == "legacy"


@pytest.fixture
def broken() -> Iterator[dict[str, Any]]:
    yield preset()


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda p: p.update(temperature="hot"), "temperature"),
        (lambda p: p.update(openai_max_tokens=12.5), "openai_max_tokens"),
        (lambda p: p.update(names_behavior=7), "names_behavior"),
        (lambda p: p["prompts"][1].pop("identifier"), "prompts[1].identifier"),
        (lambda p: p["prompts"][7].update(injection_position=2), "prompts[7].injection_position"),
        (lambda p: p["prompts"][0].update(content=["a"]), "prompts[0].content"),
        (
            lambda p: p["prompt_order"][1]["order"][0].update(enabled="yes"),
            "prompt_order[1].order[0].enabled",
        ),
        (lambda p: p.update(prompts={"main": {}}), "prompts"),
    ],
)
def test_wrong_types_are_refused_naming_the_field(
    broken: dict[str, Any], change: Any, field: str
) -> None:
    change(broken)
    with pytest.raises(FileFormatError) as caught:
        import_st_preset(broken, name="bad")
    assert field in [problem.field for problem in caught.value.problems]


def test_files_that_are_not_presets_are_refused(tmp_path: Path) -> None:
    with pytest.raises(FileFormatError) as caught:
        import_st_preset([1, 2], name="list")  # type: ignore[arg-type]
    assert "expected a JSON object" in str(caught.value)
    text = tmp_path / "broken.json"
    text.write_text("{not json", encoding="utf-8")
    with pytest.raises(FileFormatError) as caught:
        import_st_preset(text)
    assert caught.value.path == text and "not valid JSON" in str(caught.value)
    with pytest.raises(FileFormatError) as caught:
        import_st_preset(tmp_path / "absent.json")
    assert "no such file" in str(caught.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken.json"]
