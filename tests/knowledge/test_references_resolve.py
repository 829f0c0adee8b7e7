"""Resolution of ``{{{...}}}`` references: forms, scope, merging, markers, nesting."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from storyloom.core.errors import NotFound
from storyloom.knowledge.caiu import CAIU, Affix
from storyloom.knowledge.catalog import KnowledgeCatalog, LoadedKB
from storyloom.knowledge.knowledge_base import KnowledgeBase
from storyloom.knowledge.references import ReferenceMarkers, ReferenceResolver


def entry(
    entry_id: str,
    name: str | None = None,
    text: str = "",
    *,
    children: tuple[str, ...] = (),
    tags: tuple[str, ...] = (),
    priority: int = 100,
    enabled: bool = True,
    defines: dict[str, Any] | None = None,
) -> CAIU:
    return CAIU.model_validate(
        {
            "id": entry_id,
            "displayName": name,
            "content": {"value": text},
            "usage_metadata": {"priority": priority},
            "management_metadata": {
                "child_ids": list(children),
                "tags": list(tags),
                "is_enabled": enabled,
            },
            "variable_handling": {"defines_variables": defines or {}},
        }
    )


def kb(kb_id: str, name: str, *entries: CAIU) -> KnowledgeBase:
    return KnowledgeBase(kb_id=kb_id, kb_displayName=name, entries=list(entries))


def resolver(*kbs: KnowledgeBase, **options: Any) -> ReferenceResolver:
    return ReferenceResolver(KnowledgeCatalog.of(kbs), **options)


MISSING = "[引用错误: {} 未找到或无法解析]"


def world() -> KnowledgeBase:
    return kb(
        "kb_w",
        "World",
        entry("tavern", "Tavern", "A smoky tavern."),
        entry("places", "Places", "editor note", children=("city", "port")),
        entry("city", "City", "A walled city.", children=("gate",)),
        entry("gate", "Gate", "The north gate."),
        entry("port", "Port", "A busy port."),
    )


# -- forms -------------------------------------------------------------------------------


def test_name_reference_is_replaced_by_the_entry_text() -> None:
    out = resolver(world()).resolve("Go to {{{Tavern}}} now.", "kb_w")
    assert out.text == "Go to A smoky tavern. now."
    assert out.problems == []
    assert out.ok


def test_id_reference_finds_the_entry_even_inside_a_group() -> None:
    out = resolver(world()).resolve("{{{id=tavern}}} | {{{id=port}}}", "kb_w")
    assert out.text == "A smoky tavern. | A busy port."


def test_name_reference_matches_top_level_entries_only() -> None:
    out = resolver(world()).resolve("{{{Port}}}", "kb_w")
    assert out.text == MISSING.format("Port")
    assert out.problems[0].kind == "missing"
    assert "inside a group" in out.problems[0].message


@pytest.mark.parametrize(
    "body", ["Places/Port", "id=places/id=port", "id=places/Port", "Places/id=port"]
)
def test_group_paths_with_names_ids_and_mixes(body: str) -> None:
    out = resolver(world()).resolve("{{{" + body + "}}}", "kb_w")
    assert out.text == "A busy port."


def test_multi_level_path_walks_child_ids() -> None:
    out = resolver(world()).resolve("{{{Places/City/Gate}}}", "kb_w")
    assert out.text == "The north gate."


def test_path_segment_must_be_a_child_of_the_previous_entry() -> None:
    out = resolver(world()).resolve("{{{Places/Gate}}} {{{Tavern/id=port}}}", "kb_w")
    assert out.text == f"{MISSING.format('Places/Gate')} {MISSING.format('Tavern/id=port')}"
    assert "'Places' has no child 'Gate'" in out.problems[0].message


def test_group_reference_gives_the_aggregate_of_its_children_with_affixes() -> None:
    base = world()
    group = base.entry("places")
    assert group is not None
    group.usage_metadata.prefix = Affix(text="<places>", is_enabled=True)
    group.usage_metadata.suffix = Affix(text="</places>", is_enabled=True)
    out = resolver(base).resolve("{{{Places}}}", "kb_w")
    # City is a group itself: its own content is editor-only, its child Gate is injected.
    assert out.text == "<places>The north gate.\nA busy port.</places>"


def test_unqualified_reference_does_not_look_in_other_kbs() -> None:
    other = kb("kb_o", "Other", entry("o1", "Elsewhere", "far"))
    out = resolver(world(), other).resolve("{{{Elsewhere}}}", "kb_w")
    assert out.text == MISSING.format("Elsewhere")


def test_text_outside_any_kb_looks_in_every_kb() -> None:
    other = kb("kb_o", "Other", entry("o1", "Elsewhere", "far"))
    out = resolver(world(), other).resolve("{{{Tavern}}} / {{{Elsewhere}}}", None)
    assert out.text == "A smoky tavern. / far"


# -- cross-KB ----------------------------------------------------------------------------


def test_cross_kb_by_kb_id_with_names_ids_and_paths() -> None:
    here = kb("kb_h", "Here", entry("h", "Note", "{{{kb_w:Tavern}}}"))
    r = resolver(here, world())
    assert r.resolve("{{{kb_w:Tavern}}}", "kb_h").text == "A smoky tavern."
    assert r.resolve("{{{kb_w:id=tavern}}}", "kb_h").text == "A smoky tavern."
    assert r.resolve("{{{kb_w:Places/id=city/Gate}}}", "kb_h").text == "The north gate."


def test_cross_kb_by_display_name() -> None:
    here = kb("kb_h", "Here")
    out = resolver(here, world()).resolve("{{{World:Places/Port}}}", "kb_h")
    assert out.text == "A busy port."
    assert out.problems == []


def test_project_alias_wins_over_a_global_display_name() -> None:
    aliased = kb("kb_a", "Aliased", entry("a", "Fact", "from the alias"))
    named = kb("kb_n", "Lore", entry("n", "Fact", "from the display name"))
    catalog = KnowledgeCatalog(
        [
            LoadedKB(kb=aliased, folder=Path(), scope="local", aliases=("Lore",)),
            LoadedKB(kb=named, folder=Path(), scope="global"),
        ]
    )
    out = ReferenceResolver(catalog).resolve("{{{Lore:Fact}}}", None)
    assert out.text == "from the alias"


def test_kb_display_name_matching_several_kbs_merges_them_and_warns() -> None:
    first = kb("kb_1", "Lore", entry("a", "Fact", "first", priority=10))
    second = kb("kb_2", "Lore", entry("b", "Fact", "second", priority=50))
    out = resolver(first, second).resolve("{{{Lore:Fact}}}", None)
    assert out.text == "second\nfirst"
    assert [p.kind for p in out.problems] == ["ambiguous_kb"]
    assert out.ok  # a warning, the text was resolved


def test_unknown_qualifier_falls_back_to_a_name_with_a_colon() -> None:
    base = kb("kb_x", "X", entry("a", "Act 1: Dawn", "sunrise"))
    r = resolver(base)
    assert r.resolve("{{{Act 1: Dawn}}}", "kb_x").text == "sunrise"
    out = r.resolve("{{{Nowhere:Thing}}}", "kb_x")
    assert out.text == MISSING.format("Nowhere:Thing")
    assert "no knowledge base named 'Nowhere'" in out.problems[0].message


# -- tags and same names -----------------------------------------------------------------


def test_tag_reference_merges_tagged_entries_of_the_current_kb() -> None:
    here = kb(
        "kb_t",
        "T",
        entry("a", "A", "alpha", tags=("city",), priority=5),
        entry("b", "B", "beta", tags=("city",), priority=20),
        entry("c", "C", "gamma"),
    )
    other = kb("kb_o", "O", entry("x", "X", "other", tags=("city",)))
    r = resolver(here, other)
    assert r.resolve("{{{tag:city}}}", "kb_t").text == "beta\nalpha"
    assert r.resolve("{{{O:tag:city}}}", "kb_t").text == "other"
    assert r.resolve("{{{tag:none}}}", "kb_t").problems[0].kind == "missing"


def same_names() -> KnowledgeBase:
    return kb(
        "kb_s",
        "S",
        entry("low", "Mood", "calm", priority=10),
        entry("first", "Mood", "tense"),
        entry("second", "Mood", "angry"),
    )


def test_same_name_merges_by_priority_then_file_order() -> None:
    out = resolver(same_names()).resolve("{{{Mood}}}", "kb_s")
    assert out.text == "tense\nangry\ncalm"


def test_same_name_uses_only_the_active_matches_when_some_are_active() -> None:
    r = resolver(same_names())
    out = r.resolve("{{{Mood}}}", "kb_s", active={("kb_s", "low"), ("kb_s", "unrelated")})
    assert out.text == "calm"
    none_active = r.resolve("{{{Mood}}}", "kb_s", active={("kb_s", "unrelated")})
    assert none_active.text == "tense\nangry\ncalm"


def test_disabled_entries_are_not_resolvable() -> None:
    base = kb(
        "kb_d",
        "D",
        entry("off", "Off", "hidden", enabled=False),
        entry("g", "Group", children=("c",), enabled=False),
        entry("c", "Child", "inside"),
        entry("m1", "Mixed", "on"),
        entry("m2", "Mixed", "off", enabled=False),
    )
    r = resolver(base)
    off = r.resolve("{{{Off}}}", "kb_d")
    assert off.text == MISSING.format("Off")
    assert off.problems[0].kind == "disabled"
    assert r.resolve("{{{Group/Child}}}", "kb_d").problems[0].kind == "disabled"
    assert r.resolve("{{{Mixed}}}", "kb_d").text == "on"


# -- errors and recursion ----------------------------------------------------------------


def test_missing_reference_reports_where_it_is_written() -> None:
    base = kb("kb_m", "M", entry("a", "A", "see {{{Nothing}}}"))
    out = resolver(base).resolve("{{{A}}}", "kb_m")
    assert out.text == f"see {MISSING.format('Nothing')}"
    [problem] = out.problems
    assert (problem.kind, problem.reference, problem.kb_id, problem.entry_id) == (
        "missing",
        "Nothing",
        "kb_m",
        "a",
    )
    assert (problem.start, problem.end) == (4, 17)
    assert not out.ok


def test_malformed_reference_gets_the_error_marker() -> None:
    out = resolver(world()).resolve("{{{Places//Port}}}", "kb_w")
    assert out.text == MISSING.format("Places//Port")
    assert out.problems[0].kind == "syntax"


def test_nested_references_resolve_recursively() -> None:
    base = kb(
        "kb_n",
        "N",
        entry("a", "Hero", "Hero of {{{Home}}}."),
        entry("b", "Home", "{{{Town}}} by the sea"),
        entry("c", "Town", "Saltby"),
    )
    assert resolver(base).resolve("{{{Hero}}}", "kb_n").text == "Hero of Saltby by the sea."


def test_cycle_inserts_the_cycle_marker() -> None:
    base = kb(
        "kb_c",
        "C",
        entry("a", "A", "a[{{{B}}}]"),
        entry("b", "B", "b[{{{A}}}]"),
    )
    out = resolver(base).resolve("{{{A}}}", "kb_c")
    assert out.text == "a[b[[引用循环: A]]]"
    [problem] = out.problems
    assert (problem.kind, problem.entry_id) == ("cycle", "b")
    assert "A → B → A" in problem.message


def test_self_reference_is_a_cycle() -> None:
    base = kb("kb_c", "C", entry("a", "A", "me: {{{id=a}}}"))
    r = resolver(base)
    assert r.resolve("{{{A}}}", "kb_c").text == "me: [引用循环: id=a]"
    assert r.resolve_entry("kb_c", "a").text == "me: [引用循环: id=a]"
    assert r.resolve("{{{A}}}", "kb_c", entry_id="a").text == "[引用循环: A]"


def test_child_referencing_its_own_group_is_a_cycle() -> None:
    base = kb(
        "kb_g",
        "G",
        entry("g", "Group", children=("inner",)),
        entry("inner", "Inner", children=("leaf",)),
        entry("leaf", "Leaf", "leaf sees {{{Group/Inner}}}"),
    )
    out = resolver(base).resolve("{{{Group}}}", "kb_g")
    assert out.text == "leaf sees [引用循环: Group/Inner]"


def chain(length: int) -> KnowledgeBase:
    entries = [entry(f"e{n}", f"E{n}", f"{n}>{{{{{{E{n + 1}}}}}}}") for n in range(1, length)]
    return kb("kb_l", "L", *entries, entry(f"e{length}", f"E{length}", f"{length}."))


def test_depth_limit_default_is_five_references_deep() -> None:
    assert resolver(chain(5)).resolve("{{{E1}}}", "kb_l").text == "1>2>3>4>5."
    out = resolver(chain(6)).resolve("{{{E1}}}", "kb_l")
    assert out.text == "1>2>3>4>5>[引用深度超限: E6]"
    assert [(p.kind, p.entry_id) for p in out.problems] == [("depth", "e5")]


def test_depth_limit_is_configurable() -> None:
    out = resolver(chain(6), max_depth=2).resolve("{{{E1}}}", "kb_l")
    assert out.text == "1>2>[引用深度超限: E3]"
    assert resolver(chain(6), max_depth=6).resolve("{{{E1}}}", "kb_l").text == "1>2>3>4>5>6."


def test_markers_are_configurable() -> None:
    markers = ReferenceMarkers(missing="<?{key}?>", cycle="<loop {key}>", depth="<deep>")
    base = kb("kb_c", "C", entry("a", "A", "{{{A}}}{{{B}}}"))
    out = resolver(base, markers=markers).resolve("{{{A}}}", "kb_c")
    assert out.text == "<loop A><?B?>"


def test_resolve_entry_of_an_unknown_entry_raises() -> None:
    with pytest.raises(NotFound):
        resolver(world()).resolve_entry("kb_w", "nope")


# -- variables ---------------------------------------------------------------------------


def test_entry_defaults_fill_its_own_variables_and_caller_variables_override() -> None:
    base = kb(
        "kb_v",
        "V",
        entry("a", "Greeting", "Hi {{user}}, {{{Weather}}}", defines={"user": "stranger"}),
        entry("b", "Weather", "{{weather}} in {{city}}", defines={"weather": "rain"}),
    )
    r = resolver(base)
    assert r.resolve("{{{Greeting}}}", "kb_v").text == "Hi stranger, rain in {{city}}"
    out = r.resolve("{{{Greeting}}} {{user}}", "kb_v", variables={"user": "Ann", "city": "Oslo"})
    assert out.text == "Hi Ann, rain in Oslo Ann"
    assert r.resolve("{{weather}}", "kb_v").text == "{{weather}}"


def test_variable_values_are_not_parsed_as_references() -> None:
    base = kb("kb_v", "V", entry("a", "A", "value: {{x}}"))
    out = resolver(base).resolve("{{{A}}}", "kb_v", variables={"x": "{{{A}}}"})
    assert out.text == "value: {{{A}}}"


def test_an_empty_group_container_reference_gives_no_text_not_its_editor_note() -> None:
    shelf = entry("shelf", "Shelf", "editor note: dragons go here")
    shelf = shelf.model_copy(update={"entry_type": "group_container"})
    out = resolver(kb("kb_w", "World", shelf)).resolve("[{{{Shelf}}}]", "kb_w")
    assert out.text == "[]"
    assert out.ok
