"""Import a file into a project (or the global folder): SillyTavern files and packages.

The importers in :mod:`storyloom.knowledge` only parse; this module decides where the
results go. With a project, KBs become local KBs referenced in ``project.json`` and a
card's character preset goes to ``presets/characters/``. Without one, KBs go to the
global folder. Everything is parsed, validated and serialised before the first write;
the files are then staged and moved into place together (:mod:`import_staging`), so a
failed import leaves the project exactly as it was.

A SillyTavern chat becomes a conversation when the caller passes ``chat_importer`` (the
chat engine sits a layer above this module, so the caller hands it in); without one the
chat is checked and kept as a ``.jsonl`` file under ``imports/chats/``. Books and chats
take the name the file gives them (the book's ``name``, the card's name, the chat's
character and date), not the file's name.

Duplicates: a book whose entries are exactly those of a KB already here (compared by
:func:`entries_fingerprint`) is not stored again unless the caller asks for both
(``on_duplicate="keep_both"``); the summary lists it either way. A card's own book is
bound to its character (``knowledge_bases`` of the character file), the existing copy
when its book was already here: the same entries, the world its ``extensions.world``
names, or the same lore (:func:`~storyloom.knowledge.same_book.card_book_here`: a world
file and the card's copy of it are one book). Importing a card twice, or a card beside
the world it came with, does not store its book twice. A card without a book makes no KB.

A card that is a character here already: the caller hands in a :class:`CardHome` (the chat
layer's ``card_reimport`` decides, for every door that imports a card), which is asked
before anything is written whether the card becomes a new character, a new version of
one here, or stops the import (the user has not chosen yet).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import zipfile
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from storyloom.core.errors import FieldProblem, FileFormatError, StoryloomError
from storyloom.knowledge.activation import ActivationEngine
from storyloom.knowledge.activation_settings import ActivationSettings
from storyloom.knowledge.global_library import scan_global_folders
from storyloom.knowledge.knowledge_base import (
    KNOWLEDGE_FILE,
    MEDIA_DIR,
    KnowledgeBase,
    load_knowledge_base,
    now_iso,
    save_knowledge_base,
)
from storyloom.knowledge.package import import_package, is_kb_package, wrapper_prefix
from storyloom.knowledge.same_book import LoreIndex, card_book_here
from storyloom.knowledge.st_export import export_chat_jsonl
from storyloom.knowledge.st_import import ImportResult, import_sillytavern
from storyloom.project.import_staging import StagedImport
from storyloom.project.project_file import folder_slug, load_project
from storyloom.project.project_knowledge import (
    LOCAL_KB_DIR,
    open_project_knowledge,
    register_local_folder,
    register_local_folders,
)
from storyloom.sillytavern.character import CharacterDefinition
from storyloom.sillytavern.charx import ZIP_MEMBER_ERRORS
from storyloom.sillytavern.chat_log import ChatLog
from storyloom.sillytavern.untrusted_json import loads_untrusted
from storyloom.store.database import Database

MAX_PEEK_BYTES = 64 * 1024 * 1024
# Anything a hostile package raises while peeked at (UntrustedJsonError is a ValueError).
_PEEK_ERRORS: tuple[type[Exception], ...] = (KeyError, zipfile.LargeZipFile, *ZIP_MEMBER_ERRORS)
PRESETS_DIR = "presets/characters"
CHATS_DIR = "imports/chats"

ChatImporter = Callable[[ChatLog, str], str]
"""Makes a parsed chat a conversation: (chat, title; "" names it from the chat) → the new
conversation's id."""
OnDuplicate = Literal["keep_existing", "keep_both"]


class CardHome(Protocol):
    """Where an imported card goes when a character here may already be that card."""

    def place(self, card: CharacterDefinition) -> str | None:
        """Before anything is written: the id of the character here that ``card`` becomes
        a new version of, or None for a new character. Raising stops the import."""
        ...

    def update(
        self,
        character_id: str,
        card: CharacterDefinition,
        book_id: str | None,
        existing: Sequence[KnowledgeBase],
    ) -> None:
        """Write ``card`` as the new version of ``character_id``, once its book is stored:
        ``book_id`` is the card's book here (None: it has none); ``existing`` the KBs that
        were here before the import."""
        ...


@dataclass
class CreatedKnowledgeBase:
    kb_id: str
    display_name: str
    entry_count: int
    folder: str


@dataclass
class DuplicateKnowledgeBase:
    """A book of the file whose entries a KB here already has."""

    display_name: str
    existing_kb_id: str
    existing_name: str
    kept: Literal["existing", "both"]
    new_kb_id: str | None = None
    """With ``kept == "both"``: the copy just imported."""


@dataclass
class ImportSummary:
    source: str
    kind: str
    created: list[CreatedKnowledgeBase] = field(default_factory=list)
    character: str | None = None
    character_file: str | None = None
    character_updated: bool = False
    """The card became a new version of the character at ``character_file``."""
    chat_file: str | None = None
    chat_messages: int = 0
    conversation_id: str | None = None
    warnings: list[str] = field(default_factory=list)
    reembed_needed: bool = False
    duplicates: list[DuplicateKnowledgeBase] = field(default_factory=list)


_VOLATILE = ("created_at", "updated_at")


def entries_fingerprint(kb: KnowledgeBase) -> str:
    """A hash of a KB's entries (their order and every field but the times they were
    written): two KBs with the same fingerprint hold the same lore."""
    entries = []
    for entry in kb.entries:
        data = entry.model_dump(mode="json", by_alias=True)
        meta = data.get("management_metadata")
        if isinstance(meta, dict):
            for key in _VOLATILE:
                meta.pop(key, None)
        entries.append(data)
    text = json.dumps(entries, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _serialised(path: Path, where: str, value: Any, *, indent: int | None = 2) -> bytes:
    """``value`` as the UTF-8 JSON file it becomes; a value that cannot be written (too
    deep, broken text) is the import's format error, raised before the first write."""
    try:
        text = json.dumps(value, ensure_ascii=False, indent=indent)
        return (text + "\n").encode("utf-8")
    except (ValueError, RecursionError, UnicodeEncodeError) as exc:
        raise FileFormatError(path, [FieldProblem(where, f"cannot be stored: {exc}")]) from None


def _kb_files(kb: KnowledgeBase, path: Path, where: str) -> dict[str, bytes | None]:
    kb.updated_at = now_iso()
    kb.created_at = kb.created_at or kb.updated_at
    try:
        data = kb.to_json()
    except (ValueError, RecursionError) as exc:
        raise FileFormatError(path, [FieldProblem(where, f"cannot be stored: {exc}")]) from None
    return {KNOWLEDGE_FILE: _serialised(path, where, data), MEDIA_DIR: None}


def import_knowledge_file(
    path: Path,
    *,
    project_dir: Path | None,
    global_folder: Path,
    database: Database | None = None,
    available_model_ids: Collection[str] = (),
    display_name: str | None = None,
    chat_importer: ChatImporter | None = None,
    existing: Sequence[KnowledgeBase] = (),
    on_duplicate: OnDuplicate = "keep_existing",
    card_home: CardHome | None = None,
    embedding_model: str | None = None,
) -> ImportSummary:
    """Import ``path`` (SillyTavern world info / card / CHARX / chat, or a KB package:
    ``.ctkbz`` or a ``.zip`` holding ``knowledge.json``).

    Everything is parsed, validated and serialised before the first write; the files are
    then written aside and moved into place together (:mod:`import_staging`), and a
    failure leaves the project (or the global folder) as it was. ``existing``: the KBs
    already here, which a book of the file may duplicate (see the module's docstring).
    ``card_home``: asked where a card goes (without one, a card is always a new character).
    ``embedding_model``: the model a package is embedded with; a package whose vectors
    come from a model missing here needs one (:class:`EmbeddingModelChoiceNeeded` otherwise).
    """
    if is_kb_package(path):
        return _import_package(
            path, project_dir, global_folder, database, available_model_ids, embedding_model
        )
    if project_dir is not None:
        load_project(project_dir)  # refuse before anything else when project.json is broken
    result = import_sillytavern(path)
    updated_id = (
        card_home.place(result.character)
        if card_home is not None and result.character is not None
        else None
    )
    summary = ImportSummary(source=str(path), kind=result.kind, warnings=list(result.warnings))
    base_dir = project_dir or global_folder.parent
    staged = StagedImport(base_dir, path)
    kb_parent = project_dir / LOCAL_KB_DIR if project_dir is not None else global_folder
    taken = {p.name for p in kb_parent.iterdir()} if kb_parent.is_dir() else set()
    local_folders: list[tuple[Path, str]] = []
    known = {entries_fingerprint(kb): kb for kb in reversed(existing) if kb.entries}
    book = result.character_book
    book_id = book.kb_id if book is not None else None
    book_here = card_book_in(result, existing)
    for number, kb in enumerate(result.knowledge_bases):
        if display_name and len(result.knowledge_bases) == 1:
            kb.kb_displayName = display_name
        same = known.get(entries_fingerprint(kb)) if kb.entries else None
        if same is None and kb is book:
            same = book_here
        if same is not None:
            kept: Literal["existing", "both"] = (
                "both" if on_duplicate == "keep_both" else "existing"
            )
            summary.duplicates.append(
                DuplicateKnowledgeBase(
                    kb.display_name,
                    same.kb_id,
                    same.display_name,
                    kept,
                    kb.kb_id if kept == "both" else None,
                )
            )
            if kept == "existing":
                if kb is book:
                    book_id = same.kb_id
                continue
        summary.warnings.extend(unusable_keys(kb))
        folder = kb_parent / folder_slug(kb.kb_displayName or kb.kb_id, taken)
        taken.add(folder.name)
        staged.add_folder(folder, _kb_files(kb, path, f"knowledge base {number + 1}"))
        local_folders.append((folder, kb.kb_displayName))
        summary.created.append(_created(kb, folder))
    if result.character is not None and updated_id is not None:
        summary.character = result.character.name
        summary.character_file = str(base_dir / PRESETS_DIR / f"{updated_id}.json")
        summary.character_updated = True
    elif result.character is not None:
        # The card's own book is bound to its character, as SillyTavern links it.
        result.character.knowledge_bases = [book_id] if book_id is not None else []
        base = base_dir / PRESETS_DIR
        names = {p.stem for p in base.glob("*.json")} if base.is_dir() else set()
        # Each name the preset takes (.json, .png, .assets) must be free.
        names |= {p.stem for p in base.glob("*.png")}
        names |= {p.name.removesuffix(".assets") for p in base.glob("*.assets")}
        slug = folder_slug(result.character.name or path.stem, names)
        preset_path = base / f"{slug}.json"
        if result.avatar_png is not None:
            staged.add_file(base / f"{slug}.png", result.avatar_png)
            result.character.avatar = f"{slug}.png"
        if result.assets:
            # CHARX member names were checked (traversal, collisions, lengths) when read.
            staged.add_folder(base / f"{slug}.assets", dict(result.assets))
        data = result.character.model_dump(mode="json")
        staged.add_file(preset_path, _serialised(path, "character", data))
        summary.character = result.character.name
        summary.character_file = str(preset_path)
    if result.chat is not None and chat_importer is None:
        base = base_dir / CHATS_DIR
        names = {p.stem for p in base.glob("*.jsonl")} if base.is_dir() else set()
        chat_path = base / f"{folder_slug(path.stem, names)}.jsonl"
        try:
            staged.add_file(chat_path, export_chat_jsonl(result.chat).encode("utf-8"))
        except (ValueError, RecursionError, UnicodeEncodeError) as exc:
            problem = FieldProblem("chat", f"cannot be stored: {exc}")
            raise FileFormatError(path, [problem]) from None
        summary.chat_file = str(chat_path)
        summary.chat_messages = len(result.chat.messages)

    def register() -> None:
        if project_dir is not None and local_folders:
            register_local_folders(project_dir, local_folders)

    staged.commit(register)
    if card_home is not None and result.character is not None and updated_id is not None:
        card_home.update(updated_id, result.character, book_id, existing)
    if result.chat is not None and chat_importer is not None:
        summary.conversation_id = chat_importer(result.chat, "")
        summary.chat_messages = len(result.chat.messages)
    return summary


def card_book_in(result: ImportResult, existing: Sequence[KnowledgeBase]) -> KnowledgeBase | None:
    """The KB of ``existing`` that a card's embedded book is (the world its
    ``extensions.world`` names, by the world's name, else the same lore): the card is
    linked to it instead of storing a copy."""
    if result.character_book is None or not existing:
        return None
    worlds: dict[str, KnowledgeBase] = {}
    for kb in existing:
        worlds.setdefault(kb.kb_displayName, kb)
    return card_book_here(
        result.character, result.character_book, world_named=worlds.get, lore=LoreIndex(existing)
    )


def _created(kb: KnowledgeBase, folder: Path) -> CreatedKnowledgeBase:
    return CreatedKnowledgeBase(kb.kb_id, kb.display_name, len(kb.entries), str(folder))


def _import_package(
    path: Path,
    project_dir: Path | None,
    global_folder: Path,
    database: Database | None,
    available_model_ids: Collection[str],
    embedding_model: str | None,
) -> ImportSummary:
    existing = _existing_folder(package_kb_id(path), project_dir, global_folder)
    if existing is not None:
        # Importing it again would give two folders one kb_id, and the search index of
        # the original would be overwritten by the package's entries.
        raise StoryloomError(
            f"{path}: this knowledge base (kb_id {existing[0]}) is already here, in "
            f"{existing[1]}; remove that folder first to import the package again"
        )
    parent = project_dir / LOCAL_KB_DIR if project_dir is not None else global_folder
    # The folder is made by import_package once the package passed every check.
    taken = {p.name for p in parent.iterdir()} if parent.is_dir() else set()
    target = parent / folder_slug(path.stem, taken)
    report = import_package(
        path,
        target,
        db=database,
        available_model_ids=set(available_model_ids),
        embedding_model=embedding_model,
        ask_for_model=True,
    )
    summary = ImportSummary(source=str(path), kind="package", warnings=list(report.warnings))
    try:
        kb = load_knowledge_base(target)
        if embedding_model is not None and kb.embedding_model_id != embedding_model:
            kb.embedding_model_id = embedding_model  # the user's choice
            save_knowledge_base(kb, target, touch=False)
        elif report.kb_model_id and not report.package_model_available:
            # Seed 2.2.2: vectors of a model missing here are not used; the KB falls back
            # to the project's or the global (local) model and is embedded again with it.
            summary.warnings.append(
                f"embedding model {report.kb_model_id!r} of the package is not available "
                "here; the knowledge base now uses the project's or the global default model"
            )
            kb.embedding_model_id = None
            save_knowledge_base(kb, target, touch=False)
        if project_dir is not None:
            register_local_folder(project_dir, target, name=kb.kb_displayName)
    except BaseException:
        # Not registered, so not imported: leave no folder behind.
        shutil.rmtree(target, ignore_errors=True)
        raise
    summary.created.append(
        CreatedKnowledgeBase(report.kb_id, kb.display_name, report.entries, str(target))
    )
    summary.reembed_needed = report.reembed_needed
    if report.message:
        summary.warnings.append(report.message)
    return summary


def package_kb_id(path: Path) -> str | None:
    """The ``kb_id`` inside a package, when it can be read cheaply; the full checks of
    :func:`import_package` still run on everything."""
    try:
        with zipfile.ZipFile(path) as archive:
            info = archive.getinfo(wrapper_prefix(archive.namelist()) + KNOWLEDGE_FILE)
            if info.file_size > MAX_PEEK_BYTES:
                return None
            document = loads_untrusted(archive.read(info))
    except _PEEK_ERRORS:
        return None
    kb_id = document.get("kb_id") if isinstance(document, dict) else None
    return kb_id if isinstance(kb_id, str) else None


def _existing_folder(
    kb_id: str | None, project_dir: Path | None, global_folder: Path
) -> tuple[str, Path] | None:
    if kb_id is None:
        return None
    folders = [global_folder]
    bases = scan_global_folders(folders).bases
    if project_dir is not None:
        bases = open_project_knowledge(project_dir, folders).catalog.bases
    found = next((b for b in bases if b.kb_id == kb_id), None)
    return (kb_id, found.folder) if found is not None else None


def unusable_keys(kb: KnowledgeBase) -> list[str]:
    """Keys the activation engine will ignore (regexes that do not compile), as warnings."""
    names = {entry.id: entry.displayName or "" for entry in kb.entries}
    engine = ActivationEngine([kb], ActivationSettings())
    return [
        f"entry {p.entry_id} ({names.get(p.entry_id, '')}) {p.field}: {p.reason}; "
        "this key is ignored until it is fixed"
        for p in engine.problems
    ]
