"""Curation's extraction asked of a real model: the embedded SmolLM2-135M on llama.cpp,
which turns the json_schema response format into a grammar. A model that small rambles
in prose when asked in words; held to the schema, its answer is the JSON curation reads."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from storyloom.core.settings import ChatEndpoint, LocalModelSettings
from storyloom.llm.local_model import LocalModelServer
from storyloom.llm.structured_output import SchemaSupport, ask_json
from storyloom.writing.curation import EXTRACT_SYSTEM, AgentExtraction

CHAPTER = (
    "Chapter 3. Known entities:\n- /entities/characters/mara: Mara\n\nThe chapter:\n"
    "Mara dyed her hair red and left the harbour town of Ys at dawn."
)


@pytest.fixture(scope="module")
def embedded() -> Iterator[ChatEndpoint]:
    server = LocalModelServer(LocalModelSettings(context_size=2048, threads=1))
    server.start()
    running = server.running
    assert running is not None
    try:
        yield ChatEndpoint(
            base_url=running.url,
            model=running.model,
            # Without a frequency penalty this small a model repeats one fact until
            # max_tokens cuts the JSON short; the grammar bounds the shape, not the length.
            parameters={"temperature": 0, "seed": 7, "max_tokens": 200, "frequency_penalty": 1},
        )
    finally:
        server.stop()


async def test_the_embedded_model_held_to_the_schema_answers_an_extraction_that_validates(
    embedded: ChatEndpoint,
) -> None:
    support = SchemaSupport()
    messages = [
        {"role": "system", "content": EXTRACT_SYSTEM},
        {"role": "user", "content": CHAPTER},
    ]

    extraction = await ask_json(
        embedded, messages, AgentExtraction, what="extraction", support=support
    )

    assert isinstance(extraction, AgentExtraction)
    # llama.cpp neither refused the format nor answered around it.
    assert support.allows(embedded.base_url, embedded.model)
    assert all(fact.subject and fact.attribute and fact.value for fact in extraction.facts)
