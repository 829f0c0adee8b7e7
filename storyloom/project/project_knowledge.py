"""The knowledge bases of one project: its references resolved against files.

``knowledgeBaseReferences`` name local KB folders (``knowledgebases/<name>/``) or global KBs
by ``kb_id``. Opening a project loads them all into a :class:`KnowledgeCatalog`; every KB
of the global folders is also visible (after the project's own), because cross-KB
references may name any registered global KB by display name (seed 000, 2.2.4).
A reference that cannot be loaded is a problem reported to the user, not a crash.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from storyloom.core.errors import FileFormatError, NotFound
from storyloom.knowledge.catalog import KnowledgeCatalog, LoadedKB
from storyloom.knowledge.global_library import GlobalLibrary, scan_global_folders
from storyloom.knowledge.knowledge_base import (
    KNOWLEDGE_FILE,
    KnowledgeBase,
    load_knowledge_base,
    save_knowledge_base,
)
from storyloom.project.project_file import (
    KnowledgeBaseReference,
    ProjectFile,
    folder_slug,
    load_project,
    save_project,
)

LOCAL_KB_DIR = "knowledgebases"


class KnowledgeBaseMissing(NotFound):
    """No KB of the project has this ``kb_id``."""

    def __init__(self, kb_id: str) -> None:
        self.kb_id = kb_id
        super().__init__(f"no knowledge base with kb_id {kb_id}")


@dataclass
class ProjectKnowledge:
    root: Path
    project: ProjectFile
    catalog: KnowledgeCatalog
    library: GlobalLibrary
    problems: list[str] = field(default_factory=list)

    def require(self, kb_id: str) -> LoadedKB:
        loaded = self.catalog.get(kb_id)
        if loaded is None:
            raise KnowledgeBaseMissing(kb_id)
        return loaded


def open_project_knowledge(root: Path, global_folders: Sequence[Path]) -> ProjectKnowledge:
    project = load_project(root)
    library = scan_global_folders(global_folders)
    problems = list(library.problems)
    bases: list[LoadedKB] = []
    for ref in project.knowledgeBaseReferences:
        loaded = _load_reference(root, ref, library, problems)
        if loaded is None:
            continue
        existing = next((b for b in bases if b.kb_id == loaded.kb_id), None)
        if existing is not None:
            existing.reference_ids += (ref.id,)
            existing.aliases += (ref.name,) if ref.name else ()
            continue
        loaded.reference_ids = (ref.id,)
        loaded.aliases = (ref.name,) if ref.name else ()
        bases.append(loaded)
    for loaded in library.bases:
        if all(b.kb_id != loaded.kb_id for b in bases):
            bases.append(LoadedKB(kb=loaded.kb, folder=loaded.folder, scope="global"))
    return ProjectKnowledge(root, project, KnowledgeCatalog(bases), library, problems)


def _load_reference(
    root: Path, ref: KnowledgeBaseReference, library: GlobalLibrary, problems: list[str]
) -> LoadedKB | None:
    where = f"{root / 'project.json'}: knowledgeBaseReferences[{ref.id}]"
    if ref.type == "global":
        found = library.get(ref.source_id or "")
        if found is None:
            problems.append(f"{where}: no global knowledge base has kb_id {ref.source_id}")
            return None
        return LoadedKB(kb=found.kb, folder=found.folder, scope="global")
    folder = (root / (ref.path or "")).resolve()
    if not folder.is_relative_to(root.resolve()):
        problems.append(f"{where}: path {ref.path} leaves the project folder")
        return None
    if not (folder / KNOWLEDGE_FILE).is_file():
        problems.append(f"{where}: {folder / KNOWLEDGE_FILE} does not exist")
        return None
    try:
        kb = load_knowledge_base(folder)
    except FileFormatError as exc:
        problems.append(str(exc))
        return None
    return LoadedKB(kb=kb, folder=folder, scope="local")


def add_local_knowledge_base(root: Path, kb: KnowledgeBase, *, name: str | None = None) -> Path:
    """Write ``kb`` into a new ``knowledgebases/<slug>/`` and reference it in project.json."""
    load_project(root)  # refuse before writing anything when project.json is broken
    base = root / LOCAL_KB_DIR
    base.mkdir(exist_ok=True)
    taken = {p.name for p in base.iterdir()}
    folder = base / folder_slug(name or kb.kb_displayName or kb.kb_id, taken)
    save_knowledge_base(kb, folder)
    register_local_folder(root, folder, name=name or kb.kb_displayName)
    return folder


def register_local_folder(root: Path, folder: Path, *, name: str = "") -> KnowledgeBaseReference:
    """Reference the KB folder ``folder`` (inside the project) in project.json."""
    return register_local_folders(root, [(folder, name)])[0]


def register_local_folders(
    root: Path, folders: Sequence[tuple[Path, str]]
) -> list[KnowledgeBaseReference]:
    """Reference each (KB folder, name) in project.json, in one write."""
    project = load_project(root)
    refs: list[KnowledgeBaseReference] = []
    for folder, name in folders:
        relative = folder.resolve().relative_to(root.resolve()).as_posix()
        ref_ids = {r.id for r in project.knowledgeBaseReferences}
        ref = KnowledgeBaseReference(
            id=folder_slug(f"kb_{folder.name}", ref_ids),
            type="local",
            path=f"{relative}/",
            name=name,
        )
        project.knowledgeBaseReferences.append(ref)
        refs.append(ref)
    save_project(root, project)
    return refs


def add_global_knowledge_base(folder: Path, kb: KnowledgeBase, *, name: str | None = None) -> Path:
    """Write ``kb`` as a new KB folder inside the global folder ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    taken = {p.name for p in folder.iterdir()}
    target = folder / folder_slug(name or kb.kb_displayName or kb.kb_id, taken)
    save_knowledge_base(kb, target)
    return target


def reference_global_knowledge_base(root: Path, kb: KnowledgeBase) -> None:
    """Add a ``global`` reference to ``kb`` in project.json (seed 4.3: auto-add on use)."""
    project = load_project(root)
    if any(r.type == "global" and r.source_id == kb.kb_id for r in project.knowledgeBaseReferences):
        return
    ref_ids = {r.id for r in project.knowledgeBaseReferences}
    project.knowledgeBaseReferences.append(
        KnowledgeBaseReference(
            id=folder_slug(f"kb_{kb.kb_displayName or kb.kb_id}", ref_ids),
            type="global",
            source_id=kb.kb_id,
            name=kb.kb_displayName,
        )
    )
    save_project(root, project)
