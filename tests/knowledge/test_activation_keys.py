"""Activation by keys: primary, secondary logic, regex, case, whole words, groups, depth."""

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
from storyloom.knowledge.caiu import CAIU, ActivationCriteria, Content, KeyGroup, SecondaryLogic
from storyloom.knowledge.knowledge_base import KnowledgeBase


def entry(entry_id: str, text: str = "", **criteria: Any) -> CAIU:
    return CAIU(
        id=entry_id,
        displayName=entry_id,
        content=Content(value=text or f"about {entry_id}"),
        activation_criteria=ActivationCriteria(**criteria),
    )


def scan(
    entries: list[CAIU],
    messages: list[str],
    settings: ActivationSettings | None = None,
    **request: Any,
) -> ActivationResult:
    engine = ActivationEngine(
        [KnowledgeBase(kb_id="kb", entries=entries)],
        settings or ActivationSettings(),
        count_tokens=lambda text: len(text.split()),
    )
    chat = [ScanMessage("User" if i % 2 == 0 else "Bot", m) for i, m in enumerate(messages)]
    return engine.activate(ActivationRequest(messages=chat, **request))


def active(result: ActivationResult) -> set[str]:
    return {item.entry_id for item in result.activated}


def rules(result: ActivationResult, entry_id: str) -> list[str]:
    for item in result.activated:
        if item.entry_id == entry_id:
            return [reason.rule for reason in item.reasons]
    for gone in result.dropped:
        if gone.entry_id == entry_id:
            return [reason.rule for reason in gone.reasons]
    return []


def test_primary_key_activates_and_says_where_it_matched() -> None:
    result = scan([entry("dragon", keywords=["dragon"])], ["A red dragon lands."])
    assert active(result) == {"dragon"}
    reason = result.activated[0].reasons[0]
    assert (reason.rule, reason.outcome) == ("primary_key", "activated")
    assert '"dragon"' in reason.detail and "red dragon lands" in reason.detail
    assert "message 0 (User)" in reason.detail


def test_primary_key_absent_does_not_activate() -> None:
    assert active(scan([entry("dragon", keywords=["dragon"])], ["A quiet day."])) == set()


def test_secondary_and_any_needs_one_secondary_key() -> None:
    dragon = entry(
        "dragon",
        keywords=["dragon"],
        secondary_keywords=["cave", "fire"],
        secondary_logic=SecondaryLogic.AND_ANY,
    )
    assert active(scan([dragon], ["a dragon alone"])) == set()
    result = scan([dragon], ["a dragon in a cave"])
    assert active(result) == {"dragon"}
    assert rules(result, "dragon")[:2] == ["primary_key", "secondary_and_any"]


def test_secondary_not_all_blocks_only_when_every_secondary_key_matches() -> None:
    dragon = entry(
        "dragon",
        keywords=["dragon"],
        secondary_keywords=["cave", "fire"],
        secondary_logic=SecondaryLogic.NOT_ALL,
    )
    assert active(scan([dragon], ["dragon, cave and fire"])) == set()
    result = scan([dragon], ["dragon in a cave"])
    assert active(result) == {"dragon"}
    assert "secondary_not_all" in rules(result, "dragon")


def test_secondary_not_any_blocks_when_any_secondary_key_matches() -> None:
    dragon = entry(
        "dragon",
        keywords=["dragon"],
        secondary_keywords=["cave", "fire"],
        secondary_logic=SecondaryLogic.NOT_ANY,
    )
    assert active(scan([dragon], ["a dragon in a cave"])) == set()
    result = scan([dragon], ["a dragon flies"])
    assert active(result) == {"dragon"}
    assert "secondary_not_any" in rules(result, "dragon")


def test_secondary_and_all_needs_every_secondary_key() -> None:
    dragon = entry(
        "dragon",
        keywords=["dragon"],
        secondary_keywords=["cave", "fire"],
        secondary_logic=SecondaryLogic.AND_ALL,
    )
    assert active(scan([dragon], ["a dragon in a cave"])) == set()
    result = scan([dragon], ["a dragon breathes fire in a cave"])
    assert active(result) == {"dragon"}
    assert "secondary_and_all" in rules(result, "dragon")


def test_selective_false_ignores_secondary_keys() -> None:
    dragon = entry(
        "dragon",
        keywords=["dragon"],
        secondary_keywords=["cave"],
        secondary_logic=SecondaryLogic.AND_ALL,
        selective=False,
    )
    result = scan([dragon], ["a dragon flies"])
    assert active(result) == {"dragon"}
    assert rules(result, "dragon") == ["primary_key"]


def test_regex_key_matches_with_its_flags() -> None:
    result = scan([entry("dragon", keywords=["/dra+gon/i"])], ["DRAAAGON!"])
    assert active(result) == {"dragon"}
    assert rules(result, "dragon") == ["regex_key"]
    assert active(scan([entry("dragon", keywords=["/dra+gon/"])], ["DRAAAGON!"])) == set()


def test_regex_key_without_literal_prefilter_still_matches() -> None:
    result = scan([entry("digits", keywords=[r"/\d{3}-\d{4}/"])], ["call 555-1234"])
    assert active(result) == {"digits"}


def test_regex_prefilter_does_not_miss_case_folded_letters() -> None:
    # "ſ" (long s) matches "s" case-insensitively but lower-cases to itself, so the
    # literal "sunrise" is not in the lower-cased text although the regex matches.
    assert active(scan([entry("sun", keywords=["/sunrise/i"])], ["the ſunriſe"])) == {"sun"}
    assert active(scan([entry("sun", keywords=["/sunrise/"])], ["the ſunriſe"])) == set()


def test_invalid_regex_is_reported_and_ignored_not_crashing() -> None:
    engine = ActivationEngine(
        [KnowledgeBase(kb_id="kb", entries=[entry("dragon", keywords=["/bad(/", "dragon"])])],
        ActivationSettings(),
        count_tokens=len,
    )
    assert len(engine.problems) == 1
    problem = engine.problems[0]
    assert (problem.kb_id, problem.entry_id) == ("kb", "dragon")
    assert problem.field == "activation_criteria.keywords[0]"
    assert "invalid regular expression" in problem.reason
    result = engine.activate(ActivationRequest(messages=[ScanMessage("U", "a dragon")]))
    assert [item.entry_id for item in result.activated] == ["dragon"]


def test_global_case_sensitivity_and_per_entry_override() -> None:
    sensitive = ActivationSettings(case_sensitive=True)
    assert active(scan([entry("d", keywords=["Dragon"])], ["a dragon"], sensitive)) == set()
    assert active(scan([entry("d", keywords=["Dragon"])], ["a Dragon"], sensitive)) == {"d"}
    loose = entry("d", keywords=["Dragon"], case_sensitive=False)
    assert active(scan([loose], ["a dragon"], sensitive)) == {"d"}
    strict = entry("d", keywords=["Dragon"], case_sensitive=True)
    assert active(scan([strict], ["a dragon"])) == set()
    assert active(scan([strict], ["a Dragon"])) == {"d"}


def test_whole_words_needs_word_boundaries_for_single_words() -> None:
    whole = ActivationSettings(match_whole_words=True)
    cat = entry("cat", keywords=["cat"])
    assert active(scan([cat], ["we concatenate strings"], whole)) == set()
    assert active(scan([cat], ["the cat."], whole)) == {"cat"}
    assert active(scan([cat], ["we concatenate strings"])) == {"cat"}
    assert active(scan([entry("cat", keywords=["cat"], match_whole_words=True)], ["cats"])) == set()


def test_whole_words_lets_keys_with_spaces_match_as_substrings() -> None:
    whole = ActivationSettings(match_whole_words=True)
    assert active(scan([entry("b", keywords=["black cat"])], ["two black cats"], whole)) == {"b"}


def test_whole_words_matches_cjk_keys_between_cjk_characters() -> None:
    whole = ActivationSettings(match_whole_words=True)
    assert active(scan([entry("dragon", keywords=["红龙"])], ["一条红龙飞过山谷"], whole)) == {
        "dragon"
    }
    assert active(scan([entry("ai", keywords=["AI"])], ["我是AI助手"], whole)) == {"ai"}
    assert active(scan([entry("ai", keywords=["AI"])], ["PAID"], whole)) == set()


def test_key_group_and_needs_every_key() -> None:
    armed = entry(
        "armed", key_groups=[KeyGroup(group_id="arms", keys=["sword", "shield"], logic="AND")]
    )
    assert active(scan([armed], ["a sword only"])) == set()
    result = scan([armed], ["a sword and a shield"])
    assert active(result) == {"armed"}
    assert rules(result, "armed") == ["key_group"]
    assert '"sword", "shield"' in result.activated[0].reasons[0].detail


def test_key_group_or_needs_any_key_and_adds_to_keywords() -> None:
    armed = entry(
        "armed",
        keywords=["armor"],
        key_groups=[KeyGroup(keys=["sword", "shield"], logic="OR")],
    )
    assert active(scan([armed], ["a shield"])) == {"armed"}
    assert active(scan([armed], ["some armor"])) == {"armed"}
    assert active(scan([armed], ["nothing"])) == set()


def test_constant_entry_is_always_active() -> None:
    result = scan([entry("rules", constant=True)], ["hello"])
    assert active(result) == {"rules"}
    assert rules(result, "rules") == ["constant"]


def test_disabled_entry_is_dropped_with_reason() -> None:
    dragon = entry("dragon", keywords=["dragon"])
    dragon.management_metadata.is_enabled = False
    result = scan([dragon], ["a dragon"])
    assert active(result) == set()
    assert rules(result, "dragon") == ["primary_key", "disabled"]
    assert result.dropped[0].reasons[-1].outcome == "dropped"


def test_global_scan_depth_limits_the_messages_scanned() -> None:
    dragon = entry("dragon", keywords=["dragon"])
    chat = ["a dragon", "nothing", "still nothing"]
    assert active(scan([dragon], chat, ActivationSettings(scan_depth=2))) == set()
    assert active(scan([dragon], chat, ActivationSettings(scan_depth=3))) == {"dragon"}


def test_entry_scan_depth_overrides_the_global_one() -> None:
    chat = ["a dragon", "nothing", "still nothing"]
    deep = entry("deep", keywords=["dragon"], scan_depth=3)
    shallow = entry("shallow", keywords=["dragon"], scan_depth=1)
    result = scan([deep, shallow], chat, ActivationSettings(scan_depth=2))
    assert active(result) == {"deep"}
    assert "message 0 (User)" in result.activated[0].reasons[0].detail


def test_scan_depth_zero_matches_nothing() -> None:
    assert active(scan([entry("d", keywords=["dragon"], scan_depth=0)], ["dragon"])) == set()


def test_include_names_scans_speaker_names() -> None:
    alice = entry("alice", keywords=["Alice"])
    chat = [ScanMessage("Alice", "hello there")]
    for include, expected in ((True, {"alice"}), (False, set())):
        engine = ActivationEngine(
            [KnowledgeBase(kb_id="kb", entries=[alice])],
            ActivationSettings(include_names=include),
            count_tokens=len,
        )
        result = engine.activate(ActivationRequest(messages=chat))
        assert {item.entry_id for item in result.activated} == expected


def test_also_scan_adds_character_fields_for_that_entry_only() -> None:
    character = CharacterContext(name="Seraphina", description="A guardian of the glade.")
    scans = entry("scans", keywords=["glade"], also_scan=["character_description"])
    blind = entry("blind", keywords=["glade"])
    result = scan([scans, blind], ["hello"], character=character)
    assert active(result) == {"scans"}
    assert "character description" in result.activated[0].reasons[0].detail


def test_extra_scan_texts_are_scanned_like_the_chat() -> None:
    result = scan([entry("note", keywords=["storm"])], ["hello"], extra_scan_texts=["A storm."])
    assert active(result) == {"note"}
    assert "extra scanned text" in result.activated[0].reasons[0].detail


def test_a_reason_carries_its_pattern_and_values_for_the_page_language() -> None:
    character = CharacterContext(name="Seraphina", description="A guardian of the glade.")
    entries = [
        entry("dragon", keywords=["dragon"]),
        entry("rune", keywords=["/ru+ne/"]),
        entry("glade", keywords=["glade"], also_scan=["character_description"]),
        entry("rules", constant=True),
    ]
    result = scan(entries, ["A red dragon lands.", "A ruune glows."], character=character)
    reasons = {item.entry_id: item.reasons[0] for item in result.activated}
    dragon = reasons["dragon"]
    assert (dragon.term, dict(dragon.values)) == (
        "key",
        {
            "key": "dragon",
            "place": "message",
            "number": 0,
            "speaker": "User",
            "snippet": "User: A red dragon lands.",
        },
    )
    assert (reasons["rune"].term, reasons["rune"].values["place"]) == ("regex", "message")
    assert reasons["rune"].values["number"] == 1
    glade = reasons["glade"]
    assert (glade.values["place"], glade.values["source"]) == ("source", "character_description")
    assert (reasons["rules"].term, dict(reasons["rules"].values)) == ("constant", {})
    # The record a chat keeps has both: the words, and the pattern with its values.
    assert reasons["rules"].as_record() == {
        "rule": "constant",
        "detail": "always active (constant)",
        "outcome": "activated",
        "term": "constant",
        "values": {},
    }


def test_secondary_keys_and_key_groups_send_their_keys_as_a_list() -> None:
    storm = entry(
        "storm",
        keywords=["wind"],
        secondary_keywords=["rain", "hail"],
        secondary_logic=SecondaryLogic.AND_ALL,
    )
    result = scan([storm], ["wind, rain and hail"])
    reasons = result.activated[0].reasons
    assert [(r.term, dict(r.values).get("keys")) for r in reasons][1] == (
        "secondary_and_all",
        ["rain", "hail"],
    )
