"""A displayed message holding an EJS template is shown rendered, from the state at that
message, through the chat API; what is stored stays as written."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from storyloom.plugins import node_registry
from storyloom.testing.replay_server import ReplayLLMServer, Reply
from tests.server.conftest import chat_home
from tests.server.test_chat_api import TIMEOUT_S, get_chat, new_chat, turn

GREETING = (
    "<%_ const mood = getvar('mood', {scope: 'character'}) _%>\n"
    "<%= char %> is <%= mood %>; <%= user %> has <%= getvar('hp', {defaults: 3}) %> HP."
)
CARD: dict[str, Any] = {
    "name": "Maren",
    "description": "The keeper of the lighthouse.",
    "first_mes": GREETING,
    "extensions": {"tavern_helper": {"scripts": [], "variables": {"mood": "calm"}}},
}


@pytest.fixture
def server(tmp_path: Path, llm: ReplayLLMServer, start_server: Callable[..., Any]) -> Any:
    home = chat_home(tmp_path / "home", llm, {"maren": CARD})
    return start_server(home, node_registry=node_registry(entry_points=False))


@pytest.fixture
async def api(server: Any) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server.url, timeout=TIMEOUT_S) as client:
        yield client


async def test_a_greeting_holding_a_template_is_shown_rendered_and_stored_as_written(
    api: httpx.AsyncClient,
) -> None:
    created = await new_chat(api)
    shown = (await get_chat(api, created["id"]))["messages"][0]
    assert shown["content"] == GREETING
    assert shown["display"] == "Maren is calm; User has 3 HP."


async def test_a_reply_is_rendered_from_the_state_at_it_and_escapes_html(
    api: httpx.AsyncClient, server: Any, llm: ReplayLLMServer
) -> None:
    created = await new_chat(api)
    llm.script(
        Reply(
            text="<% setvar('hp', 7) %>HP <%= getvar('hp') %> <%= '<b>' %>",
        )
    )
    await turn(api, server, created["id"], "How are you?")
    reply = (await get_chat(api, created["id"]))["messages"][-1]
    assert reply["content"] == "<% setvar('hp', 7) %>HP <%= getvar('hp') %> <%= '<b>' %>"
    assert reply["display"] == "HP 7 &lt;b&gt;"


async def test_a_broken_template_in_a_message_is_shown_as_written(
    api: httpx.AsyncClient, server: Any, llm: ReplayLLMServer
) -> None:
    created = await new_chat(api)
    llm.script(Reply(text="before <% null.x %> after"))
    await turn(api, server, created["id"], "Hi")
    reply = (await get_chat(api, created["id"]))["messages"][-1]
    assert reply["content"] == "before <% null.x %> after"
    assert reply.get("display") is None


async def test_every_message_of_the_chat_is_rendered_from_its_own_state(
    api: httpx.AsyncClient, server: Any, llm: ReplayLLMServer
) -> None:
    created = await new_chat(api)
    for hp in (4, 9):
        llm.script(Reply(text=f"<% setvar('hp', {hp}) %>now <%= getvar('hp') %>"))
        await turn(api, server, created["id"], f"set {hp}")
    shown = [m.get("display") for m in (await get_chat(api, created["id"]))["messages"]]
    assert shown == ["Maren is calm; User has 3 HP.", None, "now 4", None, "now 9"]
