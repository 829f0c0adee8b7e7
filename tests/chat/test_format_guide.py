"""The format guide: the model is told the Filament format and shown the state, in the
chat's language, as its own block just before the latest message; a card with its own
update rules keeps them, and the chat or the card can turn it off or replace it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from storyloom.chat.prompt.preset_pipeline import import_st_preset
from storyloom.chat.prompt.skein import BlockKind, Skein, SkeinBlock
from storyloom.chat.prompt.skein_builder import SkeinOptions, build_skein
from storyloom.chat.store.snapshot import ContextSnapshot
from storyloom.chat.store.state import ChatState
from tests.chat.test_skein_builder import history
from tests.chat.test_skein_builder import snapshot as layout_snapshot

PRESET = (
    Path(__file__).resolve().parents[1]
    / "fixtures"
    / "sillytavern"
    / "preset_seaside_chat_completion.json"
)


def snapshot(**changes: Any) -> ContextSnapshot:
    settings = {"format_guide": "auto", **changes.pop("settings", {})}
    return layout_snapshot(settings=settings, **changes)


def guide_block(skein: Skein) -> SkeinBlock | None:
    found = [b for b in skein.blocks if b.kind is BlockKind.FORMAT]
    assert len(found) <= 1
    return found[0] if found else None


def test_the_default_prompt_teaches_the_format_and_shows_the_state() -> None:
    skein = build_skein(snapshot(state=ChatState(variables={"hp": 10, "room": "attic"})))
    guide = guide_block(skein)
    assert guide is not None
    assert guide.depth == 1 and guide.role == "system"
    assert guide.source.label == "Format guide (built in)"
    for tag in ("<thought>", "<state_update>", "<set key=", "<reply>"):
        assert tag in guide.content
    assert 'Tracked state now: {"hp": 10, "room": "attic"}' in guide.content


def test_a_new_chat_is_told_there_is_no_state_yet() -> None:
    guide = guide_block(build_skein(snapshot(state=ChatState())))
    assert guide is not None and guide.content.endswith("Tracked state now: nothing yet")


def test_a_chinese_chat_gets_the_guide_in_chinese() -> None:
    card = {"description": "青禾是茶馆的掌柜，性子温和。", "first_mes": "客官请坐，喝杯茶吧。"}
    chat = history(("assistant", "客官请坐。"), ("user", "来一壶龙井。"))
    guide = guide_block(build_skein(snapshot(card=card, history=chat)))
    assert guide is not None and guide.content.startswith("[回答格式]")
    assert "当前记录的状态" in guide.content


def test_a_card_with_its_own_update_rules_keeps_them_unless_the_chat_says_on() -> None:
    mvu = {"post_history_instructions": "Update variables in <UpdateVariable> blocks."}
    assert guide_block(build_skein(snapshot(card=mvu))) is None
    forced = build_skein(snapshot(card=mvu, settings={"format_guide": "on"}))
    assert guide_block(forced) is not None


def test_the_card_can_turn_it_off_or_bring_its_own_text() -> None:
    off = {"extensions": {"storyloom": {"format_guide": False}}}
    assert guide_block(build_skein(snapshot(card=off))) is None
    own = {"extensions": {"storyloom": {"format_guide": "Stats: {state}. Update them."}}}
    guide = guide_block(build_skein(snapshot(card=own)))
    assert guide is not None and guide.content == 'Stats: {"hp": 10}. Update them.'
    assert guide.source.kind == "character" and guide.source.id == "seraphina"


def test_the_chat_can_turn_it_off_or_replace_it() -> None:
    assert guide_block(build_skein(snapshot(settings={"format_guide": "off"}))) is None
    own = build_skein(snapshot(settings={"format_guide_text": "Track: {state}"}))
    guide = guide_block(own)
    assert guide is not None and guide.content == 'Track: {"hp": 10}'
    assert guide.source.field == "settings.format_guide_text"


def test_the_pipeline_switch_and_an_imported_preset_leave_it_out() -> None:
    assert guide_block(build_skein(snapshot(), SkeinOptions(format_guide=False))) is None
    workflow = import_st_preset(PRESET)
    builder = next(n for n in workflow.nodes if n.id == "builder")
    assert builder.config["format_guide"] is False
