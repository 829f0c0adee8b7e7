"""Moving out: a project written as a SillyTavern user folder (``data/<user>/``).

What SillyTavern reads from a user folder, and what each thing here becomes:

- ``characters/<avatar>.png``: each character of the project as a PNG card (``chara`` V2
  and ``ccv3`` chunks, :func:`~storyloom.chat.personalab.card_export.card_png`) on its
  avatar, or on a generated portrait. The card's top-level ``chat`` names the chat
  SillyTavern opens first; ``data.extensions.world`` names the world file of its first
  bound book, and the other bound books go into the settings' ``world_info.charLore``.
  A chat whose character is no longer in the library brings one made from its snapshot.
- ``worlds/<name>.json``: every lore book (not the "· character" definition KBs) of the
  project and every book bound anywhere, as world info.
- ``chats/<avatar without .png>/<file>.jsonl``: each conversation's main path (root →
  its pointer) as the chat file, and each other branch that ends somewhere the main
  file does not reach as ``Branch #<n> - <date>.jsonl``, whose ``chat_metadata.main_chat``
  names the main file (SillyTavern's branches and checkpoints). A leaf whose parent is
  on an exported path is there already as a swipe of that line, so it gets no file.
- ``groups/<id>.json`` and ``group chats/<chat id>.jsonl``: group chats the same way;
  the branches are more chats of the group.
- ``User Avatars/<id>.png`` and ``settings.json``: the personas (``power_user.personas``,
  ``persona_descriptions`` with each one's ``lorebook``, ``default_persona``), the global
  books (``world_info_settings.world_info.globalSelect``), the global variables
  (``extension_settings.variables.global``), the global regex scripts
  (``extension_settings.regex``), the characters whose card scripts a chat allowed
  (``extension_settings.character_allowed_regex``, by card file) and the quick reply sets
  shown (``extension_settings.quickReplyV2``).
- ``characters/<card file stem>/``: each character's expression sprites.
- ``QuickReplies/<name>.json``, ``backgrounds/`` and ``themes/``: the project's quick reply
  sets, the data directory's backgrounds and the themes a move-in kept.

A chat's metadata gets ``persona`` when the chat speaks as a persona of its own,
``world_info`` when it has a book of its own (SillyTavern binds one; more are reported)
and ``custom_background`` when it shows a background.

A chat pipeline made from a SillyTavern preset does not go back out as a preset: nothing
here writes a chat-completion preset from a pipeline, so it is reported.

The folder is written beside ``dest`` and renamed into place last, so a failed export
leaves nothing half written.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import shutil
import uuid
from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from storyloom.chat.personalab.card_export import card_png, default_portrait, primary_book
from storyloom.chat.personalab.chat_backgrounds import (
    ChatBackgrounds,
    background_from_chat_metadata,
    chat_metadata_background,
    export_st_backgrounds,
)
from storyloom.chat.personalab.library import PresetLibrary
from storyloom.chat.personalab.personas import Persona, PersonaLibrary
from storyloom.chat.personalab.quick_replies import (
    QuickReplyLibrary,
    export_st_quick_replies,
    st_file_name,
)
from storyloom.chat.personalab.sprites import export_st_sprites
from storyloom.chat.store.conversation import Conversation
from storyloom.chat.store.global_variables import GlobalVariables
from storyloom.chat.store.group_members import MEMBERS_KEY, member_snapshots
from storyloom.chat.store.regex_library import GlobalRegexScripts
from storyloom.chat.store.st_chat import HEADER_KEY, export_st_chat, humanized_time
from storyloom.chat.store.st_group_chat import GROUP_FILE_KEY
from storyloom.chat.store.turn_tree import TurnTree
from storyloom.core.errors import FieldProblem, InvalidInput, StoryloomError
from storyloom.core.settings import SettingsStore
from storyloom.knowledge.card_knowledge import CHARACTER_DEFINITION
from storyloom.knowledge.catalog import KnowledgeCatalog
from storyloom.knowledge.global_library import global_folders
from storyloom.knowledge.knowledge_base import KnowledgeBase
from storyloom.knowledge.st_export import export_world_info
from storyloom.project.project_knowledge import open_project_knowledge
from storyloom.server.workflow_service import ProjectWorkflows
from storyloom.sillytavern.character import CharacterDefinition
from storyloom.sillytavern.character_card import CARD_CHUNK_V2, CARD_CHUNK_V3, encode_card_text
from storyloom.sillytavern.chat_log import UNUSED_NAME, dump_line
from storyloom.sillytavern.png_chunks import is_png, read_chunks, replace_text_chunks, text_chunks
from storyloom.store.database import Database

USER_FOLDERS = (
    "characters",
    "chats",
    "groups",
    "group chats",
    "worlds",
    "User Avatars",
    "backgrounds",
    "themes",
    "user",
    "user/images",
)
"""The folders of a user folder SillyTavern reads at once (it makes any others it wants)."""
SETTINGS_FILE = "settings.json"
GROUP_CHATS = "group chats"
QUICK_REPLIES = "QuickReplies"
KEPT_THEMES_DIR = "sillytavern/themes"
"""Where a move-in keeps SillyTavern's themes in the data directory (not applied here)."""
PRESET_PIPELINE_FORMAT = "sillytavern-chat-completion-preset"
"""``importedFrom.format`` of a chat pipeline made from a SillyTavern preset."""
PERSONA_POSITION_IN_PROMPT = 0
PERSONA_DEFAULT_DEPTH = 2
PERSONA_DEFAULT_ROLE = 0
"""SillyTavern's defaults for a persona description (in the prompt, depth 2, system)."""
_CONVERSATION_KEYS = frozenset({HEADER_KEY, MEMBERS_KEY, GROUP_FILE_KEY})
"""Conversation metadata keys that are storyloom's bookkeeping, not ``chat_metadata``."""
_UNSAFE = re.compile(r'[\x00-\x1f<>:"/\\|?*]+')
_RESERVED = re.compile(r"^(con|prn|aux|nul|com\d|lpt\d)(\..*)?$", re.IGNORECASE)


class StExportCounts(BaseModel):
    """How many of each kind were written."""

    characters: int = 0
    worlds: int = 0
    personas: int = 0
    chats: int = Field(default=0, description="Main chat files of one-to-one chats")
    branches: int = Field(default=0, description="Branch files (chat_metadata.main_chat)")
    groups: int = 0
    group_chats: int = Field(default=0, description="Group chat files, branches included")
    regex_scripts: int = Field(default=0, description="Global regex scripts (settings.json)")
    allowed_regex: int = Field(
        default=0, description="Characters whose card regex scripts a chat allowed"
    )
    quick_replies: int = Field(default=0, description="Quick reply set files")
    backgrounds: int = Field(default=0, description="Background images")
    sprites: int = Field(default=0, description="Expression sprite files, all characters")
    themes: int = Field(default=0, description="Theme files a move-in kept")


class StExportProblem(BaseModel):
    """Something that could not go out as it is here, and why."""

    what: str = Field(description="The character, book, chat or persona it is about")
    reason: str


class StExportReport(BaseModel):
    """What ``storyloom export-sillytavern`` wrote."""

    dest: str = Field(description="The user folder written")
    counts: StExportCounts = Field(default_factory=StExportCounts)
    files: list[str] = Field(default_factory=list, description="Relative to dest, sorted")
    problems: list[StExportProblem] = Field(default_factory=list)


def safe_file_name(name: str, fallback: str) -> str:
    """``name`` as SillyTavern's ``sanitize-filename`` would leave it: no path or control
    characters, no trailing dots or spaces, no device names; ``fallback`` when empty."""
    cleaned = _UNSAFE.sub("", name).strip().rstrip(". ")[:150]
    if not cleaned or _RESERVED.match(cleaned):
        return fallback
    return cleaned


def _unique(name: str, taken: set[str], *, suffix: str = "") -> str:
    """``name`` (plus ``suffix``), or ``name1``, ``name2``... as SillyTavern numbers a new
    card whose file exists; compared case-blind, as a file system may."""
    candidate = f"{name}{suffix}"
    number = 0
    while candidate.lower() in taken:
        number += 1
        candidate = f"{name}{number}{suffix}"
    taken.add(candidate.lower())
    return candidate


@dataclass
class _Character:
    """A character going out: its card and the file it becomes."""

    preset: CharacterDefinition
    avatar_file: str
    """``<name>.png`` in ``characters/``; its stem names the chats folder."""
    image: bytes | None
    preset_id: str | None = None
    chats: list[tuple[float, str]] = field(default_factory=list)
    """(last change, chat file stem) of each main chat: the newest opens first."""
    regex_allowed: set[bool] = field(default_factory=set)
    """Whether each of its chats (group chats too) allows the card's regex scripts."""
    written: bool = False

    @property
    def stem(self) -> str:
        return self.avatar_file.removesuffix(".png")


@dataclass
class _Group:
    group_id: str
    name: str
    members: list[str]
    disabled: list[str]
    document: dict[str, Any]
    chats: list[tuple[float, str, dict[str, Any]]] = field(default_factory=list)
    """(last change, chat id, chat_metadata) of each chat file."""


class _Writer:
    """One export: the staging folder, what is in it, and the report."""

    def __init__(self, staging: Path, report: StExportReport) -> None:
        self.staging = staging
        self.report = report

    def write(self, relative: str, data: bytes | str) -> None:
        path = self.staging / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, str):
            path.write_text(data, encoding="utf-8", newline="")
        else:
            path.write_bytes(data)
        self.report.files.append(relative)

    def problem(self, what: str, reason: str) -> None:
        self.report.problems.append(StExportProblem(what=what, reason=reason))

    def adopt(self, folder: str) -> None:
        """Put the files another module's exporter wrote under ``folder`` in the report."""
        listed = set(self.report.files)
        self.report.files.extend(
            relative
            for path in sorted((self.staging / folder).rglob("*"))
            if path.is_file()
            and (relative := path.relative_to(self.staging).as_posix()) not in listed
        )


def check_destination(dest: Path, *, overwrite: bool) -> None:
    """Refuse a ``dest`` that is a file, or a folder with something in it (unless
    ``overwrite``): moving out never mixes into another folder by accident."""
    if not dest.exists():
        return
    if not dest.is_dir():
        raise InvalidInput(
            f"{dest} is a file, not a folder",
            [FieldProblem("dest", f"{dest} exists and is not a folder")],
        )
    if not overwrite and any(dest.iterdir()):
        raise InvalidInput(
            f"{dest} is not empty; give an empty or new folder, or --overwrite to replace it",
            [FieldProblem("dest", f"{dest} exists and is not empty")],
        )


def export_user_folder(
    home: Path,
    project_dir: Path,
    dest: Path,
    *,
    overwrite: bool = False,
) -> StExportReport:
    """Write the project at ``project_dir`` (its conversations in the data directory
    ``home``) as a SillyTavern user folder at ``dest``; returns what was written.

    Raises :class:`InvalidInput` naming ``dest`` when it is a file, or a folder that is
    not empty and ``overwrite`` is false; a broken project.json is the error loading it
    gives. Anything else that cannot go out is skipped and reported.
    """
    dest = dest.absolute()
    check_destination(dest, overwrite=overwrite)
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = dest.parent / f".{dest.name}.export-{uuid.uuid4().hex[:8]}"
    report = StExportReport(dest=str(dest))
    staging.mkdir()
    try:
        _export(home, project_dir, _Writer(staging, report))
        report.files.sort()
        _move_into_place(staging, dest)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return report


def _move_into_place(staging: Path, dest: Path) -> None:
    old: Path | None = None
    if dest.exists():
        old = dest.parent / f".{dest.name}.replaced-{uuid.uuid4().hex[:8]}"
        dest.rename(old)
    try:
        staging.rename(dest)
    except BaseException:
        if old is not None:
            old.rename(dest)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _export(home: Path, project_dir: Path, out: _Writer) -> None:
    for folder in USER_FOLDERS:
        (out.staging / folder).mkdir(parents=True, exist_ok=True)
    settings = SettingsStore(home).load().effective
    knowledge = open_project_knowledge(
        project_dir, global_folders(home, settings.knowledge.global_folders)
    )
    catalog = knowledge.catalog
    for problem in knowledge.problems:
        out.problem("project.json", problem)
    presets = PresetLibrary(project_dir)
    personas = PersonaLibrary(project_dir)
    database = Database.in_home(home)
    try:
        tree = TurnTree(database)
        conversations = [
            tree.conversation(summary.id) for summary in tree.conversations(knowledge.project.id)
        ]
        used_books = _bound_books(
            presets, personas, conversations, knowledge.project.globalKnowledgeBases
        )
        worlds = _write_worlds(catalog, used_books, out)
        characters = _characters(presets, conversations, out)
        persona_files = _write_personas(personas, worlds, out)
        backgrounds = _write_backgrounds(home, out)
        groups = _write_chats(
            tree, conversations, characters, persona_files, worlds, backgrounds, out
        )
        char_lore = _write_characters(characters, catalog, worlds, out)
        _write_sprites(presets, characters, out)
        _write_groups(groups, out)
    finally:
        database.close()
    _report_preset_pipelines(project_dir, conversations, out)
    _write_themes(home, out)
    global_books = [worlds[k] for k in knowledge.project.globalKnowledgeBases if k in worlds]
    _write_settings(
        home,
        project_dir,
        personas,
        persona_files,
        worlds,
        global_books,
        char_lore,
        _allowed_regex(characters, out),
        out,
    )


# -- worlds -------------------------------------------------------------------------------


def _bound_books(
    presets: PresetLibrary,
    personas: PersonaLibrary,
    conversations: Sequence[Conversation],
    global_ids: Sequence[str],
) -> set[str]:
    """Every kb_id something of the project binds: those go out even when they live in a
    global folder the project does not reference."""
    bound = set(global_ids)
    for listing in presets.characters():
        if listing.error is None:
            bound.update(presets.character(listing.id).knowledge_bases)
    for persona in personas.personas()[0]:
        if persona.knowledge_base:
            bound.add(persona.knowledge_base)
    for conversation in conversations:
        bound.update(conversation.settings.knowledge_bases)
    return bound


def _is_lore_book(kb: KnowledgeBase) -> bool:
    return CHARACTER_DEFINITION not in kb.tags


def _write_worlds(catalog: KnowledgeCatalog, bound: set[str], out: _Writer) -> dict[str, str]:
    """Each lore book as ``worlds/<name>.json``; returns kb_id → world name."""
    names: dict[str, str] = {}
    taken: set[str] = set()
    for loaded in catalog.bases:
        kb = loaded.kb
        if not _is_lore_book(kb) or (
            loaded.scope == "global" and not loaded.reference_ids and kb.kb_id not in bound
        ):
            continue
        name = _unique(safe_file_name(kb.display_name, "World"), taken)
        warnings: list[str] = []
        try:
            document = export_world_info(kb, warnings=warnings)
        except (StoryloomError, ValueError) as exc:
            out.problem(f"book {kb.display_name}", f"not written: {exc}")
            continue
        out.write(f"worlds/{name}.json", json.dumps(document, ensure_ascii=False, indent=4))
        for warning in warnings:
            out.problem(f"book {kb.display_name}", warning)
        names[kb.kb_id] = name
        out.report.counts.worlds += 1
    return names


# -- characters ---------------------------------------------------------------------------


def _characters(
    presets: PresetLibrary, conversations: Sequence[Conversation], out: _Writer
) -> dict[str, _Character]:
    """The characters going out, by preset id, plus (by ``"name:<name>"``) one for each
    character a chat speaks with that the library no longer has."""
    taken: set[str] = set()
    found: dict[str, _Character] = {}
    for listing in presets.characters():
        if listing.error is not None:
            out.problem(f"character {listing.id}", f"not written: {listing.error}")
            continue
        preset = presets.character(listing.id)
        avatar = presets.avatar_path(listing.id)
        image = avatar.read_bytes() if avatar is not None else None
        file = _unique(safe_file_name(preset.name, listing.id), taken, suffix=".png")
        found[listing.id] = _Character(preset, file, image, preset_id=listing.id)
    by_name = {c.preset.name: c for c in found.values()}
    for conversation in conversations:
        snapshots = (
            list(member_snapshots(conversation).values())
            if conversation.settings.group is not None
            else [conversation.character]
        )
        for snapshot in snapshots:
            if snapshot.source_preset in found:
                continue
            name = snapshot.text("name") or conversation.title
            if name in by_name:
                continue
            preset = CharacterDefinition.from_card(snapshot.card, fallback_name=name)
            file = _unique(safe_file_name(name, "Character"), taken, suffix=".png")
            made = _Character(preset, file, None)
            found[f"name:{name}"] = made
            by_name[name] = made
    return found


def _character_of(
    conversation: Conversation, characters: Mapping[str, _Character]
) -> _Character | None:
    source = conversation.character.source_preset
    if source is not None and source in characters:
        return characters[source]
    name = conversation.character.text("name") or conversation.title
    return next((c for c in characters.values() if c.preset.name == name), None)


def _with_card_fields(png: bytes, fields: Mapping[str, Any]) -> bytes:
    """The PNG card with ``fields`` set at the top level of both card chunks (``chat``:
    what SillyTavern keeps beside the card's data) and a ``create_date`` where the card
    has none."""
    texts = []
    for chunk in text_chunks(read_chunks(png)):
        if chunk.keyword not in (CARD_CHUNK_V2, CARD_CHUNK_V3):
            continue
        card = json.loads(base64.b64decode(chunk.text).decode("utf-8"))
        card.update(fields)
        card.setdefault("create_date", humanized_time(_now()))
        texts.append((chunk.keyword, encode_card_text(card)))
    return replace_text_chunks(png, texts)


def _write_characters(
    characters: Mapping[str, _Character],
    catalog: KnowledgeCatalog,
    worlds: Mapping[str, str],
    out: _Writer,
) -> list[dict[str, Any]]:
    """Each character as ``characters/<avatar>.png``; returns the ``charLore`` list
    (the books bound past the first, by world name)."""
    bases = catalog.knowledge_bases()
    char_lore: list[dict[str, Any]] = []
    for character in characters.values():
        preset = character.preset
        book = primary_book(preset, bases)
        extensions = dict(preset.extensions)
        if book is not None and book.kb_id in worlds:
            extensions["world"] = worlds[book.kb_id]
        preset = preset.model_copy(update={"extensions": extensions})
        warnings: list[str] = []
        image = character.image if character.image is not None and is_png(character.image) else None
        if character.image is not None and image is None:
            warnings.append("the avatar is not a PNG; the card is on a generated portrait")
        try:
            png = card_png(preset, bases, image or default_portrait(preset.name), warnings=warnings)
            newest = max(character.chats, default=None)
            png = _with_card_fields(png, {"chat": newest[1]} if newest is not None else {})
        except (StoryloomError, ValueError, binascii.Error) as exc:
            out.problem(f"character {preset.name}", f"not written: {exc}")
            continue
        out.write(f"characters/{character.avatar_file}", png)
        out.report.counts.characters += 1
        character.written = True
        for warning in warnings:
            out.problem(f"character {preset.name}", warning)
        extra = [
            worlds[kb_id]
            for kb_id in preset.knowledge_bases
            if kb_id in worlds and (book is None or kb_id != book.kb_id)
        ]
        if extra:
            char_lore.append({"name": character.stem, "extraBooks": extra})
    return char_lore


def _now() -> float:
    return datetime.now(UTC).timestamp()


def _write_sprites(
    presets: PresetLibrary, characters: Mapping[str, _Character], out: _Writer
) -> None:
    """Each written character's expression sprites into ``characters/<card file stem>/``,
    the folder SillyTavern looks in for the card's sprites."""
    for character in characters.values():
        if character.preset_id is None or not character.written:
            continue
        folder = f"characters/{character.stem}"
        try:
            written = export_st_sprites(presets, character.preset_id, out.staging / folder)
        except (StoryloomError, OSError) as exc:
            out.problem(f"character {character.preset.name}", f"sprites not written: {exc}")
            continue
        out.adopt(folder)
        out.report.counts.sprites += written


def _allowed_regex(characters: Mapping[str, _Character], out: _Writer) -> list[str]:
    """``extension_settings.character_allowed_regex``: the card files of the characters
    whose regex scripts a chat allowed. SillyTavern allows them per character, not per
    chat, so a character with chats either way is allowed in all of them (reported)."""
    allowed: list[str] = []
    for character in characters.values():
        if not character.written or True not in character.regex_allowed:
            continue
        allowed.append(character.avatar_file)
        if False in character.regex_allowed:
            out.problem(
                f"character {character.preset.name}",
                "some of its chats allow its card's regex scripts and some do not; "
                "SillyTavern allows them per character: allowed in every chat",
            )
    out.report.counts.allowed_regex = len(allowed)
    return sorted(allowed)


# -- personas -----------------------------------------------------------------------------


@dataclass
class _PersonaFile:
    persona: Persona
    avatar_file: str


def _write_personas(
    personas: PersonaLibrary, worlds: Mapping[str, str], out: _Writer
) -> dict[str, _PersonaFile]:
    """Each persona's avatar into ``User Avatars/`` (a generated one without a PNG);
    returns persona id → its file (the key SillyTavern names a persona by)."""
    good, bad = personas.personas()
    for problem in bad:
        out.problem(f"persona {problem.id}", f"not written: {problem.error}")
    files: dict[str, _PersonaFile] = {}
    taken: set[str] = set()
    for persona in good:
        file = _unique(safe_file_name(persona.id, "persona"), taken, suffix=".png")
        avatar = personas.avatar_path(persona.id)
        image = avatar.read_bytes() if avatar is not None else None
        if image is None or not is_png(image):
            if image is not None:
                out.problem(f"persona {persona.name}", "the avatar is not a PNG; a generated one")
            image = default_portrait(persona.name)
        out.write(f"User Avatars/{file}", image)
        if persona.knowledge_base and persona.knowledge_base not in worlds:
            out.problem(f"persona {persona.name}", f"its book {persona.knowledge_base} is not here")
        files[persona.id] = _PersonaFile(persona, file)
        out.report.counts.personas += 1
    return files


def _persona_description(persona: Persona, worlds: Mapping[str, str]) -> dict[str, Any]:
    """``power_user.persona_descriptions[<avatar>]`` in the shape SillyTavern writes now;
    position, depth, role, title and the locks to characters and groups (``connections``)
    kept from an imported persona (its extra fields), else SillyTavern's defaults."""
    extra = persona.model_extra or {}
    connections = extra.get("connections")
    title = extra.get("title")

    def whole(key: str, default: int) -> int:
        value = extra.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else default

    return {
        "description": persona.description,
        "position": whole("position", PERSONA_POSITION_IN_PROMPT),
        "depth": whole("depth", PERSONA_DEFAULT_DEPTH),
        "role": whole("role", PERSONA_DEFAULT_ROLE),
        "lorebook": worlds.get(persona.knowledge_base or "", ""),
        "connections": [c for c in connections if isinstance(c, dict)]
        if isinstance(connections, list)
        else [],
        "title": title if isinstance(title, str) else "",
    }


# -- chats --------------------------------------------------------------------------------


def _chat_metadata(
    conversation: Conversation,
    persona_files: Mapping[str, _PersonaFile],
    worlds: Mapping[str, str],
    backgrounds: Set[str],
    out: _Writer,
) -> dict[str, Any]:
    """What a chat's header gets on top of its kept metadata: the persona it is locked
    to, its own book and its background."""
    added: dict[str, Any] = {}
    settings = conversation.settings
    if settings.background is not None:
        if settings.background in backgrounds:
            added["custom_background"] = chat_metadata_background(settings.background)
        else:
            out.problem(
                f"chat {conversation.title}",
                f"its background {settings.background} is not in backgrounds/; not set",
            )
    if settings.persona_id is not None:
        persona = persona_files.get(settings.persona_id)
        if persona is not None:
            added["persona"] = persona.avatar_file
        else:
            out.problem(f"chat {conversation.title}", f"its persona {settings.persona_id} is gone")
    books = [worlds[k] for k in settings.knowledge_bases if k in worlds]
    if books:
        added["world_info"] = books[0]
    if len(books) > 1:
        out.problem(
            f"chat {conversation.title}",
            f"SillyTavern binds one book to a chat: {books[0]} is bound, "
            f"{', '.join(books[1:])} not",
        )
    return added


def branch_leaves(tree: TurnTree, conversation: Conversation) -> list[tuple[str, int]]:
    """The leaves that need a branch file, with the index of the last message each
    shares with the main path (SillyTavern's ``Branch #<n>``), deepest first.

    A leaf is on a file already when it ends an exported path, or when an exported path
    goes on past its parent (it is a swipe of that path's next line; a root, of the
    first line); every other leaf brings the path to it, so the files together hold
    every leaf of the tree. A branch that shares no message with the main path (another
    greeting) is ``Branch #0``."""
    nodes = tree.tree(conversation.id)
    parent_of = {n.id: n.parent_id for n in nodes}
    depth_of = {n.id: n.depth for n in nodes}
    has_children = {n.parent_id for n in nodes if n.parent_id is not None}
    main = [m.id for m in tree.active_path(conversation.id)]
    main_set = set(main)
    covered = set(main)
    # Messages some file has a line after: their other children are swipes of that line.
    inner = set(main[:-1])
    leaves = [n for n in nodes if n.id not in has_children]
    # Deepest first: a shallow leaf hanging off a deeper branch is its swipe.
    leaves.sort(key=lambda n: -n.depth)
    out: list[tuple[str, int]] = []
    for leaf in leaves:
        parent = parent_of[leaf.id]
        if leaf.id in covered or (parent is None and covered) or parent in inner:
            continue
        path: list[str] = []
        at: str | None = leaf.id
        while at is not None:
            path.append(at)
            at = parent_of[at]
        covered.update(path)
        inner.update(path[1:])
        shared = max((depth_of[m] for m in path if m in main_set), default=0)
        out.append((leaf.id, shared))
    return out


def _jsonl(text: str, metadata: Mapping[str, Any], *, group: bool) -> str:
    """The chat ``export_st_chat`` wrote with its header's ``chat_metadata`` set to
    ``metadata`` (a group chat's header has SillyTavern's "unused" names)."""
    lines = text.split("\n")
    header = json.loads(lines[0])
    header["chat_metadata"] = dict(metadata)
    if group:
        header["user_name"] = UNUSED_NAME
        header["character_name"] = UNUSED_NAME
    lines[0] = dump_line(header)
    return "\n".join(lines)


def _with_avatars(text: str, names: Mapping[str, str]) -> str:
    """A group chat whose replies made here name their speaker's card
    (``original_avatar``), as SillyTavern's do; ``names``: speaker name → card file."""
    lines = text.split("\n")
    for number in range(1, len(lines)):
        line = json.loads(lines[number])
        if line.get("is_user") or line.get("original_avatar"):
            continue
        avatar = names.get(str(line.get("name", "")))
        if avatar is not None:
            line["original_avatar"] = avatar
            lines[number] = dump_line(line)
    return "\n".join(lines)


def _write_chats(
    tree: TurnTree,
    conversations: Sequence[Conversation],
    characters: Mapping[str, _Character],
    persona_files: Mapping[str, _PersonaFile],
    worlds: Mapping[str, str],
    backgrounds: Set[str],
    out: _Writer,
) -> list[_Group]:
    taken: dict[str, set[str]] = {}
    groups: dict[str, _Group] = {}
    for conversation in conversations:
        try:
            if conversation.settings.group is not None:
                group_names = taken.setdefault(GROUP_CHATS, set())
                _group_chat(
                    tree,
                    conversation,
                    characters,
                    persona_files,
                    worlds,
                    backgrounds,
                    groups,
                    group_names,
                    out,
                )
                continue
            character = _character_of(conversation, characters)
            if character is None:
                out.problem(f"chat {conversation.title}", "its character is not here; not written")
                continue
            folder = f"chats/{character.stem}"
            names = taken.setdefault(folder, set())
            stem = _unique(safe_file_name(conversation.title, character.preset.name), names)
            metadata = _base_metadata(conversation)
            metadata.update(_chat_metadata(conversation, persona_files, worlds, backgrounds, out))
            _write_chat_files(tree, conversation, folder, stem, metadata, names, out)
            out.report.counts.chats += 1
            character.chats.append((conversation.updated_at, stem))
            character.regex_allowed.add(conversation.settings.allow_regex_scripts)
        except StoryloomError as exc:
            out.problem(f"chat {conversation.title}", f"not written: {exc}")
    return list(groups.values())


def _base_metadata(conversation: Conversation) -> dict[str, Any]:
    """The chat's kept ``chat_metadata``; a kept ``custom_background`` naming an image of
    ``backgrounds/`` is left out, the chat's setting is what it shows now (one naming a
    web address is not something storyloom shows, and goes back as it came)."""
    kept = {k: v for k, v in conversation.metadata.items() if k not in _CONVERSATION_KEYS}
    if background_from_chat_metadata(kept) is not None:
        del kept["custom_background"]
    return kept


def _group_chat(
    tree: TurnTree,
    conversation: Conversation,
    characters: Mapping[str, _Character],
    persona_files: Mapping[str, _PersonaFile],
    worlds: Mapping[str, str],
    backgrounds: Set[str],
    groups: dict[str, _Group],
    taken: set[str],
    out: _Writer,
) -> None:
    settings = conversation.settings.group
    assert settings is not None
    kept = conversation.metadata.get(GROUP_FILE_KEY)
    kept_group: dict[str, Any] = dict(kept) if isinstance(kept, Mapping) else {}
    snapshots = member_snapshots(conversation)
    avatars: dict[str, str] = {}
    names: dict[str, str] = {}
    for member in settings.members:
        snapshot = snapshots.get(member.character_id)
        source = snapshot.source_preset if snapshot is not None else None
        character: _Character | None = None
        if source is not None and source in characters:
            character = characters[source]
        elif member.character_id in characters:
            character = characters[member.character_id]
        else:
            name = snapshot.text("name") if snapshot is not None else ""
            character = next((c for c in characters.values() if c.preset.name == name), None)
        if character is None:
            out.problem(
                f"group chat {conversation.title}", f"member {member.character_id} has no card here"
            )
            continue
        avatars[member.character_id] = character.avatar_file
        names[character.preset.name] = character.avatar_file
        character.regex_allowed.add(conversation.settings.allow_regex_scripts)
        if snapshot is not None and snapshot.text("name"):
            names[snapshot.text("name")] = character.avatar_file
    group_id = str(kept_group.get("id") or int(conversation.created_at * 1000))
    group = groups.get(group_id)
    if group is None:
        members = [avatars[m.character_id] for m in settings.members if m.character_id in avatars]
        disabled = [
            avatars[m.character_id]
            for m in settings.members
            if m.muted and m.character_id in avatars
        ]
        group = _Group(
            group_id,
            str(kept_group.get("name") or conversation.title),
            members,
            disabled,
            kept_group,
        )
        groups[group_id] = group
    metadata = _base_metadata(conversation)
    metadata.update(_chat_metadata(conversation, persona_files, worlds, backgrounds, out))
    wanted = kept_group.get("chat_id") if len(group.chats) == 0 else None
    chat_id = _unique(
        safe_file_name(str(wanted or humanized_time(conversation.created_at)), group_id), taken
    )
    written = _write_chat_files(
        tree, conversation, GROUP_CHATS, chat_id, metadata, taken, out, names
    )
    for number, (stem, file_metadata) in enumerate(written):
        # The main chat is the newest of its files: the group opens on it.
        group.chats.append((conversation.updated_at - number * 1e-3, stem, file_metadata))
    out.report.counts.group_chats += len(written)


def _variables_at(tree: TurnTree, message_id: str | None) -> dict[str, Any]:
    if message_id is None:
        return {}
    return dict(tree.state_at(message_id).variables)


def _write_chat_files(
    tree: TurnTree,
    conversation: Conversation,
    folder: str,
    stem: str,
    metadata: Mapping[str, Any],
    taken: set[str],
    out: _Writer,
    speakers: Mapping[str, str] | None = None,
) -> list[tuple[str, dict[str, Any]]]:
    """The main chat ``<folder>/<stem>.jsonl`` and its branch files; returns each file's
    stem and ``chat_metadata``. Each file's ``variables`` are the chat variables at its
    last message; ``speakers`` (name → card file) makes it a group chat."""
    group = speakers is not None
    files: list[tuple[str, dict[str, Any]]] = []
    main_metadata = dict(metadata)
    pointer = conversation.pointer
    variables = _variables_at(tree, pointer)
    if variables:
        main_metadata["variables"] = variables
    text = export_st_chat(tree, conversation.id)
    if speakers is not None:
        text = _with_avatars(text, speakers)
    out.write(f"{folder}/{stem}.jsonl", _jsonl(text, main_metadata, group=group))
    files.append((stem, main_metadata))
    for leaf, shared in branch_leaves(tree, conversation):
        when = humanized_time(tree.message(leaf).created_at)
        branch = _unique(f"Branch #{shared} - {when}", taken)
        branch_metadata = {**metadata, "main_chat": stem}
        variables = _variables_at(tree, leaf)
        if variables:
            branch_metadata["variables"] = variables
        text = export_st_chat(tree, conversation.id, leaf=leaf)
        if speakers is not None:
            text = _with_avatars(text, speakers)
        out.write(f"{folder}/{branch}.jsonl", _jsonl(text, branch_metadata, group=group))
        if not group:
            out.report.counts.branches += 1
        files.append((branch, branch_metadata))
    return files


def _write_groups(groups: Iterable[_Group], out: _Writer) -> None:
    """Each group as ``groups/<id>.json``: the group file it came with (its unknown keys
    kept), its members and chats as they are now, the newest main chat open."""
    for group in groups:
        document = dict(group.document)
        newest = max(group.chats, key=lambda c: c[0])
        document.update(
            {
                "id": group.group_id,
                "name": group.name,
                "members": group.members,
                "disabled_members": group.disabled,
                "chat_id": newest[1],
                "chats": [c[1] for c in group.chats],
                "chat_metadata": newest[2],
                "past_metadata": {c[1]: c[2] for c in group.chats},
            }
        )
        for key, default in (
            ("avatar_url", ""),
            ("allow_self_responses", False),
            ("activation_strategy", 0),
            ("generation_mode", 0),
            ("fav", False),
            ("auto_mode_delay", 5),
            ("generation_mode_join_prefix", ""),
            ("generation_mode_join_suffix", ""),
        ):
            document.setdefault(key, default)
        out.write(
            f"groups/{group.group_id}.json", json.dumps(document, ensure_ascii=False, indent=4)
        )
        out.report.counts.groups += 1


# -- backgrounds, themes, presets ---------------------------------------------------------


def _write_backgrounds(home: Path, out: _Writer) -> set[str]:
    """The data directory's backgrounds into ``backgrounds/``; returns their names (the
    ones a chat's ``custom_background`` may name)."""
    try:
        written = export_st_backgrounds(home, out.staging / "backgrounds")
        names = set(ChatBackgrounds(home).names())
    except OSError as exc:
        out.problem("backgrounds", f"not written: {exc}")
        return set()
    out.adopt("backgrounds")
    out.report.counts.backgrounds = written
    return names


def _write_themes(home: Path, out: _Writer) -> None:
    """The themes a move-in kept (``<home>/sillytavern/themes``) back into ``themes/``."""
    kept = home / KEPT_THEMES_DIR
    if not kept.is_dir():
        return
    for path in sorted(kept.glob("*.json")):
        if path.is_symlink() or not path.is_file():
            continue
        try:
            out.write(f"themes/{path.name}", path.read_bytes())
        except OSError as exc:
            out.problem(f"theme {path.name}", f"not written: {exc}")
            continue
        out.report.counts.themes += 1


def _report_preset_pipelines(
    project_dir: Path, conversations: Sequence[Conversation], out: _Writer
) -> None:
    """Name each chat pipeline made from a SillyTavern preset that chats here run: it
    does not go back out as ``OpenAI Settings/<name>.json`` (storyloom has no writer of
    chat-completion presets), so SillyTavern answers those chats with its own preset."""
    workflows = ProjectWorkflows(project_dir)
    used: dict[str, int] = {}
    for conversation in conversations:
        pipeline = conversation.settings.pipeline
        used[pipeline] = used.get(pipeline, 0) + 1
    for workflow_id, chats in sorted(used.items()):
        try:
            if not workflows.exists(workflow_id):
                continue
            workflow = workflows.load(workflow_id)
        except StoryloomError:
            continue  # its chats do not run either; not this export's to report
        source = (workflow.model_extra or {}).get("importedFrom")
        if not isinstance(source, Mapping) or source.get("format") != PRESET_PIPELINE_FORMAT:
            continue
        out.problem(
            f"chat pipeline {workflow_id}",
            f"made from the SillyTavern preset {source.get('file') or workflow_id!r}, run by "
            f"{chats} chat(s): not written back as a preset (storyloom cannot write one); "
            "choose the preset in SillyTavern",
        )


# -- settings.json ------------------------------------------------------------------------


def _quick_reply_settings(project_dir: Path, out: _Writer) -> dict[str, Any] | None:
    """The project's quick reply sets into ``QuickReplies/`` and the
    ``extension_settings.quickReplyV2`` that shows the visible ones (as SillyTavern's
    ``QuickReplySettings`` saves itself); None when the project has no set. Only the
    shown sets are linked: a linked set, even with its buttons hidden, runs its replies
    that execute on their own (on startup, on a new chat...)."""
    library = QuickReplyLibrary(project_dir)
    for broken in library.problems():
        out.problem(f"quick reply set {broken.path.name}", f"not written: {broken}")
    try:
        export_st_quick_replies(project_dir, out.staging / QUICK_REPLIES)
        names = {s.name for s in library.sets()}
        visible = [name for name in library.visible() if name in names]
    except (StoryloomError, OSError) as exc:
        out.problem("quick replies", f"not written: {exc}")
        return None
    out.adopt(QUICK_REPLIES)
    files: dict[str, list[str]] = {}
    for name in sorted(names):
        files.setdefault(st_file_name(name), []).append(name)
    for file, sharing in files.items():
        if len(sharing) > 1:
            out.problem(
                f"quick reply sets {', '.join(sharing)}",
                f"SillyTavern names a set's file by its name: they share {file}.json, one "
                "set is in it",
            )
    out.report.counts.quick_replies = len(files)
    if not names:
        return None
    return {
        "isEnabled": True,
        "isCombined": False,
        "isPopout": False,
        "showPopoutButton": True,
        "config": {"setList": [{"set": name, "isVisible": True} for name in visible]},
    }


def _global_regex(home: Path, out: _Writer) -> list[dict[str, Any]]:
    """``extension_settings.regex``: the global scripts, in their order, as they are kept
    (SillyTavern's own script objects)."""
    try:
        scripts = GlobalRegexScripts.in_home(home).load()
    except StoryloomError as exc:
        out.problem("global regex scripts", f"not written: {exc}")
        return []
    out.report.counts.regex_scripts = len(scripts)
    return [script.model_dump(mode="json") for script in scripts]


def _write_settings(
    home: Path,
    project_dir: Path,
    personas: PersonaLibrary,
    persona_files: Mapping[str, _PersonaFile],
    worlds: Mapping[str, str],
    global_books: list[str],
    char_lore: list[dict[str, Any]],
    allowed_regex: list[str],
    out: _Writer,
) -> None:
    """A ``settings.json`` SillyTavern starts with: what it holds here, every other
    setting left to SillyTavern's defaults (its loader takes each key as optional)."""
    default_id = personas.default_id()
    default = persona_files.get(default_id) if default_id is not None else None
    power_user: dict[str, Any] = {
        "personas": {f.avatar_file: f.persona.name for f in persona_files.values()},
        "persona_descriptions": {
            f.avatar_file: _persona_description(f.persona, worlds) for f in persona_files.values()
        },
        "default_persona": default.avatar_file if default is not None else None,
    }
    try:
        global_values = GlobalVariables.in_home(home).load()
    except StoryloomError as exc:
        out.problem("global variables", f"not written: {exc}")
        global_values = {}
    extensions: dict[str, Any] = {
        "variables": {"global": global_values},
        "regex": _global_regex(home, out),
        "character_allowed_regex": allowed_regex,
    }
    quick_replies = _quick_reply_settings(project_dir, out)
    if quick_replies is not None:
        extensions["quickReplyV2"] = quick_replies
    document: dict[str, Any] = {
        "firstRun": False,
        "power_user": power_user,
        "world_info_settings": {
            "world_info": {"globalSelect": global_books, "charLore": char_lore},
        },
        "extension_settings": extensions,
    }
    if default is not None:
        document["username"] = default.persona.name
        document["user_avatar"] = default.avatar_file
        if default.persona.description:
            power_user["persona_description"] = default.persona.description
    out.write(SETTINGS_FILE, json.dumps(document, ensure_ascii=False, indent=4))
