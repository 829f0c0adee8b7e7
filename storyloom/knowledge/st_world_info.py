"""SillyTavern lore books ↔ knowledge bases.

Both forms of a book (:mod:`storyloom.sillytavern.world_info`: a world-info file and a
card's ``character_book``) are read and written. Each entry becomes one CAIU (mapping in
:mod:`.st_world_info_entry`) holding the original entry in ``extensions["sillytavern"]``.
Book fields other than the entries are kept in ``kb_extensions["sillytavern"]["book"]``,
verbatim, with the key order of the file.

``originalData`` (a card book, as imported, inside a world-info file) goes stale in
SillyTavern, and storyloom does as SillyTavern does: it reads ``entries``, keeps
``originalData`` as it was, and writes it back unchanged. So where the two disagree (the
EU4 sample: ``"after_char"`` in ``originalData``, position 2 in ``entries``),
``entries`` decide; within a card-book entry ``extensions.position`` beats the
``position`` string, as in SillyTavern's ``convertCharacterBook``. A KB made from a
card's book, exported as world info, gets the book as it is now in ``originalData``, as
SillyTavern's import of an embedded book does.

An entry whose fields have the wrong types is left out with a warning naming its uid and
comment, and kept raw so that export writes it back untouched; a file in which no entry
is usable is refused with :class:`FileFormatError`.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from storyloom.core.errors import FieldProblem, FileFormatError, problems_from_validation
from storyloom.knowledge.caiu import CAIU, MAX_KEY_CHARS
from storyloom.knowledge.keyword_matcher import parse_regex_key
from storyloom.knowledge.knowledge_base import KnowledgeBase
from storyloom.knowledge.st_world_info_entry import (
    EXTENSION_KEY,
    ST_TAG,
    changed_wi_fields,
    overlay_wi_entry,
    unrepresentable,
    wi_entry_to_caiu,
)
from storyloom.sillytavern.character_book import (
    CharacterBookEntry,
    apply_wi_changes,
    book_entry_to_wi,
    wi_to_book_entry,
)
from storyloom.sillytavern.world_info import (
    CHARACTER_BOOK,
    WORLD_INFO,
    BookFormat,
    UidAllocator,
    character_book_entries,
    int_uid,
    is_book_entry,
    ordered_book,
    world_info_entries,
)
from storyloom.sillytavern.world_info_entry import entry_label


def _unique_id(base: Any, used: set[str]) -> str:
    candidate = f"st_{base}"
    n = 2
    while candidate in used:
        candidate = f"st_{base}_{n}"
        n += 1
    used.add(candidate)
    return candidate


def _meta(kb: KnowledgeBase) -> dict[str, Any]:
    meta = kb.kb_extensions.get(EXTENSION_KEY)
    return meta if isinstance(meta, dict) else {}


def _raw_entry(entry: CAIU) -> dict[str, Any] | None:
    raw = entry.extensions.get(EXTENSION_KEY)
    return raw if isinstance(raw, dict) and raw else None


class _EntryReader:
    """One book's entries as CAIUs; an unusable entry is kept raw, with a warning why."""

    def __init__(self, noun: str, slot: str) -> None:
        self._noun = noun  # how warnings name an entry: "entry", "book entry"
        self._slot = slot  # what a skipped entry records its place under: "key", "index"
        self._used: set[str] = set()
        self.caius: list[CAIU] = []
        self.warnings: list[str] = []
        self.problems: list[FieldProblem] = []
        self.skipped: list[dict[str, Any]] = []

    def new_id(self, base: Any) -> str:
        return _unique_id(base, self._used)

    def _skip(self, place: str | int, raw: Any, label: str, reason: str) -> None:
        self.warnings.append(f"{self._noun} {label} skipped: {reason}")
        self.skipped.append({self._slot: place, "entry": copy.deepcopy(raw)})

    def not_object(self, place: str | int, where: str, raw: Any) -> None:
        self.problems.append(FieldProblem(where, "must be an object"))
        self._skip(place, raw, str(place), "it is not an object")

    def invalid(
        self, place: str | int, where: str, raw: dict[str, Any], entry_id: str, exc: ValidationError
    ) -> None:
        found = problems_from_validation(exc, where)
        self.problems.extend(found)
        reasons = "; ".join(str(p) for p in found)
        self._skip(place, raw, entry_label(raw, str(place)), reasons)
        self._used.discard(entry_id)

    def knowledge_base(
        self,
        path: Path,
        fmt: BookFormat,
        book: Mapping[str, Any],
        display: str,
        entry_keys: Mapping[str, str] | Mapping[str, int],
    ) -> tuple[KnowledgeBase, list[str]]:
        """The KB of the entries read, the book's other fields kept for export.

        Raises :class:`FileFormatError` when the book had problems and no usable entry.
        """
        if self.problems and not self.caius:
            raise FileFormatError(path, self.problems)
        description = book.get("description") if isinstance(book.get("description"), str) else ""
        meta: dict[str, Any] = {
            "format": fmt,
            "book": {k: copy.deepcopy(v) for k, v in book.items() if k != "entries"},
            "key_order": list(book.keys()),
            "entry_keys": dict(entry_keys),
            "skipped_entries": self.skipped,
            "display_name": display,
            "description": description,
            "source_file": path.name,
        }
        kb = KnowledgeBase(
            kb_displayName=display,
            kb_description=description,
            tags=[ST_TAG],
            entries=self.caius,
            kb_extensions={EXTENSION_KEY: meta},
        )
        return kb, self.warnings


# Key fields of a world-info entry and of a card book entry.
_KEY_FIELDS = ("key", "keysecondary", "keys", "secondary_keys")


def _refuse_long_keys(path: Path, where: str, raw: Mapping[str, Any]) -> None:
    """A key past :data:`MAX_KEY_CHARS` refuses the whole file (an invalid entry is only
    skipped): such a key is no real key, and the file is not what it claims to be."""
    problems = [
        FieldProblem(
            f"{where}.{name}[{i}]",
            f"a key of {len(key)} characters is longer than the limit ({MAX_KEY_CHARS})",
        )
        for name in _KEY_FIELDS
        if isinstance(raw.get(name), list)
        for i, key in enumerate(raw[name])
        if isinstance(key, str) and len(key) > MAX_KEY_CHARS
    ]
    if problems:
        raise FileFormatError(path, problems)


def world_info_to_kb(
    data: Any, path: Path | str, *, name: str | None = None
) -> tuple[KnowledgeBase, list[str]]:
    """A KB from a parsed world-info file; ``name`` defaults to the book's or file's name."""
    path = Path(path)
    entries = world_info_entries(data, path)
    if isinstance(entries, list):
        # A bare card book saved on its own (e.g. a "lorebook" download).
        return character_book_to_kb(data, path, name=name or path.stem, field="")

    reader = _EntryReader("entry", "key")
    entry_keys: dict[str, str] = {}
    for key, raw in entries.items():
        where = f"entries.{key}"
        if not isinstance(raw, dict):
            reader.not_object(key, where, raw)
            continue
        _refuse_long_keys(path, where, raw)
        entry_id = reader.new_id(raw.get("uid", key))
        try:
            caiu = wi_entry_to_caiu(raw, entry_id=entry_id, warnings=reader.warnings)
        except ValidationError as exc:
            reader.invalid(key, where, raw, entry_id, exc)
            continue
        if str(raw.get("uid")) != key:
            entry_keys[entry_id] = key
        reader.caius.append(caiu)
    display = name or (data.get("name") if isinstance(data.get("name"), str) else "") or path.stem
    return reader.knowledge_base(path, WORLD_INFO, data, display, entry_keys)


def character_book_to_kb(
    book: Any, path: Path | str, *, name: str, field: str = "data.character_book"
) -> tuple[KnowledgeBase, list[str]]:
    """A KB from a card's ``character_book``; ``name`` is used when the book has none."""
    path = Path(path)
    prefix = f"{field}." if field else ""
    entries = character_book_entries(book, path, field)

    reader = _EntryReader("book entry", "index")
    rules = BookRules.of(book, reader.warnings)
    entry_keys: dict[str, int] = {}
    for index, raw in enumerate(entries):
        where = f"{prefix}entries[{index}]"
        if not isinstance(raw, dict):
            reader.not_object(index, where, raw)
            continue
        _refuse_long_keys(path, where, raw)
        uid = raw.get("id")
        entry_id = reader.new_id(index if uid is None else uid)
        try:
            caiu = _book_entry_to_caiu(raw, index, entry_id, reader.warnings, rules)
        except ValidationError as exc:
            reader.invalid(index, where, raw, entry_id, exc)
            continue
        if uid is None:
            entry_keys[entry_id] = index
        reader.caius.append(caiu)
    reader.warnings.extend(rules.warnings(book))
    book_name = book.get("name") if isinstance(book.get("name"), str) else ""
    kb, warnings = reader.knowledge_base(path, CHARACTER_BOOK, book, book_name or name, entry_keys)
    kb.token_budget = rules.token_budget
    return kb, warnings


# Keys SillyTavern always writes into a card-book entry's extensions: an entry that has
# them was written by SillyTavern, which puts ``use_regex: true`` on every entry while
# reading its keys as plain text.
_ST_EXTENSIONS = ("position", "display_index", "selectiveLogic", "depth", "probability")


@dataclass
class BookRules:
    """What a card book's own settings and its entries' V3 fields ask of each entry.

    SillyTavern ignores the book's ``scan_depth``, ``recursive_scanning`` and
    ``token_budget`` and the entries' top-level ``case_sensitive`` and ``use_regex``;
    storyloom honours them (see ``docs/knowledge.md``). ``counts`` says how many entries
    each rule changed, for the import warnings.
    """

    scan_depth: int | None = None
    recursive: bool | None = None
    token_budget: int | None = None
    counts: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, book: Mapping[str, Any], warnings: list[str] | None = None) -> BookRules:
        notes: list[str] = [] if warnings is None else warnings
        rules = cls()
        depth = book.get("scan_depth")
        if depth is not None:
            number = _whole_number(depth)
            if number is None or number < 0:
                notes.append(f"the book's scan_depth {depth!r} is not a whole number >= 0; ignored")
            else:
                rules.scan_depth = number
        recursive = book.get("recursive_scanning")
        if isinstance(recursive, bool):
            rules.recursive = recursive
        budget = book.get("token_budget")
        if budget is not None:
            number = _whole_number(budget)
            if number is None or number < 1:
                notes.append(
                    f"the book's token_budget {budget!r} is not a whole number > 0; ignored"
                )
            else:
                rules.token_budget = number
        return rules

    def count(self, what: str) -> None:
        self.counts[what] = self.counts.get(what, 0) + 1

    def warnings(self, book: Mapping[str, Any]) -> list[str]:
        """What the book relies on that SillyTavern ignores, in words for the import."""
        notes = []
        changed = self.counts.get("scan_depth", 0)
        if self.scan_depth is not None and changed:
            notes.append(
                f"this book sets scan_depth {self.scan_depth}; SillyTavern ignores it, storyloom"
                f" honours it for the {changed} {'entry' if changed == 1 else 'entries'}"
                " without their own scan depth"
            )
        if self.recursive is False and self.counts.get("recursive_scanning"):
            notes.append(
                "this book sets recursive_scanning false; SillyTavern ignores it, storyloom"
                " honours it (other entries' text never activates its entries)"
            )
        if self.token_budget is not None:
            notes.append(
                f"this book sets token_budget {self.token_budget}; SillyTavern ignores it,"
                " storyloom honours it (inside the project's lore budget)"
            )
        if self.counts.get("use_regex"):
            notes.append(
                f"{_entries_set(self.counts['use_regex'])} use_regex (their keys are regular"
                " expressions); SillyTavern ignores it, storyloom honours it"
            )
        if self.counts.get("case_sensitive"):
            notes.append(
                f"{_entries_set(self.counts['case_sensitive'])} case_sensitive; SillyTavern"
                " reads only extensions.case_sensitive, storyloom honours it"
            )
        return notes


def _entries_set(count: int) -> str:
    return "1 entry sets" if count == 1 else f"{count} entries set"


def _whole_number(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not value.is_integer():
        return None
    return int(value)


def _regex_key(key: str, case_sensitive: bool | None) -> str:
    if parse_regex_key(key) is not None:
        return key
    # A "/" ends the pattern in the /pattern/flags form: escape the unescaped ones.
    pattern = re.sub(r"(?<!\\)/", r"\/", key)
    return f"/{pattern}/{'' if case_sensitive else 'i'}"


def _apply_book_rules(caiu: CAIU, raw: Mapping[str, Any], rules: BookRules) -> None:
    act = caiu.activation_criteria
    ext = raw.get("extensions")
    written_by_st = isinstance(ext, dict) and any(key in ext for key in _ST_EXTENSIONS)
    case = raw.get("case_sensitive")
    if act.case_sensitive is None and isinstance(case, bool):
        act.case_sensitive = case
        rules.count("case_sensitive")
    if raw.get("use_regex") is True and not written_by_st:
        act.keywords = [_regex_key(k, act.case_sensitive) for k in act.keywords if k.strip()]
        act.secondary_keywords = [
            _regex_key(k, act.case_sensitive) for k in act.secondary_keywords if k.strip()
        ]
        rules.count("use_regex")
    if rules.scan_depth is not None and act.scan_depth is None:
        act.scan_depth = rules.scan_depth
        rules.count("scan_depth")
    if rules.recursive is False and not act.exclude_recursion:
        act.exclude_recursion = True
        rules.count("recursive_scanning")


def _book_entry_to_caiu(
    raw: dict[str, Any],
    index: int,
    entry_id: str,
    warnings: list[str],
    rules: BookRules | None = None,
) -> CAIU:
    CharacterBookEntry.model_validate(raw)
    caiu = wi_entry_to_caiu(book_entry_to_wi(raw, index), entry_id=entry_id, warnings=warnings)
    caiu.extensions[EXTENSION_KEY] = copy.deepcopy(raw)
    _apply_book_rules(caiu, raw, rules or BookRules())
    return caiu


def _imported_as(
    raw: dict[str, Any], index: int, entry_id: str, meta: Mapping[str, Any]
) -> Callable[[], CAIU]:
    """How the export finds what a card-book entry was imported as (its baseline)."""
    book = meta.get("book") if meta.get("format") == CHARACTER_BOOK else None
    rules = BookRules.of(book if isinstance(book, dict) else {})
    return lambda: _book_entry_to_caiu(raw, index, entry_id, [], rules)


def _book_fallback_index(meta: Mapping[str, Any], entry: CAIU, position: int) -> int:
    keys = meta.get("entry_keys")
    if isinstance(keys, dict) and isinstance(keys.get(entry.id), int):
        return int(keys[entry.id])
    return position


def _taken_uids(kb: KnowledgeBase, meta: Mapping[str, Any]) -> list[Any]:
    taken: list[Any] = []
    for entry in kb.entries:
        raw = _raw_entry(entry)
        if raw is not None:
            taken.append(raw.get("id") if is_book_entry(raw) else raw.get("uid"))
    for skipped in meta.get("skipped_entries") or []:
        if isinstance(skipped, dict):
            taken.append(skipped.get("key", skipped.get("index")))
            raw = skipped.get("entry")
            if isinstance(raw, dict):
                taken.append(raw.get("uid", raw.get("id")))
    keys = meta.get("entry_keys")
    if isinstance(keys, dict):
        taken.extend(keys.values())
    return taken


def _warn_lost(entry: CAIU, warnings: list[str]) -> None:
    lost = unrepresentable(entry)
    if lost:
        warnings.append(
            f"entry {entry.id}: SillyTavern has no {', '.join(lost)}; left out of the export"
        )


def _wi_form(
    entry: CAIU,
    meta: Mapping[str, Any],
    position: int,
    allocator: UidAllocator,
    *,
    fill_defaults: bool,
    warnings: list[str],
) -> tuple[str, dict[str, Any]]:
    """The world-info entry of a CAIU and the key it is stored under."""
    raw = _raw_entry(entry)
    _warn_lost(entry, warnings)
    imported = None
    if raw is None:
        base: dict[str, Any] = {"uid": allocator.take()}
    elif is_book_entry(raw):
        index = _book_fallback_index(meta, entry, position)
        base = book_entry_to_wi(raw, index)
        imported = _imported_as(raw, index, entry.id, meta)
    else:
        base = raw
    out = overlay_wi_entry(
        base, entry, fill_defaults=fill_defaults, warnings=warnings, imported=imported
    )
    keys = meta.get("entry_keys") if meta.get("format") == WORLD_INFO else None
    key = keys.get(entry.id) if isinstance(keys, dict) else None
    if key is None:
        if "uid" not in out:
            out = {"uid": allocator.take(), **out}
        key = str(out["uid"])
    elif fill_defaults and "uid" not in out and int_uid(key) is not None:
        out = {"uid": int_uid(key), **out}
    return str(key), out


def _renamed(kb: KnowledgeBase, meta: Mapping[str, Any], book: dict[str, Any]) -> None:
    # Book name/description follow the KB only when the user changed them in storyloom.
    if kb.kb_displayName != meta.get("display_name", kb.kb_displayName):
        book["name"] = kb.kb_displayName
    if kb.kb_description != meta.get("description", kb.kb_description):
        book["description"] = kb.kb_description
    if meta.get("format") == CHARACTER_BOOK and kb.token_budget != BookRules.of(book).token_budget:
        if kb.token_budget is None:
            book.pop("token_budget", None)
        else:
            book["token_budget"] = kb.token_budget


def export_world_info(
    kb: KnowledgeBase, *, fill_defaults: bool = True, warnings: list[str] | None = None
) -> dict[str, Any]:
    """The SillyTavern world-info JSON of ``kb``.

    Untouched imported entries come back as they were (plus, with ``fill_defaults``, the
    template fields an old entry lacks, with SillyTavern's defaults); edited ones carry
    the edits; entries made in storyloom get SillyTavern's defaults for every field. A KB
    made from a card book gets that book, as it is now, in ``originalData``, as
    SillyTavern's own import of an embedded book does.
    """
    notes: list[str] = [] if warnings is None else warnings
    meta = _meta(kb)
    allocator = UidAllocator(_taken_uids(kb, meta))
    entries: dict[str, Any] = {}
    for position, entry in enumerate(kb.entries):
        key, wi = _wi_form(
            entry, meta, position, allocator, fill_defaults=fill_defaults, warnings=notes
        )
        if key in entries:
            uid = allocator.take()
            notes.append(f"entry {entry.id}: uid {key} is used twice; written as uid {uid}")
            wi["uid"] = uid
            key = str(uid)
        entries[key] = wi
    if meta.get("format") == WORLD_INFO:
        for skipped in meta.get("skipped_entries") or []:
            key = str(skipped.get("key"))
            if key not in entries:
                entries[key] = copy.deepcopy(skipped.get("entry"))
        book = copy.deepcopy(meta.get("book") or {})
        _renamed(kb, meta, book)
        return ordered_book(book, meta.get("key_order"), entries)
    result: dict[str, Any] = {"entries": entries}
    if meta.get("format") == CHARACTER_BOOK:
        result["originalData"] = export_character_book(kb, warnings=[])
    return result


def export_character_book(
    kb: KnowledgeBase, *, warnings: list[str] | None = None
) -> dict[str, Any]:
    """``kb`` as a card's ``character_book`` (what SillyTavern embeds when exporting a card)."""
    notes: list[str] = [] if warnings is None else warnings
    meta = _meta(kb)
    allocator = UidAllocator(_taken_uids(kb, meta))
    out_entries: list[Any] = []
    for position, entry in enumerate(kb.entries):
        raw = _raw_entry(entry)
        if raw is not None and is_book_entry(raw):
            _warn_lost(entry, notes)
            index = _book_fallback_index(meta, entry, position)
            base = book_entry_to_wi(raw, index)
            imported = _imported_as(raw, index, entry.id, meta)
            changes = changed_wi_fields(base, entry, notes, imported=imported)
            if "characterFilter" in changes:
                notes.append(f"entry {entry.id}: a card book has no character filter; dropped")
            out_entries.append(apply_wi_changes(raw, changes))
        else:
            _key, wi = _wi_form(
                entry, meta, position, allocator, fill_defaults=True, warnings=notes
            )
            out_entries.append(wi_to_book_entry(wi))
    if meta.get("format") == CHARACTER_BOOK:
        for skipped in meta.get("skipped_entries") or []:
            index = skipped.get("index")
            at = index if isinstance(index, int) else len(out_entries)
            out_entries.insert(min(at, len(out_entries)), copy.deepcopy(skipped.get("entry")))
        book = copy.deepcopy(meta.get("book") or {})
        _renamed(kb, meta, book)
        return ordered_book(book, meta.get("key_order"), out_entries)
    for skipped in meta.get("skipped_entries") or []:
        notes.append(f"entry {skipped.get('key')} was unreadable at import; not in the card book")
    return {"entries": out_entries, "name": kb.kb_displayName}


LOREBOOK_V3_SPEC = "lorebook_v3"


def export_lorebook_v3(kb: KnowledgeBase, *, warnings: list[str] | None = None) -> dict[str, Any]:
    """``kb`` as a Character Card V3 lorebook file, ``{"spec": "lorebook_v3", "data"}``.

    A book imported from such a file gets its wrapper back as it was (other top-level keys
    included); any other KB gets the spec's two keys around its card-book form.
    """
    meta = _meta(kb)
    document = meta.get("document")
    out: dict[str, Any] = (
        copy.deepcopy(document) if isinstance(document, dict) else {"spec": LOREBOOK_V3_SPEC}
    )
    out["data"] = export_character_book(kb, warnings=warnings)
    return out
