"""Moving a SillyTavern user folder in: the preview and the import, over the importers
each kind already has.

The import reads and checks every file first (a broken one is a problem naming file,
field and reason, and is skipped; a chat only by its header there, and whole just before
it is written, one at a time), then writes kind by kind in :data:`ST_KINDS` order:
books before the cards bound to them, cards and personas before the chats that speak
with them. Each chat is set up to continue as it did in SillyTavern: the persona locked
to it (else the default), its own book, the character's books (the card's
``extensions.world`` and the ``charLore`` extra books), the global books, the persona's
book, the card's regex scripts when the user allowed them, the active preset's pipeline,
its lore timers and variables.

A checkpoint or branch (a chat whose ``chat_metadata.main_chat`` names another chat of
the same character) joins that chat's conversation as a branch at the message it left
from: the longest common prefix of the two files' messages (name, text, send date).

A manifest (``imports/sillytavern/<hash of the folder>.json`` in the project, written
atomically after each item) maps each source file to what it made and its content hash,
so a second run changes nothing, and a later one brings only what is new: a chat that
grew gets its new messages (again by common prefix, under the message they follow), a
changed card becomes a new version of its character, a changed book new entries of its
KB. Each item is written all or nothing (conversations in one transaction, files
atomically); a crash between an item and its manifest line leaves that item to be
matched again by its content next time (books by their entries, chats by prefix).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, assert_never

from storyloom.chat.personalab.card_permissions import CardPermissionStore
from storyloom.chat.personalab.card_reimport import card_digest, cards_here, update_from_card
from storyloom.chat.personalab.chat_backgrounds import (
    ChatBackgrounds,
    background_from_chat_metadata,
    import_st_backgrounds,
)
from storyloom.chat.personalab.library import PresetLibrary, character_snapshot
from storyloom.chat.personalab.personas import AVATAR_SUFFIXES, Persona, PersonaLibrary
from storyloom.chat.personalab.quick_replies import import_st_quick_replies
from storyloom.chat.personalab.sprites import import_st_sprites
from storyloom.chat.store.conversation import CharacterSnapshot
from storyloom.chat.store.global_variables import GlobalVariables
from storyloom.chat.store.message import Message
from storyloom.chat.store.regex_library import GlobalRegexScripts, read_scripts
from storyloom.chat.store.st_chat import HEADER_KEY, LINE_KEY, continue_st_chat, import_st_chat
from storyloom.chat.store.st_group_chat import import_st_group_chat
from storyloom.chat.store.state import ChatState
from storyloom.chat.store.turn_tree import TurnTree
from storyloom.core.atomic_io import atomic_write_bytes, atomic_write_json
from storyloom.core.errors import FieldProblem, FileFormatError, NotFound, StoryloomError
from storyloom.knowledge.knowledge_base import (
    KnowledgeBase,
    load_knowledge_base,
    save_knowledge_base,
)
from storyloom.knowledge.same_book import LoreIndex, card_book_here, text_digest
from storyloom.knowledge.st_import import ImportResult, import_sillytavern
from storyloom.knowledge.timed_effects import TimedEffect, TimedEffectsState
from storyloom.llm.instruct import TemplateLibrary
from storyloom.project.knowledge_import import (
    ImportSummary,
    entries_fingerprint,
    import_knowledge_file,
)
from storyloom.project.project_file import load_project, save_project
from storyloom.project.project_knowledge import open_project_knowledge
from storyloom.server.st_move_in_views import (
    ST_KINDS,
    StFolderPreview,
    StImportReport,
    StInactive,
    StKind,
    StKindCount,
    StKindPreview,
    StProblem,
)
from storyloom.server.st_move_out import KEPT_THEMES_DIR
from storyloom.server.workflow_service import ProjectWorkflows, read_preset_json
from storyloom.sillytavern.character import CharacterDefinition
from storyloom.sillytavern.chat_log import (
    ChatHeader,
    ChatLog,
    ChatMessage,
    parse_chat_header,
    parse_chat_jsonl,
)
from storyloom.sillytavern.group_file import GroupFile, parse_group_file
from storyloom.sillytavern.user_folder import (
    FolderKind,
    FolderProblem,
    StSettings,
    UserFolder,
    file_digest,
    find_user_folder,
    read_settings,
    timed_effects,
)
from storyloom.store.database import Database

MANIFEST_DIR = "imports/sillytavern"
MANIFEST_BATCH = 100
"""Items recorded between two writes of the manifest. Writing it after each item would
rewrite a file of thousands of lines thousands of times; an item whose line was not
written yet when an import stopped is matched again by its content next time (a card by
its JSON, a book by its lore, a chat by its header and messages)."""
PERSONA_IN_PROMPT = 0
"""``persona_description_positions.IN_PROMPT`` (personas.js): where storyloom puts it too."""
ProgressCallback = Callable[[StKind, int, int], None]
"""(kind, done, total): called as each item of a kind is taken."""

# The folder kinds each reported kind counts (personas, regex and variables come from
# settings.json).
_FILE_KINDS: dict[StKind, FolderKind] = {
    "characters": "characters",
    "worlds": "worlds",
    "chats": "chats",
    "groups": "groups",
    "group_chats": "group_chats",
    "presets": "presets",
    "instruct": "instruct",
    "context": "context",
    "quick_replies": "quick_replies",
    "backgrounds": "backgrounds",
    "sprites": "sprites",
    "themes": "themes",
}


@dataclass
class MoveInTarget:
    """Where a move-in lands: the data directory, the project and its chat store."""

    home: Path
    project_dir: Path
    tree: TurnTree
    database: Database
    global_folders: Sequence[Path]

    @property
    def project_id(self) -> str:
        return load_project(self.project_dir).id


# -- the manifest -----------------------------------------------------------------------


class Manifest:
    """What each source item made, by its key (the file's path relative to the user
    folder, ``settings.json#<what>`` for what settings.json holds)."""

    def __init__(self, project_dir: Path, folder: Path) -> None:
        name = hashlib.sha256(str(folder.resolve()).encode("utf-8")).hexdigest()[:16]
        self.path = project_dir / MANIFEST_DIR / f"{name}.json"
        self.items: dict[str, dict[str, Any]] = {}
        if self.path.is_file():
            try:
                data = json.loads(self.path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                data = {}
            items = data.get("items") if isinstance(data, dict) else None
            if isinstance(items, dict):
                self.items = {k: v for k, v in items.items() if isinstance(v, dict)}
        self.source = str(folder)
        self._unsaved = 0

    def digest(self, key: str) -> str | None:
        value = self.items.get(key, {}).get("hash")
        return value if isinstance(value, str) else None

    def made(self, key: str) -> dict[str, Any]:
        return self.items.get(key, {})

    def record(self, key: str, digest: str, **made: Any) -> None:
        self.items[key] = {"hash": digest, **made}
        self._unsaved += 1
        if self._unsaved >= MANIFEST_BATCH:
            self.save()

    def save(self) -> None:
        """Write what was recorded (atomically); a no-op when nothing was."""
        if self._unsaved:
            atomic_write_json(self.path, {"source": self.source, "items": self.items})
            self._unsaved = 0


# -- reading (nothing written) ----------------------------------------------------------


@dataclass
class _Read:
    """The folder read and checked: every file parsed once, problems named."""

    folder: UserFolder
    settings: StSettings
    digests: dict[str, str] = field(default_factory=dict)
    worlds: dict[str, KnowledgeBase] = field(default_factory=dict)
    cards: dict[str, ImportResult] = field(default_factory=dict)
    chats: dict[str, ChatHeader | None] = field(default_factory=dict)
    """Each chat's header only (what orders checkpoints after their main chat): a chat
    is parsed and checked when it is written, one at a time, so a folder of thousands
    of long chats is never in memory at once."""
    groups: dict[str, GroupFile] = field(default_factory=dict)
    group_chats: dict[str, ChatHeader | None] = field(default_factory=dict)
    presets: dict[str, Any] = field(default_factory=dict)
    problems: list[StProblem] = field(default_factory=list)
    settled: set[str] = field(default_factory=set)
    """Cards and chats here as they are there (by the manifest): not read again."""

    def problem(self, relative: str, error: BaseException) -> None:
        problems: Sequence[FieldProblem] = getattr(error, "problems", ())
        if problems:
            for p in problems:
                self.problems.append(StProblem(file=relative, field=p.field, reason=p.reason))
        else:
            self.problems.append(StProblem(file=relative, reason=str(error)))


def read_chat_file(path: Path) -> tuple[ChatLog, str]:
    """A chat file parsed and checked, with the content hash of the bytes parsed."""
    data = path.read_bytes()
    return parse_chat_jsonl(data.decode("utf-8"), path), hashlib.sha256(data).hexdigest()


CHATS_PER_COMMIT = 16
"""Chats written in one transaction. Each is still all or nothing (its own writes are a
savepoint of it, rolled back alone when it fails); committing a few together writes the
index pages they share once, not once a chat."""


def _relative_problem(problem: FolderProblem) -> StProblem:
    return StProblem(file=problem.file, field=problem.field, reason=problem.reason)


Settled = Callable[[str, str], bool]
"""(file, content hash) -> whether it is here as it is there: it needs no reading."""


def _read_folder(
    folder: UserFolder,
    settled: Settled = lambda relative, digest: False,
    *,
    check_chats: bool = False,
) -> _Read:
    """Read and check the folder's files. A chat gives only its digest and header (it is
    parsed when it is written); with ``check_chats`` (a preview) each is also parsed, to
    name its problems, and let go."""
    settings, settings_problems = read_settings(folder.absolute("settings.json"))
    read = _Read(folder, settings, problems=[_relative_problem(p) for p in settings_problems])
    for kind in ("worlds", "characters", "chats", "group_chats", "groups", "presets"):
        for relative in folder.of(kind):
            path = folder.absolute(relative)
            try:
                if kind in ("chats", "group_chats"):
                    data = path.read_bytes()
                    digest = hashlib.sha256(data).hexdigest()
                else:
                    digest = file_digest(path)
                read.digests[relative] = digest
                if kind in ("characters", "chats", "group_chats") and settled(relative, digest):
                    read.settled.add(relative)
                elif kind == "worlds":
                    result = import_sillytavern(path)
                    if result.kind != "world_info" or not result.knowledge_bases:
                        raise StoryloomError("not a world-info book")
                    read.worlds[relative] = result.knowledge_bases[0]
                elif kind == "characters":
                    result = import_sillytavern(path)
                    if result.character is None:
                        raise StoryloomError("not a character card")
                    read.cards[relative] = result
                elif kind in ("chats", "group_chats"):
                    if check_chats:
                        parse_chat_jsonl(data.decode("utf-8"), path)
                    header = parse_chat_header(data)
                    (read.chats if kind == "chats" else read.group_chats)[relative] = header
                    del data
                elif kind == "groups":
                    read.groups[relative] = parse_group_file(path.read_bytes(), path)
                else:
                    read.presets[relative] = read_preset_json(path.read_bytes(), relative)
            except (StoryloomError, OSError, ValueError) as exc:
                read.digests.pop(relative, None)
                read.problem(relative, exc)
    return read


def _persona_items(settings: StSettings) -> dict[str, dict[str, Any]]:
    """``settings.json#persona/<avatar>`` -> what makes the persona."""
    out: dict[str, dict[str, Any]] = {}
    for avatar, name in settings.personas.items():
        described = settings.persona_descriptions.get(avatar)
        out[f"settings.json#persona/{avatar}"] = {
            "avatar": avatar,
            "name": name or avatar,
            "description": described.description if described else "",
            "lorebook": described.lorebook if described else "",
        }
    return out


def _variable_items(settings: StSettings) -> dict[str, Any]:
    return {f"settings.json#variable/{k}": v for k, v in settings.global_variables.items()}


def _regex_items(settings: StSettings) -> dict[str, dict[str, Any]]:
    return {
        f"settings.json#regex/{s.get('id') or i}": s for i, s in enumerate(settings.global_regex)
    }


def _item_digests(read: _Read, kind: StKind) -> dict[str, str]:
    """Each item of ``kind`` in the folder, by manifest key, with its content hash."""
    match kind:
        case "personas":
            return {k: text_digest(v) for k, v in _persona_items(read.settings).items()}
        case "variables":
            return {k: text_digest(v) for k, v in _variable_items(read.settings).items()}
        case "regex":
            return {k: text_digest(v) for k, v in _regex_items(read.settings).items()}
        case (
            "characters"
            | "worlds"
            | "chats"
            | "groups"
            | "group_chats"
            | "presets"
            | "instruct"
            | "context"
            | "quick_replies"
            | "backgrounds"
            | "sprites"
            | "themes"
        ):
            files = read.folder.of(_FILE_KINDS[kind])
            if kind in ("characters", "worlds", "chats", "groups", "group_chats", "presets"):
                return {f: read.digests[f] for f in files if f in read.digests}
            return {f: file_digest(read.folder.absolute(f)) for f in files}
        case _:
            assert_never(kind)


def preview_folder(target: MoveInTarget, path: Path, user: str | None = None) -> StFolderPreview:
    """What an import of the folder would bring; nothing is written.
    :class:`~storyloom.core.errors.InvalidInput` names a path that is no SillyTavern folder."""
    folder = find_user_folder(path, user)
    read = _read_folder(folder, check_chats=True)
    manifest = Manifest(target.project_dir, folder.path)
    kinds = []
    for kind in ST_KINDS:
        items = _item_digests(read, kind)
        new = sum(1 for k in items if manifest.digest(k) is None)
        changed = sum(1 for k, d in items.items() if manifest.digest(k) not in (None, d))
        kinds.append(StKindPreview(kind=kind, found=len(items), new=new, changed=changed))
    return StFolderPreview(
        path=str(folder.path), layout=folder.layout, kinds=kinds, problems=read.problems
    )


# -- writing ----------------------------------------------------------------------------


Outcome = Literal["added", "updated", "unchanged"]


class _Counts:
    def __init__(self) -> None:
        self.counts = {kind: StKindCount(kind=kind) for kind in ST_KINDS}

    def add(self, kind: StKind, outcome: Outcome) -> None:
        count = self.counts[kind]
        match outcome:
            case "added":
                count.added += 1
            case "updated":
                count.updated += 1
            case "unchanged":
                count.unchanged += 1
            case _:
                assert_never(outcome)


@dataclass
class _Import:
    target: MoveInTarget
    read: _Read
    manifest: Manifest
    progress: ProgressCallback
    counts: _Counts = field(default_factory=_Counts)
    inactive: list[StInactive] = field(default_factory=list)
    world_ids: dict[str, str] = field(default_factory=dict)
    """World name (file stem) -> kb_id."""
    world_entries: dict[str, dict[str, str]] = field(default_factory=dict)
    """World name -> SillyTavern uid -> entry id (what lore timers are keyed by)."""
    character_ids: dict[str, str] = field(default_factory=dict)
    """Card avatar file name -> character id."""
    persona_ids: dict[str, str] = field(default_factory=dict)
    preset_ids: dict[str, str] = field(default_factory=dict)
    """Preset name -> workflow id."""
    chat_places: dict[str, tuple[str, str]] = field(default_factory=dict)
    """Chat file -> (conversation id, the id of its last message; "" for an empty chat)."""
    broken: set[str] = field(default_factory=set)
    """Chat files that did not read (named as problems): not anyone's main chat."""
    _kb_folders: dict[str, Path] | None = None
    """The KBs here (None: not read yet), by kb_id, and by their entries and lore."""
    _by_entries: dict[str, list[KnowledgeBase]] | None = None
    _by_lore: LoreIndex | None = None
    _cards_here: dict[str, str] | None = None
    _chats_here: dict[str, tuple[str, str]] | None = None
    """Conversations here before this run, by :func:`_header_key`."""
    """The kept card JSON of the characters here before this run (hash -> id)."""
    _snapshots: dict[str, CharacterSnapshot | None] = field(default_factory=dict)
    _background_names: set[str] | None = None
    _project_id: str | None = None

    @property
    def project_id(self) -> str:
        if self._project_id is None:
            self._project_id = self.target.project_id
        return self._project_id

    @property
    def folder(self) -> UserFolder:
        return self.read.folder

    @property
    def settings(self) -> StSettings:
        return self.read.settings

    def _index(self) -> None:
        if self._kb_folders is not None:
            return
        knowledge = open_project_knowledge(self.target.project_dir, self.target.global_folders)
        self._kb_folders, self._by_entries, self._by_lore = {}, {}, LoreIndex()
        for loaded in knowledge.catalog.bases:
            self._remember(loaded.kb, loaded.folder)

    def _remember(self, kb: KnowledgeBase, folder: Path) -> None:
        assert self._kb_folders is not None
        assert self._by_entries is not None and self._by_lore is not None
        self._kb_folders[kb.kb_id] = folder
        if kb.entries:
            self._by_entries.setdefault(entries_fingerprint(kb), []).append(kb)
        self._by_lore.add(kb)

    def kb_folders(self) -> dict[str, Path]:
        """Where each KB here is (read once; the KBs this import makes are added)."""
        self._index()
        assert self._kb_folders is not None
        return self._kb_folders

    def _made(self, summary: ImportSummary) -> None:
        """Index the KBs an import just made."""
        for created in summary.created:
            folder = Path(created.folder)
            self._remember(load_knowledge_base(folder), folder)

    def _import_file(
        self,
        relative: str,
        *,
        existing: Sequence[KnowledgeBase],
        display_name: str | None = None,
    ) -> ImportSummary:
        """A world or card file through the knowledge importer, its KBs indexed."""
        summary = import_knowledge_file(
            self.folder.absolute(relative),
            project_dir=self.target.project_dir,
            global_folder=self.target.global_folders[0],
            database=self.target.database,
            display_name=display_name,
            existing=existing,
        )
        self._made(summary)
        return summary

    def existing_for(self, books: Sequence[KnowledgeBase]) -> list[KnowledgeBase]:
        """The KBs here that ``books`` may duplicate (the same entries): what the
        importer compares them with, without hashing every KB here for each file."""
        self._index()
        assert self._by_entries is not None
        found: list[KnowledgeBase] = []
        for book in books:
            if book.entries:
                found += self._by_entries.get(entries_fingerprint(book), [])
        return found

    def each(
        self, kind: StKind, items: Sequence[str], *, settled: int = 0
    ) -> list[tuple[int, str]]:
        """``items`` numbered for the progress bar, after ``settled`` ones already
        counted (here as they are there)."""
        self.progress(kind, settled, settled + len(items))
        return list(enumerate(items, settled + 1))

    @contextmanager
    def item(self, key: str) -> Iterator[None]:
        """One item written: one that fails (a file that read but will not go in) is a
        problem of the report, and the import goes on with the next."""
        try:
            yield
        except (StoryloomError, OSError) as exc:
            self.read.problem(key, exc)

    # -- books ------------------------------------------------------------------------

    def worlds(self) -> None:
        files = sorted(self.read.worlds)
        for done, relative in self.each("worlds", files):
            with self.item(relative):
                name = Path(relative).stem
                kb = self.read.worlds[relative]
                digest = self.read.digests[relative]
                self.world_entries[name] = _entry_ids(kb)
                made = self.manifest.made(relative)
                kb_id = made.get("kb_id")
                folders = self.kb_folders()
                if isinstance(kb_id, str) and kb_id in folders:
                    self.world_ids[name] = kb_id
                    if made.get("hash") == digest:
                        self.counts.add("worlds", "unchanged")
                    else:
                        kb.kb_id = kb_id
                        save_knowledge_base(kb, folders[kb_id])
                        self.manifest.record(relative, digest, kb_id=kb_id)
                        self.counts.add("worlds", "updated")
                elif (same := self._lore_here(kb)) is not None:
                    # A card's copy of this book is here already: it is this world.
                    self.world_ids[name] = same.kb_id
                    self.manifest.record(relative, digest, kb_id=same.kb_id)
                    self.counts.add("worlds", "unchanged")
                else:
                    summary = self._import_file(
                        relative,
                        display_name=kb.kb_displayName or name,
                        existing=self.existing_for([kb]),
                    )
                    if summary.created:
                        kb_id = summary.created[0].kb_id
                    else:
                        kb_id = summary.duplicates[0].existing_kb_id
                    self.world_ids[name] = kb_id
                    self.manifest.record(relative, digest, kb_id=kb_id)
                    self.counts.add("worlds", "added")
            self.progress("worlds", done, len(files))

    # -- characters -------------------------------------------------------------------

    def _bound_books(self, avatar: str, card_world: Any) -> list[str]:
        books: list[str] = []
        if isinstance(card_world, str) and card_world in self.world_ids:
            books.append(self.world_ids[card_world])
        stem = Path(avatar).stem
        for lore in self.settings.char_lore:
            if lore.name == stem:
                books += [self.world_ids[b] for b in lore.extraBooks if b in self.world_ids]
        return books

    def _tags(self, avatar: str) -> list[str]:
        names = {t.get("id"): t.get("name") for t in self.settings.tags}
        found = [names.get(t) for t in self.settings.tag_map.get(avatar, [])]
        return [n for n in found if isinstance(n, str) and n]

    def characters(self) -> None:
        library = PresetLibrary(self.target.project_dir)
        files = sorted(self.read.cards)
        for relative in sorted(self.read.settled):
            character_id = self.manifest.made(relative).get("character_id")
            if isinstance(character_id, str):
                self.character_ids[Path(relative).name] = character_id
                self.counts.add("characters", "unchanged")
        settled = self.counts.counts["characters"].unchanged
        total = settled + len(files)
        for done, relative in self.each("characters", files, settled=settled):
            with self.item(relative):
                avatar = Path(relative).name
                result = self.read.cards[relative]
                card = result.character
                assert card is not None  # only cards are kept in read.cards
                digest = self.read.digests[relative]
                made = self.manifest.made(relative)
                character_id = made.get("character_id")
                exists = (
                    isinstance(character_id, str)
                    and library.path("characters", character_id).is_file()
                )
                extra_books = self._bound_books(avatar, card.extensions.get("world"))
                tags = list(dict.fromkeys([*card.tags, *self._tags(avatar)]))
                if exists and made.get("hash") == digest:
                    assert isinstance(character_id, str)
                    self.character_ids[avatar] = character_id
                    self.counts.add("characters", "unchanged")
                elif not exists and (same := self._same_character(library, card)):
                    # Imported here before: by hand, or from another copy of the folder.
                    # It keeps what the user made of it, and gains SillyTavern's bindings.
                    here = library.character(same)
                    kbs = list(dict.fromkeys([*here.knowledge_bases, *extra_books]))
                    if kbs != here.knowledge_bases:
                        library.save_character(
                            same, here.model_copy(update={"knowledge_bases": kbs})
                        )
                    self.character_ids[avatar] = same
                    self.manifest.record(relative, digest, character_id=same)
                    self.counts.add("characters", "unchanged")
                elif exists:
                    assert isinstance(character_id, str)
                    update_from_card(
                        library,
                        character_id,
                        card,
                        card_books=self._card_book(result),
                        also_bound=extra_books,
                        tags=tags,
                    )
                    self.character_ids[avatar] = character_id
                    self.manifest.record(relative, digest, character_id=character_id)
                    self.counts.add("characters", "updated")
                else:
                    summary = self._import_file(
                        relative,
                        existing=[
                            *self.existing_for(result.knowledge_bases),
                            *self._book_alias(result),
                        ],
                    )
                    assert summary.character_file is not None
                    character_id = Path(summary.character_file).stem
                    preset = library.character(character_id)
                    kbs = list(dict.fromkeys([*preset.knowledge_bases, *extra_books]))
                    library.save_character(
                        character_id,
                        preset.model_copy(update={"knowledge_bases": kbs, "tags": tags}),
                    )
                    self.character_ids[avatar] = character_id
                    self.manifest.record(relative, digest, character_id=character_id)
                    self.counts.add("characters", "added")
            self.progress("characters", done, total)
        self._allowed_regex()

    def _allowed_regex(self) -> None:
        """SillyTavern's answer to "allow this card's regex scripts?" becomes the
        character's permission here, so its new chats run them as they did there."""
        store = CardPermissionStore(self.target.project_dir)
        for avatar in self.settings.allowed_card_regex:
            character_id = self.character_ids.get(avatar)
            if character_id is None:
                continue
            answer = store.of(character_id)
            if not answer.regex_scripts:
                store.set(
                    character_id, answer.model_copy(update={"asked": True, "regex_scripts": True})
                )

    def _same_character(self, library: PresetLibrary, card: CharacterDefinition) -> str | None:
        """A character here imported from the very same card (its kept card JSON equal)."""
        if self._cards_here is None:
            self._cards_here = cards_here(library)
        digest = card_digest(card)
        return self._cards_here.get(digest) if digest is not None else None

    def _same_lore(self, result: ImportResult) -> KnowledgeBase | None:
        """The KB here that is the card's own book (:func:`card_book_here`: the world
        its ``extensions.world`` names, else the KB with the same lore)."""
        self._index()
        assert self._by_lore is not None
        return card_book_here(
            result.character,
            result.character_book,
            world_named=self._world_named,
            lore=self._by_lore,
        )

    def _world_named(self, name: str) -> KnowledgeBase | None:
        """The world file ``name`` of this folder, as the KB it made here."""
        folder = self.kb_folders().get(self.world_ids.get(name, ""))
        return load_knowledge_base(folder) if folder is not None else None

    def _lore_here(self, book: KnowledgeBase) -> KnowledgeBase | None:
        """The KB here whose entries are ``book``'s lore, when there is one."""
        self._index()
        assert self._by_lore is not None
        return self._by_lore.find(book)

    def _book_alias(self, result: ImportResult) -> list[KnowledgeBase]:
        """The card's book under the id of the KB here with the same lore: the importer
        then binds the character to that KB instead of storing a second copy (the two
        differ only in SillyTavern's raw copy of each entry, which its world files and
        its cards write in different shapes)."""
        same = self._same_lore(result)
        book = result.character_book
        if same is None or book is None:
            return []
        return [
            book.model_copy(update={"kb_id": same.kb_id, "kb_displayName": same.kb_displayName})
        ]

    def _card_book(self, result: ImportResult) -> list[str]:
        """The KB here with the entries of a changed card's book (a book that is new is
        not stored: it is the card's own, still in the card)."""
        same = self._same_lore(result)
        return [same.kb_id] if same is not None else []

    # -- personas ---------------------------------------------------------------------

    def personas(self) -> None:
        library = PersonaLibrary(self.target.project_dir)
        items = _persona_items(self.settings)
        for done, key in self.each("personas", list(items)):
            with self.item(key):
                item = items[key]
                digest = text_digest(item)
                made = self.manifest.made(key)
                persona_id = made.get("persona_id")
                avatar = item["avatar"]
                book = self.world_ids.get(item["lorebook"]) if item["lorebook"] else None
                if item["lorebook"] and book is None:
                    self.inactive.append(
                        StInactive(
                            what=f"persona {item['name']!r} book {item['lorebook']!r}",
                            why="no world file of that name came over",
                        )
                    )
                described = self.settings.persona_descriptions.get(avatar)
                if described is not None and described.position != PERSONA_IN_PROMPT:
                    self.inactive.append(
                        StInactive(
                            what=f"persona {item['name']!r} description position "
                            f"{described.position} (depth {described.depth})",
                            why="storyloom puts a persona's description where the "
                            "pipeline's persona block is",
                        )
                    )
                # SillyTavern's placement and locks ride along (Persona keeps unknown
                # fields), so a move back out writes them as they were.
                kept = (
                    described.model_dump(
                        include={"position", "depth", "role", "title", "connections"}
                    )
                    if described is not None
                    else {}
                )
                persona = Persona(
                    name=item["name"],
                    description=item["description"],
                    knowledge_base=book,
                    **kept,
                )
                if isinstance(persona_id, str) and persona_id in library.ids():
                    if made.get("hash") == digest:
                        self.counts.add("personas", "unchanged")
                    else:
                        old = library.get(persona_id)
                        library.update(
                            persona_id,
                            persona.model_copy(update={"id": persona_id, "avatar": old.avatar}),
                            expected_version=None,
                        )
                        self.manifest.record(key, digest, persona_id=persona_id)
                        self.counts.add("personas", "updated")
                else:
                    persona_id = library.create(persona).id
                    image = self.folder.absolute(f"User Avatars/{avatar}")
                    media = {v: k for k, v in AVATAR_SUFFIXES.items()}.get(image.suffix.lower())
                    if image.is_file() and media is not None:
                        library.set_avatar(persona_id, image.read_bytes(), media)
                    self.manifest.record(key, digest, persona_id=persona_id)
                    self.counts.add("personas", "added")
                self.persona_ids[avatar] = persona_id
            self.progress("personas", done, len(items))
        default = self.persona_ids.get(self.settings.default_persona or "")
        if default is not None and library.default_id() != default:
            library.set_default(default)

    # -- presets, templates -----------------------------------------------------------

    def presets(self) -> None:
        workflows = ProjectWorkflows(self.target.project_dir)
        files = sorted(self.read.presets)
        for done, relative in self.each("presets", files):
            with self.item(relative):
                digest = self.read.digests[relative]
                made = self.manifest.made(relative)
                workflow_id = made.get("workflow_id")
                if (
                    made.get("hash") == digest
                    and isinstance(workflow_id, str)
                    and workflows.exists(workflow_id)
                ):
                    self.counts.add("presets", "unchanged")
                else:
                    workflow, _ = workflows.import_st_preset(
                        self.read.presets[relative], file_name=relative, overwrite=True
                    )
                    workflow_id = workflow.id
                    self.manifest.record(relative, digest, workflow_id=workflow_id)
                    self.counts.add("presets", "updated" if made else "added")
                self.preset_ids[Path(relative).stem] = workflow_id
            self.progress("presets", done, len(files))

    def templates(self, kind: StKind) -> None:
        library = TemplateLibrary(self.target.home)
        files = self.folder.of("instruct" if kind == "instruct" else "context")
        for done, relative in self.each(kind, files):
            with self.item(relative):
                digest = file_digest(self.folder.absolute(relative))
                if self.manifest.digest(relative) == digest:
                    self.counts.add(kind, "unchanged")
                else:
                    library.import_file(self.folder.absolute(relative))
                    self.counts.add(kind, "updated" if self.manifest.digest(relative) else "added")
                    self.manifest.record(relative, digest)
            self.progress(kind, done, len(files))

    # -- variables, regex -------------------------------------------------------------

    def variables(self) -> None:
        store = GlobalVariables.in_home(self.target.home)
        items = _variable_items(self.settings)
        before = store.load()
        after = dict(before)
        for done, (key, value) in enumerate(items.items(), 1):
            digest = text_digest(value)
            name = key.removeprefix("settings.json#variable/")
            if self.manifest.digest(key) == digest:
                self.counts.add("variables", "unchanged")
            else:
                self.counts.add("variables", "updated" if self.manifest.digest(key) else "added")
                after[name] = value
            self.progress("variables", done, len(items))
        if after != before:
            store.save_changes(before, after)
        for key, value in items.items():
            if self.manifest.digest(key) != text_digest(value):
                self.manifest.record(key, text_digest(value))

    # -- chats ------------------------------------------------------------------------

    def _chat_settings(
        self, chat: ChatLog, avatar: str | None, *, group_id: str | None = None
    ) -> tuple[dict[str, Any], ChatState | None]:
        metadata = chat.header.chat_metadata if chat.header is not None else {}
        settings: dict[str, Any] = {}
        persona = self._persona_of(metadata.get("persona"), avatar, group_id)
        if persona is not None:
            settings["persona_id"] = persona
        book = metadata.get("world_info")
        if isinstance(book, str) and book in self.world_ids:
            settings["knowledge_bases"] = [self.world_ids[book]]
        if avatar is not None and avatar in self.settings.allowed_card_regex:
            settings["allow_regex_scripts"] = True
        active = self.preset_ids.get(self.settings.active_preset or "")
        if active is not None:
            settings["pipeline"] = active
        background = background_from_chat_metadata(metadata) or self.settings.background
        if background and background in self._backgrounds_here():
            settings["background"] = background
        return settings, self._timed_state(metadata)

    def _persona_of(self, locked: Any, avatar: str | None, group_id: str | None) -> str | None:
        """The persona a chat speaks as, as SillyTavern picks it: the one locked to the
        chat, else the first one connected to its character (or group); None leaves it
        to the default persona."""
        if isinstance(locked, str) and locked in self.persona_ids:
            return self.persona_ids[locked]
        wanted = ("character", avatar) if avatar is not None else ("group", group_id)
        for persona_avatar, described in self.settings.persona_descriptions.items():
            for connection in described.connections:
                if (connection.type, connection.id) == wanted:
                    found = self.persona_ids.get(persona_avatar)
                    if found is not None:
                        return found
        return None

    def _backgrounds_here(self) -> set[str]:
        if self._background_names is None:
            files = self.folder.of("backgrounds")
            if files:
                # The chats come before the images are counted: bring the images first.
                import_st_backgrounds(self.folder.absolute(files[0]).parent, self.target.home)
            self._background_names = set(ChatBackgrounds(self.target.home).names())
        return self._background_names

    def _timed_state(self, metadata: Mapping[str, Any]) -> ChatState | None:
        tables: dict[str, dict[str, dict[str, TimedEffect]]] = {"sticky": {}, "cooldown": {}}
        for kind, effects in timed_effects(dict(metadata)).items():
            for key, effect in effects.items():
                world, _, uid = key.rpartition(".")
                kb_id = self.world_ids.get(world)
                entry_id = self.world_entries.get(world, {}).get(uid)
                if kb_id is None or entry_id is None:
                    self.inactive.append(
                        StInactive(
                            what=f"lore timer {kind} {key}",
                            why=f"no book named {world!r} came over",
                        )
                    )
                    continue
                tables[kind].setdefault(kb_id, {})[entry_id] = TimedEffect(
                    start=effect.start, end=effect.end, protected=effect.protected
                )
        if not tables["sticky"] and not tables["cooldown"]:
            return None
        return ChatState(
            timed_effects=TimedEffectsState(sticky=tables["sticky"], cooldown=tables["cooldown"])
        )

    def _snapshot_of(self, avatar: str | None) -> CharacterSnapshot | None:
        character_id = self.character_ids.get(avatar or "")
        if character_id is None:
            return None
        if character_id not in self._snapshots:
            preset = PresetLibrary(self.target.project_dir).character(character_id)
            self._snapshots[character_id] = character_snapshot(
                character_id, preset, datetime.now(UTC)
            )
        return self._snapshots[character_id]

    def _join(
        self,
        chat: ChatLog,
        conversation_id: str,
        base: list[Message],
        *,
        branch: bool,
    ) -> str:
        """Add the lines of ``chat`` after its common prefix with ``base``; the new leaf."""
        shared = _common_prefix(chat.messages, base)
        if shared == len(chat.messages):
            return base[shared - 1].id if shared else (base[-1].id if base else "")
        parent = base[shared - 1].id if shared else None
        added = continue_st_chat(
            self.target.tree,
            conversation_id,
            chat,
            start=shared,
            parent_id=parent,
            keep_pointer=branch,
        )
        return added[-1]

    def _load_chat(self, relative: str) -> ChatLog | None:
        """The chat parsed and checked now, just before it is written (its digest from
        the very bytes parsed); None when it does not read, named as a problem."""
        try:
            chat, digest = read_chat_file(self.folder.absolute(relative))
        except (StoryloomError, OSError, ValueError) as exc:
            self.read.digests.pop(relative, None)
            self.read.problem(relative, exc)
            self.broken.add(relative)
            return None
        self.read.digests[relative] = digest
        return chat

    def _main_of(self, chat: ChatLog, relative: str, names: Mapping[str, str]) -> str | None:
        """The main chat of a checkpoint or branch, unless that one did not read."""
        main = _main_chat(chat.header, relative, names)
        return None if main in self.broken else main

    def chats(self) -> None:
        files = sorted(self.read.chats)
        names = {f.removesuffix(".jsonl"): f for f in [*files, *self.read.settled]}
        for relative in sorted(self.read.settled):
            place = self._known_place(self.manifest.made(relative))
            if relative.startswith("chats/") and place is not None:
                self.chat_places[relative] = place
                self.counts.add("chats", "unchanged")
        ordered = _mains_first(files, self.read.chats, names)
        tree = self.target.tree
        settled = self.counts.counts["chats"].unchanged
        total = settled + len(ordered)
        numbered = self.each("chats", ordered, settled=settled)
        for first in range(0, len(numbered), CHATS_PER_COMMIT):
            with tree.batch():
                for done, relative in numbered[first : first + CHATS_PER_COMMIT]:
                    with self.item(relative):
                        chat = self._load_chat(relative)
                        if chat is None:
                            self.progress("chats", done, total)
                            continue
                        digest = self.read.digests[relative]
                        made = self.manifest.made(relative)
                        avatar = self._avatar_of_folder(Path(relative).parent.name)
                        place = self._known_place(made)
                        main = self._main_of(chat, relative, names)
                        if place is not None and made.get("hash") == digest:
                            self.chat_places[relative] = place
                            self.counts.add("chats", "unchanged")
                        elif place is not None:
                            conversation_id, leaf = place
                            leaf = self._join(
                                chat,
                                conversation_id,
                                tree.path(leaf or None),
                                branch=main is not None,
                            )
                            self._done_chat(relative, digest, conversation_id, leaf, "updated")
                        elif main is None and (here := self._chat_here(chat)) is not None:
                            # Imported here before (by hand, or from the folder at another path).
                            conversation_id, leaf = here
                            before = leaf
                            leaf = self._join(
                                chat, conversation_id, tree.path(leaf or None), branch=False
                            )
                            grew: Outcome = "unchanged" if leaf == before else "updated"
                            self._done_chat(relative, digest, conversation_id, leaf, grew)
                        elif main is not None and main in self.chat_places:
                            conversation_id, main_leaf = self.chat_places[main]
                            leaf = self._join(
                                chat, conversation_id, tree.path(main_leaf or None), branch=True
                            )
                            self._done_chat(relative, digest, conversation_id, leaf, "added")
                        else:
                            settings, state = self._chat_settings(chat, avatar)
                            imported = import_st_chat(
                                tree,
                                chat,
                                project_id=self.project_id,
                                character=self._snapshot_of(avatar),
                                settings=settings,
                                state=state,
                            )
                            conversation = tree.conversation(imported.conversation_id)
                            leaf = conversation.pointer or ""
                            self._done_chat(
                                relative, digest, imported.conversation_id, leaf, "added"
                            )
                    self.progress("chats", done, total)

    def _chat_here(self, chat: ChatLog) -> tuple[str, str] | None:
        """The conversation here made from this chat before this run, found by the
        header SillyTavern wrote (its character and creation date)."""
        key = _header_key(chat.header.to_json() if chat.header is not None else None)
        if key is None:
            return None
        if self._chats_here is None:
            self._chats_here = {}
            tree = self.target.tree
            for summary in tree.conversations(self.project_id):
                conversation = tree.conversation(summary.id)
                found = _header_key(conversation.metadata.get(HEADER_KEY))
                if found is not None:
                    place = (conversation.id, conversation.pointer or "")
                    self._chats_here.setdefault(found, place)
        return self._chats_here.get(key)

    def _done_chat(
        self, relative: str, digest: str, conversation_id: str, leaf: str, outcome: Outcome
    ) -> None:
        self.chat_places[relative] = (conversation_id, leaf)
        self.manifest.record(relative, digest, conversation_id=conversation_id, leaf=leaf)
        self.counts.add("chats" if relative.startswith("chats/") else "group_chats", outcome)

    def _known_place(self, made: Mapping[str, Any]) -> tuple[str, str] | None:
        return _known_place(self.target.tree, made)

    def _avatar_of_folder(self, folder_name: str) -> str | None:
        """chats/<name>/ is named for the card's avatar file without its extension."""
        return next((a for a in self.character_ids if Path(a).stem == folder_name), None)

    def groups(self) -> None:
        files = sorted(self.read.groups)
        chats_by_id = {
            Path(f).stem: f
            for f in [*self.read.group_chats, *self.read.settled]
            if f.startswith("group chats/")
        }
        group_files = [*self.read.group_chats, *self.read.settled]
        names = {f.removesuffix(".jsonl"): f for f in group_files}
        chat_files = [
            f for g in files for c in self.read.groups[g].chats if (f := chats_by_id.get(c))
        ]
        self.progress("group_chats", 0, len(chat_files))
        chat_done = 0
        for done, relative in self.each("groups", files):
            with self.item(relative):
                group = self.read.groups[relative]
                digest = self.read.digests[relative]
                known = self.manifest.digest(relative)
                cards = {a: s for a in group.members if (s := self._snapshot_of(a)) is not None}
                mine = [f for c in group.chats if (f := chats_by_id.get(c))]
                for chat_file in [f for f in mine if f in self.read.settled]:
                    place = self._known_place(self.manifest.made(chat_file))
                    if place is not None:
                        self.chat_places[chat_file] = place
                        self.counts.add("group_chats", "unchanged")
                    chat_done += 1
                    self.progress("group_chats", chat_done, len(chat_files))
                mine = [f for f in mine if f in self.read.group_chats]
                # A group's checkpoints and branches name their main chat too.
                for chat_file in _mains_first(mine, self.read.group_chats, names):
                    with self.item(chat_file):
                        self._group_chat(chat_file, group, cards, names)
                    chat_done += 1
                    self.progress("group_chats", chat_done, len(chat_files))
                if known != digest:
                    self.manifest.record(relative, digest)
                outcome: Outcome = (
                    "unchanged" if known == digest else "updated" if known else "added"
                )
                self.counts.add("groups", outcome)
            self.progress("groups", done, len(files))

    def _group_chat(
        self,
        chat_file: str,
        group: GroupFile,
        cards: Mapping[str, CharacterSnapshot],
        names: Mapping[str, str],
    ) -> None:
        tree = self.target.tree
        chat = self._load_chat(chat_file)
        if chat is None:
            return
        chat_digest = self.read.digests[chat_file]
        made = self.manifest.made(chat_file)
        place = self._known_place(made)
        main = self._main_of(chat, chat_file, names)
        if place is not None and made.get("hash") == chat_digest:
            self.chat_places[chat_file] = place
            self.counts.add("group_chats", "unchanged")
        elif place is not None:
            base = tree.path(place[1] or None)
            leaf = self._join(chat, place[0], base, branch=main is not None)
            self._done_chat(chat_file, chat_digest, place[0], leaf, "updated")
        elif main is not None and main in self.chat_places:
            conversation_id, main_leaf = self.chat_places[main]
            leaf = self._join(chat, conversation_id, tree.path(main_leaf or None), branch=True)
            self._done_chat(chat_file, chat_digest, conversation_id, leaf, "added")
        else:
            imported, warnings = import_st_group_chat(
                tree, chat, group, project_id=self.project_id, cards=cards
            )
            self.inactive += [StInactive(what=chat_file, why=w) for w in warnings]
            conversation = tree.conversation(imported.conversation_id)
            update, _ = self._chat_settings(chat, None, group_id=group.id)
            try:
                tree.update_conversation(
                    conversation.id, settings=conversation.settings.model_copy(update=update)
                )
            except BaseException:
                tree.delete_conversation(conversation.id)  # all or nothing
                raise
            leaf = conversation.pointer or ""
            self._done_chat(chat_file, chat_digest, imported.conversation_id, leaf, "added")

    def global_books(self) -> None:
        wanted = [self.world_ids[w] for w in self.settings.global_worlds if w in self.world_ids]
        for name in self.settings.global_worlds:
            if name not in self.world_ids:
                self.inactive.append(
                    StInactive(what=f"global world {name!r}", why="no such world file")
                )
        project = load_project(self.target.project_dir)
        merged = list(dict.fromkeys([*project.globalKnowledgeBases, *wanted]))
        if merged != project.globalKnowledgeBases:
            save_project(
                self.target.project_dir, project.model_copy(update={"globalKnowledgeBases": merged})
            )

    # -- global regex, quick replies, backgrounds, sprites, themes ----------------------

    def global_regex(self) -> None:
        """``extension_settings.regex`` into the data directory's global scripts, by id: a
        script already there is replaced by its new version, the others are kept."""
        store = GlobalRegexScripts.in_home(self.target.home)
        items = _regex_items(self.settings)
        try:
            here = store.load()
        except FileFormatError as exc:
            self.read.problem(str(exc.path), exc)
            return
        at = {script.id: index for index, script in enumerate(here) if script.id}
        changed = False
        for done, (key, raw) in enumerate(items.items(), 1):
            with self.item(key):
                digest = text_digest(raw)
                known = self.manifest.digest(key)
                script = read_scripts(raw)[0]
                if known == digest and script.id in at:
                    self.counts.add("regex", "unchanged")
                else:
                    if script.id in at:
                        here[at[script.id]] = script
                    else:
                        at[script.id] = len(here)
                        here.append(script)
                    changed = True
                    self.manifest.record(key, digest)
                    self.counts.add("regex", "updated" if known else "added")
            self.progress("regex", done, len(items))
        if changed:
            store.save(here)

    def _files_outcome(self, kind: StKind, files: Sequence[str]) -> None:
        """Count and record files another importer brought in (by their hashes)."""
        for done, relative in enumerate(files, 1):
            digest = file_digest(self.folder.absolute(relative))
            known = self.manifest.digest(relative)
            if known == digest:
                self.counts.add(kind, "unchanged")
            else:
                self.manifest.record(relative, digest)
                self.counts.add(kind, "updated" if known else "added")
            self.progress(kind, done, len(files))

    def quick_replies(self) -> None:
        files = self.folder.of("quick_replies")
        if not files:
            return
        self.progress("quick_replies", 0, len(files))
        folder = self.folder.absolute(files[0]).parent
        _, problems = import_st_quick_replies(
            folder, self.target.project_dir, self.settings.visible_quick_reply_sets
        )
        broken = set()
        for problem in problems:
            relative = self._relative(problem.path)
            broken.add(relative)
            self.read.problem(relative, problem)
        self._files_outcome("quick_replies", [f for f in files if f not in broken])

    def backgrounds(self) -> None:
        files = self.folder.of("backgrounds")
        if not files:
            return
        self.progress("backgrounds", 0, len(files))
        here = self._backgrounds_here()
        taken = [f for f in files if Path(f).name in here]
        for relative in files:
            if Path(relative).name not in here:
                self.inactive.append(
                    StInactive(
                        what=f"background {relative}",
                        why="not an image (a video, or a name storyloom does not take)",
                    )
                )
        self._files_outcome("backgrounds", taken)

    def sprites(self) -> None:
        files = self.folder.of("sprites")
        if not files:
            return
        self.progress("sprites", 0, len(files))
        library = PresetLibrary(self.target.project_dir)
        by_folder: dict[str, list[str]] = {}
        for relative in files:
            by_folder.setdefault(Path(relative).parent.name, []).append(relative)
        taken: list[str] = []
        for stem, mine in sorted(by_folder.items()):
            avatar = self._avatar_of_folder(stem)
            if avatar is None:
                self.inactive.append(
                    StInactive(
                        what=f"sprites of {stem!r} ({len(mine)} files)",
                        why="no character card of that name came over",
                    )
                )
                continue
            with self.item(f"characters/{stem}/"):
                folder = self.folder.absolute(mine[0]).parent
                import_st_sprites(library, self.character_ids[avatar], folder)
                taken += mine
        self._files_outcome("sprites", taken)

    def themes(self) -> None:
        files = self.folder.of("themes")
        if not files:
            return
        kept = self.target.home / KEPT_THEMES_DIR
        for relative in files:
            source = self.folder.absolute(relative)
            with self.item(relative):
                data = source.read_bytes()
                target = kept / source.name
                if not target.is_file() or target.read_bytes() != data:
                    atomic_write_bytes(target, data)
        self.inactive.append(
            StInactive(
                what=f"{len(files)} theme(s)",
                why=f"kept in {KEPT_THEMES_DIR}/ of the data directory, not applied: the web "
                "app has its own look (export-sillytavern writes them back)",
            )
        )
        self._files_outcome("themes", files)

    def _relative(self, path: Path | str) -> str:
        try:
            return Path(path).resolve().relative_to(self.folder.path.resolve()).as_posix()
        except ValueError:
            return str(path)


class _Settled:
    """Whether a card or chat is here as it is there: its manifest line has its content
    hash, and what it made is still here (a thing the user deleted comes again)."""

    def __init__(self, target: MoveInTarget, manifest: Manifest) -> None:
        self.target = target
        self.manifest = manifest
        self.library = PresetLibrary(target.project_dir)

    def __call__(self, relative: str, digest: str) -> bool:
        made = self.manifest.made(relative)
        if made.get("hash") != digest:
            return False
        character_id = made.get("character_id")
        if isinstance(character_id, str):
            return self.library.path("characters", character_id).is_file()
        return _known_place(self.target.tree, made) is not None


def _known_place(tree: TurnTree, made: Mapping[str, Any]) -> tuple[str, str] | None:
    """The conversation a chat file made and its last message, while both are here."""
    conversation_id, leaf = made.get("conversation_id"), made.get("leaf")
    if not isinstance(conversation_id, str) or not isinstance(leaf, str):
        return None
    try:
        tree.conversation(conversation_id)
        if leaf:
            tree.message(leaf)
    except NotFound:
        return None  # the user deleted it here: it comes again
    return conversation_id, leaf


def _header_key(header: Any) -> str | None:
    """A chat's header as a key: the character and the creation date, when it has both."""
    if not isinstance(header, Mapping):
        return None
    name, created = header.get("character_name"), header.get("create_date")
    if not isinstance(name, str) or not isinstance(created, str) or not name or not created:
        return None
    return f"{name}\n{created}"


def _entry_ids(kb: KnowledgeBase) -> dict[str, str]:
    """SillyTavern's uid of each entry (kept in its raw copy) -> the entry's id here."""
    out: dict[str, str] = {}
    for entry in kb.entries:
        data = entry.model_dump(mode="json", by_alias=True)
        raw = data.get("extensions", {}).get("sillytavern")
        uid = raw.get("uid") if isinstance(raw, dict) else None
        if uid is not None and isinstance(data.get("id"), str):
            out[str(uid)] = data["id"]
    return out


def _main_chat(header: ChatHeader | None, relative: str, names: Mapping[str, str]) -> str | None:
    """The chat file ``main_chat`` names, in the same character's folder."""
    metadata = header.chat_metadata if header is not None else {}
    main = metadata.get("main_chat")
    if not isinstance(main, str) or not main:
        return None
    found = names.get(f"{Path(relative).parent.as_posix()}/{main}")
    return found if found != relative else None


def _mains_first(
    files: Sequence[str], chats: Mapping[str, ChatHeader | None], names: Mapping[str, str]
) -> list[str]:
    """Every chat after the chat its ``main_chat`` names (a chain, or a loop, is cut)."""
    ordered: list[str] = []
    placed: set[str] = set()

    def place(relative: str, seen: frozenset[str]) -> None:
        if relative in placed:
            return
        main = _main_chat(chats[relative], relative, names)
        if main is not None and main in chats and main not in seen:
            place(main, seen | {relative})
        placed.add(relative)
        ordered.append(relative)

    for relative in files:
        place(relative, frozenset({relative}))
    return ordered


def _line_key(name: Any, text: Any, sent: Any) -> tuple[str, str, str]:
    return (str(name or ""), str(text or ""), str(sent or ""))


def _common_prefix(lines: Sequence[ChatMessage], path: Sequence[Message]) -> int:
    """How many first lines of a chat file are the first messages of ``path``."""
    shared = 0
    for line, message in zip(lines, path, strict=False):
        kept = message.extra.get(LINE_KEY)
        sent = kept.get("send_date") if isinstance(kept, dict) else None
        if _line_key(line.name, line.mes, line.send_date) != _line_key(
            message.name, message.content, sent
        ):
            break
        shared += 1
    return shared


_EXTENSION_NOTES = {
    "expressions": "storyloom has no expression classifier: a chat shows the card's default "
    "sprite, or the one picked in its settings",
}
"""Why an extension's settings that are read elsewhere (or not) stay behind."""


def import_folder(
    target: MoveInTarget,
    path: Path,
    user: str | None = None,
    on_progress: ProgressCallback | None = None,
) -> StImportReport:
    """Import the folder (see the module's docstring); the report of what came."""
    folder = find_user_folder(path, user)
    manifest = Manifest(target.project_dir, folder.path)
    settled = _Settled(target, manifest)
    read = _read_folder(folder, settled)
    run = _Import(
        target=target,
        read=read,
        manifest=manifest,
        progress=on_progress or (lambda kind, done, total: None),
    )
    try:
        run.worlds()
        run.characters()
        run.personas()
        run.presets()
        run.templates("instruct")
        run.templates("context")
        run.variables()
        run.global_books()
        run.chats()
        run.groups()
        run.global_regex()
        run.quick_replies()
        run.backgrounds()
        run.sprites()
        run.themes()
    finally:
        run.manifest.save()
    settings = read.settings
    for kind, chosen in (
        ("instruct", settings.instruct_preset),
        ("context", settings.context_preset),
    ):
        if chosen:
            run.inactive.append(
                StInactive(
                    what=f"the {kind} template chosen in SillyTavern: {chosen!r}",
                    why="storyloom picks templates per connection: choose it for a "
                    "text-completion connection in Settings",
                )
            )
    for name in settings.extensions:
        why = _EXTENSION_NOTES.get(name, "storyloom has no use for them")
        run.inactive.append(StInactive(what=f"extension settings {name!r}", why=why))
    return StImportReport(
        path=str(folder.path),
        counts=list(run.counts.counts.values()),
        inactive=run.inactive,
        problems=read.problems,
    )
