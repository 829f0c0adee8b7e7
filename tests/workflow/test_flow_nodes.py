"""Switch, Merge and the interface nodes, run through the real runner."""

from typing import Any

from storyloom.plugins import node_registry
from storyloom.workflow.events import NodeStarted, RunEvent
from storyloom.workflow.runner import RunResult, WorkflowRunner
from storyloom.workflow.workflow_file import Workflow

REGISTRY = node_registry(entry_points=False)


def edge(spec: str) -> dict[str, str]:
    source, target = (part.strip() for part in spec.split(">"))
    s_node, s_slot = source.split(".")
    t_node, t_slot = target.split(".")
    return {"source": s_node, "sourceSlot": s_slot, "target": t_node, "targetSlot": t_slot}


def build(nodes: dict[str, tuple[str, dict[str, Any]]], edges: list[str], **extra: Any) -> Workflow:
    return Workflow.model_validate(
        {
            "id": "flow",
            "nodes": [{"id": n, "type": t, "config": c} for n, (t, c) in nodes.items()],
            "edges": [edge(e) for e in edges],
            **extra,
        }
    )


async def run(workflow: Workflow, **inputs: Any) -> tuple[RunResult, list[str]]:
    started: list[str] = []

    def on_event(event: RunEvent) -> None:
        if isinstance(event, NodeStarted):
            started.append(event.node_id)

    result = await WorkflowRunner(REGISTRY).run(workflow, inputs=inputs, on_event=on_event)
    assert result.status == "completed", result.errors
    return result, started


def switch_workflow() -> Workflow:
    # The false branch would fail if it ran: {{x}} has no variable and missing = error.
    return build(
        {
            "in": ("core:GroupInput", {}),
            "yes": ("core:TextInput", {"text": "took the true branch"}),
            "boom": ("core:VariableApplicator", {"missing": "error"}),
            "no": ("core:TextInput", {"text": "{{x}}"}),
            "vars": ("core:JsonExtract", {}),
            "switch": ("core:Switch", {}),
            "out": ("core:GroupOutput", {}),
        },
        [
            "in.go > switch.condition",
            "yes.text > switch.on_true",
            "no.text > boom.text",
            "no.text > vars.text",
            "vars.value > boom.variables",
            "boom.text > switch.on_false",
            "switch.value > out.value",
        ],
        interfaceInputs={"go": {"dataFlowType": "BOOLEAN", "required": True}},
        interfaceOutputs={"value": {"dataFlowType": "ANY"}},
    )


async def test_switch_computes_only_the_branch_it_takes() -> None:
    result, started = await run(switch_workflow(), go=True)
    assert result.interface_outputs == {"value": "took the true branch"}
    assert "yes" in started
    assert "boom" not in started and "no" not in started


async def test_switch_fails_when_the_taken_branch_fails() -> None:
    result = await WorkflowRunner(REGISTRY).run(switch_workflow(), inputs={"go": False})
    assert result.status == "failed"
    assert "{{x}}" in result.errors["boom"]
    assert "yes" not in result.ran


async def test_an_unconnected_branch_gives_null() -> None:
    wf = build(
        {"in": ("core:GroupInput", {}), "switch": ("core:Switch", {})},
        ["in.go > switch.condition"],
        interfaceInputs={"go": {"dataFlowType": "BOOLEAN"}},
    )
    result, _ = await run(wf, go=False)
    assert result.outputs["switch"] == {"value": None}


def merge_workflow(mode: str, **config: Any) -> Workflow:
    return build(
        {
            "in": ("core:GroupInput", {}),
            "merge": ("core:Merge", {"mode": mode, **config}),
        },
        ["in.a > merge.first", "in.b > merge.second", "in.c > merge.third"],
        interfaceInputs={name: {"dataFlowType": "ANY"} for name in "abc"},
    )


async def merged(mode: str, inputs: dict[str, Any], **config: Any) -> Any:
    result, _ = await run(merge_workflow(mode, **config), **inputs)
    return result.outputs["merge"]["value"]


async def test_merge_takes_the_first_value_present() -> None:
    assert await merged("first-present", {"b": "second", "c": "third"}) == "second"
    assert await merged("first-present", {}) is None


async def test_merge_concatenates_text_or_lists() -> None:
    assert await merged("concat", {"a": "one", "c": 3}) == "one\n3"
    assert await merged("concat", {"a": "one", "b": "two"}, separator=" | ") == "one | two"
    assert await merged("concat", {"a": [1], "b": [2, 3]}) == [1, 2, 3]


async def test_merge_lists_the_values_present() -> None:
    assert await merged("list", {"a": {"k": 1}, "c": "x"}) == [{"k": 1}, "x"]


async def test_group_input_and_output_carry_the_interface() -> None:
    wf = build(
        {
            "in": ("core:GroupInput", {}),
            "t": ("core:TextTemplate", {"template": "{{who}} x{{n}}"}),
            "pack": ("core:JsonExtract", {}),
            "out": ("core:GroupOutput", {}),
        },
        [
            "in.vars > pack.text",
            "pack.value > t.variables",
            "t.text > out.text",
            "in.n > out.count",
        ],
        interfaceInputs={
            "vars": {"dataFlowType": "OBJECT", "required": True},
            "n": {"dataFlowType": "INTEGER", "config": {"default": 2}},
        },
        interfaceOutputs={"text": {}, "count": {"dataFlowType": "INTEGER"}},
    )
    result, _ = await run(wf, vars={"who": "Ann", "n": 5})
    assert result.interface_outputs == {"text": "Ann x5", "count": 2}
