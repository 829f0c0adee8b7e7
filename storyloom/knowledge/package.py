"""Knowledge-base packages: ``.ctkbz`` files (seed 000 section 2.2.2, "sharing").

A package is a zip file with this layout and nothing else::

    knowledge.json              the KB file
    media/...                   its media files
    vectors/manifest.json       optional: model id, dimension, entry ids and content hashes
    vectors/embeddings.npy      optional: float32 matrix, one row per manifest entry

Vectors travel with the content hash of the text they were made from, so an importer
uses a vector only when its model is available here and the entry's text is still that
text; everything else is re-embedded.

Import treats the file as hostile: every member is checked before anything is written
(path traversal, absolute paths, drive letters, symlinks and other special files,
encryption, unknown members, member count, total size, compression ratio), the KB is
validated, and the result is written to a temporary folder that is renamed into place,
so a failed import leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import re
import shutil
import stat
import tempfile
import uuid
import zipfile
from collections import Counter
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from storyloom.core.errors import (
    FieldProblem,
    FileFormatError,
    InvalidInput,
    StoryloomError,
    problems_from_validation,
)
from storyloom.core.settings import canonical_model_id
from storyloom.knowledge.catalog import LoadedKB
from storyloom.knowledge.knowledge_base import (
    KNOWLEDGE_FILE,
    MEDIA_DIR,
    KnowledgeBase,
    knowledge_file,
    load_knowledge_base,
    parse_knowledge_base,
)
from storyloom.knowledge.search_index import IndexedEntry, sync_kb
from storyloom.knowledge.vector_index import StoredVector, load_vectors, store_vectors
from storyloom.sillytavern.charx import (
    CARD_MEMBER,
    ZIP_MEMBER_ERRORS,
    ZIP_OPEN_ERRORS,
    member_layout_problems,
)
from storyloom.sillytavern.untrusted_json import UntrustedJsonError, loads_untrusted
from storyloom.store.database import Database

PACKAGE_SUFFIX = ".ctkbz"
VECTOR_DIR = "vectors"
MANIFEST_MEMBER = f"{VECTOR_DIR}/manifest.json"
VECTORS_MEMBER = f"{VECTOR_DIR}/embeddings.npy"
PACKAGE_FORMAT = 1

_DRIVE = re.compile(r"^[A-Za-z]:")
_CHUNK = 1 << 20


ZIP_SUFFIX = ".zip"
_PEEK_ERRORS: tuple[type[Exception], ...] = (OSError, *ZIP_OPEN_ERRORS)


def is_kb_package(path: Path) -> bool:
    """Whether ``path`` is a KB package: a ``.ctkbz``, or a ``.zip`` laid out like one
    (seed 000 2.2: ``knowledge.json`` and ``media/``, shared "as .zip or .ctkbz").

    A ``.zip`` is told from a CHARX card by its contents: ``knowledge.json`` at its top
    and no ``card.json``. A zip that cannot be opened is not a package here; the CHARX
    reader then reports what is wrong with it.
    """
    suffix = path.suffix.lower()
    if suffix == PACKAGE_SUFFIX:
        return True
    if suffix != ZIP_SUFFIX:
        return False
    try:
        with zipfile.ZipFile(path) as archive:
            names = set(archive.namelist())
    except _PEEK_ERRORS:
        return False
    prefix = wrapper_prefix(names)
    names = {name.removeprefix(prefix) for name in names}
    return KNOWLEDGE_FILE in names and CARD_MEMBER not in names


def wrapper_prefix(names: Collection[str]) -> str:
    """``"NAME/"`` when every member of a zip sits in the one folder NAME that holds
    ``knowledge.json`` (a folder zipped whole, as file managers do), else ``""``."""
    if KNOWLEDGE_FILE in names:
        return ""
    tops = {name.split("/", 1)[0] for name in names}
    if len(tops) != 1:
        return ""
    prefix = f"{next(iter(tops))}/"
    return prefix if f"{prefix}{KNOWLEDGE_FILE}" in names else ""


def _unwrapped(infos: list[zipfile.ZipInfo]) -> list[zipfile.ZipInfo]:
    """``infos`` read as if their wrapping folder (:func:`wrapper_prefix`) were the top;
    the archive still opens each by its stored name (``orig_filename``)."""
    prefix = wrapper_prefix([info.filename for info in infos])
    if not prefix:
        return infos
    out: list[zipfile.ZipInfo] = []
    for info in infos:
        if info.filename == prefix:
            continue
        inner = copy.copy(info)
        inner.filename = info.filename.removeprefix(prefix)
        out.append(inner)
    return out


class PackageError(StoryloomError):
    """A package cannot be written or imported for a reason other than its content."""


class EmbeddingModelChoiceNeeded(InvalidInput):
    """The package's vectors were made with a model this machine lacks, and no model was
    chosen to embed it again with: the user picks one of ``available`` (nothing written)."""

    def __init__(self, src: Path, package_model_id: str, available: Sequence[str]) -> None:
        self.package_model_id = package_model_id
        self.available = list(available)
        problem = FieldProblem(
            "embedding_model",
            f"the package's vectors were made with {package_model_id!r}, which is not "
            f"available here; choose the model to embed it with: {', '.join(available)}",
        )
        super().__init__(f"{src.name}: {problem}", [problem])


@dataclass(frozen=True)
class PackageLimits:
    """What an import accepts. The ratio check applies to members above ``ratio_floor``
    bytes, since small text files legitimately compress very well."""

    max_members: int = 20_000
    max_total_bytes: int = 4 * 1024**3
    max_member_bytes: int = 2 * 1024**3
    max_ratio: float = 200.0
    ratio_floor_bytes: int = 1024**2


class ManifestEntry(BaseModel):
    model_config = ConfigDict(extra="allow")

    entry_id: str = Field(min_length=1)
    content_hash: str = Field(min_length=1)


class VectorManifest(BaseModel):
    """``vectors/manifest.json``: row ``i`` of the matrix is the vector of ``entries[i]``."""

    model_config = ConfigDict(extra="allow")

    format: int = Field(default=PACKAGE_FORMAT, ge=1)
    embedding_model_id: str = Field(min_length=1)
    dim: int = Field(gt=0)
    dtype: Literal["float32"] = "float32"
    entries: list[ManifestEntry] = Field(default_factory=list)


@dataclass(frozen=True)
class PackageExportReport:
    path: Path
    kb_id: str
    entries: int
    media_files: int
    vectors_exported: int
    vectors_missing: int
    embedding_model_id: str | None
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class PackageImportReport:
    """What an import did, and what is left to do.

    ``reembed_needed``: some entries have no usable vector; schedule an embedding job with
    the model the KB resolves to. When ``package_model_available`` is False, the KB's
    ``embedding_model_id`` (``kb_model_id``) may name a model missing here: the caller
    decides whether to point it at a local model.
    """

    kb_id: str
    folder: Path
    entries: int
    media_files: int
    vectors_used: bool
    vectors_inserted: int
    reembed_needed: bool
    package_model_id: str | None
    package_model_available: bool
    kb_model_id: str | None
    message: str
    warnings: tuple[str, ...] = field(default=())


# -- export ----------------------------------------------------------------------------


def export_package(
    source: Path | KnowledgeBase | LoadedKB,
    dest: Path,
    *,
    include_vectors: bool,
    db: Database | None = None,
    model_id: str | None = None,
) -> PackageExportReport:
    """Write ``source`` (a KB folder, its knowledge.json, a loaded KB, or a KB without
    media) to the zip ``dest``, atomically.

    With ``include_vectors``, vectors of ``model_id`` (default: the KB's
    ``embedding_model_id``) whose text is still current are read from ``db``.
    """
    kb, folder = _export_source(source)
    warnings: list[str] = []
    members: list[tuple[str, bytes | Path]] = [
        (KNOWLEDGE_FILE, _kb_json_bytes(kb)),
    ]
    media = _media_files(folder, warnings) if folder is not None else []
    members.extend(media)
    present = {name for name, _ in media}
    for entry in kb.entries:
        path = (entry.content.path or "").replace("\\", "/")
        if path.startswith(f"{MEDIA_DIR}/") and path not in present:
            warnings.append(f"entry {entry.id!r} refers to {path}, which is not in the folder")
    exported = missing = 0
    used_model: str | None = None
    if include_vectors:
        used_model = model_id or kb.embedding_model_id
        if db is None or not used_model:
            raise PackageError(
                "exporting vectors needs the database and a model id (the KB's "
                "embedding_model_id is not set)"
            )
        vector_members, exported, missing = _vector_members(kb, db, used_model, warnings)
        members.extend(vector_members)
    _write_zip_atomically(dest, members)
    return PackageExportReport(
        path=dest,
        kb_id=kb.kb_id,
        entries=len(kb.entries),
        media_files=len(media),
        vectors_exported=exported,
        vectors_missing=missing,
        embedding_model_id=used_model,
        warnings=tuple(warnings),
    )


def _export_source(source: Path | KnowledgeBase | LoadedKB) -> tuple[KnowledgeBase, Path | None]:
    if isinstance(source, KnowledgeBase):
        return source, None
    if isinstance(source, LoadedKB):
        folder = source.folder if str(source.folder) not in ("", ".") else None
        return source.kb, folder
    path = knowledge_file(source)
    return load_knowledge_base(path), path.parent


def _kb_json_bytes(kb: KnowledgeBase) -> bytes:
    return (json.dumps(kb.to_json(), ensure_ascii=False, indent=2) + "\n").encode("utf-8")


def _media_files(folder: Path, warnings: list[str]) -> list[tuple[str, Path]]:
    root = folder / MEDIA_DIR
    if not root.is_dir() or root.is_symlink():
        return []
    found: list[tuple[str, Path]] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        here = Path(dirpath)
        for name in sorted(dirnames):
            if (here / name).is_symlink():
                warnings.append(f"skipped the symbolic link {(here / name).relative_to(folder)}")
        for name in sorted(filenames):
            path = here / name
            relative = path.relative_to(folder).as_posix()
            if path.is_symlink() or not path.is_file():
                warnings.append(f"skipped {relative}: not a regular file")
                continue
            if _name_problem(relative) is not None:
                warnings.append(f"skipped {relative}: its name cannot go into a package")
                continue
            found.append((relative, path))
    return sorted(found)


def _vector_members(
    kb: KnowledgeBase, db: Database, model_id: str, warnings: list[str]
) -> tuple[list[tuple[str, bytes | Path]], int, int]:
    current = {e.id: IndexedEntry.of(kb.kb_id, e).content_hash for e in kb.entries}
    rows = [
        (entry_id, digest, vector)
        for entry_id, digest, vector in load_vectors(db.connection(), kb.kb_id, model_id)
        if current.get(entry_id) == digest
    ]
    if rows:
        dims = Counter(len(vector) for _, _, vector in rows)
        dim = dims.most_common(1)[0][0]
        if len(dims) > 1:
            warnings.append(f"vectors of other lengths than {dim} were left out")
            rows = [row for row in rows if len(row[2]) == dim]
    else:
        dim = 0
    missing = len(current) - len(rows)
    if missing:
        warnings.append(f"{missing} entries have no current vector of {model_id!r}")
    if not rows:
        return [], 0, missing
    manifest = VectorManifest(
        embedding_model_id=model_id,
        dim=dim,
        entries=[ManifestEntry(entry_id=e, content_hash=h) for e, h, _ in rows],
    )
    matrix = np.stack([vector for _, _, vector in rows]).astype(np.float32)
    buffer = io.BytesIO()
    np.save(buffer, matrix, allow_pickle=False)
    manifest_bytes = json.dumps(manifest.model_dump(mode="json"), indent=2).encode("utf-8")
    return (
        [(MANIFEST_MEMBER, manifest_bytes), (VECTORS_MEMBER, buffer.getvalue())],
        len(rows),
        missing,
    )


def _write_zip_atomically(dest: Path, members: list[tuple[str, bytes | Path]]) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            with zipfile.ZipFile(handle, "w", compression=zipfile.ZIP_DEFLATED) as archive:
                for name, data in members:
                    if isinstance(data, Path):
                        archive.write(data, name)
                    else:
                        archive.writestr(name, data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, dest)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)
        raise
    _fsync_dir(dest.parent)


def _fsync_dir(folder: Path) -> None:
    dir_fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


# -- import ----------------------------------------------------------------------------


def _name_problem(name: str) -> str | None:
    """Why a member name is unsafe or outside the layout, or None."""
    if not name:
        return "empty name"
    if any(ord(c) < 32 for c in name):
        return "control character in the name"
    if "\\" in name:
        return "backslash in the path (not a portable zip path)"
    if name.startswith("/"):
        return "absolute path"
    if _DRIVE.match(name):
        return "path with a drive letter"
    parts = name.rstrip("/").split("/")
    if ".." in parts:
        return "path leaves the package folder ('..')"
    if any(part in ("", ".") for part in parts):
        return "empty or '.' path component"
    if name.endswith("/"):
        if parts[0] in (MEDIA_DIR, VECTOR_DIR) and (parts[0] == MEDIA_DIR or len(parts) == 1):
            return None
        return "folder outside media/ and vectors/"
    if name in (KNOWLEDGE_FILE, MANIFEST_MEMBER, VECTORS_MEMBER):
        return None
    if parts[0] == MEDIA_DIR and len(parts) > 1:
        return None
    return "not part of a knowledge package (knowledge.json, media/, vectors/)"


def _check_members(
    src: Path, infos: list[zipfile.ZipInfo], limits: PackageLimits
) -> dict[str, zipfile.ZipInfo]:
    if len(infos) > limits.max_members:
        raise FileFormatError(
            src, [FieldProblem("", f"{len(infos)} members; at most {limits.max_members}")]
        )
    problems: list[FieldProblem] = []
    files: dict[str, zipfile.ZipInfo] = {}
    seen: set[str] = set()
    total = 0
    for info in infos:
        name = info.filename
        reason = _name_problem(name)
        # Unix zips keep st_mode in the high 16 bits; a file type of 0 means none recorded.
        mode = info.external_attr >> 16
        if reason is None and stat.S_ISLNK(mode):
            reason = "symbolic link"
        elif reason is None and stat.S_IFMT(mode) not in (0, stat.S_IFREG, stat.S_IFDIR):
            reason = "special file (not a regular file or folder)"
        elif reason is None and info.flag_bits & 0x1:
            reason = "encrypted member"
        elif reason is None and name.rstrip("/") in seen:
            reason = "appears twice"
        if reason is None and not info.is_dir():
            size = info.file_size
            total += size
            if size > limits.max_member_bytes:
                reason = f"{size} bytes uncompressed; at most {limits.max_member_bytes}"
            elif size > limits.ratio_floor_bytes and size > limits.max_ratio * max(
                info.compress_size, 1
            ):
                ratio = size / max(info.compress_size, 1)
                reason = (
                    f"compression ratio {ratio:.0f}:1 exceeds {limits.max_ratio:.0f}:1 "
                    "(possible zip bomb)"
                )
        if reason is not None:
            problems.append(FieldProblem(name, reason))
            continue
        seen.add(name.rstrip("/"))
        if not info.is_dir():
            files[name] = info
    if total > limits.max_total_bytes:
        problems.append(
            FieldProblem("", f"{total} bytes uncompressed in all; at most {limits.max_total_bytes}")
        )
    if KNOWLEDGE_FILE not in files and not problems:
        problems.append(FieldProblem(KNOWLEDGE_FILE, "missing: not a knowledge package"))
    if (MANIFEST_MEMBER in files) != (VECTORS_MEMBER in files) and not problems:
        have, lacking = (
            (MANIFEST_MEMBER, VECTORS_MEMBER)
            if MANIFEST_MEMBER in files
            else (VECTORS_MEMBER, MANIFEST_MEMBER)
        )
        problems.append(FieldProblem(lacking, f"missing while {have} is present"))
    problems.extend(FieldProblem(n, r) for n, r in member_layout_problems(list(files)))
    if problems:
        raise FileFormatError(src, problems)
    return files


def _open_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, src: Path) -> IO[bytes]:
    try:
        return archive.open(info)
    except ZIP_MEMBER_ERRORS as exc:
        raise FileFormatError(
            src, [FieldProblem(info.filename, f"cannot be read: {exc}")]
        ) from None


def _chunks(archive: zipfile.ZipFile, info: zipfile.ZipInfo, src: Path) -> Iterator[bytes]:
    """The member's bytes in chunks; never more than its declared size, CRC checked."""
    read = 0
    with _open_member(archive, info, src) as handle:
        while True:
            try:
                chunk = handle.read(_CHUNK)
            except ZIP_MEMBER_ERRORS as exc:
                raise FileFormatError(
                    src, [FieldProblem(info.filename, f"corrupt data: {exc}")]
                ) from None
            if not chunk:
                break
            read += len(chunk)
            yield chunk
    if read != info.file_size:
        raise FileFormatError(
            src,
            [FieldProblem(info.filename, f"holds {read} bytes, not the {info.file_size} declared")],
        )


def _read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, src: Path) -> bytes:
    return b"".join(_chunks(archive, info, src))


def _json_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, src: Path) -> Any:
    raw = _read_member(archive, info, src)
    try:
        return loads_untrusted(raw)
    except UntrustedJsonError as exc:
        where = f"{info.filename}:{exc.where}" if exc.where else info.filename
        raise FileFormatError(src, [FieldProblem(where, exc.reason)]) from None


def _parse_kb(archive: zipfile.ZipFile, info: zipfile.ZipInfo, src: Path) -> KnowledgeBase:
    data = _json_member(archive, info, src)
    try:
        return parse_knowledge_base(data, src)
    except FileFormatError as exc:
        problems = [
            FieldProblem(f"{KNOWLEDGE_FILE}:{p.field}" if p.field else KNOWLEDGE_FILE, p.reason)
            for p in exc.problems
        ]
        raise FileFormatError(src, problems) from None


@dataclass(frozen=True)
class _PackageVectors:
    manifest: VectorManifest
    matrix: np.ndarray[Any, np.dtype[np.float32]]


def _parse_vectors(
    archive: zipfile.ZipFile, files: dict[str, zipfile.ZipInfo], src: Path
) -> _PackageVectors | None:
    if MANIFEST_MEMBER not in files:
        return None
    data = _json_member(archive, files[MANIFEST_MEMBER], src)
    try:
        manifest = VectorManifest.model_validate(data)
    except ValidationError as exc:
        problems = [
            FieldProblem(f"{MANIFEST_MEMBER}:{p.field}", p.reason)
            for p in problems_from_validation(exc)
        ]
        raise FileFormatError(src, problems) from None
    raw = _read_member(archive, files[VECTORS_MEMBER], src)
    try:
        matrix = np.load(io.BytesIO(raw), allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise FileFormatError(
            src, [FieldProblem(VECTORS_MEMBER, f"not a numpy array file: {exc}")]
        ) from None
    expected = (len(manifest.entries), manifest.dim)
    if not isinstance(matrix, np.ndarray) or matrix.dtype != np.float32:
        raise FileFormatError(src, [FieldProblem(VECTORS_MEMBER, "must hold float32 numbers")])
    if matrix.shape != expected:
        raise FileFormatError(
            src,
            [FieldProblem(VECTORS_MEMBER, f"shape {matrix.shape}, manifest says {expected}")],
        )
    if not np.isfinite(matrix).all():
        raise FileFormatError(src, [FieldProblem(VECTORS_MEMBER, "holds NaN or infinity")])
    ids = [entry.entry_id for entry in manifest.entries]
    if len(set(ids)) != len(ids):
        raise FileFormatError(src, [FieldProblem(f"{MANIFEST_MEMBER}:entries", "entry ids repeat")])
    return _PackageVectors(manifest, matrix)


def import_package(
    src: Path,
    dest_folder: Path,
    *,
    db: Database | None,
    available_model_ids: Collection[str],
    replace: bool = False,
    limits: PackageLimits | None = None,
    embedding_model: str | None = None,
    ask_for_model: bool = False,
) -> PackageImportReport:
    """Unpack the package ``src`` into the KB folder ``dest_folder`` and index it.

    Everything is checked before anything is written; ``dest_folder`` must not exist
    unless ``replace``. With ``db``, the KB is synced into the search index and the
    package's vectors are stored where their model is available and their text current.
    ``embedding_model``: the (available) model the user chose for the KB; the package's
    vectors are used only when they are that model's. ``ask_for_model``: without a
    choice, vectors of a missing model raise :class:`EmbeddingModelChoiceNeeded`.
    """
    limits = limits or PackageLimits()
    if dest_folder.exists() and not replace:
        raise PackageError(
            f"{dest_folder} already exists; choose another folder or replace it explicitly"
        )
    try:
        archive = zipfile.ZipFile(src)
    except FileNotFoundError:
        raise PackageError(f"{src}: no such file") from None
    except ZIP_OPEN_ERRORS as exc:
        raise FileFormatError(
            src, [FieldProblem("", f"not a readable .ctkbz (zip) package, or truncated: {exc}")]
        ) from None
    with archive:
        try:
            infos = archive.infolist()
        except (zipfile.BadZipFile, OSError) as exc:
            raise FileFormatError(src, [FieldProblem("", f"corrupt package: {exc}")]) from None
        files = _check_members(src, _unwrapped(infos), limits)
        kb = _parse_kb(archive, files[KNOWLEDGE_FILE], src)
        vectors = _parse_vectors(archive, files, src)
        if embedding_model is not None:
            if embedding_model not in available_model_ids:
                reason = f"{embedding_model!r} is not available here; available: " + ", ".join(
                    sorted(available_model_ids)
                )
                raise InvalidInput.of("import", [FieldProblem("embedding_model", reason)])
            if vectors is not None and canonical_model_id(embedding_model) != canonical_model_id(
                vectors.manifest.embedding_model_id
            ):
                vectors = None  # another model's vectors: the chosen one embeds it anew
        elif vectors is not None and ask_for_model:
            wanted = canonical_model_id(vectors.manifest.embedding_model_id)
            if not any(canonical_model_id(m) == wanted for m in available_model_ids):
                raise EmbeddingModelChoiceNeeded(
                    src, vectors.manifest.embedding_model_id, sorted(available_model_ids)
                )
        media = sorted(name for name in files if name.startswith(f"{MEDIA_DIR}/"))
        warnings = _media_warnings(kb, set(media))
        plan = _vector_plan(kb, vectors, available_model_ids, warnings)
        _unpack(archive, files, src, dest_folder, replace=replace)
    inserted = 0
    if db is not None:
        try:
            sync_kb(db, kb)
            if plan.items:
                inserted = store_vectors(
                    db.connection(), kb.kb_id, plan.model_id, plan.items, only_current=True
                )
        except BaseException:
            # A failed import leaves no folder behind (a replaced one cannot come back).
            if not replace:
                shutil.rmtree(dest_folder, ignore_errors=True)
            raise
    elif plan.items:
        warnings.append("no database given: the package's vectors were not stored")
    reembed = inserted < len(kb.entries)
    message = _message(kb, len(media), plan, inserted, reembed)
    return PackageImportReport(
        kb_id=kb.kb_id,
        folder=dest_folder,
        entries=len(kb.entries),
        media_files=len(media),
        vectors_used=inserted > 0,
        vectors_inserted=inserted,
        reembed_needed=reembed,
        package_model_id=vectors.manifest.embedding_model_id if vectors else None,
        package_model_available=plan.available,
        kb_model_id=kb.embedding_model_id,
        message=message,
        warnings=tuple(warnings),
    )


def _media_warnings(kb: KnowledgeBase, media: set[str]) -> list[str]:
    warnings = []
    for entry in kb.entries:
        path = (entry.content.path or "").replace("\\", "/")
        if path.startswith(f"{MEDIA_DIR}/") and path not in media:
            warnings.append(f"entry {entry.id!r} refers to {path}, which is not in the package")
    return warnings


@dataclass(frozen=True)
class _VectorPlan:
    model_id: str
    available: bool
    items: list[StoredVector]
    stale: int


def _vector_plan(
    kb: KnowledgeBase,
    vectors: _PackageVectors | None,
    available_model_ids: Collection[str],
    warnings: list[str],
) -> _VectorPlan:
    if vectors is None:
        return _VectorPlan("", False, [], 0)
    wanted = canonical_model_id(vectors.manifest.embedding_model_id)
    local = next(
        (m for m in available_model_ids if canonical_model_id(m) == wanted),
        None,
    )
    if local is None:
        return _VectorPlan(wanted, False, [], 0)
    current = {e.id: IndexedEntry.of(kb.kb_id, e).content_hash for e in kb.entries}
    items: list[StoredVector] = []
    stale = unknown = 0
    for row, entry in enumerate(vectors.manifest.entries):
        digest = current.get(entry.entry_id)
        if digest is None:
            unknown += 1
        elif digest != entry.content_hash:
            stale += 1
        else:
            items.append(StoredVector(entry.entry_id, digest, vectors.matrix[row]))
    if unknown:
        warnings.append(f"{unknown} vectors belong to entries not in the knowledge base")
    if stale:
        warnings.append(f"{stale} vectors were made from older text and will be re-made")
    return _VectorPlan(local, True, items, stale)


def _message(kb: KnowledgeBase, media: int, plan: _VectorPlan, inserted: int, reembed: bool) -> str:
    head = f"Imported {kb.display_name!r}: {len(kb.entries)} entries, {media} media files."
    if plan.model_id and not plan.available:
        return (
            f"{head} The package's vectors were made with {plan.model_id!r}, which is not "
            "available here; the knowledge base will be re-embedded with the local model."
        )
    if inserted and not reembed:
        return f"{head} Vectors of {plan.model_id!r} were used for every entry."
    if inserted:
        missing = len(kb.entries) - inserted
        return (
            f"{head} Vectors of {plan.model_id!r} were used for {inserted} entries; "
            f"{missing} will be embedded."
        )
    if kb.entries:
        return f"{head} The package has no usable vectors; the entries will be embedded."
    return head


def _unpack(
    archive: zipfile.ZipFile,
    files: dict[str, zipfile.ZipInfo],
    src: Path,
    dest_folder: Path,
    *,
    replace: bool,
) -> None:
    """Write the KB folder beside ``dest_folder``, then rename it into place."""
    parent = dest_folder.parent
    parent.mkdir(parents=True, exist_ok=True)
    staging = parent / f".{dest_folder.name}.import-{uuid.uuid4().hex[:12]}"
    staging.mkdir()
    try:
        (staging / MEDIA_DIR).mkdir()
        for name, info in files.items():
            if name.startswith(f"{VECTOR_DIR}/"):
                continue  # vectors go into the database, not the folder
            target = staging.joinpath(*name.split("/"))
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(target, "xb") as out:
                for chunk in _chunks(archive, info, src):
                    out.write(chunk)
                out.flush()
                os.fsync(out.fileno())
        _move_into_place(staging, dest_folder, replace=replace)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _move_into_place(staging: Path, dest_folder: Path, *, replace: bool) -> None:
    parent = dest_folder.parent
    if not dest_folder.exists():
        os.rename(staging, dest_folder)
        _fsync_dir(parent)
        return
    if not replace:
        raise PackageError(f"{dest_folder} appeared while importing; nothing was replaced")
    old = parent / f".{dest_folder.name}.replaced-{uuid.uuid4().hex[:12]}"
    os.rename(dest_folder, old)
    try:
        os.rename(staging, dest_folder)
    except BaseException:
        os.rename(old, dest_folder)
        raise
    _fsync_dir(parent)
    shutil.rmtree(old, ignore_errors=True)
