"""A curation step's reason as a term: every term has its English sentence, and the
curation table's column gives back the sentence and the term (an old row, its sentence)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import get_args

import pytest

from storyloom.writing.curation_reason import (
    StepReason,
    StepReasonTerm,
    english,
    read_stored,
    stored,
)


@pytest.mark.parametrize("term", get_args(StepReasonTerm))
def test_every_term_has_an_english_sentence_that_survives_the_table(term: StepReasonTerm) -> None:
    reason = StepReason(term=term, problem="the model file is missing")
    sentence = english(reason)
    assert sentence and "Settings" in sentence
    if term.endswith("_agent_down"):
        assert "(the model file is missing)" in sentence
    assert read_stored(stored(reason)) == (sentence, reason)


def test_a_row_kept_before_reasons_had_terms_gives_its_sentence() -> None:
    assert read_stored("no model is set up") == ("no model is set up", None)
    assert read_stored("{not json") == ("{not json", None)
    assert read_stored('{"reason": {"term": "gone"}}') == ('{"reason": {"term": "gone"}}', None)


def test_the_web_app_says_every_term_the_english_words_the_same() -> None:
    locales = Path(__file__).resolve().parents[2] / "web" / "src" / "locales"

    def words(language: str) -> dict[str, str]:
        text = (locales / language / "writing.json").read_text(encoding="utf-8")
        return dict(json.loads(text)["curation"]["reason"])

    english_words, chinese_words = words("en"), words("zh")
    for term in get_args(StepReasonTerm):
        reason = StepReason(term=term, problem="no GPU")
        assert english_words[term].replace("{problem}", "no GPU") == english(reason)
        assert chinese_words[term]
