"""Which project and data directory a command works on: shared by the command groups.

A command that needs a project takes ``--project``; without it, the current folder
counts when it holds ``project.json``. Commands that must have one (chats belong to a
project) fall back to the data directory's default project, made when missing, as
``storyloom serve`` does.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

from storyloom.project.project_file import DEFAULT_PROJECT

if TYPE_CHECKING:
    from storyloom.tools.tool_host import ToolHost


def project_or_cwd(project: Path | None) -> Path | None:
    """``--project``; else the current folder when it is a project; else None."""
    from storyloom.project.project_file import PROJECT_FILE

    if project is not None:
        return project
    return Path.cwd() if (Path.cwd() / PROJECT_FILE).is_file() else None


def project_or_default(project: Path | None, data_dir: Path) -> Path:
    """:func:`project_or_cwd`, else the default project of the data directory (made
    when missing)."""
    from storyloom.project.project_file import PROJECT_FILE, init_project

    found = project_or_cwd(project)
    if found is not None:
        return found
    default = data_dir / DEFAULT_PROJECT
    if not (default / PROJECT_FILE).is_file():
        init_project(default)
    return default


def project_id(folder: Path) -> str:
    """The ``id`` in the folder's ``project.json``: what conversations belong to."""
    from storyloom.project.project_file import load_project

    return load_project(folder).id


@contextlib.asynccontextmanager
async def opened_tool_host(home: Path | None, project: Path | None) -> AsyncIterator[ToolHost]:
    """The ToolHost of the data directory and project (the data directory's default
    project without one), closed when the block ends (its knowledge and database too)."""
    from storyloom.core.home import ensure_home, resolve_home
    from storyloom.plugins import node_registry
    from storyloom.tools.tool_host import open_tool_host

    data_dir = ensure_home(resolve_home(home))
    host = open_tool_host(
        data_dir, project_or_default(project, data_dir), node_registry=node_registry()
    )
    try:
        yield host
    finally:
        await host.aclose()
        if host.knowledge is not None:
            await host.knowledge.aclose()
        host.database.close()
