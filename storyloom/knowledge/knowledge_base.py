"""The knowledge-base file (seed 000 section 2.2.2): ``knowledge.json`` beside ``media/``.

Loading validates the whole file against :class:`KnowledgeBase` and reports every problem
with its JSON path before anything else happens; saving is atomic. Fields this code does
not know are kept (see :mod:`storyloom.knowledge.caiu`).
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from storyloom.core.atomic_io import atomic_write_text
from storyloom.core.errors import FieldProblem, FileFormatError, problems_from_validation
from storyloom.knowledge.caiu import CAIU, _Open
from storyloom.sillytavern.untrusted_json import UntrustedJsonError, loads_untrusted

KNOWLEDGE_FILE = "knowledge.json"
MEDIA_DIR = "media"
SCHEMA_VERSION = "1.0"


def new_kb_id() -> str:
    return f"kb_{uuid.uuid4().hex}"


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


# How the vectors are searched: exact top-k by cosine over unit vectors, brute force
# (:class:`storyloom.knowledge.vector_index.NumpyVectorIndex`); the only index storyloom has.
VectorIndexType = Literal["exact_cosine"]


class VectorIndexInfo(BaseModel):
    """What the KB's vectors were built with (seed 000 2.2 and 4.1: model, dimension and
    index type are recorded in the KB's own metadata, not only in a package manifest).

    Written when an embedding job of the KB finishes; an importer compares
    ``embedding_model_id`` and ``dimension`` with the models it has.
    """

    model_config = ConfigDict(extra="forbid")

    embedding_model_id: str = Field(min_length=1, description="Model the vectors came from")
    dimension: int = Field(ge=1, description="Length of each vector")
    index_type: VectorIndexType = Field(
        default="exact_cosine", description="How they are searched: exact cosine top-k"
    )
    vector_count: int = Field(ge=0, description="Entries with a vector of the current text")
    built_at: str = Field(description="ISO timestamp of the embedding job that finished last")

    def same_index(self, other: VectorIndexInfo | None) -> bool:
        """Equal but for ``built_at`` (a job that changed nothing rewrites nothing)."""
        return other is not None and self.model_dump(exclude={"built_at"}) == other.model_dump(
            exclude={"built_at"}
        )


class KnowledgeBase(_Open):
    """A knowledge base: metadata and its CAIU entries, in file order."""

    kb_id: str = Field(default_factory=new_kb_id, min_length=1, description="Globally unique")
    kb_version: str = Field(default="1.0.0", description="Version of the content")
    schema_version: str = Field(default=SCHEMA_VERSION, description="Version of this layout")
    kb_displayName: str = Field(
        default="", description="Name shown to users and usable in cross-KB references"
    )
    kb_description: str = Field(default="")
    embedding_model_id: str | None = Field(
        default=None, description="Model the entries are embedded with; None: project default"
    )
    vector_index: VectorIndexInfo | None = Field(
        default=None,
        # Not a seed field: a KB never embedded is written (and served) as the seed lays
        # it out, so the file and the API agree.
        exclude_if=lambda value: value is None,
        description="Model, dimension and index type of the vectors built last; None: "
        "never embedded. Written by storyloom, not by hand",
    )
    vector_activation: bool = Field(
        default=False,
        title="Vector activation",
        description="Entries marked for semantic search (SillyTavern's 'vectorized') also "
        "activate by similarity to the chat; off, only their keys activate them "
        "(SillyTavern's Vector Storage 'enabled for world info', off by default)",
    )
    enabled: bool = Field(
        default=True,
        description="Off: no chat scans this knowledge base, wherever it is bound",
    )
    token_budget: int | None = Field(
        default=None,
        ge=1,
        description="Most tokens this book's entries may take in one prompt, inside the "
        "project's lore budget; None: only that budget (a Character Card V3 book's "
        "token_budget, which SillyTavern ignores)",
    )
    created_at: str | None = Field(default=None, description="ISO timestamp")
    updated_at: str | None = Field(default=None, description="ISO timestamp")
    tags: list[str] = Field(default_factory=list)
    author: str | None = Field(default=None)
    entries: list[CAIU] = Field(default_factory=list)
    kb_extensions: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _unique_entry_ids(self) -> KnowledgeBase:
        counts = Counter(entry.id for entry in self.entries)
        duplicated = [entry_id for entry_id, n in counts.items() if n > 1]
        if duplicated:
            raise ValueError(f"entry ids must be unique; repeated: {', '.join(duplicated)}")
        return self

    @property
    def display_name(self) -> str:
        return self.kb_displayName or self.kb_id

    def entry(self, entry_id: str) -> CAIU | None:
        for entry in self.entries:
            if entry.id == entry_id:
                return entry
        return None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = self.model_dump(mode="json", by_alias=True)
        return data


def parse_knowledge_base(data: Any, path: Path | str) -> KnowledgeBase:
    """Validate parsed JSON as a KB, or raise :class:`FileFormatError` naming ``path``."""
    try:
        return KnowledgeBase.model_validate(data)
    except ValidationError as exc:
        raise FileFormatError(path, problems_from_validation(exc)) from None


def read_json_file(path: Path) -> Any:
    """Parse a JSON file, turning every failure into a :class:`FileFormatError`."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise FileFormatError(path, [FieldProblem("", f"cannot read: {exc.strerror}")]) from None
    try:
        return loads_untrusted(raw)
    except UntrustedJsonError as exc:
        raise FileFormatError(path, [FieldProblem(exc.where, exc.reason)]) from None


def knowledge_file(location: Path) -> Path:
    """The ``knowledge.json`` of a KB folder, or the file itself when given one."""
    return location / KNOWLEDGE_FILE if location.is_dir() else location


def load_knowledge_base(location: Path) -> KnowledgeBase:
    path = knowledge_file(location)
    return parse_knowledge_base(read_json_file(path), path)


def save_knowledge_base(kb: KnowledgeBase, location: Path, *, touch: bool = True) -> Path:
    """Write ``knowledge.json`` atomically (creating the folder and ``media/``)."""
    path = location / KNOWLEDGE_FILE if location.suffix != ".json" else location
    path.parent.mkdir(parents=True, exist_ok=True)
    (path.parent / MEDIA_DIR).mkdir(exist_ok=True)
    if touch:
        kb.updated_at = now_iso()
        kb.created_at = kb.created_at or kb.updated_at
    atomic_write_text(path, json.dumps(kb.to_json(), ensure_ascii=False, indent=2) + "\n")
    return path


def knowledge_base_schema() -> dict[str, Any]:
    """JSON Schema of the KB file; the web editor validates entries against it."""
    schema: dict[str, Any] = KnowledgeBase.model_json_schema(by_alias=True)
    schema["$id"] = "https://storyloom.local/schema/knowledge-base.json"
    schema["title"] = "storyloom knowledge base (knowledge.json)"
    return schema
