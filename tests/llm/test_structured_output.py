"""Structured outputs: the JSON a model must answer is asked for with its pydantic model's
schema where the endpoint takes it (remembered when it does not), validated, and retried
once with the problems named. Every call crosses a real socket to the replay server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Literal

import pytest
from pydantic import BaseModel, Field

from storyloom.core.settings import ChatEndpoint
from storyloom.llm.errors import JsonAnswerError, LLMError
from storyloom.llm.structured_output import SchemaSupport, ask_json, response_format
from storyloom.testing.replay_server import ReplayLLMServer, Reply
from tests.llm.conftest import EndpointFactory


class Place(BaseModel):
    name: str = Field(min_length=1)
    kind: Literal["city", "village"] = "city"


class Trip(BaseModel):
    """Where the travellers go, in order."""

    stops: list[Place]
    start: Place
    note: str = ""


class Loose(BaseModel):
    extra: dict[str, Any]


class Closed(BaseModel):
    name: str
    size: int | None


ASK = [{"role": "user", "content": "Plan the trip as JSON."}]
GOOD = json.dumps({"stops": [{"name": "Ys"}], "start": {"name": "Ker", "kind": "village"}})


@pytest.fixture
def refusing() -> Iterator[ReplayLLMServer]:
    with ReplayLLMServer(models=["test-model"], json_schema=False) as server:
        yield server


def test_the_schema_of_a_nested_model_has_its_refs_inlined_and_its_objects_closed() -> None:
    payload = response_format(Trip)
    assert payload["type"] == "json_schema"
    spec = payload["json_schema"]
    assert spec["name"] == "Trip"
    schema = spec["schema"]
    assert "$defs" not in json.dumps(schema) and "$ref" not in json.dumps(schema)
    assert schema["additionalProperties"] is False
    assert schema["required"] == ["stops", "start"]
    place = schema["properties"]["start"]
    assert place["additionalProperties"] is False
    assert place["required"] == ["name"]
    assert place["properties"]["kind"]["enum"] == ["city", "village"]
    assert schema["properties"]["stops"]["items"]["properties"]["name"]["minLength"] == 1
    assert "title" not in schema and "title" not in place
    # minLength and optional fields are outside OpenAI's strict mode: sent without it.
    assert spec["strict"] is False


def test_strict_is_set_only_where_openai_strict_mode_takes_the_schema() -> None:
    assert response_format(Closed)["json_schema"]["strict"] is True
    loose = response_format(Loose)["json_schema"]
    assert loose["strict"] is False
    # A free-form object stays free: closing it would allow only {}.
    assert loose["schema"]["properties"]["extra"]["additionalProperties"] is True


async def test_an_endpoint_that_supports_it_gets_the_schema_and_the_answer_is_validated(
    llm: ReplayLLMServer, endpoint: ChatEndpoint
) -> None:
    llm.script(GOOD)
    trip = await ask_json(endpoint, ASK, Trip, what="trip", support=SchemaSupport())
    assert trip.start == Place(name="Ker", kind="village")
    [request] = llm.chat_requests
    assert request["response_format"] == response_format(Trip)
    assert request["messages"] == ASK


async def test_a_400_for_the_schema_is_remembered_and_the_answer_still_validates(
    refusing: ReplayLLMServer, make_endpoint: EndpointFactory
) -> None:
    endpoint = make_endpoint(refusing.url)
    support = SchemaSupport()
    refusing.script("Here it is:\n```json\n" + GOOD + "\n```", GOOD)

    first = await ask_json(endpoint, ASK, Trip, what="trip", support=support)
    second = await ask_json(endpoint, ASK, Trip, what="trip", support=support)

    assert first == second
    sent = [("response_format" in r) for r in refusing.chat_requests]
    assert sent == [True, False, False]
    assert not support.allows(endpoint.base_url, "test-model")


async def test_an_answer_that_ignores_the_schema_is_remembered_too(
    llm: ReplayLLMServer, endpoint: ChatEndpoint
) -> None:
    support = SchemaSupport()
    llm.script("Sure! " + GOOD, GOOD)
    await ask_json(endpoint, ASK, Trip, what="trip", support=support)
    await ask_json(endpoint, ASK, Trip, what="trip", support=support)
    assert [("response_format" in r) for r in llm.chat_requests] == [True, False]


async def test_a_400_about_something_else_is_the_error_and_nothing_is_remembered(
    llm: ReplayLLMServer, endpoint: ChatEndpoint
) -> None:
    support = SchemaSupport()
    llm.script(Reply(status=400, error_message="temperature must be below 2"))
    with pytest.raises(LLMError, match="temperature"):
        await ask_json(endpoint, ASK, Trip, what="trip", support=support)
    assert support.allows(endpoint.base_url, "test-model")
    assert len(llm.chat_requests) == 1


async def test_an_invalid_answer_is_retried_once_with_its_problems_then_succeeds(
    llm: ReplayLLMServer, endpoint: ChatEndpoint
) -> None:
    bad = json.dumps({"stops": [{"name": ""}], "start": {"name": "Ker", "kind": "town"}})
    llm.script(bad, GOOD)

    trip = await ask_json(endpoint, ASK, Trip, what="trip", support=SchemaSupport())

    assert trip.stops == [Place(name="Ys")]
    first, second = llm.chat_requests
    assert second["messages"][:2] == [*ASK, {"role": "assistant", "content": bad}]
    told = second["messages"][2]
    assert told["role"] == "user"
    assert "- stops[0].name: String should have at least 1 character" in told["content"]
    assert "- start.kind: Input should be 'city' or 'village'" in told["content"]
    assert second["response_format"] == first["response_format"]


async def test_two_invalid_answers_raise_naming_the_fields(
    llm: ReplayLLMServer, endpoint: ChatEndpoint
) -> None:
    llm.script('{"stops": []}', '{"stops": [], "start": {}}')
    with pytest.raises(JsonAnswerError) as caught:
        await ask_json(endpoint, ASK, Trip, what="trip", support=SchemaSupport())
    assert [p.field for p in caught.value.problems] == ["start.name"]
    assert "the model's trip is not valid: start.name: Field required" in str(caught.value)
    assert len(llm.chat_requests) == 2


async def test_a_text_completion_api_is_asked_in_prose_and_still_validated(
    llm: ReplayLLMServer, make_endpoint: EndpointFactory
) -> None:
    # Only the chat route takes response_format; the text APIs get the prompt's words.
    endpoint = make_endpoint(llm.url).model_copy(update={"api": "text"})
    llm.script(GOOD)
    trip = await ask_json(endpoint, ASK, Trip, what="trip", support=SchemaSupport())
    assert trip.start.name == "Ker"
    assert all("response_format" not in r for r in llm.requests)
