"""The corpus MVU card (爱) played in Chinese through the REST API, as a user meets it:
imported, its scripts allowed once, three turns against the scripted server.

Its whole world reaches the model at the default lore budget (25 %) when the server
reports a long context (131,072 tokens, as the models these cards are written for have);
at the 8,192 tokens assumed for a server that reports none, the reply names what the
budget cut. Its EJS entry is evaluated against the current stage, the model sees the
current ``stat_data`` as YAML, an update its Zod schema forbids is refused, and the
status placeholder never shows raw."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets

from storyloom.plugins import node_registry
from storyloom.testing.replay_server import ReplayLLMServer, Reply
from tests.server.conftest import chat_home, start_live_server

CARD = "zh_card_ai_v3json_mvu_27entries.json"
TIMEOUT_S = 60
Json = dict[str, Any]


def _card(corpus_sample: Callable[[str], Path]) -> Json:
    card: Json = json.loads(corpus_sample(CARD).read_text(encoding="utf-8"))
    return card


def _constant_titles(card: Json) -> list[str]:
    return [
        e["comment"]
        for e in card["data"]["character_book"]["entries"]
        if e.get("constant") and e.get("enabled", True) and "[InitVar]" not in e["comment"]
    ]


@pytest.fixture
async def played(
    tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[tuple[httpx.AsyncClient, str, ReplayLLMServer, Any]]:
    context: int | None = request.param
    with ReplayLLMServer(models=["test-model"], context_length=context) as llm:
        home = chat_home(tmp_path / "home", llm)
        server = start_live_server(home, node_registry=node_registry(entry_points=False))
        try:
            async with httpx.AsyncClient(base_url=server.url, timeout=TIMEOUT_S) as api:
                yield api, server.ws_url, llm, server
        finally:
            server.server.should_exit = True


async def _turn(api: httpx.AsyncClient, ws_url: str, chat_id: str, text: str) -> Json:
    async with websockets.connect(ws_url) as ws:
        json.loads(await ws.recv())
        await ws.send(json.dumps({"type": "chat:subscribe", "conversationId": chat_id}))
        version = (await api.get(f"/api/chats/{chat_id}")).json()["conversation"]["version"]
        sent = await api.post(
            f"/api/chats/{chat_id}/messages", json={"text": text, "expected_version": version}
        )
        assert sent.status_code == 202, sent.text
        while json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT_S))["type"] != "chat:done":
            pass
    reply: Json = (await api.get(f"/api/chats/{chat_id}")).json()["messages"][-1]
    assert reply["role"] == "assistant" and reply["status"] == "complete", reply
    return reply


async def _start(api: httpx.AsyncClient, card: Json) -> str:
    data = json.dumps(card, ensure_ascii=False).encode("utf-8")
    imported = await api.post("/api/characters/import", files={"file": ("爱.json", data)})
    assert imported.status_code == 201, imported.text
    character_id = imported.json()["id"]
    document = (await api.get(f"/api/characters/{character_id}")).json()
    scripts = document["scripts"]
    # nothing silently inactive: the 5 regex scripts wait for an answer, MVU is native
    assert scripts["needs_answer"] is True
    assert {r["status"] for r in scripts["regex"]} == {"not_allowed"} and len(scripts["regex"]) == 5
    assert {h["kind"]: h["status"] for h in scripts["helper"]} == {
        "mvu_bundle": "native",
        "mvu_schema": "native",
    }
    allowed = await api.put(
        f"/api/characters/{character_id}/permissions",
        json={"regex_scripts": True, "frame_scripts": True},
    )
    assert allowed.status_code == 200, allowed.text
    chat = await api.post("/api/chats", json={"character_id": character_id})
    assert chat.status_code == 201, chat.text
    assert chat.json()["settings"]["allow_regex_scripts"] is True
    chat_id: str = chat.json()["id"]
    return chat_id


def _sent(llm: ReplayLLMServer, index: int = -1) -> str:
    return "\n".join(str(m.get("content")) for m in llm.chat_requests[index]["messages"])


@pytest.mark.parametrize("played", [131072], indirect=True)
async def test_with_the_servers_context_the_whole_world_and_the_current_state_reach_the_model(
    played: tuple[httpx.AsyncClient, str, ReplayLLMServer, Any],
    corpus_sample: Callable[[str], Path],
) -> None:
    api, ws_url, llm, _server = played
    card = _card(corpus_sample)
    chat_id = await _start(api, card)
    llm.script(
        Reply(
            text="沈念眨了眨眼。<UpdateVariable>_.set('系统.当前阶段', '磨合期', '损友成型');"
            "</UpdateVariable><StatusPlaceHolderImpl/>"
        ),
        Reply(
            text="小穗跑了过来。<UpdateVariable>_.set('系统.当前阶段', '损友成型', '不存在');"
            "_.set('小穗.觉醒进度', 0, 10);</UpdateVariable><StatusPlaceHolderImpl/>"
        ),
        Reply(text="云棠打了个哈欠。"),
    )
    first = await _turn(api, ws_url, chat_id, "师尊，今天做什么任务？")
    sent = _sent(llm)
    for title in _constant_titles(card):
        first_line = next(
            line
            for e in card["data"]["character_book"]["entries"]
            if e["comment"] == title
            for line in e["content"].splitlines()
            if line.strip() and "<%" not in line and "{{" not in line and line.strip() != "---"
        )
        assert first_line.strip() in sent, f"constant entry {title} is not in the prompt"
    assert "<%" not in sent and "getvar(" not in sent  # 阶段指导 evaluated
    assert "磨合期:" in sent and "损友成型:" not in sent
    assert "{{format_message_variable" not in sent
    assert "当前阶段: 磨合期" in sent  # the model sees the current stat_data
    assert "lore_cut" not in first.get("extra", {})
    assert "StatusPlaceHolderImpl" not in (first.get("display") or first["content"])

    second = await _turn(api, ws_url, chat_id, "我们去边境城市吧。")
    sent = _sent(llm)
    assert "当前阶段: 损友成型" in sent
    assert "损友成型:" in sent and "磨合期:\n" not in sent  # the stage's block, re-evaluated
    state = await api.get(f"/api/chats/{chat_id}/messages/{second['id']}/state")
    stat_data = state.json()["state"]["variables"]["stat_data"]
    assert stat_data["系统"]["当前阶段"] == "损友成型"  # 不存在 is not in the schema's enum
    assert stat_data["小穗"]["觉醒进度"] == 10
    assert [w["kind"] for w in second["extra"]["mvu_warnings"]] == ["schema"]

    await _turn(api, ws_url, chat_id, "好。")
    assert "觉醒进度: 10" in _sent(llm)
    assert "StatusPlaceHolderImpl" not in _sent(llm)


@pytest.mark.parametrize("played", [None], indirect=True)
async def test_at_the_default_context_the_reply_names_the_constant_entries_the_budget_cut(
    played: tuple[httpx.AsyncClient, str, ReplayLLMServer, Any],
    corpus_sample: Callable[[str], Path],
) -> None:
    api, ws_url, llm, _server = played
    card = _card(corpus_sample)
    chat_id = await _start(api, card)
    llm.script(Reply(text="沈念眨了眨眼。"))
    reply = await _turn(api, ws_url, chat_id, "师尊，今天做什么任务？")
    cut = reply["extra"]["lore_cut"]
    assert cut["count"] >= 1
    sent = _sent(llm)
    for title in cut["constant"]:
        assert title in _constant_titles(card)
    # what was not cut of the constant world is in the prompt: nothing is lost silently
    kept = [t for t in _constant_titles(card) if t not in cut["constant"]]
    assert kept, "the budget cut every constant entry"
    assert "<%" not in sent
