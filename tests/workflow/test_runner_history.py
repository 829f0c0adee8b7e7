"""Node output history in SQLite, and freezing a node to one of its outputs."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from storyloom.core.errors import NotFound
from storyloom.store.database import Database
from storyloom.workflow.events import NodeCached
from storyloom.workflow.node_history import NodeHistory
from storyloom.workflow.runner import WorkflowRunner
from storyloom.workflow.workflow_file import Workflow

if TYPE_CHECKING:
    from tests.workflow.conftest import BuildWorkflow, Probe


def story(make_workflow: BuildWorkflow, text: str) -> Workflow:
    return make_workflow(
        "story",
        {"draft": ("test:Text", {"text": text}), "up": ("test:Upper", {})},
        ["draft.text -> up.text"],
    )


async def test_history_lists_each_completed_output_newest_first(
    runner: WorkflowRunner, history: NodeHistory, make_workflow: BuildWorkflow
) -> None:
    first = await runner.run(story(make_workflow, "one"))
    await runner.run(story(make_workflow, "two"))
    await runner.run(story(make_workflow, "one"))  # cached: no new row
    entries = history.entries("story", "up")
    assert [e.outputs for e in entries] == [{"text": "TWO"}, {"text": "ONE"}]
    assert [e.preview for e in entries] == ["TWO", "ONE"]
    assert entries[1].run_id == first.run_id
    assert entries[0].id > entries[1].id
    assert entries[0].created_at.endswith("+00:00")
    assert not any(e.frozen for e in entries)
    assert history.get(entries[1].id) == entries[1]
    assert history.get(10_000) is None
    dumped = entries[0].model_dump(by_alias=True)
    assert {"workflowId", "nodeId", "runId", "createdAt"} <= set(dumped)


async def test_frozen_node_reports_its_pinned_output_and_skips_upstream(
    runner: WorkflowRunner, history: NodeHistory, make_workflow: BuildWorkflow, probe: Probe
) -> None:
    await runner.run(story(make_workflow, "one"))
    (entry,) = history.entries("story", "up")
    history.freeze("story", "up", entry.id)
    probe.ran.clear()
    run = runner.start(story(make_workflow, "changed upstream"))
    result = await run.wait()
    assert probe.ran == []  # neither the frozen node nor what feeds it ran
    assert result.outputs["up"] == {"text": "ONE"}
    (cached,) = [e for e in run.events if isinstance(e, NodeCached)]
    assert (cached.node_id, cached.source, cached.history_id) == ("up", "frozen", entry.id)
    assert history.frozen("story")["up"].frozen is True


async def test_frozen_node_feeds_downstream_which_is_cached_by_the_pin(
    runner: WorkflowRunner, history: NodeHistory, make_workflow: BuildWorkflow, probe: Probe
) -> None:
    def workflow(text: str) -> Workflow:
        return make_workflow(
            "story",
            {
                "draft": ("test:Text", {"text": text}),
                "up": ("test:Upper", {}),
                "join": ("test:Join", {}),
            },
            ["draft.text -> up.text", "up.text -> join.a"],
        )

    await runner.run(workflow("one"))
    history.freeze("story", "up", history.entries("story", "up")[0].id)
    probe.ran.clear()
    first = await runner.run(workflow("two"))
    second = await runner.run(workflow("three"))
    assert probe.ran == ["join"]  # keyed by the pin: computed once, then cached
    assert first.outputs["join"] == second.outputs["join"] == {"text": "ONE+B"}


async def test_restoring_an_older_output_pins_it_and_unfreeze_runs_again(
    runner: WorkflowRunner, history: NodeHistory, make_workflow: BuildWorkflow, probe: Probe
) -> None:
    await runner.run(story(make_workflow, "one"))
    await runner.run(story(make_workflow, "two"))
    newest, older = history.entries("story", "up")
    history.freeze("story", "up", older.id)
    restored = await runner.run(story(make_workflow, "two"))
    assert restored.outputs["up"] == {"text": "ONE"}
    entries = history.entries("story", "up")
    assert [e.frozen for e in entries] == [False, True]
    history.freeze("story", "up", newest.id)  # a new pin replaces the old one
    assert history.frozen("story")["up"].id == newest.id
    assert history.unfreeze("story", "up") is True
    assert history.unfreeze("story", "up") is False
    probe.ran.clear()
    await runner.run(story(make_workflow, "three"))
    assert probe.ran == ["draft", "up"]


async def test_freezing_to_another_nodes_entry_is_refused(
    runner: WorkflowRunner, history: NodeHistory, make_workflow: BuildWorkflow
) -> None:
    await runner.run(story(make_workflow, "one"))
    (draft,) = history.entries("story", "draft")
    with pytest.raises(NotFound, match="'up'"):
        history.freeze("story", "up", draft.id)
    with pytest.raises(NotFound):
        history.freeze("story", "up", 9999)
    assert history.frozen("story") == {}


def test_only_the_newest_outputs_per_node_are_kept_and_a_pin_survives(db: Database) -> None:
    history = NodeHistory(db, keep=3)
    ids = [history.record("w", "n", f"run{i}", "", {"text": str(i)}) for i in range(3)]
    history.freeze("w", "n", ids[0])
    for i in range(3, 6):
        history.record("w", "n", f"run{i}", "", {"text": str(i)})
    history.record("w", "other", "run9", "", {"text": "x"})
    kept = [e.outputs["text"] for e in history.entries("w", "n")]
    assert kept == ["5", "4", "3", "0"]
    assert history.frozen("w")["n"].id == ids[0]
    assert [e.outputs["text"] for e in history.entries("w", "other")] == ["x"]
