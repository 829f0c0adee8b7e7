"""Offline token counting and the choice of encoding."""

from __future__ import annotations

import pytest

from storyloom.llm.tokens import (
    TOKENS_PER_MESSAGE,
    TOKENS_REPLY_PRIMER,
    encoding_for_model,
    token_counter,
)


@pytest.mark.parametrize(
    ("model", "encoding"),
    [
        ("gpt-4o", "o200k_base"),
        ("gpt-4o-mini", "o200k_base"),
        ("gpt-4.1", "o200k_base"),
        ("gpt-5", "o200k_base"),
        ("gpt-5-mini", "o200k_base"),
        ("o1", "o200k_base"),
        ("o3-mini", "o200k_base"),
        ("o4-mini", "o200k_base"),
        ("openai/gpt-4o", "o200k_base"),
        ("gpt-4", "cl100k_base"),
        ("gpt-3.5-turbo", "cl100k_base"),
        ("llama3.1:8b", "cl100k_base"),
        ("qwen2.5:14b-instruct-q4_0", "cl100k_base"),
        ("deepseek-chat", "cl100k_base"),
        ("", "cl100k_base"),
    ],
)
def test_encoding_is_chosen_from_the_model_name(model: str, encoding: str) -> None:
    assert encoding_for_model(model) == encoding
    assert token_counter(model).encoding_name == encoding


def test_explicit_encoding_wins_over_the_model_name() -> None:
    assert token_counter("gpt-4o", encoding="cl100k_base").encoding_name == "cl100k_base"
    assert token_counter("llama3", encoding="o200k_base").encoding_name == "o200k_base"


def test_unknown_explicit_encoding_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown token encoding"):
        token_counter("gpt-4o", encoding="klingon_base")


def test_counters_are_shared_per_encoding() -> None:
    assert token_counter("gpt-4o") is token_counter("o3-mini")
    assert token_counter("gpt-4") is not token_counter("gpt-4o")


def test_known_counts_for_both_encodings() -> None:
    assert token_counter("gpt-4").count("hello world") == 2
    assert token_counter("gpt-4o").count("hello world") == 2
    assert token_counter("gpt-4").count("") == 0


def test_o200k_is_cheaper_for_chinese_than_cl100k() -> None:
    text = "从前有座山，山里有座庙，庙里有个老和尚在给小和尚讲故事。"
    assert 0 < token_counter("gpt-4o").count(text) < token_counter("gpt-4").count(text)


def test_special_token_text_counts_as_plain_text() -> None:
    assert token_counter("gpt-4").count("<|endoftext|>") > 1


def test_long_text_is_counted_in_pieces_without_failing() -> None:
    counter = token_counter("gpt-4")
    block = "The quick brown fox jumps. " * 1000
    text = block * 20  # 540k characters: over bpe_openai's 200k-token limit per call
    assert counter.count(text) == pytest.approx(20 * counter.count(block), rel=0.001)


def test_encode_and_decode_round_trip() -> None:
    counter = token_counter("gpt-4o")
    ids = counter.encode("Once upon a time, 很久以前")
    assert len(ids) == counter.count("Once upon a time, 很久以前")
    assert counter.decode(ids) == "Once upon a time, 很久以前"


def test_messages_follow_the_openai_overhead_rule() -> None:
    counter = token_counter("gpt-4")
    messages = [
        {"role": "system", "content": "You are a narrator."},
        {"role": "user", "content": "Begin.", "name": "alice"},
    ]
    expected = (
        TOKENS_PER_MESSAGE + counter.count("system") + counter.count("You are a narrator.")
        + TOKENS_PER_MESSAGE + counter.count("user") + counter.count("Begin.")
        + counter.count("alice") + 1
        + TOKENS_REPLY_PRIMER
    )  # fmt: skip
    assert counter.count_messages(messages) == expected


def test_openai_cookbook_example_counts_match() -> None:
    # The example from OpenAI's "How to count tokens" cookbook: 129 prompt tokens on gpt-4.
    messages = [
        {
            "role": "system",
            "content": "You are a helpful, pattern-following assistant that translates "
            "corporate jargon into plain English.",
        },
        {
            "role": "system",
            "name": "example_user",
            "content": "New synergies will help drive top-line growth.",
        },
        {
            "role": "system",
            "name": "example_assistant",
            "content": "Things working well together will increase revenue.",
        },
        {
            "role": "system",
            "name": "example_user",
            "content": "Let's circle back when we have more bandwidth to touch base on "
            "opportunities for increased leverage.",
        },
        {
            "role": "system",
            "name": "example_assistant",
            "content": "Let's talk later when we're less busy about how to do better.",
        },
        {
            "role": "user",
            "content": "This late pivot means we don't have time to boil the ocean for the client "
            "deliverable.",
        },
    ]
    assert token_counter("gpt-4").count_messages(messages) == 129


def test_message_parts_and_tool_calls_are_counted() -> None:
    counter = token_counter("gpt-4o")
    parts = {
        "role": "user",
        "content": [{"type": "text", "text": "Look at this."}, {"type": "image_url"}],
    }
    assert counter.count_message(parts) == TOKENS_PER_MESSAGE + counter.count(
        "user"
    ) + counter.count("Look at this.")
    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "roll", "arguments": "{}"}}
        ],
    }
    assert counter.count_message(call) > TOKENS_PER_MESSAGE + counter.count("assistant")
    assert counter.count_messages([]) == 0
