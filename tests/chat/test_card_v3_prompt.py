"""Character Card V3 in the prompt: the nickname stands for the character, and comments
and hidden keys never reach the model (a hidden key still activates lore)."""

from __future__ import annotations

from typing import Any

from storyloom.chat.prompt.macros import MacroContext, expand_macros
from storyloom.chat.prompt.prompt_ast import run_prompt_ast
from storyloom.chat.prompt.skein_builder import build_skein
from storyloom.chat.prompt.weaver import weave
from storyloom.chat.store.conversation import CharacterSnapshot, ConversationSettings, card_macros
from storyloom.chat.store.snapshot import ContextSnapshot, HistoryMessage, LoreHit
from storyloom.chat.store.state import ChatState
from storyloom.knowledge.activation import ActivationEngine, ActivationRequest, ScanMessage
from storyloom.knowledge.caiu import CAIU, ActivationCriteria, Content
from storyloom.knowledge.knowledge_base import KnowledgeBase


def context_for(card: dict[str, Any]) -> MacroContext:
    values = card_macros(CharacterSnapshot(card=card), ConversationSettings(user_name="Ann"))
    return MacroContext(**values)


def test_the_nickname_replaces_char_and_the_legacy_char_and_bot_tokens() -> None:
    ctx = context_for({"name": "Seraphina Evergreen", "nickname": "Sera"})
    text = "{{char}} waves. <BOT> smiles; <char> nods at <user>. {{user}} waves back."
    assert expand_macros(text, ctx) == "Sera waves. Sera smiles; Sera nods at Ann. Ann waves back."


def test_without_a_nickname_the_name_is_used() -> None:
    for card in ({"name": "Seraphina"}, {"name": "Seraphina", "nickname": "  "}):
        assert expand_macros("{{char}} and <bot>", context_for(card)) == "Seraphina and Seraphina"


def test_comments_and_hidden_keys_never_reach_the_prompt() -> None:
    ctx = context_for({"name": "Seraphina"})
    text = "A{{comment: a note for readers}}B{{hidden_key: cave, lair}}C{{COMMENT:x}}D"
    assert expand_macros(text, ctx) == "ABCD"


def test_a_hidden_key_activates_lore_by_recursion_and_is_not_injected() -> None:
    dragon = CAIU(
        id="dragon",
        content=Content(value="The dragon sleeps.{{hidden_key: cave}}"),
        activation_criteria=ActivationCriteria(keywords=["dragon"]),
    )
    cave = CAIU(
        id="cave",
        content=Content(value="The cave is deep."),
        activation_criteria=ActivationCriteria(keywords=["cave"]),
    )
    engine = ActivationEngine(
        [KnowledgeBase(kb_id="kb", entries=[dragon, cave])],
        count_tokens=lambda text: len(text.split()),
    )
    result = engine.activate(ActivationRequest(messages=[ScanMessage("Ann", "a dragon!")]))
    assert {item.entry_id for item in result.activated} == {"dragon", "cave"}
    injected = {item.entry_id: item.text for item in result.activated}
    ctx = context_for({"name": "Seraphina"})
    assert expand_macros(injected["dragon"], ctx) == "The dragon sleeps."


def test_a_nickname_card_prompt_names_the_nickname_and_keeps_example_turns() -> None:
    card = {
        "name": "Seraphina Evergreen",
        "nickname": "Sera",
        "description": "{{char}} guards the forest.{{comment: written for v3}}",
        "mes_example": "<START>\n{{user}}: Who are you?\n<BOT>: I am {{char}}.",
        "extensions": {},
    }
    snapshot = ContextSnapshot(
        conversation_id="c1",
        pointer="m0",
        history=[HistoryMessage(id="m0", role="user", name="", content="Hello!")],
        character=CharacterSnapshot(card=card),
        settings=ConversationSettings(user_name="Ann"),
        state=ChatState(),
        lore=[
            LoreHit(
                kb_id="kb",
                entry_id="e",
                title="e",
                content="{{char}} knows the glade.{{hidden_key: glade, grove}}",
                placement="before_character",
            )
        ],
    )
    messages = weave(run_prompt_ast(build_skein(snapshot), snapshot))
    text = "\n".join(str(m["content"]) for m in messages)
    assert "Sera guards the forest." in text
    assert "Sera knows the glade." in text
    assert "Seraphina" not in text and "comment" not in text and "hidden_key" not in text
    examples = [m for m in messages if m.get("name") in ("example_user", "example_assistant")]
    assert [(m["name"], m["content"]) for m in examples] == [
        ("example_user", "Who are you?"),
        ("example_assistant", "I am Sera."),
    ]
