"""The shuttle nodes of the chat pipeline (seed 001 §4-5): one workflow node per step.

A chat turn is the workflow :func:`~storyloom.chat.prompt.default_pipeline.default_pipeline`
(or the user's copy of it): the snapshot goes in, a ``SKEIN`` is built, rewritten,
trimmed and woven into messages, the model answers, and the answer is parsed into the
visible reply, the thought and the new state. The logic lives in
:mod:`~storyloom.chat.prompt.skein_builder`, :mod:`~storyloom.chat.prompt.prompt_ast`,
:mod:`~storyloom.chat.prompt.token_budget`, :mod:`~storyloom.chat.prompt.weaver` and
:mod:`~storyloom.chat.reply.filament`; the nodes here check their inputs and config and call
it, so the same steps can be rewired, replaced or inspected on the canvas.

Every step but the LLM Invoker is a pure function of its inputs and config (the
snapshot carries the seed and the time), so the runner may cache it; the invoker is not
idempotent, because a swipe must get a new answer to the same prompt.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, ValidationError

from storyloom.chat.personalab.director import advance_plot, outline_points
from storyloom.chat.prompt.lore_images import mark_lore_images, request_messages
from storyloom.chat.prompt.prompt_ast import apply_prompt_regex, run_prompt_ast
from storyloom.chat.prompt.script_shuttle import run_script_shuttle
from storyloom.chat.prompt.skein import Skein
from storyloom.chat.prompt.skein_builder import (
    DEFAULT_CONTINUE_NUDGE_PROMPT,
    DEFAULT_IMPERSONATION_PROMPT,
    DEFAULT_NEW_CHAT_PROMPT,
    DEFAULT_NEW_EXAMPLE_CHAT_PROMPT,
    DEFAULT_PROMPT_ORDER,
    DEFAULT_PROMPTS,
    PresetPrompt,
    PromptOrderEntry,
    SkeinOptions,
    build_skein,
)
from storyloom.chat.prompt.text_prompt import skein_text_prompt, template_cost
from storyloom.chat.prompt.token_budget import CHAT_COST, apply_budget
from storyloom.chat.prompt.weaver import NAMES_BEHAVIORS, NamesBehavior, weave_sources
from storyloom.chat.reply.filament import FilamentTags, parse_filament
from storyloom.chat.reply.mvu_values import MvuWarning, apply_mvu_ops
from storyloom.chat.reply.state_ops import StateOp, ops_from_json, ops_to_json
from storyloom.chat.reply.turn_variables import TurnVariables
from storyloom.chat.store.snapshot import ContextSnapshot
from storyloom.chat.store.state import ChatState
from storyloom.chat.store.state_chain import state_delta
from storyloom.core.errors import StoryloomError, field_path
from storyloom.core.plugin_markers import hookimpl
from storyloom.core.settings import DEFAULT_CONTEXT_WINDOW, ChatEndpoint
from storyloom.knowledge.timed_effects import TimedEffectsState
from storyloom.llm.answer_stream import AnswerStream
from storyloom.llm.chat import ChatClient
from storyloom.llm.context_size import context_size_of
from storyloom.llm.instruct import ResolvedTemplates, TemplateLibrary, TextPrompt
from storyloom.llm.tokenizers import counter_for
from storyloom.project.scripts import ScriptLibrary
from storyloom.sandbox.script_host import ScriptLimits
from storyloom.sillytavern.mvu_zod import ZodSchemaError, card_state_schema
from storyloom.workflow.agent_host import AgentTurnRequest
from storyloom.workflow.node_type import (
    CODE,
    TEXTAREA,
    NodeConfig,
    NodeContext,
    NodeType,
    Slot,
    Suggestion,
    Suggestions,
    WorkflowServices,
)
from storyloom.workflow.nodes.llm_nodes import LlmRole
from storyloom.workflow.slot_types import ARRAY, BOOLEAN, OBJECT, STRING

CATEGORY = "Chat"
SKEIN = "SKEIN"
MESSAGES = "MESSAGES"
STATE_DELTA = "STATE_DELTA"


class ShuttleError(StoryloomError):
    """A shuttle node got an input or config it cannot use; the message names it."""


# -- inputs -------------------------------------------------------------------------------


def _problem(exc: ValidationError, where: str) -> str:
    first = exc.errors()[0]
    path = field_path(tuple(first.get("loc", ())))
    return f"{where}{'.' + path if path and not path.startswith('[') else path}: {first['msg']}"


_last_snapshot: tuple[dict[str, Any], ContextSnapshot] | None = None


def snapshot_input(inputs: Mapping[str, Any], name: str = "snapshot") -> ContextSnapshot:
    """The snapshot of a turn. Four shuttles read the same snapshot value, the very same
    dict the runner hands each of them, so the last one validated is kept (the model is
    frozen) and the same dict is not validated again."""
    global _last_snapshot
    value = inputs.get(name)
    if isinstance(value, ContextSnapshot):
        return value
    if not isinstance(value, dict):
        raise ShuttleError(f"input {name}: expected a context snapshot object, got {value!r}")
    last = _last_snapshot
    if last is not None and last[0] is value:
        return last[1]
    try:
        snapshot = ContextSnapshot.model_validate(value)
    except ValidationError as exc:
        raise ShuttleError(_problem(exc, f"input {name}")) from None
    _last_snapshot = (value, snapshot)
    return snapshot


def skein_input(inputs: Mapping[str, Any], name: str = "skein") -> Skein:
    value = inputs.get(name)
    if isinstance(value, Skein):
        return value.model_copy(deep=True)
    if not isinstance(value, dict):
        raise ShuttleError(f"input {name}: expected a Skein object, got {value!r}")
    try:
        return Skein.model_validate(value)
    except ValidationError as exc:
        raise ShuttleError(_problem(exc, f"input {name}")) from None


# -- the Skein Builder ---------------------------------------------------------------------

SNAPSHOT_IN = Slot(name="snapshot", type=OBJECT, description="The turn's context snapshot")
SKEIN_IN = Slot(name="skein", type=SKEIN, description="The prompt being built")
SKEIN_OUT = Slot(name="skein", type=SKEIN, description="The prompt, rewritten")


_BASE = SkeinOptions()


class SkeinBuilderConfig(NodeConfig):
    prompt_order: list[PromptOrderEntry] = Field(
        default_factory=lambda: list(DEFAULT_PROMPT_ORDER),
        description="[{identifier, enabled}] in prompt order (SillyTavern's prompt_order)",
    )
    prompts: list[PresetPrompt] = Field(
        default_factory=lambda: list(DEFAULT_PROMPTS),
        description="SillyTavern prompts: {identifier, name, role, content, "
        "system_prompt, marker, injection_position (0 in order, 1 in chat), "
        "injection_depth, injection_order}",
    )
    new_chat_prompt: str = Field(
        DEFAULT_NEW_CHAT_PROMPT, description="Sent before the chat history; empty: nothing"
    )
    new_example_chat_prompt: str = Field(
        DEFAULT_NEW_EXAMPLE_CHAT_PROMPT,
        description="Sent before each example dialogue; empty: nothing",
    )
    continue_nudge_prompt: Annotated[str, TEXTAREA] = Field(
        DEFAULT_CONTINUE_NUDGE_PROMPT, description="Added when continuing a reply"
    )
    impersonation_prompt: Annotated[str, TEXTAREA] = Field(
        DEFAULT_IMPERSONATION_PROMPT, description="Added when writing as the user"
    )
    wi_format: str = Field(
        _BASE.wi_format, description="World info text; {0} stands for the entries"
    )
    scenario_format: str = Field(
        _BASE.scenario_format, description="Scenario text; {{scenario}} stands for the card's"
    )
    personality_format: str = Field(
        _BASE.personality_format,
        description="Personality text; {{personality}} stands for the card's",
    )
    summary_format: Annotated[str, TEXTAREA] = Field(
        _BASE.summary_format, description="Summaries; {0} stands for the points"
    )
    rag_format: Annotated[str, TEXTAREA] = Field(
        _BASE.rag_format, description="Retrieved memories; {0} stands for them"
    )
    director_depth: int = Field(
        0, ge=0, description="Messages from the end where director guidance goes"
    )
    pin_examples: bool = Field(
        False, description="Keep example dialogues before the history under the budget"
    )
    prefer_character_prompt: bool = Field(
        True, description="The card's system prompt replaces the main prompt"
    )
    prefer_character_jailbreak: bool = Field(
        True, description="The card's post-history instructions replace the preset's"
    )
    format_guide: bool = Field(
        True,
        description="Tell the model the Filament format (<thought>, <state_update>, "
        "<reply>) and show it the state, just before the latest message (the chat's and "
        "the card's own choice still apply)",
    )


class SkeinBuilder(NodeType[SkeinBuilderConfig]):
    type: ClassVar[str] = "chat:SkeinBuilder"
    display_name: ClassVar[str] = "Skein Builder"
    category: ClassVar[str] = CATEGORY
    description: ClassVar[str] = (
        "Lays the snapshot out as a SillyTavern chat-completion preset would: prompts in "
        "prompt order, card, persona, lore at its placements, examples, history, "
        "author's note, character note, summaries, memories, director guidance and the "
        "format guide, each a block with its source."
    )
    inputs: ClassVar[tuple[Slot, ...]] = (SNAPSHOT_IN,)
    outputs: ClassVar[tuple[Slot, ...]] = (
        Slot(name="skein", type=SKEIN, description="The prompt as typed blocks"),
    )

    async def run(
        self, ctx: NodeContext, inputs: dict[str, Any], config: SkeinBuilderConfig
    ) -> dict[str, Any]:
        snapshot = snapshot_input(inputs)
        options = skein_options(config)
        return {"skein": build_skein(snapshot, options).as_json()}


def skein_options(config: SkeinBuilderConfig) -> SkeinOptions:
    """The builder's options from its node config."""
    return SkeinOptions(**{name: getattr(config, name) for name in SkeinBuilderConfig.model_fields})


# -- the rewriting steps ------------------------------------------------------------------


class PromptASTConfig(NodeConfig):
    history_macros: bool = Field(
        True, description="Expand macros in chat messages too (SillyTavern does)"
    )


class PromptAST(NodeType[PromptASTConfig]):
    type: ClassVar[str] = "chat:PromptAST"
    display_name: ClassVar[str] = "Prompt AST"
    category: ClassVar[str] = CATEGORY
    description: ClassVar[str] = (
        "Drops blocks whose condition is false, resolves {{#if}} sections and expands "
        "SillyTavern macros ({{char}}, {{user}}, {{getvar}}/{{setvar}}, {{random}}...); "
        "variables set by macros go into the Skein and on into the state."
    )
    inputs: ClassVar[tuple[Slot, ...]] = (SKEIN_IN, SNAPSHOT_IN)
    outputs: ClassVar[tuple[Slot, ...]] = (SKEIN_OUT,)

    async def run(
        self, ctx: NodeContext, inputs: dict[str, Any], config: PromptASTConfig
    ) -> dict[str, Any]:
        skein = skein_input(inputs)
        snapshot = snapshot_input(inputs)
        history_macros = config.history_macros
        return {"skein": run_prompt_ast(skein, snapshot, history_macros=history_macros).as_json()}


class RegexCleaner(NodeType):
    type: ClassVar[str] = "chat:RegexCleaner"
    display_name: ClassVar[str] = "Regex Cleaner"
    category: ClassVar[str] = CATEGORY
    description: ClassVar[str] = (
        "Applies the regex scripts that act on the prompt, the user's global ones then "
        "the card's allowed ones: promptOnly "
        "scripts on chat messages (depth along the branch) and on lore, and the plain "
        "scripts on lore."
    )
    inputs: ClassVar[tuple[Slot, ...]] = (SKEIN_IN, SNAPSHOT_IN)
    outputs: ClassVar[tuple[Slot, ...]] = (SKEIN_OUT,)

    async def run(
        self, ctx: NodeContext, inputs: dict[str, Any], config: NodeConfig
    ) -> dict[str, Any]:
        raw = inputs.get("snapshot")
        if (
            isinstance(raw, dict)
            and not raw.get("regex_scripts")
            and not raw.get("global_regex_scripts")
            and not raw.get("regex_problems")
            and isinstance(inputs.get("skein"), dict)
        ):
            return {"skein": inputs["skein"]}  # no script in force: nothing to do
        skein = skein_input(inputs)
        snapshot = snapshot_input(inputs)
        return {"skein": apply_prompt_regex(skein, snapshot).as_json()}


class ScriptConfig(NodeConfig):
    language: Annotated[
        Literal["javascript", "lua"],
        Suggestions(
            Suggestion(value="javascript", label="JavaScript"),
            Suggestion(value="lua", label="Lua"),
        ),
    ] = Field("javascript", description="The language of the inline code")
    script: str = Field(
        "",
        description="A script file: 'mood.lua' in the project's scripts/ folder, or "
        "'<plugin>:<file>' of an enabled plugin (its extension says the language); "
        "empty: run the inline code",
    )
    code: Annotated[str, CODE] = Field(
        "", description="The script, when no file is named; it changes the global ctx"
    )
    time_limit_ms: int = Field(
        1000, ge=10, le=30_000, description="Wall-clock limit of one run (ms)"
    )
    memory_mb: int = Field(32, ge=4, le=256, description="Memory limit of the script (MiB)")


class Script(NodeType[ScriptConfig]):
    type: ClassVar[str] = "chat:Script"
    display_name: ClassVar[str] = "Script"
    category: ClassVar[str] = CATEGORY
    description: ClassVar[str] = (
        "Runs a Lua or JavaScript script on the turn in a sandbox: it reads the Skein's "
        "blocks, the variables, the macros' values and the state as the global ctx, and "
        "adds, removes, edits or reorders blocks and sets variables; the prompt inspector "
        "shows what it did. No script: the Skein passes through."
    )
    version: ClassVar[int] = 2
    # Without the snapshot wired (a pipeline saved before it had this input), the run's
    # snapshot is read: it joins the cache key.
    reads_run_inputs: ClassVar[bool] = True
    inputs: ClassVar[tuple[Slot, ...]] = (
        SKEIN_IN,
        Slot(
            name="snapshot",
            type=OBJECT,
            required=False,
            description="The turn's context snapshot (variables, macros, state); "
            "unwired: the run's",
        ),
    )
    outputs: ClassVar[tuple[Slot, ...]] = (SKEIN_OUT,)

    def fingerprint(self, config: ScriptConfig, services: WorkflowServices) -> str | None:
        # The file is read when the node runs: its content decides the output as much
        # as the config does, so an edited script is never answered from the cache.
        if not config.script:
            return None
        return script_library(services).fingerprint(config.script)

    async def run(
        self, ctx: NodeContext, inputs: dict[str, Any], config: ScriptConfig
    ) -> dict[str, Any]:
        if not config.script and not config.code.strip():
            if isinstance(inputs.get("skein"), dict):
                return {"skein": inputs["skein"]}
            return {"skein": skein_input(inputs).as_json()}
        name, language, code = _script_to_run(ctx, config)
        skein = skein_input(inputs)
        snapshot = _script_snapshot(ctx, inputs)
        limits = ScriptLimits(time_ms=config.time_limit_ms, memory_mb=config.memory_mb)
        changed = await run_script_shuttle(
            skein,
            snapshot,
            language=language,
            code=code,
            name=name,
            limits=limits,
            node=None if config.script else ctx.node_id,
        )
        return {"skein": changed.as_json()}


def script_library(services: WorkflowServices) -> ScriptLibrary:
    """The scripts a node may run: the project's and the enabled plugins'."""
    folders = services.script_folders() if services.script_folders is not None else {}
    return ScriptLibrary(services.project_dir, folders)


def _script_to_run(
    ctx: NodeContext, config: ScriptConfig
) -> tuple[str, Literal["javascript", "lua"], str]:
    """(name, language, code): the named file's, else the inline code's."""
    if not config.script:
        return f"{ctx.node_id} (inline)", config.language, config.code
    try:
        found = script_library(ctx.services).read(config.script)
    except StoryloomError as exc:
        raise ShuttleError(f"config script: {exc}") from None
    return found.name, found.language, found.code


def _script_snapshot(ctx: NodeContext, inputs: Mapping[str, Any]) -> ContextSnapshot | None:
    if inputs.get("snapshot") is not None:
        return snapshot_input(inputs)
    if isinstance(ctx.interface_inputs.get("snapshot"), dict):
        return snapshot_input(ctx.interface_inputs)
    return None


class TokenBudgetConfig(NodeConfig):
    max_context_tokens: int = Field(
        0,
        ge=0,
        description="The model's context size; 0: settings' user_llm.context_window, "
        f"else {DEFAULT_CONTEXT_WINDOW}",
    )
    reserve_tokens: int = Field(
        1024, ge=0, description="Kept free for the reply (SillyTavern's max response length)"
    )


class TokenBudget(NodeType[TokenBudgetConfig]):
    type: ClassVar[str] = "chat:TokenBudget"
    display_name: ClassVar[str] = "Token Budget"
    category: ClassVar[str] = CATEGORY
    description: ClassVar[str] = (
        "Counts the tokens of every block and cuts the lowest priority first (examples, "
        "then the oldest history, then the least important lore) until the prompt fits; "
        "records what it cut."
    )
    inputs: ClassVar[tuple[Slot, ...]] = (SKEIN_IN,)
    outputs: ClassVar[tuple[Slot, ...]] = (
        Slot(name="skein", type=SKEIN, description="Measured and trimmed to the budget"),
    )

    def fingerprint(self, config: TokenBudgetConfig, services: WorkflowServices) -> str | None:
        return "||".join(
            f"{llm.model}|{llm.token_encoding}|{llm.context_window}|{llm.tokenizer}|"
            f"{llm.tokenizer_model}|{llm.base_url}|{templates_fingerprint(services, llm)}"
            for llm in turn_endpoints(services, "user")
        )

    async def run(
        self, ctx: NodeContext, inputs: dict[str, Any], config: TokenBudgetConfig
    ) -> dict[str, Any]:
        skein = skein_input(inputs)
        llm = turn_endpoint(ctx, inputs, "user")
        # The server's own size caps what the pipeline or the setting asks for.
        context = await ctx.run_blocking(context_size_of, llm, config.max_context_tokens or None)
        # The reply must fit too: the longest one the settings ask for, at least.
        reserve = max(config.reserve_tokens, llm.parameters.max_tokens or 0)
        budget = max(0, context - reserve)
        counter = counter_for(llm)
        cost = CHAT_COST
        if llm.api != "chat":
            # The instruct template's sequences around every message count as well.
            templates = prompt_templates(ctx.services, llm)
            cost = await ctx.run_blocking(template_cost, templates, counter.count)
        trimmed = await ctx.run_blocking(apply_budget, skein, budget, counter.count, cost)
        # Read off the loop: the name may probe the endpoint's tokenize route.
        trimmed.tokenizer = await ctx.run_blocking(lambda: counter.name)
        return {"skein": trimmed.as_json()}


class WeaverConfig(NodeConfig):
    names_behavior: Annotated[
        NamesBehavior,
        Suggestions(
            *(
                Suggestion(value=value, label=label)
                for value, label in zip(
                    NAMES_BEHAVIORS,
                    (
                        "None",
                        "Default (only other speakers)",
                        "Completion object (name field)",
                        "Message content (Name: prefix)",
                    ),
                    strict=True,
                )
            )
        ),
    ] = Field("none", description="How speakers are named (SillyTavern's character names behavior)")
    squash_system: bool = Field(False, description="Merge consecutive system messages into one")


class Weaver(NodeType[WeaverConfig]):
    type: ClassVar[str] = "chat:Weaver"
    display_name: ClassVar[str] = "Weaver"
    category: ClassVar[str] = CATEGORY
    description: ClassVar[str] = (
        "Renders the Skein as chat messages: groups joined, example dialogues split into "
        "turns, in-chat blocks woven into the history at their depth, speakers named as "
        "configured."
    )
    inputs: ClassVar[tuple[Slot, ...]] = (SKEIN_IN,)
    outputs: ClassVar[tuple[Slot, ...]] = (
        Slot(name="messages", type=MESSAGES, description="[{role, content, name?}]"),
    )

    async def run(
        self, ctx: NodeContext, inputs: dict[str, Any], config: WeaverConfig
    ) -> dict[str, Any]:
        skein = skein_input(inputs)
        woven = weave_sources(
            skein, names_behavior=config.names_behavior, squash_system=config.squash_system
        )
        return {"messages": mark_lore_images(woven, ctx.services.knowledge)}


# -- the prompt as one string (text-completion APIs) -----------------------------------------

TEXT_PROMPT = OBJECT
"""A text-completion prompt as JSON: ``text``, ``stop``, ``pieces``, template names."""


def prompt_templates(
    services: WorkflowServices, endpoint: ChatEndpoint, instruct: str = "", context: str = ""
) -> ResolvedTemplates:
    """The templates a text-completion prompt for ``endpoint`` is formatted with: those
    named by ``instruct`` / ``context``, else the connection's (see
    :meth:`TemplateLibrary.templates_for`)."""
    library = services.prompt_templates or TemplateLibrary(None)
    named = endpoint.model_copy(
        update={
            "instruct_template": instruct or endpoint.instruct_template,
            "context_template": context or endpoint.context_template,
        }
    )
    try:
        return library.templates_for(named)
    except StoryloomError as exc:
        where = "config" if instruct or context else "the connection's templates (Settings)"
        raise ShuttleError(f"{where}: {exc}") from None


def templates_fingerprint(
    services: WorkflowServices, endpoint: ChatEndpoint, instruct: str = "", context: str = ""
) -> str:
    """What of the templates decides a prompt: an edited template file formats anew."""
    if endpoint.api == "chat":
        return "chat"
    try:
        templates = prompt_templates(services, endpoint, instruct, context)
    except ShuttleError as exc:
        return f"error: {exc}"  # the run reports it
    return (
        f"{endpoint.api}|{templates.instruct.model_dump_json()}|"
        f"{templates.context.model_dump_json()}"
    )


class TextPromptConfig(NodeConfig):
    role: LlmRole = Field(
        "user", description="Whose connection's API and templates: the LLM Invoker's role"
    )
    instruct_template: str = Field(
        "", description="An instruct template's name; empty: the connection's"
    )
    context_template: str = Field(
        "", description="A context template's name; empty: the connection's"
    )


class TextPromptNode(NodeType[TextPromptConfig]):
    type: ClassVar[str] = "chat:TextPrompt"
    display_name: ClassVar[str] = "Text Prompt"
    category: ClassVar[str] = CATEGORY
    description: ClassVar[str] = (
        "For a text-completion API (OpenAI /v1/completions, llama.cpp, KoboldCpp): the "
        "Skein as one prompt string, laid out as SillyTavern's instruct mode: the card, "
        "persona and lore in the context template's story string, the examples, the chat "
        "start, every message in the instruct template's sequences, in-chat blocks at "
        "their depth; each part labelled with its block. A chat API: an empty prompt."
    )
    inputs: ClassVar[tuple[Slot, ...]] = (SKEIN_IN,)
    outputs: ClassVar[tuple[Slot, ...]] = (
        Slot(
            name="prompt",
            type=TEXT_PROMPT,
            description="{text, stop, pieces: [{start, end, kind, source, block}], instruct, "
            "context}; text empty for a chat API",
        ),
    )

    def fingerprint(self, config: TextPromptConfig, services: WorkflowServices) -> str | None:
        return "||".join(
            templates_fingerprint(
                services, endpoint, config.instruct_template, config.context_template
            )
            for endpoint in turn_endpoints(services, config.role)
        )

    async def run(
        self, ctx: NodeContext, inputs: dict[str, Any], config: TextPromptConfig
    ) -> dict[str, Any]:
        endpoint = turn_endpoint(ctx, inputs, config.role)
        if endpoint.api == "chat":
            return {"prompt": {"text": "", "stop": [], "pieces": []}}
        templates = prompt_templates(
            ctx.services, endpoint, config.instruct_template, config.context_template
        )
        skein = skein_input(inputs)
        return {"prompt": await ctx.run_blocking(skein_text_prompt, skein, templates)}


def prompt_input(inputs: Mapping[str, Any], name: str = "prompt") -> TextPrompt | None:
    """A wired text prompt with text, else None (unwired, or a chat API's empty one)."""
    value = inputs.get(name)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ShuttleError(f"input {name}: expected a text prompt object, got {value!r}")
    if not value.get("text"):
        return None
    try:
        return TextPrompt.model_validate(
            {"text": value["text"], "stop": value.get("stop") or [], "pieces": []}
        )
    except ValidationError as exc:
        raise ShuttleError(_problem(exc, f"input {name}")) from None


# -- the model ------------------------------------------------------------------------------


class LLMInvokerConfig(NodeConfig):
    role: LlmRole = "user"
    model: str | None = Field(None, description="Another model on the same endpoint (optional)")
    temperature: float | None = Field(
        None, ge=0, le=2, description="Sampling temperature (optional)"
    )
    top_p: float | None = Field(None, ge=0, le=1, description="Top P (optional)")
    max_tokens: int | None = Field(None, ge=1, description="Longest reply in tokens (optional)")
    frequency_penalty: float | None = Field(
        None, ge=-2, le=2, description="Frequency penalty (optional)"
    )
    presence_penalty: float | None = Field(
        None, ge=-2, le=2, description="Presence penalty (optional)"
    )
    stop: list[str] = Field(
        default_factory=list, description="Strings that end the reply (optional)"
    )
    seed: int | None = Field(
        None, description="Fixed seed, where the endpoint honours it (optional)"
    )


def sampling_overrides(config: LLMInvokerConfig) -> dict[str, Any]:
    """The config values an LLM call sends instead of the endpoint's (unset ones omitted)."""
    overrides = config.model_dump(exclude={"role", "stop"}, exclude_none=True)
    if overrides.get("model") == "":
        del overrides["model"]
    if config.stop:
        overrides["stop"] = list(config.stop)
    return overrides


class LLMInvoker(NodeType[LLMInvokerConfig]):
    type: ClassVar[str] = "chat:LLMInvoker"
    display_name: ClassVar[str] = "LLM Invoker"
    category: ClassVar[str] = CATEGORY
    description: ClassVar[str] = (
        "Sends the messages to the user's (or agent's) model and streams the answer. "
        "When the turn has an agent profile, the agent answers: its tool calls run "
        "within the turn and come out as steps. Never cached: a swipe asks again."
    )
    idempotent: ClassVar[bool] = False
    streaming: ClassVar[bool] = True
    inputs: ClassVar[tuple[Slot, ...]] = (
        Slot(name="messages", type=MESSAGES, description="The prompt as chat messages"),
        Slot(
            name="prompt",
            type=TEXT_PROMPT,
            required=False,
            description="The prompt as one string (the Text Prompt node's): sent as it is "
            "on a text-completion API; unwired there, the messages are formatted with the "
            "connection's templates",
        ),
        Slot(
            name="snapshot",
            type=OBJECT,
            required=False,
            description="The turn's snapshot: its agent profile, turn key and variables "
            "(unwired: the run's snapshot input)",
        ),
    )
    outputs: ClassVar[tuple[Slot, ...]] = (
        Slot(name="text", type=STRING, description="The model's answer, raw"),
        Slot(
            name="reasoning",
            type=STRING,
            description="Reasoning the endpoint sent apart from the answer (may be empty)",
        ),
        Slot(
            name="steps",
            type=ARRAY,
            description="An agent turn's tool calls and results, in order (else empty)",
        ),
        Slot(
            name="variables",
            type=STATE_DELTA,
            description="Variables the agent's tools set (chat:SetVariable), as set ops",
        ),
    )

    async def run(
        self, ctx: NodeContext, inputs: dict[str, Any], config: LLMInvokerConfig
    ) -> dict[str, Any]:
        messages = inputs.get("messages")
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            raise ShuttleError(f"input messages: expected a list of messages, got {messages!r}")
        overrides = sampling_overrides(config)
        snapshot = _agent_snapshot(ctx, inputs)
        endpoint = turn_endpoint(ctx, inputs, config.role)
        request = await ctx.run_blocking(
            request_messages, messages, endpoint, ctx.services.knowledge
        )
        if snapshot is not None and snapshot.agent_profile is not None:
            return await _agent_turn(ctx, snapshot, snapshot.agent_profile, request, overrides)
        prompt = prompt_input(inputs) if endpoint.api != "chat" else None
        # An LLMError propagates as is: the chat turn keeps its partial_text.
        async with ChatClient(endpoint) as client:
            stream: AnswerStream = (
                client.stream_prompt(prompt, **overrides)
                if prompt is not None
                else client.stream(request, **overrides)
            )
            async with stream:
                return await _streamed(ctx, stream)


async def _streamed(ctx: NodeContext, stream: AnswerStream) -> dict[str, Any]:
    async for delta in stream:
        await ctx.emit(delta)
    return {"text": stream.text, "reasoning": stream.reasoning_text, "steps": [], "variables": []}


def turn_endpoints(services: WorkflowServices, role: str) -> list[ChatEndpoint]:
    """Every endpoint a turn's ``role`` may be answered by (see :func:`turn_endpoint`):
    the role's model and each connection, for a fingerprint, since the turn's connection
    is not in the skein."""
    settings = services.require_settings()
    return [
        settings.endpoint_for(role),
        *(settings.connections[n] for n in sorted(settings.connections)),
    ]


def turn_endpoint(ctx: NodeContext, inputs: Mapping[str, Any], role: str) -> ChatEndpoint:
    """The endpoint a chat turn's ``role`` asks: for the user role, the connection the
    turn's snapshot names (the group member's, the chat's or the character's), else the
    role's model. The snapshot is the node's input, else the run's."""
    raw = _snapshot_source(ctx, inputs).get("snapshot")
    name: Any = None
    chosen_in: Any = ""
    if role == "user" and isinstance(raw, ContextSnapshot):
        name, chosen_in = raw.connection, raw.connection_chosen_in
    elif role == "user" and isinstance(raw, dict):
        name, chosen_in = raw.get("connection"), raw.get("connection_chosen_in", "")
    return ctx.services.require_settings().endpoint_for(
        role,
        name if isinstance(name, str) else None,
        chosen_in=chosen_in if isinstance(chosen_in, str) else "",
    )


def _snapshot_source(ctx: NodeContext, inputs: Mapping[str, Any]) -> Mapping[str, Any]:
    """Where a turn's snapshot is read: the node's input, else the run's (a pipeline
    saved before the invoker had this input still runs its agent and its connection)."""
    return inputs if inputs.get("snapshot") is not None else ctx.interface_inputs


def _agent_snapshot(ctx: NodeContext, inputs: Mapping[str, Any]) -> ContextSnapshot | None:
    """The turn's snapshot when it names an agent profile the process can run."""
    agents = ctx.services.agents
    if agents is None:
        return None
    source = _snapshot_source(ctx, inputs)
    raw = source.get("snapshot")
    if raw is None:
        return None
    if isinstance(raw, dict) and not raw.get("agent_profile"):
        return None  # the common case: no agent, and no validation
    snapshot = snapshot_input(source)
    profile = snapshot.agent_profile
    if not profile:
        return None
    if not agents.has_profile(profile):
        # The user chose an agent; a reply without its tools would pass for one with them.
        raise ShuttleError(
            f"agent profile {profile!r} does not exist: create it on the Tools page, or "
            "pick another (or none) in the chat's settings"
        )
    return snapshot


async def _agent_turn(
    ctx: NodeContext,
    snapshot: ContextSnapshot,
    profile: str,
    messages: list[dict[str, Any]],
    overrides: dict[str, Any],
) -> dict[str, Any]:
    agents = ctx.services.agents
    assert agents is not None
    variables = TurnVariables(snapshot.state.variables)
    request = AgentTurnRequest(
        profile_id=profile,
        messages=messages,
        overrides=overrides,
        turn_key=snapshot.turn_key,
        conversation_id=snapshot.conversation_id,
        variables=variables,
        on_text=ctx.emit,
        connection=snapshot.connection,
        connection_chosen_in=snapshot.connection_chosen_in,
    )
    # An LLMError propagates as is, with the text shown so far as its partial_text.
    outcome = await agents.run_turn(ctx, request)
    return {
        "text": outcome.text,
        "reasoning": outcome.reasoning,
        "steps": [step.model_dump(mode="json", by_alias=True) for step in outcome.steps],
        "variables": ops_to_json(variables.ops),
    }


# -- the answer -----------------------------------------------------------------------------


class FilamentParserConfig(NodeConfig):
    extra_tags: list[str] = Field(
        default_factory=list, description="More tag names whose text is captured (e.g. status)"
    )


class FilamentParser(NodeType[FilamentParserConfig]):
    type: ClassVar[str] = "chat:FilamentParser"
    display_name: ClassVar[str] = "Filament Parser"
    category: ClassVar[str] = CATEGORY
    description: ClassVar[str] = (
        "Splits the answer into the visible reply, the folded thought and the state "
        "updates (<state_update>, MVU <UpdateVariable><JSONPatch>); [PROGRESS] is noted."
    )
    inputs: ClassVar[tuple[Slot, ...]] = (
        Slot(name="text", type=STRING, description="The model's raw answer"),
        Slot(
            name="reasoning",
            type=STRING,
            required=False,
            default="",
            description="Reasoning sent apart from the answer; joins the thought",
        ),
    )
    outputs: ClassVar[tuple[Slot, ...]] = (
        Slot(name="reply", type=STRING, description="What the chat shows"),
        Slot(name="thought", type=STRING, description="<thought> text (and reasoning)"),
        Slot(name="updates", type=STATE_DELTA, description="The state operations, in order"),
        Slot(name="progress", type=BOOLEAN, description="A [PROGRESS] marker was seen"),
        Slot(name="problems", type=ARRAY, description="Malformed updates and the like"),
        Slot(name="tags", type=OBJECT, description="Text of the extra tags, by name"),
    )

    async def run(
        self, ctx: NodeContext, inputs: dict[str, Any], config: FilamentParserConfig
    ) -> dict[str, Any]:
        text = inputs.get("text")
        if not isinstance(text, str):
            raise ShuttleError(f"input text: expected text, got {text!r}")
        extra = config.extra_tags
        if not all(extra):
            raise ShuttleError(f"config extra_tags: expected a list of tag names, got {extra!r}")
        try:
            tags = FilamentTags(extra=tuple(extra))
        except ValueError as exc:
            raise ShuttleError(f"config extra_tags: {exc}") from None
        result = parse_filament(text, tags)
        reasoning = inputs.get("reasoning")
        thought = result.thought
        if isinstance(reasoning, str) and reasoning.strip():
            thought = "\n\n".join(part for part in (reasoning.strip(), thought) if part)
        return {
            "reply": result.reply,
            "thought": thought,
            "updates": ops_to_json(result.ops),
            "progress": result.progress,
            "problems": list(result.problems),
            "tags": dict(result.tags),
        }


@dataclass(frozen=True)
class StateUpdate:
    """A turn's new state, the RFC 6902 patch old → new, and what could not be applied."""

    state: ChatState
    delta: list[dict[str, Any]]
    problems: list[str] = field(default_factory=list)
    warnings: list[MvuWarning] = field(default_factory=list)
    """MVU updates refused by ``$meta`` or the card's schema."""


def next_state(
    snapshot: ContextSnapshot,
    ops: Sequence[StateOp],
    *,
    variables: Mapping[str, Any] | None = None,
    progressed: bool = False,
    schema: Mapping[str, Any] | None = None,
) -> StateUpdate:
    """The state after a turn: the snapshot's, with ``variables`` (what the prompt's
    macros left; default the snapshot's) and then ``ops`` applied (with MVU's rules under
    ``stat_data``, ``schema`` its JSON Schema: :func:`apply_mvu_ops`), the lore timers of
    this turn's activation, and the plot moved on by the director."""
    old = snapshot.state
    problems: list[str] = []
    base = dict(variables) if variables is not None else dict(old.variables)
    outcome = apply_mvu_ops(base, ops, schema)
    problems.extend(outcome.problems)
    timed = old.timed_effects
    if snapshot.lore_timed_effects:
        try:
            timed = TimedEffectsState.model_validate(snapshot.lore_timed_effects)
        except ValidationError as exc:
            problems.append(_problem(exc, "snapshot lore_timed_effects") + "; timers kept")
    plot = old.plot
    if plot is not None and snapshot.settings.director_enabled:
        plot = advance_plot(plot, len(outline_points(snapshot.background)), progressed)
    new = old.model_copy(
        update={"variables": outcome.variables, "timed_effects": timed, "plot": plot}
    )
    new = ChatState.model_validate(new.as_json())
    delta = state_delta(old.as_json(), new.as_json())
    return StateUpdate(state=new, delta=delta, problems=problems, warnings=outcome.warnings)


class StateUpdater(NodeType):
    type: ClassVar[str] = "chat:StateUpdater"
    display_name: ClassVar[str] = "State Updater"
    category: ClassVar[str] = CATEGORY
    description: ClassVar[str] = (
        "The state after this turn: variables set by macros, then by the turn's tools, "
        "then the reply's updates; "
        "this turn's lore timers; the director's plot moved on. Gives the new state, the "
        "JSON Patch from the old one and the problems."
    )
    inputs: ClassVar[tuple[Slot, ...]] = (
        SNAPSHOT_IN,
        Slot(name="updates", type=STATE_DELTA, description="State operations of the reply"),
        Slot(
            name="skein",
            type=SKEIN,
            required=False,
            description="The prompt; its variables (set by macros) are the starting point",
        ),
        Slot(
            name="progress",
            type=BOOLEAN,
            required=False,
            default=False,
            description="The reply reached the current outline point",
        ),
        Slot(
            name="parse_problems",
            type=ARRAY,
            required=False,
            default=[],
            description="Problems found earlier (the parser's), reported first",
        ),
        Slot(
            name="tool_updates",
            type=STATE_DELTA,
            required=False,
            default=[],
            description="Variables the turn's tools set; applied before the reply's updates",
        ),
    )
    outputs: ClassVar[tuple[Slot, ...]] = (
        Slot(name="state", type=OBJECT, description="The chat state after this turn"),
        Slot(name="delta", type=ARRAY, description="RFC 6902 operations, old state → new"),
        Slot(name="problems", type=ARRAY, description="Parse problems, then update problems"),
    )

    async def run(
        self, ctx: NodeContext, inputs: dict[str, Any], config: NodeConfig
    ) -> dict[str, Any]:
        snapshot = snapshot_input(inputs)
        decode_problems: list[str] = []
        raw = inputs.get("updates")
        tool_raw = inputs.get("tool_updates")
        ops = [
            *ops_from_json([] if tool_raw is None else tool_raw, decode_problems),
            *ops_from_json([] if raw is None else raw, decode_problems),
        ]
        variables = None
        if inputs.get("skein") is not None:
            variables = skein_input(inputs).variables
        schema: dict[str, Any] | None = None
        try:
            # run once per script text (cached), in the sandbox: off the event loop
            schema = await asyncio.to_thread(card_state_schema, snapshot.character.card)
        except ZodSchemaError as exc:
            decode_problems.append(f"{exc}; the updates were applied without the schema")
        update = next_state(
            snapshot,
            ops,
            variables=variables,
            progressed=bool(inputs.get("progress")),
            schema=schema,
        )
        earlier = inputs.get("parse_problems") or []
        problems = [str(p) for p in earlier] if isinstance(earlier, list) else [str(earlier)]
        return {
            "state": update.state.as_json(),
            "delta": update.delta,
            # refused MVU updates travel as objects: the turn keeps them for the page
            "problems": [
                *problems,
                *decode_problems,
                *update.problems,
                *(w.model_dump(mode="json") for w in update.warnings),
            ],
        }


NODE_TYPES: tuple[type[NodeType], ...] = (
    SkeinBuilder,
    PromptAST,
    RegexCleaner,
    Script,
    TokenBudget,
    Weaver,
    TextPromptNode,
    LLMInvoker,
    FilamentParser,
    StateUpdater,
)


@hookimpl
def storyloom_node_types() -> list[type[NodeType]]:
    return list(NODE_TYPES)
