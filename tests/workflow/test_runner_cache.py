"""The output cache: what is reused, what is invalidated, what is evicted."""

from __future__ import annotations

from typing import TYPE_CHECKING

from storyloom.workflow.events import NodeCached, NodeCompleted
from storyloom.workflow.node_cache import OutputCache, estimate_size
from storyloom.workflow.node_registry import NodeRegistry
from storyloom.workflow.runner import WorkflowRunner
from storyloom.workflow.workflow_file import Workflow

if TYPE_CHECKING:
    from tests.workflow.conftest import BuildWorkflow, Probe


def diamond(make_workflow: BuildWorkflow, left: str = "left", right: str = "right") -> Workflow:
    """left → up_left ─┐
    right → up_right ─┴→ join → shout"""
    return make_workflow(
        "diamond",
        {
            "left": ("test:Text", {"text": left}),
            "right": ("test:Text", {"text": right}),
            "up_left": ("test:Upper", {}),
            "up_right": ("test:Upper", {}),
            "join": ("test:Join", {}),
            "shout": ("test:Upper", {}),
        },
        [
            "left.text -> up_left.text",
            "right.text -> up_right.text",
            "up_left.text -> join.a",
            "up_right.text -> join.b",
            "join.text -> shout.text",
        ],
    )


async def test_unchanged_node_reports_cached_output(
    runner: WorkflowRunner, make_workflow: BuildWorkflow, probe: Probe
) -> None:
    first = await runner.run(diamond(make_workflow))
    probe.ran.clear()
    run = runner.start(diamond(make_workflow))
    again = await run.wait()
    assert probe.ran == []
    assert again.ran == []
    assert again.cached == ["shout"]  # nothing upstream of a cached target is touched
    (cached,) = [e for e in run.events if isinstance(e, NodeCached)]
    assert cached.node_id == "shout"
    assert cached.source == "cache"
    assert cached.output == "LEFT+RIGHT"
    assert not [e for e in run.events if isinstance(e, NodeCompleted)]
    assert cached.history_id is not None
    assert again.outputs["shout"] == first.outputs["shout"]


async def test_config_change_reruns_exactly_its_downstream_cone(
    runner: WorkflowRunner, make_workflow: BuildWorkflow, probe: Probe
) -> None:
    await runner.run(diamond(make_workflow))
    probe.ran.clear()
    result = await runner.run(diamond(make_workflow, right="other"))
    assert sorted(probe.ran) == ["join", "right", "shout", "up_right"]
    # The unchanged branch is reported from the cache, not re-run.
    assert result.cached == ["up_left"]
    assert result.outputs["shout"] == {"text": "LEFT+OTHER"}


async def test_unchanged_output_upstream_lets_downstream_hit_the_cache(
    runner: WorkflowRunner, make_workflow: BuildWorkflow, probe: Probe
) -> None:
    def workflow(sep: str) -> Workflow:
        return make_workflow(
            "sep",
            {
                "a": ("test:Text", {"text": "a"}),
                "join": ("test:Join", {"sep": sep}),
                "up": ("test:Upper", {}),
                "other": ("test:Upper", {}),
            },
            ["a.text -> join.a", "join.text -> up.text", "a.text -> other.text"],
        )

    await runner.run(workflow("+"))
    probe.ran.clear()
    result = await runner.run(workflow("-"))
    assert sorted(probe.ran) == ["join", "up"]
    assert sorted(result.cached) == ["a", "other"]


async def test_non_idempotent_node_always_reruns_and_its_consumers_follow_its_output(
    runner: WorkflowRunner, make_workflow: BuildWorkflow, probe: Probe
) -> None:
    workflow = make_workflow(
        "counter",
        {"count": ("test:Counter", {}), "show": ("test:Show", {})},
        ["count.value -> show.text"],
    )
    first = await runner.run(workflow)
    second = await runner.run(workflow)
    assert probe.ran == ["count", "show", "count", "show"]
    assert first.outputs["show"]["seen"]["text"] == ["str", "0"]
    assert second.outputs["show"]["seen"]["text"] == ["str", "1"]


async def test_consumer_of_non_idempotent_node_is_cached_when_its_output_repeats(
    registry: NodeRegistry, make_workflow: BuildWorkflow, probe: Probe
) -> None:
    runner = WorkflowRunner(registry)
    workflow = make_workflow(
        "counter",
        {"count": ("test:Counter", {}), "show": ("test:Show", {})},
        ["count.value -> show.text"],
    )
    await runner.run(workflow)
    probe.counter = iter([0])  # type: ignore[assignment]
    result = await runner.run(workflow)
    assert probe.ran == ["count", "show", "count"]
    assert result.cached == ["show"]


async def test_output_json_cannot_express_is_never_served_from_the_cache(
    runner: WorkflowRunner, make_workflow: BuildWorkflow, probe: Probe
) -> None:
    def workflow(label: str) -> Workflow:
        return make_workflow(
            "opaque",
            {"blob": ("test:Opaque", {"label": label}), "show": ("test:Show", {})},
            ["blob.value -> show.text"],
        )

    await runner.run(workflow("one"))
    result = await runner.run(workflow("two"))
    assert probe.ran == ["blob", "show", "blob", "show"]
    assert result.outputs["show"]["seen"]["text"][1].label == "two"


async def test_group_input_is_keyed_by_the_run_inputs(
    runner: WorkflowRunner, make_workflow: BuildWorkflow, probe: Probe
) -> None:
    workflow = make_workflow(
        "iface",
        {"in": ("core:GroupInput", {}), "up": ("test:Upper", {})},
        ["in.text -> up.text"],
        interfaceInputs={"text": {"dataFlowType": "STRING", "required": True}},
    )
    one = await runner.run(workflow, inputs={"text": "one"})
    two = await runner.run(workflow, inputs={"text": "two"})
    again = await runner.run(workflow, inputs={"text": "one"})
    assert (one.outputs["up"], two.outputs["up"]) == ({"text": "ONE"}, {"text": "TWO"})
    assert probe.ran == ["up", "up"]
    assert again.cached == ["up"]


def test_cache_evicts_least_recently_used_entries_beyond_its_byte_budget() -> None:
    probe = OutputCache()
    probe.put("k0", {"text": "x" * 1000})
    assert probe.size_bytes > 1000
    cache = OutputCache(max_bytes=3 * probe.size_bytes)
    for i in range(3):
        cache.put(f"k{i}", {"text": "x" * 1000})
    assert cache.get("k0") is not None  # k0 is now the most recently used
    cache.put("k3", {"text": "x" * 1000})
    assert "k1" not in cache
    assert all(k in cache for k in ("k0", "k2", "k3"))
    assert cache.size_bytes <= cache.max_bytes
    assert cache.put("huge", {"text": "x" * 10_000}) is False
    assert "huge" not in cache and len(cache) == 3


def test_size_estimate_grows_with_content_and_stays_cheap_for_long_lists() -> None:
    assert estimate_size("x" * 10_000) > estimate_size("x" * 10) + 9_000
    long = ["x" * 100] * 100_000
    assert estimate_size(long) >= 100 * 100_000
    assert estimate_size({"a": [{"b": "c" * 50}]}) > estimate_size({"a": []})


async def test_evicted_output_is_computed_again(
    registry: NodeRegistry, make_workflow: BuildWorkflow, probe: Probe
) -> None:
    runner = WorkflowRunner(registry, cache=OutputCache(max_bytes=1))
    workflow = make_workflow("tiny", {"a": ("test:Text", {"text": "a"})})
    await runner.run(workflow)
    await runner.run(workflow)
    assert probe.ran == ["a", "a"]
