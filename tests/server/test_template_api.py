"""Instruct and context templates over the REST API, and a chat turn on a text-completion
connection: the exact prompt the server got is what the prompt inspector shows."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from storyloom.plugins import node_registry
from storyloom.testing.replay_server import ReplayLLMServer, Reply
from tests.server.conftest import chat_home
from tests.server.test_chat_api import new_chat, turn

Json = dict[str, Any]

CARD: Json = {
    "name": "Maren",
    "description": "The keeper of the Lanternfall lighthouse.",
    "first_mes": "Welcome, {{user}}.",
}

# SillyTavern's own instruct/Alpaca.json of an older release: names/names_force_groups and
# separator_sequence are migrated on load; the file is stored as it came.
ST_ALPACA: Json = {
    "name": "Alpaca (mine)",
    "system_prompt": "Below is an instruction that describes a task.",
    "input_sequence": "### Instruction:",
    "output_sequence": "### Response:",
    "first_output_sequence": "",
    "last_output_sequence": "",
    "system_sequence_prefix": "",
    "system_sequence_suffix": "",
    "stop_sequence": "",
    "separator_sequence": "\n\n",
    "wrap": True,
    "macro": True,
    "names": False,
    "names_force_groups": True,
    "activation_regex": "",
}


@pytest.fixture
async def api(
    tmp_path: Path, llm: ReplayLLMServer, start_server: Callable[..., Any]
) -> AsyncIterator[httpx.AsyncClient]:
    server = start_server(chat_home(tmp_path / "home", llm, {"maren": CARD}))
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        yield client


async def test_templates_list_both_kinds_and_show_a_built_in_one(api: httpx.AsyncClient) -> None:
    listing = (await api.get("/api/templates")).json()
    instruct = {e["name"]: e["builtin"] for e in listing["instruct"]}
    context = {e["name"]: e["builtin"] for e in listing["context"]}
    assert instruct["ChatML"] and instruct["Llama 3 Instruct"]
    assert context["Default"]
    shown = (await api.get("/api/templates/instruct/ChatML")).json()
    assert shown["kind"] == "instruct" and shown["builtin"] is True
    assert shown["template"]["input_sequence"] == "<|im_start|>user"
    missing = await api.get("/api/templates/context/Nope")
    assert missing.status_code == 404
    assert "Nope" in missing.json()["error"]["message"]


async def test_a_sillytavern_instruct_file_imports_lists_saves_and_deletes(
    api: httpx.AsyncClient, tmp_path: Path
) -> None:
    body = json.dumps(ST_ALPACA).encode()
    imported = await api.post(
        "/api/templates/import", files={"file": ("Alpaca (mine).json", body, "application/json")}
    )
    assert imported.status_code == 201, imported.text
    assert imported.json() == {"kind": "instruct", "name": "Alpaca (mine)"}
    stored = tmp_path / "home" / "instruct" / "Alpaca (mine).json"
    assert json.loads(stored.read_text()) == ST_ALPACA
    names = [e["name"] for e in (await api.get("/api/templates")).json()["instruct"]]
    assert "Alpaca (mine)" in names
    shown = (await api.get("/api/templates/instruct/Alpaca (mine)")).json()
    # Read as SillyTavern reads it: the old separator is the output suffix now.
    assert shown["builtin"] is False and shown["template"]["output_suffix"] == "\n\n"

    changed = {**shown["template"], "stop_sequence": "### Instruction:"}
    saved = await api.put("/api/templates/instruct/Alpaca (mine)", json=changed)
    assert saved.status_code == 200, saved.text
    assert json.loads(stored.read_text())["stop_sequence"] == "### Instruction:"
    bad = await api.put("/api/templates/context/Mine", json={"story_string_position": 7})
    assert bad.status_code == 422
    assert bad.json()["error"]["problems"][0]["field"] == "story_string_position"

    assert (await api.delete("/api/templates/instruct/Alpaca (mine)")).status_code == 204
    assert not stored.exists()
    refused = await api.delete("/api/templates/instruct/ChatML")
    assert refused.status_code == 409


async def test_a_bad_template_file_is_refused_naming_file_and_field_and_nothing_is_written(
    api: httpx.AsyncClient, tmp_path: Path
) -> None:
    broken = {"name": "Broken", "story_string": "{{system}}", "story_string_position": "top"}
    response = await api.post(
        "/api/templates/import",
        files={"file": ("broken.json", json.dumps(broken).encode(), "application/json")},
    )
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["message"].startswith("broken.json: ")
    assert [p["field"] for p in error["problems"]] == ["story_string_position"]
    neither = await api.post(
        "/api/templates/import", files={"file": ("card.json", b'{"name": "Maren"}', "text/json")}
    )
    assert neither.status_code == 422
    assert "neither an instruct template" in neither.json()["error"]["message"]
    not_json = await api.post(
        "/api/templates/import", files={"file": ("x.json", b"{nope", "application/json")}
    )
    assert not_json.status_code == 422 and "not JSON" in not_json.json()["error"]["message"]
    home = tmp_path / "home"
    assert not (home / "context").exists() and not (home / "instruct").exists()


@pytest.fixture
def text_server(tmp_path: Path, llm: ReplayLLMServer, start_server: Callable[..., Any]) -> Any:
    home = chat_home(tmp_path / "home", llm, {"maren": CARD})
    settings = json.loads((home / "settings.json").read_text())
    settings["user_llm"].update(
        {"api": "llamacpp", "instruct_template": "Llama 3 Instruct", "context_template": ""}
    )
    (home / "settings.json").write_text(json.dumps(settings))
    return start_server(home, node_registry=node_registry(entry_points=False))


async def test_a_chat_turn_on_llamacpp_sends_the_formatted_prompt_and_the_inspector_shows_it(
    text_server: Any, llm: ReplayLLMServer
) -> None:
    async with httpx.AsyncClient(base_url=text_server.url, timeout=30) as api:
        created = await new_chat(api, user_name="Ilse")
        llm.script(Reply(text="<reply>The lamp is lit.</reply>", chunks=3))
        accepted, events = await turn(api, text_server, created["id"], "Is the lamp lit?")
        assert events[-1]["status"] == "complete", events
        reply_id = accepted["assistant_message"]["id"]
        (request,) = llm.completion_requests
        assert request.path == "/completion" and not llm.chat_requests
        sent = request["prompt"]
        assert sent.startswith("<|start_header_id|>system<|end_header_id|>\n\n")
        assert "<|start_header_id|>assistant<|end_header_id|>\n\nWelcome, Ilse.<|eot_id|>" in sent
        # The format guide (in-chat, depth 1) stands before the newest message.
        assert sent.endswith(
            "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nIs the lamp lit?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n"
        )
        assert "<|eot_id|>" in request["stop"] and "\nIlse:" in request["stop"]

        prompt = (await api.get(f"/api/chats/{created['id']}/messages/{reply_id}/prompt")).json()
        shown = prompt["text_prompt"]
        assert shown["text"] == sent
        assert shown["stop"] == request["stop"]
        assert (shown["instruct"], shown["context"]) == ("Llama 3 Instruct", "Llama 3 Instruct")
        by_source = {p["source"]: sent[p["start"] : p["end"]] for p in shown["pieces"]}
        assert by_source["Card: description"] == CARD["description"]
        user_id = accepted["user_message"]["id"]
        asked = [p for p in shown["pieces"] if p["block"] == f"msg:{user_id}"]
        assert [sent[p["start"] : p["end"]] for p in asked] == ["Is the lamp lit?"]
        assert "".join(sent[p["start"] : p["end"]] for p in shown["pieces"]) == sent
        view = (await api.get(f"/api/chats/{created['id']}")).json()
        assert view["messages"][-1]["content"] == "The lamp is lit."
