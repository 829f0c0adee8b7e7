"""ST-Prompt-Template's decorators and title tags: kept at import as the entry's template
marks (out of its text), read back by :func:`template_marks`, and written back on export."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from storyloom.knowledge.caiu import CAIU
from storyloom.knowledge.st_decorators import template_marks
from storyloom.knowledge.st_world_info import export_world_info, world_info_to_kb
from storyloom.testing.st_documents import world_info_document, world_info_entry

BOOK = Path("book.json")


def imported(content: str, **fields: Any) -> tuple[CAIU, list[str]]:
    document = world_info_document([world_info_entry(0, ["dragon"], content, **fields)])
    kb, warnings = world_info_to_kb(document, BOOK)
    return kb.entries[0], warnings


def test_the_if_decorator_is_kept_as_the_entrys_condition_and_leaves_its_text() -> None:
    entry, warnings = imported("@@if variables.hp > 5 && getvar('x')\nHP is high.")
    assert warnings == []
    assert entry.content.value == "HP is high."
    assert template_marks(entry).condition == "variables.hp > 5 && getvar('x')"


def test_the_flag_decorators_are_kept() -> None:
    entry, warnings = imported(
        "@@private\n@@preprocessing\n@@render_after\n<% const a = 1 %><%= a %>"
    )
    assert warnings == []
    marks = template_marks(entry)
    assert (marks.private, marks.preprocessing, marks.injection) == (True, True, "render_after")
    assert marks.prompt_only_when_rendered


def test_an_if_without_a_condition_is_reported() -> None:
    entry, warnings = imported("@@if\ntext")
    assert template_marks(entry).condition is None
    assert any("no condition" in w for w in warnings)


def test_title_tags_mark_the_entry() -> None:
    for title, expected in [
        ("[GENERATE:BEFORE] rules", "generate_before"),
        ("[generate:after] tail", "generate_after"),
        ("[RENDER:BEFORE] bar", "render_before"),
        ("[RENDER:AFTER] status", "render_after"),
    ]:
        entry = CAIU.model_validate({"id": "e", "displayName": title})
        assert template_marks(entry).injection == expected
    initial = CAIU.model_validate({"id": "e", "displayName": "[InitialVariables] start"})
    assert template_marks(initial).initial_variables


def test_template_decorators_are_written_back_on_export() -> None:
    content = "@@if getvar('hp') > 5\n@@private\nHP is high."
    document = world_info_document([world_info_entry(0, ["dragon"], content)])
    kb, _ = world_info_to_kb(document, BOOK)
    assert export_world_info(kb)["entries"]["0"]["content"] == content
