"""What the studio keeps from a run: the text the node gave, whichever slot carries it."""

from __future__ import annotations

import pytest

from storyloom.workflow.events import NodeCompleted
from storyloom.writing.studio import RunOutputNotFound, run_output_text


def completed(node_id: str, outputs: dict[str, object]) -> NodeCompleted:
    return NodeCompleted(run_id="r", node_id=node_id, output="{…}", outputs=outputs, seq=1)


def test_a_human_decision_is_kept_as_the_text_it_approved() -> None:
    events = [completed("choose", {"value": "The chapter.", "decision": "approve", "retries": 0})]
    assert run_output_text(events, "choose") == "The chapter."


def test_a_writing_node_is_kept_by_its_text_and_a_named_slot_wins() -> None:
    events = [completed("draft", {"text": "Draft.", "evaluation": {"decision": "approve"}})]
    assert run_output_text(events, "draft") == "Draft."
    with pytest.raises(RunOutputNotFound, match="evaluation"):
        run_output_text(events, "draft", "evaluation")
    with pytest.raises(RunOutputNotFound, match="has not finished"):
        run_output_text(events, "revise")
