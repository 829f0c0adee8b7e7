"""``exclude_from_history`` over real HTTP: an entry with it set is injected for the turn it
activates in, and a sticky effect does not carry it into the turns after."""

from __future__ import annotations

import json
from typing import Any

import httpx

from storyloom.testing.replay_server import ReplayLLMServer, Reply
from storyloom.testing.st_documents import world_info_document, world_info_entry
from tests.server.test_chat_api import new_chat, turn
from tests.server.test_chat_references_api import api, sent_text, server

__all__ = ["api", "server"]

BOOK = world_info_document(
    [
        world_info_entry(
            0, ["beacon"], "ONE-SHOT: ring the bell now.", comment="Bell", sticky=3, scanDepth=1
        ),
        world_info_entry(
            1,
            ["beacon"],
            "The fire on the tower burns all night.",
            comment="Beacon",
            sticky=3,
            scanDepth=1,
        ),
    ],
    name="Signals",
)


async def test_a_one_turn_entry_is_not_kept_by_sticky_in_the_next_turn(
    api: httpx.AsyncClient, server: Any, llm: ReplayLLMServer
) -> None:
    files = {"file": ("signals.json", json.dumps(BOOK).encode())}
    imported = await api.post("/api/knowledge/import", files=files, data={"scope": "local"})
    assert imported.status_code == 201, imported.text
    kb_id = imported.json()["created"][0]["kb_id"]
    kb = (await api.get(f"/api/knowledge/bases/{kb_id}")).json()["knowledge_base"]
    bell = next(e for e in kb["entries"] if e["displayName"] == "Bell")
    bell["usage_metadata"]["exclude_from_history"] = True
    saved = await api.put(f"/api/knowledge/bases/{kb_id}", json=kb)
    assert saved.status_code == 200, saved.text
    created = await new_chat(api)
    bound = await api.put(f"/api/chats/{created['id']}/lore", json={"knowledge_bases": [kb_id]})
    assert bound.status_code == 200, bound.text
    llm.script(Reply(text="The bell rings."), Reply(text="Night falls."))
    await turn(api, server, created["id"], "Light the beacon.")
    first = sent_text(llm)
    assert (
        "ONE-SHOT: ring the bell now." in first
        and "The fire on the tower burns all night." in first
    )
    # The next message names no key: the sticky entry stays, the one-turn entry does not.
    await turn(api, server, created["id"], "And then?")
    second = sent_text(llm)
    assert "The fire on the tower burns all night." in second
    assert "ONE-SHOT" not in second
