"""``storyloom schema`` and ``storyloom openapi``: the schemas of the file formats and of
the REST API, printed for editors, reference pages and the web app's generated types."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from pydantic import BaseModel

from storyloom.cli.options import fail


def openapi(
    output: Annotated[
        Path | None, typer.Argument(help="File to write (default: print).", show_default=False)
    ] = None,
) -> None:
    """Print the server's OpenAPI schema (the web app's types are generated from it)."""
    import tempfile

    from storyloom.core.atomic_io import atomic_write_text
    from storyloom.server.app import create_app

    with tempfile.TemporaryDirectory() as tmp:
        document = create_app(Path(tmp), environ={}).openapi()
    text = json.dumps(document, indent=2, ensure_ascii=False, sort_keys=True) + "\n"
    if output is None:
        typer.echo(text, nl=False)
    else:
        atomic_write_text(output, text)


def _file_formats() -> dict[str, tuple[type[BaseModel], str]]:
    """Every user-editable file format: its model and the intro of its reference page."""
    from storyloom.core.settings import Settings
    from storyloom.knowledge.knowledge_base import KnowledgeBase
    from storyloom.project.project_file import ProjectFile
    from storyloom.workflow.workflow_file import Workflow

    return {
        "settings": (
            Settings,
            "`settings.json` in the data directory (`--home`, `$STORYLOOM_HOME` or "
            "`~/.storyloom`). Environment variables `STORYLOOM_<SECTION>__<FIELD>` override "
            "it, e.g. `STORYLOOM_USER_LLM__BASE_URL`.",
        ),
        "knowledge-base": (
            KnowledgeBase,
            "`knowledge.json` of a knowledge base folder (beside its `media/`): the KB's "
            "metadata and its CAIU entries. `storyloom kb schema` prints its JSON Schema.",
        ),
        "project": (
            ProjectFile,
            "`project.json` at the root of a project folder (`storyloom project init DIR`).",
        ),
        "workflow": (
            Workflow,
            "`workflows/<id>.json` in a project folder: a graph of nodes (config by name), "
            "edges from an output slot to an input slot, and the workflow's interface. "
            "See docs/workflows.md.",
        ),
    }


def schema(
    name: Annotated[
        str, typer.Argument(help="File format: settings, knowledge-base, project, workflow.")
    ],
    markdown: Annotated[
        bool, typer.Option("--markdown", help="A reference page instead of JSON Schema.")
    ] = False,
) -> None:
    """Print the JSON Schema (or a Markdown reference) of a file format."""
    from storyloom.core.model_reference import markdown_reference

    formats = _file_formats()
    if name not in formats:
        raise fail(f"no file format {name!r}; known: {', '.join(sorted(formats))}")
    model, intro = formats[name]
    if markdown:
        typer.echo(markdown_reference(model, f"{name} file format", intro), nl=False)
    else:
        typer.echo(json.dumps(model.model_json_schema(), indent=2, ensure_ascii=False))
