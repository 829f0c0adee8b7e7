from typing import Any, ClassVar, Literal

import pytest
from pydantic import Field

from storyloom.core.errors import StoryloomError
from storyloom.workflow.node_registry import NodeRegistry
from storyloom.workflow.node_type import (
    NodeConfig,
    NodeContext,
    NodeExpansion,
    NodeSlots,
    NodeType,
    Slot,
    SlotEnvironment,
)
from storyloom.workflow.nodes.interface_nodes import GroupInput, GroupOutput
from storyloom.workflow.nodes.text_nodes import TextInput, TextTemplate
from storyloom.workflow.slot_types import INTEGER
from storyloom.workflow.validation import (
    WorkflowInvalid,
    WorkflowProblem,
    check_workflow,
    validate_workflow,
)
from storyloom.workflow.workflow_file import Workflow, WorkflowNode


class CountConfig(NodeConfig):
    step: int = Field(1, ge=1, le=10)
    mode: Literal["up", "down"] = "up"


class Count(NodeType[CountConfig]):
    type: ClassVar[str] = "test:Count"
    display_name: ClassVar[str] = "Count"
    inputs: ClassVar[tuple[Slot, ...]] = (Slot(name="n", type=INTEGER),)
    outputs: ClassVar[tuple[Slot, ...]] = (Slot(name="n", type=INTEGER),)

    async def run(
        self, ctx: NodeContext, inputs: dict[str, Any], config: CountConfig
    ) -> dict[str, Any] | NodeExpansion:
        return {"n": inputs["n"] + config.step}


class CallsConfig(NodeConfig):
    workflow: str


class Calls(NodeType[CallsConfig]):
    """Slots from another workflow, as a sub-workflow node has them."""

    type: ClassVar[str] = "test:Calls"
    display_name: ClassVar[str] = "Calls"
    dynamic_slots: ClassVar[bool] = True

    def slots(self, node: WorkflowNode, env: SlotEnvironment) -> NodeSlots:
        config = self.lenient_config(node.config)
        if config is not None:
            env.load_workflow(config.workflow)
        return NodeSlots((), ())


def registry() -> NodeRegistry:
    return NodeRegistry([TextInput, TextTemplate, GroupInput, GroupOutput, Count, Calls])


def workflow(
    nodes: list[tuple[str, str] | tuple[str, str, dict[str, Any]]],
    edges: list[str] = (),  # type: ignore[assignment]
    **extra: Any,
) -> Workflow:
    """Nodes as (id, type[, config]); edges as "a.slot > b.slot"."""
    return Workflow.model_validate(
        {
            "id": "wf",
            "nodes": [
                {"id": n[0], "type": n[1], "config": n[2] if len(n) > 2 else {}} for n in nodes
            ],
            "edges": [_edge(e) for e in edges],
            **extra,
        }
    )


def _edge(spec: str) -> dict[str, str]:
    source, target = (part.strip() for part in spec.split(">"))
    s_node, s_slot = source.split(".")
    t_node, t_slot = target.split(".")
    return {"source": s_node, "sourceSlot": s_slot, "target": t_node, "targetSlot": t_slot}


def codes(problems: list[WorkflowProblem]) -> list[str]:
    return [p.code for p in problems]


def only(problems: list[WorkflowProblem], code: str) -> WorkflowProblem:
    found = [p for p in problems if p.code == code]
    assert len(found) == 1, problems
    return found[0]


def test_a_wired_workflow_has_no_problems() -> None:
    wf = workflow(
        [("in", "core:TextInput", {"text": "Hi {{name}}"}), ("t", "core:TextTemplate")],
        ["in.text > t.template"],
    )
    assert validate_workflow(wf, registry()) == []
    graph = check_workflow(wf, registry())
    assert graph.order() == ["in", "t"]


def test_every_problem_is_reported_at_once() -> None:
    wf = workflow(
        [
            ("in", "core:TextInput"),
            ("typo", "core:TextTemplat"),
            ("count", "test:Count", {"step": 99}),
            ("a", "test:Count"),
            ("b", "test:Count"),
        ],
        ["in.text > count.n", "ghost.out > a.n", "a.n > b.n", "b.n > a.n"],
        interfaceInputs={"x": {"dataFlowType": "STRNG"}},
    )
    problems = validate_workflow(wf, registry())
    assert sorted(codes(problems)) == sorted(
        ["bad-interface", "unknown-type", "bad-config", "dangling-edge", "type-mismatch", "cycle"]
    )
    with pytest.raises(WorkflowInvalid) as caught:
        check_workflow(wf, registry())
    assert caught.value.problems == problems
    assert caught.value.workflow_id == "wf"
    for problem in problems:
        assert problem.message in str(caught.value)


def test_unknown_type_suggests_close_names() -> None:
    problem = only(
        validate_workflow(workflow([("t", "core:TextTemplat")]), registry()), "unknown-type"
    )
    assert problem.node_id == "t"
    assert "'core:TextTemplat'" in problem.message
    assert "did you mean core:TextTemplate" in problem.message


def test_dangling_edge_names_the_missing_node() -> None:
    wf = workflow([("t", "core:TextTemplate", {"template": "x"})], ["ghost.text > t.variables"])
    problem = only(validate_workflow(wf, registry()), "dangling-edge")
    assert problem.node_id == "ghost"
    assert "'ghost'" in problem.message and "not in the workflow" in problem.message


def test_unknown_slots_on_both_ends_are_named_with_the_slots_there_are() -> None:
    wf = workflow(
        [("in", "core:TextInput"), ("t", "core:TextTemplate", {"template": "x"})],
        ["in.txt > t.tmpl"],
    )
    problems = validate_workflow(wf, registry())
    assert codes(problems) == ["unknown-slot", "unknown-slot"]
    source, target = problems
    assert (source.node_id, source.slot) == ("in", "txt")
    assert "no output 'txt'" in source.message and "outputs: text" in source.message
    assert (target.node_id, target.slot) == ("t", "tmpl")
    assert "no input 'tmpl'" in target.message and "inputs: template, variables" in target.message


def test_two_edges_into_one_input_are_refused() -> None:
    wf = workflow(
        [("a", "core:TextInput"), ("b", "core:TextInput"), ("t", "core:TextTemplate")],
        ["a.text > t.template", "b.text > t.template"],
    )
    problem = only(validate_workflow(wf, registry()), "duplicate-input")
    assert (problem.node_id, problem.slot) == ("t", "template")
    assert "a.text" in problem.message and "b.text" in problem.message


def test_duplicate_node_ids_are_refused() -> None:
    wf = workflow([("a", "core:TextInput"), ("a", "core:TextInput")])
    problem = only(validate_workflow(wf, registry()), "duplicate-id")
    assert problem.node_id == "a" and "2 nodes" in problem.message


def test_a_required_input_needs_an_edge_or_a_config_value() -> None:
    missing = workflow([("t", "core:TextTemplate")])
    problem = only(validate_workflow(missing, registry()), "missing-input")
    assert (problem.node_id, problem.slot) == ("t", "template")
    assert "connect it or set its config value" in problem.message
    configured = workflow([("t", "core:TextTemplate", {"template": "Hello"})])
    assert validate_workflow(configured, registry()) == []
    no_config = only(
        validate_workflow(workflow([("c", "test:Count")]), registry()), "missing-input"
    )
    assert (no_config.slot, no_config.message.endswith("connect it")) == ("n", True)


def test_type_mismatch_names_both_types_and_the_conversions() -> None:
    wf = workflow([("in", "core:TextInput"), ("c", "test:Count")], ["in.text > c.n"])
    problem = only(validate_workflow(wf, registry()), "type-mismatch")
    assert (problem.node_id, problem.slot) == ("c", "n")
    assert "takes INTEGER but in.text gives STRING" in problem.message
    assert "STRING can feed STRING, ANY" in problem.message
    assert "INTEGER accepts INTEGER, ANY" in problem.message


def test_a_conversion_is_not_a_mismatch() -> None:
    wf = workflow(
        [("c", "test:Count", {"step": 2}), ("t", "core:TextTemplate")],
        ["c.n > t.template"],  # INTEGER → STRING converts as text
    )
    assert codes(validate_workflow(wf, registry())) == ["missing-input"]  # c.n itself


def test_each_cycle_is_listed_along_its_edges() -> None:
    wf = workflow(
        [("a", "test:Count"), ("b", "test:Count"), ("c", "test:Count"), ("d", "test:Count")],
        ["a.n > b.n", "b.n > c.n", "c.n > a.n", "d.n > d.n"],
    )
    cycles = sorted(p.message.split(";")[0] for p in validate_workflow(wf, registry()))
    assert len(cycles) == 2
    assert "cycle: d → d" in cycles
    (loop,) = (c for c in cycles if "a" in c)
    # Any rotation of a → b → c → a, in the direction the edges run.
    path = loop.removeprefix("cycle: ").split(" → ")
    assert path[0] == path[-1]
    start = path.index("a")
    assert (path[:-1] * 2)[start : start + 3] == ["a", "b", "c"]


def test_bad_config_names_the_field() -> None:
    wf = workflow([("c", "test:Count", {"n": 1, "step": 0, "mode": "sideways", "spep": 2})])
    problems = validate_workflow(wf, registry())
    bad = {p.field: p.message for p in problems if p.code == "bad-config"}
    assert set(bad) == {f"nodes.c.config.{name}" for name in ("n", "step", "mode", "spep")}
    assert "below the minimum 1" in bad["nodes.c.config.step"]
    assert "'sideways' is not one of 'up' or 'down'" in bad["nodes.c.config.mode"]
    assert bad["nodes.c.config.spep"].startswith("node 'c' config 'spep': unknown config field")
    assert all(p.node_id == "c" for p in problems)


def test_a_node_whose_workflow_does_not_load_is_reported() -> None:
    def loader(workflow_id: str) -> Workflow:
        raise StoryloomError(f"no workflow {workflow_id!r} in the project")

    wf = workflow([("call", "test:Calls", {"workflow": "gone"})])
    problem = only(validate_workflow(wf, registry(), loader), "missing-workflow")
    assert problem.node_id == "call" and "'gone'" in problem.message
    without_library = only(validate_workflow(wf, registry()), "missing-workflow")
    assert "no workflow library" in without_library.message


def test_interface_slots_become_group_node_slots() -> None:
    wf = workflow(
        [("in", "core:GroupInput"), ("t", "core:TextTemplate"), ("out", "core:GroupOutput")],
        ["in.topic > t.template", "t.text > out.result", "in.count > out.result2"],
        interfaceInputs={
            "topic": {"dataFlowType": "STRING", "required": True},
            "count": {"dataFlowType": "INTEGER"},
        },
        interfaceOutputs={"result": {"dataFlowType": "STRING"}},
    )
    problem = only(validate_workflow(wf, registry()), "unknown-slot")
    assert (problem.node_id, problem.slot) == ("out", "result2")


def test_unknown_interface_types_are_refused() -> None:
    wf = workflow([], interfaceOutputs={"summary": {"dataFlowType": "TEXT"}})
    problem = only(validate_workflow(wf, registry()), "bad-interface")
    assert problem.slot == "summary"
    assert problem.field == "interfaceOutputs.summary.dataFlowType"
    assert "'TEXT'" in problem.message


def test_problems_serialize_with_camel_case_node_id() -> None:
    problem = only(validate_workflow(workflow([("t", "nope")]), registry()), "unknown-type")
    data = problem.model_dump(by_alias=True)
    assert data["nodeId"] == "t" and data["code"] == "unknown-type"
