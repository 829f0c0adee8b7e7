"""core:Recursive and core:Evolutionary run through a real WorkflowRunner, with body,
generator and evaluator workflows saved in a project folder."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, ClassVar

import pytest

from storyloom.workflow.events import NodeIteration, NodeNeedsHuman, RunEvent
from storyloom.workflow.node_registry import NodeRegistry
from storyloom.workflow.node_type import (
    HumanDecision,
    NodeConfig,
    NodeContext,
    NodeExpansion,
    NodeType,
    Slot,
    WorkflowServices,
)
from storyloom.workflow.nodes.interface_nodes import GroupInput, GroupOutput
from storyloom.workflow.nodes.iteration_nodes import EvolutionaryNode, RecursiveNode
from storyloom.workflow.runner import RunResult, WorkflowRunner
from storyloom.workflow.validation import validate_workflow
from storyloom.workflow.workflow_file import Workflow, WorkflowLibrary, parse_workflow
from tests.workflow.conftest import AppendNode as Append


class LongEnoughConfig(NodeConfig):
    length: int = 3


class LongEnough(NodeType[LongEnoughConfig]):
    type: ClassVar[str] = "test:LongEnough"
    display_name: ClassVar[str] = "Long enough"
    inputs: ClassVar[tuple[Slot, ...]] = (Slot(name="text", type="STRING"),)
    outputs: ClassVar[tuple[Slot, ...]] = (Slot(name="done", type="BOOLEAN"),)

    async def run(
        self, ctx: NodeContext, inputs: dict[str, Any], config: LongEnoughConfig
    ) -> dict[str, Any] | NodeExpansion:
        return {"done": len(inputs["text"]) >= config.length}


class MutateConfig(NodeConfig):
    decline: bool = False


class Mutate(NodeType[MutateConfig]):
    """Candidate k of a generation: parent + "xyz"[k]; with ``decline`` set, generation 2
    and later forget the parent and write only z's (a worse generation)."""

    type: ClassVar[str] = "test:Mutate"
    display_name: ClassVar[str] = "Mutate"
    inputs: ClassVar[tuple[Slot, ...]] = (
        Slot(name="parent", type="STRING"),
        Slot(name="candidate", type="INTEGER"),
        Slot(name="generation", type="INTEGER"),
    )
    outputs: ClassVar[tuple[Slot, ...]] = (Slot(name="text", type="STRING"),)

    async def run(
        self, ctx: NodeContext, inputs: dict[str, Any], config: MutateConfig
    ) -> dict[str, Any] | NodeExpansion:
        index = inputs["candidate"]
        if config.decline and inputs["generation"] >= 2:
            return {"text": "z" * (index + 1)}
        return {"text": inputs["parent"] + "xyz"[index % 3]}


class CountY(NodeType):
    """Scores a text by its number of y's."""

    type: ClassVar[str] = "test:CountY"
    display_name: ClassVar[str] = "Count y"
    inputs: ClassVar[tuple[Slot, ...]] = (Slot(name="text", type="STRING"),)
    outputs: ClassVar[tuple[Slot, ...]] = (Slot(name="score", type="FLOAT"),)

    async def run(
        self, ctx: NodeContext, inputs: dict[str, Any], config: NodeConfig
    ) -> dict[str, Any] | NodeExpansion:
        return {"score": float(inputs["text"].count("y"))}


def edge(source: str, source_slot: str, target: str, target_slot: str) -> dict[str, str]:
    return {
        "source": source,
        "sourceSlot": source_slot,
        "target": target,
        "targetSlot": target_slot,
    }


def grow_body(length: int) -> Workflow:
    """Appends "a" to text; done once it has ``length`` characters; echoes its depth."""
    return parse_workflow(
        {
            "id": "grow",
            "interfaceInputs": {
                "text": {"dataFlowType": "STRING", "required": True},
                "depth": {"dataFlowType": "INTEGER"},
            },
            "interfaceOutputs": {
                "text": {"dataFlowType": "STRING"},
                "done": {"dataFlowType": "BOOLEAN"},
                "seen_depth": {"dataFlowType": "INTEGER"},
            },
            "nodes": [
                {"id": "in", "type": "core:GroupInput"},
                {"id": "add", "type": "test:Append", "config": {"suffix": "a"}},
                {"id": "check", "type": "test:LongEnough", "config": {"length": length}},
                {"id": "out", "type": "core:GroupOutput"},
            ],
            "edges": [
                edge("in", "text", "add", "text"),
                edge("add", "text", "check", "text"),
                edge("add", "text", "out", "text"),
                edge("check", "done", "out", "done"),
                edge("in", "depth", "out", "seen_depth"),
            ],
        }
    )


def generator(decline: bool = False) -> Workflow:
    return parse_workflow(
        {
            "id": "generator",
            "interfaceInputs": {
                "parent": {"dataFlowType": "STRING"},
                "candidate": {"dataFlowType": "INTEGER"},
                "generation": {"dataFlowType": "INTEGER"},
            },
            "interfaceOutputs": {"candidate": {"dataFlowType": "STRING"}},
            "nodes": [
                {"id": "in", "type": "core:GroupInput"},
                {"id": "mutate", "type": "test:Mutate", "config": {"decline": decline}},
                {"id": "out", "type": "core:GroupOutput"},
            ],
            "edges": [
                edge("in", "parent", "mutate", "parent"),
                edge("in", "candidate", "mutate", "candidate"),
                edge("in", "generation", "mutate", "generation"),
                edge("mutate", "text", "out", "candidate"),
            ],
        }
    )


def evaluator() -> Workflow:
    return parse_workflow(
        {
            "id": "evaluator",
            "interfaceInputs": {"candidate": {"dataFlowType": "STRING", "required": True}},
            "interfaceOutputs": {"score": {"dataFlowType": "FLOAT"}},
            "nodes": [
                {"id": "in", "type": "core:GroupInput"},
                {"id": "count", "type": "test:CountY"},
                {"id": "out", "type": "core:GroupOutput"},
            ],
            "edges": [
                edge("in", "candidate", "count", "text"),
                edge("count", "score", "out", "score"),
            ],
        }
    )


def single_node(node: dict[str, Any], edges: list[dict[str, str]] | None = None) -> Workflow:
    """A workflow of ``node`` alone, fed by a GroupInput when ``edges`` say so."""
    nodes: list[dict[str, Any]] = [node]
    interface: dict[str, Any] = {}
    if edges:
        nodes.insert(0, {"id": "in", "type": "core:GroupInput"})
        interface = {e["sourceSlot"]: {"dataFlowType": "STRING"} for e in edges}
    return parse_workflow(
        {"id": "main", "nodes": nodes, "edges": edges or [], "interfaceInputs": interface}
    )


@pytest.fixture
def library(tmp_path: Path) -> WorkflowLibrary:
    library = WorkflowLibrary(tmp_path)
    library.save(generator())
    library.save(evaluator())
    return library


def make_registry() -> NodeRegistry:
    return NodeRegistry(
        [
            GroupInput,
            GroupOutput,
            RecursiveNode,
            EvolutionaryNode,
            Append,
            LongEnough,
            Mutate,
            CountY,
        ]
    )


def make_runner(library: WorkflowLibrary) -> WorkflowRunner:
    return WorkflowRunner(
        make_registry(), WorkflowServices(project_dir=library.folder.parent, workflows=library.load)
    )


def iterations(events: list[RunEvent], node_id: str) -> list[NodeIteration]:
    return [e for e in events if isinstance(e, NodeIteration) and e.node_id == node_id]


def recursive(max_depth: int) -> Workflow:
    return single_node(
        {
            "id": "loop",
            "type": "core:Recursive",
            "config": {"workflow": "grow", "max_depth": max_depth},
        },
        [edge("in", "text", "loop", "text")],
    )


# --- Recursive ---------------------------------------------------------------------------


async def test_recursion_stops_when_the_body_says_done(library: WorkflowLibrary) -> None:
    library.save(grow_body(length=3))
    run = make_runner(library).start(recursive(max_depth=10), inputs={"text": ""})

    result = await run.wait()

    assert result.status == "completed", result.errors
    out = result.outputs["loop"]
    assert out["text"] == "aaa"
    assert out["done"] is True
    assert out["iterations"] == 3
    assert [step["text"] for step in out["trace"]] == ["a", "aa", "aaa"]
    assert [(e.iteration, e.total_iterations) for e in iterations(run.events, "loop")] == [
        (1, 10),
        (2, 10),
        (3, 10),
    ]


async def test_recursion_stops_at_max_depth_and_reports_each_iteration(
    library: WorkflowLibrary,
) -> None:
    library.save(grow_body(length=100))
    run = make_runner(library).start(recursive(max_depth=4), inputs={"text": "b"})

    result = await run.wait()

    assert result.status == "completed", result.errors
    out = result.outputs["loop"]
    assert out["text"] == "baaaa"
    assert out["done"] is False
    assert out["iterations"] == 4
    reported = iterations(run.events, "loop")
    assert [e.iteration for e in reported] == [1, 2, 3, 4]
    assert {(e.total_iterations, e.kind) for e in reported} == {(4, "recursive")}


async def test_recursion_gives_the_body_a_decreasing_depth(library: WorkflowLibrary) -> None:
    library.save(grow_body(length=100))

    result = await make_runner(library).run(recursive(max_depth=3), inputs={"text": ""})

    assert [step["seen_depth"] for step in result.outputs["loop"]["trace"]] == [3, 2, 1]


def test_recursive_slots_are_the_bodys_interface_without_depth(
    library: WorkflowLibrary,
) -> None:
    library.save(grow_body(length=3))
    problems = validate_workflow(recursive(max_depth=3), make_registry(), library.load)

    assert problems == []


def test_a_bad_config_value_is_reported_without_hiding_the_bodys_slots(
    library: WorkflowLibrary,
) -> None:
    library.save(grow_body(length=3))
    problems = validate_workflow(recursive(max_depth=0), make_registry(), library.load)

    # Only the bad value: the edge into the body's `text` input still finds its slot.
    assert [(p.code, p.field) for p in problems] == [("bad-config", "nodes.loop.config.max_depth")]


def test_recursive_with_a_stop_output_the_body_lacks_is_refused(
    library: WorkflowLibrary,
) -> None:
    library.save(grow_body(length=3))
    workflow = single_node(
        {
            "id": "loop",
            "type": "core:Recursive",
            "config": {"workflow": "grow", "stop_output": "finished"},
        },
        [edge("in", "text", "loop", "text")],
    )

    problems = validate_workflow(workflow, make_registry(), library.load)

    assert any(p.node_id == "loop" and "finished" in p.message for p in problems)


# --- Evolutionary ------------------------------------------------------------------------


def evolutionary(**config: Any) -> Workflow:
    return single_node(
        {
            "id": "evo",
            "type": "core:Evolutionary",
            "config": {"generator": "generator", "evaluator": "evaluator", **config},
        }
    )


async def test_evolution_keeps_the_best_by_evaluator_score_over_generations(
    library: WorkflowLibrary,
) -> None:
    result = await make_runner(library).run(evolutionary(population=3, generations=3))

    assert result.status == "completed", result.errors
    out = result.outputs["evo"]
    # Each generation "y" is the best letter to add to the best so far.
    assert out["best"] == "yyy"
    assert out["score"] == 3.0
    assert [g["chosen"] for g in out["history"]] == [1, 1, 1]
    assert out["history"][1]["candidates"] == [
        {"text": "yx", "score": 1.0},
        {"text": "yy", "score": 2.0},
        {"text": "yz", "score": 1.0},
    ]


async def test_evolution_never_keeps_a_worse_generation(library: WorkflowLibrary) -> None:
    library.save(generator(decline=True))

    result = await make_runner(library).run(evolutionary(population=3, generations=2))

    out = result.outputs["evo"]
    assert [c["text"] for c in out["history"][1]["candidates"]] == ["z", "zz", "zzz"]
    assert (out["best"], out["score"]) == ("y", 1.0)


async def test_evolution_respects_population_and_generations_and_reports_them(
    library: WorkflowLibrary,
) -> None:
    run = make_runner(library).start(evolutionary(population=4, generations=2), inputs={})

    result = await run.wait()

    history = result.outputs["evo"]["history"]
    assert [g["generation"] for g in history] == [1, 2]
    assert [len(g["candidates"]) for g in history] == [4, 4]
    reported = iterations(run.events, "evo")
    assert [(e.iteration, e.total_iterations, e.candidate_count) for e in reported] == [
        (1, 2, 4),
        (2, 2, 4),
    ]
    assert {e.kind for e in reported} == {"evolutionary"}


async def test_evolution_stops_early_at_the_target_score(library: WorkflowLibrary) -> None:
    result = await make_runner(library).run(
        evolutionary(population=3, generations=5, target_score=2.0)
    )

    out = result.outputs["evo"]
    assert len(out["history"]) == 2
    assert (out["best"], out["score"]) == ("yy", 2.0)


async def test_evolution_builds_on_the_seed_input(library: WorkflowLibrary) -> None:
    workflow = single_node(
        {
            "id": "evo",
            "type": "core:Evolutionary",
            "config": {"generator": "generator", "evaluator": "evaluator", "generations": 1},
        },
        [edge("in", "seed", "evo", "seed")],
    )

    result = await make_runner(library).run(workflow, inputs={"seed": "start-"})

    assert result.outputs["evo"]["best"] == "start-y"


async def answer_choices(
    runner: WorkflowRunner, workflow: Workflow, choices: list[int | HumanDecision]
) -> tuple[RunResult, list[NodeNeedsHuman]]:
    questions: asyncio.Queue[NodeNeedsHuman] = asyncio.Queue()

    def on_event(event: RunEvent) -> None:
        if isinstance(event, NodeNeedsHuman):
            questions.put_nowait(event)

    run = runner.start(workflow, on_event=on_event)
    asked: list[NodeNeedsHuman] = []
    for choice in choices:
        question = await questions.get()
        asked.append(question)
        if isinstance(choice, int):
            choice = HumanDecision(decision="approve", choice=choice)
        assert run.decide(question.node_id, choice)
    return await run.wait(), asked


async def test_human_selection_keeps_the_chosen_candidate(library: WorkflowLibrary) -> None:
    workflow = single_node(
        {
            "id": "evo",
            "type": "core:Evolutionary",
            "config": {"generator": "generator", "selection": "human", "generations": 2},
        }
    )

    result, asked = await answer_choices(make_runner(library), workflow, [2, 0])

    assert result.status == "completed", result.errors
    assert [q.candidates for q in asked] == [["x", "y", "z"], ["zx", "zy", "zz"]]
    out = result.outputs["evo"]
    assert out["best"] == "zx"
    assert out["score"] is None
    assert [g["chosen"] for g in out["history"]] == [2, 0]


async def test_an_edited_candidate_becomes_the_next_parent(library: WorkflowLibrary) -> None:
    workflow = single_node(
        {
            "id": "evo",
            "type": "core:Evolutionary",
            "config": {"generator": "generator", "selection": "human", "generations": 2},
        }
    )
    edit = HumanDecision(decision="edit", edited_output="mine-")

    result, asked = await answer_choices(make_runner(library), workflow, [edit, 1])

    assert asked[1].candidates == ["mine-x", "mine-y", "mine-z"]
    assert asked[1].output_preview == "mine-"
    history = result.outputs["evo"]["history"]
    assert (history[0]["chosen"], history[0]["edited"]) == (None, "mine-")
    assert result.outputs["evo"]["best"] == "mine-y"


async def test_evaluator_then_human_offers_only_the_shortlist(library: WorkflowLibrary) -> None:
    workflow = evolutionary(
        population=3, generations=1, selection="evaluator-then-human", shortlist=2
    )

    result, asked = await answer_choices(make_runner(library), workflow, [1])

    # Best-scored first: "y" (1), then the first of the ties at 0.
    assert asked[0].candidates == ["y", "x"]
    assert (result.outputs["evo"]["best"], result.outputs["evo"]["score"]) == ("x", 0.0)
    assert result.outputs["evo"]["history"][0]["chosen"] == 0


def test_evolution_without_an_evaluator_needs_human_selection(library: WorkflowLibrary) -> None:
    workflow = single_node(
        {"id": "evo", "type": "core:Evolutionary", "config": {"generator": "generator"}}
    )

    problems = validate_workflow(workflow, make_registry(), library.load)

    assert any(p.node_id == "evo" and "evaluator" in p.message for p in problems)


def test_evolution_with_a_missing_generator_is_refused(library: WorkflowLibrary) -> None:
    workflow = evolutionary()
    library.delete("generator")

    problems = validate_workflow(workflow, make_registry(), library.load)

    assert any(p.node_id == "evo" and "generator" in p.message for p in problems)
