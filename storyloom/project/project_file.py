"""``project.json`` (seed 000 section 3.2) and the project layout (section 3.1).

Field names follow the seed (camelCase). ``embeddingModelId`` (the project's default
embedding model, seed 2.2), ``activationSettings`` (World Info settings per project) and
``globalKnowledgeBases`` (the books every chat scans) are storyloom additions; unknown
fields are kept.
"""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from storyloom.core.atomic_io import atomic_write_text
from storyloom.core.errors import FieldProblem, FileFormatError, problems_from_validation
from storyloom.knowledge.activation_settings import ActivationSettings
from storyloom.knowledge.caiu import _Open
from storyloom.knowledge.knowledge_base import now_iso, read_json_file

PROJECT_FILE = "project.json"
# A data directory's own project, used when no other is named (chats belong to a project).
DEFAULT_PROJECT = Path("projects") / "default"
SCHEMA_VERSION = "2.0"
# Seed 3.1 also lists scenes/ and ui/; storyloom has no Scene or Custom UI resource to
# read from them (docs/decisions.md), so it does not make folders nothing reads.
LAYOUT_DIRS = (
    "workflows",
    "knowledgebases",
    "scripts",
    "assets",
    "settings",
    "presets",
)


class KnowledgeBaseReference(_Open):
    """One knowledge base the project uses."""

    id: str = Field(min_length=1, description="Reference id, unique in the project")
    type: Literal["local", "global"] = Field(default="local")
    path: str | None = Field(
        default=None, description='With "local": folder relative to the project root'
    )
    name: str = Field(default="", description="Alias used in cross-KB references")
    source_id: str | None = Field(default=None, description='With "global": the kb_id')

    @model_validator(mode="after")
    def _target(self) -> KnowledgeBaseReference:
        if self.type == "local":
            if not self.path:
                raise ValueError('a "local" reference needs "path"')
            parts = self.path.replace("\\", "/").split("/")
            if self.path.startswith(("/", "\\")) or ".." in parts:
                raise ValueError("path must stay inside the project folder")
        elif not self.source_id:
            raise ValueError('a "global" reference needs "source_id" (the kb_id)')
        return self


class ProjectFile(_Open):
    id: str = Field(default_factory=lambda: str(uuid.uuid4()), min_length=1)
    name: str = Field(default="", description="Shown to users")
    description: str = Field(default="")
    version: str = Field(default="1.0.0")
    createdAt: str | None = Field(default=None)
    updatedAt: str | None = Field(default=None)
    templateUsed: str | None = Field(
        default=None, description="Id of the project this one was started from (seed 5)"
    )
    preferredView: Literal["editor"] = Field(
        default="editor", description='Only "editor": storyloom has no Custom UI view'
    )
    schemaVersion: str = Field(default=SCHEMA_VERSION)
    knowledgeBaseReferences: list[KnowledgeBaseReference] = Field(default_factory=list)
    embeddingModelId: str | None = Field(
        default=None, description="Default embedding model of the project's KBs"
    )
    activationSettings: ActivationSettings = Field(
        default_factory=ActivationSettings, description="World Info settings of this project"
    )
    globalKnowledgeBases: list[str] = Field(
        default_factory=list,
        description="kb_ids of the books scanned in every chat of the project (global lore, "
        "SillyTavern's active world list)",
    )
    customMetadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("preferredView", mode="before")
    @classmethod
    def _no_custom_view(cls, value: object) -> object:
        if value == "custom":
            raise ValueError(
                '"custom" opens a project Custom UI (seed 000 2.4.1), which storyloom does '
                'not have: the web app is the one view (a plugin\'s "frontend" adds to it), '
                'so use "editor"'
            )
        return value

    @model_validator(mode="after")
    def _unique_reference_ids(self) -> ProjectFile:
        seen: set[str] = set()
        for ref in self.knowledgeBaseReferences:
            if ref.id in seen:
                raise ValueError(f"knowledgeBaseReferences ids must be unique; repeated: {ref.id}")
            seen.add(ref.id)
        return self

    def reference(self, reference_id: str) -> KnowledgeBaseReference | None:
        for ref in self.knowledgeBaseReferences:
            if ref.id == reference_id:
                return ref
        return None


def load_project(project_dir: Path) -> ProjectFile:
    path = project_dir / PROJECT_FILE
    if not path.is_file():
        reason = "no project.json here; create one with `storyloom project init DIR`"
        raise FileFormatError(path, [FieldProblem("", reason)])
    try:
        return ProjectFile.model_validate(read_json_file(path))
    except ValidationError as exc:
        raise FileFormatError(path, problems_from_validation(exc)) from None


def save_project(project_dir: Path, project: ProjectFile) -> Path:
    project.updatedAt = now_iso()
    project.createdAt = project.createdAt or project.updatedAt
    path = project_dir / PROJECT_FILE
    data = project.model_dump(mode="json")
    atomic_write_text(path, json.dumps(data, ensure_ascii=False, indent=2) + "\n")
    return path


def init_project(project_dir: Path, name: str | None = None) -> ProjectFile:
    """Create the layout and ``project.json``; an existing project is loaded, not replaced."""
    if (project_dir / PROJECT_FILE).exists():
        return load_project(project_dir)
    project_dir.mkdir(parents=True, exist_ok=True)
    for folder in LAYOUT_DIRS:
        (project_dir / folder).mkdir(exist_ok=True)
    project = ProjectFile(name=name or project_dir.resolve().name)
    save_project(project_dir, project)
    return project


def folder_slug(name: str, taken: set[str]) -> str:
    """A folder name for a KB: readable (CJK kept), unique among ``taken``."""
    slug = re.sub(r"[^\w.-]+", "_", name, flags=re.UNICODE).strip("._") or "kb"
    slug = slug[:60]
    # Compared without case: the folder may live on a case-insensitive file system.
    used = {t.lower() for t in taken}
    candidate, n = slug, 2
    while candidate.lower() in used:
        candidate, n = f"{slug}_{n}", n + 1
    return candidate
