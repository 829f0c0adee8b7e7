"""Interaction templates (seed 000 section 5): a project started from another project.

The seed's template only sets a project up and does not bind it afterwards, so a template
is simply a project folder. Starting from one copies its files (workflows, knowledge
bases, scripts, assets, settings, presets...) and carries its ``project.json`` settings
over under a fresh id and name; ``templateUsed`` records the template's id. Nothing links
the two afterwards: editing either leaves the other as it was.
"""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

from storyloom.core.errors import FieldProblem, FileFormatError
from storyloom.project.project_file import (
    LAYOUT_DIRS,
    PROJECT_FILE,
    ProjectFile,
    load_project,
    save_project,
)


def init_from_template(
    project_dir: Path, template_dir: Path, name: str | None = None
) -> ProjectFile:
    """A new project in ``project_dir`` made from the project in ``template_dir``."""
    template = load_project(template_dir)
    target = project_dir / PROJECT_FILE
    if target.exists():
        reason = "a project is already here; a template only starts a new project"
        raise FileFormatError(target, [FieldProblem("templateUsed", reason)])
    if project_dir.exists() and any(project_dir.iterdir()):
        reason = "the folder is not empty; a template starts a project in an empty folder"
        raise FileFormatError(project_dir, [FieldProblem("templateUsed", reason)])
    if project_dir.resolve().is_relative_to(template_dir.resolve()):
        reason = "the new project cannot be inside its template"
        raise FileFormatError(project_dir, [FieldProblem("templateUsed", reason)])
    shutil.copytree(
        template_dir,
        project_dir,
        dirs_exist_ok=True,
        ignore=shutil.ignore_patterns(PROJECT_FILE, ".git"),
    )
    for folder in LAYOUT_DIRS:
        (project_dir / folder).mkdir(exist_ok=True)
    project = template.model_copy(
        update={
            "id": str(uuid.uuid4()),
            "name": name or project_dir.resolve().name,
            "createdAt": None,
            "updatedAt": None,
            "templateUsed": template.id,
        }
    )
    save_project(project_dir, project)
    return project
