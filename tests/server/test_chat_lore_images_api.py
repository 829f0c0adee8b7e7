"""A lore entry's image in a chat turn, through the routes: attached with the entry
media route, sent to a connection with ``vision`` on as an OpenAI ``image_url`` content
part beside the entry's text, and to any other as the entry's text alone (its alt text
when it has no text)."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from storyloom.knowledge.caiu import CAIU
from storyloom.knowledge.knowledge_base import KnowledgeBase
from storyloom.plugins import node_registry
from storyloom.project.project_knowledge import add_local_knowledge_base
from storyloom.testing.replay_server import ReplayLLMServer, Reply
from tests.server.conftest import chat_home
from tests.server.test_chat_api import TIMEOUT_S, new_chat, turn

IMAGE = (
    Path(__file__).resolve().parents[1] / "fixtures" / "sillytavern" / "card_greta_de_v2_tiny.png"
)


def _entry(entry_id: str, content: dict[str, Any]) -> CAIU:
    return CAIU.model_validate(
        {
            "id": entry_id,
            "displayName": entry_id,
            "content": content,
            "activation_criteria": {"constant": True},
        }
    )


BOOK = KnowledgeBase(
    kb_id="kb_bestiary",
    kb_displayName="Bestiary",
    entries=[
        _entry("dragon", {"value": "DRAGON-TEXT: a red dragon, wings spread."}),
        _entry("wyrm", {"value": "", "alt_text": "WYRM-ALT: a pale wyrm coiled on gold."}),
        _entry("plain", {"value": "PLAIN-LORE"}),
        _entry(
            "map",
            {"value": "MAP-TEXT", "url": "https://maps.example/harbour.png"},
        ),
    ],
)
CARD: dict[str, Any] = {
    "name": "Maren",
    "description": "The keeper of the lighthouse.",
    "first_mes": "Welcome.",
    "knowledge_bases": ["kb_bestiary"],
}


def _start(
    tmp_path: Path, llm: ReplayLLMServer, start_server: Callable[..., Any], *, vision: bool
) -> Any:
    home = chat_home(tmp_path / "home", llm, {"maren": CARD})
    settings = json.loads((home / "settings.json").read_text())
    settings["user_llm"]["vision"] = vision
    (home / "settings.json").write_text(json.dumps(settings))
    add_local_knowledge_base(home / "projects" / "default", BOOK)
    return start_server(home, node_registry=node_registry(entry_points=False))


@pytest.fixture
async def vision_api(
    tmp_path: Path, llm: ReplayLLMServer, start_server: Callable[..., Any]
) -> AsyncIterator[tuple[httpx.AsyncClient, Any]]:
    server = _start(tmp_path, llm, start_server, vision=True)
    async with httpx.AsyncClient(base_url=server.url, timeout=TIMEOUT_S) as client:
        yield client, server


@pytest.fixture
async def text_api(
    tmp_path: Path, llm: ReplayLLMServer, start_server: Callable[..., Any]
) -> AsyncIterator[tuple[httpx.AsyncClient, Any]]:
    server = _start(tmp_path, llm, start_server, vision=False)
    async with httpx.AsyncClient(base_url=server.url, timeout=TIMEOUT_S) as client:
        yield client, server


async def _attach(api: httpx.AsyncClient, entry_id: str) -> None:
    response = await api.post(
        f"/api/knowledge/bases/kb_bestiary/entries/{entry_id}/media",
        files={"file": ("picture.png", IMAGE.read_bytes())},
    )
    assert response.status_code == 200, response.text


def _image_parts(messages: list[dict[str, Any]]) -> list[tuple[str, list[str]]]:
    """Each message with content parts: its text part and its image urls."""
    found = []
    for message in messages:
        content = message["content"]
        if isinstance(content, list):
            texts = [p["text"] for p in content if p["type"] == "text"]
            urls = [p["image_url"]["url"] for p in content if p["type"] == "image_url"]
            found.append(("\n".join(texts), urls))
    return found


async def _dragon_turn(api: httpx.AsyncClient, server: Any, llm: ReplayLLMServer) -> Any:
    """Both entries get their image, then one turn that activates them: the messages the
    model was sent."""
    await _attach(api, "dragon")
    await _attach(api, "wyrm")
    created = await new_chat(api)
    llm.script(Reply(text="The dragon stirs."))
    await turn(api, server, created["id"], "Tell me of dragons.")
    return llm.chat_requests[-1]["messages"]


async def test_a_vision_connection_gets_the_entry_s_image_as_a_content_part(
    vision_api: tuple[httpx.AsyncClient, Any], llm: ReplayLLMServer
) -> None:
    api, server = vision_api
    sent = await _dragon_turn(api, server, llm)
    parts = _image_parts(sent)
    assert parts, sent
    text, urls = parts[0]
    assert "DRAGON-TEXT" in text and "WYRM-ALT" in text
    expected = "data:image/png;base64," + base64.b64encode(IMAGE.read_bytes()).decode()
    # Files as data URLs, a web address as it is (in the order the entries are injected).
    assert sorted(urls) == sorted([expected, expected, "https://maps.example/harbour.png"])
    assert all("images" not in m for m in sent)  # storyloom's own reference never leaves


async def test_a_connection_without_vision_gets_the_text_and_the_alt_text_only(
    text_api: tuple[httpx.AsyncClient, Any], llm: ReplayLLMServer
) -> None:
    api, server = text_api
    sent = await _dragon_turn(api, server, llm)
    assert all(isinstance(m["content"], str) for m in sent)
    assert all("images" not in m for m in sent)
    joined = "\n".join(m["content"] for m in sent)
    assert "DRAGON-TEXT" in joined and "WYRM-ALT" in joined and "PLAIN-LORE" in joined
    assert "MAP-TEXT" in joined and "maps.example" not in joined
