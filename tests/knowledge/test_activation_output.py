"""Budget, insertion order, placements, entry text, semantic and filter rules."""

from __future__ import annotations

from typing import Any

from storyloom.knowledge.activation import (
    ActivationEngine,
    ActivationRequest,
    ActivationResult,
    CharacterContext,
    ScanMessage,
)
from storyloom.knowledge.activation_settings import ActivationSettings
from storyloom.knowledge.caiu import (
    CAIU,
    ActivationCriteria,
    Affix,
    CharacterFilter,
    Content,
    ManagementMetadata,
    Placement,
    TriggerCondition,
    UsageMetadata,
)
from storyloom.knowledge.knowledge_base import KnowledgeBase

TEN_WORDS = "one two three four five six seven eight nine ten"


def entry(
    entry_id: str, text: str = TEN_WORDS, usage: dict[str, Any] | None = None, **criteria: Any
) -> CAIU:
    return CAIU(
        id=entry_id,
        displayName=entry_id,
        content=Content(value=text),
        activation_criteria=ActivationCriteria(**criteria),
        usage_metadata=UsageMetadata(**(usage or {})),
    )


def engine_for(entries: list[CAIU], settings: ActivationSettings | None = None) -> ActivationEngine:
    return ActivationEngine(
        [KnowledgeBase(kb_id="kb", entries=entries)],
        settings or ActivationSettings(recursive=False),
        count_tokens=lambda text: len(text.split()),
    )


def scan(entries: list[CAIU], message: str = "key", **request: Any) -> ActivationResult:
    settings = request.pop("settings", None)
    return engine_for(entries, settings).activate(
        ActivationRequest(messages=[ScanMessage("User", message)], **request)
    )


def order(result: ActivationResult) -> list[str]:
    return [item.entry_id for item in result.activated]


def dropped(result: ActivationResult) -> dict[str, str]:
    return {item.entry_id: item.reasons[-1].rule for item in result.dropped}


def test_budget_is_a_percent_of_the_context_and_priority_decides_the_cut() -> None:
    entries = [
        entry("low", usage={"priority": 100}, keywords=["key"]),
        entry("high", usage={"priority": 300}, keywords=["key"]),
        entry("mid", usage={"priority": 200}, keywords=["key"]),
    ]
    result = scan(entries, max_context_tokens=100)  # 25% of 100: 25 tokens
    assert result.budget == 25
    assert order(result) == ["mid", "high"]
    assert dropped(result) == {"low": "budget"}
    assert result.tokens_used == 20
    assert result.budget_overflowed


def test_budget_cap_limits_the_budget() -> None:
    settings = ActivationSettings(recursive=False, context_percent=100, budget_cap=15)
    entries = [entry("a", keywords=["key"]), entry("b", keywords=["key"])]
    result = scan(entries, max_context_tokens=1000, settings=settings)
    assert result.budget == 15
    assert len(result.activated) == 1


def test_critical_entries_ignore_the_budget() -> None:
    entries = [
        entry("high", usage={"priority": 300}, keywords=["key"]),
        entry("mid", usage={"priority": 200}, keywords=["key"]),
        entry("must", usage={"priority": 1, "token_budget_impact": "critical"}, keywords=["key"]),
    ]
    result = scan(entries, max_context_tokens=60)  # 15 tokens: one plain entry fits
    assert set(order(result)) == {"high", "must"}
    assert result.tokens_used == 10
    must = next(item for item in result.activated if item.entry_id == "must")
    assert any(r.rule == "budget" and r.outcome == "kept" for r in must.reasons)


def test_activated_entries_come_in_insertion_order_lowest_priority_first() -> None:
    entries = [
        entry("b", usage={"priority": 50}, keywords=["key"]),
        entry("a", usage={"priority": 500}, keywords=["key"]),
        entry("c", usage={"priority": 5}, keywords=["key"]),
    ]
    assert order(scan(entries, max_context_tokens=100_000)) == ["c", "b", "a"]


def test_placements_keep_depth_role_and_outlet() -> None:
    entries = [
        entry(
            "deep", usage={"placement": "at_depth", "depth": 2, "role": "user"}, keywords=["key"]
        ),
        entry("out", usage={"placement": "outlet", "outlet_name": "map"}, keywords=["key"]),
        entry("top", usage={"placement": "authors_note_top"}, keywords=["key"]),
        entry("plain", keywords=["key"]),
    ]
    result = scan(entries, max_context_tokens=100_000)
    placed = result.by_placement()
    assert [e.entry_id for e in placed[Placement.AT_DEPTH]] == ["deep"]
    assert [e.entry_id for e in placed[Placement.AUTHORS_NOTE_TOP]] == ["top"]
    assert [e.entry_id for e in placed[Placement.BEFORE_PROMPT]] == ["plain"]
    deep = placed[Placement.AT_DEPTH][0]
    assert (deep.depth, deep.role, deep.outlet_name) == (2, "user", None)
    assert list(result.at_depth()) == [(2, "user")]
    assert [e.entry_id for e in result.outlets()["map"]] == ["out"]
    plain = placed[Placement.BEFORE_PROMPT][0]
    assert (plain.depth, plain.role, plain.outlet_name) == (None, None, None)


def test_prefix_and_suffix_wrap_the_text() -> None:
    wrapped = entry(
        "w",
        text="body",
        usage={
            "prefix": Affix(text="<lore>", is_enabled=True),
            "suffix": Affix(text="</lore>", is_enabled=True),
        },
        keywords=["key"],
    )
    assert scan([wrapped]).activated[0].text == "<lore>body</lore>"


def test_group_entry_gives_its_childrens_text() -> None:
    parent = CAIU(
        id="parent",
        content=Content(value="editor note"),
        activation_criteria=ActivationCriteria(keywords=["key"]),
        management_metadata=ManagementMetadata(child_ids=["c1", "c2"]),
    )
    children = [
        CAIU(id="c1", content=Content(value="first child")),
        CAIU(id="c2", content=Content(value="second child")),
    ]
    result = scan([parent, *children])
    assert order(result) == ["parent"]
    assert result.activated[0].text == "first child\nsecond child"


def test_variables_fill_the_entry_text() -> None:
    result = scan(
        [entry("hp", text="HP is {{stats.hp}}.", keywords=["key"])], variables={"stats": {"hp": 7}}
    )
    assert result.activated[0].text == "HP is 7."


def vector_scan(
    entries: list[CAIU], message: str = "key", *, vector_activation: bool = True, **request: Any
) -> ActivationResult:
    settings = request.pop("settings", None) or ActivationSettings(recursive=False)
    book = KnowledgeBase(kb_id="kb", entries=entries, vector_activation=vector_activation)
    engine = ActivationEngine([book], settings, count_tokens=lambda text: len(text.split()))
    return engine.activate(ActivationRequest(messages=[ScanMessage("User", message)], **request))


def test_semantic_activation_needs_the_threshold() -> None:
    meaning = entry("meaning", use_semantic_search=True, semantic_threshold=0.8)
    result = vector_scan([meaning], "unrelated", semantic_scores={("kb", "meaning"): 0.85})
    assert order(result) == ["meaning"]
    reason = result.activated[0].reasons[0]
    assert reason.rule == "semantic" and "0.850" in reason.detail
    assert (
        order(vector_scan([meaning], "unrelated", semantic_scores={("kb", "meaning"): 0.7})) == []
    )


def test_semantic_threshold_defaults_to_the_setting() -> None:
    meaning = entry("meaning", use_semantic_search=True)
    scores = {("kb", "meaning"): 0.76}
    assert order(vector_scan([meaning], semantic_scores=scores)) == ["meaning"]
    strict = ActivationSettings(recursive=False, semantic_threshold_default=0.9)
    assert order(vector_scan([meaning], semantic_scores=scores, settings=strict)) == []


def test_a_book_without_vector_activation_fires_its_vectorized_entries_by_keys_only() -> None:
    vectorized = entry("v", keywords=["harbour"], use_semantic_search=True)
    scores = {("kb", "v"): 0.99}
    off = vector_scan([vectorized], "nothing here", vector_activation=False, semantic_scores=scores)
    assert order(off) == []
    keyed = vector_scan(
        [vectorized], "the harbour", vector_activation=False, semantic_scores=scores
    )
    assert order(keyed) == ["v"]
    assert order(vector_scan([vectorized], "nothing here", semantic_scores=scores)) == ["v"]


def test_character_filter_limits_entries_to_characters() -> None:
    only_alice = entry("a", keywords=["key"], character_filter=CharacterFilter(names=["Alice"]))
    assert order(scan([only_alice], character=CharacterContext(name="Alice"))) == ["a"]
    result = scan([only_alice], character=CharacterContext(name="Bob"))
    assert dropped(result) == {"a": "character_filter"}
    not_alice = entry(
        "n", keywords=["key"], character_filter=CharacterFilter(names=["Alice"], is_exclude=True)
    )
    assert order(scan([not_alice], character=CharacterContext(name="Alice"))) == []
    assert order(scan([not_alice], character=CharacterContext(name="Bob"))) == ["n"]
    tagged = entry("t", keywords=["key"], character_filter=CharacterFilter(tags=["fantasy"]))
    assert order(scan([tagged], character=CharacterContext(name="B", tags=["fantasy"]))) == ["t"]
    assert order(scan([tagged], character=CharacterContext(name="B", tags=["scifi"]))) == []


def test_generation_triggers_limit_entries_to_generation_types() -> None:
    normal_only = entry("n", keywords=["key"], generation_triggers=["normal"])
    assert order(scan([normal_only])) == ["n"]
    result = scan([normal_only], generation_type="continue")
    assert dropped(result) == {"n": "generation_type"}


def test_trigger_conditions_must_all_hold() -> None:
    guarded = entry(
        "g",
        keywords=["key"],
        trigger_conditions=[
            TriggerCondition(variable="stats.hp", operator="greater_than", value=10),
            TriggerCondition(variable="place", operator="equals", value="cave"),
        ],
    )
    ok = scan([guarded], variables={"stats": {"hp": 20}, "place": "cave"})
    assert order(ok) == ["g"]
    assert any(
        r.rule == "trigger_condition" and r.outcome == "kept" for r in ok.activated[0].reasons
    )
    failed = scan([guarded], variables={"stats": {"hp": 5}, "place": "cave"})
    assert dropped(failed) == {"g": "trigger_condition"}
    assert "stats.hp greater_than 10" in failed.dropped[0].reasons[-1].detail


def test_every_activation_and_drop_has_reasons() -> None:
    entries = [
        entry("const", constant=True),
        entry("key", keywords=["key"], usage={"priority": 900}),
        entry("rx", keywords=["/k.y/"]),
        entry("off", keywords=["key"], usage={"priority": 1}),
    ]
    entries[-1].management_metadata.is_enabled = False
    result = scan(entries, max_context_tokens=100_000)
    assert len(result.activated) == 3
    for item in result.activated:
        assert item.reasons and item.reasons[0].outcome == "activated"
        assert all(r.detail for r in item.reasons)
    assert result.dropped and result.dropped[0].reasons[-1].outcome == "dropped"


def test_default_token_counter_counts_real_tokens() -> None:
    engine = ActivationEngine([KnowledgeBase(kb_id="kb", entries=[entry("a", keywords=["key"])])])
    result = engine.activate(ActivationRequest(messages=[ScanMessage("U", "key")]))
    assert result.activated[0].tokens == result.tokens_used > 0


def test_reasons_of_dropped_entries_are_built_when_read() -> None:
    entries = [entry(f"e{i}", usage={"priority": 100 - i}, keywords=["key"]) for i in range(40)]
    result = scan(entries, "a key here", max_context_tokens=100)  # room for two entries
    assert len(result.activated) == 2 and len(result.dropped) == 38
    assert not any(d.explained for d in result.dropped)
    last = result.dropped[-1]
    assert [r.rule for r in last.reasons] == ["primary_key", "budget"]
    assert last.reasons[0].detail == 'key "key" matched "User: a key here" in message 0 (User)'
    assert last.explained and not result.dropped[0].explained


def test_an_empty_group_container_injects_only_its_wrapping_never_its_own_content() -> None:
    # Seed 000 2.2.1: a group container's content is for the editor; what it injects is its
    # prefix and suffix around its children's text, and it has none yet, so nothing.
    container = CAIU(
        id="shelf",
        entry_type="group_container",
        content=Content(value="editor note: put the dragon entries here"),
        activation_criteria=ActivationCriteria(keywords=["key"]),
        usage_metadata=UsageMetadata(
            prefix=Affix(text="<dragons>", is_enabled=True),
            suffix=Affix(text="</dragons>", is_enabled=True),
        ),
    )
    result = scan([container, entry("plain", text="plain lore", keywords=["key"])])
    texts = {item.entry_id: item.text for item in result.activated}
    assert "editor note" not in "".join(texts.values())
    assert texts.get("shelf", "") == ""
    assert texts["plain"] == "plain lore"
