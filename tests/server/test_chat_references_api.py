"""``{{{...}}}`` references in chat messages over real HTTP: the model reads the entry's
content where a user message (or an earlier reply) names it; the chat keeps the text as
written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from storyloom.testing.replay_server import ReplayLLMServer, Reply
from storyloom.testing.st_documents import world_info_document, world_info_entry
from tests.server.conftest import chat_home
from tests.server.test_chat_api import CARD, chat_registry, get_chat, new_chat, turn

BOOK = world_info_document(
    [
        world_info_entry(
            0, ["unrelated-key"], "The lighthouse lamp burns whale oil.", comment="Lamp"
        )
    ],
    name="Lanternfall",
)


@pytest.fixture
def server(tmp_path: Path, llm: ReplayLLMServer, start_server: Any) -> Any:
    home = chat_home(tmp_path / "home", llm, {"maren": CARD})
    return start_server(home, node_registry=chat_registry())


@pytest.fixture
async def api(server: Any) -> Any:
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        yield client


def sent_text(llm: ReplayLLMServer) -> str:
    return "\n".join(str(m["content"]) for m in llm.chat_requests[-1]["messages"])


async def test_a_reference_in_a_user_message_reaches_the_model_as_the_entry_s_content(
    api: httpx.AsyncClient, server: Any, llm: ReplayLLMServer
) -> None:
    files = {"file": ("lanternfall.json", json.dumps(BOOK).encode())}
    imported = await api.post("/api/knowledge/import", files=files, data={"scope": "local"})
    assert imported.status_code == 201, imported.text
    created = await new_chat(api)
    llm.script(Reply(text="It does, {{{Lanternfall:Lamp}}}"))
    await turn(api, server, created["id"], "What burns? {{{Lanternfall:Lamp}}} {{{Nowhere}}}")
    sent = sent_text(llm)
    assert "What burns? The lighthouse lamp burns whale oil." in sent
    assert "{{{" not in sent
    # A reference that finds nothing is a visible marker (seed 000 2.2.4).
    assert "[引用错误: Nowhere 未找到或无法解析]" in sent
    # The chat shows what was written; the reply's reference is read again next turn.
    messages = (await get_chat(api, created["id"]))["messages"]
    assert messages[-2]["content"] == "What burns? {{{Lanternfall:Lamp}}} {{{Nowhere}}}"
    assert messages[-1]["content"] == "It does, {{{Lanternfall:Lamp}}}"
    llm.script(Reply(text="Yes."))
    await turn(api, server, created["id"], "And then?")
    assert "It does, The lighthouse lamp burns whale oil." in sent_text(llm)
