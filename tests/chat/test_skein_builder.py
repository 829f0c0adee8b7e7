"""The Skein Builder lays a snapshot out as SillyTavern's chat-completion prompt manager."""

from __future__ import annotations

from typing import Any

from storyloom.chat.prompt.prompt_ast import run_prompt_ast
from storyloom.chat.prompt.skein import BlockKind, Skein, SkeinBlock
from storyloom.chat.prompt.skein_builder import (
    FULL,
    PresetPrompt,
    PromptOrderEntry,
    SkeinOptions,
    build_skein,
    split_examples,
)
from storyloom.chat.store.conversation import (
    BackgroundSnapshot,
    CharacterSnapshot,
    ConversationSettings,
)
from storyloom.chat.store.snapshot import (
    ContextSnapshot,
    HistoryMessage,
    LoreHit,
    LoreRecord,
    RagHit,
)
from storyloom.chat.store.state import ChatState, PlotState

CARD: dict[str, Any] = {
    "name": "Seraphina",
    "description": "{{char}} is a guardian of the forest.",
    "personality": "kind, protective",
    "scenario": "{{user}} wakes in {{char}}'s glade.",
    "mes_example": (
        "<START>\n{{user}}: Who are you?\n{{char}}: I am Seraphina.\n"
        "<START>\n{{user}}: Where am I?\n{{char}}: In my glade."
    ),
    "system_prompt": "",
    "post_history_instructions": "",
    "extensions": {},
}


def history(*turns: tuple[str, str]) -> list[HistoryMessage]:
    return [
        HistoryMessage(id=f"m{n}", role=role, name="", content=text)
        for n, (role, text) in enumerate(turns)
    ]


def snapshot(**changes: Any) -> ContextSnapshot:
    card = {**CARD, **changes.pop("card", {})}
    # These tests pin SillyTavern's layout, which has no format guide (its own tests are
    # in test_format_guide.py).
    settings = ConversationSettings(**{"format_guide": "off", **changes.pop("settings", {})})
    values: dict[str, Any] = {
        "conversation_id": "c1",
        "pointer": "m2",
        "history": history(
            ("assistant", "Welcome, traveller."),
            ("user", "Hello!"),
            ("assistant", "You are safe here."),
            ("user", "Thank you."),
        ),
        "state": ChatState(variables={"hp": 10}),
        "character": CharacterSnapshot(source_preset="seraphina", card=card),
        "settings": settings,
    }
    values.update(changes)
    return ContextSnapshot(**values)


def lore(entry_id: str, placement: str, **extra: Any) -> LoreHit:
    extra.setdefault("kb_id", "kb")
    return LoreHit(
        entry_id=entry_id,
        title=entry_id,
        content=f"lore {entry_id}",
        placement=placement,
        **extra,
    )


def ids(skein: Skein) -> list[str]:
    return [block.id for block in skein.blocks]


def block(skein: Skein, block_id: str) -> SkeinBlock:
    return next(b for b in skein.blocks if b.id == block_id)


def test_default_layout_follows_sillytavern_default_preset_order() -> None:
    skein = build_skein(
        snapshot(
            settings={"persona": "A wandering bard."},
            lore=[lore("before", "before_character"), lore("after", "after_character")],
        )
    )
    assert ids(skein) == [
        "main",
        "lore:kb/before",
        "personaDescription",
        "charDescription",
        "charPersonality",
        "scenario",
        "lore:kb/after",
        "example:1",
        "example:2",
        "newMainChat",
        "msg:m0",
        "msg:m1",
        "msg:m2",
        "msg:m3",
    ]
    main = block(skein, "main")
    assert main.content.startswith("Write {{char}}'s next reply")
    assert main.source.label == "Preset: Main Prompt"
    assert block(skein, "charDescription").content == CARD["description"]
    assert block(skein, "newMainChat").content == "[Start a new Chat]"
    assert skein.variables == {"hp": 10}
    assert skein.model_extra is not None
    assert skein.model_extra["char_name"] == "Seraphina"
    assert skein.model_extra["user_name"] == "User"


def test_every_block_names_its_source_for_a_person() -> None:
    skein = build_skein(
        snapshot(
            settings={"persona": "A bard.", "authors_note": "Keep it short."},
            lore=[lore("a", "at_depth", depth=2)],
            summaries=["They met."],
            rag=[RagHit(id="r1", content="A memory.", score=0.8, source="c0")],
        )
    )
    for item in skein.blocks:
        assert item.source.label, item.id
    assert block(skein, "msg:m1").source.label == "Message 1 (user)"
    assert block(skein, "msg:m1").source.id == "m1"
    assert block(skein, "lore:kb/a").source.id == "kb/a"
    assert block(skein, "authorsNote").source.label == "Author's note"


def test_every_block_source_says_its_label_as_structure_for_the_page_language() -> None:
    skein = build_skein(
        snapshot(
            settings={"persona": "A bard.", "user_name": "Ann", "authors_note": "Short."},
            lore=[lore("a", "before_character", kb_name="Eldoria")],
            summaries=["They met."],
            rag=[RagHit(id="r1", content="A memory.", score=0.8, source="c0")],
        ),
        SkeinOptions(
            prompts=[PresetPrompt(identifier="nsfw", name="My rules", content="Be bold.")]
        ),
    )
    for item in skein.blocks:
        assert item.source.what is not None, item.id
    sources = {b.id: (b.source.what, b.source.values) for b in skein.blocks}
    # SillyTavern's own name of a built-in prompt is no name the user gave: none is sent.
    assert sources["main"] == ("preset_prompt", {"prompt": "main", "name": ""})
    assert sources["nsfw"] == ("preset_prompt", {"prompt": "nsfw", "name": "My rules"})
    assert block(skein, "nsfw").source.label == "Preset: My rules"
    assert sources["msg:m1"] == ("message", {"number": 1, "role": "user", "speaker": ""})
    assert sources["lore:kb/a"] == (
        "lore",
        {"book": "Eldoria", "title": "a", "placement": "before_character"},
    )
    assert sources["personaDescription"] == ("persona", {"name": "Ann"})
    assert sources["example:2"] == ("card_example", {"n": 2, "total": 2})
    assert sources["charDescription"] == ("card_description", {})
    assert sources["rag:r1"] == ("rag", {"source": "c0", "score": 0.8})
    assert sources["summary:1"] == ("summary", {"n": 1})
    assert sources["authorsNote"] == ("authors_note", {})


def test_a_lore_block_names_its_book_by_name_and_by_id_only_when_it_has_none() -> None:
    named = lore("a", "before_character", kb_id="kb_7f3a", kb_name="Eldoria")
    skein = build_skein(snapshot(lore=[named, lore("b", "after_character")]))
    label = block(skein, "lore:kb_7f3a/a").source.label
    assert label == "Lore: Eldoria / a (before character)"
    assert "kb_7f3a" not in label
    # A snapshot stored before books had names in it: the id is all there is.
    assert block(skein, "lore:kb/b").source.label == "Lore: kb / b (after character)"


def test_card_system_prompt_and_post_history_replace_the_presets_keeping_the_original() -> None:
    skein = build_skein(
        snapshot(
            card={
                "system_prompt": "You are {{char}}. {{original}}",
                "post_history_instructions": "Stay in character.",
            }
        )
    )
    main = block(skein, "main")
    assert main.content == "You are {{char}}. {{original}}"
    assert main.model_extra is not None
    assert main.model_extra["original"].startswith("Write {{char}}'s next reply")
    assert main.source.kind == "character"
    assert main.source.field == "system_prompt"
    jailbreak = block(skein, "jailbreak")
    assert jailbreak.kind is BlockKind.POST_HISTORY
    assert ids(skein)[-1] == "jailbreak"  # after the history, as in the default order


def test_forbid_overrides_keeps_the_presets_main_prompt() -> None:
    main = PresetPrompt(
        identifier="main",
        name="Main",
        content="Preset main.",
        system_prompt=True,
        forbid_overrides=True,
    )
    skein = build_skein(
        snapshot(card={"system_prompt": "Card main."}), SkeinOptions(prompts=[main])
    )
    assert block(skein, "main").content == "Preset main."


def test_lore_goes_where_sillytavern_puts_each_world_info_position() -> None:
    hits = [
        lore("before", "before_character"),
        lore("prompt", "before_prompt"),
        lore("after", "after_character"),
        lore("em_top", "examples_top"),
        lore("em_bottom", "examples_bottom"),
        lore("an_top", "authors_note_top"),
        lore("an_bottom", "authors_note_bottom"),
        lore("deep", "at_depth", depth=1, role="user"),
        lore("outlet", "outlet", outlet_name="weather"),
    ]
    skein = build_skein(
        snapshot(lore=hits, settings={"authors_note": "Note.", "authors_note_depth": 3})
    )
    order = ids(skein)
    assert order.index("main") < order.index("lore:kb/before") < order.index("charDescription")
    assert order.index("lore:kb/prompt") < order.index("charDescription")
    assert order.index("scenario") < order.index("lore:kb/after") < order.index("example:1")
    assert order.index("lore:kb/em_top") < order.index("example:1")
    assert order.index("example:2") < order.index("lore:kb/em_bottom") < order.index("msg:m0")
    # world info before/after are each one message in SillyTavern: one group each
    before = block(skein, "lore:kb/before").model_extra
    assert before is not None and before["group"] == "worldInfoBefore"
    # author's note with its lore, in chat at the note's depth, top → note → bottom
    in_chat = [b for b in skein.blocks if b.depth is not None]
    assert [b.id for b in in_chat] == [
        "lore:kb/an_top",
        "authorsNote",
        "lore:kb/an_bottom",
        "lore:kb/deep",
    ]
    assert [b.depth for b in in_chat] == [3, 3, 3, 1]
    assert block(skein, "lore:kb/deep").role == "user"
    assert order.index("msg:m3") < order.index("lore:kb/an_top")
    assert skein.model_extra is not None
    assert skein.model_extra["outlets"] == {"weather": "lore outlet"}
    assert "lore:kb/outlet" not in order


def test_lore_priority_follows_the_entry_priority_and_stays_above_history() -> None:
    skein = build_skein(
        snapshot(
            lore=[
                lore("low", "before_character", priority=0),
                lore("high", "before_character", priority=300),
            ]
        )
    )
    low, high = block(skein, "lore:kb/low"), block(skein, "lore:kb/high")
    history_priorities = [b.priority for b in skein.blocks if b.kind is BlockKind.HISTORY]
    assert low.priority < high.priority < FULL
    assert max(p for p in history_priorities if p < FULL) < low.priority


def test_examples_are_split_at_each_start_marker() -> None:
    assert split_examples("<START>\nA: hi\n<start>\r\nB: yo\n<START>\n\n") == [
        "A: hi",
        "B: yo",
    ]
    skein = build_skein(snapshot())
    first = block(skein, "example:1")
    assert first.kind is BlockKind.EXAMPLES
    assert first.content == "{{user}}: Who are you?\n{{char}}: I am Seraphina."
    assert first.model_extra is not None
    assert first.model_extra["header"] == "[Example Chat]"
    assert first.source.label == "Card: example dialogue 1 of 2"
    # SillyTavern fills the history before the examples: later dialogues go first
    assert block(skein, "example:2").priority < first.priority < block(skein, "msg:m1").priority


def test_history_priority_rises_with_recency_and_the_newest_user_message_is_kept() -> None:
    skein = build_skein(snapshot())
    messages = [b for b in skein.blocks if b.kind is BlockKind.HISTORY]
    assert [b.role for b in messages] == ["assistant", "user", "assistant", "user"]
    assert messages[-1].priority == FULL  # the newest user message is never cut
    older = [b.priority for b in messages[:-1]]
    assert older == sorted(older)
    assert older[0] < older[1] < older[2] < FULL
    assert all(b.message_id == b.id.removeprefix("msg:") for b in messages)


def test_character_note_and_authors_note_are_in_chat_at_their_depths() -> None:
    skein = build_skein(
        snapshot(
            card={
                "extensions": {
                    "depth_prompt": {
                        "prompt": "Remember the oath.",
                        "depth": 2,
                        "role": "assistant",
                    }
                }
            },
            settings={"authors_note": "[Tone: gentle]", "authors_note_depth": 4},
        )
    )
    note = block(skein, "characterNote")
    assert (note.depth, note.role, note.content) == (2, "assistant", "Remember the oath.")
    assert note.source.label == "Card: character note"
    authors = block(skein, "authorsNote")
    assert (authors.depth, authors.role, authors.kind) == (4, "system", BlockKind.AUTHORS_NOTE)


def test_director_guidance_comes_from_the_plot_state() -> None:
    background = BackgroundSnapshot(
        name="Forest",
        world_setting="An ancient forest.",
        story_outline=[
            {"index": 1, "content": "Meet the guardian"},
            {"index": 2, "content": "Find the spring"},
        ],
    )
    plot = PlotState(current_plot_index=2, no_update_count=0)
    skein = build_skein(snapshot(background=background, state=ChatState(plot=plot)))
    director = block(skein, "director")
    assert director.kind is BlockKind.DIRECTOR
    assert "Find the spring" in director.content
    assert director.depth == 0
    assert director.source.label == "Director: outline point 2"
    setting = block(skein, "worldSetting")
    assert setting.content == "An ancient forest."
    assert setting.source.kind == "background"
    assert ids(skein).index("scenario") < ids(skein).index("worldSetting")

    firm = build_skein(
        snapshot(
            background=background,
            state=ChatState(plot=plot.model_copy(update={"no_update_count": 3})),
        )
    )
    assert block(firm, "director").content != director.content

    silent = build_skein(
        snapshot(
            background=background, state=ChatState(plot=plot), settings={"director_enabled": False}
        )
    )
    assert "director" not in ids(silent)
    assert "director" not in ids(build_skein(snapshot(background=background)))


def test_summaries_and_memories_follow_the_main_prompt_as_groups() -> None:
    skein = build_skein(
        snapshot(
            summaries=["They met in the glade.", "She healed him."],
            rag=[RagHit(id="r1", content="He fears wolves.", score=0.91, source="chat-7")],
        )
    )
    assert ids(skein)[:4] == ["main", "summary:1", "summary:2", "rag:r1"]
    summary = block(skein, "summary:1")
    assert summary.kind is BlockKind.SUMMARY
    assert summary.model_extra is not None and summary.model_extra["group"] == "summary"
    rag = block(skein, "rag:r1")
    assert rag.kind is BlockKind.RAG
    assert rag.source.label == "Memory from chat-7 (score 0.91)"


def test_custom_prompts_go_in_order_or_in_chat_and_disabled_ones_are_left_out() -> None:
    prompts = [
        PresetPrompt(identifier="style", name="Style", content="Write vividly."),
        PresetPrompt(
            identifier="nudge",
            name="Nudge",
            role="user",
            content="(Be brief.)",
            injection_position=1,
            injection_depth=1,
            injection_order=50,
        ),
        PresetPrompt(identifier="off", name="Off", content="Never sent."),
    ]
    order = [
        PromptOrderEntry(identifier="main"),
        PromptOrderEntry(identifier="style"),
        PromptOrderEntry(identifier="chatHistory"),
        PromptOrderEntry(identifier="nudge"),
        PromptOrderEntry(identifier="off", enabled=False),
        PromptOrderEntry(identifier="missing"),
    ]
    skein = build_skein(snapshot(), SkeinOptions(prompts=prompts, prompt_order=order))
    assert ids(skein) == [
        "main",
        "style",
        "newMainChat",
        "msg:m0",
        "msg:m1",
        "msg:m2",
        "msg:m3",
        "nudge",
    ]
    nudge = block(skein, "nudge")
    assert (nudge.depth, nudge.role, nudge.kind) == (1, "user", BlockKind.CUSTOM)
    assert nudge.model_extra is not None and nudge.model_extra["injection_order"] == 50
    assert block(skein, "style").source.label == "Preset: Style"
    assert any("'missing'" in warning for warning in skein.warnings)


def test_continue_and_impersonate_add_sillytaverns_nudges() -> None:
    cont = build_skein(snapshot(generation="continue"))
    assert ids(cont)[ids(cont).index("msg:m3") + 1] == "continueNudge"
    imp = build_skein(snapshot(generation="impersonate"))
    assert ids(imp)[-1] == "impersonate"
    assert "continueNudge" not in ids(build_skein(snapshot()))


def test_lore_report_and_personas_are_carried_over() -> None:
    record = LoreRecord(kb_id="kb", entry_id="x", title="X", activated=False)
    skein = build_skein(
        snapshot(
            lore_report=[record],
            character=CharacterSnapshot(
                card={"name": "Ada"}, base_persona="A scholar.", evolved_persona="Now trusts you."
            ),
        )
    )
    assert skein.lore == [record]
    assert block(skein, "charDescription").content == "A scholar."
    assert block(skein, "charDescription").source.field == "base_persona"
    evolved = block(skein, "evolvedPersona")
    assert evolved.content == "Now trusts you."
    assert ids(skein).index("charDescription") < ids(skein).index("evolvedPersona")


def test_empty_history_still_gets_the_new_chat_line_and_nothing_empty() -> None:
    skein = build_skein(snapshot(history=[], card={"personality": "", "mes_example": ""}))
    assert ids(skein) == ["main", "charDescription", "scenario", "newMainChat"]
    assert all(b.content.strip() for b in skein.blocks)


def test_a_preset_prompt_with_a_condition_is_sent_only_while_it_holds() -> None:
    prompts = [PresetPrompt(identifier="hurt", content="{{char}} is wounded.", condition="hp < 30")]
    order = [PromptOrderEntry(identifier="hurt"), PromptOrderEntry(identifier="chatHistory")]
    options = SkeinOptions(prompts=prompts, prompt_order=order)
    for hp, sent in ((50, False), (10, True)):
        shot = snapshot(state=ChatState(variables={"hp": hp}))
        out = run_prompt_ast(build_skein(shot, options), shot)
        assert ("hurt" in ids(out)) is sent


def test_a_hash_if_that_is_no_state_condition_is_sillytaverns_if_in_the_prompt() -> None:
    # SillyTavern reads {{#if yes}} as its {{if}} macro with the keep-whitespace flag:
    # "yes" is true text, the body keeps its spaces. storyloom's own conditions (the
    # chat's variables, comparisons) still choose their branch.
    card = {
        "description": (
            "A{{#if yes}}\n  kept  \n{{/if}}B {{#if !yes}}gone{{/if}}"
            " {{#if description}}has one{{/if}} {{#if hp < 30}}hurt{{else}}well{{/if}}"
            " {{#if .calm}}calm{{else}}restless{{/if}}"
        )
    }
    shot = snapshot(card=card)
    out = run_prompt_ast(build_skein(shot), shot)
    assert block(out, "charDescription").content == "A\n  kept  \nB  has one hurt restless"
    assert not out.warnings
