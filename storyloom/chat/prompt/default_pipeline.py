"""The chat turn as a workflow: the built-in pipeline, and finding a conversation's own.

``chat-default`` chains the shuttle nodes (seed 001 §5): GroupInput → Skein Builder →
Prompt AST → Regex Cleaner → Script → Token Budget → Weaver → Text Prompt → LLM
Invoker → Filament Parser → State Updater → GroupOutput. The Weaver's messages go to a
chat API, the Text Prompt's one string (empty for a chat API) to a text-completion one.
It is an ordinary workflow: a user opens it in the canvas, changes it and saves it under
the same id (their copy wins) or another one (and points a conversation's
``settings.pipeline`` at it). A SillyTavern preset imports as
the same graph with its prompts and sampling in the nodes' config
(:mod:`storyloom.chat.prompt.preset_pipeline`).

Interface: input ``snapshot`` (the :class:`~storyloom.chat.store.snapshot.ContextSnapshot`
as JSON); outputs ``reply``, ``thought``, ``state``, ``delta``, ``skein`` (as trimmed,
for the inspector), ``messages`` (as sent to a chat API), ``prompt`` (the text sent to a
text-completion API, with its pieces' sources), ``problems``, ``raw`` (the model's text) and
``steps`` (an agent turn's tool calls; the invoker runs the snapshot's agent profile).
The LLM Invoker streams; its node id is :data:`INVOKER_NODE` in this graph, and a
caller looking at another pipeline finds it by its type, :data:`INVOKER_TYPE`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError

from storyloom.chat.prompt.shuttle_nodes import FilamentParser, TokenBudget
from storyloom.chat.store.conversation import DEFAULT_PIPELINE
from storyloom.core.errors import FieldProblem, FileFormatError
from storyloom.workflow.node_type import NodeConfig, NodeType
from storyloom.workflow.workflow_file import WORKFLOWS_DIR, Workflow, WorkflowLibrary

INVOKER_NODE = "invoker"
INVOKER_TYPE = "chat:LLMInvoker"

_STEP_X = 300.0
_ROW_Y = 0.0

# (node id, type) left to right, the order a turn runs in. No labels: the canvas names
# each node by its type, in the page's language, which a label in English would hide.
_CHAIN: tuple[tuple[str, str], ...] = (
    ("input", "core:GroupInput"),
    ("builder", "chat:SkeinBuilder"),
    ("ast", "chat:PromptAST"),
    ("regex", "chat:RegexCleaner"),
    ("script", "chat:Script"),
    ("budget", "chat:TokenBudget"),
    ("weaver", "chat:Weaver"),
    ("textprompt", "chat:TextPrompt"),
    (INVOKER_NODE, INVOKER_TYPE),
    ("parser", "chat:FilamentParser"),
    ("updater", "chat:StateUpdater"),
    ("output", "core:GroupOutput"),
)

_EDGES: tuple[str, ...] = (
    "input.snapshot -> builder.snapshot",
    "input.snapshot -> ast.snapshot",
    "input.snapshot -> regex.snapshot",
    "input.snapshot -> script.snapshot",
    "input.snapshot -> updater.snapshot",
    "builder.skein -> ast.skein",
    "ast.skein -> regex.skein",
    "regex.skein -> script.skein",
    "script.skein -> budget.skein",
    "budget.skein -> weaver.skein",
    f"weaver.messages -> {INVOKER_NODE}.messages",
    "budget.skein -> textprompt.skein",
    f"textprompt.prompt -> {INVOKER_NODE}.prompt",
    f"input.snapshot -> {INVOKER_NODE}.snapshot",
    f"{INVOKER_NODE}.text -> parser.text",
    f"{INVOKER_NODE}.reasoning -> parser.reasoning",
    "parser.updates -> updater.updates",
    "parser.progress -> updater.progress",
    "parser.problems -> updater.parse_problems",
    f"{INVOKER_NODE}.variables -> updater.tool_updates",
    "budget.skein -> updater.skein",
    "parser.reply -> output.reply",
    "parser.thought -> output.thought",
    "updater.state -> output.state",
    "updater.delta -> output.delta",
    "budget.skein -> output.skein",
    "weaver.messages -> output.messages",
    "textprompt.prompt -> output.prompt",
    "updater.problems -> output.problems",
    f"{INVOKER_NODE}.text -> output.raw",
    f"{INVOKER_NODE}.steps -> output.steps",
)

_OUTPUTS: dict[str, tuple[str, str]] = {
    "reply": ("STRING", "The visible reply"),
    "thought": ("STRING", "The folded thought (<thought>, reasoning)"),
    "state": ("OBJECT", "The chat state after this turn"),
    "delta": ("ARRAY", "RFC 6902 operations from the state before the turn"),
    "skein": ("SKEIN", "The prompt's blocks with sources, tokens and what was cut"),
    "messages": ("MESSAGES", "The messages sent to the model"),
    "prompt": (
        "OBJECT",
        "A text-completion API's prompt as sent: text, stop strings, pieces with sources",
    ),
    "problems": ("ARRAY", "Malformed updates and other problems of the turn"),
    "raw": ("STRING", "The model's answer as it came"),
    "steps": ("ARRAY", "An agent turn's tool calls and their results (else empty)"),
}


def _edge(text: str) -> dict[str, str]:
    left, right = (part.strip() for part in text.split("->"))
    source, source_slot = left.split(".")
    target, target_slot = right.split(".")
    return {
        "source": source,
        "sourceSlot": source_slot,
        "target": target,
        "targetSlot": target_slot,
    }


def pipeline_workflow(
    workflow_id: str,
    *,
    name: str,
    description: str,
    config: Mapping[str, Mapping[str, Any]] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> Workflow:
    """The pipeline graph with node config by node id (``builder``, ``budget``...)."""
    config = config or {}
    nodes: list[dict[str, Any]] = []
    for step, (node_id, node_type) in enumerate(_CHAIN):
        node: dict[str, Any] = {
            "id": node_id,
            "type": node_type,
            "position": {"x": step * _STEP_X, "y": _ROW_Y},
        }
        if node_id in config:
            node["config"] = dict(config[node_id])
        nodes.append(node)
    return Workflow.model_validate(
        {
            **(extra or {}),
            "id": workflow_id,
            "name": name,
            "description": description,
            "nodes": nodes,
            "edges": [_edge(edge) for edge in _EDGES],
            "interfaceInputs": {
                "snapshot": {
                    "dataFlowType": "OBJECT",
                    "required": True,
                    "description": "The turn's context snapshot (ContextSnapshot JSON)",
                }
            },
            "interfaceOutputs": {
                slot: {"dataFlowType": kind, "description": text}
                for slot, (kind, text) in _OUTPUTS.items()
            },
        }
    )


def default_pipeline() -> Workflow:
    """The built-in chat pipeline (``chat-default``), SillyTavern's default preset."""
    return pipeline_workflow(
        DEFAULT_PIPELINE,
        name="Chat (default)",
        description="One chat turn: snapshot → Skein → prompt → model → reply and state. "
        "Laid out as SillyTavern's default chat-completion preset.",
    )


def pipeline_for(project_dir: Path | None, pipeline_id: str = DEFAULT_PIPELINE) -> Workflow:
    """The pipeline a conversation runs: ``workflows/<id>.json`` of the project when it
    exists, else the built-in one for ``chat-default``. Any other missing id is a
    :class:`~storyloom.core.errors.FileFormatError` naming the file."""
    if project_dir is not None:
        library = WorkflowLibrary(project_dir)
        if library.exists(pipeline_id) or pipeline_id != DEFAULT_PIPELINE:
            return library.load(pipeline_id)
    if pipeline_id == DEFAULT_PIPELINE:
        return default_pipeline()
    raise FileFormatError(
        Path(WORKFLOWS_DIR) / f"{pipeline_id}.json",
        [FieldProblem("", "no project to load this pipeline workflow from")],
    )


C = TypeVar("C", bound=NodeConfig)


def _configs(workflow: Workflow, node_type: type[NodeType[C]]) -> list[C]:
    """The valid configs of the nodes of ``node_type``; an invalid one is left out here
    (validation reports it when the pipeline runs)."""
    configs: list[C] = []
    for node in workflow.nodes:
        if node.type == node_type.type:
            try:
                configs.append(node_type.parse_config(node.config))
            except ValidationError:
                continue
    return configs


def pipeline_extra_tags(workflow: Workflow) -> tuple[str, ...]:
    """The extra Filament tags the pipeline's parser knows: the live parser that
    streams the reply to the page must know the same ones, or their text would flash
    in the reply while it streams."""
    tags: list[str] = []
    for config in _configs(workflow, FilamentParser):
        tags += config.extra_tags
    return tuple(dict.fromkeys(tags))


def pipeline_context_tokens(workflow: Workflow) -> int | None:
    """The context size the pipeline's Token Budget is set to (None: the settings'),
    so the snapshot brings as much history as that budget can use."""
    sizes = [
        config.max_context_tokens
        for config in _configs(workflow, TokenBudget)
        if config.max_context_tokens > 0
    ]
    return max(sizes) if sizes else None
