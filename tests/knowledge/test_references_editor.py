"""The editor's side of references: static checks, ``@ref`` targets, variable usage."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from storyloom.knowledge.caiu import CAIU
from storyloom.knowledge.catalog import KnowledgeCatalog, LoadedKB
from storyloom.knowledge.knowledge_base import KnowledgeBase
from storyloom.knowledge.references import (
    CheckTarget,
    ReferenceResolver,
    check_references,
    referenceable_entries,
)
from storyloom.knowledge.variables import check_variable_usage, placeholders


def entry(
    entry_id: str,
    name: str | None = None,
    text: str = "",
    *,
    children: tuple[str, ...] = (),
    tags: tuple[str, ...] = (),
    enabled: bool = True,
    uses: tuple[str, ...] = (),
) -> CAIU:
    data: dict[str, Any] = {
        "id": entry_id,
        "displayName": name,
        "content": {"value": text},
        "management_metadata": {
            "child_ids": list(children),
            "tags": list(tags),
            "is_enabled": enabled,
        },
        "variable_handling": {"uses_variables_in_content": list(uses)},
    }
    return CAIU.model_validate(data)


def kb(kb_id: str, name: str, *entries: CAIU) -> KnowledgeBase:
    return KnowledgeBase(kb_id=kb_id, kb_displayName=name, entries=list(entries))


def catalog(*kbs: KnowledgeBase) -> KnowledgeCatalog:
    return KnowledgeCatalog.of(kbs)


def lore() -> KnowledgeBase:
    return kb(
        "kb_l",
        "Lore",
        entry("tavern", "Tavern", "A tavern."),
        entry("m1", "Mood", "calm"),
        entry("m2", "Mood", "tense"),
        entry("a", "A", "a {{{B}}}"),
        entry("b", "B", "b {{{C}}}"),
        entry("c", "C", "c"),
        entry("x", "X", "{{{Y}}}"),
        entry("y", "Y", "{{{X}}}"),
    )


# -- check_references --------------------------------------------------------------------


def test_check_ok_for_a_unique_target_with_its_span_and_target() -> None:
    text = "See {{{Tavern}}}."
    [check] = check_references(catalog(lore()), "kb_l", text)
    assert check.status == "ok"
    assert text[check.start : check.end] == "{{{Tavern}}}"
    assert check.count == 1
    assert check.targets == [CheckTarget("kb_l", "tavern", "Tavern")]


def test_check_missing_for_unknown_names_and_malformed_bodies() -> None:
    checks = check_references(catalog(lore()), "kb_l", "{{{Nope}}} {{{a//b}}} {{{Zz:X}}}")
    assert [c.status for c in checks] == ["missing", "missing", "missing"]
    assert "no top-level entry named 'Nope'" in checks[0].message
    assert "empty path segment" in checks[1].message
    assert "no knowledge base named 'Zz'" in checks[2].message
    assert all(c.count == 0 and c.targets == [] for c in checks)


def test_check_ambiguous_counts_same_named_entries() -> None:
    [check] = check_references(catalog(lore()), "kb_l", "{{{Mood}}}")
    assert check.status == "ambiguous"
    assert check.count == 2
    assert [t.entry_id for t in check.targets] == ["m1", "m2"]
    assert "id=" in check.message


def test_check_ambiguous_counts_kbs_sharing_a_display_name() -> None:
    first = kb("kb_1", "Shared", entry("s1", "Fact", "one"))
    second = kb("kb_2", "Shared", entry("s2", "Other", "two"))
    [check] = check_references(catalog(first, second), None, "{{{Shared:Fact}}}")
    assert check.status == "ambiguous"
    assert check.kb_count == 2
    assert check.count == 1
    assert "2 knowledge bases" in check.message


def test_tag_reference_with_several_entries_is_ok_not_ambiguous() -> None:
    base = kb("kb_t", "T", entry("a", "A", tags=("city",)), entry("b", "B", tags=("city",)))
    [check] = check_references(catalog(base), "kb_t", "{{{tag:city}}}")
    assert (check.status, check.count) == ("ok", 2)


def test_check_cyclic_when_the_target_leads_back_to_the_edited_entry() -> None:
    # Editing C so that it references A: A -> B -> C closes a loop.
    [check] = check_references(catalog(lore()), "kb_l", "{{{A}}}", entry_id="c")
    assert check.status == "cyclic"
    assert "A → B → C" in check.message
    [direct] = check_references(catalog(lore()), "kb_l", "{{{id=c}}}", entry_id="c")
    assert direct.status == "cyclic"


def test_check_without_a_loop_back_is_ok() -> None:
    [check] = check_references(catalog(lore()), "kb_l", "{{{A}}}", entry_id="tavern")
    assert check.status == "ok"


def test_check_cyclic_when_the_target_reaches_a_cycle_between_other_entries() -> None:
    [check] = check_references(catalog(lore()), "kb_l", "{{{X}}}", entry_id="tavern")
    assert check.status == "cyclic"
    assert "X → Y → X" in check.message


def test_check_cyclic_when_the_target_group_contains_the_edited_entry() -> None:
    base = kb(
        "kb_g",
        "G",
        entry("g", "Group", children=("child",)),
        entry("child", "Child", "old text"),
        entry("via", "Via", "{{{Group}}}"),
    )
    r = ReferenceResolver(catalog(base))
    assert r.check("kb_g", "{{{Group}}}", entry_id="child")[0].status == "cyclic"
    assert r.check("kb_g", "{{{Via}}}", entry_id="child")[0].status == "cyclic"
    assert r.check("kb_g", "{{{Via}}}", entry_id="g")[0].status == "ok"


def test_check_cycle_search_is_bounded_by_the_depth_limit() -> None:
    base = kb(
        "kb_d",
        "D",
        entry("e1", "E1", "{{{E2}}}"),
        entry("e2", "E2", "{{{E3}}}"),
        entry("e3", "E3", "{{{E4}}}"),
        entry("e4", "E4", "end"),
    )
    text = "{{{E1}}}"
    assert check_references(catalog(base), "kb_d", text, entry_id="e4")[0].status == "cyclic"
    shallow = check_references(catalog(base), "kb_d", text, entry_id="e4", max_depth=2)
    assert shallow[0].status == "ok"


# -- @ref targets ------------------------------------------------------------------------


def ref_kbs() -> tuple[KnowledgeBase, KnowledgeBase]:
    here = kb(
        "kb_h",
        "Here",
        entry("trait", "Brave", "Never backs down. " * 20, tags=("@ref:character_trait",)),
        entry("plain", "Plain", "not tagged"),
        entry("g", "Traits", children=("kid",)),
        entry("kid", "Kind", "gentle", tags=("@ref",)),
        entry("d1", "Dup", "one", tags=("@ref",)),
        entry("d2", "Dup", "two"),
        entry("off", "Off", "hidden", tags=("@ref",), enabled=False),
    )
    there = kb("kb_t", "There", entry("far", "Faraway", "far text", tags=("@ref",)))
    return here, there


def test_ref_targets_list_tagged_entries_with_kind_path_and_reference() -> None:
    targets = referenceable_entries(catalog(*ref_kbs()), "kb_h")
    by_id = {t.entry_id: t for t in targets}
    assert list(by_id) == ["trait", "kid", "d1", "far"]
    assert by_id["trait"].kinds == ("character_trait",)
    assert by_id["trait"].reference == "{{{Brave}}}"
    assert len(by_id["trait"].preview) == 120
    assert by_id["trait"].preview.startswith("Never backs down.")
    assert by_id["kid"].kinds == ()
    assert by_id["kid"].path == "Traits/Kind"
    assert by_id["kid"].reference == "{{{Traits/Kind}}}"
    assert by_id["d1"].reference == "{{{id=d1}}}"
    assert by_id["far"].reference == "{{{There:Faraway}}}"
    assert by_id["far"].kb_name == "There"


def test_ref_targets_every_reference_resolves_to_its_own_entry() -> None:
    cat = catalog(*ref_kbs())
    resolver = ReferenceResolver(cat)
    for target in referenceable_entries(cat, "kb_h", include_all=True):
        body = target.reference[3:-3]
        assert resolver.lookup(body, "kb_h").entry_keys() == [(target.kb_id, target.entry_id)]


def test_ref_targets_include_all_adds_named_untagged_entries() -> None:
    targets = referenceable_entries(catalog(*ref_kbs()), "kb_h", include_all=True)
    untagged = [t.entry_id for t in targets if not t.tagged]
    assert untagged == ["plain", "g", "d2"]


def test_ref_target_across_kbs_falls_back_to_kb_id_when_the_name_is_shared() -> None:
    here, there = ref_kbs()
    twin = kb("kb_twin", "There")
    targets = referenceable_entries(catalog(here, there, twin), "kb_h")
    far = next(t for t in targets if t.entry_id == "far")
    assert far.reference == "{{{kb_t:Faraway}}}"


def test_ref_target_prefers_a_project_alias() -> None:
    here, there = ref_kbs()
    cat = KnowledgeCatalog(
        [
            LoadedKB(kb=here, folder=Path(), scope="local"),
            LoadedKB(kb=there, folder=Path(), scope="global", aliases=("T",)),
        ]
    )
    far = next(t for t in referenceable_entries(cat, "kb_h") if t.entry_id == "far")
    assert far.reference == "{{{T:Faraway}}}"


def test_ref_targets_honour_a_custom_tag_prefix() -> None:
    base = kb("kb_p", "P", entry("a", "A", "x", tags=("@snippet:intro",)), entry("b", "B", "y"))
    [target] = referenceable_entries(catalog(base), "kb_p", tag_prefix="@snippet")
    assert (target.entry_id, target.kinds) == ("a", ("intro",))


# -- variables ---------------------------------------------------------------------------


def test_placeholders_lists_variables_but_not_references() -> None:
    assert placeholders("{{user}} meets {{ char }} at {{{Tavern}}}; {{user}}") == [
        "user",
        "char",
    ]


def test_variable_usage_mismatches_name_undeclared_and_unused() -> None:
    item = entry("v", "V", "{{hp}} and {{stats.mp}}", uses=("hp", "gold"))
    mismatches = check_variable_usage(item)
    assert [(m.name, m.kind) for m in mismatches] == [
        ("stats.mp", "undeclared"),
        ("gold", "unused"),
    ]
    assert "{{stats.mp}}" in mismatches[0].message
    assert check_variable_usage(entry("w", "W", "{{hp}}", uses=("hp",))) == []
