"""An MVU card played through the chat API: the model reads the current ``stat_data``
(Tavern Helper's ``{{format_message_variable}}``), replies change value pairs and keep
their descriptions, ``$meta`` and the card's Zod schema refuse what they forbid (as
warnings on the message), and ``<StatusPlaceHolderImpl/>`` never shows raw nor reaches
the model."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets
from websockets.asyncio.client import ClientConnection

from storyloom.plugins import node_registry
from storyloom.testing.replay_server import ReplayLLMServer, Reply
from tests.server.conftest import chat_home

TIMEOUT_S = 30
Json = dict[str, Any]

INIT_VARS = """\
理:
  $meta:
    extensible: false
    required: [地点]
  好感度: [19, 她对你的好感]
  心情: [平静, 她此刻的心情]
  地点: 教堂
世界:
  天数: 1
"""
ZOD_SCRIPT = """\
import { registerMvuSchema } from 'https://testingcf.jsdelivr.net/gh/StageDog/tavern_resource/dist/util/mvu_zod.js';
export const Schema = z.object({
  理: z.object({
    地点: z.string(),
  }).passthrough(),
  世界: z.object({
    天数: z.coerce.number().min(1).max(30),
    天气: z.enum(['晴', '雨']).prefault('晴'),
  }),
});
$(() => {
  registerMvuSchema(Schema);
});
"""
STATUS_BAR = "<div class=bar>好感度 {{get_message_variable::stat_data.理.好感度[0]}}</div>"


def mvu_card(*, status_bar: bool = True) -> Json:
    """A V3 card as Chinese MVU cards are made: [InitVar], a variable list entry, the
    update rules, the MVU bundle and a Zod schema script, a status-bar display regex."""
    entries = [
        {
            "id": 0,
            "comment": "[InitVar]请勿打开",
            "content": INIT_VARS,
            "enabled": False,
            "constant": True,
            "keys": [],
        },
        {
            "id": 1,
            "comment": "变量列表",
            "constant": True,
            "enabled": True,
            "keys": [],
            "content": "<status_current_variable>\n{{format_message_variable::stat_data}}\n"
            "</status_current_variable>",
        },
        {
            "id": 2,
            "comment": "[mvu_update]变量更新规则",
            "constant": True,
            "enabled": True,
            "keys": [],
            "content": "RULES: update 理.好感度 with JSON Patch.",
        },
    ]
    regex = [
        {
            "id": "bar",
            "scriptName": "状态栏",
            "findRegex": "<StatusPlaceHolderImpl/>",
            "replaceString": STATUS_BAR,
            "placement": [2],
            "markdownOnly": True,
            "promptOnly": False,
            "disabled": False,
        },
    ]
    return {
        "spec": "chara_card_v3",
        "spec_version": "3.0",
        "data": {
            "name": "理",
            "description": "教堂里的修女。",
            "first_mes": "你来了。<StatusPlaceHolderImpl/>",
            "character_book": {"name": "理", "entries": entries},
            "extensions": {
                "regex_scripts": regex if status_bar else [],
                "tavern_helper": {
                    "scripts": [
                        {
                            "type": "script",
                            "id": "mvu",
                            "name": "MVU",
                            "enabled": True,
                            "content": "import 'https://testingcf.jsdelivr.net/gh/MagicalAstrogy/MagVarUpdate/artifact/bundle.js'",
                        },
                        {
                            "type": "script",
                            "id": "zod",
                            "name": "Zod",
                            "enabled": True,
                            "content": ZOD_SCRIPT,
                        },
                    ],
                    "variables": {"角色": {"称号": "修女"}},
                },
            },
        },
    }


@pytest.fixture
def server(tmp_path: Path, llm: ReplayLLMServer, start_server: Callable[..., Any]) -> Any:
    home = chat_home(tmp_path / "home", llm)
    return start_server(home, node_registry=node_registry(entry_points=False))


@pytest.fixture
async def api(server: Any) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server.url, timeout=TIMEOUT_S) as client:
        yield client


async def import_card(api: httpx.AsyncClient, card: Json) -> str:
    data = json.dumps(card, ensure_ascii=False).encode("utf-8")
    answer = await api.post("/api/characters/import", files={"file": ("li.json", data)})
    assert answer.status_code == 201, answer.text
    character_id: str = answer.json()["id"]
    return character_id


async def new_chat(api: httpx.AsyncClient, character_id: str, *, regex: bool = True) -> str:
    answer = await api.post("/api/chats", json={"character_id": character_id})
    assert answer.status_code == 201, answer.text
    chat_id: str = answer.json()["id"]
    if regex:
        allowed = await api.patch(
            f"/api/chats/{chat_id}", json={"settings": {"allow_regex_scripts": True}}
        )
        assert allowed.status_code == 200, allowed.text
    return chat_id


@asynccontextmanager
async def subscribed(server: Any, chat_id: str) -> AsyncIterator[ClientConnection]:
    async with websockets.connect(server.ws_url) as ws:
        json.loads(await ws.recv())
        await ws.send(json.dumps({"type": "chat:subscribe", "conversationId": chat_id}))
        yield ws


async def turn(api: httpx.AsyncClient, server: Any, chat_id: str, text: str) -> Json:
    """Send ``text``, wait for the reply to finish; the finished reply's view."""
    async with subscribed(server, chat_id) as ws:
        version = (await api.get(f"/api/chats/{chat_id}")).json()["conversation"]["version"]
        sent = await api.post(
            f"/api/chats/{chat_id}/messages", json={"text": text, "expected_version": version}
        )
        assert sent.status_code == 202, sent.text
        while True:
            event = json.loads(await asyncio.wait_for(ws.recv(), timeout=TIMEOUT_S))
            if event["type"] == "chat:done":
                break
    view = (await api.get(f"/api/chats/{chat_id}")).json()
    reply: Json = view["messages"][-1]
    assert reply["role"] == "assistant" and reply["status"] == "complete", reply
    return reply


async def stat_data(api: httpx.AsyncClient, chat_id: str, message_id: str) -> Json:
    answer = await api.get(f"/api/chats/{chat_id}/messages/{message_id}/state")
    assert answer.status_code == 200, answer.text
    data: Json = answer.json()["state"]["variables"]["stat_data"]
    return data


def prompt_text(request: Any) -> str:
    return "\n".join(str(m.get("content")) for m in request["messages"])


def update(*ops: Json) -> str:
    return (
        "<UpdateVariable><JSONPatch>"
        + json.dumps(ops, ensure_ascii=False)
        + ("</JSONPatch></UpdateVariable>")
    )


async def test_the_model_sees_the_current_stat_data_as_yaml_after_an_update(
    api: httpx.AsyncClient, server: Any, llm: ReplayLLMServer
) -> None:
    chat_id = await new_chat(api, await import_card(api, mvu_card()))
    llm.script(
        Reply(text="她笑了。" + update({"op": "replace", "path": "/理/好感度", "value": 25})),
        Reply(text="她点头。"),
    )
    first = await turn(api, server, chat_id, "你好")
    assert (await stat_data(api, chat_id, first["id"]))["理"]["好感度"] == [25, "她对你的好感"]
    await turn(api, server, chat_id, "今天天气如何？")
    sent = prompt_text(llm.chat_requests[-1])
    # the schema's prefault filled 天气 in the starting state; $meta is never shown
    assert "<status_current_variable>\n理:\n  好感度:\n    - 25\n" in sent
    assert "  地点: 教堂\n世界:\n  天数: 1\n  天气: 晴\n</status_current_variable>" in sent
    assert "$meta" not in sent and "extensible" not in sent
    assert "StatusPlaceHolderImpl" not in prompt_text(llm.chat_requests[0])


async def test_a_value_pair_keeps_its_description_and_meta_and_schema_refuse_with_warnings(
    api: httpx.AsyncClient, server: Any, llm: ReplayLLMServer
) -> None:
    chat_id = await new_chat(api, await import_card(api, mvu_card()))
    llm.script(
        Reply(
            text="她想了想。<UpdateVariable>_.set('理.好感度', 19, 30);"
            "_.set('理.心情', '平静', '开心');"
            + update(
                {"op": "delta", "path": "/理/好感度", "value": 5},
                {"op": "add", "path": "/理/秘密", "value": "x"},
                {"op": "remove", "path": "/理/地点"},
                {"op": "replace", "path": "/世界/天数", "value": "2"},
                {"op": "replace", "path": "/世界/天气", "value": "雪"},
                {"op": "remove", "path": "/理/$meta"},
            )
            + "</UpdateVariable>"
        )
    )
    reply = await turn(api, server, chat_id, "你好")
    data = await stat_data(api, chat_id, reply["id"])
    assert data["理"]["好感度"] == [35, "她对你的好感"]
    assert data["理"]["心情"] == ["开心", "她此刻的心情"]
    # the card registers a Zod schema, so the schema decides the structure, as in MVU's
    # Zod mode: 理 is passthrough (秘密 is taken), 地点 is required by the schema
    assert data["理"]["地点"] == "教堂" and data["理"]["秘密"] == "x"
    assert data["世界"] == {"天数": 2, "天气": "晴"}  # "2" coerced; 雪 is not in the enum
    warnings = reply["extra"]["mvu_warnings"]
    assert [(w["kind"], w["path"]) for w in warnings] == [
        ("schema", "理"),
        ("schema", "世界.天气"),
        ("meta", "理.$meta"),
    ]
    assert warnings[0]["rule"] == "required"
    assert warnings[1]["rule"] == "enum" and warnings[1]["expected"] == ["晴", "雨"]
    assert not any("MVU" in p for p in reply["extra"]["problems"])


async def test_the_status_placeholder_is_replaced_by_the_bar_or_removed(
    api: httpx.AsyncClient, server: Any, llm: ReplayLLMServer
) -> None:
    with_bar = await new_chat(api, await import_card(api, mvu_card()))
    llm.script(
        Reply(
            text="她笑了。<StatusPlaceHolderImpl/>"
            + update({"op": "replace", "path": "/理/好感度", "value": 40})
        )
    )
    reply = await turn(api, server, with_bar, "你好")
    assert reply["display"] == "她笑了。<div class=bar>好感度 40</div>"
    view = (await api.get(f"/api/chats/{with_bar}")).json()
    assert view["mvu"] is True  # the page offers MVU's actions
    assert view["messages"][0]["display"] == "你来了。<div class=bar>好感度 19</div>"

    card = mvu_card(status_bar=False)
    card["data"]["name"] = "理二"
    without = await new_chat(api, await import_card(api, card), regex=False)
    view = (await api.get(f"/api/chats/{without}")).json()
    assert view["messages"][0]["content"] == "你来了。<StatusPlaceHolderImpl/>"
    assert view["messages"][0]["display"] == "你来了。"


async def test_tavern_helper_scopes_read_the_card_and_the_user_s_globals(
    api: httpx.AsyncClient, server: Any, llm: ReplayLLMServer
) -> None:
    card = mvu_card()
    card["data"]["character_book"]["entries"].append(
        {
            "id": 3,
            "comment": "scopes",
            "constant": True,
            "enabled": True,
            "keys": [],
            "content": "称号={{get_character_variable::角色.称号}} "
            "好感={{get_chat_variable::stat_data.理.好感度.0}} "
            "预设=[{{get_preset_variable::x}}] 全局={{get_global_variable::missing}}",
        }
    )
    chat_id = await new_chat(api, await import_card(api, card))
    llm.script(Reply(text="嗯。"))
    await turn(api, server, chat_id, "你好")
    sent = prompt_text(llm.chat_requests[-1])
    assert "称号=修女 好感=19 预设=[null] 全局=null" in sent


async def post(api: httpx.AsyncClient, path: str, body: Json | None = None) -> Json:
    answer = await api.post(path, json=body or {})
    assert answer.status_code == 200, answer.text
    data: Json = answer.json()
    return data


def plus(n: int) -> Reply:
    return Reply(text=f"好感 +{n}。" + update({"op": "delta", "path": "/理/好感度", "value": n}))


async def test_reinitialise_then_reparse_a_reply_through_the_routes(
    api: httpx.AsyncClient, server: Any, llm: ReplayLLMServer
) -> None:
    chat_id = await new_chat(api, await import_card(api, mvu_card()))
    llm.script(plus(6))
    reply = await turn(api, server, chat_id, "你好")
    assert (await stat_data(api, chat_id, reply["id"]))["理"]["好感度"] == [25, "她对你的好感"]

    before = (await api.get(f"/api/chats/{chat_id}")).json()["conversation"]["version"]
    reset = await post(api, f"/api/chats/{chat_id}/mvu/reinitialise")
    assert reset["version"] > before
    data = await stat_data(api, chat_id, reply["id"])
    assert data["理"]["好感度"] == [19, "她对你的好感"] and data["世界"]["天气"] == "晴"

    await post(api, f"/api/chats/{chat_id}/messages/{reply['id']}/mvu/reparse")
    assert (await stat_data(api, chat_id, reply["id"]))["理"]["好感度"] == [25, "她对你的好感"]

    user = (await api.get(f"/api/chats/{chat_id}")).json()["messages"][-2]
    refused = await api.post(f"/api/chats/{chat_id}/messages/{user['id']}/mvu/reparse")
    assert refused.status_code == 422 and "only a reply" in refused.text


async def test_replay_carries_the_updates_from_a_message_to_the_pointer(
    api: httpx.AsyncClient, server: Any, llm: ReplayLLMServer
) -> None:
    chat_id = await new_chat(api, await import_card(api, mvu_card()))
    llm.script(plus(6), plus(5))
    first = await turn(api, server, chat_id, "一")
    second = await turn(api, server, chat_id, "二")
    assert (await stat_data(api, chat_id, second["id"]))["理"]["好感度"][0] == 30
    await post(api, f"/api/chats/{chat_id}/mvu/reinitialise")  # the pointer: back to 19
    assert (await stat_data(api, chat_id, second["id"]))["理"]["好感度"][0] == 19

    await post(api, f"/api/chats/{chat_id}/messages/{first['id']}/mvu/replay")
    assert (await stat_data(api, chat_id, first["id"]))["理"]["好感度"][0] == 25
    assert (await stat_data(api, chat_id, second["id"]))["理"]["好感度"][0] == 30


async def test_snapshot_is_kept_when_old_variables_are_cleared(
    api: httpx.AsyncClient, server: Any, llm: ReplayLLMServer
) -> None:
    chat_id = await new_chat(api, await import_card(api, mvu_card()))
    llm.script(plus(1), plus(2), plus(3))
    first = await turn(api, server, chat_id, "一")
    await post(api, f"/api/chats/{chat_id}/mvu/snapshot")
    await turn(api, server, chat_id, "二")
    await turn(api, server, chat_id, "三")
    path = (await api.get(f"/api/chats/{chat_id}")).json()["messages"]
    assert [m["id"] for m in path][2] == first["id"] and path[2]["extra"]["mvu_snapshot"]
    last_before = await stat_data(api, chat_id, path[-1]["id"])

    cleared = await post(api, f"/api/chats/{chat_id}/mvu/clear-old", {"keep": 2})
    # greeting, 一, 二 and the reply to 二 go; the snapshot and the last two stay
    assert cleared["cleared"] == [path[i]["id"] for i in (0, 1, 3, 4)]
    assert await stat_data(api, chat_id, path[-1]["id"]) == last_before
    assert last_before["理"]["好感度"][0] == 25
    assert (await stat_data(api, chat_id, first["id"]))["理"]["好感度"][0] == 20
    gone = await api.get(f"/api/chats/{chat_id}/messages/{path[0]['id']}/state")
    assert gone.json()["state"]["variables"] == {}
    bad = await api.post(f"/api/chats/{chat_id}/mvu/clear-old", json={"keep": 0})
    assert bad.status_code == 422


def with_plot_entry(card: Json) -> Json:
    card["data"]["character_book"]["entries"].append(
        {
            "id": 4,
            "comment": "[mvu_plot]剧情推进",
            "constant": True,
            "enabled": True,
            "keys": [],
            "content": "PLOT: the bells ring at dusk.",
        }
    )
    return card


async def updater_chat(api: httpx.AsyncClient) -> str:
    chat_id = await new_chat(api, await import_card(api, with_plot_entry(mvu_card())))
    on = await api.patch(f"/api/chats/{chat_id}", json={"settings": {"mvu_updater": True}})
    assert on.status_code == 200, on.text
    return chat_id


async def test_the_separate_updater_asks_the_agent_model_for_the_update(
    api: httpx.AsyncClient, server: Any, llm: ReplayLLMServer
) -> None:
    chat_id = await updater_chat(api)
    llm.script(
        Reply(text="她笑了，钟声响起。"),
        Reply(text=update({"op": "replace", "path": "/理/好感度", "value": 40})),
    )
    reply = await turn(api, server, chat_id, "你好")
    main, updater = llm.chat_requests[-2:]
    assert "PLOT: the bells ring" in prompt_text(main)
    assert "RULES: update" not in prompt_text(main)
    asked = prompt_text(updater)
    assert "RULES: update" in asked and "PLOT:" not in asked
    assert "她笑了，钟声响起。" in asked and "好感度:\n    - 19\n" in asked
    assert reply["content"] == "她笑了，钟声响起。"
    assert (await stat_data(api, chat_id, reply["id"]))["理"]["好感度"] == [40, "她对你的好感"]


async def test_a_failed_updater_keeps_the_reply_and_warns(
    api: httpx.AsyncClient, server: Any, llm: ReplayLLMServer
) -> None:
    chat_id = await updater_chat(api)
    llm.script(Reply(text="她沉默。"), Reply(status=500, error_message="upstream down"))
    reply = await turn(api, server, chat_id, "你好")
    assert reply["content"] == "她沉默。"
    assert [w["kind"] for w in reply["extra"]["mvu_warnings"]] == ["updater"]
    assert (await stat_data(api, chat_id, reply["id"]))["理"]["好感度"] == [19, "她对你的好感"]


async def test_with_the_updater_off_both_kinds_of_entry_go_to_the_reply_s_prompt(
    api: httpx.AsyncClient, server: Any, llm: ReplayLLMServer
) -> None:
    chat_id = await new_chat(api, await import_card(api, with_plot_entry(mvu_card())))
    llm.script(Reply(text="嗯。"))
    await turn(api, server, chat_id, "你好")
    sent = prompt_text(llm.chat_requests[-1])
    assert "RULES: update" in sent and "PLOT: the bells ring" in sent
    assert len(llm.chat_requests) == 1


def card_without_schema() -> Json:
    """The card without its Zod schema script: MVU's own structure rules decide."""
    card = mvu_card()
    scripts = card["data"]["extensions"]["tavern_helper"]["scripts"]
    card["data"]["extensions"]["tavern_helper"]["scripts"] = [
        s for s in scripts if s["id"] != "zod"
    ]
    init = card["data"]["character_book"]["entries"][0]
    init["content"] = (
        INIT_VARS + "  物品: [$__META_EXTENSIBLE__$, 火把]\n  记忆: [初见]\n"
        "同伴:\n  $meta: {extensible: true}\n  甲: 1\n"
    )
    return card


async def test_mvu_commands_and_structure_rules_through_the_routes(
    api: httpx.AsyncClient, server: Any, llm: ReplayLLMServer
) -> None:
    chat_id = await new_chat(api, await import_card(api, card_without_schema()))
    llm.script(
        Reply(
            text="嗯。<UpdateVariable>"
            "_.set('理.好感度', 19, 19 + math.pow(2, 3));"  # math, on a value pair
            "_.set('理.心情', '开心 + 1');"  # quoted: text, never computed
            "_.add('世界.天数', 2 * 3);"
            "_.assign('世界.物品', '绳子');"
            "_.assign('世界', '季节', '春');"  # 世界 has no $meta: locked
            "_.assign('同伴', '乙', 2);"  # $meta opens it
            "_.remove('同伴', '甲');"
            "_.remove('理.地点');"  # required by $meta
            "_.set('理.不存在', 1);"  # a problem: _.set changes what is there
            "_.add('世界.天数', 1 / 0);"  # a problem: cannot be computed
            "</UpdateVariable>"
        )
    )
    reply = await turn(api, server, chat_id, "你好")
    data = await stat_data(api, chat_id, reply["id"])
    assert data["理"]["好感度"] == [27, "她对你的好感"]
    assert data["理"]["心情"] == ["开心 + 1", "她此刻的心情"]
    assert data["世界"]["天数"] == 7 and "季节" not in data["世界"]
    assert data["世界"]["物品"] == ["火把", "绳子"]  # the marker opened it, then left
    assert data["同伴"] == {"乙": 2}
    assert "$meta" not in json.dumps(data, ensure_ascii=False)
    assert "$__META_EXTENSIBLE__$" not in json.dumps(data, ensure_ascii=False)
    warnings = reply["extra"]["mvu_warnings"]
    assert [(w["kind"], w["path"]) for w in warnings] == [
        ("not_extensible", "世界.季节"),
        ("required", "理.地点"),
    ]
    problems = reply["extra"]["problems"]
    assert any("理.不存在 does not exist" in p for p in problems)
    assert any("division by zero" in p for p in problems)
