"""The chat:TextPrompt node: a turn's Skein as one prompt string for a text-completion
API, run in the default pipeline against the scripted llama.cpp server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from storyloom.chat.prompt.default_pipeline import default_pipeline
from storyloom.chat.prompt.skein import Skein
from storyloom.chat.prompt.text_prompt import template_cost
from storyloom.chat.prompt.token_budget import CHAT_COST, measure, prompt_tokens
from storyloom.chat.store.conversation import CharacterSnapshot, ConversationSettings
from storyloom.chat.store.snapshot import ContextSnapshot, HistoryMessage, LoreHit
from storyloom.chat.store.state import ChatState
from storyloom.core.settings import Settings
from storyloom.llm.instruct import TemplateLibrary, messages_prompt
from storyloom.llm.llama_tokenizer import bundled_llama_counter
from storyloom.plugins import node_registry
from storyloom.testing.replay_server import ReplayLLMServer, Reply
from storyloom.workflow.node_type import WorkflowServices
from storyloom.workflow.runner import RunResult, WorkflowRunner
from storyloom.workflow.workflow_file import Workflow

REGISTRY = node_registry(entry_points=False)


@pytest.fixture
def llm() -> Iterator[ReplayLLMServer]:
    with ReplayLLMServer(models=["user-model"]) as server:
        yield server


def snapshot() -> ContextSnapshot:
    return ContextSnapshot(
        conversation_id="c1",
        pointer="m3",
        history=[
            HistoryMessage(id="m0", role="assistant", name="Mara", content="Welcome."),
            HistoryMessage(id="m1", role="user", name="Finn", content="A room, please."),
            HistoryMessage(id="m2", role="assistant", name="Mara", content="Two gold."),
            HistoryMessage(id="m3", role="user", name="Finn", content="Here you are."),
        ],
        state=ChatState(),
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
            format_guide="off",
        ),
        lore=[
            LoreHit(
                kb_id="inn",
                entry_id="storm",
                title="Storm",
                content="Storms flood the road.",
                placement="before_character",
            ),
            LoreHit(
                kb_id="inn",
                entry_id="cellar",
                title="Cellar",
                content="The cellar floods first.",
                placement="at_depth",
                depth=1,
            ),
        ],
        seed=3,
        now="2024-02-01T21:00:00+00:00",
    )


def services(
    llm: ReplayLLMServer, templates: TemplateLibrary | None = None, **endpoint: Any
) -> WorkflowServices:
    fields = {"base_url": llm.url, "model": "user-model", "max_retries": 0, **endpoint}
    settings = Settings.model_validate({"user_llm": fields})
    return WorkflowServices(settings=lambda: settings, prompt_templates=templates)


async def run_turn(
    llm: ReplayLLMServer, services: WorkflowServices, workflow: Workflow | None = None
) -> RunResult:
    llm.script(Reply(text="<reply>Here is your key.</reply>"))
    result = await WorkflowRunner(REGISTRY, services).run(
        workflow or default_pipeline(),
        inputs={"snapshot": snapshot().model_dump(mode="json")},
    )
    assert result.status == "completed", result.errors
    assert result.interface_outputs["reply"] == "Here is your key."
    return result


def sources(prompt: dict[str, Any]) -> list[tuple[str, str | None, str]]:
    text = prompt["text"]
    return [(p["source"], p["block"], text[p["start"] : p["end"]]) for p in prompt["pieces"]]


CHATML = (
    "<|im_start|>system\n"
    "Write Mara's next reply in a fictional chat between Mara and Finn.\n"
    "Storms flood the road.\n"
    "Mara keeps the Crooked Inn.\n"
    "brisk\n"
    "A stormy night.\n"
    "A tired courier.<|im_end|>\n"
    "<|im_start|>user\n"
    "Finn: Ale?<|im_end|>\n"
    "<|im_start|>assistant\n"
    "Coming up.<|im_end|>\n"
    "<|im_start|>assistant\n"
    "Welcome.<|im_end|>\n"
    "<|im_start|>user\n"
    "A room, please.<|im_end|>\n"
    "<|im_start|>assistant\n"
    "Two gold.<|im_end|>\n"
    "<|im_start|>system\n"
    "[Mood: cosy]\n"
    "The cellar floods first.<|im_end|>\n"
    "<|im_start|>user\n"
    "Here you are.<|im_end|>\n"
    "<|im_start|>system\n"
    "Reply in under 50 words.<|im_end|>\n"
    "<|im_start|>assistant\n"
)


async def test_chatml_prompt_is_exact_and_every_piece_maps_back_to_its_block(
    llm: ReplayLLMServer,
) -> None:
    result = await run_turn(llm, services(llm, api="llamacpp", instruct_template="ChatML"))
    out = result.interface_outputs
    prompt = out["prompt"]
    assert prompt["text"] == CHATML
    (request,) = llm.completion_requests
    assert request.path == "/completion" and request["prompt"] == CHATML
    assert (
        request["stop"]
        == prompt["stop"]
        == [
            "<|im_end|>",
            "<|im_start|>user",
            "<|im_start|>assistant",
            "<|im_start|>system",
            "\nFinn:",
        ]
    )
    assert (prompt["instruct"], prompt["context"]) == ("ChatML", "ChatML")
    # The pieces cover the text, in order, each from its block or the template.
    assert [(p["start"], p["end"]) for p in prompt["pieces"]] == list(
        zip(
            [0, *(p["end"] for p in prompt["pieces"][:-1])],
            [p["end"] for p in prompt["pieces"]],
            strict=True,
        )
    )
    blocks = {b["id"]: b for b in out["skein"]["blocks"]}
    for source, block, text in sources(prompt):
        if block is None:
            continue
        assert source == blocks[block]["source"]["label"]
        assert text in blocks[block]["content"]
    found = {(s, b, t) for s, b, t in sources(prompt)}
    assert ("Card: description", "charDescription", "Mara keeps the Crooked Inn.") in found
    assert ("Lore: inn / Storm (before character)", "lore:inn/storm", "Storms flood the road.") in (
        found
    )
    assert ("Persona: Finn", "personaDescription", "A tired courier.") in found
    assert ("Message 3 (Finn)", "msg:m3", "Here you are.") in found
    assert ("Card: post-history instructions", "jailbreak", "Reply in under 50 words.") in found
    # The author's note and the lore at depth 1 are one system turn, each labelled.
    assert ("Author's note", "authorsNote", "[Mood: cosy]") in found
    assert ("Lore: inn / Cellar (at depth)", "lore:inn/cellar", "The cellar floods first.") in (
        found
    )
    assert ("input sequence", None, "<|im_start|>user") in found
    # "[Start a new Chat]" is chat completion's: the context's chat start stands in.
    assert "newMainChat" not in {b for _, b, _ in sources(prompt)}


async def test_llama_3_with_the_default_context_has_separators_chat_start_and_labels(
    llm: ReplayLLMServer,
) -> None:
    result = await run_turn(
        llm,
        services(llm, api="text", instruct_template="Llama 3 Instruct", context_template="Default"),
    )
    prompt = result.interface_outputs["prompt"]
    text = prompt["text"]
    assert text.startswith(
        "<|start_header_id|>system<|end_header_id|>\n\n"
        "Write Mara's next reply in a fictional chat between Mara and Finn.\n"
        "Storms flood the road.\n"
        "Mara keeps the Crooked Inn.\n"
        "Mara's personality: brisk\n"
        "Scenario: A stormy night.\n"
        "A tired courier.<|eot_id|>"
        "***\n"
        "<|start_header_id|>user<|end_header_id|>\n\nFinn: Ale?<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\nComing up.<|eot_id|>"
        "***\n"
        "<|start_header_id|>assistant<|end_header_id|>\n\nWelcome.<|eot_id|>"
    )
    assert text.endswith(
        "<|start_header_id|>system<|end_header_id|>\n\nReply in under 50 words.<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n"
    )
    found = sources(prompt)
    assert [t for s, _, t in found if s in ("example separator", "chat start")] == ["***\n"] * 2
    assert ("story string", None, "\nScenario: ") in found
    assert ("Card: example dialogue 1 of 1", "example:1", "Coming up.") in found
    (request,) = llm.completion_requests
    assert request.path == "/v1/completions" and request["prompt"] == text


async def test_the_nodes_own_templates_win_and_an_imported_one_can_skip_examples(
    llm: ReplayLLMServer, tmp_path: Path
) -> None:
    library = TemplateLibrary(tmp_path)
    plain = tmp_path / "Plain.json"
    plain.write_text(
        json.dumps(
            {
                "name": "Plain",
                "input_sequence": "### User:",
                "output_sequence": "### Mara:",
                "wrap": True,
                "skip_examples": True,
                "names_behavior": "none",
            }
        )
    )
    assert library.import_file(plain) == ("instruct", "Plain")
    workflow = default_pipeline()
    node = next(n for n in workflow.nodes if n.type == "chat:TextPrompt")
    node.config = {"instruct_template": "Plain", "context_template": "Minimalist"}
    result = await run_turn(llm, services(llm, library, api="llamacpp"), workflow)
    text = result.interface_outputs["prompt"]["text"]
    # Examples as plain lines under skip_examples, the chat in the file's sequences.
    assert "A tired courier.\nFinn: Ale?\nMara: Coming up.\n### Mara:\nWelcome.\n" in text
    # No system sequence: system turns are bare lines.
    assert text.endswith("### User:\nHere you are.\nReply in under 50 words.\n### Mara:\n")
    bad = default_pipeline()
    next(n for n in bad.nodes if n.type == "chat:TextPrompt").config = {"instruct_template": "Nope"}
    failed = await WorkflowRunner(REGISTRY, services(llm, library, api="llamacpp")).run(
        bad, inputs={"snapshot": snapshot().model_dump(mode="json")}
    )
    assert "no instruct template named 'Nope'" in failed.errors["textprompt"]


async def test_on_a_chat_api_the_prompt_is_empty_and_messages_are_sent(
    llm: ReplayLLMServer,
) -> None:
    result = await run_turn(llm, services(llm))
    assert result.interface_outputs["prompt"] == {"text": "", "stop": [], "pieces": []}
    assert llm.chat_requests[-1]["messages"] == result.interface_outputs["messages"]
    assert not llm.completion_requests


async def test_a_pipeline_saved_without_the_node_formats_its_messages_in_the_invoker(
    llm: ReplayLLMServer,
) -> None:
    old = default_pipeline()
    old.nodes = [n for n in old.nodes if n.type != "chat:TextPrompt"]
    old.edges = [e for e in old.edges if "textprompt" not in (e.source, e.target)]
    old.interface_outputs.pop("prompt")
    endpoint = services(llm, api="llamacpp", instruct_template="ChatML")
    result = await run_turn(llm, endpoint, old)
    messages = result.interface_outputs["messages"]
    expected = messages_prompt(messages, endpoint.require_settings().user_llm)
    (request,) = llm.completion_requests
    assert request["prompt"] == expected.text


async def test_on_a_text_api_the_budget_counts_the_templates_wrapping(
    llm: ReplayLLMServer,
) -> None:
    """Prompt plus reply must fit the context: the budget's count of the Skein is at
    least what the formatted text really takes."""
    count = bundled_llama_counter().count
    endpoint = services(llm, api="llamacpp", instruct_template="Llama 3 Instruct")
    result = await run_turn(llm, endpoint)
    out = result.interface_outputs
    skein = measure(Skein.model_validate(out["skein"]), count)
    templates = TemplateLibrary(None).templates_for(
        Settings.model_validate(
            {"user_llm": {"api": "llamacpp", "instruct_template": "Llama 3 Instruct"}}
        ).user_llm
    )
    cost = template_cost(templates, count)
    assert cost.per_message > CHAT_COST.per_message
    assert prompt_tokens(skein, cost) >= count(out["prompt"]["text"])
    assert prompt_tokens(skein) < count(out["prompt"]["text"])
