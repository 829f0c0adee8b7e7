"""The character library: create, save with a version, duplicate, avatars, and export as
PNG, JSON and CHARX that import back as the same character."""

from __future__ import annotations

import json
import zipfile
from io import BytesIO
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storyloom.chat.personalab.card_export import (
    card_charx,
    card_json,
    card_png,
    default_portrait,
    primary_book,
)
from storyloom.chat.personalab.library import PresetLibrary
from storyloom.core.errors import Conflict
from storyloom.knowledge.knowledge_base import KnowledgeBase
from storyloom.knowledge.st_import import import_sillytavern_bytes
from storyloom.project.knowledge_import import import_knowledge_file
from storyloom.project.project_file import init_project
from storyloom.project.project_knowledge import open_project_knowledge
from storyloom.sillytavern.character import CharacterDefinition
from storyloom.sillytavern.character_card import asset_file, read_png_card
from storyloom.sillytavern.png_chunks import blank_png
from storyloom.testing.st_documents import card_document
from storyloom.testing.st_documents import card_png as st_card_png
from tests.chat.conftest import import_card

# The fields the editor shows: an export imports back with each of them equal.
EDITED_FIELDS = (
    "name",
    "nickname",
    "description",
    "personality",
    "scenario",
    "first_mes",
    "alternate_greetings",
    "mes_example",
    "creator_notes",
    "system_prompt",
    "post_history_instructions",
    "tags",
    "creator",
    "character_version",
    "fav",
    "talkativeness",
)


def project_bases(project: Path) -> list[KnowledgeBase]:
    return [b.kb for b in open_project_knowledge(project, []).catalog.bases]


def edited(preset: CharacterDefinition) -> CharacterDefinition:
    extensions = dict(preset.extensions)
    extensions["depth_prompt"] = {
        "prompt": "Stay in {{char}}'s voice.",
        "depth": 2,
        "role": "system",
    }
    return preset.model_copy(
        update={
            "nickname": "Wrennie",
            "description": "Edited: a courier of 霧港 who knows {{user}}.",
            "alternate_greetings": ["Hello again.", "第二个问候。"],
            "tags": ["courier", "mist"],
            "creator": "tester",
            "character_version": "2.1",
            "system_prompt": "Write tersely.",
            "post_history_instructions": "Keep it short.",
            "fav": True,
            "extensions": extensions,
        }
    )


def fields(preset: CharacterDefinition) -> dict[str, Any]:
    out = {key: getattr(preset, key) for key in EDITED_FIELDS}
    out["depth_prompt"] = preset.depth_prompt
    return out


# -- versions and files ------------------------------------------------------------------------


def test_a_character_made_from_scratch_gets_an_id_from_its_name(library: PresetLibrary) -> None:
    first = library.create_character(CharacterDefinition(name="Iris Vale"))
    second = library.create_character(CharacterDefinition(name="Iris Vale"))
    assert first != second
    assert {c.name for c in library.characters()} == {"Iris Vale"}


def test_a_save_with_the_opened_version_wins_and_a_stale_one_is_a_conflict(
    library: PresetLibrary,
) -> None:
    character_id = library.create_character(CharacterDefinition(name="Iris"))
    opened = library.character_version(character_id)
    path = library.path("characters", character_id)
    first = CharacterDefinition(name="Iris", description="first tab")
    new_version = library.update_character(character_id, first, expected_version=opened)
    assert new_version != opened
    before = path.read_bytes()
    second = CharacterDefinition(name="Iris", description="second tab")
    with pytest.raises(Conflict):
        library.update_character(character_id, second, expected_version=opened)
    assert path.read_bytes() == before


def test_a_save_keeps_the_avatar_and_the_imported_card(
    project: Path, library: PresetLibrary
) -> None:
    character_id = import_card(project, "card_maren_v2_v3.png")
    old = library.character(character_id)
    body = old.model_dump(mode="json", exclude={"source_card", "avatar"})
    body["description"] = "changed"
    library.update_character(
        character_id,
        CharacterDefinition.model_validate(body),
        expected_version=library.character_version(character_id),
    )
    now = library.character(character_id)
    assert now.description == "changed"
    assert now.avatar == old.avatar and now.source_card == old.source_card


def test_duplicate_copies_the_avatar_and_names_the_copy(
    project: Path, library: PresetLibrary
) -> None:
    character_id = import_card(project, "card_maren_v2_v3.png")
    copy_id = library.duplicate_character(character_id)
    original, duplicate = library.character(character_id), library.character(copy_id)
    assert duplicate.name == f"{original.name} (copy)"
    assert duplicate.description == original.description
    copied = library.avatar_path(copy_id)
    source = library.avatar_path(character_id)
    assert copied is not None and source is not None and copied != source
    assert copied.read_bytes() == source.read_bytes()
    library.delete("characters", copy_id)
    assert source.is_file() and not copied.exists()


def test_an_uploaded_avatar_replaces_the_old_one_and_goes_on_delete(
    project: Path, library: PresetLibrary
) -> None:
    character_id = import_card(project, "card_maren_v2_v3.png")
    folder = library.folder("characters")
    library.set_avatar(character_id, b"\xff\xd8\xff\xe0jpeg", ".jpg")
    assert not (folder / f"{character_id}.png").exists()
    assert library.avatar_path(character_id) == folder / f"{character_id}.jpg"
    library.delete("characters", character_id)
    assert not any(p.name.startswith(character_id) for p in folder.iterdir())


def test_listing_carries_tags_favourites_and_avatar(project: Path, library: PresetLibrary) -> None:
    character_id = import_card(project, "card_maren_v2_v3.png")
    preset = library.character(character_id).model_copy(update={"fav": True, "tags": ["sea"]})
    library.update_character(character_id, preset, expected_version=None)
    (listing,) = library.characters()
    assert listing.fav and listing.tags == ["sea"] and listing.avatar == f"{character_id}.png"


# -- export ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "card", ["card_maren_v2_v3.png", "card_wren_v3.charx", "card_old_tom_v1.json"]
)
def test_an_edited_character_exported_as_png_charx_and_json_imports_back_equal(
    project: Path, library: PresetLibrary, card: str
) -> None:
    character_id = import_card(project, card)
    preset = edited(library.character(character_id))
    library.update_character(character_id, preset, expected_version=None)
    preset = library.character(character_id)
    bases = project_bases(project)
    avatar_path = library.avatar_path(character_id)
    avatar = avatar_path.read_bytes() if avatar_path else None
    exports = {
        "x.png": card_png(preset, bases, avatar),
        "x.charx": card_charx(preset, bases, avatar),
        "x.json": json.dumps(card_json(preset, bases)).encode("utf-8"),
    }
    for name, data in exports.items():
        again = import_sillytavern_bytes(data, name)
        assert again.character is not None, name
        assert fields(again.character) == fields(preset), name
        if name != "x.json" and avatar is not None:
            assert again.avatar_png is not None


def test_a_card_exports_its_primary_book_and_not_the_other_bound_ones(
    project: Path, library: PresetLibrary
) -> None:
    character_id = import_card(project, "card_maren_v2_v3.png")
    bases = project_bases(project)
    book = next(kb for kb in bases if "character_definition" not in kb.tags)
    other = KnowledgeBase(kb_displayName="Extra lore")
    made = CharacterDefinition(name="Iris", knowledge_bases=[book.kb_id, other.kb_id])
    card = card_json(made, [*bases, other])
    assert "knowledge_bases" not in json.dumps(card)
    assert card["data"]["character_book"]["name"] == book.display_name
    # SillyTavern links a character to its book by name.
    assert card["data"]["extensions"]["world"] == book.display_name
    assert primary_book(library.character(character_id), bases) == book


def test_charx_holds_card_json_and_the_avatar_as_the_main_icon(
    project: Path, library: PresetLibrary
) -> None:
    character_id = import_card(project, "card_maren_v2_v3.png")
    preset = library.character(character_id)
    path = library.avatar_path(character_id)
    assert path is not None
    archive = zipfile.ZipFile(BytesIO(card_charx(preset, [], path.read_bytes())))
    card = json.loads(archive.read("card.json"))
    assert card["spec"] == "chara_card_v3"
    (icon,) = [a for a in card["data"]["assets"] if a["type"] == "icon"]
    assert icon["name"] == "main"
    assert archive.read(icon["uri"].removeprefix("embeded://")) == path.read_bytes()


def test_a_character_without_a_png_avatar_exports_on_a_generated_portrait() -> None:
    preset = CharacterDefinition(name="Iris")
    png = card_png(preset, [], b"\xff\xd8\xffnot a png")
    assert read_png_card(png, "x.png").image == default_portrait("Iris")


def test_a_png_card_carries_both_v2_and_v3_chunks() -> None:
    preset = CharacterDefinition(name="Iris", first_mes="Hi.")
    png = card_png(preset, [], blank_png())
    parsed = read_png_card(png, "x.png")
    assert parsed.chunk == "ccv3" and parsed.card["spec"] == "chara_card_v3"


text = st.text(st.characters(codec="utf-8"), max_size=40)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=text.filter(lambda s: s.strip() != ""),
    description=text,
    greetings=st.lists(text, max_size=3),
    tags=st.lists(text.filter(lambda s: s.strip() == s and s != "" and "," not in s), max_size=3),
)
def test_any_character_survives_a_charx_and_png_round_trip(
    name: str, description: str, greetings: list[str], tags: list[str]
) -> None:
    preset = CharacterDefinition(
        name=name.strip(), description=description, alternate_greetings=greetings, tags=tags
    )
    for filename, data in (
        ("x.charx", card_charx(preset, [], None)),
        ("x.png", card_png(preset, [], None)),
    ):
        again = import_sillytavern_bytes(data, filename).character
        assert again is not None
        assert fields(again) == fields(preset)


def test_a_file_from_before_bindings_keeps_its_tagged_book_through_edits(
    project: Path, library: PresetLibrary
) -> None:
    character_id = import_card(project, "card_maren_v2_v3.png")
    path = library.path("characters", character_id)
    data = json.loads(path.read_text(encoding="utf-8"))
    data.pop("knowledge_bases", None)
    path.write_text(json.dumps(data), encoding="utf-8")
    preset = library.character(character_id)
    library.update_character(
        character_id, preset.model_copy(update={"fav": True}), expected_version=None
    )
    library.set_avatar(character_id, blank_png(), ".png")
    assert "knowledge_bases" not in json.loads(path.read_text(encoding="utf-8"))
    bases = project_bases(project)
    book = primary_book(library.character(character_id), bases)
    assert book is not None and "character_definition" not in book.tags
    # Once the user unbinds every book, the card embeds none.
    unbound = library.character(character_id).model_copy(update={"knowledge_bases": []})
    assert primary_book(unbound, bases) is None


def test_a_png_cards_assets_come_back_from_charx_and_png_exports(tmp_path: Path) -> None:
    # A V3 card whose assets ride in chara-ext-asset_ chunks (RisuAI): imported, exported
    # as CHARX and as PNG, and each export imported again, it has the same assets.
    smile, theme = blank_png(3, 3, rgb=(200, 10, 10)), b"ID3 not really audio"
    assets = [
        {"type": "icon", "uri": "ccdefault:", "name": "main", "ext": "png"},
        {"type": "emotion", "uri": "__asset:0", "name": "smile", "ext": "png"},
        {"type": "other", "uri": "__asset:1", "name": "theme", "ext": "mp3"},
    ]
    card = card_document("Lio", spec="v3", assets=assets)
    source = tmp_path / "lio.png"
    source.write_bytes(st_card_png(card, assets={"0": smile, "1": theme}))

    def imported(path: Path, where: str) -> dict[tuple[str, str, str], bytes]:
        root = tmp_path / where
        init_project(root)
        summary = import_knowledge_file(path, project_dir=root, global_folder=tmp_path / "g")
        assert summary.character_file is not None
        character_id = Path(summary.character_file).stem
        library = PresetLibrary(root)
        folder = library.folder("characters") / f"{character_id}.assets"
        found: dict[tuple[str, str, str], bytes] = {}
        for asset in library.character(character_id).assets or []:
            file = asset_file(str(asset.get("uri", "")))
            if asset.get("type") != "icon" and file is not None:
                found[(asset["type"], asset["name"], asset["ext"])] = (folder / file).read_bytes()
        exports[where] = (library, character_id, folder)
        return found

    exports: dict[str, tuple[PresetLibrary, str, Path]] = {}
    first = imported(source, "first")
    assert first == {("emotion", "smile", "png"): smile, ("other", "theme", "mp3"): theme}
    library, character_id, folder = exports["first"]
    preset = library.character(character_id)
    warnings: list[str] = []
    charx = tmp_path / "lio.charx"
    charx.write_bytes(card_charx(preset, [], None, folder, warnings=warnings))
    png = tmp_path / "lio_again.png"
    png.write_bytes(card_png(preset, [], None, folder, warnings=warnings))
    assert warnings == []
    assert imported(charx, "from_charx") == first
    assert imported(png, "from_png") == first
