"""Moving out to SillyTavern: any tree of swipes and branches goes out whole.

A conversation's tree becomes one main chat file and branch files; SillyTavern shows a
message's siblings as the swipes of its line. Whatever the tree and wherever the user
stands in it, every leaf's path is in some file (its last message as the shown line or
as one of the swipes), and every file is a path of the tree. A chat's background goes
out as it is here, whatever the metadata it came with says.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storyloom.chat.personalab.card_export import default_portrait
from storyloom.chat.personalab.chat_backgrounds import ChatBackgrounds
from storyloom.chat.personalab.quick_replies import QuickReplyLibrary
from storyloom.chat.store.conversation import CharacterSnapshot, ConversationSettings
from storyloom.chat.store.turn_tree import TurnTree
from storyloom.core.errors import FileFormatError, InvalidInput
from storyloom.project.project_file import init_project
from storyloom.server.st_move_out import export_user_folder
from storyloom.sillytavern.character_card import read_png_card
from storyloom.sillytavern.chat_log import parse_chat_jsonl
from storyloom.sillytavern.quick_reply_set import QuickReply, QuickReplySetFile
from storyloom.store.database import Database


@st.composite
def trees(draw: st.DrawFn) -> tuple[list[int | None], int]:
    """Parents (None: a root) of messages 0..n-1, each after its parent, and the message
    the pointer is at."""
    size = draw(st.integers(min_value=1, max_value=12))
    parents: list[int | None] = [None]
    for index in range(1, size):
        parent = draw(st.integers(min_value=-1, max_value=index - 1))
        parents.append(None if parent < 0 else parent)
    return parents, draw(st.integers(min_value=0, max_value=size - 1))


def paths_in_file(text: str) -> tuple[tuple[str, ...], set[tuple[str, ...]]]:
    """The file's path (its shown lines) and every path it holds (each line's swipes
    after the shown lines before it)."""
    chat = parse_chat_jsonl(text, "chat.jsonl")
    shown: list[str] = []
    held: set[tuple[str, ...]] = set()
    for line in chat.messages:
        for text_ in line.swipes or [line.mes]:
            held.add((*shown, text_))
        shown.append(line.mes)
    return tuple(shown), held


@settings(max_examples=40, deadline=None)
@given(trees())
def test_every_leaf_of_any_tree_is_in_the_files_and_every_file_is_a_path(
    shape: tuple[list[int | None], int],
) -> None:
    parents, pointer = shape
    with tempfile.TemporaryDirectory() as folder:
        base = Path(folder)
        home, root, dest = base / "home", base / "project", base / "out"
        project = init_project(root)
        database = Database.in_home(home)
        try:
            tree = TurnTree(database)
            # A chat whose character is not in the library: the card goes out from its
            # snapshot.
            conversation = tree.create_conversation(
                project_id=project.id,
                title="Aria - 2025-01-02@03h04m05s",
                character=CharacterSnapshot(card={"name": "Aria", "description": "A guide."}),
            )
            ids: list[str] = []
            for index, parent in enumerate(parents):
                depth = 0 if parent is None else len(tree.path(ids[parent]))
                message = tree.add_message(
                    conversation.id,
                    parent_id=None if parent is None else ids[parent],
                    role="assistant" if depth % 2 == 0 else "user",
                    content=f"m{index}",
                )
                ids.append(message.id)
            tree.set_pointer(conversation.id, ids[pointer])
            leaves = [i for i in range(len(parents)) if i not in parents]
            leaf_paths = {tuple(m.content for m in tree.path(ids[i])) for i in leaves}
            all_paths = {tuple(m.content for m in tree.path(ids[i])) for i in range(len(ids))}
            main_path = tuple(m.content for m in tree.active_path(conversation.id))
        finally:
            database.close()

        report = export_user_folder(home, root, dest)

        card = read_png_card((dest / "characters" / "Aria.png").read_bytes(), "Aria.png").card
        assert card["data"]["description"] == "A guide."
        files = sorted((dest / "chats" / "Aria").glob("*.jsonl"))
        main_file = dest / "chats" / "Aria" / "Aria - 2025-01-02@03h04m05s.jsonl"
        assert card["chat"] == main_file.stem
        held: set[tuple[str, ...]] = set()
        for file in files:
            text = file.read_text(encoding="utf-8")
            path, in_file = paths_in_file(text)
            held |= in_file
            assert path in all_paths
            header = parse_chat_jsonl(text, file).header
            assert header is not None
            if file == main_file:
                assert path == main_path
                assert "main_chat" not in header.chat_metadata
            else:
                assert file.name.startswith("Branch #")
                assert header.chat_metadata["main_chat"] == main_file.stem
        assert leaf_paths <= held
        assert report.counts.chats == 1
        assert report.counts.branches == len(files) - 1 <= len(leaves)


def test_a_file_in_the_way_is_refused_and_a_failed_export_leaves_nothing(tmp_path: Path) -> None:
    home, root = tmp_path / "home", tmp_path / "project"
    init_project(root)
    in_the_way = tmp_path / "out"
    in_the_way.write_text("not a folder", encoding="utf-8")
    with pytest.raises(InvalidInput, match="is a file") as refused:
        export_user_folder(home, root, in_the_way)
    assert refused.value.problems[0].field == "dest"

    (root / "project.json").write_text("{", encoding="utf-8")
    with pytest.raises(FileFormatError):
        export_user_folder(home, root, tmp_path / "moved")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "project"]


def test_a_chat_shows_the_background_it_has_here_and_a_missing_one_is_reported(
    tmp_path: Path,
) -> None:
    home, root, dest = tmp_path / "home", tmp_path / "project", tmp_path / "out"
    project = init_project(root)
    ChatBackgrounds(home).save("dusk.png", default_portrait("dusk"))
    aria = CharacterSnapshot(card={"name": "Aria"})
    database = Database.in_home(home)
    try:
        tree = TurnTree(database)
        for title, background, kept in (
            # Changed here since it came: the setting wins over the kept metadata.
            ("changed", "dusk.png", 'url("backgrounds/dawn.png")'),
            # Cleared here: the kept one does not come back.
            ("cleared", None, 'url("backgrounds/dawn.png")'),
            # A web address storyloom does not show goes back as it came.
            ("web", None, 'url("https://example.org/sky.png")'),
            ("gone", "deleted.png", None),
        ):
            conversation = tree.create_conversation(
                project_id=project.id,
                title=title,
                character=aria,
                settings=ConversationSettings(background=background),
                metadata={"custom_background": kept} if kept else {},
            )
            tree.add_message(conversation.id, parent_id=None, role="assistant", content="Hi.")
    finally:
        database.close()

    report = export_user_folder(home, root, dest)

    def shown(title: str) -> object:
        chat = parse_chat_jsonl((dest / "chats" / "Aria" / f"{title}.jsonl").read_text(), title)
        assert chat.header is not None
        return chat.header.chat_metadata.get("custom_background")

    assert shown("changed") == 'url("backgrounds/dusk.png")'
    assert shown("cleared") is None
    assert shown("web") == 'url("https://example.org/sky.png")'
    assert shown("gone") is None
    assert [(p.what, p.reason) for p in report.problems] == [
        ("chat gone", "its background deleted.png is not in backgrounds/; not set")
    ]
    assert report.counts.backgrounds == 1
    assert (dest / "backgrounds" / "dusk.png").read_bytes() == default_portrait("dusk")
    assert "backgrounds/dusk.png" in report.files


def test_quick_reply_sets_whose_names_make_one_file_name_are_reported(tmp_path: Path) -> None:
    home, root, dest = tmp_path / "home", tmp_path / "project", tmp_path / "out"
    init_project(root)
    replies = QuickReplyLibrary(root)
    for name in ("Moves", "Moves?"):
        replies.save(QuickReplySetFile(name=name, qrList=[QuickReply(label=name, message="Go.")]))

    report = export_user_folder(home, root, dest)

    assert [p.name for p in (dest / "QuickReplies").iterdir()] == ["Moves.json"]
    assert report.counts.quick_replies == 1
    (problem,) = report.problems
    assert problem.what == "quick reply sets Moves, Moves?"
    assert "Moves.json" in problem.reason
