"""ST-Prompt-Template's render entries (``[RENDER:BEFORE]``/``[RENDER:AFTER]``,
``@@render_before``/``@@render_after``) through the chat routes: added to every displayed
message (the greeting, the user's, the replies) as the plugin does, from the state at it
and the user's global variables, never sent to the model; the page shows the same text
whether it reads the chat (``GET /api/chats/{id}``) or gets the finished reply over the
WebSocket."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from storyloom.chat.store.global_variables import GlobalVariables
from storyloom.knowledge.caiu import CAIU
from storyloom.knowledge.knowledge_base import KnowledgeBase
from storyloom.plugins import node_registry
from storyloom.project.project_knowledge import add_local_knowledge_base
from storyloom.testing.replay_server import ReplayLLMServer, Reply
from tests.server.conftest import chat_home
from tests.server.test_chat_api import TIMEOUT_S, get_chat, new_chat, turn


def entry(entry_id: str, content: str, name: str, **criteria: Any) -> CAIU:
    metadata = criteria.pop("metadata", {})
    return CAIU.model_validate(
        {
            "id": entry_id,
            "displayName": name,
            "content": {"value": content, "metadata": metadata},
            "activation_criteria": {"constant": True, **criteria},
        }
    )


BOOK = KnowledgeBase(
    kb_id="kb_render",
    kb_displayName="Render book",
    entries=[
        entry("head", "HEAD <%= getvar('hp', {defaults: 0}) %>", "[RENDER:BEFORE] head"),
        entry(
            "bar",
            "BAR hp=<%= getvar('hp', {defaults: 0}) %> runs=<%= getvar('runs') %>",
            "status bar",
            metadata={"template": {"render_after": "", "private": ""}},
        ),
        # Not constant: after a message only when its key is in that message.
        entry(
            "sword",
            "SWORD-NOTE",
            "[RENDER:AFTER] sword",
            constant=False,
            keywords=["sword"],
        ),
        # A before entry is only ever added when constant, whatever its keys.
        entry(
            "keyed-head",
            "KEYED-HEAD",
            "[RENDER:BEFORE] keyed",
            constant=False,
            keywords=["sword"],
        ),
        entry(
            "guarded",
            "GUARDED",
            "guarded",
            metadata={"template": {"render_after": "", "if": "getvar('hp', {defaults: 0}) > 5"}},
        ),
        entry("broken", "<% null.x %>", "[RENDER:AFTER] broken"),
        entry("lore", "PLAIN-LORE", "plain lore"),
    ],
)
CARD: dict[str, Any] = {
    "name": "Maren",
    "description": "The keeper of the lighthouse.",
    "first_mes": "Welcome.",
    "knowledge_bases": ["kb_render"],
}


@pytest.fixture
def server(tmp_path: Path, llm: ReplayLLMServer, start_server: Callable[..., Any]) -> Any:
    home = chat_home(tmp_path / "home", llm, {"maren": CARD})
    add_local_knowledge_base(home / "projects" / "default", BOOK)
    (home / "global_variables.json").write_text(json.dumps({"runs": 12}))
    return start_server(home, node_registry=node_registry(entry_points=False))


@pytest.fixture
async def api(server: Any) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server.url, timeout=TIMEOUT_S) as client:
        yield client


async def test_render_entries_are_added_to_every_displayed_message_and_never_sent(
    api: httpx.AsyncClient, server: Any, llm: ReplayLLMServer
) -> None:
    created = await new_chat(api)
    llm.script(Reply(text="<% setvar('hp', 9) %>I draw my sword."))
    await turn(api, server, created["id"], "Hello there.")
    messages = (await get_chat(api, created["id"]))["messages"]
    greeting, mine, reply = (m["display"] for m in messages)
    assert greeting == "HEAD 0\n\nWelcome.\n\nBAR hp=0 runs=12"
    assert mine == "HEAD 0\n\nHello there.\n\nBAR hp=0 runs=12"
    # Before entries run before the reply's own template, after entries after it (they
    # see what it wrote); the keyed after entry matches its text, the keyed before entry
    # does not; a broken entry adds nothing.
    assert reply == "HEAD 0\n\nI draw my sword.\n\nBAR hp=9 runs=12\n\nSWORD-NOTE\n\nGUARDED"
    # What is stored stays as written, and the model never sees a render entry.
    assert messages[2]["content"] == "<% setvar('hp', 9) %>I draw my sword."
    sent = "\n".join(str(m["content"]) for m in llm.chat_requests[-1]["messages"])
    assert "PLAIN-LORE" in sent
    for shown_only in ("HEAD", "BAR", "SWORD-NOTE", "KEYED-HEAD", "GUARDED"):
        assert shown_only not in sent


async def test_the_finished_reply_over_the_websocket_shows_what_the_chat_view_shows(
    api: httpx.AsyncClient, server: Any, llm: ReplayLLMServer
) -> None:
    created = await new_chat(api)
    llm.script(Reply(text="A sword gleams.", chunks=3))
    _, events = await turn(api, server, created["id"], "Look around.")
    reply = (await get_chat(api, created["id"]))["messages"][-1]
    finals = [
        e["message"]
        for e in events
        if e["type"] == "chat:message" and e["message"]["id"] == reply["id"]
    ]
    assert finals[-1]["status"] == "complete"
    assert finals[-1]["display"] == reply["display"]
    assert reply["display"] == "HEAD 0\n\nA sword gleams.\n\nBAR hp=0 runs=12\n\nSWORD-NOTE"
    # While it was being written, no render entry was added.
    streaming = [m for m in finals if m["status"] == "streaming"]
    assert all("BAR" not in (m.get("display") or "") for m in streaming)


async def test_a_displayed_template_reads_and_writes_the_user_s_global_variables_without_keeping(
    api: httpx.AsyncClient, server: Any, llm: ReplayLLMServer, tmp_path: Path
) -> None:
    created = await new_chat(api)
    llm.script(Reply(text="<% incvar('runs', 1, {scope: 'global'}) %>runs <%= getvar('runs') %>"))
    await turn(api, server, created["id"], "Count.")
    for _ in range(2):
        reply = (await get_chat(api, created["id"]))["messages"][-1]
        assert reply["display"].startswith("HEAD 0\n\nruns 13\n\nBAR hp=0 runs=13")
    assert GlobalVariables.in_home(tmp_path / "home").load() == {"runs": 12}
