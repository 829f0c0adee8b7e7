"""LLMError kinds, subclasses and the retry policy's arithmetic."""

from __future__ import annotations

import pickle

import pytest

from storyloom.core.errors import StoryloomError
from storyloom.llm.errors import (
    ERROR_KINDS,
    AuthenticationFailed,
    LLMError,
    StreamCut,
    retry_after_seconds,
)
from storyloom.llm.retry import RetryPolicy


def test_every_kind_builds_its_own_subclass() -> None:
    for kind in ERROR_KINDS:
        error = LLMError("something went wrong", kind=kind)
        assert error.kind == kind
        assert isinstance(error, LLMError) and isinstance(error, StoryloomError)
    assert type(LLMError("x", kind="auth")) is AuthenticationFailed
    assert type(LLMError("x", kind="stream_cut", partial_text="Once")) is StreamCut


def test_subclass_knows_its_kind_without_being_told() -> None:
    error = StreamCut("cut", partial_text="Once upon")
    assert error.kind == "stream_cut"
    assert error.partial_text == "Once upon"
    assert str(error) == "cut"


def test_unknown_kind_is_refused() -> None:
    with pytest.raises(ValueError):
        LLMError("x", kind="nonsense")  # type: ignore[arg-type]


def test_error_serialises_for_the_api() -> None:
    error = LLMError("Too many", kind="rate_limited", status_code=429, partial_text="")
    assert error.to_dict() == {
        "kind": "rate_limited",
        "message": "Too many",
        "partial_text": "",
        "status_code": 429,
    }


def test_error_survives_pickling_with_its_fields() -> None:
    error = LLMError("cut", kind="stream_cut", partial_text="abc", status_code=None)
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is StreamCut
    assert (copy.kind, copy.message, copy.partial_text) == ("stream_cut", "cut", "abc")


def test_retryable_follows_the_kind_unless_told() -> None:
    assert LLMError("x", kind="server_error").retryable
    assert LLMError("x", kind="unreachable").retryable
    assert not LLMError("x", kind="auth").retryable
    assert not LLMError("x", kind="timeout").retryable
    assert not LLMError("x", kind="rate_limited", retryable=False).retryable


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({}, None),
        ({"retry-after": "3"}, 3.0),
        ({"retry-after-ms": "250"}, 0.25),
        ({"retry-after": "-4"}, 0.0),
        ({"retry-after": "soon"}, None),
        ({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, 0.0),
    ],
)
def test_retry_after_header_is_parsed(headers: dict[str, str], expected: float | None) -> None:
    assert retry_after_seconds(headers) == expected


def test_backoff_doubles_up_to_its_cap() -> None:
    policy = RetryPolicy(base_delay_s=0.5, max_delay_s=3.0, jitter=0)
    error = LLMError("x", kind="server_error")
    assert [policy.delay_s(error, n) for n in range(4)] == [0.5, 1.0, 2.0, 3.0]


def test_server_named_wait_wins_but_is_capped() -> None:
    policy = RetryPolicy(base_delay_s=0.5, max_retry_after_s=30.0, jitter=0)
    assert policy.delay_s(LLMError("x", kind="rate_limited", retry_after_s=7), 0) == 7
    assert policy.delay_s(LLMError("x", kind="rate_limited", retry_after_s=600), 0) == 30


def test_jitter_only_lengthens_the_wait() -> None:
    policy = RetryPolicy(base_delay_s=1.0, jitter=0.5)
    error = LLMError("x", kind="server_error")
    assert all(1.0 <= policy.delay_s(error, 0) <= 1.5 for _ in range(50))
