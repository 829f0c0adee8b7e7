"""The knowledge of the project one server works on, kept loaded between requests.

The files stay the truth: every call compares the modification times of ``project.json``,
the local KB files and the global folders with what was loaded, and reloads when someone
(an editor, git, another process) changed them. Derived things (token counts, the
compiled activation engine, the reference resolver) are cached per catalog version, so a
change to any file gives fresh ones and an unchanged project reuses them.

Embedding runs in the background on the server's event loop (:class:`EmbeddingJobs`): a
KB is scheduled a few seconds after it is written (a burst of saves embeds once) and at
once before it is searched, and only when its file changed since it was last scheduled.
Batches are small because a job is cancelled between batches, not inside the C call that
computes one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import shutil
import tempfile
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from storyloom.core.errors import (
    ConfigurationError,
    Conflict,
    FieldProblem,
    FileFormatError,
    InvalidInput,
    StoryloomError,
)
from storyloom.core.settings import Settings
from storyloom.knowledge.activation import (
    ActivationEngine,
    ActivationRequest,
    ActivationResult,
    CharacterContext,
    ScanMessage,
)
from storyloom.knowledge.activation_calibration import NEUTRAL_TEXTS
from storyloom.knowledge.activation_settings import ActivationSettings, scan_window_text
from storyloom.knowledge.caiu import CAIU
from storyloom.knowledge.catalog import LoadedKB, Scope
from storyloom.knowledge.embedding_jobs import EmbeddingJobs, EmbeddingProgress
from storyloom.knowledge.embedding_models import (
    EmbeddingRegistry,
    ResolvedModel,
    resolve_embedding_model,
)
from storyloom.knowledge.entry_media import remove_entry_image, store_entry_image
from storyloom.knowledge.entry_text import injected_text
from storyloom.knowledge.global_library import GLOBAL_DIR, global_folders
from storyloom.knowledge.hybrid_search import SearchHit, search, semantic_scores
from storyloom.knowledge.knowledge_base import (
    KNOWLEDGE_FILE,
    MEDIA_DIR,
    KnowledgeBase,
    new_kb_id,
    save_knowledge_base,
)
from storyloom.knowledge.package import PACKAGE_SUFFIX, export_package, is_kb_package
from storyloom.knowledge.references import ReferenceResolver
from storyloom.knowledge.search_index import remove_kb, sync_kb
from storyloom.knowledge.timed_effects import TimedEffectsState
from storyloom.knowledge.variables import lookup_variable, placeholders
from storyloom.knowledge.vector_metadata import record_vector_index
from storyloom.llm.embeddings import EmbeddingProvider
from storyloom.llm.tokenizers import counter_for
from storyloom.project.knowledge_import import (
    CardHome,
    ChatImporter,
    DuplicateKnowledgeBase,
    OnDuplicate,
    import_knowledge_file,
)
from storyloom.project.project_file import (
    PROJECT_FILE,
    ProjectFile,
    load_project,
    save_project,
)
from storyloom.project.project_knowledge import (
    ProjectKnowledge,
    add_global_knowledge_base,
    add_local_knowledge_base,
    open_project_knowledge,
    reference_global_knowledge_base,
)
from storyloom.store.database import Database

Fingerprint = tuple[tuple[str, int, int], ...]
EMBED_AFTER_WRITE_S = 3.0
EMBED_BATCH = 8
WINDOW_VECTORS_KEPT = 256

logger = logging.getLogger(__name__)


class KnowledgeBaseIsLocal(Conflict):
    """A global reference was asked for a KB that lives in the project's own folder."""

    def __init__(self, kb_id: str) -> None:
        self.kb_id = kb_id
        super().__init__(
            f"knowledge base {kb_id} is local to this project; only a global one is referenced"
        )


@dataclass
class Snapshot:
    """One loaded state of the project; ``version`` grows with every reload."""

    version: int
    knowledge: ProjectKnowledge
    fingerprint: Fingerprint
    derived: dict[Any, Any] = field(default_factory=dict)

    def require(self, kb_id: str) -> LoadedKB:
        """The KB ``kb_id``; :class:`KnowledgeBaseMissing` when the project has none."""
        return self.knowledge.require(kb_id)


@dataclass
class ImportOutcome:
    kind: str
    created: list[LoadedKB]
    character: str | None = None
    character_file: Path | None = None
    character_updated: bool = False
    conversation_id: str | None = None
    warnings: list[str] = field(default_factory=list)
    duplicates: list[DuplicateKnowledgeBase] = field(default_factory=list)


@dataclass(frozen=True)
class EmbeddingState:
    kb_id: str
    state: str
    done: int
    total: int
    model_id: str | None
    message: str = ""


def _stat(path: Path) -> tuple[str, int, int]:
    try:
        st = path.stat()
    except OSError:
        return (str(path), -1, -1)
    return (str(path), st.st_mtime_ns, st.st_size)


class KnowledgeService:
    """The project's knowledge for the API: loads, reloads on change, caches, writes."""

    def __init__(
        self,
        home: Path,
        project_dir: Path,
        *,
        settings: Callable[[], Settings],
        database: Database,
    ) -> None:
        self.home = home
        self.project_dir = project_dir
        self._settings = settings
        self.database = database
        self.jobs = EmbeddingJobs(database, batch_size=EMBED_BATCH)
        self._lock = threading.RLock()
        self._snapshot: Snapshot | None = None
        self._version = 0
        self._registry: tuple[str, EmbeddingRegistry] | None = None
        self._scheduled: dict[str, tuple[str, tuple[str, int, int]]] = {}
        # Per embedding model: its vectors of the calibration's neutral texts.
        self._neutral: dict[str, list[list[float]]] = {}
        # (model, scan window) -> its vector: testing activation again on the same chat,
        # or a reroll, does not embed the window again.
        self._window_vectors: dict[tuple[str, str], list[float]] = {}
        self._pending: dict[str, asyncio.TimerHandle] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self.jobs.subscribe(self._on_embedding_progress)

    # -- loading -----------------------------------------------------------------------

    def global_folders(self) -> list[Path]:
        return global_folders(self.home, self._settings().knowledge.global_folders)

    def _fingerprint(self, knowledge: ProjectKnowledge | None) -> Fingerprint:
        files = [self.project_dir / PROJECT_FILE]
        if knowledge is not None:
            for ref in knowledge.project.knowledgeBaseReferences:
                if ref.type == "local" and ref.path:
                    files.append(self.project_dir / ref.path / KNOWLEDGE_FILE)
        for folder in self.global_folders():
            # The folder's own time changes when a KB folder is added or removed.
            files.append(folder)
            if folder.is_dir():
                files.extend(sorted(folder.glob(f"*/{KNOWLEDGE_FILE}")))
        return tuple(_stat(path) for path in files)

    def snapshot(self) -> Snapshot:
        """The current state, reloaded first when a watched file changed."""
        with self._lock:
            current = self._snapshot
            if current is not None and current.fingerprint == self._fingerprint(current.knowledge):
                return current
            return self.reload()

    def reload(self) -> Snapshot:
        with self._lock:
            knowledge = open_project_knowledge(self.project_dir, self.global_folders())
            self._version += 1
            self._snapshot = Snapshot(self._version, knowledge, self._fingerprint(knowledge))
            return self._snapshot

    def cached(self, key: Any, build: Callable[[], Any]) -> Any:
        """A value derived from the current snapshot, built once per catalog version."""
        snap = self.snapshot()
        with self._lock:
            if key not in snap.derived:
                snap.derived[key] = build()
            return snap.derived[key]

    def project_kbs(self, kb_ids: Sequence[str] | None) -> list[LoadedKB]:
        """The KBs named, in the order named (a switched-off KB too: naming it is asking
        for it); else every enabled KB the project references (or, in a project that
        references none, every enabled KB it can see)."""
        snap = self.snapshot()
        if kb_ids:
            return [snap.require(kb_id) for kb_id in dict.fromkeys(kb_ids)]
        bases = snap.knowledge.catalog.bases
        referenced = [b for b in bases if b.reference_ids] or list(bases)
        return [b for b in referenced if b.kb.enabled]

    def resolver(self) -> ReferenceResolver:
        """The reference resolver of the current catalog (indexed once per version)."""
        depth = self._settings().knowledge.reference_depth_limit
        snap = self.snapshot()
        resolver: ReferenceResolver = self.cached(
            ("resolver", depth), lambda: ReferenceResolver(snap.knowledge.catalog, max_depth=depth)
        )
        return resolver

    # -- tokens ------------------------------------------------------------------------

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` with the user LLM's tokenizer (what budgets are counted in)."""
        return counter_for(self._settings().user_llm).count(text)

    def tokenizer_name(self) -> str:
        """Which tokenizer :meth:`count_tokens` uses (probing the endpoint if need be)."""
        return counter_for(self._settings().user_llm).name

    def entry_tokens(self, kb: KnowledgeBase) -> dict[str, int]:
        return {entry.id: self.count_tokens(entry.text) for entry in kb.entries}

    def kb_tokens(self, kb: KnowledgeBase) -> dict[str, int]:
        """Per-entry tokens of a loaded KB, cached for this catalog version."""
        tokens: dict[str, int] = self.cached(("kb_tokens", kb.kb_id), lambda: self.entry_tokens(kb))
        return tokens

    # -- writes ------------------------------------------------------------------------

    def create(self, kb: KnowledgeBase, scope: Scope) -> LoadedKB:
        """Write a new KB: into the project (and its project.json) or the global folder."""
        with self._lock:
            if self.snapshot().knowledge.catalog.get(kb.kb_id) is not None:
                raise FileFormatError(
                    "request", [FieldProblem("kb_id", f"{kb.kb_id} is already used")]
                )
            if scope == "local":
                add_local_knowledge_base(self.project_dir, kb, name=kb.kb_displayName or None)
            else:
                add_global_knowledge_base(
                    self.home / GLOBAL_DIR, kb, name=kb.kb_displayName or None
                )
            return self.reload().require(kb.kb_id)

    def replace(self, kb: KnowledgeBase) -> LoadedKB:
        """Save ``kb`` over the file of the KB with the same ``kb_id`` (atomic)."""
        with self._lock:
            loaded = self.snapshot().require(kb.kb_id)
            # ``vector_index`` records what storyloom built; an editor's copy may be older.
            kb = kb.model_copy(update={"vector_index": loaded.kb.vector_index})
            save_knowledge_base(kb, loaded.folder)
            return self.reload().require(kb.kb_id)

    def attach_image(self, kb_id: str, entry_id: str, data: bytes, filename: str) -> LoadedKB:
        """Store ``data`` as entry ``entry_id``'s image in the KB's ``media/`` folder and
        save the KB naming it (both atomic)."""
        with self._lock:
            loaded = self.snapshot().require(kb_id)
            kb, stale = store_entry_image(loaded.kb, loaded.folder, entry_id, data, filename)
            return self._save_dropping(kb, loaded.folder, stale)

    def detach_image(self, kb_id: str, entry_id: str) -> LoadedKB:
        """Save the KB with entry ``entry_id`` naming no image, then delete the image file
        storyloom stored for it."""
        with self._lock:
            loaded = self.snapshot().require(kb_id)
            kb, stale = remove_entry_image(loaded.kb, loaded.folder, entry_id)
            return self._save_dropping(kb, loaded.folder, stale)

    def _save_dropping(self, kb: KnowledgeBase, folder: Path, stale: Path | None) -> LoadedKB:
        save_knowledge_base(kb, folder)
        if stale is not None:
            stale.unlink(missing_ok=True)
        return self.reload().require(kb.kb_id)

    def reference_global(self, kb_id: str) -> LoadedKB:
        """Add the global KB ``kb_id`` to project.json's ``knowledgeBaseReferences`` (seed
        000, 4.3); a KB the project references already is returned as it is."""
        with self._lock:
            loaded = self.snapshot().require(kb_id)
            if loaded.scope != "global":
                raise KnowledgeBaseIsLocal(kb_id)
            if loaded.reference_ids:
                return loaded
            reference_global_knowledge_base(self.project_dir, loaded.kb)
            return self.reload().require(kb_id)

    def update_base(
        self, kb_id: str, *, display_name: str | None = None, enabled: bool | None = None
    ) -> LoadedKB:
        """Rename a KB or switch it on or off (a KB that is off is in no chat)."""
        with self._lock:
            kb = self.snapshot().require(kb_id).kb.model_copy(deep=True)
            if display_name is not None:
                kb.kb_displayName = display_name
            if enabled is not None:
                kb.enabled = enabled
            return self.replace(kb)

    def duplicate(self, kb_id: str, display_name: str | None = None) -> LoadedKB:
        """A copy of the KB (entries and media) under a new kb_id, beside the original
        (in the project or the global folder), bound to nothing."""
        with self._lock:
            source = self.snapshot().require(kb_id)
            copy = source.kb.model_copy(deep=True)
            copy.kb_id = new_kb_id()
            copy.kb_displayName = display_name or f"{source.kb.display_name} (copy)"
            copy.created_at = None
            created = self.create(copy, source.scope)
            media = source.folder / MEDIA_DIR
            if media.is_dir() and any(media.iterdir()):
                shutil.copytree(media, created.folder / MEDIA_DIR, dirs_exist_ok=True)
            return created

    def delete_base(self, kb_id: str) -> None:
        """Remove the KB's folder, its references in project.json (and the global list)
        and its search index. Whoever else names it (chats, characters) is the caller's
        business: this layer does not see them."""
        with self._lock:
            loaded = self.snapshot().require(kb_id)
            # Moved aside first (one rename), so a failure below leaves no half a KB.
            trash = loaded.folder.with_name(f".{loaded.folder.name}.deleted-{uuid.uuid4().hex}")
            loaded.folder.rename(trash)
            try:
                project = load_project(self.project_dir)
                project.knowledgeBaseReferences = [
                    r for r in project.knowledgeBaseReferences if r.id not in loaded.reference_ids
                ]
                project.globalKnowledgeBases = [
                    k for k in project.globalKnowledgeBases if k != kb_id
                ]
                save_project(self.project_dir, project)
            except BaseException:
                trash.rename(loaded.folder)
                raise
            shutil.rmtree(trash, ignore_errors=True)
            self.reload()
        remove_kb(self.database, kb_id)

    # -- lore scopes ---------------------------------------------------------------------

    def global_lore(self) -> list[str]:
        """kb_ids of the project's global list (on in every chat)."""
        return list(self.snapshot().knowledge.project.globalKnowledgeBases)

    def set_lore_settings(
        self,
        *,
        global_kb_ids: Sequence[str] | None = None,
        insertion_strategy: str | None = None,
        budget_percent: int | None = None,
        budget_cap: int | None = None,
    ) -> ProjectFile:
        """Set the project's global list (each kb_id must name a KB), the insertion
        strategy and the lore budget (each None: kept); :class:`InvalidInput` names a
        kb_id that does not exist."""
        with self._lock:
            snap = self.snapshot()
            project = load_project(self.project_dir)
            if global_kb_ids is not None:
                unknown = [k for k in global_kb_ids if snap.knowledge.catalog.get(k) is None]
                if unknown:
                    problems = [
                        FieldProblem("global_knowledge_bases", f"no knowledge base has kb_id {k}")
                        for k in unknown
                    ]
                    raise InvalidInput.of("global lore", problems)
                project.globalKnowledgeBases = list(dict.fromkeys(global_kb_ids))
            changes: dict[str, Any] = {
                key: value
                for key, value in (
                    ("insertion_strategy", insertion_strategy),
                    ("context_percent", budget_percent),
                    ("budget_cap", budget_cap),
                )
                if value is not None
            }
            if changes:
                settings = project.activationSettings.model_dump()
                settings.update(changes)
                project.activationSettings = ActivationSettings.model_validate(settings)
            save_project(self.project_dir, project)
            return self.reload().knowledge.project

    # -- activation --------------------------------------------------------------------

    def activation_settings(self, overrides: Mapping[str, Any]) -> ActivationSettings:
        """The project's settings with ``overrides``; :class:`ValidationError` when invalid."""
        base = self.snapshot().knowledge.project.activationSettings.model_dump()
        return ActivationSettings.model_validate({**base, **overrides})

    def engine(
        self,
        kbs: Sequence[LoadedKB],
        settings: ActivationSettings,
        variables: Mapping[str, Any],
        kb_rank: Mapping[str, int] | None = None,
    ) -> ActivationEngine:
        """A compiled engine for these KBs, with references resolved in entry texts;
        ``kb_rank`` orders whole books before priority (a chat's lore scopes)."""
        resolver = self.resolver()
        kb_ids = tuple(b.kb_id for b in kbs)
        # Only the variables the entries' texts name go into the key: a chat changes its
        # variables every turn, and recompiling a large book for a variable none of its
        # entries uses would cost every turn a compile.
        names: frozenset[str] = self.cached(
            ("variable-names", kb_ids),
            lambda: frozenset(
                name
                for b in kbs
                for e in b.kb.entries
                for name in placeholders(injected_text(b.kb, e))
            ),
        )
        values = {
            name: value
            for name in names
            for found, value in [lookup_variable(variables, name)]
            if found
        }

        at_compile = dict(variables)

        def render(kb: KnowledgeBase, entry: CAIU) -> str:
            return resolver.resolve_entry(kb.kb_id, entry.id, variables=at_compile).text

        llm = self._settings().user_llm
        key = (
            "engine",
            # Entry token counts are cached in the engine: another tokenizer, another one.
            (llm.tokenizer, llm.tokenizer_model, llm.token_encoding, llm.model, llm.base_url),
            kb_ids,
            settings.model_dump_json(),
            json.dumps(values, sort_keys=True, default=str),
            resolver.max_depth,
            tuple(sorted((kb_rank or {}).items())),
        )
        engine: ActivationEngine = self.cached(
            key,
            lambda: ActivationEngine(
                [b.kb for b in kbs],
                settings,
                count_tokens=self.count_tokens,
                render=render,
                kb_rank=kb_rank,
            ),
        )
        return engine

    def max_context_tokens(self) -> int:
        return self._settings().user_llm.context_tokens

    async def activate(
        self,
        kbs: Sequence[LoadedKB],
        settings: ActivationSettings,
        messages: Sequence[ScanMessage],
        *,
        variables: Mapping[str, Any],
        max_context_tokens: int | None,
        seed: int | None,
        character: str | CharacterContext | None,
        engine: ActivationEngine | None = None,
        chat_length: int | None = None,
        timed_state: TimedEffectsState | None = None,
        generation_type: str = "normal",
        kb_rank: Mapping[str, int] | None = None,
        template_texts: Mapping[tuple[str, str], str] | None = None,
        template_excluded: Mapping[tuple[str, str], str] | None = None,
    ) -> tuple[ActivationEngine, ActivationResult, list[str]]:
        """Run one scan; semantic entries get scores from the chat's newest messages.

        ``engine``: one compiled by the caller for ``kbs`` (a workflow node scanning a
        subset of entries); None compiles, or reuses, the engine of ``kbs`` as stored.
        A chat passes its length, the timed effects stored with the turn and the whole
        character (names, filters, texts scanned with the chat), and what its EJS
        templates made of the entries (``template_texts``, ``template_excluded``).
        """
        problems: list[str] = []
        if engine is None:
            engine = await asyncio.to_thread(self.engine, kbs, settings, variables, kb_rank)
        scores = await self._semantic_scores(kbs, settings, messages, problems)
        request = ActivationRequest(
            messages=list(messages),
            variables=dict(variables),
            character=CharacterContext(name=character) if isinstance(character, str) else character,
            max_context_tokens=max_context_tokens or self.max_context_tokens(),
            seed=seed if seed is not None else 0,
            semantic_scores=scores,
            chat_length=chat_length,
            timed_state=timed_state or TimedEffectsState(),
            generation_type=generation_type,
            template_texts=dict(template_texts or {}),
            template_excluded=dict(template_excluded or {}),
        )
        result = await asyncio.to_thread(engine.activate, request)
        return engine, result, problems

    async def _semantic_scores(
        self,
        kbs: Sequence[LoadedKB],
        settings: ActivationSettings,
        messages: Sequence[ScanMessage],
        problems: list[str],
    ) -> dict[tuple[str, str], float]:
        # Only books with vector activation on are compared (as SillyTavern's Vector
        # Storage, off by default); only the scan window is embedded, never the chat.
        semantic = {
            b.kb_id: [
                (b.kb_id, e.id) for e in b.kb.entries if e.activation_criteria.use_semantic_search
            ]
            for b in kbs
            if b.kb.vector_activation
        }
        wanted = [b for b in kbs if semantic.get(b.kb_id)]
        if not wanted:
            return {}
        query = scan_window_text(messages, settings)
        if not query:
            return {}
        scores: dict[tuple[str, str], float] = {}
        for model_id, (provider, group) in self._by_model(wanted, problems).items():
            if provider is None:
                continue
            try:
                vector = self._window_vectors.get((model_id, query))
                if vector is None:
                    vector = await provider.embed_query(query)
                    if len(self._window_vectors) >= WINDOW_VECTORS_KEPT:
                        self._window_vectors.clear()
                    self._window_vectors[(model_id, query)] = vector
                neutral = self._neutral.get(model_id)
                if neutral is None:
                    neutral = [await provider.embed_query(text) for text in NEUTRAL_TEXTS]
                    self._neutral[model_id] = neutral
            except Exception as exc:  # a dead endpoint must not fail the whole test
                problems.append(f"semantic activation skipped: {exc}")
                continue
            keys = [key for b in group for key in semantic[b.kb_id]]
            scores.update(
                await asyncio.to_thread(
                    semantic_scores, self.database, vector, keys, model_id, neutral
                )
            )
        return scores

    # -- embeddings and search ---------------------------------------------------------

    def registry(self) -> EmbeddingRegistry:
        """Providers for the configured embedding endpoint (kept while it is unchanged)."""
        endpoint = self._settings().embedding
        key = endpoint.model_dump_json()
        with self._lock:
            if self._registry is None or self._registry[0] != key:
                self._registry = (key, EmbeddingRegistry.from_settings(endpoint))
            return self._registry[1]

    def resolve_model(self, loaded: LoadedKB) -> ResolvedModel:
        """The KB's embedding model; :class:`ConfigurationError` when none is usable."""
        project = self.snapshot().knowledge.project
        return resolve_embedding_model(
            loaded.kb, project.embeddingModelId, self._settings().embedding, self.registry()
        )

    def embedding_provider(
        self, model_id: str | None = None, kbs: Sequence[LoadedKB] = ()
    ) -> EmbeddingProvider:
        """The provider of ``model_id``; else of the one model ``kbs`` are embedded with;
        else the project's ``embeddingModelId``, then the global setting.
        :class:`ConfigurationError` when that model is not available or ``kbs`` disagree."""
        registry = self.registry()
        available = ", ".join(registry.model_ids()) or "none"
        if not model_id and kbs:
            models = {self.resolve_model(b).model_id: b for b in kbs}
            if len(models) > 1:
                used = ", ".join(f"{b.kb.display_name}: {m}" for m, b in models.items())
                raise ConfigurationError(
                    f"the knowledge bases use different embedding models ({used}); "
                    "name one model or choose knowledge bases of one model"
                )
            model_id = next(iter(models))
        where = "the node"
        if not model_id:
            project = self.snapshot().knowledge.project.embeddingModelId
            model_id = (project or "").strip() or None
            where = "the project's `embeddingModelId` (project.json)"
        if not model_id:
            model_id = self._settings().embedding.model_id
            where = "the global `embedding` setting (settings.json)"
        if not model_id:
            raise ConfigurationError(
                "no embedding model is configured: set one under Settings > Embedding"
            )
        provider = registry.get(model_id)
        if provider is None:
            raise ConfigurationError(
                f"embedding model {model_id!r}, chosen by {where}, is not available here; "
                f"available: {available}"
            )
        return provider

    async def embed_semantic(self, kbs: Sequence[LoadedKB]) -> None:
        """Before a scan: embed what the semantic entries of ``kbs`` lack. Without a
        usable model nothing happens; those entries are then skipped and keywords still
        work."""
        kbs = [
            b
            for b in kbs
            if b.kb.vector_activation
            and any(e.activation_criteria.use_semantic_search for e in b.kb.entries)
        ]
        if not kbs:
            return
        with contextlib.suppress(StoryloomError):
            await self.embed_now(kbs)

    async def embed_now(
        self, kbs: Sequence[LoadedKB]
    ) -> list[tuple[ResolvedModel, list[LoadedKB]]]:
        """Embed what ``kbs`` lack and wait for it (a workflow's search must not depend
        on how far background embedding has come); the KBs grouped by model, in order.

        Call on the event loop. :class:`ConfigurationError` when a KB has no usable model,
        :class:`StoryloomError` when its embedding failed.
        """
        groups: dict[str, tuple[ResolvedModel, list[LoadedKB]]] = {}
        jobs = []
        for loaded in kbs:
            resolved = self.resolve_model(loaded)
            # The job syncs the search index before it embeds.
            self._scheduled[loaded.kb_id] = (
                resolved.model_id,
                _stat(loaded.folder / KNOWLEDGE_FILE),
            )
            jobs.append((loaded, self.jobs.schedule(loaded.kb, resolved.provider)))
            groups.setdefault(resolved.model_id, (resolved, []))[1].append(loaded)
        for loaded, job in jobs:
            progress = await job.wait()
            if progress.state != "done":
                reason = progress.error or progress.state
                raise StoryloomError(
                    f"embedding knowledge base {loaded.kb.display_name!r} with "
                    f"{progress.model_id} did not finish: {reason}"
                )
        return list(groups.values())

    def _by_model(
        self, kbs: Sequence[LoadedKB], problems: list[str]
    ) -> dict[str, tuple[Any, list[LoadedKB]]]:
        """KBs grouped by the model they are embedded with; a KB without a usable model
        goes in group "" (no provider) and its problem is reported."""
        groups: dict[str, tuple[Any, list[LoadedKB]]] = {}
        for loaded in kbs:
            try:
                resolved = self.resolve_model(loaded)
            except ConfigurationError as exc:
                problems.append(str(exc))
                groups.setdefault("", (None, []))[1].append(loaded)
                continue
            groups.setdefault(resolved.model_id, (resolved.provider, []))[1].append(loaded)
        return groups

    def embed_later(self, kbs: Sequence[LoadedKB], delay: float = EMBED_AFTER_WRITE_S) -> None:
        """Schedule embedding after ``delay`` seconds; a later call for a KB replaces an
        earlier one. Call on the event loop."""
        loop = asyncio.get_running_loop()
        for loaded in kbs:
            pending = self._pending.pop(loaded.kb_id, None)
            if pending is not None:
                pending.cancel()
            self._pending[loaded.kb_id] = loop.call_later(
                delay, self._start_embedding, loaded.kb_id
            )

    def _start_embedding(self, kb_id: str) -> None:
        self._pending.pop(kb_id, None)
        task = asyncio.get_running_loop().create_task(self._embed_current(kb_id))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _embed_current(self, kb_id: str) -> None:
        # The KB as it is now (it may have changed during the delay), read off the loop.
        snap = await asyncio.to_thread(self.snapshot)
        loaded = snap.knowledge.catalog.get(kb_id)
        if loaded is not None:
            self.schedule_embedding([loaded])

    def schedule_embedding(self, kbs: Sequence[LoadedKB]) -> None:
        """Embed what these KBs lack, in the background; call on the event loop."""
        for loaded in kbs:
            try:
                resolved = self.resolve_model(loaded)
            except ConfigurationError:
                continue
            stamp = (resolved.model_id, _stat(loaded.folder / KNOWLEDGE_FILE))
            job = self.jobs.job(loaded.kb_id, resolved.model_id)
            current = job is not None and job.progress.state in ("queued", "running", "done")
            if current and self._scheduled.get(loaded.kb_id) == stamp:
                continue
            self._scheduled[loaded.kb_id] = stamp
            self.jobs.schedule(loaded.kb, resolved.provider)

    def _on_embedding_progress(self, progress: EmbeddingProgress) -> None:
        # A finished job records its model, dimension and index type in knowledge.json.
        if progress.state != "done":
            return
        task = asyncio.get_running_loop().create_task(
            self._record_vectors_off_loop(progress.kb_id, progress.model_id)
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _record_vectors_off_loop(self, kb_id: str, model_id: str) -> None:
        try:
            await asyncio.to_thread(self.record_vectors, kb_id, model_id)
        except StoryloomError as exc:
            # The vectors are stored and usable; only the record in the file is missing.
            logger.warning("recording the vector index of %s failed: %s", kb_id, exc)

    def record_vectors(self, kb_id: str, model_id: str) -> bool:
        """Write the KB's ``vector_index`` for the vectors of ``model_id`` stored now;
        True when knowledge.json changed. The KB is read again under the write lock, so a
        save made while the job ran is kept."""
        with self._lock:
            loaded = self.snapshot().knowledge.catalog.get(kb_id)
            if loaded is None:
                return False
            written = record_vector_index(
                self.database.connection(), loaded.kb, loaded.folder, model_id
            )
            if not written:
                return False
            # The file changed but not its entries: no new embedding job for this write.
            if self._scheduled.get(kb_id, ("",))[0] == model_id:
                self._scheduled[kb_id] = (model_id, _stat(loaded.folder / KNOWLEDGE_FILE))
            self.reload()
            return True

    def embedding_state(self, loaded: LoadedKB) -> EmbeddingState:
        """Where the KB's embedding stands, for its current model."""
        total = len(loaded.kb.entries)
        try:
            resolved = self.resolve_model(loaded)
        except ConfigurationError as exc:
            return EmbeddingState(loaded.kb_id, "error", 0, total, None, str(exc))
        job = self.jobs.job(loaded.kb_id, resolved.model_id)
        if job is None:
            return EmbeddingState(loaded.kb_id, "idle", 0, total, resolved.model_id)
        p = job.progress
        state = {"failed": "error", "cancelled": "idle"}.get(p.state, p.state)
        message = p.error or ""
        return EmbeddingState(loaded.kb_id, state, p.done, p.total, p.model_id, message)

    async def search(
        self, query: str, kbs: Sequence[LoadedKB], top_k: int
    ) -> tuple[list[SearchHit], list[str]]:
        """Hybrid hits over ``kbs``, best first; KBs of different models are searched apart
        and merged by fused score. Keyword search works before embedding has finished."""
        problems: list[str] = []
        for loaded in kbs:
            await asyncio.to_thread(sync_kb, self.database, loaded.kb)
        self.schedule_embedding(kbs)
        hits: list[SearchHit] = []
        for _, (provider, group) in self._by_model(kbs, problems).items():
            try:
                found = await search(
                    self.database,
                    query,
                    kb_ids=[b.kb_id for b in group],
                    model=provider,
                    top_k=top_k,
                )
            except Exception as exc:  # an unreachable endpoint: fall back to keywords
                problems.append(f"search by meaning failed: {exc}")
                found = await search(
                    self.database, query, kb_ids=[b.kb_id for b in group], model=None, top_k=top_k
                )
            hits.extend(found)
        hits.sort(key=lambda h: -h.score)
        return hits[:top_k], problems

    async def aclose(self) -> None:
        """Stop background embedding before the database closes."""
        for pending in self._pending.values():
            pending.cancel()
        self._pending.clear()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.jobs.aclose()

    # -- import / export ---------------------------------------------------------------

    def import_file(
        self,
        upload: Path,
        filename: str,
        scope: Scope,
        *,
        chat_importer: ChatImporter | None = None,
        on_duplicate: OnDuplicate = "keep_existing",
        card_home: CardHome | None = None,
        embedding_model: str | None = None,
    ) -> ImportOutcome:
        """Store an uploaded SillyTavern file or ``.ctkbz`` package as new KBs; a book
        whose entries a KB here already has is stored again only with ``keep_both``.

        ``upload`` sits alone in a temporary folder; it takes the uploaded file's name
        there, since the importers report problems by file name and read the suffix.
        A SillyTavern chat becomes a conversation through ``chat_importer``, which the
        caller builds: the chat engine sits a layer above this one. ``card_home`` decides
        where a card goes when it may be a character here already (see
        :func:`import_knowledge_file`), ``embedding_model`` which model embeds a package.
        """
        named = upload.with_name(filename if filename not in {"", ".", ".."} else "upload")
        upload.rename(named)
        is_package = is_kb_package(named)
        with self._lock:
            summary = import_knowledge_file(
                named,
                project_dir=self.project_dir if scope == "local" else None,
                global_folder=self.home / GLOBAL_DIR,
                database=self.database,
                available_model_ids=self.registry().model_ids() if is_package else (),
                chat_importer=chat_importer,
                existing=self.snapshot().knowledge.catalog.knowledge_bases(),
                on_duplicate=on_duplicate,
                card_home=card_home,
                embedding_model=embedding_model,
            )
            snap = self.reload()
        return ImportOutcome(
            summary.kind,
            [snap.require(created.kb_id) for created in summary.created],
            character=summary.character,
            character_file=Path(summary.character_file) if summary.character_file else None,
            character_updated=summary.character_updated,
            conversation_id=summary.conversation_id,
            warnings=summary.warnings,
            duplicates=summary.duplicates,
        )

    def export_package_bytes(self, loaded: LoadedKB) -> tuple[bytes, list[str]]:
        """The KB as a ``.ctkbz`` zip, with its current vectors when it has a usable model."""
        model_id: str | None = None
        try:
            model_id = self.resolve_model(loaded).model_id
        except ConfigurationError:
            model_id = None
        with tempfile.TemporaryDirectory(prefix="storyloom-export-") as tmp:
            dest = Path(tmp) / f"kb{PACKAGE_SUFFIX}"
            report = export_package(
                loaded,
                dest,
                include_vectors=model_id is not None,
                db=self.database,
                model_id=model_id,
            )
            return dest.read_bytes(), list(report.warnings)


def _placeholder_names(kbs: Sequence[LoadedKB]) -> frozenset[str]:
    """The ``{{variables}}`` the entries' own texts name."""
    return frozenset(
        name for b in kbs for e in b.kb.entries for name in placeholders(injected_text(b.kb, e))
    )
