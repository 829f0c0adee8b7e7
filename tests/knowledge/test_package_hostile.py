"""Importing a hostile or broken ``.ctkbz`` is refused, names the member, and writes nothing."""

from __future__ import annotations

import io
import json
import stat
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from storyloom.core.errors import FileFormatError
from storyloom.knowledge.package import (
    MANIFEST_MEMBER,
    VECTORS_MEMBER,
    PackageLimits,
    import_package,
)
from storyloom.store.database import Database

KB_JSON = json.dumps(
    {"kb_id": "kb_hostile", "entries": [{"id": "e1", "content": {"value": "text"}}]}
).encode()


def build(path: Path, members: list[tuple[str | zipfile.ZipInfo, bytes]]) -> Path:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in members:
            archive.writestr(name, data)
    return path


def refused(
    tmp_path: Path, db: Database, package: Path, limits: PackageLimits | None = None
) -> FileFormatError:
    """Import ``package`` expecting a refusal; check nothing was written anywhere."""
    dest = tmp_path / "kbs" / "imported"
    with pytest.raises(FileFormatError) as caught:
        import_package(package, dest, db=db, available_model_ids=[], limits=limits)
    assert caught.value.path == package
    assert not (tmp_path / "kbs").exists()
    count = db.connection().execute("SELECT COUNT(*) FROM kb_entry_index").fetchall()
    assert count == [(0,)]
    return caught.value


def fields(error: FileFormatError) -> list[str]:
    return [problem.field for problem in error.problems]


def symlink(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name)
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return info


def fifo(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name)
    info.external_attr = (stat.S_IFIFO | 0o644) << 16
    return info


@pytest.mark.parametrize(
    ("member", "reason"),
    [
        ("../escape.txt", "leaves the package folder"),
        ("media/../../escape.png", "leaves the package folder"),
        ("/etc/cron.d/evil", "absolute path"),
        ("C:/Windows/evil.dll", "drive letter"),
        ("media\\..\\..\\evil.png", "backslash"),
        ("media//double.png", "empty or '.' path component"),
        ("evil.sh", "not part of a knowledge package"),
        ("vectors/extra.bin", "not part of a knowledge package"),
        (symlink("media/link.png"), "symbolic link"),
        (fifo("media/pipe"), "special file"),
    ],
    ids=lambda value: value.filename if isinstance(value, zipfile.ZipInfo) else None,
)
def test_unsafe_member_is_refused_by_name(
    tmp_path: Path, db: Database, member: str | zipfile.ZipInfo, reason: str
) -> None:
    package = build(tmp_path / "p.ctkbz", [("knowledge.json", KB_JSON), (member, b"/etc/passwd")])
    error = refused(tmp_path, db, package)
    name = member.filename if isinstance(member, zipfile.ZipInfo) else member
    assert fields(error) == [name]
    assert reason in str(error)


def test_member_appearing_twice_is_refused(tmp_path: Path, db: Database) -> None:
    with pytest.warns(UserWarning, match="Duplicate name"):
        package = build(
            tmp_path / "p.ctkbz",
            [("knowledge.json", KB_JSON), ("media/a.png", b"1"), ("media/a.png", b"2")],
        )
    error = refused(tmp_path, db, package)
    assert fields(error) == ["media/a.png"]
    assert "appears twice" in str(error)


def test_zip_bomb_by_compression_ratio_is_refused(tmp_path: Path, db: Database) -> None:
    zeros = bytes(20 * 1024 * 1024)
    package = build(tmp_path / "p.ctkbz", [("knowledge.json", KB_JSON), ("media/big.bin", zeros)])
    error = refused(tmp_path, db, package)
    assert fields(error) == ["media/big.bin"]
    assert "possible zip bomb" in str(error)


def test_too_many_members_are_refused(tmp_path: Path, db: Database) -> None:
    media = [(f"media/{i}.txt", b"x") for i in range(5)]
    package = build(tmp_path / "p.ctkbz", [("knowledge.json", KB_JSON), *media])
    error = refused(tmp_path, db, package, PackageLimits(max_members=4))
    assert "6 members; at most 4" in str(error)


def test_total_uncompressed_size_over_the_limit_is_refused(tmp_path: Path, db: Database) -> None:
    media = [(f"media/{i}.bin", bytes(range(256)) * 4) for i in range(3)]
    package = build(tmp_path / "p.ctkbz", [("knowledge.json", KB_JSON), *media])
    error = refused(tmp_path, db, package, PackageLimits(max_total_bytes=2048))
    assert "bytes uncompressed in all; at most 2048" in str(error)


def test_member_over_the_size_limit_is_refused(tmp_path: Path, db: Database) -> None:
    package = build(
        tmp_path / "p.ctkbz", [("knowledge.json", KB_JSON), ("media/a.bin", bytes(range(256)))]
    )
    error = refused(tmp_path, db, package, PackageLimits(max_member_bytes=100))
    assert fields(error) == ["media/a.bin"]


def test_truncated_package_is_refused_clearly(tmp_path: Path, db: Database) -> None:
    whole = build(tmp_path / "whole.ctkbz", [("knowledge.json", KB_JSON)]).read_bytes()
    package = tmp_path / "p.ctkbz"
    package.write_bytes(whole[: len(whole) // 2])
    error = refused(tmp_path, db, package)
    assert "not a readable .ctkbz (zip) package, or truncated" in str(error)


def test_file_that_is_not_a_zip_is_refused(tmp_path: Path, db: Database) -> None:
    package = tmp_path / "p.ctkbz"
    package.write_text("just text")
    assert "not a readable .ctkbz" in str(refused(tmp_path, db, package))


def test_corrupt_member_data_is_refused_naming_the_member(tmp_path: Path, db: Database) -> None:
    package = tmp_path / "p.ctkbz"
    with zipfile.ZipFile(package, "w", compression=zipfile.ZIP_STORED) as archive:
        archive.writestr("knowledge.json", KB_JSON)
    raw = bytearray(package.read_bytes())
    at = raw.index(b"kb_hostile")
    raw[at : at + 2] = b"XX"
    package.write_bytes(bytes(raw))
    error = refused(tmp_path, db, package)
    assert fields(error) == ["knowledge.json"]


def test_package_without_knowledge_json_is_refused(tmp_path: Path, db: Database) -> None:
    package = build(tmp_path / "p.ctkbz", [("media/a.png", b"1")])
    error = refused(tmp_path, db, package)
    assert fields(error) == ["knowledge.json"]
    assert "missing" in str(error)


def test_invalid_knowledge_json_names_the_field(tmp_path: Path, db: Database) -> None:
    bad = json.dumps({"kb_id": "kb_x", "entries": [{"id": ""}]}).encode()
    package = build(tmp_path / "p.ctkbz", [("knowledge.json", bad)])
    error = refused(tmp_path, db, package)
    assert fields(error) == ["knowledge.json:entries[0].id"]


def test_knowledge_json_that_is_not_json_is_refused(tmp_path: Path, db: Database) -> None:
    package = build(tmp_path / "p.ctkbz", [("knowledge.json", b"{not json")])
    error = refused(tmp_path, db, package)
    assert fields(error) == ["knowledge.json"]
    assert "not valid JSON" in str(error)


def npy(array: npt.NDArray[Any]) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=array.dtype == object)
    return buffer.getvalue()


def manifest(count: int, dim: int) -> bytes:
    entries = [{"entry_id": f"e{i}", "content_hash": "0" * 64} for i in range(count)]
    return json.dumps({"embedding_model_id": "m/x", "dim": dim, "entries": entries}).encode()


def test_vectors_without_a_manifest_are_refused(tmp_path: Path, db: Database) -> None:
    vectors = npy(np.zeros((1, 4), dtype=np.float32))
    package = build(tmp_path / "p.ctkbz", [("knowledge.json", KB_JSON), (VECTORS_MEMBER, vectors)])
    assert fields(refused(tmp_path, db, package)) == [MANIFEST_MEMBER]


@pytest.mark.parametrize(
    ("array", "reason"),
    [
        (np.zeros((2, 4), dtype=np.float32), "manifest says (1, 4)"),
        (np.zeros((1, 4), dtype=np.float64), "float32"),
        (np.array([[None, 1, 2, 3]], dtype=object), "not a numpy array file"),
        (np.full((1, 4), np.nan, dtype=np.float32), "NaN"),
    ],
    ids=["shape", "dtype", "pickled-objects", "nan"],
)
def test_vector_matrix_that_does_not_match_its_manifest_is_refused(
    tmp_path: Path, db: Database, array: npt.NDArray[Any], reason: str
) -> None:
    package = build(
        tmp_path / "p.ctkbz",
        [
            ("knowledge.json", KB_JSON),
            (MANIFEST_MEMBER, manifest(1, 4)),
            (VECTORS_MEMBER, npy(array)),
        ],
    )
    error = refused(tmp_path, db, package)
    assert fields(error) == [VECTORS_MEMBER]
    assert reason in str(error)


def test_manifest_that_does_not_validate_names_its_field(tmp_path: Path, db: Database) -> None:
    package = build(
        tmp_path / "p.ctkbz",
        [
            ("knowledge.json", KB_JSON),
            (MANIFEST_MEMBER, json.dumps({"embedding_model_id": "m", "dim": 0}).encode()),
            (VECTORS_MEMBER, npy(np.zeros((0, 1), dtype=np.float32))),
        ],
    )
    assert fields(refused(tmp_path, db, package)) == [f"{MANIFEST_MEMBER}:dim"]
