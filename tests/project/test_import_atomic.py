"""A file that fails to import leaves the project exactly as it was, and every hostile
shape of JSON or zip is the project's format error naming file, field and reason."""

from __future__ import annotations

import io
import json
import struct
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from storyloom.core.errors import FileFormatError
from storyloom.knowledge.knowledge_base import KnowledgeBase, save_knowledge_base
from storyloom.knowledge.package import export_package
from storyloom.project.import_staging import StagedImport
from storyloom.project.knowledge_import import import_knowledge_file, package_kb_id
from storyloom.project.project_file import init_project

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sillytavern"
CARD = json.loads((FIXTURES / "card_academy_zh_v3_mvu.json").read_text(encoding="utf-8"))


def tree(root: Path) -> dict[str, bytes | None]:
    """Every path under ``root`` with its bytes (None for a folder)."""
    return {
        str(p.relative_to(root)): None if p.is_dir() else p.read_bytes()
        for p in sorted(root.rglob("*"))
    }


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    init_project(root)
    return root


def refused(path: Path, project: Path, field: str) -> FileFormatError:
    global_folder = project.parent / "home" / "knowledge"
    before = tree(project.parent)
    with pytest.raises(FileFormatError) as caught:
        import_knowledge_file(path, project_dir=project, global_folder=global_folder)
    assert caught.value.path == path
    assert any(field in p.field for p in caught.value.problems), caught.value.problems
    assert tree(project.parent) == before
    return caught.value


def charx(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("card.json", json.dumps(CARD))
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def book(extra: dict[str, Any] | None = None, content: str = "fine") -> str:
    entry = {"uid": 0, "key": ["castle"], "content": content, **(extra or {})}
    return json.dumps({"entries": {"0": entry}})


def test_a_charx_whose_members_collide_imports_nothing(tmp_path: Path, project: Path) -> None:
    card = charx(tmp_path / "c.charx", {"assets/x": b"1", "assets/x/y": b"2"})
    refused(card, project, "zip:assets/x/y")


def test_a_charx_member_name_longer_than_a_file_name_imports_nothing(
    tmp_path: Path, project: Path
) -> None:
    card = charx(tmp_path / "c.charx", {"assets/" + "n" * 300: b"1"})
    refused(card, project, "zip:assets/")


def test_world_info_with_a_lone_surrogate_imports_nothing(tmp_path: Path, project: Path) -> None:
    path = tmp_path / "wi.json"
    path.write_text(book(content="broken \ud800 text"))
    refused(path, project, "entries.0.content")


def test_world_info_with_900_deep_extensions_imports_nothing(tmp_path: Path, project: Path) -> None:
    deep = "[" * 900 + "]" * 900
    path = tmp_path / "wi.json"
    path.write_text(book().replace('"content"', f'"extensions": {{"x": {deep}}}, "content"'))
    refused(path, project, "entries.0.extensions.x")


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("[" * 100_000 + "]" * 100_000, "nested deeper"),
        (book().replace('"uid": 0', '"uid": ' + "9" * 5000), "digits"),
        (book().replace('"uid": 0', '"uid": NaN'), "NaN"),
        (book().replace('"uid": 0', '"uid": -Infinity'), "Infinity"),
        (book().replace('"uid": 0', '"uid": 1e999'), "too large"),
        (book().replace('"castle"', '"\\udfff"'), "surrogate"),
    ],
    ids=["deep", "huge-int", "nan", "infinity", "float-overflow", "surrogate"],
)
def test_hostile_json_is_a_format_error_with_the_reason(
    text: str, reason: str, tmp_path: Path, project: Path
) -> None:
    path = tmp_path / "wi.json"
    path.write_text(text)
    error = refused(path, project, "")
    assert reason in str(error)


def _package(tmp_path: Path, kb: KnowledgeBase) -> Path:
    folder = tmp_path / "src_kb"
    save_knowledge_base(kb, folder)
    dest = tmp_path / "book.ctkbz"
    export_package(folder, dest, include_vectors=False)
    return dest


def _rewrite(package: Path, member: str, data: bytes) -> None:
    with zipfile.ZipFile(package) as archive:
        members = {i.filename: archive.read(i) for i in archive.infolist()}
    members[member] = data
    with zipfile.ZipFile(package, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, content in members.items():
            archive.writestr(name, content)


def test_a_package_with_a_lone_surrogate_imports_nothing(tmp_path: Path, project: Path) -> None:
    package = _package(tmp_path, KnowledgeBase(kb_displayName="Book"))
    _rewrite(package, "knowledge.json", b'{"kb_id": "kb_x", "kb_displayName": "\\ud800"}')
    refused(package, project, "kb_displayName")


def _patched(data: bytes, signature: bytes, offset: int, value: bytes) -> bytes:
    """``data`` with ``value`` written ``offset`` bytes into every record ``signature``."""
    out = bytearray(data)
    start = out.find(signature)
    while start != -1:
        out[start + offset : start + offset + len(value)] = value
        start = out.find(signature, start + 4)
    return bytes(out)


LOCAL, CENTRAL = b"PK\x03\x04", b"PK\x01\x02"


def _one_member_zip(name: str, data: bytes) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(name, data)
    return buffer.getvalue()


HOSTILE_MEMBERS: dict[str, Callable[[bytes], bytes]] = {
    "encrypted": lambda z: _patched(_patched(z, LOCAL, 6, b"\x01"), CENTRAL, 8, b"\x01"),
    "unsupported-method": lambda z: _patched(
        _patched(z, LOCAL, 8, struct.pack("<H", 97)), CENTRAL, 10, struct.pack("<H", 97)
    ),
    "unsupported-version": lambda z: _patched(z, CENTRAL, 6, struct.pack("<H", 99)),
    "corrupt-deflate": lambda z: z[:40] + bytes(b ^ 0x55 for b in z[40:60]) + z[60:],
}


@pytest.mark.parametrize("kind", sorted(HOSTILE_MEMBERS))
def test_a_hostile_zip_member_is_a_format_error_for_every_zip_importer(
    kind: str, tmp_path: Path, project: Path
) -> None:
    card = _one_member_zip("card.json", json.dumps(CARD).encode() * 3)
    path = tmp_path / "c.charx"
    path.write_bytes(HOSTILE_MEMBERS[kind](card))
    # A version too new is refused when the archive is opened: the field is the zip.
    refused(path, project, "zip" if kind == "unsupported-version" else "card.json")
    kb_json = json.dumps({"kb_id": "kb_x", "entries": []}).encode() + b" " * 500
    package = tmp_path / "p.ctkbz"
    package.write_bytes(HOSTILE_MEMBERS[kind](_one_member_zip("knowledge.json", kb_json)))
    assert package_kb_id(package) is None
    refused(package, project, "")


def test_a_failing_last_step_takes_back_every_file_already_moved(project: Path) -> None:
    before = tree(project)
    staged = StagedImport(project, project / "source.json")
    staged.add_folder(project / "knowledgebases" / "new", {"knowledge.json": b"{}", "media": None})
    staged.add_file(project / "presets" / "characters" / "x.json", b"{}")

    def register() -> None:
        assert (project / "knowledgebases" / "new" / "knowledge.json").is_file()
        raise RuntimeError("project.json could not be written")

    with pytest.raises(RuntimeError, match=r"project\.json"):
        staged.commit(register)
    assert tree(project) == before
