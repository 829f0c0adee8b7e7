"""Repetition inside a DAG (seed 002 高级工作流组件): a node that calls a body workflow again
and again. ``core:Recursive`` feeds each call's outputs into the next call until the body
says it is done or the depth limit is reached; ``core:Evolutionary`` generates several
candidates per generation, keeps the best (by an evaluator workflow, a person, or both) and
builds the next generation on it. Both report ``node:iteration`` as they go.

Both are not idempotent, for the reason ``core:SubWorkflow`` gives: their cache key knows
the called workflows only by id. Every call goes through ``ctx.run_workflow``, whose nodes
are cached one by one, so a repeated run recomputes only what changed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Annotated, Any, ClassVar, Literal, TypeVar

from pydantic import Field

from storyloom.core.errors import StoryloomError
from storyloom.core.plugin_markers import hookimpl
from storyloom.workflow.node_type import (
    NodeConfig,
    NodeContext,
    NodeExpansion,
    NodeSlots,
    NodeType,
    Slot,
    SlotEnvironment,
    Suggestions,
)
from storyloom.workflow.nodes.subworkflow_nodes import (
    WorkflowId,
    given_inputs,
    interface_input_slots,
    interface_output_slots,
    load_for_run,
    load_referenced,
)
from storyloom.workflow.slot_types import ANY, ARRAY, BOOLEAN, FLOAT, INTEGER, STRING
from storyloom.workflow.workflow_file import Workflow, WorkflowNode

T = TypeVar("T")


class IterationFailed(StoryloomError):
    """A called workflow or a person's choice broke the node's contract mid-run."""


DEPTH_INPUT = "depth"
RECURSIVE_OUTPUTS = (
    Slot(name="iterations", type=INTEGER, description="How many times the body ran"),
    Slot(name="trace", type=ARRAY, description="The body's outputs of every call, in order"),
)


class RecursiveConfig(NodeConfig):
    workflow: WorkflowId = Field(description="The id of the body workflow called on each iteration")
    max_depth: int = Field(5, ge=1, le=50, description="The most calls of the body")
    stop_output: str = Field(
        "done",
        description="The body's BOOLEAN output that means done; empty: always run max_depth times",
    )
    carry: dict[str, str] | None = Field(
        None,
        description="Which output feeds which input of the next call, {output: input}; "
        "outputs not listed feed the input of the same name",
    )


class RecursiveNode(NodeType[RecursiveConfig]):
    """Calls the ``workflow`` body repeatedly, each call getting the previous call's outputs.

    The node's inputs are the body's ``interfaceInputs`` (except ``depth``) and feed the
    first call. After each call, every output goes to the input of the same name (or the
    one ``carry`` maps it to); inputs nothing feeds keep their value. A body input named
    ``depth`` gets the calls left including this one: ``max_depth`` first, 1 last. The loop
    stops when the BOOLEAN output ``stop_output`` is true or after ``max_depth`` calls; the
    node's outputs are the last call's, plus ``iterations`` and ``trace``.
    """

    type: ClassVar[str] = "core:Recursive"
    display_name: ClassVar[str] = "Recursive"
    category: ClassVar[str] = "Flow"
    description: ClassVar[str] = (
        "Call a workflow again and again, each call getting the previous call's outputs, "
        "until its stop output is true or the depth limit is reached (draft → critique → "
        "revise → repeat)."
    )
    idempotent: ClassVar[bool] = False
    dynamic_slots: ClassVar[bool] = True
    outputs: ClassVar[tuple[Slot, ...]] = RECURSIVE_OUTPUTS

    def slots(self, node: WorkflowNode, env: SlotEnvironment) -> NodeSlots:
        config = self.lenient_config(node.config)
        workflow_id = config.workflow.strip() if config else ""
        if config is None or not workflow_id:
            return NodeSlots((), RECURSIVE_OUTPUTS)
        body = load_referenced(env, "workflow", workflow_id)
        inputs = tuple(s for s in interface_input_slots(body) if s.name != DEPTH_INPUT)
        outputs = interface_output_slots(body)
        where = f"body workflow {workflow_id!r}"
        for extra in RECURSIVE_OUTPUTS:
            if extra.name in body.interface_outputs:
                raise StoryloomError(
                    f"{where} has an output named {extra.name!r}, which this node adds itself;"
                    " rename it in the body"
                )
        stop = config.stop_output
        if stop:
            declared = body.interface_outputs.get(stop)
            if declared is None:
                raise StoryloomError(
                    f"{where} has no output {stop!r} (config stop_output); its outputs: "
                    f"{', '.join(body.interface_outputs) or 'none'}"
                )
            if declared.data_flow_type not in (BOOLEAN, ANY):
                raise StoryloomError(
                    f"{where}: stop_output {stop!r} is {declared.data_flow_type}, not BOOLEAN"
                )
        if config.carry:
            for source, target in config.carry.items():
                if source not in body.interface_outputs:
                    raise StoryloomError(f"{where} has no output {source!r} (config carry)")
                if target == DEPTH_INPUT or target not in body.interface_inputs:
                    raise StoryloomError(
                        f"{where}: config carry maps {source!r} to {target!r}, which is not "
                        "an input it can be given"
                    )
        return NodeSlots(inputs, (*outputs, *RECURSIVE_OUTPUTS))

    async def run(
        self, ctx: NodeContext, inputs: dict[str, Any], config: RecursiveConfig
    ) -> dict[str, Any] | NodeExpansion:
        body = load_for_run(ctx, "workflow", config.workflow)
        max_depth = config.max_depth
        stop = config.stop_output
        carry: dict[str, str] = dict(config.carry or {})
        names = set(body.interface_inputs)
        current = {name: value for name, value in inputs.items() if name in names}
        trace: list[dict[str, Any]] = []
        outputs: dict[str, Any] = {}
        iteration = 0
        while iteration < max_depth:
            ctx.raise_if_cancelled()
            iteration += 1
            ctx.report_iteration(iteration, max_depth, "recursive")
            call = given_inputs(current)
            if DEPTH_INPUT in names:
                call[DEPTH_INPUT] = max_depth - iteration + 1
            outputs = await ctx.run_workflow(body, call)
            trace.append(outputs)
            if stop and _is_true(outputs.get(stop)):
                break
            current.update(_carried(outputs, carry, names))
        return {**outputs, "iterations": iteration, "trace": trace}


def _carried(outputs: dict[str, Any], carry: dict[str, str], names: set[str]) -> dict[str, Any]:
    """The next call's inputs from this call's outputs: explicit ``carry`` over same-name."""
    moved = {name: value for name, value in outputs.items() if name not in carry}
    moved.update({carry[name]: value for name, value in outputs.items() if name in carry})
    return {name: value for name, value in moved.items() if name in names and name != DEPTH_INPUT}


def _is_true(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("true", "yes", "1")
    return value is True or (isinstance(value, int | float) and value != 0)


SELECTIONS = ("evaluator", "human", "evaluator-then-human")
GENERATOR_INPUTS = ("parent", "candidate", "generation")


Selection = Literal["evaluator", "human", "evaluator-then-human"]


class EvolutionaryConfig(NodeConfig):
    generator: WorkflowId = Field(description="Workflow making one candidate from parent")
    evaluator: WorkflowId | None = Field(
        None, description="Workflow scoring one candidate (not needed when selection is human)"
    )
    population: int = Field(3, ge=1, le=20, description="Candidates per generation")
    generations: int = Field(2, ge=1, le=20, description="The most generations")
    selection: Annotated[Selection, Suggestions(*SELECTIONS)] = Field(
        "evaluator", description="Who picks the candidate kept"
    )
    shortlist: int = Field(
        2,
        ge=1,
        le=20,
        description="With evaluator-then-human: how many best-scored candidates are shown",
    )
    target_score: float | None = Field(
        None, description="Stop early once the kept candidate scores at least this"
    )


class EvolutionaryNode(NodeType[EvolutionaryConfig]):
    """Generate ``population`` candidates, keep the best, build the next generation on it.

    Generator workflow contract: input ``parent`` STRING (the best so far; the ``seed``
    input, "" when unset, at first); optional inputs ``candidate`` INTEGER (0-based index
    within the generation) and ``generation`` INTEGER (from 1); output ``candidate`` STRING.
    Declare ``candidate``: the candidates of one generation are generated concurrently and
    would otherwise be the same cached result.

    Evaluator workflow contract (unless ``selection`` is "human"): input ``candidate``
    STRING, optional ``parent`` STRING; output ``score`` FLOAT, higher is better.

    ``selection``: "evaluator" keeps the best score, and never a worse candidate than the
    best so far; "human" shows every candidate and uses the person's ``choice`` (an edit
    replaces it with the edited text); "evaluator-then-human" shows only the ``shortlist``
    best-scored. ``target_score`` ends early once the kept candidate reaches it.

    Not idempotent (see the module docs); with a human in the selection, it could not be
    anyway. With an evaluator only, the generator's and evaluator's nodes are cached, so a
    second run with the same inputs costs nothing but lookups.
    """

    type: ClassVar[str] = "core:Evolutionary"
    display_name: ClassVar[str] = "Evolutionary"
    category: ClassVar[str] = "Flow"
    description: ClassVar[str] = (
        "Generate several candidates with a generator workflow, score them with an evaluator "
        "workflow or let a person choose, keep the best and iterate for some generations."
    )
    idempotent: ClassVar[bool] = False
    inputs: ClassVar[tuple[Slot, ...]] = (
        Slot(
            name="seed",
            type=STRING,
            description="The first parent given to the generator",
            required=False,
            default="",
        ),
    )
    outputs: ClassVar[tuple[Slot, ...]] = (
        Slot(name="best", type=STRING, description="The candidate kept at the end"),
        Slot(
            name="score",
            type=FLOAT,
            description="Its evaluator score (null when no evaluator scored it)",
        ),
        Slot(
            name="history",
            type=ARRAY,
            description="Per generation: {generation, candidates: [{text, score}], chosen}",
        ),
    )

    def slots(self, node: WorkflowNode, env: SlotEnvironment) -> NodeSlots:
        # The slots never change; loading the called workflows here lets validation
        # report a missing one or a broken contract before the run.
        config = self.lenient_config(node.config)
        if config is None:
            return NodeSlots(self.inputs, self.outputs)  # validation reports the config
        generator_id = config.generator.strip()
        if generator_id:
            generator = load_referenced(env, "generator", generator_id)
            _check_contract(
                "generator", generator, {"parent": STRING}, GENERATOR_INPUTS, "candidate"
            )
        evaluator_id = (config.evaluator or "").strip()
        selection = config.selection
        if evaluator_id:
            evaluator = load_referenced(env, "evaluator", evaluator_id)
            _check_contract(
                "evaluator",
                evaluator,
                {"candidate": STRING},
                ("candidate", "parent"),
                "score",
            )
        elif selection != "human":
            raise StoryloomError(
                f"selection {selection!r} needs an evaluator workflow (config evaluator)"
            )
        return NodeSlots(self.inputs, self.outputs)

    async def run(
        self, ctx: NodeContext, inputs: dict[str, Any], config: EvolutionaryConfig
    ) -> dict[str, Any] | NodeExpansion:
        run = _Evolution(ctx, config)
        return await run.evolve(str(inputs.get("seed") or ""))


class _Evolution:
    """One run of an Evolutionary node."""

    def __init__(self, ctx: NodeContext, config: EvolutionaryConfig) -> None:
        self.ctx = ctx
        self.selection = config.selection
        self.population = config.population
        self.generations = config.generations
        self.shortlist = config.shortlist
        self.target = config.target_score
        self.generator = load_for_run(ctx, "generator", config.generator)
        # With a person choosing, an evaluator is optional; its scores still help them
        # (listed in the question, kept in the history).
        self.evaluator: Workflow | None = None
        if config.evaluator:
            self.evaluator = load_for_run(ctx, "evaluator", config.evaluator)
        elif self.selection != "human":
            raise IterationFailed(f"selection {self.selection!r} needs config evaluator")

    async def evolve(self, seed: str) -> dict[str, Any]:
        parent = seed
        best: str | None = None
        best_score: float | None = None
        history: list[dict[str, Any]] = []
        for generation in range(1, self.generations + 1):
            self.ctx.raise_if_cancelled()
            self.ctx.report_iteration(
                generation, self.generations, "evolutionary", candidate_count=self.population
            )
            texts = await _concurrently(
                [self._generate(parent, index, generation) for index in range(self.population)]
            )
            scores = await self._score_all(texts, parent)
            entry: dict[str, Any] = {
                "generation": generation,
                "candidates": [{"text": t, "score": s} for t, s in zip(texts, scores, strict=True)],
            }
            if self.selection == "evaluator":
                chosen = _best_index(scores)
                entry["chosen"] = chosen
                text, score = texts[chosen], scores[chosen]
                if best_score is None or (score is not None and score > best_score):
                    best, best_score = text, score
            else:
                chosen_or_none, text, score = await self._ask(texts, scores, parent, generation)
                entry["chosen"] = chosen_or_none
                if chosen_or_none is None:
                    entry["edited"] = text
                best, best_score = text, score
            history.append(entry)
            if best is not None:
                parent = best
            if self.target is not None and best_score is not None and best_score >= self.target:
                break
        return {"best": best or "", "score": best_score, "history": history}

    async def _generate(self, parent: str, index: int, generation: int) -> str:
        declared = self.generator.interface_inputs
        values = {"parent": parent, "candidate": index, "generation": generation}
        call = {name: value for name, value in values.items() if name in declared}
        outputs = await self.ctx.run_workflow(self.generator, call)
        text = outputs.get("candidate")
        if text is None:
            raise IterationFailed(
                f"generator {self.generator.id!r} gave no "
                f"'candidate' output (it gave: {', '.join(outputs) or 'nothing'})"
            )
        return text if isinstance(text, str) else str(text)

    async def _score_all(self, texts: list[str], parent: str) -> list[float | None]:
        if self.evaluator is None:
            return [None] * len(texts)
        scored = await _concurrently([self._score(text, parent) for text in texts])
        return list(scored)

    async def _score(self, text: str, parent: str) -> float | None:
        evaluator = self.evaluator
        if evaluator is None:
            return None
        call: dict[str, Any] = {"candidate": text}
        if "parent" in evaluator.interface_inputs:
            call["parent"] = parent
        outputs = await self.ctx.run_workflow(evaluator, call)
        score = outputs.get("score")
        if isinstance(score, bool) or not isinstance(score, int | float):
            raise IterationFailed(f"evaluator {evaluator.id!r} gave score {score!r}, not a number")
        return float(score)

    async def _ask(
        self, texts: list[str], scores: list[float | None], parent: str, generation: int
    ) -> tuple[int | None, str, float | None]:
        """Let a person choose: ``(index in texts, text, score)``; index None for an edit."""
        shown = list(range(len(texts)))
        if self.selection == "evaluator-then-human":
            shown = sorted(shown, key=lambda i: -(scores[i] or 0.0))[: self.shortlist]
        reason = f"Generation {generation} of {self.generations}: choose the best candidate"
        if self.evaluator is not None:
            listed = ", ".join(f"#{n} {_score_text(scores[i])}" for n, i in enumerate(shown))
            reason += f" (scores: {listed})"
        answer = await self.ctx.request_human(
            reason, parent, options=("approve", "edit"), candidates=[texts[i] for i in shown]
        )
        if answer.decision == "edit":
            if answer.edited_output is None:
                raise IterationFailed("an edit decision needs editedOutput")
            return None, answer.edited_output, await self._score(answer.edited_output, parent)
        if answer.decision != "approve":
            raise IterationFailed(
                f"a candidate choice takes approve (with choice) or edit, not {answer.decision!r}"
            )
        choice = answer.choice
        if choice is None and len(shown) == 1:
            choice = 0
        if choice is None or not 0 <= choice < len(shown):
            raise IterationFailed(
                f"choice {choice!r} does not pick one of the "
                f"{len(shown)} candidates shown (0 to {len(shown) - 1})"
            )
        index = shown[choice]
        return index, texts[index], scores[index]


def _check_contract(
    field: str,
    workflow: Workflow,
    required_inputs: dict[str, str],
    known_inputs: tuple[str, ...],
    output: str,
) -> None:
    where = f"{field} workflow {workflow.id!r}"
    for name, type_name in required_inputs.items():
        declared = workflow.interface_inputs.get(name)
        if declared is None:
            raise StoryloomError(f"{where} needs an interface input {name!r} ({type_name})")
    for name, slot in workflow.interface_inputs.items():
        if slot.required and name not in known_inputs:
            raise StoryloomError(
                f"{where} requires input {name!r}, which this node cannot give "
                f"(it gives {', '.join(known_inputs)})"
            )
    if output not in workflow.interface_outputs:
        raise StoryloomError(f"{where} needs an interface output {output!r}")


def _best_index(scores: list[float | None]) -> int:
    """The highest score's index; the first one on a tie."""
    return max(range(len(scores)), key=lambda i: (scores[i] or 0.0, -i))


def _score_text(score: float | None) -> str:
    return "unscored" if score is None else f"{score:g}"


async def _concurrently(calls: list[Coroutine[Any, Any, T]]) -> list[T]:
    """Await every call at once; on the first failure the others are cancelled and that
    failure is raised as it is (not wrapped in an ExceptionGroup)."""
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(call) for call in calls]
    except BaseExceptionGroup as failed:
        raise failed.exceptions[0] from None
    return [task.result() for task in tasks]


@hookimpl
def storyloom_node_types() -> list[type[NodeType]]:
    return [RecursiveNode, EvolutionaryNode]
