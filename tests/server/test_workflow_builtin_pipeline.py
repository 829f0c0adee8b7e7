"""The built-in chat pipeline in the workflow library of a real server, and SillyTavern
chat-completion presets imported as pipeline workflows that a conversation then runs.

The preset is written by hand in the shape of SillyTavern's
``default/content/presets/openai/Default.json`` (prompts with markers, the global prompt
order under character 100001, sampling and format fields).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets
from websockets.asyncio.client import ClientConnection

from storyloom.chat.prompt.default_pipeline import default_pipeline, pipeline_for
from storyloom.chat.store.conversation import CharacterSnapshot, ConversationSettings
from storyloom.chat.store.snapshot import ContextSnapshot, HistoryMessage
from storyloom.chat.store.state import ChatState
from storyloom.plugins import node_registry
from storyloom.project.project_file import init_project
from storyloom.testing.replay_server import ReplayLLMServer, Reply
from storyloom.workflow.node_registry import NodeRegistry
from storyloom.workflow.workflow_file import Workflow

TIMEOUT_S = 30
Json = dict[str, Any]
CARD: Json = {"name": "Mara", "description": "An innkeeper.", "first_mes": "Come in."}


def chat_registry() -> NodeRegistry:
    return node_registry(entry_points=False)


def st_preset(temperature: Any = 0.65) -> Json:
    return {
        "chat_completion_source": "openai",
        "openai_model": "gpt-4o",
        "temperature": temperature,
        "frequency_penalty": 0,
        "presence_penalty": 0,
        "top_p": 0.9,
        "openai_max_context": 8000,
        "openai_max_tokens": 300,
        "names_behavior": 0,
        "send_if_empty": "",
        "wi_format": "{0}",
        "squash_system_messages": False,
        "stream_openai": True,
        "prompts": [
            {
                "name": "Main Prompt",
                "system_prompt": True,
                "role": "system",
                "content": "Storm house rules: {{char}} answers in one line.",
                "identifier": "main",
            },
            {
                "identifier": "charDescription",
                "name": "Char Description",
                "system_prompt": True,
                "marker": True,
            },
            {
                "identifier": "chatHistory",
                "name": "Chat History",
                "system_prompt": True,
                "marker": True,
            },
        ],
        "prompt_order": [
            {"character_id": 100000, "order": [{"identifier": "main", "enabled": True}]},
            {
                "character_id": 100001,
                "order": [
                    {"identifier": "main", "enabled": True},
                    {"identifier": "charDescription", "enabled": True},
                    {"identifier": "chatHistory", "enabled": True},
                ],
            },
        ],
    }


@pytest.fixture
def llm() -> Iterator[ReplayLLMServer]:
    with ReplayLLMServer(models=["test-model"]) as server:
        yield server


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "home" / "projects" / "default"
    init_project(folder)
    characters = folder / "presets" / "characters"
    characters.mkdir(parents=True)
    (characters / "mara.json").write_text(json.dumps(CARD))
    return folder


@pytest.fixture
def server(
    tmp_path: Path, project: Path, llm: ReplayLLMServer, start_server: Callable[..., Any]
) -> Any:
    home = tmp_path / "home"
    endpoint = {"base_url": llm.url, "model": "test-model", "max_retries": 0, "api_key": "sk-x"}
    (home / "settings.json").write_text(json.dumps({"user_llm": endpoint}))
    return start_server(home, node_registry=chat_registry())


@pytest.fixture
async def api(server: Any) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server.url, timeout=TIMEOUT_S) as client:
        yield client


@asynccontextmanager
async def socket(server: Any) -> AsyncIterator[ClientConnection]:
    async with websockets.connect(server.ws_url) as ws:
        hello = json.loads(await ws.recv())
        assert hello["type"] == "status"
        yield ws


async def receive_until(ws: ClientConnection, done: Callable[[Json], bool]) -> list[Json]:
    seen: list[Json] = []
    while True:
        message = json.loads(await asyncio.wait_for(ws.recv(), timeout=TIMEOUT_S))
        seen.append(message)
        if done(message):
            return seen


async def listing(api: httpx.AsyncClient) -> dict[str, Json]:
    response = await api.get("/api/workflows")
    assert response.status_code == 200, response.text
    return {entry["id"]: entry for entry in response.json()["workflows"]}


def builtin_json() -> Json:
    return default_pipeline().to_json()


def as_file(workflow: Json) -> Json:
    """A workflow as its file holds it (the API also answers the fields left at None)."""
    return Workflow.model_validate(workflow).to_json()


def with_temperature(workflow: Json, temperature: float) -> Json:
    changed: Json = json.loads(json.dumps(workflow))
    [invoker] = [n for n in changed["nodes"] if n["type"] == "chat:LLMInvoker"]
    invoker.setdefault("config", {})["temperature"] = temperature
    return changed


async def chat_turn(
    api: httpx.AsyncClient, server: Any, llm: ReplayLLMServer, pipeline: str | None = None
) -> Json:
    """A new chat with Mara (on ``pipeline`` when given) and one turn; the LLM request."""
    created = await api.post("/api/chats", json={"character_id": "mara"})
    assert created.status_code == 201, created.text
    conversation = created.json()
    cid, version = conversation["id"], conversation["version"]
    if pipeline is not None:
        patched = await api.patch(
            f"/api/chats/{cid}",
            json={"expected_version": version, "settings": {"pipeline": pipeline}},
        )
        assert patched.status_code == 200, patched.text
        assert patched.json()["settings"]["pipeline"] == pipeline
        version = patched.json()["version"]
    llm.script(Reply(text="Sit by the fire."))
    before = len(llm.chat_requests)
    async with socket(server) as ws:
        await ws.send(json.dumps({"type": "chat:subscribe", "conversationId": cid}))
        sent = await api.post(
            f"/api/chats/{cid}/messages", json={"text": "Any rooms?", "expected_version": version}
        )
        assert sent.status_code == 202, sent.text
        events = await receive_until(ws, lambda m: m["type"] == "chat:done")
    assert events[-1]["status"] == "complete", events[-1]
    assert len(llm.chat_requests) == before + 1
    request: Json = dict(llm.chat_requests[-1])
    return request


# -- the built-in pipeline in the library --------------------------------------------------------


async def test_the_builtin_chat_pipeline_is_listed_loaded_and_validates(
    api: httpx.AsyncClient, project: Path
) -> None:
    entries = await listing(api)
    assert entries["chat-default"] == {
        "id": "chat-default",
        "name": "Chat (default)",
        "description": default_pipeline().description,
        "nodeCount": len(default_pipeline().nodes),
        "builtin": True,
    }
    loaded = await api.get("/api/workflows/chat-default")
    assert loaded.status_code == 200, loaded.text
    assert as_file(loaded.json()) == builtin_json()
    assert not (project / "workflows" / "chat-default.json").exists()
    checked = await api.post("/api/workflows/validate", json=loaded.json())
    assert checked.status_code == 200, checked.text
    assert checked.json()["problems"] == []


async def test_saving_the_builtin_writes_the_projects_copy_which_the_chat_then_runs(
    api: httpx.AsyncClient, server: Any, llm: ReplayLLMServer, project: Path
) -> None:
    mine = with_temperature(builtin_json(), 0.25)
    saved = await api.put("/api/workflows/chat-default", json=mine)
    assert saved.status_code == 200, saved.text
    assert saved.json()["problems"] == []
    copy = project / "workflows" / "chat-default.json"
    assert json.loads(copy.read_text(encoding="utf-8")) == mine
    assert (await listing(api))["chat-default"]["builtin"] is False
    assert as_file((await api.get("/api/workflows/chat-default")).json()) == mine
    assert pipeline_for(project, "chat-default").to_json() == mine
    request = await chat_turn(api, server, llm)
    assert request["temperature"] == 0.25


async def test_deleting_the_copy_brings_the_builtin_back_and_the_builtin_stays(
    api: httpx.AsyncClient, server: Any, llm: ReplayLLMServer, project: Path
) -> None:
    saved = await api.put(
        "/api/workflows/chat-default", json=with_temperature(builtin_json(), 0.25)
    )
    assert saved.status_code == 200, saved.text
    deleted = await api.delete("/api/workflows/chat-default")
    assert deleted.status_code == 204, deleted.text
    assert not (project / "workflows" / "chat-default.json").exists()
    assert (await listing(api))["chat-default"]["builtin"] is True
    assert as_file((await api.get("/api/workflows/chat-default")).json()) == builtin_json()
    request = await chat_turn(api, server, llm)
    assert request.get("temperature") != 0.25
    refused = await api.delete("/api/workflows/chat-default")
    assert refused.status_code == 409
    message = refused.json()["error"]["message"]
    assert "chat-default" in message and "built in" in message and "duplicate" in message
    assert (await listing(api))["chat-default"]["builtin"] is True


async def test_a_copy_under_a_new_id_is_the_projects_own_and_a_chat_runs_it(
    api: httpx.AsyncClient, server: Any, llm: ReplayLLMServer, project: Path
) -> None:
    copy = {**with_temperature(builtin_json(), 0.4), "id": "my-chat", "name": "My chat"}
    saved = await api.put("/api/workflows/my-chat", json=copy)
    assert saved.status_code == 200, saved.text
    assert saved.json()["problems"] == []
    entries = await listing(api)
    assert entries["my-chat"]["builtin"] is False
    assert entries["chat-default"]["builtin"] is True
    assert not (project / "workflows" / "chat-default.json").exists()
    request = await chat_turn(api, server, llm, pipeline="my-chat")
    assert request["temperature"] == 0.4
    # The copy is the project's to delete; the built-in it came from stays.
    assert (await api.delete("/api/workflows/my-chat")).status_code == 204
    assert (await api.delete("/api/workflows/chat-default")).status_code == 409
    assert "my-chat" not in await listing(api)


async def test_a_broken_copy_is_listed_as_broken_instead_of_the_builtin(
    api: httpx.AsyncClient, project: Path
) -> None:
    (project / "workflows").mkdir(exist_ok=True)
    (project / "workflows" / "chat-default.json").write_text("{", "utf-8")
    response = await api.get("/api/workflows")
    assert response.status_code == 200, response.text
    body = response.json()
    assert "chat-default" not in [w["id"] for w in body["workflows"]]
    assert [Path(b["file"]).name for b in body["broken"]] == ["chat-default.json"]
    assert (await api.get("/api/workflows/chat-default")).status_code == 422


async def test_the_builtin_is_listed_loaded_and_run_over_the_socket(
    server: Any, llm: ReplayLLMServer
) -> None:
    snapshot = ContextSnapshot(
        conversation_id="c",
        pointer="m1",
        history=[HistoryMessage(id="m1", role="user", content="Any rooms?")],
        state=ChatState(),
        character=CharacterSnapshot(card=CARD),
        settings=ConversationSettings(user_name="Finn"),
    )
    llm.script(Reply(text="<thought>full</thought>One room left."))
    async with socket(server) as ws:
        await ws.send(json.dumps({"type": "workflow:list"}))
        listed = (await receive_until(ws, lambda m: m["type"] == "workflow:list"))[-1]
        assert "chat-default" in [w["id"] for w in listed["workflows"]]
        await ws.send(json.dumps({"type": "workflow:load", "workflowId": "chat-default"}))
        data = (await receive_until(ws, lambda m: m["type"] == "workflow:data"))[-1]
        assert as_file(data["workflow"]) == builtin_json() and data["problems"] == []
        run = {
            "type": "workflow:run",
            "workflowId": "chat-default",
            "inputs": {"snapshot": snapshot.model_dump(mode="json")},
        }
        await ws.send(json.dumps(run))
        events = await receive_until(
            ws, lambda m: m["type"] in ("workflow:completed", "workflow:error", "workflow:invalid")
        )
    assert events[-1]["type"] == "workflow:completed", events[-1]
    outputs = events[-1]["interfaceOutputs"]
    assert (outputs["reply"], outputs["thought"]) == ("One room left.", "full")
    assert llm.chat_requests[-1]["messages"][-1]["content"] == "Any rooms?"


# -- SillyTavern presets -----------------------------------------------------------------------


def files_of(folder: Path) -> list[Path]:
    return sorted(p.relative_to(folder) for p in folder.rglob("*"))


async def import_preset(
    api: httpx.AsyncClient, data: Any, file_name: str = "Storm House.json", **form: str
) -> httpx.Response:
    content = data if isinstance(data, bytes) else json.dumps(data).encode()
    return await api.post(
        "/api/workflows/import-st-preset",
        files={"file": (file_name, content, "application/json")},
        data=form,
    )


async def test_a_preset_imports_as_a_saved_pipeline_named_by_its_file(
    api: httpx.AsyncClient, project: Path
) -> None:
    response = await import_preset(api, st_preset())
    assert response.status_code == 201, response.text
    workflow = response.json()
    assert (workflow["id"], workflow["name"]) == ("st-storm-house", "Storm House")
    saved = project / "workflows" / "st-storm-house.json"
    assert json.loads(saved.read_text(encoding="utf-8")) == as_file(workflow)
    config = {node["id"]: node.get("config", {}) for node in workflow["nodes"]}
    assert config["invoker"]["temperature"] == 0.65
    assert [e["identifier"] for e in config["builder"]["prompt_order"]] == [
        "main",
        "charDescription",
        "chatHistory",
    ]
    entry = (await listing(api))["st-storm-house"]
    assert (entry["name"], entry["builtin"]) == ("Storm House", False)
    checked = await api.post("/api/workflows/validate", json=workflow)
    assert checked.json()["problems"] == []


async def test_an_import_takes_id_and_name_and_overwrites_only_when_asked(
    api: httpx.AsyncClient, project: Path
) -> None:
    made = await import_preset(api, st_preset(0.5), id="storm", name="Storm")
    assert made.status_code == 201, made.text
    assert (made.json()["id"], made.json()["name"]) == ("storm", "Storm")
    saved = project / "workflows" / "storm.json"
    before = saved.read_bytes()
    again = await import_preset(api, st_preset(1.5), id="storm")
    assert again.status_code == 409
    assert "'storm' already exists" in again.json()["error"]["message"]
    assert saved.read_bytes() == before
    # The built-in counts as taken too: replacing it is a choice.
    builtin = await import_preset(api, st_preset(1.5), id="chat-default")
    assert builtin.status_code == 409
    assert not (project / "workflows" / "chat-default.json").exists()
    replaced = await import_preset(api, st_preset(1.5), id="storm", overwrite="true")
    assert replaced.status_code == 201, replaced.text
    invoker = next(n for n in replaced.json()["nodes"] if n["id"] == "invoker")
    assert invoker["config"]["temperature"] == 1.5
    assert json.loads(saved.read_text(encoding="utf-8")) == as_file(replaced.json())


@pytest.mark.parametrize(
    ("content", "form", "field", "words"),
    [
        (json.dumps(st_preset("hot")).encode(), {}, "temperature", "valid number"),
        (b'{"prompts": [', {}, "", "not JSON"),
        (b"\xff\xfe", {}, "", "not UTF-8"),
        (json.dumps([1, 2]).encode(), {}, "", "JSON object"),
        (json.dumps(st_preset()).encode(), {"id": "schema"}, "id", "reserved"),
        (json.dumps(st_preset()).encode(), {"id": "../up"}, "id", "file name"),
    ],
    ids=["bad-field", "not-json", "not-utf8", "not-object", "reserved-id", "bad-id"],
)
async def test_a_bad_preset_is_refused_naming_file_and_field_and_nothing_is_written(
    api: httpx.AsyncClient,
    project: Path,
    content: bytes,
    form: dict[str, str],
    field: str,
    words: str,
) -> None:
    before = files_of(project)
    response = await import_preset(api, content, "Storm House.json", **form)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert "Storm House.json" in error["message"]
    assert words in error["message"]
    assert field in [p["field"] for p in error["problems"]]
    assert files_of(project) == before


async def test_a_conversation_on_the_imported_pipeline_runs_with_the_presets_sampling(
    api: httpx.AsyncClient, server: Any, llm: ReplayLLMServer
) -> None:
    imported = await import_preset(api, st_preset(0.65))
    assert imported.status_code == 201, imported.text
    request = await chat_turn(api, server, llm, pipeline=imported.json()["id"])
    assert request["temperature"] == 0.65
    assert request["max_tokens"] == 300
    system = " ".join(m["content"] for m in request["messages"] if m["role"] == "system")
    assert "Storm house rules: Mara answers in one line." in system
    assert request["messages"][-1]["content"] == "Any rooms?"
