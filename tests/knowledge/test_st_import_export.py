"""SillyTavern files through the importer and exporter: cards (PNG, V1/V2/V3 JSON, CHARX)
with their edits, embedded books and bad files, and chats told by content."""

from __future__ import annotations

import base64
import io
import json
import zipfile
from pathlib import Path
from typing import Any

import pytest

from storyloom.core.errors import FileFormatError
from storyloom.knowledge.st_export import export_card_json, export_card_png
from storyloom.knowledge.st_import import import_sillytavern, import_sillytavern_bytes
from storyloom.sillytavern.character import CharacterDefinition
from storyloom.sillytavern.png_chunks import (
    blank_png,
    read_chunks,
    replace_text_chunks,
    text_chunks,
)
from storyloom.testing.st_documents import (
    card_book_entry,
    card_document,
    card_png,
    charx_archive,
    chat_jsonl,
    chat_message,
)


def write(tmp_path: Path, name: str, data: bytes | str) -> Path:
    path = tmp_path / name
    if isinstance(data, str):
        path.write_text(data, encoding="utf-8")
    else:
        path.write_bytes(data)
    return path


def problem_fields(exc: pytest.ExceptionInfo[FileFormatError]) -> list[str]:
    return [p.field for p in exc.value.problems]


def test_ccv3_chunk_wins_over_chara(tmp_path: Path) -> None:
    v2 = card_document("Old name")
    v3 = card_document("New name", spec="v3")
    png = replace_text_chunks(
        blank_png(),
        [
            ("chara", base64.b64encode(json.dumps(v2).encode()).decode()),
            ("ccv3", base64.b64encode(json.dumps(v3).encode()).decode()),
        ],
    )
    result = import_sillytavern(write(tmp_path, "card.png", png))
    assert result.kind == "character_png"
    assert result.character is not None and result.character.name == "New name"


def test_unreadable_ccv3_falls_back_to_chara_with_a_warning(tmp_path: Path) -> None:
    png = replace_text_chunks(
        card_png(card_document("Aria"), chunks=("chara",)), [("ccv3", "%%% not base64 %%%")]
    )
    result = import_sillytavern(write(tmp_path, "card.png", png))
    assert result.character is not None and result.character.name == "Aria"
    assert any("ccv3" in w for w in result.warnings)


def test_png_card_import_gives_the_avatar_without_card_chunks(tmp_path: Path) -> None:
    result = import_sillytavern(write(tmp_path, "aria.png", card_png(card_document())))
    assert result.avatar_png is not None
    assert text_chunks(read_chunks(result.avatar_png)) == []
    assert result.character is not None and result.character.avatar == "aria.png"


def test_png_export_writes_v2_chara_and_v3_ccv3_before_iend() -> None:
    preset = CharacterDefinition(name="Mira", description="A lighthouse keeper.")
    png = export_card_png(preset, None, blank_png(3, 3))
    chunks = read_chunks(png)
    texts = {t.keyword: t.text for t in text_chunks(chunks)}
    assert set(texts) == {"chara", "ccv3"}
    assert chunks[-1].type == b"IEND"
    v2 = json.loads(base64.b64decode(texts["chara"]))
    v3 = json.loads(base64.b64decode(texts["ccv3"]))
    assert (v2["spec"], v2["spec_version"]) == ("chara_card_v2", "2.0")
    assert (v3["spec"], v3["spec_version"]) == ("chara_card_v3", "3.0")
    assert v2["data"] == v3["data"]
    assert v3["data"]["description"] == "A lighthouse keeper."
    assert v2["name"] == "Mira" and v2["avatar"] == "none"


def test_png_export_replaces_old_card_chunks_and_keeps_other_text() -> None:
    image = replace_text_chunks(card_png(card_document("Old")), [("Software", "paint")])
    preset = CharacterDefinition(name="New")
    texts = text_chunks(read_chunks(export_card_png(preset, None, image)))
    assert [t.keyword for t in texts] == ["Software", "chara", "ccv3"]


def test_card_edits_reach_data_and_the_v1_copies(tmp_path: Path) -> None:
    result = import_sillytavern(write(tmp_path, "aria.json", json.dumps(card_document())))
    preset = result.character
    assert preset is not None
    preset.description = "Now a sky pirate."
    preset.creator_notes = "v2 notes"
    preset.alternate_greetings = ["Ahoy."]
    preset.tags = ["pirate"]
    card = export_card_json(preset, None)
    assert card["data"]["description"] == card["description"] == "Now a sky pirate."
    assert card["data"]["creator_notes"] == card["creatorcomment"] == "v2 notes"
    assert card["data"]["alternate_greetings"] == ["Ahoy."]
    assert card["data"]["tags"] == card["tags"] == ["pirate"]
    assert card["data"]["personality"] == "curious, dry humour"


def test_card_book_is_a_second_knowledge_base_and_exports_back(tmp_path: Path) -> None:
    card = card_document(
        book=[
            card_book_entry(0, ["harbour"], "Ships dock."),
            card_book_entry(1, ["gull"], "Noisy."),
        ],
        book_name="Harbour book",
    )
    result = import_sillytavern(write(tmp_path, "aria.json", json.dumps(card)))
    assert [kb.kb_displayName for kb in result.knowledge_bases] == [
        "Harbour book",
    ]
    assert result.character is not None
    assert export_card_json(result.character, result.character_book) == card
    without = export_card_json(result.character, None)
    assert "character_book" not in without["data"]


def test_bad_book_entry_costs_only_that_entry(tmp_path: Path) -> None:
    bad = card_book_entry(1, ["x"], "bad", comment="broken")
    bad["keys"] = "x"
    card = card_document(book=[card_book_entry(0, ["ok"], "fine"), bad])
    result = import_sillytavern(write(tmp_path, "aria.json", json.dumps(card)))
    assert result.character_book is not None and len(result.character_book.entries) == 1
    assert any("broken" in w and "keys" in w for w in result.warnings)
    assert result.character is not None
    assert export_card_json(result.character, result.character_book) == card


def test_v1_flat_card_imports_and_exports_as_v2(tmp_path: Path) -> None:
    v1 = card_document("Old Timer", spec="v1")
    result = import_sillytavern(write(tmp_path, "old.json", json.dumps(v1)))
    preset = result.character
    assert preset is not None and preset.name == "Old Timer" and preset.card_spec is None
    card = export_card_json(preset, None)
    assert card["spec"] == "chara_card_v2" and card["data"]["name"] == "Old Timer"
    assert card["data"]["first_mes"] == v1["first_mes"]
    assert card["creatorcomment"] == v1["creatorcomment"]


def test_v3_spec_can_be_asked_for_and_keeps_v3_fields() -> None:
    preset = CharacterDefinition(name="Nova", nickname="N", source=["https://example.org/nova"])
    card = export_card_json(preset, None, spec="v3")
    assert (card["spec"], card["spec_version"]) == ("chara_card_v3", "3.0")
    assert card["data"]["nickname"] == "N" and card["data"]["group_only_greetings"] == []


def test_charx_imports_card_avatar_and_assets(tmp_path: Path) -> None:
    icon = blank_png(4, 4)
    card = card_document("Zip", spec="v3")
    card["data"]["assets"] = [
        {
            "type": "icon",
            "uri": "embeded://assets/icon/images/main.png",
            "name": "main",
            "ext": "png",
        },
        {"type": "emotion", "uri": "embeded://assets/emotion/joy.png", "name": "joy", "ext": "png"},
    ]
    archive = charx_archive(
        card, {"assets/icon/images/main.png": icon, "assets/emotion/joy.png": icon}
    )
    result = import_sillytavern(write(tmp_path, "zip.charx", archive))
    assert result.kind == "character_charx"
    assert result.avatar_png == icon
    assert set(result.assets) == {"assets/icon/images/main.png", "assets/emotion/joy.png"}
    assert result.character is not None and result.character.assets is not None
    assert export_card_json(result.character, None) == card


def _zip(members: list[tuple[zipfile.ZipInfo | str, bytes]]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for info, data in members:
            archive.writestr(info, data)
    return buffer.getvalue()


def test_charx_with_a_dot_dot_member_is_refused(tmp_path: Path) -> None:
    data = _zip([("card.json", json.dumps(card_document()).encode()), ("../evil", b"x")])
    with pytest.raises(FileFormatError) as caught:
        import_sillytavern(write(tmp_path, "evil.charx", data))
    assert caught.value.path.name == "evil.charx"
    assert problem_fields(caught) == ["zip:../evil"]
    assert ".." in caught.value.problems[0].reason


def test_truncated_zip_is_refused(tmp_path: Path) -> None:
    data = charx_archive(card_document())
    with pytest.raises(FileFormatError) as caught:
        import_sillytavern(write(tmp_path, "cut.charx", data[: len(data) // 2]))
    assert problem_fields(caught) == ["zip"]


def test_png_without_a_card_chunk_is_refused(tmp_path: Path) -> None:
    with pytest.raises(FileFormatError) as caught:
        import_sillytavern(write(tmp_path, "plain.png", blank_png()))
    assert caught.value.path.name == "plain.png"
    assert "no character card" in str(caught.value)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("this is not base64!", "not base64"),
        (base64.b64encode(b"{not json").decode(), "not JSON"),
        (base64.b64encode(b"\xff\xfe\xfd").decode(), "not UTF-8"),
    ],
)
def test_png_with_a_broken_card_chunk_is_refused(tmp_path: Path, text: str, reason: str) -> None:
    png = replace_text_chunks(blank_png(), [("chara", text)])
    with pytest.raises(FileFormatError) as caught:
        import_sillytavern(write(tmp_path, "broken.png", png))
    assert problem_fields(caught) == ["png:chara"]
    assert reason in caught.value.problems[0].reason


def test_truncated_png_is_refused(tmp_path: Path) -> None:
    png = card_png(card_document())
    with pytest.raises(FileFormatError, match="truncated"):
        import_sillytavern(write(tmp_path, "cut.png", png[:-20]))


@pytest.mark.parametrize(
    ("patch", "field"),
    [
        ({"description": 5}, "data.description"),
        ({"alternate_greetings": {"a": 1}}, "data.alternate_greetings"),
        ({"extensions": []}, "data.extensions"),
    ],
)
def test_card_field_of_the_wrong_type_is_refused_naming_the_field(
    tmp_path: Path, patch: dict[str, Any], field: str
) -> None:
    card = card_document()
    card["data"].update(patch)
    with pytest.raises(FileFormatError) as caught:
        import_sillytavern(write(tmp_path, "bad.json", json.dumps(card)))
    assert field in problem_fields(caught)


def test_unknown_card_spec_is_refused() -> None:
    with pytest.raises(FileFormatError, match="unknown card spec"):
        import_sillytavern_bytes(json.dumps({"spec": "chara_card_v9", "data": {}}).encode(), "x")


def test_tags_given_as_text_are_split_like_sillytavern_does(tmp_path: Path) -> None:
    card = card_document()
    card["data"]["tags"] = "elf, ranger"
    result = import_sillytavern(write(tmp_path, "a.json", json.dumps(card)))
    assert result.character is not None and result.character.tags == ["elf", "ranger"]


def test_a_card_without_a_name_is_named_after_its_file(tmp_path: Path) -> None:
    card = card_document("")
    result = import_sillytavern(write(tmp_path, "Nameless.json", json.dumps(card)))
    assert result.character is not None and result.character.name == "Nameless"
    assert any("no name" in w for w in result.warnings)


def test_chat_files_are_recognised_by_content_whatever_their_name(tmp_path: Path) -> None:
    path = tmp_path / "chat.txt"
    path.write_text(chat_jsonl([chat_message("Aria", "hi")]), encoding="utf-8")
    result = import_sillytavern(path)
    assert result.kind == "chat" and result.chat is not None
    assert result.knowledge_bases == [] and result.character is None
