"""``storyloom chat ...``: SillyTavern chats in and conversations out, from the command line.

The commands use the data directory's database (the one the server uses) and a
project: ``--project``, else the current folder when it is one, else the data
directory's default project (created when missing, as the server does). Conversations
belong to a project through the ``id`` in its ``project.json``.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from storyloom.cli.context import project_id, project_or_default
from storyloom.cli.options import HomeOption, JsonOption, ProjectOption, fail
from storyloom.core.errors import StoryloomError
from storyloom.core.home import ensure_home, resolve_home

if TYPE_CHECKING:
    from storyloom.chat.store.conversation import CharacterSnapshot
    from storyloom.chat.store.turn_tree import TurnTree
    from storyloom.store.database import Database

chat_app = typer.Typer(
    help="Chats: import SillyTavern chats and chat-completion presets, export "
    "conversations, list them.",
    no_args_is_help=True,
)

UNSAFE_FILE_CHARS = re.compile(r'[\x00-\x1f<>:"/\\|?*]+')


def _open(home: Path | None) -> tuple[Path, Database, TurnTree]:
    from storyloom.chat.store.turn_tree import TurnTree
    from storyloom.store.database import Database

    data_dir = ensure_home(resolve_home(home))
    database = Database.in_home(data_dir)
    return data_dir, database, TurnTree(database)


def _character(folder: Path, name: str | None) -> CharacterSnapshot | None:
    """The project's character preset of that name, when there is exactly one."""
    from storyloom.chat.personalab.library import PresetLibrary, snapshot_by_name

    return snapshot_by_name(PresetLibrary(folder), name, datetime.now(UTC))


def file_name(title: str) -> str:
    """A title made safe as a file name (SillyTavern names chats "Name - date")."""
    cleaned = UNSAFE_FILE_CHARS.sub("_", title).strip(" .")
    return cleaned[:120] or "chat"


@chat_app.command("import")
def import_(
    file: Annotated[Path, typer.Argument(help="A SillyTavern chat (.jsonl).")],
    title: Annotated[
        str | None, typer.Option(help="Title of the conversation (default: the file name).")
    ] = None,
    as_json: JsonOption = False,
    project: ProjectOption = None,
    home: HomeOption = None,
) -> None:
    """Import a SillyTavern chat as a conversation (swipes become sibling messages)."""
    from storyloom.chat.store.st_chat import import_st_chat
    from storyloom.sillytavern.chat_log import parse_chat_jsonl

    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise fail(f"cannot read {file}: {exc}") from None
    try:
        chat = parse_chat_jsonl(text, file)
    except StoryloomError as exc:
        raise fail(exc) from None
    data_dir, database, tree = _open(home)
    try:
        folder = project_or_default(project, data_dir)
        imported = import_st_chat(
            tree,
            chat,
            project_id=project_id(folder),
            title=title or file.stem,
            character=_character(folder, chat.character_name),
        )
    except StoryloomError as exc:
        raise fail(exc) from None
    finally:
        database.close()
    if as_json:
        typer.echo(json.dumps(imported.model_dump(), indent=2))
        return
    typer.echo(
        f"conversation {imported.conversation_id}: {imported.messages} messages, "
        f"{imported.siblings} siblings"
    )


@chat_app.command("export")
def export(
    conversation_id: Annotated[str, typer.Argument(metavar="ID", help="Conversation id.")],
    fmt: Annotated[
        str,
        typer.Option(
            "--format", help="sillytavern (a .jsonl chat) or personalab (a folder of files)."
        ),
    ] = "sillytavern",
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            help="File (sillytavern) or folder (personalab); default: the title, here.",
            show_default=False,
        ),
    ] = None,
    leaf: Annotated[
        str | None,
        typer.Option(help="Export root → this message instead of the active branch."),
    ] = None,
    home: HomeOption = None,
) -> None:
    """Export a conversation's branch as a SillyTavern chat or a PersonaLab folder."""
    from storyloom.core.atomic_io import atomic_write_text

    if fmt not in ("sillytavern", "personalab"):
        raise fail(f"unknown --format {fmt!r}; use sillytavern or personalab")
    _, database, tree = _open(home)
    try:
        conversation = tree.conversation(conversation_id)
        name = file_name(conversation.title)
        if fmt == "sillytavern":
            from storyloom.chat.store.st_chat import export_st_chat

            text = export_st_chat(tree, conversation_id, leaf=leaf)
            target = out or Path(f"{name}.jsonl")
            atomic_write_text(target, text)
            typer.echo(f"{target}: {text.count(chr(10))} messages (SillyTavern chat)")
            return
        from storyloom.chat.personalab.export import export_personalab

        path = tree.path(leaf) if leaf is not None else tree.active_path(conversation_id)
        if path and path[-1].conversation_id != conversation_id:
            raise StoryloomError(f"message {leaf} is not in conversation {conversation_id}")
        state = tree.state_at(path[-1].id if path else None)
        files = export_personalab(conversation, path, state)
        folder = out or Path(name)
        for file_name_, content in files.items():
            atomic_write_text(folder / file_name_, content)
        typer.echo(f"{folder}: {', '.join(files)} ({len(path)} messages, PersonaLab)")
    except (StoryloomError, OSError) as exc:
        raise fail(exc) from None
    finally:
        database.close()


@chat_app.command("list")
def list_(
    all_projects: Annotated[
        bool, typer.Option("--all", help="Conversations of every project.")
    ] = False,
    as_json: JsonOption = False,
    project: ProjectOption = None,
    home: HomeOption = None,
) -> None:
    """List the conversations of the project."""
    data_dir, database, tree = _open(home)
    try:
        wanted = None if all_projects else project_id(project_or_default(project, data_dir))
        summaries = tree.conversations(wanted)
    except StoryloomError as exc:
        raise fail(exc) from None
    finally:
        database.close()
    if as_json:
        rows = [s.model_dump(mode="json") for s in summaries]
        typer.echo(json.dumps({"conversations": rows}, ensure_ascii=False, indent=2))
        return
    if not summaries:
        typer.echo("no conversations")
    for summary in summaries:
        when = datetime.fromtimestamp(summary.updated_at).strftime("%Y-%m-%d %H:%M")
        who = f"  [{summary.character_name}]" if summary.character_name else ""
        typer.echo(
            f"{summary.id}  {summary.title!r}{who}  {summary.message_count} messages  {when}"
        )


@chat_app.command("import-preset")
def import_preset(
    file: Annotated[Path, typer.Argument(help="A SillyTavern chat-completion preset (.json).")],
    workflow_id: Annotated[
        str | None,
        typer.Option("--id", help="Workflow id (default: st-<file name>).", show_default=False),
    ] = None,
    name: Annotated[
        str | None,
        typer.Option(help="Workflow name (default: the file name).", show_default=False),
    ] = None,
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Replace a workflow of that id.")
    ] = False,
    as_json: JsonOption = False,
    project: ProjectOption = None,
    home: HomeOption = None,
) -> None:
    """Import a SillyTavern chat-completion preset as a chat pipeline workflow.

    The preset's prompt order, prompts and sampling land in the nodes of the chat
    pipeline, saved as workflows/<id>.json of the project. A conversation uses it when
    its pipeline setting names that id (the chat page's settings, or PATCH
    /api/chats/{id} with settings.pipeline); open it in the workflow canvas to change it.
    """
    from storyloom.server.workflow_service import ProjectWorkflows, read_preset_json

    try:
        data = read_preset_json(file.read_bytes(), str(file))
    except OSError as exc:
        raise fail(f"cannot read {file}: {exc}") from None
    except StoryloomError as exc:
        raise fail(exc) from None
    data_dir = ensure_home(resolve_home(home))
    try:
        library = ProjectWorkflows(project_or_default(project, data_dir))
        workflow, path = library.import_st_preset(
            data, file_name=str(file), workflow_id=workflow_id, name=name, overwrite=overwrite
        )
    except (StoryloomError, OSError) as exc:
        raise fail(exc) from None
    if as_json:
        report = {"id": workflow.id, "name": workflow.name, "path": str(path)}
        typer.echo(json.dumps(report, ensure_ascii=False, indent=2))
        return
    typer.echo(f"workflow {workflow.id}: saved to {path}")
