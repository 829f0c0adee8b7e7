"""``/api/tools`` through the real app: the registry, a call from the Tools page (the
user's own: ``ask`` counts as allowed, ``deny`` denies), the audit log, the global
policy, pending approvals answered over the WebSocket and HTTP, and the server hooks
plugins reach through the server (settings before save, chat after turn)."""

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
import yaml
from websockets.asyncio.client import ClientConnection

from storyloom.plugins import node_registry
from storyloom.testing.replay_server import ReplayLLMServer, Reply
from tests.server.conftest import LiveServer, chat_home

TIMEOUT_S = 30
Json = dict[str, Any]


def _call(client: httpx.Client, tool: str, **arguments: Any) -> httpx.Response:
    return client.post("/api/tools/call", json={"tool": tool, "arguments": arguments})


# -- the registry and calls ---------------------------------------------------------------


def test_every_tool_is_listed_with_its_schema_source_and_availability(
    client: httpx.Client,
) -> None:
    tools = {tool["id"]: tool for tool in client.get("/api/tools").json()}
    assert {"system:get_current_time", "kb:Query", "chat:RollDice"} <= set(tools)
    roll = tools["chat:RollDice"]
    assert roll["implementation"] == "service"
    assert roll["source"] == "builtin"
    assert roll["available"] is True and roll["unavailableReason"] is None
    assert roll["parameters"]["type"] == "object"
    assert roll["displayName"] and roll["description"]
    assert roll["configSchema"] == []


def test_a_call_from_the_tools_page_runs_and_is_audited_as_the_users(
    client: httpx.Client,
) -> None:
    response = _call(client, "system:get_current_time")
    assert response.status_code == 200
    result = response.json()
    # The default policy asks; the person calling is the approval.
    assert result["decision"] == "allowed" and result["ok"] is True
    assert "iso" in result["result"]
    page = client.get("/api/tools/audit").json()
    assert page["total"] == 1
    (entry,) = page["entries"]
    assert entry["id"] == result["auditId"]
    assert entry["caller"]["kind"] == "user"
    assert entry["tool"] == "system:get_current_time"
    assert entry["decision"] == "allowed" and entry["ok"] is True


def test_the_audit_log_pages_newest_first_and_filters_by_tool(client: httpx.Client) -> None:
    _call(client, "system:get_current_time")
    _call(client, "chat:RollDice", dice="1d6")
    _call(client, "system:get_current_time")
    page = client.get("/api/tools/audit", params={"limit": 2}).json()
    assert page["total"] == 3
    assert [e["tool"] for e in page["entries"]] == ["system:get_current_time", "chat:RollDice"]
    rest = client.get("/api/tools/audit", params={"limit": 2, "offset": 2}).json()
    assert len(rest["entries"]) == 1
    only = client.get("/api/tools/audit", params={"tool": "chat:RollDice"}).json()
    assert only["total"] == 1 and only["entries"][0]["tool"] == "chat:RollDice"
    assert client.get("/api/tools/audit", params={"limit": 0}).status_code == 422


def test_an_unknown_tool_is_404_and_bad_arguments_are_a_refused_call(
    client: httpx.Client,
) -> None:
    unknown = _call(client, "nope:missing")
    assert unknown.status_code == 404
    assert "nope:missing" in unknown.json()["error"]["message"]
    bad = _call(client, "chat:RollDice", dice=12, extra=True)
    assert bad.status_code == 200
    body = bad.json()
    assert body["decision"] == "invalid" and body["ok"] is False
    assert body["error"]
    assert client.post("/api/tools/call", json={"arguments": {}}).status_code == 422


def test_a_deny_rule_denies_the_users_call_and_the_policy_is_kept_in_settings(
    client: httpx.Client, live_server: LiveServer
) -> None:
    policy = {"rules": [{"tool": "system:*", "action": "deny"}], "default": "ask"}
    saved = client.put("/api/tools/policy", json=policy)
    assert saved.status_code == 200, saved.text
    assert saved.json() == policy
    assert client.get("/api/tools/policy").json() == policy
    on_disk = json.loads((live_server.home / "settings.json").read_text())
    assert on_disk["tool_policy"] == policy
    denied = _call(client, "system:get_current_time")
    assert denied.status_code == 200
    assert denied.json()["decision"] == "denied" and denied.json()["ok"] is False
    assert client.get("/api/tools/audit").json()["entries"][0]["decision"] == "denied"


def test_an_invalid_policy_is_422_and_keeps_the_old_one(
    client: httpx.Client, live_server: LiveServer
) -> None:
    bad = {"rules": [{"tool": "", "action": "maybe"}], "default": "sometimes"}
    response = client.put("/api/tools/policy", json=bad)
    assert response.status_code == 422
    fields = {p["field"] for p in response.json()["error"]["problems"]}
    assert {"rules[0].tool", "rules[0].action", "default"} <= fields
    assert client.get("/api/tools/policy").json() == {"rules": [], "default": "ask"}
    assert not (live_server.home / "settings.json").exists()


def test_answering_an_approval_nobody_waits_for_is_404(client: httpx.Client) -> None:
    assert client.get("/api/tools/approvals").json() == []
    response = client.post("/api/tools/approvals/nothing", json={"decision": "allow_once"})
    assert response.status_code == 404
    assert client.post("/api/tools/approvals/x", json={"decision": "perhaps"}).status_code == 422


# -- approvals of an agent's calls, over the WebSocket ----------------------------------------


PROFILE: Json = {
    "id": "clock",
    "name": "Clock",
    "tool_ids_inventory": ["system:get_current_time"],
    "prompt": "Tell the time.\n{{{system:available_tools}}}",
    "protocol": "tam",
    "policy": {"rules": [{"tool": "system:*", "action": "ask"}], "default": "allow"},
}

TAM_TIME = "<|[REQUEST_TOOL]|>\ncommand:「始」system:get_current_time「末」\n<|[END_TOOL]|>"


def _agent_workflow() -> Json:
    def edge(source: str, target: str) -> dict[str, str]:
        s_node, s_slot = source.split(".")
        t_node, t_slot = target.split(".")
        return {"source": s_node, "sourceSlot": s_slot, "target": t_node, "targetSlot": t_slot}

    return {
        "id": "ask-clock",
        "nodes": [
            {"id": "in", "type": "core:GroupInput"},
            {"id": "agent", "type": "agent:Run", "config": {"profile": "clock"}},
            {"id": "out", "type": "core:GroupOutput"},
        ],
        "edges": [edge("in.prompt", "agent.prompt"), edge("agent.text", "out.text")],
        "interfaceInputs": {"prompt": {"dataFlowType": "STRING", "required": True}},
        "interfaceOutputs": {"text": {"dataFlowType": "STRING"}},
    }


@pytest.fixture
def agent_server(tmp_path: Path, llm: ReplayLLMServer, start_server: Callable[..., Any]) -> Any:
    home = chat_home(tmp_path / "home", llm)
    live = start_server(home, node_registry=node_registry(entry_points=False))
    with httpx.Client(base_url=live.url, timeout=TIMEOUT_S) as client:
        assert client.post("/api/agents", json=PROFILE).status_code == 201
        saved = client.put("/api/workflows/ask-clock", json=_agent_workflow())
        assert saved.status_code == 200, saved.text
    return live


@asynccontextmanager
async def _socket(live: LiveServer) -> AsyncIterator[ClientConnection]:
    async with websockets.connect(live.ws_url) as ws:
        assert json.loads(await ws.recv())["type"] == "status"
        yield ws


async def _until(ws: ClientConnection, *types: str) -> Json:
    while True:
        message: Json = json.loads(await asyncio.wait_for(ws.recv(), timeout=TIMEOUT_S))
        if message["type"] in types:
            return message


async def _run_until_approval(ws: ClientConnection) -> Json:
    await ws.send(
        json.dumps({"type": "workflow:run", "workflowId": "ask-clock", "inputs": {"prompt": "?"}})
    )
    accepted = await _until(ws, "workflow:run-accepted", "workflow:invalid")
    assert accepted["type"] == "workflow:run-accepted", accepted
    needed = await _until(ws, "tool:approval-needed", "workflow:completed", "workflow:error")
    assert needed["type"] == "tool:approval-needed", needed
    approval: Json = needed["approval"]
    # The run (and the agent node in it) that waits.
    assert approval["runId"].startswith(accepted["runId"])
    return approval


async def test_an_ask_is_published_and_answered_over_the_websocket(
    agent_server: LiveServer, llm: ReplayLLMServer
) -> None:
    llm.script(Reply(text=TAM_TIME), Reply(text="It is time."))
    async with (
        _socket(agent_server) as ws,
        httpx.AsyncClient(base_url=agent_server.url, timeout=TIMEOUT_S) as api,
    ):
        approval = await _run_until_approval(ws)
        assert approval["tool"] == "system:get_current_time"
        assert approval["caller"]["kind"] == "agent"
        pending = (await api.get("/api/tools/approvals")).json()
        assert [p["id"] for p in pending] == [approval["id"]]
        await ws.send(
            json.dumps({"type": "tool:approval", "id": approval["id"], "decision": "allow_once"})
        )
        resolved = await _until(ws, "tool:approval-resolved")
        assert resolved == {
            "type": "tool:approval-resolved",
            "id": approval["id"],
            "decision": "allow_once",
        }
        done = await _until(ws, "workflow:completed", "workflow:error")
        assert done["type"] == "workflow:completed", done
        assert (await api.get("/api/tools/approvals")).json() == []
        audit = (await api.get("/api/tools/audit")).json()["entries"][0]
        assert audit["decision"] == "approved" and audit["ok"] is True
        # The same approval answered again: this message's error, the socket stays open.
        await ws.send(
            json.dumps({"type": "tool:approval", "id": approval["id"], "decision": "deny"})
        )
        error = await _until(ws, "status")
        assert error["status"] == "error" and approval["id"] in error["message"]


async def test_a_deny_answered_over_http_refuses_the_agents_call(
    agent_server: LiveServer, llm: ReplayLLMServer
) -> None:
    llm.script(Reply(text=TAM_TIME), Reply(text="I could not tell."))
    async with (
        _socket(agent_server) as ws,
        httpx.AsyncClient(base_url=agent_server.url, timeout=TIMEOUT_S) as api,
    ):
        approval = await _run_until_approval(ws)
        answered = await api.post(
            f"/api/tools/approvals/{approval['id']}", json={"decision": "deny"}
        )
        assert answered.status_code == 204
        resolved = await _until(ws, "tool:approval-resolved")
        assert resolved["decision"] == "deny"
        await _until(ws, "workflow:completed", "workflow:error")
        audit = (await api.get("/api/tools/audit")).json()["entries"][0]
        assert audit["decision"] == "denied" and audit["ok"] is False


# -- server hooks of plugins ------------------------------------------------------------------


SETTINGS_HOOK = """
from storyloom.core.errors import FieldProblem, InvalidInput
from storyloom.core.plugin_markers import hookimpl

@hookimpl
def storyloom_settings_before_save(settings):
    assert "api_key" not in str(settings)
    if settings["user_llm"].get("model") == "forbidden":
        raise InvalidInput.of("settings", [FieldProblem("user_llm.model", "not this one")])

@hookimpl
def storyloom_chat_after_turn(conversation_id, message):
    pass
"""

AFTER_TURN_HOOK = """
import json
from pathlib import Path
from storyloom.core.plugin_markers import hookimpl

@hookimpl
def storyloom_chat_after_turn(conversation_id, message):
    out = Path(__file__).parent.parent / "turns.jsonl"
    with out.open("a") as f:
        f.write(json.dumps({"conversation": conversation_id, "content": message["content"],
                            "role": message["role"]}) + "\\n")
"""


def _hook_plugin(home: Path, name: str, hooks: list[str], code: str) -> Path:
    root = home / "plugins" / name
    (root / "nodes").mkdir(parents=True)
    manifest = {"name": name, "version": "1", "permissions": {"hooks": hooks}}
    (root / "plugin.yaml").write_text(yaml.safe_dump(manifest))
    (root / "nodes" / "hooks.py").write_text(code)
    return root


def test_a_settings_hook_refuses_a_save_with_its_reasons_and_nothing_is_written(
    client: httpx.Client, live_server: LiveServer
) -> None:
    _hook_plugin(live_server.home, "guard", ["hook:server:settings:before-save"], SETTINGS_HOOK)
    assert client.post("/api/plugins/guard/enable", json={"acceptRisk": "high"}).status_code == 200
    before = (live_server.home / "settings.json").read_text()
    update = {"user_llm": {"base_url": "http://127.0.0.1:9/v1", "model": "forbidden",
                           "api_key": "sk-hidden"}}  # fmt: skip
    refused = client.put("/api/settings", json=update)
    assert refused.status_code == 422
    assert refused.json()["error"]["problems"] == [
        {"field": "user_llm.model", "reason": "not this one"}
    ]
    assert (live_server.home / "settings.json").read_text() == before
    update["user_llm"]["model"] = "fine"
    assert client.put("/api/settings", json=update).status_code == 200
    # The hook it did not declare was not registered, and says so.
    problems = client.get("/api/plugins/installed").json()["problems"]
    assert any("storyloom_chat_after_turn" in p["reason"] for p in problems)


def test_a_settings_hook_that_crashes_refuses_the_save(
    client: httpx.Client, live_server: LiveServer
) -> None:
    code = "from storyloom.core.plugin_markers import hookimpl\n\n@hookimpl\n" \
        "def storyloom_settings_before_save(settings):\n    raise KeyError('oops')\n"  # fmt: skip
    _hook_plugin(live_server.home, "crash", ["hook:server:settings:before-save"], code)
    client.post("/api/plugins/crash/enable", json={"acceptRisk": "high"})
    before = (live_server.home / "settings.json").read_text()
    response = client.put("/api/tools/policy", json={"rules": [], "default": "deny"})
    assert response.status_code == 400
    assert "KeyError" in response.json()["error"]["message"]
    assert (live_server.home / "settings.json").read_text() == before


async def test_the_after_turn_hook_hears_each_finished_chat_turn(
    tmp_path: Path, llm: ReplayLLMServer, start_server: Callable[..., Any]
) -> None:
    card = {"name": "Maren", "description": "A keeper.", "first_mes": "Welcome."}
    home = chat_home(tmp_path / "home", llm, {"maren": card})
    root = _hook_plugin(home, "echo", ["hook:server:chat:after-turn"], AFTER_TURN_HOOK)
    live = start_server(home, node_registry=node_registry(entry_points=False))
    llm.script(Reply(text="The lamp is lit."))
    async with httpx.AsyncClient(base_url=live.url, timeout=TIMEOUT_S) as api:
        assert (
            await api.post("/api/plugins/echo/enable", json={"acceptRisk": "high"})
        ).status_code == 200
        created = (await api.post("/api/chats", json={"character_id": "maren"})).json()
        async with _socket(live) as ws:
            await ws.send(json.dumps({"type": "chat:subscribe", "conversationId": created["id"]}))
            version = (await api.get(f"/api/chats/{created['id']}")).json()["conversation"][
                "version"
            ]
            sent = await api.post(
                f"/api/chats/{created['id']}/messages",
                json={"text": "Light it.", "expected_version": version},
            )
            assert sent.status_code == 202, sent.text
            await _until(ws, "chat:done")
    lines = [json.loads(line) for line in (root / "turns.jsonl").read_text().splitlines()]
    assert lines == [
        {"conversation": created["id"], "content": "The lamp is lit.", "role": "assistant"}
    ]
