"""The Token Budget measures every block and cuts by priority: examples, then the oldest
history, then the least important lore; never what must be sent."""

from __future__ import annotations

from typing import Any

from storyloom.chat.prompt.skein import BlockKind, Skein
from storyloom.chat.prompt.skein_builder import build_skein
from storyloom.chat.prompt.token_budget import apply_budget, measure, prompt_tokens
from storyloom.chat.store.conversation import CharacterSnapshot, ConversationSettings
from storyloom.chat.store.snapshot import ContextSnapshot, HistoryMessage, LoreHit, LoreRecord
from storyloom.chat.store.state import ChatState
from storyloom.llm.tokens import TOKENS_PER_MESSAGE, TOKENS_REPLY_PRIMER, token_counter


def words(text: str) -> int:
    """A counter a test can reason about: one token per word."""
    return len(text.split())


def turn_snapshot(**changes: Any) -> ContextSnapshot:
    messages = [
        HistoryMessage(
            id=f"m{n}",
            role="user" if n % 2 else "assistant",
            content=" ".join([f"w{n}"] * 20),
        )
        for n in range(6)
    ]
    values: dict[str, Any] = {
        "conversation_id": "c",
        "pointer": "m5",
        "history": messages,
        "state": ChatState(),
        "character": CharacterSnapshot(
            card={
                "name": "Ada",
                "description": "Ada is a scholar.",
                "mes_example": "<START>\n{{user}}: hi\n{{char}}: hello there friend",
            }
        ),
        "settings": ConversationSettings(),
        "lore": [
            LoreHit(
                kb_id="kb",
                entry_id="minor",
                content="minor " * 10,
                placement="after_character",
                priority=10,
            ),
            LoreHit(
                kb_id="kb",
                entry_id="major",
                content="major " * 10,
                placement="after_character",
                priority=200,
            ),
        ],
        "lore_report": [
            LoreRecord(kb_id="kb", entry_id="minor"),
            LoreRecord(kb_id="kb", entry_id="major"),
        ],
    }
    values.update(changes)
    return ContextSnapshot(**values)


def total(skein: Skein) -> int:
    return prompt_tokens(skein)


def cut_ids(skein: Skein) -> list[str]:
    return [cut.id for cut in skein.cut]


def test_every_block_is_measured_and_nothing_cut_when_it_fits() -> None:
    skein = build_skein(turn_snapshot())
    out = apply_budget(skein, 10_000, words)
    assert out.cut == []
    assert out.budget == 10_000
    assert all(b.tokens == words(b.content) for b in out.blocks)
    expected = sum(words(b.content) + TOKENS_PER_MESSAGE for b in out.blocks)
    assert total(out) == expected + TOKENS_REPLY_PRIMER
    assert skein.blocks[0].tokens is None  # the input is left as it was


def test_examples_go_first_then_the_oldest_history_then_the_least_lore() -> None:
    skein = measure(build_skein(turn_snapshot()), words)
    full = total(skein)
    example = next(b for b in skein.blocks if b.kind is BlockKind.EXAMPLES)
    oldest = [b for b in skein.blocks if b.kind is BlockKind.HISTORY][:2]

    out = apply_budget(skein, full - 1, words)
    assert cut_ids(out) == [example.id]

    budget = full - (example.tokens or 0) - TOKENS_PER_MESSAGE - 1
    out = apply_budget(skein, budget, words)
    assert cut_ids(out) == [example.id, oldest[0].id]
    assert total(out) <= budget

    # everything cuttable in history gone: the lowest-priority lore goes next
    history = [b for b in skein.blocks if b.kind is BlockKind.HISTORY and b.priority < 100]
    drop = sum((b.tokens or 0) + TOKENS_PER_MESSAGE for b in [example, *history])
    out = apply_budget(skein, full - drop - 1, words)
    assert cut_ids(out) == [example.id, *(b.id for b in history), "lore:kb/minor"]
    assert "lore:kb/major" in [b.id for b in out.blocks]


def test_cut_blocks_are_recorded_with_their_tokens_and_why() -> None:
    skein = measure(build_skein(turn_snapshot()), words)
    out = apply_budget(skein, 60, words)
    first = out.cut[0]
    assert first.kind is BlockKind.EXAMPLES
    assert first.tokens == words(skein.blocks[[b.id for b in skein.blocks].index(first.id)].content)
    assert "budget of 60 tokens" in first.reason
    minor = next(r for r in out.lore if r.entry_id == "minor")
    assert minor.reasons[-1]["rule"] == "token_budget"
    assert minor.reasons[-1]["outcome"] == "dropped"
    major = next(r for r in out.lore if r.entry_id == "major")
    assert any(r["rule"] == "token_budget" for r in major.reasons)


def test_the_newest_user_message_and_the_card_are_never_cut() -> None:
    skein = build_skein(turn_snapshot())
    out = apply_budget(skein, 5, words)
    kept = [b.id for b in out.blocks]
    assert "msg:m5" in kept  # the newest user message
    assert {"main", "charDescription", "newMainChat"} <= set(kept)
    assert all(b.priority >= 100 for b in out.blocks)
    assert out.warnings and "over the budget of 5" in out.warnings[-1]


def test_real_tokenizer_counts_blocks() -> None:
    counter = token_counter("gpt-4o")
    skein = build_skein(turn_snapshot())
    out = apply_budget(skein, 100_000, counter.count)
    description = next(b for b in out.blocks if b.id == "charDescription")
    assert description.tokens == counter.count("Ada is a scholar.") > 0
