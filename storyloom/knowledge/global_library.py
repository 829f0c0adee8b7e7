"""Global knowledge bases: KB folders inside the registered global folders.

A global folder holds one sub-folder per KB (``<folder>/<name>/knowledge.json`` +
``media/``). Each KB is known by its ``kb_id``; two folders claiming the same ``kb_id``
are both reported and the first (in folder order) is used, so a copied KB never silently
shadows the original.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from storyloom.core.errors import FileFormatError
from storyloom.knowledge.catalog import LoadedKB
from storyloom.knowledge.knowledge_base import KNOWLEDGE_FILE, load_knowledge_base

GLOBAL_DIR = "knowledge"


def global_folders(home: Path, configured: Sequence[str]) -> list[Path]:
    """``<home>/knowledge`` first, then the folders from settings, without repeats."""
    folders = [home / GLOBAL_DIR, *(Path(p).expanduser() for p in configured)]
    out: list[Path] = []
    for folder in folders:
        if folder.resolve() not in {f.resolve() for f in out}:
            out.append(folder)
    return out


@dataclass
class GlobalLibrary:
    bases: list[LoadedKB] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def get(self, kb_id: str) -> LoadedKB | None:
        for loaded in self.bases:
            if loaded.kb_id == kb_id:
                return loaded
        return None


def scan_global_folders(folders: Sequence[Path]) -> GlobalLibrary:
    """Load every KB of the global folders; broken files are reported, not fatal."""
    library = GlobalLibrary()
    for folder in folders:
        if not folder.is_dir():
            continue
        for kb_file in sorted(folder.glob(f"*/{KNOWLEDGE_FILE}")):
            try:
                kb = load_knowledge_base(kb_file)
            except FileFormatError as exc:
                library.problems.append(str(exc))
                continue
            existing = library.get(kb.kb_id)
            if existing is not None:
                library.problems.append(
                    f"{kb_file}: kb_id {kb.kb_id} is already used by "
                    f"{existing.folder / KNOWLEDGE_FILE}; this copy is ignored"
                )
                continue
            library.bases.append(LoadedKB(kb=kb, folder=kb_file.parent, scope="global"))
    return library
