"""The built-in chapter workflow: plan the scene → draft (Role A) → check (Role C) →
revise → the author's choice.

It is an ordinary workflow file once a project has it: :func:`ensure_chapter_workflow`
writes it into the project's ``workflows/`` when it is missing and never touches a copy
the author has edited. Interface: inputs ``book`` (the book id), ``chapter`` (the chapter
number; empty: the next one), ``brief`` (what should happen); output ``text`` (the chapter
as the author approved or edited it). Several drafts to choose from: set the draft
node's ``drafts`` above 1.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from storyloom.workflow.workflow_file import Workflow, WorkflowLibrary

CHAPTER_WORKFLOW_ID = "writing-chapter"

_STEP_X = 320.0

# (node id, type, label, config), left to right in the order they run.
_NODES: tuple[tuple[str, str, str, dict[str, Any]], ...] = (
    ("in", "core:GroupInput", "Chapter", {}),
    ("plan", "writing:PlanScene", "Plan scene", {}),
    ("draft", "writing:Draft", "Draft (Role A + Role C)", {"max_retries": 1, "drafts": 1}),
    ("check", "writing:Check", "Check (Role C)", {}),
    ("revise", "writing:Revise", "Revise", {}),
    (
        "choose",
        "core:HumanDecision",
        "Your choice",
        {
            "reason": "Approve the chapter, edit it, or ask for it to be revised again",
            "max_retries": 2,
        },
    ),
    ("out", "core:GroupOutput", "Chapter text", {}),
)

_EDGES: tuple[str, ...] = (
    "in.book -> plan.book",
    "in.chapter -> plan.chapter",
    "in.brief -> plan.prompt",
    "in.book -> draft.book",
    "in.chapter -> draft.chapter",
    "in.brief -> draft.prompt",
    "plan.plan -> draft.plan",
    "in.book -> check.book",
    "in.chapter -> check.chapter",
    "draft.text -> check.text",
    "in.book -> revise.book",
    "in.chapter -> revise.chapter",
    "draft.text -> revise.text",
    "check.findings -> revise.findings",
    "revise.text -> choose.value",
    "choose.value -> out.text",
)


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


def chapter_workflow() -> Workflow:
    """The chapter workflow as shipped (``writing-chapter``)."""
    nodes = [
        {
            "id": node_id,
            "type": node_type,
            "label": label,
            "config": dict(config),
            "position": {"x": step * _STEP_X, "y": 0.0},
        }
        for step, (node_id, node_type, label, config) in enumerate(_NODES)
    ]
    return Workflow.model_validate(
        {
            "id": CHAPTER_WORKFLOW_ID,
            "name": "Write a chapter",
            "description": "Plan the scene, draft it with what the book has established "
            "(Role A), check it for contradictions (Role C), revise what was found, "
            "then approve or edit it. Set the draft node's drafts above 1 to choose "
            "among several drafts.",
            "nodes": nodes,
            "edges": [_edge(edge) for edge in _EDGES],
            "interfaceInputs": {
                "book": {
                    "dataFlowType": "STRING",
                    "required": True,
                    "description": "The book's id",
                },
                "chapter": {
                    "dataFlowType": "INTEGER",
                    "description": "The chapter to write (it sees only earlier chapters); "
                    "empty: the next one",
                },
                "brief": {
                    "dataFlowType": "STRING",
                    "required": True,
                    "description": "What should happen in the chapter",
                },
            },
            "interfaceOutputs": {
                "text": {"dataFlowType": "STRING", "description": "The approved chapter"}
            },
        }
    )


def ensure_chapter_workflow(library_or_project_dir: WorkflowLibrary | Path) -> Workflow:
    """The project's chapter workflow, written from :func:`chapter_workflow` when the
    project has no file for it; a file already there (perhaps edited by the author) is
    loaded as it is, never overwritten."""
    library = (
        library_or_project_dir
        if isinstance(library_or_project_dir, WorkflowLibrary)
        else WorkflowLibrary(library_or_project_dir)
    )
    # The file itself, not ``exists``: a library that also serves built-ins would say
    # it exists without there being a file.
    if library.path(CHAPTER_WORKFLOW_ID).is_file():
        return library.load(CHAPTER_WORKFLOW_ID)
    workflow = chapter_workflow()
    library.save(workflow)
    return workflow
