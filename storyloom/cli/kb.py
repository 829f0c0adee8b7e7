"""``storyloom kb ...``: knowledge bases from the command line."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from storyloom.cli.context import project_id, project_or_cwd, project_or_default
from storyloom.cli.options import HomeOption, ProjectOption, fail, run_async
from storyloom.core.errors import StoryloomError
from storyloom.core.home import ensure_home, resolve_home

if TYPE_CHECKING:
    from storyloom.chat.service.card_scripts import CardScripts
    from storyloom.core.settings import Settings
    from storyloom.knowledge.catalog import KnowledgeCatalog, LoadedKB
    from storyloom.knowledge.embedding_jobs import EmbeddingProgress
    from storyloom.knowledge.hybrid_search import SearchHit
    from storyloom.knowledge.package import PackageExportReport
    from storyloom.project.knowledge_import import ChatImporter
    from storyloom.sillytavern.chat_log import ChatLog
    from storyloom.store.database import Database

kb_app = typer.Typer(help="Knowledge bases: schema, import, export, search.", no_args_is_help=True)


@kb_app.command("schema")
def schema() -> None:
    """Print the JSON Schema of knowledge.json (the editor validates against it)."""
    from storyloom.knowledge.knowledge_base import knowledge_base_schema

    typer.echo(json.dumps(knowledge_base_schema(), indent=2, ensure_ascii=False))


def _available_model_ids(file: Path, settings: Settings) -> list[str]:
    """Only packages carry vectors; other imports skip loading the embedding providers."""
    from storyloom.knowledge.package import is_kb_package

    if not is_kb_package(file):
        return []
    # Loads the openai SDK (over a second), which the other kinds of import do without.
    from storyloom.knowledge.embedding_models import EmbeddingRegistry

    return EmbeddingRegistry.from_settings(settings.embedding).model_ids()


def _chat_importer(database: Database, project: Path | None, data_dir: Path) -> ChatImporter:
    """A chat becomes a conversation of ``--project``, else of the current folder's
    project, else of the data directory's default one (as ``storyloom chat import``
    does). The project is looked up only when the file is a chat: a world info import
    without a project must not make the default project."""
    from storyloom.chat.store.st_chat import conversation_importer
    from storyloom.chat.store.turn_tree import TurnTree

    def run(chat: ChatLog, title: str) -> str:
        folder = project_or_default(project, data_dir)
        importer = conversation_importer(TurnTree(database), project_id=project_id(folder))
        return importer(chat, title)

    return run


@kb_app.command("import")
def import_(
    file: Annotated[
        Path,
        typer.Argument(
            help="World info JSON, card PNG/JSON, CHARX, chat JSONL, .ctkbz or .zip KB package."
        ),
    ],
    project: ProjectOption = None,
    name: Annotated[str | None, typer.Option(help="Display name of the new KB.")] = None,
    keep_both: Annotated[
        bool,
        typer.Option(
            "--keep-both",
            help="Store a book even when a KB here already has its entries, and a card even "
            "when it is a character here already (a second character).",
        ),
    ] = False,
    update: Annotated[
        bool,
        typer.Option(
            "--update", help="A card that is a character here: make it a new version of it."
        ),
    ] = False,
    allow_scripts: Annotated[
        bool,
        typer.Option(
            "--allow-scripts",
            help="A card's regex scripts, the scripts in its pages (status bars) and its "
            "own Tavern Helper scripts run in its new chats (as answering the web app's "
            "import question; changing variables, sending messages and the network stay "
            "off: the character page's Scripts section switches those).",
        ),
    ] = False,
    embedding_model: Annotated[
        str | None,
        typer.Option(
            "--embedding-model",
            help="A package: the embedding model of the new knowledge base (needed when "
            "its vectors come from a model missing here; the error lists the models).",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    home: HomeOption = None,
) -> None:
    """Import a SillyTavern file or a knowledge package; print what was made. A book whose
    entries a KB here already has is reported, not stored again (unless --keep-both). A
    card that is a character here already writes nothing: the very same card is said to
    be in the library; a changed one needs --update or --keep-both. A card's scripts are
    listed with whether they run; none runs until allowed (--allow-scripts)."""
    from storyloom.chat.personalab.card_reimport import CardExists, CardReimport, OnConflict
    from storyloom.chat.personalab.library import PresetLibrary
    from storyloom.core.settings import SettingsStore
    from storyloom.knowledge.global_library import GLOBAL_DIR, global_folders, scan_global_folders
    from storyloom.project.knowledge_import import import_knowledge_file
    from storyloom.project.project_knowledge import open_project_knowledge
    from storyloom.store.database import Database

    if keep_both and update:
        raise fail("--update and --keep-both are two answers; give one")
    data_dir = ensure_home(resolve_home(home))
    settings = SettingsStore(data_dir).load().effective
    project_dir = project_or_cwd(project)
    folders = global_folders(data_dir, settings.knowledge.global_folders)
    # A card's character goes to the project, else beside the global books.
    library = PresetLibrary(project_dir if project_dir is not None else data_dir)
    on_conflict: OnConflict = "update" if update else "keep_both" if keep_both else "ask"
    try:
        if project_dir is not None:
            existing = open_project_knowledge(project_dir, folders).catalog.knowledge_bases()
        else:
            existing = [b.kb for b in scan_global_folders(folders).bases]
    except StoryloomError:
        existing = []  # the import itself reports a broken project.json
    database = Database.in_home(data_dir)
    try:
        summary = import_knowledge_file(
            file,
            project_dir=project_dir,
            global_folder=data_dir / GLOBAL_DIR,
            database=database,
            available_model_ids=_available_model_ids(file, settings),
            display_name=name,
            chat_importer=_chat_importer(database, project, data_dir),
            existing=existing,
            on_duplicate="keep_both" if keep_both else "keep_existing",
            card_home=CardReimport(library, on_conflict),
            embedding_model=embedding_model,
        )
    except CardExists as exc:
        match = exc.match
        if match.sameness == "identical":
            typer.echo(
                f"{file}: already in your library as {match.name!r} ({match.character_id}); "
                "nothing imported (--keep-both makes a second character)"
            )
            if not as_json:
                _card_scripts(library.project_dir, match.character_id, file, allow=allow_scripts)
            return
        raise fail(
            f"{file}: a changed card of {match.name!r} ({match.character_id}), which is in "
            "your library already; nothing imported. Import it again with --update (a new "
            "version of it) or --keep-both (a second character)"
        ) from None
    except (StoryloomError, OSError) as exc:
        raise fail(exc) from None
    finally:
        database.close()
    character_id = Path(summary.character_file).stem if summary.character_file else None
    if as_json:
        report = asdict(summary)
        if character_id is not None:
            found = _card_scripts(
                library.project_dir, character_id, file, allow=allow_scripts, say=False
            )
            report["scripts"] = found.model_dump(mode="json") if found is not None else None
        typer.echo(json.dumps(report, ensure_ascii=False, indent=2))
        return
    typer.echo(f"{summary.source}: {summary.kind}")
    for kb in summary.created:
        typer.echo(
            f"  knowledge base {kb.display_name!r}  kb_id {kb.kb_id}  {kb.entry_count} entries"
        )
        typer.echo(f"    in {kb.folder}")
    for duplicate in summary.duplicates:
        kept = "kept both" if duplicate.kept == "both" else "not imported again"
        typer.echo(
            f"  {duplicate.display_name!r} has the entries of {duplicate.existing_name!r} "
            f"(kb_id {duplicate.existing_kb_id}): {kept}"
        )
    if summary.character:
        made = "updated" if summary.character_updated else "->"
        typer.echo(f"  character {summary.character!r} {made} {summary.character_file}")
    if summary.conversation_id:
        typer.echo(
            f"  chat of {summary.chat_messages} messages -> conversation {summary.conversation_id}"
        )
    if summary.chat_file:
        typer.echo(f"  chat of {summary.chat_messages} messages -> {summary.chat_file}")
    for warning in summary.warnings:
        typer.echo(f"  warning: {warning}")
    if character_id is not None:
        _card_scripts(library.project_dir, character_id, file, allow=allow_scripts)


_STATUS_WORDS = {
    "runs": "runs",
    "native": "served by storyloom, never downloaded",
    "off_in_card": "off in the card",
    "not_allowed": "not allowed yet",
}


def _card_scripts(
    root: Path, character_id: str, file: Path, *, allow: bool, say: bool = True
) -> CardScripts | None:
    """What the imported card carries and whether it runs (printed with ``say``); with
    ``allow`` the user's answer is saved first (regex, page scripts, its own Tavern
    Helper scripts). None when the character has no card to read."""
    from storyloom.chat.personalab.card_permissions import CardPermissionStore
    from storyloom.chat.personalab.library import PresetLibrary
    from storyloom.chat.service.card_scripts import card_scripts

    card = PresetLibrary(root).character(character_id).source_card
    if not card:
        return None
    store = CardPermissionStore(root)
    answer = store.of(character_id)
    found = card_scripts(card, answer)
    if allow and (found.regex or found.helper):
        own = [h.id for h in found.helper if h.kind == "other" and h.status != "off_in_card"]
        answer = answer.model_copy(
            update={
                "asked": True,
                "regex_scripts": True,
                "frame_scripts": True,
                "helper_scripts": list(dict.fromkeys([*answer.helper_scripts, *own])),
            }
        )
        found = card_scripts(card, store.set(character_id, answer))
    if not say or not (found.regex or found.helper):
        return found
    typer.echo("  the card's scripts:")
    for regex in found.regex:
        where = {"display": "on display", "prompt": "in the prompt", "both": "both"}[regex.scope]
        page = ", draws a page" + (" with scripts" if regex.frame_scripts else "")
        typer.echo(
            f"    regex {regex.name!r} ({where}{page if regex.frame else ''}): "
            f"{_STATUS_WORDS[regex.status]}"
        )
    for helper in found.helper:
        typer.echo(f"    Tavern Helper {helper.name!r}: {_STATUS_WORDS[helper.status]}")
    for problem in found.problems:
        typer.echo(f"    unreadable: {problem}")
    waiting = [s.status for s in found.regex] + [s.status for s in found.helper]
    if found.needs_answer or "not_allowed" in waiting:
        typer.echo(
            f"  they do not run until allowed: storyloom kb import {file} --allow-scripts "
            "(or the character page's Scripts section)"
        )
    return found


@kb_app.command("list")
def list_(project: ProjectOption = None, home: HomeOption = None) -> None:
    """List the knowledge bases a project sees (local first, then global)."""
    from storyloom.core.settings import SettingsStore
    from storyloom.knowledge.global_library import global_folders, scan_global_folders
    from storyloom.project.project_knowledge import open_project_knowledge

    data_dir = ensure_home(resolve_home(home))
    settings = SettingsStore(data_dir).load().effective
    folders = global_folders(data_dir, settings.knowledge.global_folders)
    root = project_or_cwd(project)
    try:
        if root is not None:
            knowledge = open_project_knowledge(root, folders)
            bases, problems = knowledge.catalog.bases, knowledge.problems
        else:
            library = scan_global_folders(folders)
            bases, problems = library.bases, library.problems
    except StoryloomError as exc:
        raise fail(exc) from None
    for loaded in bases:
        typer.echo(
            f"{loaded.scope:6}  {loaded.kb_id}  {loaded.kb.display_name!r}  "
            f"{len(loaded.kb.entries)} entries  {loaded.folder}"
        )
    for problem in problems:
        typer.echo(f"problem: {problem}", err=True)


def _open_catalog(
    project: Path | None, home: Path | None
) -> tuple[Path, KnowledgeCatalog, str | None]:
    """The data directory, the KBs visible (project first) and the project's model."""
    from storyloom.core.settings import SettingsStore
    from storyloom.knowledge.catalog import KnowledgeCatalog
    from storyloom.knowledge.global_library import global_folders, scan_global_folders
    from storyloom.project.project_knowledge import open_project_knowledge

    data_dir = ensure_home(resolve_home(home))
    settings = SettingsStore(data_dir).load().effective
    folders = global_folders(data_dir, settings.knowledge.global_folders)
    root = project_or_cwd(project)
    if root is None:
        return data_dir, KnowledgeCatalog(scan_global_folders(folders).bases), None
    knowledge = open_project_knowledge(root, folders)
    return data_dir, knowledge.catalog, knowledge.project.embeddingModelId


def _pick(catalog: KnowledgeCatalog, name: str) -> LoadedKB:
    found = catalog.find(name)
    if not found:
        raise fail(f"no knowledge base named {name!r} (try `storyloom kb list`)")
    if len(found) > 1:
        ids = ", ".join(b.kb_id for b in found)
        raise fail(f"{name!r} names {len(found)} knowledge bases ({ids}); use a kb_id")
    return found[0]


@kb_app.command("export")
def export(
    kb: Annotated[str, typer.Argument(help="kb_id, reference id or display name.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="File to write.")],
    fmt: Annotated[
        str, typer.Option("--format", help="ctkbz (package) or st-worldinfo (SillyTavern JSON).")
    ] = "ctkbz",
    vectors: Annotated[
        bool, typer.Option("--vectors", help="Include stored vectors (ctkbz only).")
    ] = False,
    project: ProjectOption = None,
    home: HomeOption = None,
) -> None:
    """Export a knowledge base as a .ctkbz package or as SillyTavern world info."""
    from storyloom.core.atomic_io import atomic_write_text

    data_dir, catalog, project_model = _open_catalog(project, home)
    loaded = _pick(catalog, kb)
    try:
        if fmt == "st-worldinfo":
            from storyloom.knowledge.st_export import export_world_info

            warnings: list[str] = []
            data = export_world_info(loaded.kb, warnings=warnings)
            atomic_write_text(out, json.dumps(data, ensure_ascii=False, indent=4) + "\n")
            typer.echo(f"{out}: world info with {len(data['entries'])} entries")
        elif fmt == "ctkbz":
            report = _export_package(loaded, out, vectors, data_dir, project_model)
            warnings = list(report.warnings)
            typer.echo(
                f"{out}: {report.entries} entries, {report.media_files} media files, "
                f"{report.vectors_exported} vectors"
                + (f" ({report.embedding_model_id})" if report.embedding_model_id else "")
            )
        else:
            raise StoryloomError(f"unknown --format {fmt!r}; use ctkbz or st-worldinfo")
    except StoryloomError as exc:
        raise fail(exc) from None
    for warning in warnings:
        typer.echo(f"  warning: {warning}")


def _export_package(
    loaded: LoadedKB, out: Path, vectors: bool, data_dir: Path, project_model: str | None
) -> PackageExportReport:
    from storyloom.core.settings import SettingsStore
    from storyloom.knowledge.embedding_models import EmbeddingRegistry, resolve_embedding_model
    from storyloom.knowledge.package import export_package
    from storyloom.store.database import Database

    if not vectors:
        return export_package(loaded, out, include_vectors=False)
    settings = SettingsStore(data_dir).load().effective
    registry = EmbeddingRegistry.from_settings(settings.embedding)
    model = resolve_embedding_model(loaded.kb, project_model, settings.embedding, registry)
    database = Database.in_home(data_dir)
    try:
        return export_package(
            loaded, out, include_vectors=True, db=database, model_id=model.model_id
        )
    finally:
        database.close()


@kb_app.command("search")
def search(
    query: Annotated[str, typer.Argument(help="What to look for (any language).")],
    kb: Annotated[
        list[str] | None, typer.Option("--kb", help="Limit to these KBs (repeatable).")
    ] = None,
    top_k: Annotated[int, typer.Option("--top-k", min=1, max=200)] = 10,
    tag: Annotated[list[str] | None, typer.Option("--tag", help="Only entries with a tag.")] = None,
    entry_type: Annotated[
        list[str] | None, typer.Option("--type", help="Only this entry_type.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print hits as JSON.")] = False,
    project: ProjectOption = None,
    home: HomeOption = None,
) -> None:
    """Hybrid search (vectors + keywords); new or changed entries are embedded first."""
    data_dir, catalog, project_model = _open_catalog(project, home)
    bases = [_pick(catalog, name) for name in kb] if kb else catalog.bases
    if not bases:
        raise fail("no knowledge bases to search (try `storyloom kb list`)")
    hits = run_async(
        _search(data_dir, bases, project_model, query, top_k, tag or None, entry_type or None)
    )
    by_id = {(b.kb_id, e.id): (b, e) for b in bases for e in b.kb.entries}
    rows: list[dict[str, Any]] = []
    for hit in hits:
        loaded, entry = by_id[(hit.kb_id, hit.entry_id)]
        rows.append(
            {
                "kb_id": hit.kb_id,
                "kb": loaded.kb.display_name,
                "entry_id": hit.entry_id,
                "displayName": entry.displayName,
                "score": round(hit.score, 5),
                "vector_similarity": hit.vector_similarity,
                "keyword_rank": hit.keyword_rank,
                "matched_by": sorted(hit.matched_by),
                "preview": " ".join(entry.text.split())[:120],
            }
        )
    if as_json:
        typer.echo(json.dumps(rows, ensure_ascii=False, indent=2))
        return
    if not rows:
        typer.echo("no matches")
    for n, row in enumerate(rows, start=1):
        similarity = row["vector_similarity"]
        sim = f" sim {similarity:.3f}" if isinstance(similarity, float) else ""
        typer.echo(
            f"{n:2}. {row['displayName'] or row['entry_id']}  [{row['kb']}]  "
            f"{'+'.join(row['matched_by'])}{sim}"
        )
        typer.echo(f"    {row['preview']}")


async def _search(
    data_dir: Path,
    bases: list[LoadedKB],
    project_model: str | None,
    query: str,
    top_k: int,
    tags: list[str] | None,
    entry_types: list[str] | None,
) -> list[SearchHit]:
    from storyloom.core.settings import SettingsStore
    from storyloom.knowledge.embedding_jobs import EmbeddingJobs
    from storyloom.knowledge.embedding_models import EmbeddingRegistry, resolve_embedding_model
    from storyloom.knowledge.hybrid_search import search as hybrid_search
    from storyloom.store.database import Database

    settings = SettingsStore(data_dir).load().effective
    registry = EmbeddingRegistry.from_settings(settings.embedding)
    database = Database.in_home(data_dir)
    jobs = EmbeddingJobs(database)

    def show(progress: EmbeddingProgress) -> None:
        if progress.total and progress.state == "running":
            typer.echo(
                f"\rembedding {progress.kb_id}: {progress.done}/{progress.total}",
                err=True,
                nl=False,
            )

    jobs.subscribe(show)
    try:
        models = {
            b.kb_id: resolve_embedding_model(b.kb, project_model, settings.embedding, registry)
            for b in bases
        }
        for loaded in bases:
            progress = await jobs.schedule(loaded.kb, models[loaded.kb_id].provider).wait()
            if progress.state == "failed":
                raise StoryloomError(
                    f"embedding {loaded.kb.display_name!r} failed: {progress.error}"
                )
        typer.echo("", err=True)
        # One query model for all: KBs embedded with another model are searched by keyword.
        model = models[bases[0].kb_id].provider
        return await hybrid_search(
            database,
            query,
            kb_ids=[b.kb_id for b in bases],
            model=model,
            top_k=top_k,
            tags=tags,
            entry_types=entry_types,
        )
    finally:
        await jobs.aclose()
        database.close()
