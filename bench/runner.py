"""What does the workflow runner cost, and what do concurrency and the cache buy?

The graph is a seeded random layered DAG: 1,000 nodes in 20 layers of 50; every node past
the first layer takes one to three inputs from the layers before it (mostly the one just
before). Each node adds its inputs and a constant from its config.

(a) overhead: trivial nodes. The runner (cache keys, events, a task per node) against a
    plain loop awaiting the same ``run`` functions in a topological order computed
    beforehand; µs per node for both, and the difference. Like for like, the runner's
    graph is prepared beforehand too (validated and planned, the output cache emptied, so
    every node still runs); the first run of a workflow, validation and planning
    included, is printed as well.
(b) I/O-bound nodes that each await 1 ms, as a remote LLM call does: the plain loop
    (one node at a time, as ComfyUI runs) against the runner running branches at once.
(c) a fully cached re-run of (a)'s workflow by the same runner, as a share of its first
    run's time.
(d) a 200-node graph (10 layers of 20) after one first-layer node's config changed: how
    many nodes ran, against the size of that node's downstream cone.

Prints figures, asserts nothing. ``ratio:`` is (b)'s plain loop time / runner time.

    .venv/bin/python bench/runner.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar

from storyloom.workflow.node_registry import NodeRegistry
from storyloom.workflow.node_type import (
    NodeConfig,
    NodeContext,
    NodeExpansion,
    NodeType,
    Slot,
)
from storyloom.workflow.runner import RunResult, WorkflowRunner
from storyloom.workflow.slot_types import INTEGER
from storyloom.workflow.workflow_file import Workflow
from storyloom.workflow.workflow_graph import WorkflowGraph

INPUTS = ("a", "b", "c")


class AddConfig(NodeConfig):
    k: int = 0


class Add(NodeType[AddConfig]):
    type: ClassVar[str] = "bench:Add"
    display_name: ClassVar[str] = "Add"
    inputs: ClassVar[tuple[Slot, ...]] = tuple(
        Slot(name=name, type=INTEGER, required=False, default=0) for name in INPUTS
    )
    outputs: ClassVar[tuple[Slot, ...]] = (Slot(name="value", type=INTEGER),)

    async def run(
        self, ctx: NodeContext, inputs: dict[str, Any], config: AddConfig
    ) -> dict[str, Any] | NodeExpansion:
        return {"value": inputs["a"] + inputs["b"] + inputs["c"] + config.k}


class RemoteAdd(Add):
    type: ClassVar[str] = "bench:RemoteAdd"

    async def run(
        self, ctx: NodeContext, inputs: dict[str, Any], config: AddConfig
    ) -> dict[str, Any] | NodeExpansion:
        await asyncio.sleep(0.001)
        return {"value": inputs["a"] + inputs["b"] + inputs["c"] + config.k}


def layered_dag(
    node_type: str, layers: int, width: int, seed: int = 7, workflow_id: str = "bench"
) -> Workflow:
    rng = random.Random(seed)
    nodes: list[dict[str, Any]] = []
    edges: list[dict[str, Any]] = []
    for layer in range(layers):
        for i in range(width):
            node_id = f"n{layer}_{i}"
            nodes.append({"id": node_id, "type": node_type, "config": {"k": rng.randint(1, 9)}})
            if layer == 0:
                continue
            for slot in INPUTS[: rng.randint(1, 3)]:
                # Mostly the layer just before; now and then one further back.
                back = 1 if rng.random() < 0.8 else rng.randint(1, layer)
                source = f"n{layer - back}_{rng.randrange(width)}"
                edges.append(
                    {"source": source, "sourceSlot": "value", "target": node_id, "targetSlot": slot}
                )
    return Workflow.model_validate({"id": workflow_id, "nodes": nodes, "edges": edges})


async def plain_loop(workflow: Workflow, registry: NodeRegistry, order: list[str]) -> None:
    """The baseline: each node in topological order, inputs looked up, one at a time."""
    nodes = {n.id: n for n in workflow.nodes}
    feeding: dict[str, list[tuple[str, str]]] = {n: [] for n in nodes}
    for edge in workflow.edges:
        feeding[edge.target].append((edge.target_slot, edge.source))
    outputs: dict[str, dict[str, Any]] = {}
    ctx: Any = None
    for node_id in order:
        node = nodes[node_id]
        node_type = registry.get(node.type)
        assert node_type is not None
        inputs = {"a": 0, "b": 0, "c": 0}
        for slot, source in feeding[node_id]:
            inputs[slot] = outputs[source]["value"]
        result = await node_type.run(ctx, inputs, node_type.parse_config(node.config))
        assert isinstance(result, dict)
        outputs[node_id] = result


async def timed(make: Callable[[], Awaitable[Any]], rounds: int) -> float:
    """Median seconds of ``rounds`` runs."""
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        await make()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


async def first_and_again(
    registry: NodeRegistry, workflow: Workflow
) -> tuple[float, float, RunResult]:
    """Seconds of a fresh runner's first run and of its second, and the second's result."""
    runner = WorkflowRunner(registry)
    start = time.perf_counter()
    await runner.run(workflow)
    middle = time.perf_counter()
    result = await runner.run(workflow)
    return middle - start, time.perf_counter() - middle, result


def downstream_cone(workflow: Workflow, start: str) -> set[str]:
    children: dict[str, set[str]] = {}
    for edge in workflow.edges:
        children.setdefault(edge.source, set()).add(edge.target)
    seen, stack = {start}, [start]
    while stack:
        for child in children.get(stack.pop(), ()):
            if child not in seen:
                seen.add(child)
                stack.append(child)
    return seen


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    rounds = args.rounds
    registry = NodeRegistry([Add, RemoteAdd])

    trivial = layered_dag("bench:Add", 20, 50)
    count = len(trivial.nodes)
    order = WorkflowGraph.build(trivial, registry).order()
    await plain_loop(trivial, registry, order)  # warm up both
    await WorkflowRunner(registry).run(trivial)
    plain_s = await timed(lambda: plain_loop(trivial, registry, order), rounds)
    # A fresh runner: the first run of this workflow, validation and planning included.
    fresh_s = await timed(lambda: WorkflowRunner(registry).run(trivial), rounds)
    warm = WorkflowRunner(registry)
    await warm.run(trivial)

    def uncached() -> Awaitable[Any]:
        warm.cache.clear()  # the graph stays prepared; every node runs
        return warm.run(trivial)

    prepared_s = await timed(uncached, rounds)
    plain_us = plain_s * 1e6 / count
    print(f"(a) {count} trivial nodes, {len(trivial.edges)} edges, every node run")
    print(f"  plain loop:                    {plain_us:6.1f} µs per node")
    # The plain loop is handed its topological order, so the like-for-like figure is the
    # prepared graph; the first run adds validation and planning, paid once per edit.
    prepared_us = prepared_s * 1e6 / count
    fresh_us = fresh_s * 1e6 / count
    print(
        f"  runner, workflow prepared:     {prepared_us:6.1f} µs per node, "
        f"overhead {prepared_us - plain_us:6.1f} (target < 50)"
    )
    print(
        f"  runner, first run of workflow: {fresh_us:6.1f} µs per node, "
        f"overhead {fresh_us - plain_us:6.1f} (validation and planning included)"
    )

    remote = layered_dag("bench:RemoteAdd", 20, 50)
    remote_order = WorkflowGraph.build(remote, registry).order()
    plain_io = await timed(lambda: plain_loop(remote, registry, remote_order), rounds)
    # The default max_concurrency (64) has room for a whole 50-wide layer: one wave of
    # 1 ms waits per layer.
    runner_io = await timed(lambda: WorkflowRunner(registry).run(remote), rounds)
    print(f"(b) {count} nodes awaiting 1 ms each; runner: first runs (validation included)")
    print(f"  plain loop, one node at a time: {plain_io * 1000:8.1f} ms")
    print(f"  runner, concurrent branches:    {runner_io * 1000:8.1f} ms (target: ratio >= 10)")

    cold: list[float] = []
    again: list[float] = []
    for _ in range(rounds):
        first_s, rerun_s, result = await first_and_again(registry, trivial)
        cold.append(first_s)
        again.append(rerun_s)
    cold_s, again_s = statistics.median(cold), statistics.median(again)
    share = again_s / cold_s
    print("(c) the same runner runs (a)'s unchanged workflow again")
    print(f"  first run:  {cold_s * 1000:8.2f} ms")
    print(f"  re-run:     {again_s * 1000:8.2f} ms = {share:.1%} of the first (target < 10%)")
    print(f"  nodes run on re-run: {len(result.ran)}, reported cached: {len(result.cached)}")

    small = layered_dag("bench:Add", 10, 20, seed=11)
    runner = WorkflowRunner(registry)
    await runner.run(small)
    leaf = small.nodes[3]
    leaf.config["k"] = leaf.config["k"] + 100
    result = await runner.run(small)
    cone = downstream_cone(small, leaf.id)
    print(f"(d) {len(small.nodes)}-node graph, first-layer node {leaf.id} changed")
    print(f"  nodes run: {len(result.ran)} (its downstream cone: {len(cone)} nodes; "
          f"same set: {'yes' if set(result.ran) == cone else 'no'})")  # fmt: skip
    print(f"ratio: {plain_io / runner_io:.1f}")


if __name__ == "__main__":
    asyncio.run(main())
