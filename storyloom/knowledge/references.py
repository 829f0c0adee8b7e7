"""Dynamic references ``{{{...}}}``: resolution, the editor's checks, ``@ref`` targets.

Seed 000, 2.2.4; the syntax is in :mod:`storyloom.knowledge.reference_syntax`. Rules this
module settles where the seed leaves a choice:

- **Scope.** A reference without a qualifier looks only in the KB that holds the text.
  Text that belongs to no KB (``kb_id=None``: user input, a node's template) looks in
  every KB of the catalog. ``{{{KB:...}}}`` looks in every KB that
  :meth:`KnowledgeCatalog.find` returns for ``KB``; when that is several, their matches
  are merged and an ``ambiguous_kb`` warning is reported. When the qualifier names no KB
  the whole body is retried as a name in the current KB (display names may contain ":").
- **Lookup.** A first ``Name`` segment matches top-level entries only (entries that are in
  no other entry's ``child_ids``); a first ``id=X`` matches entry ``X`` wherever it is in
  the KB (ids are unique, so nothing is gained by refusing children). Later segments are
  looked up among the previous entries' ``child_ids``.
- **Tags.** ``{{{tag:T}}}`` is every entry carrying tag ``T`` exactly, children included,
  in the same scope as a name; ``{{{KB:tag:T}}}`` for another KB.
- **Several matches** (same name, a tag, merged KBs): if the caller passes the keys
  ``(kb_id, entry_id)`` of the currently active entries and some matches are among them,
  only those are used ("contextual activation first"); otherwise all matches are merged,
  by ``usage_metadata.priority`` (higher first), then catalog order of their KBs, then
  file order, joined by ``"\\n"``.
- **Disabled entries** are not resolvable: a reference that only finds disabled entries
  (or goes through a disabled group) gets the error marker and a ``disabled`` problem.
- **Replacement text** is :func:`entry_text.injected_text` of the entry (prefix/suffix,
  group aggregation); each leaf's own content has its ``{{var}}`` placeholders filled
  (the entry's ``defines_variables`` as defaults, the caller's variables over them) and
  its references resolved recursively. Variables are applied to the literal text only,
  never to text a reference inserted, so an entry's defaults never leak into another's.
- **Recursion.** A stack of ``(kb_id, entry_id)`` and a depth: text given to
  :meth:`ReferenceResolver.resolve` is depth 0 and an entry it references is depth 1. A
  target already on the stack (itself included) is a cycle; a target deeper than
  ``max_depth`` is over the limit. Both insert a marker instead of the text.

A resolver indexes the catalog when it is built; build a new one after the KBs change.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from storyloom.core.errors import NotFound
from storyloom.knowledge.caiu import CAIU
from storyloom.knowledge.catalog import KnowledgeCatalog, LoadedKB
from storyloom.knowledge.entry_text import injected_text
from storyloom.knowledge.knowledge_base import KnowledgeBase
from storyloom.knowledge.reference_syntax import (
    ID_PREFIX,
    ReferenceSpan,
    ReferenceSyntaxError,
    ReferenceTarget,
    Segment,
    format_reference,
    iter_references,
    parse_reference,
)
from storyloom.knowledge.variables import apply_variables

DEFAULT_MAX_DEPTH = 5
MERGE_JOINER = "\n"
PREVIEW_CHARS = 120
REF_TAG = "@ref"

EntryKey = tuple[str, str]
"""``(kb_id, entry_id)``."""

ProblemKind = Literal["missing", "disabled", "syntax", "cycle", "depth", "ambiguous_kb"]
CheckStatus = Literal["ok", "missing", "ambiguous", "cyclic"]


class ReferenceMarkers(BaseModel):
    """Text inserted where a reference cannot be resolved; ``{key}`` is the body as written."""

    model_config = ConfigDict(extra="forbid")

    missing: str = Field(
        default="[引用错误: {key} 未找到或无法解析]",
        description="Not found, disabled or malformed",
    )
    cycle: str = Field(default="[引用循环: {key}]", description="The target is already open")
    depth: str = Field(default="[引用深度超限: {key}]", description="Nesting deeper than the limit")

    def render(self, kind: ProblemKind, key: str) -> str:
        template = {"cycle": self.cycle, "depth": self.depth}.get(kind, self.missing)
        # replace, not format: a key may hold braces of its own.
        return template.replace("{key}", key)


@dataclass(frozen=True)
class ReferenceProblem:
    """Something wrong with one reference, and where the reference is written.

    ``kb_id``/``entry_id`` locate the text that holds the reference (``entry_id`` None: the
    text given to ``resolve``); ``start``/``end`` are positions in that text as stored.
    ``ambiguous_kb`` is a warning: the reference was still resolved.
    """

    kind: ProblemKind
    reference: str
    kb_id: str | None
    entry_id: str | None
    message: str
    start: int = 0
    end: int = 0

    @property
    def is_error(self) -> bool:
        return self.kind != "ambiguous_kb"


@dataclass(frozen=True)
class ResolvedText:
    text: str
    problems: list[ReferenceProblem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not any(problem.is_error for problem in self.problems)


@dataclass(frozen=True)
class CheckTarget:
    kb_id: str
    entry_id: str
    display_name: str | None


@dataclass(frozen=True)
class ReferenceCheck:
    """The editor's verdict on one ``{{{...}}}`` (green ok, red missing, yellow ambiguous or
    cyclic). ``count`` is how many entries match; ``kb_count`` how many KBs were searched."""

    start: int
    end: int
    raw: str
    status: CheckStatus
    count: int
    kb_count: int
    targets: list[CheckTarget]
    message: str


@dataclass(frozen=True)
class RefTarget:
    """An entry offered by autocompletion, with the reference text to insert."""

    kb_id: str
    kb_name: str
    entry_id: str
    display_name: str | None
    path: str
    reference: str
    kinds: tuple[str, ...]
    tagged: bool
    preview: str


@dataclass
class _KBIndex:
    """One KB, indexed for lookups by id, top-level name, child name and tag."""

    loaded: LoadedKB
    position: int
    by_id: dict[str, CAIU] = field(default_factory=dict)
    order: dict[str, int] = field(default_factory=dict)
    top_by_name: dict[str, list[CAIU]] = field(default_factory=dict)
    nested_names: set[str] = field(default_factory=set)
    by_tag: dict[str, list[CAIU]] = field(default_factory=dict)
    child_by_name: dict[str, dict[str, list[CAIU]]] = field(default_factory=dict)
    parents: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    def build(cls, loaded: LoadedKB, position: int) -> _KBIndex:
        index = cls(loaded=loaded, position=position)
        kb = loaded.kb
        for n, entry in enumerate(kb.entries):
            index.by_id[entry.id] = entry
            index.order[entry.id] = n
        for entry in kb.entries:
            names: dict[str, list[CAIU]] = {}
            for child_id in dict.fromkeys(entry.management_metadata.child_ids):
                child = index.by_id.get(child_id)
                if child is None or child.id == entry.id:
                    continue
                index.parents.setdefault(child.id, []).append(entry.id)
                if child.displayName:
                    names.setdefault(child.displayName, []).append(child)
            index.child_by_name[entry.id] = names
            for tag in dict.fromkeys(entry.management_metadata.tags):
                index.by_tag.setdefault(tag, []).append(entry)
        for entry in kb.entries:
            if not entry.displayName:
                continue
            if entry.id in index.parents:
                index.nested_names.add(entry.displayName)
            else:
                index.top_by_name.setdefault(entry.displayName, []).append(entry)
        return index

    @property
    def kb(self) -> KnowledgeBase:
        return self.loaded.kb

    @property
    def kb_id(self) -> str:
        return self.loaded.kb_id

    def is_child_of(self, parent: CAIU, child_id: str) -> bool:
        return child_id != parent.id and child_id in parent.management_metadata.child_ids


Match = tuple[_KBIndex, CAIU]


@dataclass
class ReferenceLookup:
    """What a reference body finds: enabled matches in merge order, or why there are none."""

    target: ReferenceTarget | None
    matches: list[Match]
    kbs: list[_KBIndex]
    kind: ProblemKind | None = None
    message: str = ""
    name_ambiguous: bool = False

    @property
    def found(self) -> bool:
        return bool(self.matches)

    @property
    def kb_ambiguous(self) -> bool:
        return self.target is not None and self.target.kb is not None and len(self.kbs) > 1

    @property
    def kb_ids(self) -> list[str]:
        """The KBs that were searched."""
        return [index.kb_id for index in self.kbs]

    def entry_keys(self) -> list[EntryKey]:
        return [(index.kb_id, entry.id) for index, entry in self.matches]


@dataclass
class _Run:
    """State of one ``resolve`` call."""

    variables: Mapping[str, Any]
    active: frozenset[EntryKey]
    problems: list[ReferenceProblem] = field(default_factory=list)
    seen: set[tuple[Any, ...]] = field(default_factory=set)

    def report(self, problem: ReferenceProblem) -> None:
        # An entry referenced twice would report its inner problems twice.
        key = (problem.kind, problem.reference, problem.kb_id, problem.entry_id, problem.start)
        if key not in self.seen:
            self.seen.add(key)
            self.problems.append(problem)


def _label(index: _KBIndex) -> str:
    return index.kb.display_name


class ReferenceResolver:
    """Resolves and checks references against a catalog indexed once, at construction."""

    def __init__(
        self,
        catalog: KnowledgeCatalog,
        *,
        max_depth: int = DEFAULT_MAX_DEPTH,
        markers: ReferenceMarkers | None = None,
        joiner: str = MERGE_JOINER,
    ) -> None:
        if max_depth < 0:
            raise ValueError("max_depth must be 0 or more")
        self.catalog = catalog
        self.max_depth = max_depth
        self.markers = markers or ReferenceMarkers()
        self.joiner = joiner
        self._indexes = [_KBIndex.build(loaded, n) for n, loaded in enumerate(catalog.bases)]
        self._by_kb_id = {index.kb_id: index for index in reversed(self._indexes)}
        self._edges: dict[EntryKey, list[Match]] = {}
        self._leaves: dict[EntryKey, frozenset[EntryKey]] = {}

    # -- lookup ---------------------------------------------------------------------------

    def lookup(self, reference: str | ReferenceTarget, kb_id: str | None) -> ReferenceLookup:
        """What ``reference`` (a body or a parsed target) finds from text in KB ``kb_id``."""
        if isinstance(reference, str):
            try:
                target = parse_reference(reference)
            except ReferenceSyntaxError as exc:
                return ReferenceLookup(None, [], [], "syntax", f"invalid reference: {exc.reason}")
        else:
            target = reference
        if target.kb is None:
            return self._lookup_in(target, self._scope(kb_id), kb_id)
        kbs = self._find_kbs(target.kb)
        if kbs:
            return self._lookup_in(target, kbs, kb_id)
        try:
            literal = parse_reference(target.raw, qualified=False)
        except ReferenceSyntaxError:
            literal = None
        if literal is not None and not literal.is_tag:
            retry = self._lookup_in(literal, self._scope(kb_id), kb_id)
            if retry.found:
                return retry
        message = f"no knowledge base named '{target.kb}'"
        return ReferenceLookup(target, [], [], "missing", message)

    def _find_kbs(self, key: str) -> list[_KBIndex]:
        found = {loaded.kb_id for loaded in self.catalog.find(key)}
        return [index for index in self._indexes if index.kb_id in found]

    def _scope(self, kb_id: str | None) -> list[_KBIndex]:
        if kb_id is None:
            return list(self._indexes)
        index = self._by_kb_id.get(kb_id)
        return [index] if index is not None else []

    def _lookup_in(
        self, target: ReferenceTarget, kbs: list[_KBIndex], kb_id: str | None
    ) -> ReferenceLookup:
        if not kbs:
            where = f"knowledge base '{kb_id}' is not loaded" if kb_id else "no knowledge base"
            return ReferenceLookup(target, [], [], "missing", where)
        if target.tag is not None:
            candidates = [(ix, e) for ix in kbs for e in ix.by_tag.get(target.tag, [])]
            enabled = [(ix, e) for ix, e in candidates if e.management_metadata.is_enabled]
            lookup = ReferenceLookup(target, self._ordered(enabled), kbs)
            if not enabled:
                lookup.kind = "disabled" if candidates else "missing"
                state = "only disabled entries carry" if candidates else "no entry carries"
                lookup.message = f"{state} tag '{target.tag}' in {self._where(kbs)}"
            return lookup
        nodes: list[Match] = []
        ambiguous = False
        for step, segment in enumerate(target.path):
            candidates = self._step(kbs, nodes, step, segment)
            if len({(ix.kb_id, e.id) for ix, e in candidates}) > 1 and segment.kind == "name":
                ambiguous = True
            nodes = [(ix, e) for ix, e in candidates if e.management_metadata.is_enabled]
            if not nodes:
                kind: ProblemKind = "disabled" if candidates else "missing"
                message = self._step_message(target, step, segment, kbs, bool(candidates))
                return ReferenceLookup(target, [], kbs, kind, message)
        unique = list({(ix.kb_id, e.id): (ix, e) for ix, e in nodes}.values())
        return ReferenceLookup(target, self._ordered(unique), kbs, name_ambiguous=ambiguous)

    def _step(
        self, kbs: list[_KBIndex], nodes: list[Match], step: int, segment: Segment
    ) -> list[Match]:
        if step == 0:
            if segment.kind == "id":
                return [(ix, ix.by_id[segment.value]) for ix in kbs if segment.value in ix.by_id]
            return [(ix, e) for ix in kbs for e in ix.top_by_name.get(segment.value, [])]
        out: list[Match] = []
        for ix, parent in nodes:
            if segment.kind == "id":
                child = ix.by_id.get(segment.value)
                if child is not None and ix.is_child_of(parent, child.id):
                    out.append((ix, child))
            else:
                out.extend((ix, c) for c in ix.child_by_name[parent.id].get(segment.value, []))
        return out

    def _step_message(
        self,
        target: ReferenceTarget,
        step: int,
        segment: Segment,
        kbs: list[_KBIndex],
        disabled: bool,
    ) -> str:
        where = self._where(kbs)
        if disabled:
            return f"'{segment}' is disabled in {where}"
        if step > 0:
            parent = "/".join(str(s) for s in target.path[:step])
            return f"'{parent}' has no child '{segment}' in {where}"
        if segment.kind == "id":
            return f"no entry with id '{segment.value}' in {where}"
        hint = ""
        if any(segment.value in ix.nested_names for ix in kbs):
            hint = " (an entry of that name is inside a group: write Group/Name)"
        return f"no top-level entry named '{segment.value}' in {where}{hint}"

    @staticmethod
    def _where(kbs: list[_KBIndex]) -> str:
        names = ", ".join(f"'{_label(ix)}'" for ix in kbs)
        return f"knowledge base {names}" if len(kbs) == 1 else f"knowledge bases {names}"

    @staticmethod
    def _ordered(matches: Iterable[Match]) -> list[Match]:
        return sorted(
            matches,
            key=lambda m: (-m[1].usage_metadata.priority, m[0].position, m[0].order[m[1].id]),
        )

    # -- resolution -----------------------------------------------------------------------

    def resolve(
        self,
        text: str,
        kb_id: str | None,
        *,
        variables: Mapping[str, Any] | None = None,
        active: Collection[EntryKey] = (),
        entry_id: str | None = None,
    ) -> ResolvedText:
        """``text`` with its references replaced; ``kb_id`` is the KB holding the text, and
        ``entry_id`` the entry it is the content of (its defaults apply, and a reference
        back to it is a cycle)."""
        run = _Run(dict(variables or {}), frozenset(active))
        index = self._by_kb_id.get(kb_id) if kb_id is not None else None
        owner = index.by_id.get(entry_id) if index is not None and entry_id else None
        stack: tuple[EntryKey, ...] = ((kb_id, entry_id),) if kb_id and entry_id else ()
        location = (kb_id, entry_id)
        out = self._resolve_text(run, text, kb_id, location, owner, stack, 0)
        return ResolvedText(out, run.problems)

    def resolve_entry(
        self,
        kb_id: str,
        entry_id: str,
        *,
        variables: Mapping[str, Any] | None = None,
        active: Collection[EntryKey] = (),
    ) -> ResolvedText:
        """The injected text of an entry with its references resolved (the entry is depth 0)."""
        index = self._by_kb_id.get(kb_id)
        entry = index.by_id.get(entry_id) if index is not None else None
        if index is None or entry is None:
            raise NotFound(f"no entry '{entry_id}' in knowledge base '{kb_id}'")
        run = _Run(dict(variables or {}), frozenset(active))
        out = self._entry_text(run, index, entry, (), -1)
        return ResolvedText(out, run.problems)

    def _resolve_text(
        self,
        run: _Run,
        text: str,
        kb_id: str | None,
        location: tuple[str | None, str | None],
        owner: CAIU | None,
        stack: tuple[EntryKey, ...],
        depth: int,
    ) -> str:
        variables: Mapping[str, Any] = run.variables
        if owner is not None and owner.variable_handling.defines_variables:
            variables = {**owner.variable_handling.defines_variables, **run.variables}
        parts: list[str] = []
        position = 0
        for span in iter_references(text):
            parts.append(self._fill(text[position : span.start], variables))
            parts.append(self._resolve_span(run, span, kb_id, location, stack, depth))
            position = span.end
        parts.append(self._fill(text[position:], variables))
        return "".join(parts)

    @staticmethod
    def _fill(text: str, variables: Mapping[str, Any]) -> str:
        return apply_variables(text, variables) if variables and "{{" in text else text

    def _resolve_span(
        self,
        run: _Run,
        span: ReferenceSpan,
        kb_id: str | None,
        location: tuple[str | None, str | None],
        stack: tuple[EntryKey, ...],
        depth: int,
    ) -> str:
        def problem(kind: ProblemKind, message: str) -> str:
            run.report(ReferenceProblem(kind, span.raw, *location, message, span.start, span.end))
            return self.markers.render(kind, span.raw)

        if span.target is None:
            return problem("syntax", f"invalid reference: {span.error}")
        lookup = self.lookup(span.target, kb_id)
        if not lookup.found:
            return problem(lookup.kind or "missing", lookup.message)
        if lookup.kb_ambiguous:
            names = ", ".join(f"{_label(ix)} ({ix.kb_id})" for ix in lookup.kbs)
            problem("ambiguous_kb", f"'{span.target.kb}' names {len(lookup.kbs)} KBs: {names}")
        chosen = [m for m in lookup.matches if (m[0].kb_id, m[1].id) in run.active]
        parts = []
        for index, entry in chosen or lookup.matches:
            key = (index.kb_id, entry.id)
            if key in stack:
                chain = " → ".join(self._name(k) for k in (*stack, key))
                parts.append(problem("cycle", f"reference cycle: {chain}"))
            elif depth + 1 > self.max_depth:
                parts.append(problem("depth", f"nested deeper than {self.max_depth} references"))
            else:
                parts.append(self._entry_text(run, index, entry, stack, depth))
        return self.joiner.join(parts)

    def _entry_text(
        self, run: _Run, index: _KBIndex, entry: CAIU, stack: tuple[EntryKey, ...], depth: int
    ) -> str:
        """``entry`` as injected, opened at ``depth + 1`` on top of ``stack``."""
        key = (index.kb_id, entry.id)

        def transform(kb: KnowledgeBase, leaf: CAIU, text: str) -> str:
            inner = (*stack, key, *((index.kb_id, g) for g in self._between(index, entry, leaf)))
            if leaf.id != entry.id:
                inner = (*inner, (index.kb_id, leaf.id))
            location = (index.kb_id, leaf.id)
            return self._resolve_text(run, text, index.kb_id, location, leaf, inner, depth + 1)

        return injected_text(index.kb, entry, transform)

    def _between(self, index: _KBIndex, top: CAIU, leaf: CAIU) -> list[str]:
        """Groups strictly between ``top`` and its descendant ``leaf``, so a leaf that
        references its own (grand)parent group is caught as a cycle at once."""
        if leaf.id == top.id or top.id in index.parents.get(leaf.id, ()):
            return []
        reaches: dict[str, bool] = {}

        def up(node_id: str) -> bool:
            if node_id == top.id:
                return True
            if node_id not in reaches:
                reaches[node_id] = False  # cycles in child_ids
                reaches[node_id] = any(up(p) for p in index.parents.get(node_id, ()))
            return reaches[node_id]

        up(leaf.id)
        return [n for n, ok in reaches.items() if ok and n != leaf.id]

    def _entry(self, key: EntryKey) -> CAIU | None:
        index = self._by_kb_id.get(key[0])
        return index.by_id.get(key[1]) if index is not None else None

    def _name(self, key: EntryKey) -> str:
        entry = self._entry(key)
        return (entry.displayName if entry is not None else None) or f"{ID_PREFIX}{key[1]}"

    # -- editor checks --------------------------------------------------------------------

    def check(
        self, kb_id: str | None, text: str, *, entry_id: str | None = None
    ) -> list[ReferenceCheck]:
        """A verdict per reference in ``text``, for text being edited in KB ``kb_id``
        (``entry_id``: the entry whose content it is, for cycle warnings)."""
        edited = (kb_id, entry_id) if kb_id and entry_id else None
        return [self._check_span(span, kb_id, edited) for span in iter_references(text)]

    def _check_span(
        self, span: ReferenceSpan, kb_id: str | None, edited: EntryKey | None
    ) -> ReferenceCheck:
        def verdict(status: CheckStatus, message: str, lookup: ReferenceLookup) -> ReferenceCheck:
            targets = [CheckTarget(ix.kb_id, e.id, e.displayName) for ix, e in lookup.matches]
            count, kb_count = len(lookup.matches), len(lookup.kbs)
            return ReferenceCheck(
                span.start, span.end, span.raw, status, count, kb_count, targets, message
            )

        if span.target is None:
            return verdict("missing", f"invalid reference: {span.error}", _NOTHING)
        lookup = self.lookup(span.target, kb_id)
        if not lookup.found:
            return verdict("missing", lookup.message, lookup)
        for key in lookup.entry_keys():
            chain = self._cycle_from(key, edited)
            if chain is not None:
                return verdict("cyclic", chain, lookup)
        notes = []
        if lookup.kb_ambiguous:
            notes.append(
                f"'{span.target.kb}' names {len(lookup.kbs)} knowledge bases; "
                "use a kb_id to pick one"
            )
        if lookup.name_ambiguous and len(lookup.matches) > 1:
            notes.append(
                f"{len(lookup.matches)} entries match and will be merged; use id= to pick one"
            )
        if notes:
            return verdict("ambiguous", "; ".join(notes), lookup)
        found = len(lookup.matches)
        return verdict("ok", "found" if found == 1 else f"{found} entries", lookup)

    def _cycle_from(self, start: EntryKey, edited: EntryKey | None) -> str | None:
        """A description of the cycle that resolving ``start`` runs into, or None."""
        clean: set[tuple[EntryKey, int]] = set()
        # A group's own content is never injected, so reaching the group being edited only
        # loops through its children; an entry not indexed yet is taken as a plain one.
        edited_entry = self._entry(edited) if edited else None
        edited_injects = edited_entry is None or not edited_entry.is_group
        root: tuple[EntryKey, ...] = (edited,) if edited and edited_injects else ()

        def loops_back(key: EntryKey) -> bool:
            if edited is None:
                return False
            return (key == edited and edited_injects) or edited in self._leaf_keys(key)

        def visit(key: EntryKey, path: tuple[EntryKey, ...], depth: int) -> str | None:
            if loops_back(key):
                names = [self._name(k) for k in (*path, key)]
                return "leads back to this entry: " + " → ".join(names)
            if key in path:
                names = [self._name(k) for k in path[path.index(key) :]]
                return "reaches a reference cycle: " + " → ".join([*names, self._name(key)])
            if depth >= self.max_depth or (key, depth) in clean:
                return None
            for index, entry in self._successors(key):
                found = visit((index.kb_id, entry.id), (*path, key), depth + 1)
                if found is not None:
                    return found
            clean.add((key, depth))
            return None

        return visit(start, root, 0)

    def _successors(self, key: EntryKey) -> list[Match]:
        """Every entry the injected text of ``key`` references (all matches of each)."""
        if key not in self._edges:
            index = self._by_kb_id[key[0]]
            out: dict[EntryKey, Match] = {}
            for leaf_key in self._leaf_keys(key) or {key}:
                leaf = index.by_id[leaf_key[1]]
                for span in iter_references(leaf.text):
                    if span.target is not None:
                        for m in self.lookup(span.target, index.kb_id).matches:
                            out.setdefault((m[0].kb_id, m[1].id), m)
            self._edges[key] = list(out.values())
        return self._edges[key]

    def _leaf_keys(self, key: EntryKey) -> frozenset[EntryKey]:
        """The enabled entries whose content a group's injected text is made of (empty for a
        plain entry)."""
        if key not in self._leaves:
            index = self._by_kb_id[key[0]]
            found: set[EntryKey] = set()
            seen: set[str] = set()

            def walk(entry: CAIU) -> None:
                seen.add(entry.id)
                for child_id in entry.management_metadata.child_ids:
                    child = index.by_id.get(child_id)
                    if child is None or child.id in seen:
                        continue
                    if not child.management_metadata.is_enabled:
                        continue
                    if child.management_metadata.child_ids:
                        walk(child)
                    else:
                        found.add((index.kb_id, child.id))

            walk(index.by_id[key[1]])
            self._leaves[key] = frozenset(found)
        return self._leaves[key]

    # -- @ref targets ---------------------------------------------------------------------

    def referenceable(
        self, kb_id: str | None = None, *, tag_prefix: str = REF_TAG, include_all: bool = False
    ) -> list[RefTarget]:
        """Entries to offer when writing a reference in KB ``kb_id`` (None: outside any KB).

        Entries tagged ``@ref`` or ``@ref:KIND``, and with ``include_all`` every other entry
        that has a display name; enabled only; the current KB first, then catalog order.
        """
        kind_prefix = f"{tag_prefix}:"
        ordered = sorted(self._indexes, key=lambda ix: (ix.kb_id != kb_id, ix.position))
        out = []
        for index in ordered:
            for entry in index.kb.entries:
                if not entry.management_metadata.is_enabled:
                    continue
                tags = entry.management_metadata.tags
                kinds = tuple(t[len(kind_prefix) :] for t in tags if t.startswith(kind_prefix))
                tagged = tag_prefix in tags or bool(kinds)
                if not tagged and not (include_all and entry.displayName):
                    continue
                segments = self._name_path(index, entry)
                out.append(
                    RefTarget(
                        kb_id=index.kb_id,
                        kb_name=_label(index),
                        entry_id=entry.id,
                        display_name=entry.displayName,
                        path="/".join(segments),
                        reference=self._shortest_reference(index, entry, segments, kb_id),
                        kinds=kinds,
                        tagged=tagged,
                        preview=_preview(injected_text(index.kb, entry)),
                    )
                )
        return out

    def _name_path(self, index: _KBIndex, entry: CAIU) -> list[str]:
        """Segments from a top-level entry down to ``entry`` (first parent in file order)."""
        segments: list[str] = []
        seen: set[str] = set()
        current: CAIU | None = entry
        while current is not None and current.id not in seen:
            seen.add(current.id)
            segments.append(current.displayName or f"{ID_PREFIX}{current.id}")
            parents = sorted(index.parents.get(current.id, ()), key=index.order.__getitem__)
            current = index.by_id[parents[0]] if parents else None
        if current is not None:  # a cycle in child_ids: no top-level start exists
            return [f"{ID_PREFIX}{entry.id}"]
        return segments[::-1]

    def _shortest_reference(
        self, index: _KBIndex, entry: CAIU, segments: list[str], kb_id: str | None
    ) -> str:
        paths = list(dict.fromkeys(["/".join(segments), f"{ID_PREFIX}{entry.id}"]))
        qualifiers: list[str | None] = []
        if kb_id is None or kb_id == index.kb_id:
            qualifiers.append(None)
        loaded = index.loaded
        named = [*loaded.aliases, index.kb.kb_displayName, *loaded.reference_ids, index.kb_id]
        qualifiers += [q for q in dict.fromkeys(named) if q and ":" not in q]
        wanted = [(index.kb_id, entry.id)]
        for path in paths:
            for qualifier in qualifiers:
                body = f"{qualifier}:{path}" if qualifier else path
                lookup = self.lookup(body, kb_id)
                if lookup.entry_keys() == wanted and not lookup.kb_ambiguous:
                    return format_reference(path, qualifier)
        return format_reference(f"{ID_PREFIX}{entry.id}", index.kb_id)


_NOTHING = ReferenceLookup(None, [], [])


def _preview(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= PREVIEW_CHARS else flat[: PREVIEW_CHARS - 1] + "…"


def check_references(
    catalog: KnowledgeCatalog,
    kb_id: str | None,
    text: str,
    *,
    entry_id: str | None = None,
    max_depth: int = DEFAULT_MAX_DEPTH,
) -> list[ReferenceCheck]:
    """The editor's check of every reference in ``text`` (see :meth:`ReferenceResolver.check`)."""
    return ReferenceResolver(catalog, max_depth=max_depth).check(kb_id, text, entry_id=entry_id)


def referenceable_entries(
    catalog: KnowledgeCatalog,
    kb_id: str | None = None,
    *,
    tag_prefix: str = REF_TAG,
    include_all: bool = False,
) -> list[RefTarget]:
    """Autocompletion targets (see :meth:`ReferenceResolver.referenceable`)."""
    resolver = ReferenceResolver(catalog)
    return resolver.referenceable(kb_id, tag_prefix=tag_prefix, include_all=include_all)
