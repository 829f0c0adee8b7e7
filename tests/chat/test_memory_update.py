""" "Update memory": the agent model (a real HTTP replay server) rewrites the evolved
persona from the conversation; the proposal comes with a unified diff."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from storyloom.chat.personalab.memory_update import (
    clean_persona_text,
    persona_diff,
    propose_memory_update,
)
from storyloom.chat.store.conversation import CharacterSnapshot
from storyloom.chat.store.message import Role
from storyloom.chat.store.snapshot import HistoryMessage
from storyloom.chat.store.turn_tree import ChatError
from storyloom.core.settings import ChatEndpoint
from storyloom.llm.errors import LLMError
from storyloom.testing.replay_server import ReplayLLMServer, Reply

BASE = "Mira, a ferry pilot on the fog coast. Wry, loyal, afraid of deep water."


@pytest.fixture
def llm() -> Iterator[ReplayLLMServer]:
    with ReplayLLMServer(models=["agent-model"]) as server:
        yield server


def endpoint(llm: ReplayLLMServer, **fields: Any) -> ChatEndpoint:
    values: dict[str, Any] = {
        "base_url": llm.url,
        "model": "agent-model",
        "timeout_s": 10,
        "max_retries": 0,
    }
    values.update(fields)
    return ChatEndpoint.model_validate(values)


def snapshot(evolved: str = "") -> CharacterSnapshot:
    return CharacterSnapshot(
        source_preset="mira",
        snapshot_created_at="2025-10-16T10:00:00Z",
        base_persona=BASE,
        evolved_persona=evolved,
        card={"name": "Mira", "description": BASE},
    )


def history() -> list[HistoryMessage]:
    lines: list[tuple[Role, str]] = [
        ("user", "Can you take me across tonight? The harbour master is after me."),
        ("assistant", "*Mira squints at the fog.* For you? Fine. Hold the rail."),
        ("user", "Thank you. I will not forget this."),
        ("assistant", "You'd better not. I don't do this for just anyone."),
    ]
    return [
        HistoryMessage(id=f"m{i}", role=role, content=text) for i, (role, text) in enumerate(lines)
    ]


async def test_proposal_is_the_agents_text_with_a_diff_from_an_empty_persona(
    llm: ReplayLLMServer,
) -> None:
    answer = "Mira has started to trust the courier she smuggled across the bay."
    llm.script(Reply(text=answer))

    proposal = await propose_memory_update(endpoint(llm), snapshot(), history())

    assert proposal.evolved_persona == answer
    assert proposal.previous == ""
    assert proposal.diff[:2] == ["--- evolved_persona (current)", "+++ evolved_persona (proposed)"]
    assert proposal.diff[-1] == f"+{answer}"


async def test_the_prompt_keeps_the_base_persona_asks_for_prose_and_carries_the_talk(
    llm: ReplayLLMServer,
) -> None:
    llm.script(Reply(text="Mira owes the courier nothing, yet she keeps helping."))

    await propose_memory_update(
        endpoint(llm), snapshot("Mira distrusts strangers."), history(), user_name="Ash"
    )

    [request] = llm.chat_requests
    assert request["model"] == "agent-model"
    system, user = request["messages"]
    assert system["role"] == "system"
    assert "stays unchanged" in system["content"]
    assert "qualitatively" in system["content"]
    assert "no numbers" in system["content"]
    assert "Return only the new evolved persona text" in system["content"]
    assert BASE in user["content"]
    assert "Current evolved persona:\nMira distrusts strangers." in user["content"]
    assert "Ash: Can you take me across tonight?" in user["content"]
    assert "Mira: You'd better not." in user["content"]


async def test_diff_shows_the_old_line_replaced_by_the_new(llm: ReplayLLMServer) -> None:
    llm.script(Reply(text="Mira distrusts strangers.\nShe trusts Ash now."))

    proposal = await propose_memory_update(
        endpoint(llm), snapshot("Mira distrusts strangers.\nShe trusts no one."), history()
    )

    assert proposal.previous == "Mira distrusts strangers.\nShe trusts no one."
    assert "-She trusts no one." in proposal.diff
    assert "+She trusts Ash now." in proposal.diff
    assert " Mira distrusts strangers." in proposal.diff


async def test_wrapping_the_model_adds_is_removed(llm: ReplayLLMServer) -> None:
    llm.script(Reply(text="```\nEvolved persona: Mira laughs more easily now.\n```"))

    proposal = await propose_memory_update(endpoint(llm), snapshot(), history())

    assert proposal.evolved_persona == "Mira laughs more easily now."


async def test_an_empty_answer_is_an_error_not_an_empty_persona(llm: ReplayLLMServer) -> None:
    llm.script(Reply(text="   "))

    with pytest.raises(ChatError, match="empty persona"):
        await propose_memory_update(endpoint(llm), snapshot("kept"), history())


async def test_an_empty_conversation_asks_nothing(llm: ReplayLLMServer) -> None:
    with pytest.raises(ChatError, match="nothing to remember"):
        await propose_memory_update(endpoint(llm), snapshot(), [])

    assert llm.chat_requests == []


async def test_an_endpoint_failure_is_an_llm_error(llm: ReplayLLMServer) -> None:
    llm.script(Reply(status=500))

    with pytest.raises(LLMError):
        await propose_memory_update(endpoint(llm), snapshot(), history())


async def test_a_long_conversation_is_cut_from_the_start_to_fit_the_context(
    llm: ReplayLLMServer,
) -> None:
    long_history = [
        HistoryMessage(
            id=f"m{i}", role="user" if i % 2 == 0 else "assistant", content=f"line {i} " * 40
        )
        for i in range(200)
    ]
    llm.script(Reply(text="Mira is tired of talking."))

    await propose_memory_update(endpoint(llm, context_window=2048), snapshot(), long_history)

    prompt = llm.chat_requests[0]["messages"][1]["content"]
    assert "line 199" in prompt
    assert "line 0 " not in prompt


def test_persona_helpers() -> None:
    assert persona_diff("same", "same") == []
    assert clean_persona_text('"Quoted text."') == "Quoted text."
    assert clean_persona_text("**Evolved persona:** Grown.") == "Grown."


def test_a_persona_that_starts_with_the_words_keeps_them() -> None:
    assert clean_persona_text("Evolved persona aside, she is calmer.") == (
        "Evolved persona aside, she is calmer."
    )
    assert clean_persona_text("**Evolved persona**: Calmer.") == "Calmer."
