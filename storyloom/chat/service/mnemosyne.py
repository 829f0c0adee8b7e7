"""Mnemosyne (seed 001 §3): the context snapshot a chat turn reads.

For a pointer it gathers the history chain (root → pointer), the state at the pointer
(variables, lore timers, plot), the lore the chain activates, the memories retrieved for
it, the regex scripts the user allowed and the presets, into one immutable
:class:`~storyloom.chat.store.snapshot.ContextSnapshot`. Nothing in it depends on the clock or
on chance: the seed is a hash of the pointer and "now" is the pointer message's time, so
the same stored data gives the same snapshot (and the same fingerprint), which is what
makes a turn reproducible and a swipe comparable.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from storyloom.chat.personalab.director import initial_plot
from storyloom.chat.personalab.personas import PersonaLibrary
from storyloom.chat.prompt.ejs_compiler import has_template
from storyloom.chat.prompt.regex_scripts import RegexScript, card_regex_scripts
from storyloom.chat.service.lore_scope import LoreScope, chat_lore_scope
from storyloom.chat.service.turn_templates import (
    HistoryTemplate,
    PresetTemplate,
    TurnTemplates,
    evaluate_turn_templates,
)
from storyloom.chat.store.conversation import CharacterSnapshot, Conversation, card_macros
from storyloom.chat.store.message import Message
from storyloom.chat.store.message_marks import is_hidden
from storyloom.chat.store.snapshot import (
    ContextSnapshot,
    HistoryMessage,
    LoreCut,
    LoreHit,
    LoreRecord,
    RagHit,
)
from storyloom.chat.store.state import ChatState
from storyloom.core.errors import StoryloomError
from storyloom.core.settings import DEFAULT_CONTEXT_WINDOW
from storyloom.knowledge.activation import (
    ActivationResult,
    CharacterContext,
    Reason,
    ScanMessage,
)
from storyloom.knowledge.activation_result import DroppedEntries
from storyloom.knowledge.caiu import Placement
from storyloom.llm.tokens import TOKENS_PER_MESSAGE
from storyloom.workflow.tool_results import format_tool_steps

if TYPE_CHECKING:
    from storyloom.chat.personalab.library import PresetLibrary
    from storyloom.chat.personalab.summaries import SummaryIndex
    from storyloom.chat.store.turn_tree import TurnTree
    from storyloom.project.knowledge_service import KnowledgeService

RAG_TOP_K = 4
HISTORY_TEMPLATES = 64
"""Chat messages of the prompt rendered as templates, the newest first (older ones that
hold one go as written): each costs a state reconstruction."""
"""Memories retrieved per turn."""
FIRST_TAIL = 128
"""Messages read first when looking for the history window; read four times more until
the window is full or the chain ends."""


def history_window(
    tree: TurnTree, pointer: str | None, tokens: int, count: Callable[[str], int]
) -> list[Message]:
    """The newest messages of the chain root → ``pointer`` that a context window of
    ``tokens`` can hold, plus the first one it cannot (so the token budget makes the
    exact cut and reports it). SillyTavern likewise never looks further back than the
    context: a 10,000-message chat costs a turn no more than a 100-message one."""
    limit = FIRST_TAIL
    while True:
        tail = tree.path_tail(pointer, limit)
        used = 0
        for index in range(len(tail) - 1, -1, -1):
            used += count(tail[index].content) + TOKENS_PER_MESSAGE
            if used > tokens:
                return tail[index:]
        if len(tail) < limit:
            return tail
        limit *= 4


def snapshot_seed(conversation_id: str, pointer: str | None, turn: str | None = None) -> int:
    """A stable 31-bit seed for the reply ``turn`` written after ``pointer``
    ({{random}}, {{roll}}, lore probability): a swipe is another reply, so it rolls
    again, while the same reply rebuilt from the same data gets the same seed."""
    text = f"{conversation_id}:{pointer or ''}" + (f":{turn}" if turn else "")
    digest = hashlib.sha256(text.encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat()


def idle_since(path: Sequence[Message]) -> str:
    """When the user sent the message before the newest one ({{idle_duration}}'s start,
    as SillyTavern picks it: hidden messages skipped, the newest one passed over)."""
    shown = [m for m in path if m.role != "system" and not is_hidden(m.extra)]
    for message in reversed(shown[:-1]):
        if message.role == "user":
            return _iso(message.created_at)
    return ""


def history_of(path: Sequence[Message]) -> list[HistoryMessage]:
    """The chain as the prompt sees it: a failed reply that left no text is not part of
    it, nor is a message hidden from the prompt (SillyTavern's ghost)."""
    return [
        HistoryMessage(
            id=m.id,
            role=m.role,
            name=m.name,
            content=m.content,
            number=m.depth,
            tool_results=_tool_results(m),
        )
        for m in path
        if not (m.status == "error" and not m.content) and not is_hidden(m.extra)
    ]


def _tool_results(message: Message) -> str:
    """An agent turn's tool results the later prompts see (stealth steps left out)."""
    steps = message.extra.get("tool_steps")
    if message.role != "assistant" or not isinstance(steps, list) or not steps:
        return ""
    return format_tool_steps(steps)


def agent_profile_of(conversation: Conversation, confirmed: Mapping[str, str]) -> str | None:
    """The agent profile a reply is written with: the conversation's setting when set
    ('' turns the character's off), else the one the user confirmed for the character
    (``confirmed``: character id → profile, '' for a "no"). A card's own
    ``extensions.storyloom.agent_profile`` is only a suggestion the user answers on the
    character page (personalab/agent_consent.py); by itself it runs nothing."""
    chosen = conversation.settings.agent_profile
    if chosen is not None:
        return chosen or None
    character_id = conversation.character.source_preset
    return (confirmed.get(character_id) or None) if character_id else None


def character_context(
    conversation: Conversation, character: CharacterSnapshot | None = None
) -> CharacterContext:
    """The card (``character``, else the conversation's) and persona as the lore scan sees
    them (filters, ``also_scan`` texts)."""
    character = character or conversation.character
    card = character.card
    text = character.text
    depth = card.get("extensions", {}).get("depth_prompt") if isinstance(card, dict) else None
    tags = card.get("tags")
    return CharacterContext(
        name=text("name"),
        description=text("description"),
        personality=text("personality"),
        scenario=text("scenario"),
        depth_prompt=str(depth.get("prompt") or "") if isinstance(depth, dict) else "",
        creator_notes=text("creator_notes"),
        persona_description=conversation.settings.persona,
        tags=[t for t in tags if isinstance(t, str)] if isinstance(tags, list) else [],
    )


def _reasons(reasons: Sequence[Reason]) -> list[dict[str, Any]]:
    return [r.as_record() for r in reasons]


def lore_of(
    result: ActivationResult,
    scope: LoreScope | None = None,
    needed: Mapping[str, Mapping[str, int]] | None = None,
) -> tuple[list[LoreHit], list[LoreRecord], list[list[Any]]]:
    """The activated entries as hits (in insertion order), their report records with
    the engine's reasons, and every dropped entry as a compact row
    (:data:`~storyloom.chat.store.snapshot.DROPPED_LORE_COLUMNS`) with only the reasons
    that cut it. ``scope`` names each entry's KB and the scope that brought it in;
    ``needed`` (per kb_id, per entry_id) the tokens a dropped entry would have taken.

    A big book over its budget cuts thousands of entries in every turn; quoting where
    each one's keys matched, or making a record object for each, would cost the turn
    more than the scan (issue 13 §1b). The inspector shows a cut entry by what it needed
    and what cut it, so that is all a row keeps."""
    hits: list[LoreHit] = []
    report: list[LoreRecord] = []
    sources: dict[str, tuple[str, str]] = {}

    def source(kb_id: str) -> tuple[str, str]:
        found = sources.get(kb_id)
        if found is None:
            scoped = scope.get(kb_id) if scope is not None else None
            found = sources[kb_id] = ("", "") if scoped is None else (scoped.name, scoped.scope)
        return found

    for active in result.activated:
        at_depth = active.placement is Placement.AT_DEPTH
        kb_name, kb_scope = source(active.kb_id)
        hits.append(
            LoreHit(
                kb_id=active.kb_id,
                kb_name=kb_name,
                scope=kb_scope,
                entry_id=active.entry_id,
                title=active.display_name or active.entry_id,
                content=active.text,
                placement=active.placement.value,
                depth=active.depth if at_depth else None,
                role=active.role if at_depth else None,
                priority=active.priority,
                tokens=active.tokens,
                outlet_name=active.outlet_name,
            )
        )
        report.append(
            LoreRecord(
                kb_id=active.kb_id,
                kb_name=kb_name,
                scope=kb_scope,
                entry_id=active.entry_id,
                title=active.display_name or active.entry_id,
                activated=True,
                placement=active.placement.value,
                tokens=active.tokens,
                reasons=_reasons(active.reasons),
            )
        )
    # Thousands of cut entries share a few books and (once the budget ran out) one
    # reason: each is turned into words once.
    said: dict[int, list[dict[str, Any]]] = {}
    needed = needed or {}
    dropped: list[list[Any]] = []
    for kb_id, entry_id, name, cut in (
        result.dropped.briefs()
        if isinstance(result.dropped, DroppedEntries)
        else [(d.kb_id, d.entry_id, d.display_name, d.cut) for d in result.dropped]
    ):
        reasons = said.get(id(cut))
        if reasons is None:
            reasons = said[id(cut)] = _reasons(cut)
        kb_name, kb_scope = source(kb_id)
        tokens = needed.get(kb_id, {}).get(entry_id, 0)
        dropped.append([kb_id, kb_name, kb_scope, entry_id, name or entry_id, tokens, reasons])
    return hits, report, dropped


def turn_lore_scope(
    knowledge: KnowledgeService,
    conversation: Conversation,
    character: CharacterSnapshot | None = None,
    presets: PresetLibrary | None = None,
) -> LoreScope:
    """The knowledge bases a turn of ``conversation`` scans, spoken by ``character``
    (None: the conversation's), each with its scope (:mod:`lore_scope`)."""
    snap = knowledge.snapshot().knowledge
    return chat_lore_scope(
        snap.catalog,
        snap.project.globalKnowledgeBases,
        conversation.settings,
        character or conversation.character,
        presets=presets,
        personas=PersonaLibrary(knowledge.project_dir),
    )


async def scan_lore(
    knowledge: KnowledgeService,
    conversation: Conversation,
    history: Sequence[HistoryMessage],
    state: ChatState,
    *,
    seed: int,
    generation: str,
    chat_length: int | None = None,
    character: CharacterSnapshot | None = None,
    presets: PresetLibrary | None = None,
    global_variables: Mapping[str, Any] | None = None,
    history_templates: Sequence[HistoryTemplate] = (),
    context_tokens: int | None = None,
    preset_templates: Sequence[PresetTemplate] = (),
) -> tuple[ActivationResult | None, list[str], LoreScope, TurnTemplates]:
    """One lore scan over the knowledge bases in the chat's scopes (global, the speaking
    character's, the persona's, the chat's), from the timers stored with the state at the
    pointer; also the scope, which names each KB, and the turn's EJS templates (lore, card
    fields and ``history_templates``, rendered in one sandboxed call before the scan,
    which reads the messages as rendered: :mod:`turn_templates`).

    The lore budget is a share of ``context_tokens``, the context window of the model that
    answers as its server reports it (None: the user model's setting).

    The result is None when no KB is in scope. The scan is the one
    ``KnowledgeService.activate`` runs, with the chat's timed state and length added and
    the books ordered by the project's insertion strategy.
    """
    speaker = character or conversation.character
    scope = await asyncio.to_thread(turn_lore_scope, knowledge, conversation, speaker, presets)
    kbs = scope.kbs()
    macros = card_macros(speaker, conversation.settings)
    templates = await evaluate_turn_templates(
        kbs,
        speaker,
        state.variables,
        global_variables or {},
        {"user": macros["user"], "char": macros["char"]},
        seed,
        history_templates,
        preset_templates,
    )
    if not kbs:
        return None, list(scope.problems), scope, templates
    settings = await asyncio.to_thread(knowledge.activation_settings, {})
    variables = dict(templates.variables)
    messages = [
        ScanMessage(
            m.name or m.role,
            templates.history.get(m.id, m.content),
            is_user=m.role == "user",
            number=m.number,
        )
        for m in history
    ]
    if messages:
        await knowledge.embed_semantic(kbs)
    _engine, result, problems = await knowledge.activate(
        kbs,
        settings,
        messages,
        variables=variables,
        max_context_tokens=context_tokens,
        seed=seed,
        character=character_context(conversation, speaker),
        chat_length=len(history) if chat_length is None else chat_length,
        timed_state=state.timed_effects,
        generation_type=generation,
        kb_rank=scope.ranks(settings.insertion_strategy),
        template_texts=templates.lore_texts,
        template_excluded=templates.excluded,
    )
    return result, [*scope.problems, *problems], scope, templates


async def retrieve_memories(
    summaries: SummaryIndex, conversation: Conversation, history: Sequence[HistoryMessage]
) -> list[RagHit]:
    """Event summaries related to the newest user message, within the conversation's
    ``rag_scope``."""
    query = next((m.content for m in reversed(history) if m.role == "user" and m.content), "")
    if not query.strip():
        return []
    scope = conversation.settings.rag_scope
    ids = [conversation.id]
    if scope.mode == "related":
        ids += [c for c in scope.related_conversations if c not in ids]
    return list(await summaries.search(query, ids, RAG_TOP_K))


def summary_texts(
    presets: PresetLibrary, conversation: Conversation, path: Sequence[Message] = ()
) -> list[str]:
    """The plot points of the summary presets the conversation started from, except those
    its history already opens with (a continued conversation's seed messages hold them,
    and the prompt must not carry them twice); a preset that is gone or broken is left
    out."""
    seeded = {m.extra.get("summary_id") for m in path if m.extra.get("type") == "summary"}
    texts: list[str] = []
    for summary_id in conversation.settings.summaries:
        if summary_id in seeded:
            continue
        try:
            preset = presets.summary(summary_id)
        except StoryloomError:
            continue
        texts += [p.content for p in preset.summaries]
    return texts


async def build_snapshot(
    tree: TurnTree,
    conversation: Conversation,
    pointer: str | None,
    *,
    knowledge: KnowledgeService | None,
    summaries: SummaryIndex | None = None,
    presets: PresetLibrary | None = None,
    generation: str = "normal",
    turn: str | None = None,
    turn_key: str = "",
    history_tokens: int = DEFAULT_CONTEXT_WINDOW,
    count_tokens: Callable[[str], int] | None = None,
    confirmed_agents: Mapping[str, str] | None = None,
    global_regex_scripts: Sequence[RegexScript] = (),
    regex_problems: Sequence[str] = (),
    global_variables: Mapping[str, Any] | None = None,
    preset_templates: Sequence[PresetTemplate] = (),
) -> ContextSnapshot:
    """The snapshot of the turn that follows ``pointer`` (None: an empty chat).

    ``knowledge`` None (no project) gives no lore; ``summaries`` None no memories;
    ``presets`` None no summary texts. ``turn``: the reply being written (its id
    seeds the turn's rolls, so a swipe rolls again); ``turn_key`` seeds its tool calls
    (``chat:RollDice``), which a swipe replays. The history holds the chain back as far as
    ``history_tokens`` (the model's context window) reaches; ``count_tokens`` None
    reads the whole chain. ``confirmed_agents``: the agent profile the user confirmed
    per character (None: none confirmed, so a card's suggestion runs no agent).
    ``global_regex_scripts``: the user's enabled global regex scripts (they run before the
    card's); ``regex_problems``: why some could not be read. ``global_variables``: the
    user's global variables (what templates read; their writes are the skein's).
    ``preset_templates``: the preset's prompts holding an EJS template (the pipeline's),
    rendered in the turn's batch (:attr:`ContextSnapshot.preset_templates`).
    """
    if count_tokens is None:
        path = tree.path(pointer)
    else:
        path = history_window(tree, pointer, history_tokens, count_tokens)
    chain_length = path[-1].depth + 1 if path else 0
    history = history_of(path)
    state = tree.state_at(pointer)
    background = conversation.background
    if state.plot is None and conversation.settings.director_enabled:
        plot = initial_plot(background)
        if plot is not None:
            state = state.model_copy(update={"plot": plot})
    seed = snapshot_seed(conversation.id, pointer, turn)
    lore: list[LoreHit] = []
    report: list[LoreRecord] = []
    dropped: list[list[Any]] = []
    cut: LoreCut | None = None
    timed: dict[str, Any] = state.timed_effects.model_dump(mode="json")
    globals_before = dict(global_variables or {})
    # The newest messages holding a template, each with the variables at it.
    said = [m for m in history if has_template(m.content)][-HISTORY_TEMPLATES:]
    history_templates = [
        HistoryTemplate(m.id, m.role, m.content, tree.state_at(m.id).variables) for m in said
    ]
    templates: TurnTemplates
    if knowledge is not None:
        result, _, scope, templates = await scan_lore(
            knowledge,
            conversation,
            history,
            state,
            seed=seed,
            generation=generation,
            chat_length=chain_length,
            presets=presets,
            global_variables=globals_before,
            history_templates=history_templates,
            preset_templates=preset_templates,
            # the budget is a share of the window the history fills: the server's
            context_tokens=history_tokens if count_tokens is not None else None,
        )
        if result is not None:
            needed = None
            if result.dropped:
                # Cached per catalog version: only the first turn after an edit counts.
                needed = await asyncio.to_thread(
                    lambda: {s.kb_id: knowledge.kb_tokens(s.loaded.kb) for s in scope.active}
                )
                if templates.lore_texts:
                    # A template entry needed what it rendered, not its code.
                    needed = await asyncio.to_thread(
                        rendered_needs, needed, templates, knowledge.count_tokens
                    )
            lore, report, dropped = lore_of(result, scope, needed)
            if result.budget_cut:
                cut = LoreCut(
                    count=result.budget_cut,
                    constant=result.budget_cut_constant,
                    budget=result.budget,
                )
            timed = result.timed_state.model_dump(mode="json")
    else:
        macros = card_macros(conversation.character, conversation.settings)
        names = {"user": macros["user"], "char": macros["char"]}
        templates = await evaluate_turn_templates(
            [],
            conversation.character,
            state.variables,
            globals_before,
            names,
            seed,
            history_templates,
            preset_templates,
        )
    # What the templates wrote (the card fields', the activated entries') is the turn's.
    lore, report = mark_template_lore(lore, report, templates)
    variables, globals_after = templates.variables_after([(h.kb_id, h.entry_id) for h in lore])
    if variables != state.variables:
        state = state.model_copy(update={"variables": variables})
    templated_globals = globals_after if globals_after != globals_before else None
    if templates.history:
        history = [
            h.model_copy(update={"content": templates.history[h.id]})
            if h.id in templates.history
            else h
            for h in history
        ]
    if knowledge is not None:
        history = await asyncio.to_thread(
            resolve_history_references, knowledge, history, variables, lore
        )
    character = conversation.character
    if templates.fields:
        character = character.model_copy(update={"card": {**character.card, **templates.fields}})
    rag = await retrieve_memories(summaries, conversation, history) if summaries else []
    scripts: list[dict[str, Any]] = []
    if conversation.settings.allow_regex_scripts:
        scripts = [
            s.model_dump(mode="json") for s in card_regex_scripts(conversation.character.card)
        ]
    now = path[-1].created_at if path else conversation.created_at
    return ContextSnapshot(
        conversation_id=conversation.id,
        pointer=pointer,
        history=history,
        history_omitted=chain_length - len(path),
        state=state,
        character=character,
        background=background,
        settings=conversation.settings,
        lore=lore,
        lore_report=report,
        lore_dropped=dropped,
        lore_cut=cut,
        lore_timed_effects=timed,
        rag=rag,
        summaries=summary_texts(presets, conversation, path) if presets is not None else [],
        global_regex_scripts=[s.model_dump(mode="json") for s in global_regex_scripts],
        regex_scripts=scripts,
        regex_problems=list(regex_problems),
        generation=generation,
        seed=seed,
        chat_seed=snapshot_seed(conversation.id, None),
        now=_iso(now),
        idle_since=idle_since(path),
        agent_profile=agent_profile_of(conversation, confirmed_agents or {}),
        turn_key=turn_key,
        global_variables=globals_before,
        template_global_variables=templated_globals,
        template_problems=templates.problems,
        preset_templates=templates.preset,
    )


def resolve_history_references(
    knowledge: KnowledgeService,
    history: Sequence[HistoryMessage],
    variables: Mapping[str, Any],
    lore: Sequence[LoreHit],
) -> list[HistoryMessage]:
    """``history`` with the ``{{{...}}}`` references in its messages (the user's and the
    replies') replaced by the entries they name, as the model reads them (seed 000 2.2.4);
    the stored messages keep what was written. A message belongs to no KB, so a
    reference looks in every KB of the project; a failed one leaves its visible marker."""
    if not any("{{{" in m.content for m in history):
        return list(history)
    resolver = knowledge.resolver()
    active = [(h.kb_id, h.entry_id) for h in lore]
    return [
        m.model_copy(
            update={
                "content": resolver.resolve(
                    m.content, None, variables=variables, active=active
                ).text
            }
        )
        if "{{{" in m.content
        else m
        for m in history
    ]


def rendered_needs(
    needed: Mapping[str, Mapping[str, int]],
    templates: TurnTemplates,
    count: Callable[[str], int],
) -> dict[str, dict[str, int]]:
    """``needed`` (per kb_id, per entry_id) with each template entry's rendered tokens."""
    out = {kb_id: dict(entries) for kb_id, entries in needed.items()}
    for (kb_id, entry_id), text in templates.lore_texts.items():
        out.setdefault(kb_id, {})[entry_id] = count(text)
    return out


def mark_template_lore(
    lore: list[LoreHit], report: list[LoreRecord], templates: TurnTemplates
) -> tuple[list[LoreHit], list[LoreRecord]]:
    """The hits of ``[GENERATE:BEFORE]``/``[GENERATE:AFTER]`` entries moved to the top /
    the end of the prompt, and the records of template entries marked (with the problem
    that left one as written)."""
    hits: list[LoreHit] = []
    for hit in lore:
        placement = templates.placements.get((hit.kb_id, hit.entry_id))
        if placement is Placement.AT_DEPTH:
            hit = hit.model_copy(
                update={"placement": placement.value, "depth": 0, "role": "system"}
            )
        elif placement is not None:
            update = {"placement": placement.value, "depth": None, "prompt_top": True}
            hit = hit.model_copy(update=update)
        hits.append(hit)
    records: list[LoreRecord] = []
    for record in report:
        result = templates.lore.get((record.kb_id, record.entry_id))
        if result is not None:
            problem = result.problem.model_dump() if result.problem is not None else None
            record = record.model_copy(update={"template": True, "template_problem": problem})
        records.append(record)
    return hits, records
