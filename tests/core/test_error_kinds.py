"""Domain errors say what kind they are by subclassing one of the kinds in
:mod:`storyloom.core.errors`: a caller answers the kind, not the module that raised it."""

from __future__ import annotations

import importlib
import pickle
import pkgutil

import pytest

import storyloom
from storyloom.core.errors import (
    Conflict,
    FieldProblem,
    FileFormatError,
    InvalidInput,
    NotFound,
    StoryloomError,
    Unavailable,
)
from storyloom.llm.errors import ERROR_KINDS, LLMError


def storyloom_errors() -> list[type[StoryloomError]]:
    """Every StoryloomError class defined in the package (after importing all of it)."""
    for module in pkgutil.walk_packages(storyloom.__path__, "storyloom."):
        if not module.name.endswith(".__main__"):  # running it runs the CLI
            importlib.import_module(module.name)
    found: list[type[StoryloomError]] = []
    pending: list[type[StoryloomError]] = [StoryloomError]
    while pending:
        cls = pending.pop()
        found.append(cls)
        pending.extend(c for c in cls.__subclasses__() if c.__module__.startswith("storyloom."))
    return found


ERRORS = storyloom_errors()


# ModelNotFound is the model endpoint's answer about its own models: a failed call.
MISSING = [
    c
    for c in ERRORS
    if ("NotFound" in c.__name__ or "Missing" in c.__name__) and not issubclass(c, LLMError)
]


@pytest.mark.parametrize("cls", MISSING)
def test_an_error_named_for_something_missing_is_a_not_found(cls: type[Exception]) -> None:
    assert issubclass(cls, NotFound)


@pytest.mark.parametrize(
    "cls", [c for c in ERRORS if "Conflict" in c.__name__ or "Exists" in c.__name__]
)
def test_an_error_named_for_a_clash_is_a_conflict(cls: type[Exception]) -> None:
    assert issubclass(cls, Conflict)


def test_a_not_found_is_still_a_lookup_error() -> None:
    with pytest.raises(LookupError):
        raise NotFound("no such thing")


def test_a_file_format_error_is_invalid_input_with_its_problems() -> None:
    problems = [FieldProblem("entries[0].id", "must be unique")]
    error = FileFormatError("kb/knowledge.json", problems)
    assert isinstance(error, InvalidInput)
    assert error.problems == problems
    assert str(error) == "kb/knowledge.json: entries[0].id: must be unique"


def test_invalid_input_of_lists_every_problem_in_its_message() -> None:
    error = InvalidInput.of("settings", [FieldProblem("a", "too big"), FieldProblem("b", "bad")])
    assert str(error) == "invalid settings: a: too big; b: bad"
    assert [p.field for p in error.problems] == ["a", "b"]


@pytest.mark.parametrize("kind", ERROR_KINDS)
def test_llm_errors_that_may_pass_are_unavailable_and_keep_their_kind(kind: str) -> None:
    error = LLMError("the endpoint said no", kind=kind)  # type: ignore[arg-type]
    expected = kind in ("unreachable", "rate_limited", "timeout", "not_configured")
    assert isinstance(error, Unavailable) is expected
    again = pickle.loads(pickle.dumps(error))
    assert (type(again), again.kind, str(again)) == (type(error), kind, "the endpoint said no")
