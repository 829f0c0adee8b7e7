"""The writing studio's node types: Role A (context), the generating nodes, Role C (check).

Every node reads the book through :class:`BookStore` over the services' database and
never writes it: the only writes are curation (an output the author keeps) and Role B
(a workflow change the author accepts). Role A's context is a pure function of (node
config, book state version) — seed 002's ephemeral-context rule — so each node's
fingerprint carries ``<book>@<state_version>``: the same state answers from the cache, a
new state runs again. When the book comes through an input rather than the config, the
fingerprint cannot know which book it is, so it carries the state of every book (a
conservative key: any change to any book re-runs the node, none is missed).

The generating node (``writing:Draft``) assembles the three-layer prompt of seed 002:
system = Role A's context (``system_prefix``) + the node's system text; user = the
node's brief and scene plan. After the model answers, Role C checks the text; ``retry``
runs the model again with the findings appended (bounded by ``max_retries``),
``flag-human`` asks the author (approve, retry once more, or edit).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Annotated, Any, ClassVar

from pydantic import Field

from storyloom.core.errors import InvalidInput, NotFound, StoryloomError, Unavailable
from storyloom.core.plugin_markers import hookimpl
from storyloom.core.settings import ChatEndpoint, ConnectionNotFound
from storyloom.llm.chat import ChatClient
from storyloom.llm.errors import LLMError
from storyloom.workflow.node_type import (
    TEXTAREA,
    Evaluation,
    NodeConfig,
    NodeContext,
    NodeExpansion,
    NodeType,
    Slot,
    Suggestions,
    WorkflowServices,
)
from storyloom.workflow.nodes.llm_nodes import LlmRole
from storyloom.workflow.slot_types import ARRAY, INTEGER, OBJECT, STRING
from storyloom.writing.book_store import BookStore
from storyloom.writing.context_assembly import (
    SCENE_TYPES,
    AssembledContext,
    ContextRequest,
    SceneType,
    assemble_context,
)
from storyloom.writing.intent import analyse_intent
from storyloom.writing.monitor import (
    Claim,
    Finding,
    check_claims,
    claims_by_agent,
    evaluate,
    extract_claims,
    findings_as_feedback,
)
from storyloom.writing.uris import invalid
from storyloom.writing.writing_connections import writing_endpoint

CATEGORY = "Writing"


DRAFT_SYSTEM = (
    "You are a novelist writing the next part of a book. The material above is what the "
    "book has established so far: stay consistent with it (names, appearances, places, "
    "the order of events, the rules of the world). Write prose only, no commentary."
)
PLAN_SYSTEM = (
    "You plan one scene of a novel. From the brief and what the book has established "
    "(above), list the scene's beats in order: who is there, where, what changes. Be brief."
)
REVISE_SYSTEM = (
    "You revise a chapter of a novel. Fix exactly the problems listed; keep everything "
    "else as it is (voice, events, length). Answer with the whole revised chapter only."
)


class WritingNodeError(StoryloomError):
    """A writing node cannot do what it was asked (no database, no book)."""


# -- config ------------------------------------------------------------------------------


class BookConfig(NodeConfig):
    """Which book and chapter a node works on; each is overridden by its input of the
    same name when that is connected."""

    book: str = Field("", description="The book's id (or connect the book input)")
    chapter: int | None = Field(
        None,
        ge=1,
        description="The chapter being written (it sees only earlier chapters); "
        "empty: the next one",
    )


class _ContextFields(BookConfig):
    budget_tokens: int = Field(
        25_000, ge=1_000, le=200_000, description="The most tokens of context injected"
    )
    scene_type: Annotated[SceneType, Suggestions(*SCENE_TYPES)] = Field(
        "any", description="Which profiles matter most: dialogue → characters, action → world…"
    )
    prompt: Annotated[str, TEXTAREA] = Field(
        "", description="What the scene is about (used when the prompt input is not connected)"
    )


INTENT_FIELD = Field(
    True,
    description="Ask the agent model (when one is set) which characters, places and threads "
    "the scene involves and what kind of scene it is; otherwise their names are matched",
)


class ContextConfig(_ContextFields):
    intent_with_agent: bool = INTENT_FIELD


class _LlmFields(_ContextFields):
    role: LlmRole = "user"
    model: str | None = Field(None, description="Another model on the same endpoint (optional)")
    temperature: float | None = Field(
        None, ge=0, le=2, description="Sampling temperature for this node (optional)"
    )
    max_tokens: int | None = Field(
        None, ge=1, description="Longest answer in tokens for this node (optional)"
    )


class PlanSceneConfig(_LlmFields):
    role: LlmRole = "agent"
    budget_tokens: int = Field(
        4_000, ge=1_000, le=200_000, description="The most tokens of context injected"
    )
    system: Annotated[str, TEXTAREA] = Field(PLAN_SYSTEM, description="The planner's instructions")


class DraftConfig(_LlmFields):
    intent_with_agent: bool = INTENT_FIELD
    system: Annotated[str, TEXTAREA] = Field(
        DRAFT_SYSTEM, description="The writer's instructions (after the book's context)"
    )
    max_retries: int = Field(
        1, ge=0, le=5, description="How many times Role C may send the draft back"
    )
    check_with_agent: bool = Field(
        True,
        description="Role C reads the draft with the agent model (when one is set); "
        "otherwise by names and attribute words",
    )
    drafts: int = Field(
        1,
        ge=1,
        le=5,
        description="How many drafts to write; more than one: the author picks one "
        "(evolutionary selection)",
    )


class CheckConfig(BookConfig):
    check_with_agent: bool = Field(
        True, description="Read the text with the agent model (when one is set)"
    )


class ReviseConfig(_LlmFields):
    budget_tokens: int = Field(
        8_000, ge=1_000, le=200_000, description="The most tokens of context injected"
    )
    system: Annotated[str, TEXTAREA] = Field(
        REVISE_SYSTEM, description="The reviser's instructions"
    )
    notes: Annotated[str, TEXTAREA] = Field(
        "", description="What else to change (used when the notes input is not connected)"
    )


# -- slots -------------------------------------------------------------------------------

BOOK_INPUT = Slot(
    name="book", type=STRING, required=False, description="The book's id; the config value"
)
CHAPTER_INPUT = Slot(
    name="chapter",
    type=INTEGER,
    required=False,
    description="The chapter being written; the config value, else the next chapter",
)
PROMPT_INPUT = Slot(
    name="prompt", type=STRING, required=False, description="The brief; the config value"
)
OUTLINE_INPUT = Slot(
    name="outline", type=STRING, required=False, description="The chapter's outline (optional)"
)


# -- shared steps ------------------------------------------------------------------------


def book_store(services: WorkflowServices) -> BookStore:
    if services.database is None:
        raise Unavailable("the writing nodes need the project's database; run them in the server")
    return BookStore(services.database)


def book_state_mark(services: WorkflowServices, book: str) -> str:
    """``<book>@<state_version>``: the part of a node's cache key that is the book."""
    if services.database is None:
        return "no-database"
    store = BookStore(services.database)
    if book.strip():
        try:
            return f"{book}@{store.state_version(book)}"
        except NotFound:
            return f"{book}@missing"
    return ";".join(f"{b.id}@{b.state_version}" for b in store.books())


def _endpoint_mark(endpoint: ChatEndpoint) -> str:
    # The key is never part of it: it changes who pays, not what is answered.
    return endpoint.model_dump_json(include={"base_url", "model", "parameters"})


def _role_mark(role: str, services: WorkflowServices) -> str | None:
    """The cache-key mark of writing role ``role``'s endpoint (None: not set up). A
    connection that is gone marks its name: the run itself fails naming it."""
    try:
        endpoint = writing_endpoint(role, services.require_settings())
    except ConnectionNotFound as exc:
        return f"missing connection {exc.name!r}"
    return _endpoint_mark(endpoint) if endpoint.configured else None


def resolve_book(
    store: BookStore, inputs: Mapping[str, Any], config: BookConfig
) -> tuple[str, int]:
    """``(book id, chapter)`` from the inputs, else the config; the chapter defaults to
    the one after the book's last."""
    book = str(inputs.get("book") or config.book or "").strip()
    if not book:
        raise invalid("book", "no book given: set the node's book or connect its book input")
    store.book(book)  # NotFound names it
    raw = inputs.get("chapter", config.chapter)
    if raw is None or raw == "" or raw == 0:
        chapters = store.chapters(book)
        return book, (chapters[-1].ordinal + 1 if chapters else 1)
    try:
        chapter = int(raw)
    except (TypeError, ValueError):
        raise invalid("chapter", f"{raw!r} is not a chapter number") from None
    if chapter < 1:
        raise invalid("chapter", f"{chapter} is not a chapter number (they start at 1)")
    return book, chapter


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


async def role_a(
    ctx: NodeContext,
    store: BookStore,
    request: ContextRequest,
    *,
    intent: bool = False,
) -> AssembledContext:
    """Role A: the context, assembled off the event loop, each piece reported as a
    ``contextSource`` of the node. With ``intent`` and an agent model set, the agent
    names the scene's entities and kind first (seed 002's intent analysis); the scene
    type set on the node wins over the agent's."""
    agent = writing_endpoint("agent", ctx.services.require_settings())
    if intent and agent.configured:
        found = await analyse_intent(
            agent, store, request.book_id, request.chapter, request.prompt, request.outline
        )
        if found is not None:
            scene_type = request.scene_type if request.scene_type != "any" else found.scene_type
            request = replace(request, entities=found.entities, scene_type=scene_type)
    assembled = await ctx.run_blocking(assemble_context, store, request)
    for source in assembled.sources():
        ctx.add_context_source(source)
    return assembled


@dataclass(frozen=True)
class SceneContext:
    store: BookStore
    book: str
    chapter: int
    assembled: AssembledContext


async def scene_context(
    ctx: NodeContext,
    inputs: Mapping[str, Any],
    config: _ContextFields,
    prompt: str,
    outline: str = "",
    *,
    intent: bool = False,
) -> SceneContext:
    """The node's book and chapter (inputs over config), and Role A's context for a
    scene described by ``prompt`` and ``outline``."""
    store = book_store(ctx.services)
    book, chapter = await ctx.run_blocking(resolve_book, store, inputs, config)
    request = ContextRequest(
        book_id=book,
        chapter=chapter,
        prompt=prompt,
        outline=outline,
        scene_type=config.scene_type,
        budget_tokens=config.budget_tokens,
    )
    assembled = await role_a(ctx, store, request, intent=intent)
    return SceneContext(store, book, chapter, assembled)


def three_layer_prompt(context: str, system: str, user: str) -> list[dict[str, str]]:
    """Seed 002's prompt: Role A's context before the node's system text; the node's own
    text as the user message. The context is never written anywhere."""
    full_system = f"{context}\n{system}" if context else system
    messages = []
    if full_system.strip():
        messages.append({"role": "system", "content": full_system})
    messages.append({"role": "user", "content": user})
    return messages


def llm_book_mark(config: _LlmFields, services: WorkflowServices) -> str:
    """The cache-key part of an LLM writing node: its model and the book's state."""
    return f"{_role_mark(config.role, services)}|{book_state_mark(services, config.book)}"


def llm_endpoint(config: _LlmFields, services: WorkflowServices) -> ChatEndpoint:
    endpoint = writing_endpoint(config.role, services.require_settings())
    if not endpoint.configured:
        which = "agent" if config.role == "agent" else "user"
        raise Unavailable(f"the {which} model is not set: set it in Settings")
    return endpoint


async def stream_llm(
    ctx: NodeContext, endpoint: ChatEndpoint, messages: list[dict[str, str]], config: _LlmFields
) -> str:
    """The model's answer, each delta streamed as ``node:streaming``. An ``LLMError``
    propagates as it is: it names the failure and carries the partial text."""
    overrides = config.model_dump(include={"model", "temperature", "max_tokens"}, exclude_none=True)
    if overrides.get("model") == "":
        del overrides["model"]
    async with ChatClient(endpoint) as client, client.stream(messages, **overrides) as stream:
        async for delta in stream:
            await ctx.emit(delta)
        return stream.text


def finding_json(finding: Finding) -> dict[str, Any]:
    return asdict(finding)


def feedback_text(findings: Sequence[Mapping[str, Any]]) -> str:
    """Role C's findings as instructions to the writer, one line each. Findings the
    author marked intentional are left out: they are not errors."""
    lines = []
    for f in findings:
        if f.get("intentional"):
            continue
        subject = str(f.get("subject", "")).rsplit("/", 1)[-1]
        since = f.get("since_chapter")
        where = f" (established in chapter {since})" if since else ""
        lines.append(
            f"- {subject} {f.get('attribute', '')}: the book says "
            f"{f.get('expected', '')!r}{where}, the text says {f.get('found', '')!r}"
        )
    if not lines:
        return ""
    return (
        "Role C found contradictions with what the book has established; fix them:\n"
        + "\n".join(lines)
    )


async def role_c(
    ctx: NodeContext,
    store: BookStore,
    book: str,
    chapter: int,
    text: str,
    *,
    with_agent: bool,
) -> list[Finding]:
    """Role C's findings on ``text``: claims read by the agent model when asked and
    configured (falling back to the lexical reader when its answer is unusable, so a
    flaky agent never costs the author a draft), checked against the facts as of
    ``chapter``."""
    claims: list[Claim] | None = None
    agent = writing_endpoint("agent", ctx.services.require_settings())
    if with_agent and agent.configured:
        try:
            claims = await claims_by_agent(agent, store, book, text, chapter)
        except (InvalidInput, LLMError):
            claims = None
    if claims is None:
        claims = await ctx.run_blocking(extract_claims, store, book, text, chapter)
    return await ctx.run_blocking(check_claims, store, book, claims, chapter)


def _evaluation_json(evaluation: Evaluation) -> dict[str, Any]:
    return evaluation.model_dump(mode="json", by_alias=True)


# -- node types --------------------------------------------------------------------------


class ContextNode(NodeType[ContextConfig]):
    """Role A on its own: the context a generating node of this chapter would see, with
    where every piece came from (``contextSources``). Deterministic for a book state."""

    type: ClassVar[str] = "writing:Context"
    display_name: ClassVar[str] = "Book context (Role A)"
    category: ClassVar[str] = CATEGORY
    description: ClassVar[str] = (
        "Assemble what the book has established before a chapter (meta, the scene's "
        "characters and their profiles, earlier chapters' summaries) under a token budget, "
        "with the source of every piece."
    )
    inputs: ClassVar[tuple[Slot, ...]] = (BOOK_INPUT, CHAPTER_INPUT, PROMPT_INPUT, OUTLINE_INPUT)
    outputs: ClassVar[tuple[Slot, ...]] = (
        Slot(name="context", type=STRING, description="The assembled context text"),
        Slot(
            name="sources",
            type=ARRAY,
            description="Where each piece came from: [{uri, reason, level, version}]",
        ),
        Slot(name="tokens", type=INTEGER, description="Tokens of the context"),
    )

    def fingerprint(self, config: ContextConfig, services: WorkflowServices) -> str | None:
        mark = book_state_mark(services, config.book)
        agent = _role_mark("agent", services)
        if config.intent_with_agent and agent is not None:
            return f"{agent}|{mark}"
        return mark

    async def run(
        self, ctx: NodeContext, inputs: dict[str, Any], config: ContextConfig
    ) -> dict[str, Any] | NodeExpansion:
        scene = await scene_context(
            ctx,
            inputs,
            config,
            _text(inputs.get("prompt", config.prompt)),
            _text(inputs.get("outline")),
            intent=config.intent_with_agent,
        )
        assembled = scene.assembled
        sources = [s.model_dump(mode="json", exclude_none=True) for s in assembled.sources()]
        return {"context": assembled.text, "sources": sources, "tokens": assembled.tokens}


class PlanSceneNode(NodeType[PlanSceneConfig]):
    """The agent model plans the scene's beats from the brief, the outline and a small
    Role A context (``budget_tokens``, 4K by default)."""

    type: ClassVar[str] = "writing:PlanScene"
    display_name: ClassVar[str] = "Plan scene"
    category: ClassVar[str] = CATEGORY
    description: ClassVar[str] = (
        "Ask the agent model for the scene's beats from the brief and the outline, with "
        "a small context of what the book has established."
    )
    streaming: ClassVar[bool] = True
    inputs: ClassVar[tuple[Slot, ...]] = (BOOK_INPUT, CHAPTER_INPUT, PROMPT_INPUT, OUTLINE_INPUT)
    outputs: ClassVar[tuple[Slot, ...]] = (
        Slot(name="plan", type=STRING, description="The scene's beats"),
    )

    def fingerprint(self, config: PlanSceneConfig, services: WorkflowServices) -> str | None:
        return llm_book_mark(config, services)

    async def run(
        self, ctx: NodeContext, inputs: dict[str, Any], config: PlanSceneConfig
    ) -> dict[str, Any] | NodeExpansion:
        endpoint = llm_endpoint(config, ctx.services)
        brief = _text(inputs.get("prompt", config.prompt))
        outline = _text(inputs.get("outline"))
        scene = await scene_context(ctx, inputs, config, brief, outline)
        chapter, assembled = scene.chapter, scene.assembled
        user = f"Chapter {chapter}. Brief:\n{brief}"
        if outline:
            user += f"\n\nOutline:\n{outline}"
        messages = three_layer_prompt(assembled.text, config.system, user)
        return {"plan": await stream_llm(ctx, endpoint, messages, config)}


class DraftNode(NodeType[DraftConfig]):
    """Writes the chapter: Role A's context, the user model streamed, Role C's check.

    Role C's ``retry`` runs the model again with the findings appended, at most
    ``max_retries`` times (each reported as ``node:iteration``); ``flag-human`` asks the
    author: approve keeps the text, edit replaces it, retry writes it once more. With
    ``drafts`` > 1 the node writes that many drafts, checks each, and the author picks
    one (an evolutionary selection of one generation; each candidate's findings are in
    the question).
    """

    type: ClassVar[str] = "writing:Draft"
    display_name: ClassVar[str] = "Draft chapter"
    category: ClassVar[str] = CATEGORY
    description: ClassVar[str] = (
        "Write the chapter with the user model, given what the book has established "
        "(Role A); Role C checks the draft for contradictions and sends it back or asks "
        "you. Set drafts above 1 to write several and pick one."
    )
    streaming: ClassVar[bool] = True
    inputs: ClassVar[tuple[Slot, ...]] = (
        BOOK_INPUT,
        CHAPTER_INPUT,
        PROMPT_INPUT,
        OUTLINE_INPUT,
        Slot(name="plan", type=STRING, required=False, description="The scene plan (optional)"),
    )
    outputs: ClassVar[tuple[Slot, ...]] = (
        Slot(name="text", type=STRING, description="The draft"),
        Slot(
            name="evaluation",
            type=OBJECT,
            description="Role C's verdict: {decision, confidence, reason, checks}",
        ),
    )

    def fingerprint(self, config: DraftConfig, services: WorkflowServices) -> str | None:
        mark = llm_book_mark(config, services)
        agent = _role_mark("agent", services)
        if (config.check_with_agent or config.intent_with_agent) and agent is not None:
            return f"{agent}|{mark}"
        return mark

    async def run(
        self, ctx: NodeContext, inputs: dict[str, Any], config: DraftConfig
    ) -> dict[str, Any] | NodeExpansion:
        endpoint = llm_endpoint(config, ctx.services)
        brief = _text(inputs.get("prompt", config.prompt))
        outline = _text(inputs.get("outline"))
        plan = _text(inputs.get("plan"))
        prompt = f"{brief}\n{plan}".strip()
        scene = await scene_context(
            ctx, inputs, config, prompt, outline, intent=config.intent_with_agent
        )
        store, book, chapter, assembled = scene.store, scene.book, scene.chapter, scene.assembled
        user = f"Write chapter {chapter}.\n\n{brief}".rstrip()
        if outline:
            user += f"\n\nOutline:\n{outline}"
        if plan:
            user += f"\n\nScene plan:\n{plan}"
        draft = _Drafting(ctx, store, book, chapter, endpoint, config, assembled.text, user)
        if config.drafts > 1:
            text, evaluation = await draft.choose_among(config.drafts)
        else:
            text, evaluation = await draft.write()
        ctx.set_evaluation(evaluation)
        return {"text": text, "evaluation": _evaluation_json(evaluation)}


class _Drafting:
    """One run of a Draft node: attempts, Role C, the author's answer."""

    def __init__(
        self,
        ctx: NodeContext,
        store: BookStore,
        book: str,
        chapter: int,
        endpoint: ChatEndpoint,
        config: DraftConfig,
        context: str,
        user: str,
    ) -> None:
        self.ctx = ctx
        self.store = store
        self.book = book
        self.chapter = chapter
        self.endpoint = endpoint
        self.config = config
        self.context = context
        self.user = user

    async def attempt(self, feedback: str) -> str:
        user = f"{self.user}\n\n{feedback}" if feedback else self.user
        messages = three_layer_prompt(self.context, self.config.system, user)
        return await stream_llm(self.ctx, self.endpoint, messages, self.config)

    async def check(self, text: str, attempt: int) -> tuple[Evaluation, list[Finding]]:
        findings = await role_c(
            self.ctx,
            self.store,
            self.book,
            self.chapter,
            text,
            with_agent=self.config.check_with_agent,
        )
        evaluation = evaluate(findings, attempt=attempt, max_retries=self.config.max_retries)
        return evaluation, findings

    async def write(self) -> tuple[str, Evaluation]:
        max_retries = self.config.max_retries
        total = max_retries + 1
        attempt = 0
        human_retry_left = True
        feedback = ""
        while True:
            text = await self.attempt(feedback)
            evaluation, findings = await self.check(text, attempt)
            decision = evaluation.decision
            if decision == "retry" and attempt < max_retries:
                attempt += 1
                self.ctx.report_iteration(attempt + 1, total, "recursive")
                feedback = findings_as_feedback(findings)
                continue
            if decision == "approve":
                return text, evaluation
            # flag-human (or a retry past the bound): the author decides.
            options = ("approve", "retry", "edit") if human_retry_left else ("approve", "edit")
            answer = await self.ctx.request_human(
                evaluation.reason or "Role C found contradictions in this draft",
                text,
                options=options,
            )
            if answer.decision == "approve":
                return text, evaluation
            if answer.decision == "edit":
                if answer.edited_output is None:
                    raise WritingNodeError("an edit decision needs editedOutput (the new text)")
                return answer.edited_output, evaluation
            if not human_retry_left:
                raise WritingNodeError("the draft was already written again once; approve or edit")
            human_retry_left = False
            attempt += 1
            total = max(total, attempt + 1)
            self.ctx.report_iteration(attempt + 1, total, "recursive")
            feedback = findings_as_feedback(findings)

    async def choose_among(self, count: int) -> tuple[str, Evaluation]:
        self.ctx.report_iteration(1, 1, "evolutionary", candidate_count=count)
        texts: list[str] = []
        evaluations: list[Evaluation] = []
        # One after another: their streams would interleave in the node's output.
        for _ in range(count):
            text = await self.attempt("")
            evaluation, _findings = await self.check(text, self.config.max_retries)
            texts.append(text)
            evaluations.append(evaluation)
        verdicts = ", ".join(f"#{i} {e.decision}" for i, e in enumerate(evaluations))
        answer = await self.ctx.request_human(
            f"Choose one of {count} drafts (Role C: {verdicts})",
            texts[0],
            options=("approve", "edit"),
            candidates=texts,
        )
        if answer.decision == "edit":
            if answer.edited_output is None:
                raise WritingNodeError("an edit decision needs editedOutput (the new text)")
            return answer.edited_output, evaluations[answer.choice or 0]
        choice = answer.choice if answer.choice is not None else 0
        if answer.decision != "approve" or not 0 <= choice < count:
            raise WritingNodeError(
                f"pick one of the {count} drafts (choice 0 to {count - 1}) or edit one"
            )
        return texts[choice], evaluations[choice]


class CheckNode(NodeType[CheckConfig]):
    """Role C on its own: checks a text against what the book has established as of
    the chapter (timeline, character state, world rules, callbacks). Never changes the
    text and never judges style."""

    type: ClassVar[str] = "writing:Check"
    display_name: ClassVar[str] = "Check consistency (Role C)"
    category: ClassVar[str] = CATEGORY
    description: ClassVar[str] = (
        "Check a text for contradictions with the book as of its chapter (facts, "
        "character state, timeline, world rules); reports findings, changes nothing."
    )
    inputs: ClassVar[tuple[Slot, ...]] = (
        Slot(name="text", type=STRING, description="The text to check"),
        BOOK_INPUT,
        CHAPTER_INPUT,
    )
    outputs: ClassVar[tuple[Slot, ...]] = (
        Slot(name="evaluation", type=OBJECT, description="{decision, confidence, reason, checks}"),
        Slot(
            name="findings",
            type=ARRAY,
            description="Each contradiction: {dimension, subject, attribute, expected, found…}",
        ),
    )

    def fingerprint(self, config: CheckConfig, services: WorkflowServices) -> str | None:
        mark = book_state_mark(services, config.book)
        if config.check_with_agent:
            agent = _role_mark("agent", services)
            if agent is not None:
                mark = f"{agent}|{mark}"
        return mark

    async def run(
        self, ctx: NodeContext, inputs: dict[str, Any], config: CheckConfig
    ) -> dict[str, Any] | NodeExpansion:
        store = book_store(ctx.services)
        book, chapter = await ctx.run_blocking(resolve_book, store, inputs, config)
        text = _text(inputs.get("text"))
        findings = await role_c(ctx, store, book, chapter, text, with_agent=config.check_with_agent)
        # Standalone, nothing can be retried here: a finding is for the author.
        evaluation = evaluate(findings, attempt=0, max_retries=0)
        ctx.set_evaluation(evaluation)
        return {
            "evaluation": _evaluation_json(evaluation),
            "findings": [finding_json(f) for f in findings],
        }


class ReviseNode(NodeType[ReviseConfig]):
    """The user model revises ``text`` to fix Role C's findings and the author's notes,
    with Role A's context. Nothing to fix (no findings, no notes): the text passes on
    unchanged and no model is asked."""

    type: ClassVar[str] = "writing:Revise"
    display_name: ClassVar[str] = "Revise chapter"
    category: ClassVar[str] = CATEGORY
    description: ClassVar[str] = (
        "Rewrite the text to fix Role C's findings and your notes, keeping the rest; "
        "passes the text on unchanged when there is nothing to fix."
    )
    streaming: ClassVar[bool] = True
    inputs: ClassVar[tuple[Slot, ...]] = (
        Slot(name="text", type=STRING, description="The text to revise"),
        Slot(name="findings", type=ARRAY, required=False, description="Role C's findings"),
        Slot(name="notes", type=STRING, required=False, description="What else to change"),
        BOOK_INPUT,
        CHAPTER_INPUT,
    )
    outputs: ClassVar[tuple[Slot, ...]] = (
        Slot(name="text", type=STRING, description="The revised text"),
    )

    def fingerprint(self, config: ReviseConfig, services: WorkflowServices) -> str | None:
        return llm_book_mark(config, services)

    async def run(
        self, ctx: NodeContext, inputs: dict[str, Any], config: ReviseConfig
    ) -> dict[str, Any] | NodeExpansion:
        text = _text(inputs.get("text"))
        raw = inputs.get("findings") or []
        findings = [f for f in raw if isinstance(f, Mapping)] if isinstance(raw, list) else []
        feedback = feedback_text(findings)
        notes = _text(inputs.get("notes", config.notes)).strip()
        if not feedback and not notes:
            await ctx.emit(text)
            return {"text": text}
        endpoint = llm_endpoint(config, ctx.services)
        scene = await scene_context(ctx, inputs, config, f"{notes}\n{text}".strip())
        assembled = scene.assembled
        user = "\n\n".join(
            part
            for part in (
                feedback,
                f"The author's notes:\n{notes}" if notes else "",
                f"The chapter:\n{text}",
            )
            if part
        )
        messages = three_layer_prompt(assembled.text, config.system, user)
        return {"text": await stream_llm(ctx, endpoint, messages, config)}


NODE_TYPES: tuple[type[NodeType], ...] = (
    ContextNode,
    PlanSceneNode,
    DraftNode,
    CheckNode,
    ReviseNode,
)


@hookimpl
def storyloom_node_types() -> list[type[NodeType]]:
    return list(NODE_TYPES)
