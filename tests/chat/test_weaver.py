"""The Weaver renders a Skein as the chat messages SillyTavern would send."""

from __future__ import annotations

from typing import Any

from storyloom.chat.prompt.skein import BlockKind, BlockSource, Skein, SkeinBlock
from storyloom.chat.prompt.weaver import api_name, parse_example, weave

SOURCE = BlockSource(kind="preset", label="test")


def blk(
    block_id: str, content: str, kind: BlockKind = BlockKind.SYSTEM, **fields: Any
) -> SkeinBlock:
    return SkeinBlock(id=block_id, kind=kind, content=content, source=SOURCE, **fields)


def msg(n: int, role: str, content: str, name: str | None = None) -> SkeinBlock:
    return blk(f"msg:{n}", content, BlockKind.HISTORY, role=role, name=name, message_id=str(n))


def chat(*blocks: SkeinBlock) -> Skein:
    return Skein(blocks=list(blocks), char_name="Seraphina", user_name="Ann")


HISTORY = (
    msg(1, "assistant", "a1"),
    msg(2, "user", "u1"),
    msg(3, "assistant", "a2"),
    msg(4, "user", "u2"),
)


def contents(messages: list[dict[str, Any]]) -> list[str]:
    return [m["content"] for m in messages]


def test_blocks_become_messages_in_order_and_empty_ones_send_nothing() -> None:
    messages = weave(chat(blk("main", "Main."), blk("empty", "  "), *HISTORY, blk("jb", "JB.")))
    assert messages == [
        {"role": "system", "content": "Main."},
        {"role": "assistant", "content": "a1"},
        {"role": "user", "content": "u1"},
        {"role": "assistant", "content": "a2"},
        {"role": "user", "content": "u2"},
        {"role": "system", "content": "JB."},
    ]


def test_a_group_is_one_message_in_its_format() -> None:
    group = {"group": "worldInfoBefore", "group_format": "[World:\n{0}]"}
    messages = weave(
        chat(
            blk("a", "Forest lore.", BlockKind.LORE, **group),
            blk("b", " River lore. ", BlockKind.LORE, **group),
            blk("desc", "Description."),
            blk("c", "Later lore.", BlockKind.LORE, group="worldInfoAfter"),
        )
    )
    assert contents(messages) == [
        "[World:\nForest lore.\nRiver lore.]",
        "Description.",
        "Later lore.",
    ]


def test_in_chat_blocks_are_woven_in_at_their_depth() -> None:
    messages = weave(
        chat(
            *HISTORY,
            blk("d0", "depth 0", depth=0),
            blk("d2", "depth 2", depth=2),
            blk("far", "depth 9", depth=9),
            blk("jb", "JB."),
        )
    )
    assert contents(messages) == ["depth 9", "a1", "u1", "depth 2", "a2", "u2", "depth 0", "JB."]


def test_one_depth_joins_texts_per_role_and_order_as_sillytavern() -> None:
    messages = weave(
        chat(
            *HISTORY,
            blk("s1", "note", depth=1),
            blk("s2", "char note", depth=1),
            blk("u", "user nudge", depth=1, role="user"),
            blk("a", "assistant nudge", depth=1, role="assistant"),
            blk("late", "high order", depth=1, injection_order=200),
        )
    )
    # per depth: higher injection_order nearer the end; within one order the system text
    # comes last (SillyTavern: "most important go lower")
    assert messages[3:8] == [
        {"role": "assistant", "content": "assistant nudge"},
        {"role": "user", "content": "user nudge"},
        {"role": "system", "content": "note\nchar note"},
        {"role": "system", "content": "high order"},
        {"role": "user", "content": "u2"},
    ]


def test_without_history_in_chat_blocks_stay_where_listed() -> None:
    messages = weave(chat(blk("main", "Main."), blk("d", "injected", depth=4), blk("jb", "JB.")))
    assert contents(messages) == ["Main.", "injected", "JB."]


def test_example_dialogue_becomes_named_system_turns_after_its_header() -> None:
    example = blk(
        "example:1",
        "Ann: Who are you?\nSeraphina: I am the guardian.\nI protect this glade.\nAnn: Oh.",
        BlockKind.EXAMPLES,
        header="[Example Chat]",
    )
    messages = weave(chat(example))
    assert messages == [
        {"role": "system", "content": "[Example Chat]"},
        {"role": "system", "content": "Who are you?", "name": "example_user"},
        {
            "role": "system",
            "content": "I am the guardian.\nI protect this glade.",
            "name": "example_assistant",
        },
        {"role": "system", "content": "Oh.", "name": "example_user"},
    ]


def test_example_without_speaker_lines_is_sent_as_text() -> None:
    messages = weave(chat(blk("example:1", "Just prose.", BlockKind.EXAMPLES)))
    assert messages == [{"role": "system", "content": "Just prose."}]
    assert parse_example("intro\nBob: hi\nAmy: yo", "Amy", "Bob") == [
        ("char", "intro\nhi"),
        ("user", "yo"),
    ]


def test_names_behavior_none_completion_content_and_default() -> None:
    skein = chat(
        msg(1, "assistant", "hi", "Seraphina"),
        msg(2, "user", "yo"),
        msg(3, "assistant", "grr", "Wolf"),
        msg(4, "system", "It rains."),
    )
    assert contents(weave(skein)) == ["hi", "yo", "grr", "It rains."]
    assert all("name" not in m for m in weave(skein))
    completion = weave(skein, names_behavior="completion")
    assert [m.get("name") for m in completion] == ["Seraphina", "Ann", "Wolf", None]
    assert contents(weave(skein, names_behavior="content")) == [
        "Seraphina: hi",
        "Ann: yo",
        "Wolf: grr",
        "It rains.",
    ]
    assert contents(weave(skein, names_behavior="default")) == [
        "hi",
        "yo",
        "Wolf: grr",
        "It rains.",
    ]
    assert api_name("Dr. Jekyll & Hyde") == "Dr__Jekyll___Hyde"


def test_squash_merges_unnamed_system_messages_but_not_the_new_chat_line() -> None:
    skein = chat(
        blk("main", "Main."),
        blk("desc", "Description."),
        blk("new", "[Start a new Chat]", squash=False),
        *HISTORY[:2],
        blk("jb", "JB."),
        blk("d0", "After.", depth=0),
    )
    assert weave(skein, squash_system=True) == [
        {"role": "system", "content": "Main.\nDescription."},
        {"role": "system", "content": "[Start a new Chat]"},
        {"role": "assistant", "content": "a1"},
        {"role": "user", "content": "u1"},
        {"role": "system", "content": "After.\nJB."},
    ]
    assert len(weave(skein)) == 7


def test_disabled_blocks_are_not_sent() -> None:
    messages = weave(chat(blk("a", "kept"), blk("b", "off", enabled=False)))
    assert contents(messages) == ["kept"]
