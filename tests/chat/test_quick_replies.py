"""SillyTavern quick reply sets, backgrounds and expression sprites moved into a project:
read as SillyTavern writes them (v2 sets, v1 sets), stored, shown or hidden, and imported
again without a change; a broken file is named with its field and reason."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from storyloom.chat.personalab.chat_backgrounds import (
    ChatBackgrounds,
    background_from_chat_metadata,
    chat_metadata_background,
    export_st_backgrounds,
    import_st_backgrounds,
)
from storyloom.chat.personalab.library import PresetLibrary
from storyloom.chat.personalab.quick_replies import (
    QuickReplyLibrary,
    export_st_quick_replies,
    import_st_quick_replies,
    reply_buttons,
)
from storyloom.chat.personalab.sprites import (
    default_expression,
    export_st_sprites,
    expressions,
    import_st_sprites,
    sprite,
)
from storyloom.core.errors import FileFormatError, InvalidInput, NotFound
from storyloom.project.project_file import init_project
from storyloom.sillytavern.character import CharacterDefinition
from storyloom.sillytavern.png_chunks import blank_png
from storyloom.sillytavern.quick_reply_set import (
    parse_quick_reply_set,
    st_visible_quick_reply_sets,
)


def st_set(name: str, **options: Any) -> dict[str, Any]:
    """A set as SillyTavern's QuickReplySet.toJSON() saves it (QuickReplies/<name>.json)."""
    replies = [
        {"id": 1, "label": "Look", "title": "Look around", "message": "I look around."},
        {"id": 2, "label": "Roll", "title": "", "message": "/roll 1d20 | /echo {{pipe}}"},
        {"id": 3, "label": "Secret", "title": "", "message": "hidden", "isHidden": True},
    ]
    set_file: dict[str, Any] = {
        "version": 2,
        "name": name,
        "disableSend": False,
        "placeBeforeInput": False,
        "injectInput": False,
        "color": "transparent",
        "onlyBorderColor": False,
        "qrList": [
            {
                "icon": "",
                "showLabel": False,
                "contextList": [],
                "preventAutoExecute": True,
                "isHidden": False,
                "executeOnStartup": False,
                "executeOnUser": False,
                "executeOnAi": False,
                "executeOnChatChange": False,
                "executeOnGroupMemberDraft": False,
                "executeOnNewChat": False,
                "automationId": "",
                **reply,
            }
            for reply in replies
        ],
        "idIndex": 3,
    }
    set_file.update(options)
    return set_file


def st_folder(tmp_path: Path, *sets: dict[str, Any]) -> Path:
    folder = tmp_path / "QuickReplies"
    folder.mkdir(parents=True, exist_ok=True)
    for quick_set in sets:
        (folder / f"{quick_set['name']}.json").write_text(json.dumps(quick_set, indent=4))
    return folder


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    init_project(path)
    return path


def test_a_set_reads_with_slash_commands_kept_but_not_runnable(tmp_path: Path) -> None:
    quick_set = parse_quick_reply_set(json.dumps(st_set("Dice")), tmp_path / "Dice.json")
    buttons = reply_buttons(quick_set)
    assert [b.label for b in buttons] == ["Look", "Roll"]  # the hidden one has no button
    look, roll = buttons
    assert look.runnable and look.message == "I look around." and look.title == "Look around"
    assert not roll.runnable and roll.not_runnable and "slash command" in roll.not_runnable
    # Keys storyloom does not use are kept, so the set goes back out as it came.
    dumped = quick_set.model_dump(mode="json")
    assert dumped["idIndex"] == 3 and dumped["qrList"][0]["automationId"] == ""


def test_a_v1_set_reads_as_the_extension_migrates_it(tmp_path: Path) -> None:
    v1 = {
        "name": "Old",
        "quickReplyEnabled": True,
        "quickActionEnabled": True,
        "AutoInputInject": False,
        "numberOfSlots": 2,
        "quickReplySlots": [
            {"mes": "Hello there", "label": "Hi", "enabled": True, "title": "greet"},
            {"mes": "/sys hidden", "label": "Sys", "enabled": True, "hidden": True},
        ],
    }
    quick_set = parse_quick_reply_set(json.dumps(v1), "Old.json")
    assert quick_set.version == 2 and quick_set.disableSend
    assert [(r.id, r.label, r.message, r.isHidden) for r in quick_set.qrList] == [
        (1, "Hi", "Hello there", False),
        (2, "Sys", "/sys hidden", True),
    ]


def test_a_broken_set_names_the_file_the_field_and_why(tmp_path: Path) -> None:
    bad = st_set("Bad")
    bad["qrList"][0]["label"] = {"not": "text"}
    with pytest.raises(FileFormatError) as caught:
        parse_quick_reply_set(json.dumps(bad), tmp_path / "Bad.json")
    assert caught.value.path.name == "Bad.json"
    assert [p.field for p in caught.value.problems] == ["qrList[0].label"]
    with pytest.raises(FileFormatError, match="JSON"):
        parse_quick_reply_set("{", "x.json")


def test_import_is_idempotent_keeps_visibility_and_skips_a_broken_file(
    tmp_path: Path, project: Path
) -> None:
    folder = st_folder(tmp_path, st_set("Dice"), st_set("Story", disableSend=True))
    (folder / "Broken.json").write_text('{"name": "Broken", "qrList": "nope"}')

    count, problems = import_st_quick_replies(folder, project, visible=["Dice"])
    assert count == 2
    assert [p.path.name for p in problems] == ["Broken.json"]
    assert problems[0].problems[0].field == "qrList"
    library = QuickReplyLibrary(project)
    assert [s.name for s in library.sets()] == ["Dice", "Story"]
    assert library.visible() == ["Dice"]
    stored = {p: p.read_bytes() for p in library.folder.iterdir()}

    again, _ = import_st_quick_replies(folder, project, visible=["Dice"])
    assert again == 0
    assert {p: p.read_bytes() for p in library.folder.iterdir()} == stored

    changed = st_set("Dice")
    changed["qrList"][0]["message"] = "I look closer."
    st_folder(tmp_path, changed)
    assert import_st_quick_replies(folder, project, visible=["Dice"])[0] == 1
    assert library.get("Dice").qrList[0].message == "I look closer."


def test_library_saves_hides_and_deletes_a_set(project: Path) -> None:
    library = QuickReplyLibrary(project)
    quick_set = parse_quick_reply_set(json.dumps(st_set("A/B: odd name")), "x.json")
    assert library.save(quick_set)
    assert library.visible() == ["A/B: odd name"]  # a new set shows
    assert not library.save(quick_set)
    assert library.set_visible("A/B: odd name", False) and library.visible() == []
    library.delete("A/B: odd name")
    assert library.sets() == []
    with pytest.raises(NotFound):
        library.get("A/B: odd name")


# -- backgrounds ------------------------------------------------------------------------


def test_backgrounds_import_images_only_and_read_the_chat_metadata(tmp_path: Path) -> None:
    folder = tmp_path / "st" / "backgrounds"
    folder.mkdir(parents=True)
    (folder / "tavern night.png").write_bytes(blank_png(rgb=(10, 20, 30)))
    (folder / "notes.txt").write_text("not an image")
    (folder / "fake.png").write_text("<script>alert(1)</script>")
    (folder / "clip.mp4").write_bytes(b"\0\0\0\x18ftypmp42")
    outside = tmp_path / "secret.png"
    outside.write_bytes(blank_png())
    (folder / "link.png").symlink_to(outside)
    home = tmp_path / "home"

    assert import_st_backgrounds(folder, home) == 1
    assert import_st_backgrounds(folder, home) == 0
    backgrounds = ChatBackgrounds(home)
    assert backgrounds.names() == ["tavern night.png"]
    assert backgrounds.read("tavern night.png")[1] == "image/png"

    def shown(value: str) -> str | None:
        return background_from_chat_metadata({"custom_background": value})

    assert shown('url("backgrounds/tavern%20night.png")') == "tavern night.png"
    assert shown("url('/backgrounds/a.jpg')") == "a.jpg"
    assert shown('url("https://x.test/a.png")') is None
    assert shown('url("backgrounds/../x.png")') is None
    assert background_from_chat_metadata({}) is None


@pytest.mark.parametrize(
    "name", ["../settings.json", "..", "a/b.png", "a\\b.png", ".hidden.png", "x.svg", "x\0.png", ""]
)
def test_a_background_name_that_leaves_the_folder_is_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(InvalidInput):
        ChatBackgrounds(tmp_path).path(name)


# -- sprites ----------------------------------------------------------------------------


def test_sprites_import_beside_the_character_with_a_default(tmp_path: Path, project: Path) -> None:
    library = PresetLibrary(project)
    character_id = library.create_character(CharacterDefinition(name="Seraphina"))
    folder = tmp_path / "st" / "characters" / "Seraphina"
    folder.mkdir(parents=True)
    (folder / "Joy.png").write_bytes(blank_png(rgb=(250, 200, 0)))
    (folder / "neutral.webp").write_bytes(b"RIFF\0\0\0\0WEBPVP8 ")
    (folder / "anger.png").write_text("not a picture")
    (folder / "readme.md").write_text("#")
    (folder / "joy-2.png").write_bytes(blank_png(rgb=(250, 100, 0)))  # a second "joy"

    assert import_st_sprites(library, character_id, folder) == 3
    assert import_st_sprites(library, character_id, folder) == 0
    assert expressions(library, character_id) == ["joy", "neutral"]
    assert default_expression(library, character_id) == "neutral"
    assert sprite(library, character_id, "joy") == (blank_png(rgb=(250, 200, 0)), "image/png")

    # The card names its own default.
    card = library.character(character_id)
    card.extensions["storyloom"] = {"default_expression": "joy"}
    library.update_character(character_id, card, expected_version=None)
    assert default_expression(library, character_id) == "joy"

    # Sprites go with the character when it is copied or deleted.
    copy_id = library.duplicate_character(character_id)
    assert expressions(library, copy_id) == ["joy", "neutral"]
    library.delete("characters", character_id)
    assert not (library.folder("characters") / f"{character_id}.sprites").exists()
    with pytest.raises(InvalidInput):
        sprite(library, copy_id, "../../settings")


def test_the_visible_sets_come_from_sillytaverns_settings() -> None:
    v2 = {
        "isEnabled": True,
        "isCombined": False,
        "isPopout": False,
        "showPopoutButton": True,
        "config": {
            "setList": [{"set": "Dice", "isVisible": True}, {"set": "Story", "isVisible": False}]
        },
    }
    assert st_visible_quick_reply_sets({"extension_settings": {"quickReplyV2": v2}}) == ["Dice"]
    off = {**v2, "isEnabled": False}
    assert st_visible_quick_reply_sets({"extension_settings": {"quickReplyV2": off}}) == []
    v1 = {"quickReplyEnabled": True, "selectedPreset": "Old"}
    assert st_visible_quick_reply_sets({"extension_settings": {"quickReply": v1}}) == ["Old"]
    assert st_visible_quick_reply_sets({"extension_settings": {}}) is None
    assert st_visible_quick_reply_sets({}) is None


def test_what_came_in_goes_back_out_as_sillytavern_writes_it(tmp_path: Path, project: Path) -> None:
    sparse = {"version": 2, "name": "Story: part 1", "qrList": [{"id": 1, "message": "Go on."}]}
    folder = st_folder(tmp_path / "in", st_set("Dice"), sparse)
    import_st_quick_replies(folder, project, visible=None)
    out = tmp_path / "out" / "QuickReplies"
    assert export_st_quick_replies(project, out) == 2
    assert sorted(p.name for p in out.iterdir()) == ["Dice.json", "Story part 1.json"]
    assert json.loads((out / "Dice.json").read_text()) == st_set("Dice")
    assert json.loads((out / "Story part 1.json").read_text()) == sparse

    home = tmp_path / "home"
    (home / "backgrounds").mkdir(parents=True)
    (home / "backgrounds" / "tavern night.png").write_bytes(blank_png())
    assert export_st_backgrounds(home, tmp_path / "out" / "backgrounds") == 1
    metadata = {"custom_background": chat_metadata_background("tavern night.png")}
    assert metadata["custom_background"] == 'url("backgrounds/tavern%20night.png")'
    assert background_from_chat_metadata(metadata) == "tavern night.png"

    library = PresetLibrary(project)
    character_id = library.create_character(CharacterDefinition(name="Mira"))
    sprites = tmp_path / "in" / "characters" / "Mira"
    sprites.mkdir(parents=True)
    (sprites / "joy.png").write_bytes(blank_png())
    import_st_sprites(library, character_id, sprites)
    back = tmp_path / "out" / "characters" / "Mira"
    assert export_st_sprites(library, character_id, back) == 1
    assert (back / "joy.png").read_bytes() == blank_png()
