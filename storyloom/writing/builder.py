"""Role B (seed 002): the agent model proposes nodes and edges for a workflow; nothing
changes until the author accepts.

``request`` asks the agent model for ``{"nodes": [...], "edges": [...], "explanation"}``
given the node catalog and the current workflow, checks every node type against the
registry and the merged workflow with the workflow validation (only problems the
suggestion adds count: an unfinished workflow stays unfinished), and keeps the
suggestion as ``pending`` in ``writing_suggestion``. The answer is asked for with its JSON
schema where the endpoint takes one (:mod:`storyloom.llm.structured_output`); a malformed
or unusable answer is sent back to the model once with what was wrong; a second bad
answer is :class:`BuilderError`.
``accept`` applies the stored nodes and edges (ids that meanwhile clash are renamed) and
saves the workflow; ``reject`` closes the suggestion. Each suggestion is decided once.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from storyloom.core.errors import (
    Conflict,
    FieldProblem,
    InvalidInput,
    NotFound,
    Unavailable,
    problems_from_validation,
)
from storyloom.core.settings import ChatEndpoint
from storyloom.llm.errors import JsonAnswerError
from storyloom.llm.structured_output import ask_json
from storyloom.store.database import Database
from storyloom.workflow.node_registry import NodeRegistry
from storyloom.workflow.validation import validate_workflow
from storyloom.workflow.workflow_file import Position, Workflow, WorkflowEdge, WorkflowNode
from storyloom.workflow.workflow_graph import WorkflowGraph

SuggestionState = Literal["pending", "accepted", "rejected"]

_STEP_X = 320.0
_NEW_ROW_Y = 240.0

BUILDER_SYSTEM = (
    "You are Role B of a writing studio: you extend a workflow of typed nodes for a "
    "novelist. Use only the node types of the catalog, with config fields of their "
    "schema and slot names they declare. Answer only JSON: "
    '{"nodes":[{"id":"<new id>","type":"<node type>","config":{...}}],'
    '"edges":[{"source":"<node id>","sourceSlot":"<output>","target":"<node id>",'
    '"targetSlot":"<input>"}],"explanation":"<one or two sentences for the author>"}. '
    "Edges may connect new nodes and nodes already in the workflow. Add nothing the "
    "author did not ask for."
)


class BuilderError(InvalidInput):
    """The agent model's suggestion cannot be used: malformed JSON, unknown node types,
    or a workflow the suggestion would break. ``problems`` names each."""


class SuggestionNotFound(NotFound):
    def __init__(self, suggestion_id: str) -> None:
        super().__init__(f"no suggestion {suggestion_id!r}")


class SuggestionDecided(Conflict):
    """The suggestion was already accepted or rejected."""

    def __init__(self, suggestion_id: str, state: str) -> None:
        super().__init__(f"suggestion {suggestion_id!r} was already {state}")


class SuggestedEdge(BaseModel):
    """An edge as the model gives it: the slots may be left out when they are obvious."""

    model_config = ConfigDict(populate_by_name=True, extra="ignore")

    source: str = Field(min_length=1)
    target: str = Field(min_length=1)
    source_slot: str | None = Field(default=None, alias="sourceSlot")
    target_slot: str | None = Field(default=None, alias="targetSlot")


class _Answer(BaseModel):
    model_config = ConfigDict(extra="ignore")

    nodes: list[WorkflowNode] = Field(default_factory=list)
    edges: list[SuggestedEdge] = Field(default_factory=list)
    explanation: str = ""


class Suggestion(BaseModel):
    """What ``build:suggestion`` carries: the nodes and edges to add (ids as they will be
    applied) and why."""

    model_config = ConfigDict(populate_by_name=True)

    suggestion_id: str = Field(alias="suggestionId")
    workflow_id: str = Field(alias="workflowId")
    nodes: list[WorkflowNode]
    edges: list[WorkflowEdge]
    explanation: str = ""

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class _Stored(BaseModel):
    """The ``payload`` column: the suggestion, and whether it creates its workflow."""

    suggestion: Suggestion
    new_workflow: bool = False


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class Builder:
    """Role B over one project's workflows and the studio's database."""

    def __init__(
        self,
        store_db: Database,
        agent_endpoint: Callable[[], ChatEndpoint | None],
        registry: NodeRegistry,
        load_workflow: Callable[[str], Workflow],
        save_workflow: Callable[[Workflow], None],
    ) -> None:
        self.database = store_db
        self.agent_endpoint = agent_endpoint
        self.registry = registry
        self.load_workflow = load_workflow
        self.save_workflow = save_workflow

    # -- request ------------------------------------------------------------------------

    async def request(self, intent: str, current_workflow: str | None) -> Suggestion:
        """Ask the agent model for a suggestion; stored as pending, nothing applied."""
        if not intent.strip():
            raise BuilderError("say what the workflow should do", [FieldProblem("intent", "empty")])
        endpoint = self.agent_endpoint()
        if endpoint is None or not endpoint.configured:
            raise Unavailable("Role B needs the agent model: set the agent model in Settings")
        suggestion_id = f"sg_{uuid.uuid4().hex[:12]}"
        if current_workflow:
            workflow = self.load_workflow(current_workflow)
            new = False
        else:
            workflow = Workflow(id=f"built-{suggestion_id[3:11]}", name=intent.strip()[:60])
            new = True
        messages = [
            {"role": "system", "content": BUILDER_SYSTEM},
            {"role": "user", "content": self._prompt(intent, workflow)},
        ]

        async def placed(answer: _Answer) -> Suggestion:
            # Unknown node types, bad config and dangling edges are problems of the
            # answer: the model hears them in the one retry, as it hears schema problems.
            return self._suggestion(answer, workflow, suggestion_id)

        try:
            suggestion = await ask_json(
                endpoint, messages, _Answer, what="workflow suggestion", accept=placed
            )
        except BuilderError:
            raise
        except JsonAnswerError as exc:
            raise BuilderError(str(exc), exc.problems) from None
        stored = _Stored(suggestion=suggestion, new_workflow=new)
        with self.database.write_transaction() as tx:
            tx.execute(
                "INSERT INTO writing_suggestion (id, workflow_id, intent, payload, state,"
                " created_at) VALUES (?, ?, ?, ?, 'pending', ?)",
                (
                    suggestion_id,
                    workflow.id,
                    intent.strip(),
                    stored.model_dump_json(by_alias=True),
                    _now(),
                ),
            )
        return suggestion

    def _prompt(self, intent: str, workflow: Workflow) -> str:
        return "\n\n".join(
            (
                f"What the author wants: {intent.strip()}",
                "Node catalog (type: inputs → outputs; config fields):\n" + self.catalog(),
                "The workflow now:\n"
                + json.dumps(
                    {
                        "nodes": [
                            {"id": n.id, "type": n.type, "config": n.config} for n in workflow.nodes
                        ],
                        "edges": [
                            e.model_dump(by_alias=True, exclude_none=True) for e in workflow.edges
                        ],
                    },
                    ensure_ascii=False,
                ),
            )
        )

    def catalog(self) -> str:
        """Every node type in one line each: what the model needs to wire it, short."""
        lines = []
        for info in self.registry.infos():
            ins = ", ".join(f"{s.name}:{s.type}{'' if s.required else '?'}" for s in info.inputs)
            outs = ", ".join(f"{s.name}:{s.type}" for s in info.outputs)
            fields = []
            for name, spec in info.config_schema.get("properties", {}).items():
                kind = spec.get("type") or "/".join(
                    str(o.get("type")) for o in spec.get("anyOf", []) if isinstance(o, dict)
                )
                choices = spec.get("enum")
                fields.append(
                    f"{name}={'|'.join(map(str, choices))}" if choices else f"{name}:{kind}"
                )
            if not outs:
                outs = "(from the workflow)" if info.dynamic_slots else "-"
            line = f"- {info.type}: {ins or '-'} → {outs}"
            if fields:
                line += f"; config {', '.join(fields)}"
            lines.append(f"{line}. {info.description}")
        return "\n".join(lines)

    # -- checking a suggestion ------------------------------------------------------------

    def _suggestion(self, parsed: _Answer, workflow: Workflow, suggestion_id: str) -> Suggestion:
        nodes, edges = self.place(workflow, parsed.nodes, parsed.edges)
        return Suggestion(
            suggestion_id=suggestion_id,
            workflow_id=workflow.id,
            nodes=nodes,
            edges=edges,
            explanation=parsed.explanation,
        )

    def place(
        self,
        workflow: Workflow,
        nodes: Sequence[WorkflowNode],
        edges: Sequence[SuggestedEdge],
    ) -> tuple[list[WorkflowNode], list[WorkflowEdge]]:
        """The suggested nodes with ids free in ``workflow`` and canvas positions, the
        edges with those ids and every slot named; :class:`BuilderError` names each
        problem (unknown types, bad config, edges or problems the merge would add)."""
        if not nodes and not edges:
            raise BuilderError(
                "the suggestion adds nothing", [FieldProblem("nodes", "no nodes and no edges")]
            )
        problems: list[FieldProblem] = []
        for index, node in enumerate(nodes):
            node_type = self.registry.get(node.type)
            if node_type is None:
                problems.append(
                    FieldProblem(f"nodes[{index}].type", f"unknown node type {node.type!r}")
                )
                continue
            for field, reason in node_type.config_problems(node.config):
                problems.append(FieldProblem(f"nodes[{index}].config.{field}", reason))
        if problems:
            raise BuilderError.of("workflow suggestion", problems)
        renamed = _free_ids(workflow, [n.id for n in nodes])
        right = max((n.position.x for n in workflow.nodes), default=-_STEP_X) + _STEP_X
        placed = []
        for step, node in enumerate(nodes):
            update: dict[str, Any] = {"id": renamed[node.id]}
            if "position" not in node.model_fields_set:
                update["position"] = Position(x=right + step * _STEP_X, y=_NEW_ROW_Y)
            placed.append(node.model_copy(update=update))
        existing = {n.id for n in workflow.nodes}
        merged_nodes = [*workflow.nodes, *placed]
        graph = WorkflowGraph.build(
            workflow.model_copy(update={"nodes": merged_nodes}), self.registry, self.load_workflow
        )
        placed_edges: list[WorkflowEdge] = []
        for index, edge in enumerate(edges):
            source = renamed.get(edge.source, edge.source)
            target = renamed.get(edge.target, edge.target)
            missing = [
                e for e in (source, target) if e not in existing and e not in renamed.values()
            ]
            if missing:
                problems.append(
                    FieldProblem(f"edges[{index}]", f"no node {missing[0]!r} in the workflow")
                )
                continue
            source_slot = edge.source_slot or _only_output(graph, source)
            target_slot = edge.target_slot or _matching_input(graph, target, source_slot)
            if source_slot is None or target_slot is None:
                problems.append(
                    FieldProblem(
                        f"edges[{index}]",
                        f"say which slots connect {source!r} to {target!r} "
                        "(sourceSlot, targetSlot)",
                    )
                )
                continue
            placed_edges.append(
                WorkflowEdge(
                    source=source, source_slot=source_slot, target=target, target_slot=target_slot
                )
            )
        if problems:
            raise BuilderError.of("workflow suggestion", problems)
        merged = apply(workflow, placed, placed_edges)
        before = {p.message for p in validate_workflow(workflow, self.registry, self.load_workflow)}
        added = [
            p
            for p in validate_workflow(merged, self.registry, self.load_workflow)
            if p.message not in before
        ]
        if added:
            raise BuilderError.of(
                "workflow suggestion",
                [FieldProblem(p.node_id or "workflow", p.message) for p in added],
            )
        return placed, placed_edges

    # -- deciding -------------------------------------------------------------------------

    def _load(self, suggestion_id: str) -> tuple[_Stored, str]:
        row = (
            self.database.connection()
            .execute("SELECT payload, state FROM writing_suggestion WHERE id = ?", (suggestion_id,))
            .fetchone()
        )
        if row is None:
            raise SuggestionNotFound(suggestion_id)
        return _Stored.model_validate_json(row[0]), str(row[1])

    def suggestion(self, suggestion_id: str) -> tuple[Suggestion, SuggestionState]:
        stored, state = self._load(suggestion_id)
        return stored.suggestion, state  # type: ignore[return-value]

    def _decide(self, suggestion_id: str, state: SuggestionState, reason: str | None) -> None:
        with self.database.write_transaction() as tx:
            row = tx.execute(
                "UPDATE writing_suggestion SET state = ?, reason = ? WHERE id = ?"
                " AND state = 'pending' RETURNING id",
                (state, reason, suggestion_id),
            ).fetchone()
        if row is None:
            _, now = self._load(suggestion_id)
            raise SuggestionDecided(suggestion_id, now)

    def accept(self, suggestion_id: str, modifications: str | None = None) -> Workflow:
        """Apply the suggestion to its workflow and save it. ``modifications``: the
        author's changed suggestion as JSON ``{"nodes": [...], "edges": [...]}``, checked
        as the model's answer was."""
        stored, state = self._load(suggestion_id)
        if state != "pending":
            raise SuggestionDecided(suggestion_id, state)
        suggestion = stored.suggestion
        if stored.new_workflow:
            workflow = Workflow(id=suggestion.workflow_id, name=suggestion.explanation[:60])
        else:
            workflow = self.load_workflow(suggestion.workflow_id)
        if modifications is not None and modifications.strip():
            nodes, edges = self._modified(workflow, modifications)
        else:
            # The workflow may have changed since: place again (renames clashing ids).
            nodes, edges = self.place(
                workflow,
                suggestion.nodes,
                [
                    SuggestedEdge(
                        source=e.source,
                        target=e.target,
                        source_slot=e.source_slot,
                        target_slot=e.target_slot,
                    )
                    for e in suggestion.edges
                ],
            )
        merged = apply(workflow, nodes, edges)
        self._decide(suggestion_id, "accepted", None)
        self.save_workflow(merged)
        return merged

    def _modified(
        self, workflow: Workflow, modifications: str
    ) -> tuple[list[WorkflowNode], list[WorkflowEdge]]:
        try:
            data = json.loads(modifications)
            answer = _Answer.model_validate(data)
        except json.JSONDecodeError as exc:
            raise BuilderError(
                "modifications must be the changed suggestion as JSON {nodes, edges}",
                [FieldProblem("modifications", f"not JSON: {exc.msg}")],
            ) from None
        except ValidationError as exc:
            raise BuilderError.of(
                "modifications", problems_from_validation(exc, "modifications")
            ) from None
        return self.place(workflow, answer.nodes, answer.edges)

    def reject(self, suggestion_id: str, reason: str | None = None) -> None:
        """Close the suggestion; its workflow stays as it is."""
        self._decide(suggestion_id, "rejected", reason)


def apply(
    workflow: Workflow, nodes: Sequence[WorkflowNode], edges: Sequence[WorkflowEdge]
) -> Workflow:
    """``workflow`` with ``nodes`` and ``edges`` added."""
    return workflow.model_copy(
        update={"nodes": [*workflow.nodes, *nodes], "edges": [*workflow.edges, *edges]}
    )


def _free_ids(workflow: Workflow, ids: Sequence[str]) -> dict[str, str]:
    """Each suggested id → an id no node of ``workflow`` (nor another suggested node)
    has: clashing ones get a ``b<n>-`` prefix."""
    taken = {n.id for n in workflow.nodes}
    out: dict[str, str] = {}
    for node_id in ids:
        if node_id in out:
            raise BuilderError.of(
                "workflow suggestion", [FieldProblem("nodes", f"node id {node_id!r} used twice")]
            )
        new = node_id
        n = 1
        while new in taken:
            new = f"b{n}-{node_id}"
            n += 1
        taken.add(new)
        out[node_id] = new
    return out


def _only_output(graph: WorkflowGraph, node_id: str) -> str | None:
    slots = graph.nodes[node_id].slots
    if slots is None or len(slots.outputs) != 1:
        return None
    return slots.outputs[0].name


def _matching_input(graph: WorkflowGraph, node_id: str, source_slot: str | None) -> str | None:
    slots = graph.nodes[node_id].slots
    if slots is None:
        return None
    if source_slot is not None and slots.input(source_slot) is not None:
        return source_slot
    if len(slots.inputs) == 1:
        return slots.inputs[0].name
    return None


__all__ = [
    "Builder",
    "BuilderError",
    "Suggestion",
    "SuggestionDecided",
    "SuggestionNotFound",
]
