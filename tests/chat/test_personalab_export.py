"""A branch exported as PersonaLab's files, in exactly the seed's formats."""

from __future__ import annotations

import json
from typing import Any

from storyloom.chat.personalab.export import export_personalab, number_turns
from storyloom.chat.personalab.library import SummaryPoint, SummaryPreset
from storyloom.chat.personalab.summaries import seed_messages
from storyloom.chat.store.conversation import (
    BackgroundSnapshot,
    CharacterSnapshot,
    Conversation,
    ConversationSettings,
    RagScope,
)
from storyloom.chat.store.message import Message, Role
from storyloom.chat.store.state import ChatState, PlotState

T0 = 1760608860.0  # 2025-10-16T10:01:00Z


def conversation(**fields: Any) -> Conversation:
    values: dict[str, Any] = {
        "id": "conv_001",
        "project_id": "p",
        "title": "Revenge",
        "created_at": 1760608800.0,
        "updated_at": T0,
        "pointer": None,
        "version": 3,
        "character": CharacterSnapshot(
            source_preset="alserqi",
            snapshot_created_at="2025-10-16T10:00:00Z",
            base_persona="Alserqi，废土黑帮老大。",
            evolved_persona="",
            card={"name": "Alserqi"},
        ),
        "background": BackgroundSnapshot(
            source_preset="wasteland", story_outline=[{"index": 1, "content": "a"}]
        ),
    }
    values.update(fields)
    return Conversation(**values)


def message(
    index: int, role: Role, content: str, *, at: float | None = None, **fields: Any
) -> Message:
    return Message(
        id=f"m{index}",
        conversation_id="conv_001",
        parent_id=f"m{index - 1}" if index else None,
        role=role,
        content=content,
        depth=index,
        created_at=T0 + 5 * index if at is None else at,
        **fields,
    )


def lines(text: str) -> list[dict[str, Any]]:
    assert text.endswith("\n")
    return [json.loads(line) for line in text.splitlines()]


def test_conversation_jsonl_matches_the_seed_example() -> None:
    path = [
        message(0, "user", "你好", at=T0),
        message(1, "assistant", "你好，有什么事吗？", at=T0 + 5),
        message(2, "user", "你还记得我之前说的话吗？", at=T0 + 60),
        message(3, "assistant", "...", at=T0 + 65),
    ]

    files = export_personalab(conversation(), path, ChatState())

    assert files["conversation.jsonl"] == (
        '{"role":"user","content":"你好","turn":1,"timestamp":"2025-10-16T10:01:00Z"}\n'
        '{"role":"assistant","content":"你好，有什么事吗？","turn":1,'
        '"timestamp":"2025-10-16T10:01:05Z"}\n'
        '{"role":"user","content":"你还记得我之前说的话吗？","turn":2,'
        '"timestamp":"2025-10-16T10:02:00Z"}\n'
        '{"role":"assistant","content":"...","turn":2,"timestamp":"2025-10-16T10:02:05Z"}\n'
    )


def test_metadata_names_the_presets_and_the_rag_scope() -> None:
    settings = ConversationSettings(summaries=["conv_000_summary"], rag_scope=RagScope())

    files = export_personalab(conversation(settings=settings), [], ChatState())

    assert json.loads(files["metadata.json"]) == {
        "conversation_id": "conv_001",
        "created_at": "2025-10-16T10:00:00Z",
        "presets": {
            "character": "alserqi",
            "background": "wasteland",
            "summaries": ["conv_000_summary"],
        },
        "rag_scope": {"mode": "self_only", "related_conversations": []},
    }


def test_metadata_background_is_null_without_one() -> None:
    files = export_personalab(conversation(background=None), [], ChatState())

    assert json.loads(files["metadata.json"])["presets"]["background"] is None


def test_character_snapshot_has_the_seeds_keys_and_not_the_card() -> None:
    snap = conversation().character.model_copy(update={"evolved_persona": "更信任用户了。"})

    files = export_personalab(conversation(character=snap), [], ChatState())

    assert json.loads(files["character_snapshot.json"]) == {
        "source_preset": "alserqi",
        "snapshot_created_at": "2025-10-16T10:00:00Z",
        "base_persona": "Alserqi，废土黑帮老大。",
        "evolved_persona": "更信任用户了。",
    }


def test_plot_state_is_written_only_when_the_state_has_a_plot() -> None:
    assert "plot_state.json" not in export_personalab(conversation(), [], ChatState())

    state = ChatState(plot=PlotState(current_plot_index=3, no_update_count=2))
    files = export_personalab(conversation(), [], state)

    assert json.loads(files["plot_state.json"]) == {
        "enabled": True,
        "current_plot_index": 3,
        "current_status": "in_progress",
        "no_update_count": 2,
    }
    assert set(files) == {
        "conversation.jsonl",
        "metadata.json",
        "character_snapshot.json",
        "plot_state.json",
    }


def test_a_conversation_continued_from_summaries_starts_with_summary_lines_and_turn_1() -> None:
    summary = SummaryPreset(
        summary_id="conv_000_summary",
        source_conversation="conv_000",
        summaries=[
            SummaryPoint(index=1, content="情报交换与信任建立。"),
            SummaryPoint(index=2, content="制定复仇计划。"),
        ],
    )
    old = [
        message(0, "user", "old 1"),
        message(1, "assistant", "old reply 1"),
        message(2, "user", "你确定这个计划可行吗？"),
        message(3, "assistant", "当然。"),
    ]
    specs = seed_messages(summary, old, "last_n_first", 1)
    path = [message(i, spec.role, spec.content, extra=spec.extra) for i, spec in enumerate(specs)]
    path.append(message(len(path), "user", "出发吧"))

    rows = lines(export_personalab(conversation(), path, ChatState())["conversation.jsonl"])

    assert rows[:2] == [
        {"type": "summary", "content": "情报交换与信任建立。"},
        {"type": "summary", "content": "制定复仇计划。"},
    ]
    assert [(r["role"], r["content"], r["turn"]) for r in rows[2:]] == [
        ("user", "你确定这个计划可行吗？", 1),
        ("assistant", "当然。", 1),
        ("user", "出发吧", 2),
    ]


def test_a_failed_reply_without_text_is_left_out_but_a_partial_one_is_kept() -> None:
    path = [
        message(0, "user", "hi"),
        message(1, "assistant", "", status="error", error="endpoint down"),
    ]
    alt = [
        message(0, "user", "hi"),
        message(1, "assistant", "Half a rep", status="partial", error="stopped"),
    ]

    assert (
        len(lines(export_personalab(conversation(), path, ChatState())["conversation.jsonl"])) == 1
    )
    kept = lines(export_personalab(conversation(), alt, ChatState())["conversation.jsonl"])
    assert kept[1]["content"] == "Half a rep"


def test_turns_pair_a_user_message_with_its_answer() -> None:
    path = [
        message(0, "assistant", "greeting"),
        message(1, "user", "a"),
        message(2, "user", "a again"),
        message(3, "assistant", "b"),
        message(4, "assistant", "b continued"),
        message(5, "system", "note"),
        message(6, "user", "c"),
    ]

    assert number_turns(path) == [1, 2, 2, 2, 2, 2, 3]


def test_a_user_message_answered_after_a_system_note_stays_in_its_turn() -> None:
    path = [
        message(0, "system", "scene"),
        message(1, "user", "a"),
        message(2, "system", "note"),
        message(3, "assistant", "b"),
    ]

    assert number_turns(path) == [1, 1, 1, 1]
