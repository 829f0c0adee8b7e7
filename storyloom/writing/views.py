"""The writing studio's API shapes: what ``/api/writing`` answers and takes, in camelCase.

These are views, built by :class:`storyloom.writing.studio.WritingStudio` from the store's
dataclasses, so the HTTP surface (and its OpenAPI document) never leaks a storage row.
Request bodies ignore unknown fields and bound their sizes, so a fuzzed request is a 422,
never a 500.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from storyloom.writing.book_store import (
    LEVELS,
    FactAction,
    FactCategory,
    FactSource,
    Level,
    ResourceKind,
)
from storyloom.writing.curation import StepState
from storyloom.writing.curation_reason import StepReason

SceneType = Literal["any", "dialogue", "action", "emotional", "exposition"]
ExportFormat = Literal["markdown", "docx", "epub"]

MAX_CHAPTER = 1_000_000
"""No book has more chapters: an ordinal past it is refused before any query."""
MAX_TITLE_CHARS = 500
MAX_TEXT_CHARS = 20_000_000
MAX_QUERY_CHARS = 4_000
MAX_BUDGET_TOKENS = 1_000_000


class _View(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


class _Body(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")


# -- books and the tree -------------------------------------------------------------------


class BookSummary(_View):
    id: str
    title: str
    language: str
    state_version: int
    chapters: int
    words: int


class NewBook(_Body):
    title: str = Field(min_length=1, max_length=MAX_TITLE_CHARS)
    language: str = Field(default="en", min_length=1, max_length=35)


class ResNode(_View):
    path: str
    uri: str
    kind: str
    title: str


class SceneNode(_View):
    path: str
    title: str
    words: int


class ChapterNode(_View):
    path: str
    ordinal: int
    title: str
    words: int
    scenes: list[SceneNode] = Field(default_factory=list)


class ArcNode(_View):
    path: str
    title: str
    words: int
    chapters: list[ChapterNode] = Field(default_factory=list)


class Tree(_View):
    manuscript: list[ArcNode]
    meta: list[ResNode]
    entities: list[ResNode]
    summaries: list[ResNode]
    profiles: list[ResNode]


# -- one resource ---------------------------------------------------------------------------


class LevelView(_View):
    text: str
    version: int
    as_of_chapter: int
    tokens: int
    source: str


class LevelVersion(_View):
    level: Level
    version: int
    as_of_chapter: int
    source: str
    created_at: str


class RelationView(_View):
    from_: str = Field(alias="from")
    to: str
    kind: str
    reason: str
    chapter: int
    source: FactSource = Field(
        default="prose", description="Who made it: the author, the agent model or the prose reader"
    )


class FactView(_View):
    subject: str
    attribute: str
    value: str
    chapter: int
    category: FactCategory
    source_uri: str = ""
    evidence: str = Field(default="", description="The sentence the fact was read from")
    output_id: str | None = None
    source: FactSource = Field(
        default="prose", description="Who made it: the author, the agent model or the prose reader"
    )


class ResourceView(_View):
    path: str
    uri: str
    kind: str
    title: str
    aliases: list[str]
    attrs: dict[str, Any]
    levels: dict[Level, LevelView] = Field(
        description="Each level's text as of the chapter asked for (absent: none yet)"
    )
    history: list[LevelVersion]
    relations: list[RelationView]
    facts: list[FactView]
    rejected_facts: list[FactView] = Field(
        default_factory=list,
        description="Facts the author rejected: curation never brings them back",
    )
    state_version: int = 0


class ResourceEdit(_Body):
    """An author's edit: the resource (created when new) and, with ``level`` and
    ``text``, a new version of that level."""

    path: str = Field(min_length=1, max_length=1_000)
    kind: Literal[
        "meta", "character", "location", "plot-thread", "arc", "chapter", "scene", "summary",
        "profile",
    ]  # fmt: skip
    title: str = Field(min_length=1, max_length=MAX_TITLE_CHARS)
    aliases: list[str] | None = Field(default=None, max_length=200)
    attrs: dict[str, Any] | None = None
    level: Level | None = None
    text: str | None = Field(default=None, max_length=MAX_TEXT_CHARS)
    as_of_chapter: int = Field(default=0, ge=0, le=MAX_CHAPTER)


# -- the author's corrections of memory -----------------------------------------------------

MAX_ATTRIBUTE_CHARS = 200
MAX_VALUE_CHARS = 2_000
MAX_EVIDENCE_CHARS = 10_000
MAX_PATH_CHARS = 1_000
EntityKindName = Literal["character", "location", "plot-thread"]


class FactList(_View):
    """A book's facts (about one subject, when asked) as the book stands at
    ``state_version``, and the ones the author rejected."""

    state_version: int
    facts: list[FactView]
    rejected: list[FactView]


class FactVersionView(_View):
    """One write of a fact: what it said from then on, and who wrote it."""

    subject: str
    attribute: str
    chapter: int
    version: int
    action: FactAction
    value: str
    category: FactCategory
    evidence: str
    source: FactSource
    state_version: int
    created_at: str


class NewFact(_Body):
    """The author's fact; it wins over an extracted one of the same subject, attribute
    and chapter."""

    subject: str = Field(min_length=1, max_length=MAX_PATH_CHARS, description="The entity's path")
    attribute: str = Field(min_length=1, max_length=MAX_ATTRIBUTE_CHARS)
    value: str = Field(min_length=1, max_length=MAX_VALUE_CHARS)
    chapter: int = Field(ge=0, le=MAX_CHAPTER, description="It holds from this chapter on")
    category: FactCategory = "factual"
    evidence: str = Field(default="", max_length=MAX_EVIDENCE_CHARS)


class FactEdit(_Body):
    """The author's edit of the fact (``subject``, ``attribute``, ``chapter``): a new
    version of it. ``newAttribute`` / ``newChapter`` move it (the old one is rejected)."""

    subject: str = Field(min_length=1, max_length=MAX_PATH_CHARS)
    attribute: str = Field(min_length=1, max_length=MAX_ATTRIBUTE_CHARS)
    chapter: int = Field(ge=0, le=MAX_CHAPTER)
    value: str = Field(min_length=1, max_length=MAX_VALUE_CHARS)
    category: FactCategory | None = None
    evidence: str | None = Field(default=None, max_length=MAX_EVIDENCE_CHARS)
    new_attribute: str | None = Field(default=None, min_length=1, max_length=MAX_ATTRIBUTE_CHARS)
    new_chapter: int | None = Field(default=None, ge=0, le=MAX_CHAPTER)


class FactRef(_Body):
    """One fact, as a rejection keys it."""

    subject: str = Field(min_length=1, max_length=MAX_PATH_CHARS)
    attribute: str = Field(min_length=1, max_length=MAX_ATTRIBUTE_CHARS)
    value: str = Field(min_length=1, max_length=MAX_VALUE_CHARS)
    chapter: int = Field(ge=0, le=MAX_CHAPTER)


class NewEntity(_Body):
    kind: EntityKindName
    title: str = Field(min_length=1, max_length=MAX_TITLE_CHARS)
    aliases: list[str] = Field(default_factory=list, max_length=200)
    path: str | None = Field(
        default=None,
        max_length=MAX_PATH_CHARS,
        description="Default: /entities/<kind's folder>/<slug of the title>",
    )
    chapter_from: int = Field(default=0, ge=0, le=MAX_CHAPTER)


class EntityEdit(_Body):
    path: str = Field(min_length=1, max_length=MAX_PATH_CHARS)
    title: str | None = Field(default=None, min_length=1, max_length=MAX_TITLE_CHARS)
    aliases: list[str] | None = Field(default=None, max_length=200)


class MergeBody(_Body):
    """Two names for one entity: ``from`` goes, ``into`` keeps its facts and names."""

    from_: str = Field(alias="from", min_length=1, max_length=MAX_PATH_CHARS)
    into: str = Field(min_length=1, max_length=MAX_PATH_CHARS)


class NewRelation(_Body):
    from_: str = Field(alias="from", min_length=1, max_length=MAX_PATH_CHARS)
    to: str = Field(min_length=1, max_length=MAX_PATH_CHARS)
    kind: str = Field(min_length=1, max_length=MAX_ATTRIBUTE_CHARS)
    reason: str = Field(default="", max_length=MAX_VALUE_CHARS)
    chapter: int = Field(default=0, ge=0, le=MAX_CHAPTER)


class NewChapter(_Body):
    title: str = Field(default="", max_length=MAX_TITLE_CHARS)
    text: str = Field(default="", max_length=MAX_TEXT_CHARS)
    arc: str | None = Field(default=None, max_length=1_000)


class ChapterText(_Body):
    text: str = Field(max_length=MAX_TEXT_CHARS)


class ChapterSaved(_View):
    """The author's chapter text was stored at once; its curation runs in the background."""

    chapter: ChapterNode
    output_id: str
    created: bool


# -- graph, search, threads -----------------------------------------------------------------


class GraphNode(_View):
    path: str
    title: str
    kind: str


class GraphView(_View):
    nodes: list[GraphNode]
    edges: list[RelationView]


class SearchRequest(_Body):
    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)
    under: str = Field(default="/", max_length=1_000)
    levels: list[Level] = Field(default_factory=lambda: list(LEVELS), min_length=1)
    top_k: int = Field(default=10, ge=1, le=200)
    as_of: int | None = Field(default=None, ge=0, le=MAX_CHAPTER)


class SearchHitView(_View):
    path: str
    uri: str
    level: Level
    score: float
    title: str


class ThreadView(_View):
    path: str
    title: str
    planted: int | None
    due: int | None
    paid_off: int | None
    overdue: bool


# -- context (Role A) -----------------------------------------------------------------------


class ContextBody(_Body):
    chapter: int = Field(ge=1, le=MAX_CHAPTER, description="The chapter being written")
    prompt: str = Field(default="", max_length=MAX_QUERY_CHARS * 25)
    outline: str = Field(default="", max_length=MAX_QUERY_CHARS * 25)
    scene_type: SceneType = "any"
    budget_tokens: int = Field(default=25_000, ge=1, le=MAX_BUDGET_TOKENS)


class SourceLabel(_View):
    """What a context piece's address names, as a person reads it: a chapter's number and
    title, an entity's or a document's name (the address stays the piece's identity)."""

    uri: str
    kind: ResourceKind | None = Field(description="None: the book no longer has it")
    title: str = Field(description="The chapter's title, the entity's name; the path if gone")
    chapter: int | None = Field(
        default=None, description="The chapter's number, for a chapter or a passage of one"
    )
    passage: bool = Field(default=False, description="A span of the chapter's text (#p=…)")


class LabelsBody(_Body):
    uris: list[str] = Field(max_length=10_000)


class ContextPieceView(_View):
    uri: str
    path: str
    label: SourceLabel
    level: Level
    version: int
    reason: str
    tokens: int
    text: str


class ContextView(_View):
    text: str
    tokens: int
    budget_tokens: int
    state_version: int
    pieces: list[ContextPieceView]


class SourceRef(_Body):
    uri: str = Field(min_length=1, max_length=2_000)
    level: Level = "L2"
    version: int | None = Field(default=None, ge=1, le=2**53)
    reason: str = Field(default="", max_length=2_000)


class RebuildBody(_Body):
    sources: list[SourceRef] = Field(max_length=10_000)


class RebuiltContext(_View):
    text: str


# -- curation -------------------------------------------------------------------------------


class OutputView(_View):
    output_id: str
    chapter: int
    run_id: str | None
    node_id: str | None
    persisted_at: str
    steps: dict[str, StepState]
    error: str | None = None
    reasons: dict[str, str] = Field(default_factory=dict)
    """Why each skipped step was skipped (no agent model, and where to set one), or what a
    step done without the agent model could not do."""
    reason_terms: dict[str, StepReason] = Field(default_factory=dict)
    """The same reasons as terms and values, for a page to say in its language."""


class RetryAccepted(_View):
    output_id: str


class IntentionalBody(_Body):
    intentional: bool = True


# -- import, export, the chapter workflow ---------------------------------------------------


class ImportChapter(_View):
    title: str
    text: str
    words: int


class ImportPreviewView(_View):
    format: str
    title: str
    chapters: list[ImportChapter]


class ChapterToImport(_Body):
    title: str = Field(default="", max_length=MAX_TITLE_CHARS)
    text: str = Field(max_length=MAX_TEXT_CHARS)


class ImportBody(_Body):
    chapters: list[ChapterToImport] = Field(min_length=1, max_length=20_000)
    arc: str | None = Field(default=None, max_length=1_000)


class CurationStarted(_View):
    """One imported chapter whose curation began: the output its progress names."""

    output_id: str
    chapter: int


class ImportedChapters(_View):
    """The book after an import, and the curation it started (one output per chapter with
    text, in chapter order) for the page to follow with ``curation:progress``."""

    tree: Tree
    curation: list[CurationStarted]


class ChapterWorkflowView(_View):
    workflow_id: str
