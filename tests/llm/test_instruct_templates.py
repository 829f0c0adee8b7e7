"""Instruct and context templates: SillyTavern's files as they are, and prompts as each
model's documented format writes them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from storyloom.core.errors import Conflict, FileFormatError, NotFound
from storyloom.core.settings import ChatEndpoint, Settings
from storyloom.llm.errors import LLMError
from storyloom.llm.instruct import (
    ContextTemplate,
    InstructTemplate,
    PromptTurn,
    TemplateLibrary,
    TextPrompt,
    builtin_context_templates,
    builtin_instruct_templates,
    format_prompt,
    messages_prompt,
    render_story_string,
    template_for_model,
    templates_of,
)

CHAT = [
    PromptTurn(role="user", content="Hi", source="message m1"),
    PromptTurn(role="assistant", content="Hello!", source="message m2"),
    PromptTurn(role="user", content="How are you?", source="message m3"),
]

# Each model's documented format for: system "Be nice.", user "Hi", assistant "Hello!",
# user "How are you?", then the open assistant turn (the server adds the BOS token).
DOCUMENTED = {
    "ChatML": "<|im_start|>system\nBe nice.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
    "<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nHow are you?<|im_end|>\n"
    "<|im_start|>assistant\n",
    "Qwen": "<|im_start|>system\nBe nice.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
    "<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nHow are you?<|im_end|>\n"
    "<|im_start|>assistant\n",
    "Llama 3 Instruct": "<|start_header_id|>system<|end_header_id|>\n\nBe nice.<|eot_id|>"
    "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
    "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
    "<|start_header_id|>user<|end_header_id|>\n\nHow are you?<|eot_id|>"
    "<|start_header_id|>assistant<|end_header_id|>\n\n",
    "Mistral V7": "[SYSTEM_PROMPT] Be nice.[/SYSTEM_PROMPT][INST] Hi[/INST] Hello!</s>"
    "[INST] How are you?[/INST] ",
    "Mistral V7-Tekken": "[SYSTEM_PROMPT]Be nice.[/SYSTEM_PROMPT][INST]Hi[/INST]Hello!</s>"
    "[INST]How are you?[/INST]",
    "Alpaca": "Be nice.\n\n### Instruction:\nHi\n\n### Response:\nHello!\n\n"
    "### Instruction:\nHow are you?\n\n### Response:\n",
    "Vicuna 1.1": "Be nice. USER: Hi ASSISTANT: Hello!</s>USER: How are you? ASSISTANT:",
    "Phi": "<|system|>\nBe nice.<|end|>\n<|user|>\nHi<|end|>\n<|assistant|>\nHello!<|end|>\n"
    "<|user|>\nHow are you?<|end|>\n<|assistant|>\n",
    "DeepSeek": "Be nice.<｜User｜>Hi<｜Assistant｜>Hello!<｜end▁of▁sentence｜>"
    "<｜User｜>How are you?<｜Assistant｜>",
    "Metharme": "<|system|>Be nice.<|user|>Hi<|model|>Hello!<|user|>How are you?<|model|>",
}

# Gemma has no system role; its documented chat without one.
GEMMA = (
    "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\nHello!<end_of_turn>\n"
    "<start_of_turn>user\nHow are you?<end_of_turn>\n<start_of_turn>model\n"
)

# A SillyTavern instruct file as SillyTavern 1.13+ ships ChatML, and its ChatML context.
ST_CHATML_INSTRUCT: dict[str, Any] = {
    "input_sequence": "<|im_start|>user",
    "output_sequence": "<|im_start|>assistant",
    "last_output_sequence": "",
    "system_sequence": "<|im_start|>system",
    "stop_sequence": "<|im_end|>",
    "wrap": True,
    "macro": True,
    "names_behavior": "force",
    "activation_regex": "",
    "first_output_sequence": "",
    "skip_examples": False,
    "output_suffix": "<|im_end|>\n",
    "input_suffix": "<|im_end|>\n",
    "system_suffix": "<|im_end|>\n",
    "user_alignment_message": "",
    "system_same_as_user": False,
    "last_system_sequence": "",
    "first_input_sequence": "",
    "last_input_sequence": "",
    "sequences_as_stop_strings": True,
    "story_string_prefix": "<|im_start|>system",
    "story_string_suffix": "<|im_end|>\n",
    "name": "ChatML",
}
ST_CHATML_CONTEXT: dict[str, Any] = {
    "story_string": "{{#if anchorBefore}}{{anchorBefore}}\n{{/if}}{{#if system}}{{system}}\n"
    "{{/if}}{{#if wiBefore}}{{wiBefore}}\n{{/if}}{{#if description}}{{description}}\n{{/if}}"
    "{{#if personality}}{{char}}'s personality: {{personality}}\n{{/if}}{{#if scenario}}"
    "Scenario: {{scenario}}\n{{/if}}{{#if wiAfter}}{{wiAfter}}\n{{/if}}{{#if persona}}"
    "{{persona}}\n{{/if}}{{#if anchorAfter}}{{anchorAfter}}\n{{/if}}{{trim}}",
    "example_separator": "",
    "chat_start": "",
    "use_stop_strings": False,
    "names_as_stop_strings": True,
    "story_string_position": 0,
    "story_string_depth": 1,
    "story_string_role": 0,
    "always_force_name2": True,
    "trim_sentences": False,
    "single_line": False,
    "name": "ChatML",
}


def pieces_cover(prompt: TextPrompt) -> bool:
    return "".join(prompt.text[p.start : p.end] for p in prompt.pieces) == prompt.text


@pytest.mark.parametrize("name", sorted(DOCUMENTED))
def test_every_builtin_formats_a_chat_as_its_model_documents(name: str) -> None:
    prompt = format_prompt(
        CHAT,
        builtin_instruct_templates()[name],
        builtin_context_templates()[name],
        user="Bob",
        char="Ann",
        story={"system": "Be nice."},
    )
    assert prompt.text == DOCUMENTED[name]
    assert pieces_cover(prompt)


def test_gemma_formats_a_chat_as_documented_and_the_system_text_as_a_user_turn() -> None:
    gemma = builtin_instruct_templates()["Gemma 2"]
    context = builtin_context_templates()["Gemma 2"]
    assert format_prompt(CHAT, gemma, context, user="Bob", char="Ann").text == GEMMA
    with_system = format_prompt(
        CHAT, gemma, context, user="Bob", char="Ann", story={"system": "Be nice."}
    )
    assert with_system.text == "<start_of_turn>user\nBe nice.<end_of_turn>\n" + GEMMA


def test_a_sillytavern_instruct_and_context_file_validate_unchanged_and_round_trip() -> None:
    instruct = InstructTemplate.model_validate(ST_CHATML_INSTRUCT)
    context = ContextTemplate.model_validate(ST_CHATML_CONTEXT)
    assert instruct.model_dump(mode="json") == ST_CHATML_INSTRUCT
    assert context.model_dump(mode="json") == ST_CHATML_CONTEXT
    # Keys storyloom does not use are kept.
    assert context.model_extra == {"always_force_name2": True, "trim_sentences": False}
    prompt = format_prompt(
        CHAT, instruct, context, user="Bob", char="Ann", story={"system": "Be nice."}
    )
    assert prompt.text == DOCUMENTED["ChatML"]


def test_an_older_sillytavern_instruct_file_is_migrated_as_sillytavern_migrates_it() -> None:
    old = InstructTemplate.model_validate(
        {
            "name": "Old Metharme",
            "input_sequence": "<|user|>",
            "output_sequence": "<|model|>",
            "separator_sequence": "",
            "system_sequence_prefix": "<|system|>",
            "names": True,
            "names_force_groups": True,
        }
    )
    assert old.names_behavior == "always"
    assert old.story_string_prefix == "<|system|>"
    assert "names" not in (old.model_extra or {})
    forced = InstructTemplate.model_validate({"names": False, "names_force_groups": True})
    assert forced.names_behavior == "force"
    none = InstructTemplate.model_validate({"names": False, "names_force_groups": False})
    assert none.names_behavior == "none"


def test_story_string_macros_render_sillytaverns_handlebars_subset() -> None:
    template = (
        "{{#if system}}{{system}}\n{{/if}}"
        "{{#if description}}{{description}}{{#if scenario}} in {{scenario}}{{/if}}\n"
        "{{else}}No description.\n{{/if}}"
        "{{#unless persona}}No persona.\n{{/unless}}"
        "{{! a comment }}{{loreBefore}}|{{nosuchfield}}|{{ char }}\n\n{{trim}}\n\n"
    )
    fields = {"description": "A cat", "scenario": "a garden", "wiBefore": "Lore", "char": "Ann"}
    assert render_story_string(template, fields) == ("A cat in a garden\nNo persona.\nLore||Ann")
    assert render_story_string(template, {}) == "No description.\nNo persona.\n||"
    assert render_story_string("\n\n{{#if a}}x{{/if}}y", {"a": " "}) == "y"


def test_the_default_context_uses_labels_separators_and_examples() -> None:
    prompt = format_prompt(
        [PromptTurn(role="user", content="Hi")],
        builtin_instruct_templates()["ChatML"],
        builtin_context_templates()["Default"],
        user="Bob",
        char="Ann",
        story={"description": "Ann is a cat.", "personality": "curious"},
        examples=[
            [PromptTurn(role="user", content="Meow?"), PromptTurn(role="assistant", content="Mrr.")]
        ],
    )
    assert prompt.text == (
        "<|im_start|>system\nAnn is a cat.\nAnn's personality: curious<|im_end|>\n"
        "***\n<|im_start|>user\nBob: Meow?<|im_end|>\n<|im_start|>assistant\nMrr.<|im_end|>\n"
        "***\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    )
    kinds = {p.source: p.kind for p in prompt.pieces}
    assert kinds["story string"] == "story_string"
    assert kinds["chat start"] == "separator"
    assert kinds["example 1"] == "example"
    assert pieces_cover(prompt)


def test_stop_strings_follow_the_template_without_duplicates_or_empties() -> None:
    alpaca = builtin_instruct_templates()["Alpaca"]
    default = builtin_context_templates()["Default"]
    with_markers = default.model_copy(update={"use_stop_strings": True})
    prompt = format_prompt(CHAT, alpaca, with_markers, user="Bob", char="Ann")
    assert prompt.stop == [
        "### Instruction:",
        "### Response:",
        "### Input:",
        "\n***",
        "\nBob:",
    ]
    chatml = builtin_instruct_templates()["ChatML"].model_copy(
        update={"sequences_as_stop_strings": False}
    )
    quiet = default.model_copy(update={"names_as_stop_strings": False})
    assert format_prompt(CHAT, chatml, quiet, user="Bob", char="Ann").stop == ["<|im_end|>"]
    group = [*CHAT, PromptTurn(role="assistant", content="Meow", name="Cat")]
    stops = format_prompt(group, chatml, default, user="Bob", char="Ann").stop
    assert stops == ["<|im_end|>", "\nBob:", "\nCat:"]


def test_names_first_last_sequences_and_the_user_alignment_message() -> None:
    template = builtin_instruct_templates()["ChatML"].model_copy(
        update={
            "names_behavior": "always",
            "first_output_sequence": "<|im_start|>assistant first",
            "last_input_sequence": "<|im_start|>user last",
            "user_alignment_message": "Let's start, {{char}}.",
        }
    )
    turns = [
        PromptTurn(role="assistant", content="Welcome."),
        PromptTurn(role="user", content="Hi"),
        PromptTurn(role="system", content="Night falls."),
    ]
    prompt = format_prompt(
        turns, template, builtin_context_templates()["ChatML"], user="Bob", char="Ann"
    )
    assert prompt.text == (
        "<|im_start|>user\nBob: Let's start, Ann.<|im_end|>\n"
        "<|im_start|>assistant first\nAnn: Welcome.<|im_end|>\n"
        "<|im_start|>user last\nBob: Hi<|im_end|>\n"
        "<|im_start|>system\nNight falls.<|im_end|>\n"
        "<|im_start|>assistant\nAnn:"
    )


def test_the_story_string_can_sit_in_the_chat_at_a_depth() -> None:
    context = builtin_context_templates()["ChatML"].model_copy(
        update={"story_string_position": 1, "story_string_depth": 1, "story_string_role": 0}
    )
    prompt = format_prompt(
        CHAT,
        builtin_instruct_templates()["ChatML"],
        context,
        user="Bob",
        char="Ann",
        story={"system": "Be nice."},
    )
    assert prompt.text == (
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n"
        "<|im_start|>system\nBe nice.<|im_end|>\n"
        "<|im_start|>user\nHow are you?<|im_end|>\n<|im_start|>assistant\n"
    )


def test_model_names_pick_their_template() -> None:
    assert template_for_model("Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf") == "Llama 3 Instruct"
    assert template_for_model("mistral-small-24b-instruct-2501") == "Mistral V7-Tekken"
    assert template_for_model("Mistral-Large-Instruct-2411") == "Mistral V7"
    assert template_for_model("gemma-3-12b-it") == "Gemma 2"
    assert template_for_model("Qwen2.5-7B-Instruct") == "Qwen"
    assert template_for_model("Phi-3.5-mini-instruct") == "Phi"
    assert template_for_model("DeepSeek-R1-Distill-Qwen-7B") == "DeepSeek"
    assert template_for_model("smollm2-135m-instruct") == "ChatML"
    assert template_for_model("some-unknown-model") == "ChatML"


def test_messages_become_a_prompt_with_leading_system_messages_as_the_story() -> None:
    endpoint = ChatEndpoint(api="text", base_url="http://127.0.0.1:9/v1", model="smollm2")
    prompt = messages_prompt(
        [
            {"role": "system", "content": "Summarise."},
            {"role": "user", "content": [{"type": "text", "text": "A long story."}]},
        ],
        endpoint,
    )
    assert prompt.text == (
        "<|im_start|>system\nSummarise.<|im_end|>\n<|im_start|>user\nA long story.<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    assert "<|im_end|>" in prompt.stop


def write(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_the_library_imports_files_that_win_over_builtins_and_deletes_them(
    tmp_path: Path,
) -> None:
    library = TemplateLibrary(tmp_path / "home")
    mine = dict(ST_CHATML_INSTRUCT, stop_sequence="<|im_end|>\n<|endoftext|>")
    kind, name = library.import_file(write(tmp_path / "ChatML.json", mine))
    assert (kind, name) == ("instruct", "ChatML")
    stored = json.loads((tmp_path / "home" / "instruct" / "ChatML.json").read_text())
    assert stored == mine
    assert library.instruct("ChatML").stop_sequence == "<|im_end|>\n<|endoftext|>"
    assert library.import_file(write(tmp_path / "x.json", ST_CHATML_CONTEXT)) == (
        "context",
        "ChatML",
    )
    library.delete("instruct", "ChatML")
    assert library.instruct("ChatML").stop_sequence == "<|im_end|>"
    with pytest.raises(Conflict, match="built in"):
        library.delete("instruct", "ChatML")


def test_the_library_saves_lists_and_names_what_it_cannot_find(tmp_path: Path) -> None:
    library = TemplateLibrary(tmp_path)
    library.save("context", ContextTemplate(name="My story", chat_start="---"))
    assert "My story" in library.names("context")
    assert "Default" in library.names("context")
    assert library.context("My story").chat_start == "---"
    assert "Llama 3 Instruct" in library.names("instruct")
    with pytest.raises(NotFound, match=r"'Nope'.*built-in templates and .*instruct"):
        library.instruct("Nope")


def test_a_bad_file_is_refused_naming_the_file_and_field(tmp_path: Path) -> None:
    library = TemplateLibrary(tmp_path / "home")
    bad = write(tmp_path / "bad.json", dict(ST_CHATML_INSTRUCT, names_behavior="sometimes"))
    with pytest.raises(FileFormatError) as caught:
        library.import_file(bad)
    assert str(bad) in str(caught.value)
    assert "names_behavior" in str(caught.value)
    with pytest.raises(FileFormatError, match="neither an instruct template"):
        library.import_file(write(tmp_path / "other.json", {"temperature": 1}))
    assert not (tmp_path / "home" / "instruct").exists()


def test_resolve_attaches_the_named_or_picked_templates(tmp_path: Path) -> None:
    library = TemplateLibrary(tmp_path)
    library.import_file(
        write(
            tmp_path / "mine.json",
            dict(ST_CHATML_INSTRUCT, name="Mine", activation_regex="/my-model/i"),
        )
    )
    picked = library.resolve(ChatEndpoint(api="llamacpp", model="MY-MODEL-7b"))
    assert templates_of(picked).instruct.name == "Mine"
    assert templates_of(picked).context.name == "Default"
    llama = library.resolve(ChatEndpoint(api="koboldcpp", model="llama-3-8b"))
    assert templates_of(llama).instruct.name == "Llama 3 Instruct"
    assert templates_of(llama).context.name == "Llama 3 Instruct"
    named = library.resolve(
        ChatEndpoint(api="text", instruct_template="Alpaca", context_template="Minimalist")
    )
    assert (templates_of(named).instruct.name, templates_of(named).context.name) == (
        "Alpaca",
        "Minimalist",
    )
    chat = ChatEndpoint(api="chat", model="llama-3")
    assert library.resolve(chat) is chat


def test_settings_resolve_both_roles_and_a_missing_template_fails_only_on_use(
    tmp_path: Path,
) -> None:
    settings = Settings(
        user_llm=ChatEndpoint(api="llamacpp", base_url="http://127.0.0.1:9", model="gemma-2"),
        agent_llm=ChatEndpoint(api="text", model="x", instruct_template="Gone"),
    )
    resolved = TemplateLibrary(tmp_path).resolve_settings(settings)
    assert templates_of(resolved.user_llm).instruct.name == "Gemma 2"
    with pytest.raises(LLMError) as caught:
        messages_prompt([{"role": "user", "content": "hi"}], resolved.agent_llm)
    assert caught.value.kind == "not_configured"
    assert "'Gone'" in caught.value.message
