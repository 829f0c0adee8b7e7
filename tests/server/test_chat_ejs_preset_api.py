"""EJS templates in the prompts of a SillyTavern chat-completion preset (imported through
the workflow route as the chat's pipeline) reach the model rendered, in the turn's one
template batch: they read the turn's variables (the lore's starting variables among
them) and what they write is the turn's; a broken one goes as written, named in the
reply's warnings and the inspector's Templates section."""

from __future__ import annotations

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
from tests.server.test_chat_api import TIMEOUT_S, get_chat, turn

PRESET: dict[str, Any] = {
    "temperature": 0.7,
    "prompts": [
        {
            "identifier": "main",
            "name": "Main Prompt",
            "system_prompt": True,
            "role": "system",
            "content": "MAIN <%= char %> hp=<%= getvar('hp') %><% setvar('seen_main', 1) %>",
        },
        {
            "identifier": "phase",
            "name": "Phase guide",
            "system_prompt": False,
            "role": "system",
            "content": "<%_ if (getvar('hp') > 5) { _%>STRONG<%_ } else { _%>WEAK<%_ } _%>",
        },
        {
            "identifier": "broken",
            "name": "Broken guide",
            "system_prompt": False,
            "role": "system",
            "content": "BROKEN-GUIDE\n<% nothing.here %>",
        },
    ],
    "prompt_order": [
        {
            "character_id": 100001,
            "order": [
                {"identifier": "main", "enabled": True},
                {"identifier": "phase", "enabled": True},
                {"identifier": "broken", "enabled": True},
                {"identifier": "charDescription", "enabled": True},
                {"identifier": "chatHistory", "enabled": True},
            ],
        }
    ],
}
BOOK = KnowledgeBase(
    kb_id="kb_start",
    kb_displayName="Start",
    entries=[
        CAIU.model_validate(
            {
                "id": "init",
                "displayName": "[InitialVariables] start",
                "content": {"value": json.dumps({"hp": 8})},
                "activation_criteria": {"constant": True},
            }
        )
    ],
)
CARD: dict[str, Any] = {
    "name": "Maren",
    "description": "The keeper of the lighthouse.",
    "first_mes": "Welcome.",
    "knowledge_bases": ["kb_start"],
}


@pytest.fixture
def server(tmp_path: Path, llm: ReplayLLMServer, start_server: Callable[..., Any]) -> Any:
    home = chat_home(tmp_path / "home", llm, {"maren": CARD})
    add_local_knowledge_base(home / "projects" / "default", BOOK)
    return start_server(home, node_registry=node_registry(entry_points=False))


@pytest.fixture
async def api(server: Any) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server.url, timeout=TIMEOUT_S) as client:
        yield client


async def test_preset_prompt_templates_reach_the_model_rendered(
    api: httpx.AsyncClient, server: Any, llm: ReplayLLMServer
) -> None:
    imported = await api.post(
        "/api/workflows/import-st-preset",
        files={"file": ("EJS preset.json", json.dumps(PRESET).encode(), "application/json")},
    )
    assert imported.status_code == 201, imported.text
    pipeline = imported.json()["id"]
    created = await api.post("/api/chats", json={"character_id": "maren"})
    assert created.status_code == 201, created.text
    chat = created.json()
    patched = await api.patch(
        f"/api/chats/{chat['id']}",
        json={"expected_version": chat["version"], "settings": {"pipeline": pipeline}},
    )
    assert patched.status_code == 200, patched.text

    llm.script(Reply(text="The lamp is lit."))
    await turn(api, server, chat["id"], "Hello.")
    sent = "\n".join(str(m["content"]) for m in llm.chat_requests[-1]["messages"])
    assert "MAIN Maren hp=8" in sent
    assert "STRONG" in sent and "WEAK" not in sent
    assert "getvar" not in sent.split("BROKEN-GUIDE")[0]
    # A broken one goes as written, and says which prompt and line.
    assert "BROKEN-GUIDE\n<% nothing.here %>" in sent
    reply = (await get_chat(api, chat["id"]))["messages"][-1]
    inspector = await api.get(f"/api/chats/{chat['id']}/messages/{reply['id']}/prompt")
    assert inspector.status_code == 200, inspector.text
    record = inspector.json()
    where = {(p["origin"], p["label"], p["line"]) for p in record["templates"]}
    assert where == {("preset", "Broken guide", 2)}
    assert any("preset Broken guide (line 2)" in w for w in record["warnings"])
    # What a preset prompt writes is the turn's.
    state = await api.get(f"/api/chats/{chat['id']}/messages/{reply['id']}/state")
    assert state.status_code == 200, state.text
    assert state.json()["state"]["variables"]["seen_main"] == 1
