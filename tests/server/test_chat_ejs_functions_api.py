"""The functions and decorators of ST-Prompt-Template that cards call beyond
getvar/setvar, through a chat turn (the model's request) and the chat view route:
``getwi`` (another entry, rendered), ``getchar``/``getCharData`` (the card), ``define``,
``@@preprocessing``, ``@@private``, ``[InitialVariables]`` (plain JSON and a template),
and a SillyTavern-only function, which fails naming itself."""

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
from tests.server.test_chat_api import TIMEOUT_S, get_chat, new_chat, turn


def entry(entry_id: str, content: str, name: str = "", **fields: Any) -> CAIU:
    return CAIU.model_validate(
        {
            "id": entry_id,
            "displayName": name or entry_id,
            "content": {"value": content, "metadata": fields.pop("metadata", {})},
            "activation_criteria": {"constant": True, **fields},
        }
    )


BOOK = KnowledgeBase(
    kb_id="kb_fn",
    kb_displayName="Functions",
    entries=[
        entry(
            "start",
            '<% const base = 4 %>{"hp": <%= base * 2 %>, "stats": {"str": 3}}',
            "[InitialVariables] start",
        ),
        entry(
            "plain-start",
            json.dumps({"gold": 5, "stats": {"dex": 2}}),
            "plain start",
            metadata={"template": {"initial_variables": ""}},
        ),
        # Never activated by the scan: getwi reads it all the same.
        entry(
            "weapon",
            "WEAPON<%= typeof bonus === 'undefined' ? '' : ' ' + bonus %>"
            " hp=<%= getvar('hp', {defaults: 0}) %>",
            constant=False,
            keywords=["no-such-word"],
        ),
        entry(
            "reader",
            "READ <%- getwi('weapon', {bonus: 'B+'}) %> | <%- getchar().split('\\n')[1] %>",
        ),
        entry(
            "pre",
            "<% setvar('pre_seen', getvar('gold') + 1) %>PRE",
            metadata={"template": {"preprocessing": ""}},
        ),
        entry("priv1", "<% const x = 'P-ONE' %><%= x %>", metadata={"template": {"private": ""}}),
        entry("priv2", "<% const x = 'P-TWO' %><%= x %>", metadata={"template": {"private": ""}}),
        entry("definer", "<% define('shout', (s) => s.toUpperCase() + '!') %>"),
        entry("shouter", "SAID <%= shout('hey') %>"),
        entry("caller", "CALLER\n<% execute('/echo hi') %>", "st caller"),
    ],
)
CARD: dict[str, Any] = {
    "name": "Maren",
    "description": "DESC pre=<%= getvar('pre_seen') %>",
    "first_mes": "<%- getwi('Functions', 'weapon') %>/<%= getCharData().name %>",
    "knowledge_bases": ["kb_fn"],
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


async def test_template_functions_and_decorators_reach_the_model_as_documented(
    api: httpx.AsyncClient, server: Any, llm: ReplayLLMServer
) -> None:
    created = await new_chat(api)
    llm.script(Reply(text="Noted."))
    await turn(api, server, created["id"], "Begin.")
    sent = "\n".join(str(m["content"]) for m in llm.chat_requests[-1]["messages"])
    # getwi renders the other entry (with the data passed); getchar gives the card.
    assert "READ WEAPON B+ hp=8 | name: Maren" in sent
    assert "WEAPON hp=8" not in sent  # the weapon entry itself was not activated
    # @@preprocessing: evaluated before the scan, so the card field sees its write.
    assert "PRE" in sent and "DESC pre=6" in sent
    # @@private: each entry's const is its own.
    assert "P-ONE" in sent and "P-TWO" in sent
    # define: a name later templates of the turn call.
    assert "SAID HEY!" in sent
    # A SillyTavern-only function: the entry goes as written, named in the warnings.
    assert "CALLER\n<% execute('/echo hi') %>" in sent
    reply = (await get_chat(api, created["id"]))["messages"][-1]
    record = (await api.get(f"/api/chats/{created['id']}/messages/{reply['id']}/prompt")).json()
    assert any(
        "lore st caller (line 2)" in w and "execute is not available" in w
        for w in record["warnings"]
    )
    # [InitialVariables]: the plain one and the template fill what the state lacks; the
    # turn keeps them. Neither is ever sent.
    state = await api.get(f"/api/chats/{created['id']}/messages/{reply['id']}/state")
    variables = state.json()["state"]["variables"]
    assert variables["hp"] == 8 and variables["gold"] == 5
    assert variables["stats"] == {"dex": 2, "str": 3}
    assert json.dumps({"gold": 5, "stats": {"dex": 2}}) not in sent and "base * 2" not in sent


async def test_a_displayed_message_reads_other_entries_and_the_card(
    api: httpx.AsyncClient,
) -> None:
    created = await new_chat(api)
    greeting = (await get_chat(api, created["id"]))["messages"][0]
    assert greeting["display"] == "WEAPON hp=0/Maren"


async def test_a_displayed_message_falls_back_on_the_plain_initial_variables(
    api: httpx.AsyncClient, server: Any, llm: ReplayLLMServer
) -> None:
    created = await new_chat(api)
    llm.script(Reply(text="Counted."))
    # The user's message comes before the turn kept any variable: at it, the state is
    # empty, and the lore's starting variables stand in, as in ST-Prompt-Template.
    await turn(
        api, server, created["id"], "gold <%= getvar('gold') %>, dex <%= getvar('stats.dex') %>"
    )
    messages = (await get_chat(api, created["id"]))["messages"]
    assert messages[1]["display"] == "gold 5, dex 2"
