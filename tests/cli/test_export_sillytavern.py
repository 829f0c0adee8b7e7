"""``storyloom export-sillytavern DIR``: a project moved out as a SillyTavern user folder.

The project is made the way a user makes one (cards, a world and chats imported with the
CLI, a branch added in the tree, a persona, a group chat, global regex scripts, quick
replies, a background, sprites, a kept theme, a pipeline from a preset); the folder
written is read back with the readers of SillyTavern's own shapes, and imports again
(``storyloom import-sillytavern``) into a fresh home with the same messages, entries,
scripts, sets, backgrounds and sprites.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from storyloom.chat.personalab.card_export import default_portrait
from storyloom.chat.personalab.chat_backgrounds import (
    ChatBackgrounds,
    background_from_chat_metadata,
)
from storyloom.chat.personalab.library import PresetLibrary
from storyloom.chat.personalab.personas import Persona, PersonaLibrary
from storyloom.chat.personalab.quick_replies import QuickReplyLibrary
from storyloom.chat.personalab.sprites import expressions, save_sprite, sprite
from storyloom.chat.store.global_variables import GlobalVariables
from storyloom.chat.store.regex_library import GlobalRegexScripts
from storyloom.chat.store.regex_script import RegexScript
from storyloom.chat.store.st_group_chat import import_st_group_chat
from storyloom.chat.store.state import ChatState
from storyloom.chat.store.turn_tree import TurnTree
from storyloom.knowledge.knowledge_base import load_knowledge_base
from storyloom.project.project_file import init_project, load_project, save_project
from storyloom.server.st_move_out import KEPT_THEMES_DIR
from storyloom.server.workflow_service import ProjectWorkflows
from storyloom.sillytavern.character_card import parse_card, read_png_card
from storyloom.sillytavern.chat_log import ChatLog, parse_chat_jsonl
from storyloom.sillytavern.group_file import parse_group_file
from storyloom.sillytavern.png_chunks import is_png, read_chunks, text_chunks
from storyloom.sillytavern.quick_reply_set import (
    QuickReply,
    QuickReplySetFile,
    read_quick_reply_set,
    st_visible_quick_reply_sets,
)
from storyloom.sillytavern.world_info import world_info_entries
from storyloom.store.database import Database
from storyloom.testing.st_documents import (
    card_book_entry,
    card_document,
    card_png,
    chat_jsonl,
    chat_message,
    group_chat_jsonl,
    group_document,
    world_info_document,
    world_info_entry,
)

ROOT = Path(__file__).resolve().parents[2]
TIDY = RegexScript(
    id="5b1c0e4e-tidy",
    scriptName="Trim asterisks",
    findRegex="/\\*{2,}/g",
    replaceString="*",
    placement=[1, 2],
)
MOVES = QuickReplySetFile(
    name="Moves",
    qrList=[
        QuickReply(id=1, label="Look", message="I look around."),
        QuickReply(id=2, label="Wait", message="I wait."),
    ],
)
TOOLS = QuickReplySetFile(
    name="Tools", qrList=[QuickReply(id=1, label="Roll", message="/roll 1d20")]
)
BACKGROUND = "harbour at dusk.png"
THEME = {"name": "Night Harbour", "main_text_color": "rgba(220, 220, 210, 1)"}


def storyloom(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    """The CLI as a process, on ``home``, with this checkout's code first."""
    env = {**os.environ, "STORYLOOM_HOME": str(home), "HOME": str(home)}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-m", "storyloom", *args, "--home", str(home)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    return result.stdout


class Made:
    """The project as made: ids the checks need."""

    def __init__(self, home: Path, root: Path) -> None:
        self.home = home
        self.root = root
        self.chat_id = ""
        self.branch_leaf = ""
        self.branch_point = 0
        self.group_id = ""
        self.persona_id = ""
        self.world_kb = ""
        self.aria_book = ""
        self.aria_id = ""
        self.sprites: dict[str, bytes] = {}
        self.pipeline = ""


def open_tree(home: Path) -> tuple[Database, TurnTree]:
    database = Database.in_home(home)
    return database, TurnTree(database)


@pytest.fixture
def made(tmp_path: Path) -> Made:
    home = tmp_path / "home"
    root = tmp_path / "project"
    init_project(root)
    made = Made(home, root)
    files = tmp_path / "st"
    files.mkdir()
    # Two cards (Aria with her own book), a world, a chat with swipes.
    aria = card_document("Aria", book=[card_book_entry(0, ["map"], "Aria keeps maps.")])
    (files / "Aria.png").write_bytes(card_png(aria))
    (files / "Bram.png").write_bytes(card_png(card_document("Bram")))
    world = world_info_document(
        [
            world_info_entry(0, ["harbour"], "The harbour freezes in winter."),
            world_info_entry(1, ["bell"], "The bell rings at dusk."),
        ]
    )
    (files / "Drift Isles.json").write_text(json.dumps(world), encoding="utf-8")
    for name in ("Aria.png", "Bram.png", "Drift Isles.json"):
        ok(storyloom("kb", "import", str(files / name), "--project", str(root), home=home))
    chat = chat_jsonl(
        [
            chat_message("Aria", "Lost again?"),
            chat_message("User", "Which way to the harbour?", is_user=True),
            chat_message(
                "Aria",
                "North, past the bell.",
                swipes=["South, I think.", "North, past the bell."],
                swipe_id=1,
                swipe_info=[{"send_date": "2024-09-19T20:04:00.000Z", "extra": {}}] * 2,
            ),
            chat_message("User", "Thanks!", is_user=True),
        ]
    )
    (files / "Aria - 2024-09-19@20h03m29s.jsonl").write_text(chat, encoding="utf-8")
    imported = json.loads(
        ok(
            storyloom(
                "chat",
                "import",
                str(files / "Aria - 2024-09-19@20h03m29s.jsonl"),
                "--project",
                str(root),
                "--json",
                home=home,
            )
        )
    )
    made.chat_id = imported["conversation_id"]
    project = load_project(root)
    knowledge = {
        load_knowledge_base(root / ref.path).kb_displayName: load_knowledge_base(root / ref.path)
        for ref in project.knowledgeBaseReferences
        if ref.path
    }
    made.world_kb = knowledge["Drift Isles"].kb_id
    made.aria_book = next(kb.kb_id for name, kb in knowledge.items() if name == "Aria")
    project.globalKnowledgeBases = [made.world_kb]
    save_project(root, project)
    # A persona with the world as its book, the default, locked to the chat.
    personas = PersonaLibrary(root)
    lyra = personas.create(
        Persona(name="Lyra", description="A courier.", knowledge_base=made.world_kb, depth=4)
    )
    personas.set_default(lyra.id)
    made.persona_id = lyra.id
    GlobalVariables.in_home(home).save_changes({}, {"tides": 3})
    # Global regex, a shown and a hidden quick reply set, a background, a kept theme.
    GlobalRegexScripts.in_home(home).save([TIDY])
    replies = QuickReplyLibrary(root)
    replies.save(MOVES, visible=True)
    replies.save(TOOLS, visible=False)
    ChatBackgrounds(home).save(BACKGROUND, default_portrait("harbour"))
    themes = home / KEPT_THEMES_DIR
    themes.mkdir(parents=True)
    (themes / "Night Harbour.json").write_text(json.dumps(THEME), encoding="utf-8")
    # Aria's sprites.
    library = PresetLibrary(root)
    made.aria_id = next(c.id for c in library.characters() if c.name == "Aria")
    for label in ("joy", "neutral"):
        made.sprites[label] = default_portrait(f"Aria {label}")
        save_sprite(library, made.aria_id, label, made.sprites[label])
    # A pipeline made from a SillyTavern preset, run by the group chat below.
    made.pipeline = (
        ProjectWorkflows(root)
        .import_st_preset({"temperature": 0.7}, file_name="Tidy Prose.json")[0]
        .id
    )
    database, tree = open_tree(home)
    try:
        conversation = tree.conversation(made.chat_id)
        settings = conversation.settings.model_copy(
            update={
                "persona_id": lyra.id,
                "knowledge_bases": [made.aria_book],
                "background": BACKGROUND,
                "allow_regex_scripts": True,
            }
        )
        tree.update_conversation(made.chat_id, settings=settings)
        # A branch: another answer to the user's question, and on from it.
        path = tree.active_path(made.chat_id)
        made.branch_point = 1
        other = tree.add_message(
            made.chat_id, parent_id=path[1].id, role="assistant", content="East, by boat."
        )
        leaf = tree.add_message(
            made.chat_id,
            parent_id=other.id,
            role="user",
            content="A boat it is.",
            state=ChatState(variables={"boat": "hired"}),
        )
        made.branch_leaf = leaf.id
        tree.set_pointer(made.chat_id, path[-1].id)
        # A group chat of both.
        group = group_document(["Aria.png", "Bram.png"], name="Harbour Watch")
        group_chat = group_chat_jsonl(
            [
                chat_message("User", "Ready?", is_user=True),
                chat_message("Aria", "Always.", original_avatar="Aria.png"),
                chat_message("Bram", "Hm.", original_avatar="Bram.png"),
            ]
        )
        made.group_id = group["id"]
        imported_group, _ = import_st_group_chat(
            tree,
            parse_chat_jsonl(group_chat, "g.jsonl"),
            parse_group_file(json.dumps(group), "g.json"),
            project_id=project.id,
        )
        # A branch of the group chat: another answer to "Ready?".
        group_path = tree.active_path(imported_group.conversation_id)
        tree.add_message(
            imported_group.conversation_id,
            parent_id=group_path[0].id,
            role="assistant",
            content="Not yet.",
            name="Bram",
        )
        tree.add_message(
            imported_group.conversation_id,
            parent_id=tree.active_path(imported_group.conversation_id)[-1].id,
            role="user",
            content="Hurry.",
        )
        tree.set_pointer(imported_group.conversation_id, group_path[-1].id)
        group_settings = tree.conversation(imported_group.conversation_id).settings
        tree.update_conversation(
            imported_group.conversation_id,
            settings=group_settings.model_copy(update={"pipeline": made.pipeline}),
        )
    finally:
        database.close()
    return made


def export(made: Made, dest: Path, *extra: str) -> dict[str, Any]:
    out = ok(
        storyloom(
            "export-sillytavern", str(dest), "--project", str(made.root), "--json", *extra,
            home=made.home,
        )
    )  # fmt: skip
    report: dict[str, Any] = json.loads(out)
    return report


def read_chat(path: Path) -> ChatLog:
    return parse_chat_jsonl(path.read_text(encoding="utf-8"), path)


def card_of(path: Path) -> dict[str, Any]:
    png = path.read_bytes()
    keywords = {c.keyword for c in text_chunks(read_chunks(png))}
    assert {"chara", "ccv3"} <= keywords
    card = read_png_card(png, path).card
    parse_card(card, path)
    assert isinstance(card, dict)
    return card


def test_the_folder_holds_what_sillytavern_reads_in_its_shapes(made: Made, tmp_path: Path) -> None:
    dest = tmp_path / "out" / "default-user"
    report = export(made, dest)

    assert report["counts"] == {
        "characters": 2,
        "worlds": 2,
        "personas": 1,
        "chats": 1,
        "branches": 1,
        "groups": 1,
        "group_chats": 2,
        "regex_scripts": 1,
        "allowed_regex": 1,
        "quick_replies": 2,
        "backgrounds": 1,
        "sprites": 2,
        "themes": 1,
    }
    written = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())
    assert written == report["files"]
    assert not [p for p in dest.parent.iterdir() if p.name != "default-user"]  # no staging

    # Worlds: world info files, one per lore book.
    worlds = {p.stem: p for p in (dest / "worlds").glob("*.json")}
    assert set(worlds) == {"Aria", "Drift Isles"}
    drift = world_info_entries(json.loads(worlds["Drift Isles"].read_text()), worlds["Drift Isles"])
    assert isinstance(drift, dict) and len(drift) == 2

    # Characters: PNG cards with both chunks; Aria names her world and her chat.
    aria = card_of(dest / "characters" / "Aria.png")
    assert aria["data"]["extensions"]["world"] == "Aria"
    assert aria["data"]["character_book"]["entries"][0]["content"] == "Aria keeps maps."
    assert card_of(dest / "characters" / "Bram.png")["name"] == "Bram"

    # The chat: its main path, locked to the persona, with its own book.
    folder = dest / "chats" / "Aria"
    main_file = folder / "Aria - 2024-09-19@20h03m29s.jsonl"
    assert aria["chat"] == main_file.stem
    main = read_chat(main_file)
    assert [m.mes for m in main.messages] == [
        "Lost again?",
        "Which way to the harbour?",
        "North, past the bell.",
        "Thanks!",
    ]
    assert main.messages[2].swipes == ["South, I think.", "North, past the bell.", "East, by boat."]
    assert main.messages[2].swipe_id == 1
    assert main.header is not None
    metadata = main.header.chat_metadata
    assert metadata["persona"] == f"{made.persona_id}.png"
    assert metadata["world_info"] == "Aria"
    assert "main_chat" not in metadata
    # Its background as SillyTavern's chat background, naming the exported image.
    assert metadata["custom_background"] == 'url("backgrounds/harbour%20at%20dusk.png")'
    assert background_from_chat_metadata(metadata) == BACKGROUND
    assert is_png((dest / "backgrounds" / BACKGROUND).read_bytes())

    # Aria's sprites in the folder named for her card file, as SillyTavern finds them.
    assert {p.name: p.read_bytes() for p in (dest / "characters" / "Aria").iterdir()} == {
        f"{label}.png": data for label, data in made.sprites.items()
    }
    assert not (dest / "characters" / "Bram").exists()

    # The branch: SillyTavern's branch file, pointing at the main chat, same prefix.
    (branch_file,) = [p for p in folder.glob("*.jsonl") if p != main_file]
    assert branch_file.name.startswith(f"Branch #{made.branch_point} - ")
    branch = read_chat(branch_file)
    assert branch.header is not None
    assert branch.header.chat_metadata["main_chat"] == main_file.stem
    shared = made.branch_point + 1
    assert [m.mes for m in branch.messages[:shared]] == [m.mes for m in main.messages[:shared]]
    assert [m.mes for m in branch.messages[shared:]] == ["East, by boat.", "A boat it is."]
    assert branch.header.chat_metadata["variables"] == {"boat": "hired"}
    assert "variables" not in metadata

    # Personas, global books, global variables in settings.json.
    settings = json.loads((dest / "settings.json").read_text())
    avatar = f"{made.persona_id}.png"
    assert is_png((dest / "User Avatars" / avatar).read_bytes())
    power_user = settings["power_user"]
    assert power_user["personas"] == {avatar: "Lyra"}
    assert power_user["persona_descriptions"][avatar] == {
        "description": "A courier.",
        "position": 0,
        "depth": 4,
        "role": 0,
        "lorebook": "Drift Isles",
        "connections": [],
        "title": "",
    }
    assert power_user["default_persona"] == avatar
    assert settings["user_avatar"] == avatar
    assert settings["world_info_settings"]["world_info"]["globalSelect"] == ["Drift Isles"]
    extensions = settings["extension_settings"]
    assert extensions["variables"]["global"] == {"tides": 3}

    # Global regex scripts as SillyTavern keeps them; Aria's card scripts allowed.
    assert extensions["regex"] == [TIDY.model_dump(mode="json")]
    assert extensions["character_allowed_regex"] == ["Aria.png"]

    # Quick replies: every set's file; only the shown set linked, with its buttons.
    sets = {p.name: read_quick_reply_set(p) for p in (dest / "QuickReplies").iterdir()}
    assert sets == {"Moves.json": MOVES, "Tools.json": TOOLS}
    assert json.loads((dest / "QuickReplies" / "Moves.json").read_text())["name"] == "Moves"
    assert extensions["quickReplyV2"] == {
        "isEnabled": True,
        "isCombined": False,
        "isPopout": False,
        "showPopoutButton": True,
        "config": {"setList": [{"set": "Moves", "isVisible": True}]},
    }
    assert st_visible_quick_reply_sets(settings) == ["Moves"]

    # The kept theme goes back as it came.
    assert json.loads((dest / "themes" / "Night Harbour.json").read_text()) == THEME

    # The preset the group chat's pipeline came from has no writer: said, not written.
    assert not (dest / "OpenAI Settings").exists()
    problems = {p["what"]: p["reason"] for p in report["problems"]}
    assert "Tidy Prose.json" in problems.pop(f"chat pipeline {made.pipeline}")
    # The group chat (Aria in it) does not allow her scripts; SillyTavern allows per card.
    assert "allowed in every chat" in problems.pop("character Aria")
    assert problems == {}

    # The group: its file names the cards and its chat; the chat names its speakers.
    group = parse_group_file((dest / "groups" / f"{made.group_id}.json").read_bytes(), "g")
    assert group.members == ["Aria.png", "Bram.png"]
    assert group.name == "Harbour Watch"
    chat_id, branch_id = group.chats
    assert group.chat_id == chat_id
    group_chat = read_chat(dest / "group chats" / f"{chat_id}.jsonl")
    assert group_chat.header is not None and group_chat.header.user_name == "unused"
    assert [m.mes for m in group_chat.messages] == ["Ready?", "Always.", "Hm."]
    speakers = [(m.model_extra or {}).get("original_avatar") for m in group_chat.messages]
    assert speakers == [None, "Aria.png", "Bram.png"]
    assert branch_id.startswith("Branch #0 - ")
    group_branch = read_chat(dest / "group chats" / f"{branch_id}.jsonl")
    assert group_branch.header is not None
    assert group_branch.header.chat_metadata["main_chat"] == chat_id
    assert [m.mes for m in group_branch.messages] == ["Ready?", "Not yet.", "Hurry."]
    assert (group_branch.messages[1].model_extra or {})["original_avatar"] == "Bram.png"
    assert group.model_extra is not None
    assert set(group.model_extra["past_metadata"]) == {chat_id, branch_id}


def test_the_exported_chats_and_world_import_again_with_the_same_messages(
    made: Made, tmp_path: Path
) -> None:
    dest = tmp_path / "out"
    export(made, dest)
    home = tmp_path / "home2"
    root = tmp_path / "project2"
    init_project(root)
    world = dest / "worlds" / "Drift Isles.json"
    ok(storyloom("kb", "import", str(world), "--project", str(root), home=home))
    (ref,) = load_project(root).knowledgeBaseReferences
    assert ref.path is not None
    assert len(load_knowledge_base(root / ref.path).entries) == 2

    database, tree = open_tree(made.home)
    try:
        expected = {
            "main": [m.content for m in tree.active_path(made.chat_id)],
            "branch": [m.content for m in tree.path(made.branch_leaf)],
        }
    finally:
        database.close()
    for kind, pattern in (("main", "Aria - *.jsonl"), ("branch", "Branch #*.jsonl")):
        (file,) = (dest / "chats" / "Aria").glob(pattern)
        again = json.loads(
            ok(storyloom("chat", "import", str(file), "--project", str(root), "--json", home=home))
        )
        database, tree = open_tree(home)
        try:
            contents = [m.content for m in tree.active_path(again["conversation_id"])]
        finally:
            database.close()
        assert contents == expected[kind]


def test_a_folder_with_files_is_refused_unless_overwrite(made: Made, tmp_path: Path) -> None:
    dest = tmp_path / "taken"
    dest.mkdir()
    (dest / "mine.txt").write_text("keep me", encoding="utf-8")
    refused = storyloom(
        "export-sillytavern", str(dest), "--project", str(made.root), home=made.home
    )
    assert refused.returncode == 1
    assert str(dest) in refused.stderr and "not empty" in refused.stderr
    assert [p.name for p in dest.iterdir()] == ["mine.txt"]

    report = export(made, dest, "--overwrite")
    assert not (dest / "mine.txt").exists()
    assert (dest / "settings.json").is_file()
    assert report["counts"]["chats"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home", "project", "st", "taken"]


def import_back(dest: Path, tmp_path: Path) -> tuple[Path, Path, dict[str, Any]]:
    """``storyloom import-sillytavern`` of the exported folder into a fresh home."""
    home = tmp_path / "home2"
    root = tmp_path / "project2"
    init_project(root)
    out = ok(
        storyloom("import-sillytavern", str(dest), "--project", str(root), "--json", home=home)
    )
    report: dict[str, Any] = json.loads(out)
    return home, root, report


def imported_chats(home: Path, root: Path) -> dict[str, Any]:
    """The imported one-to-one chats' settings by title, and the group chats' under
    ``"group"``."""
    database, tree = open_tree(home)
    try:
        found: dict[str, Any] = {}
        for summary in tree.conversations(load_project(root).id):
            conversation = tree.conversation(summary.id)
            key = "group" if conversation.settings.group is not None else conversation.title
            found.setdefault(key, conversation.settings)
        return found
    finally:
        database.close()


def test_the_export_imports_again_with_each_chat_allowing_what_it_allowed(
    made: Made, tmp_path: Path
) -> None:
    dest = tmp_path / "out"
    export(made, dest)
    home, root, _ = import_back(dest, tmp_path)

    chats = imported_chats(home, root)
    assert chats["Aria - 2024-09-19@20h03m29s"].allow_regex_scripts is True


def test_the_export_imports_again_with_its_scripts_quick_replies_backgrounds_and_sprites(
    made: Made, tmp_path: Path
) -> None:
    dest = tmp_path / "out"
    export(made, dest)
    home, root, _ = import_back(dest, tmp_path)

    assert GlobalRegexScripts.in_home(home).load() == [TIDY]
    replies = QuickReplyLibrary(root)
    assert replies.sets() == [MOVES, TOOLS]
    assert replies.visible() == ["Moves"]
    assert ChatBackgrounds(home).names() == [BACKGROUND]
    assert imported_chats(home, root)["Aria - 2024-09-19@20h03m29s"].background == BACKGROUND
    library = PresetLibrary(root)
    aria = next(c.id for c in library.characters() if c.name == "Aria")
    assert expressions(library, aria) == ["joy", "neutral"]
    assert {label: sprite(library, aria, label)[0] for label in made.sprites} == made.sprites
    assert json.loads((home / KEPT_THEMES_DIR / "Night Harbour.json").read_text()) == THEME
