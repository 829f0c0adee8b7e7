"""``/api/workflows`` and ``/api/workflow-runs`` on a real server, the LLM a replay server."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from storyloom.testing.replay_server import ReplayLLMServer, Reply


@pytest.fixture
def llm() -> Iterator[ReplayLLMServer]:
    with ReplayLLMServer(models=["test-model"]) as server:
        yield server


@pytest.fixture
def home(tmp_path: Path, llm: ReplayLLMServer) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    settings = {"user_llm": {"base_url": llm.url, "model": "test-model"}}
    (home / "settings.json").write_text(json.dumps(settings))
    return home


@pytest.fixture
def api(home: Path, start_server: Callable[..., Any]) -> Iterator[httpx.Client]:
    live = start_server(home)
    with httpx.Client(base_url=live.url, timeout=30) as client:
        yield client


def workflows_dir(home: Path) -> Path:
    return home / "projects" / "default" / "workflows"


def chat_workflow(workflow_id: str = "story", prompt: str = "Begin") -> dict[str, Any]:
    return {
        "id": workflow_id,
        "name": "Story",
        "nodes": [
            {"id": "prompt", "type": "core:TextInput", "config": {"text": prompt}},
            {"id": "writer", "type": "llm:Chat", "position": {"x": 300, "y": 0}},
        ],
        "edges": [
            {"source": "prompt", "sourceSlot": "text", "target": "writer", "targetSlot": "prompt"}
        ],
    }


def wait_for_run(api: httpx.Client, run_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        run = api.get(f"/api/workflow-runs/{run_id}").json()
        if run["status"] != "running":
            return dict(run)
        time.sleep(0.05)
    raise AssertionError(f"run {run_id} did not finish")


def start_run(api: httpx.Client, workflow_id: str, **body: Any) -> str:
    response = api.post(f"/api/workflows/{workflow_id}/runs", json=body)
    assert response.status_code == 202, response.text
    assert response.json()["workflowId"] == workflow_id
    return str(response.json()["runId"])


# -- the library ----------------------------------------------------------------------------


def test_saved_workflow_loads_back_with_unknown_fields_lists_and_deletes(
    api: httpx.Client, home: Path
) -> None:
    workflow = chat_workflow()
    workflow["x-editor"] = {"zoom": 1.5}
    workflow["nodes"][1]["color"] = "#c33"
    saved = api.put("/api/workflows/story", json=workflow)
    assert saved.status_code == 200, saved.text
    assert saved.json()["problems"] == []
    assert (workflows_dir(home) / "story.json").is_file()

    loaded = api.get("/api/workflows/story").json()
    assert loaded["x-editor"] == {"zoom": 1.5}
    assert loaded["nodes"][1]["color"] == "#c33"
    assert loaded["nodes"][1]["position"] == {"x": 300, "y": 0}
    assert loaded["edges"][0]["targetSlot"] == "prompt"

    listing = api.get("/api/workflows").json()
    # The built-in chat pipeline is listed beside the project's own workflows.
    assert [w for w in listing["workflows"] if not w["builtin"]] == [
        {"id": "story", "name": "Story", "description": "", "nodeCount": 2, "builtin": False}
    ]
    assert listing["broken"] == []

    assert api.delete("/api/workflows/story").status_code == 204
    assert api.get("/api/workflows/story").status_code == 404
    assert api.delete("/api/workflows/story").status_code == 404
    assert [w["id"] for w in api.get("/api/workflows").json()["workflows"]] == ["chat-default"]


def test_a_half_built_graph_is_saved_with_its_problems(api: httpx.Client, home: Path) -> None:
    workflow = {"id": "draft", "nodes": [{"id": "writer", "type": "llm:Chat"}]}
    saved = api.put("/api/workflows/draft", json=workflow)
    assert saved.status_code == 200, saved.text
    problems = saved.json()["problems"]
    assert [(p["nodeId"], p["slot"], p["code"]) for p in problems] == [
        ("writer", "prompt", "missing-input")
    ]
    assert (workflows_dir(home) / "draft.json").is_file()


def test_put_refuses_an_id_other_than_the_urls_and_a_body_off_the_model(
    api: httpx.Client, home: Path
) -> None:
    other = api.put("/api/workflows/story", json=chat_workflow("tale"))
    assert other.status_code == 422
    assert [p["field"] for p in other.json()["error"]["problems"]] == ["id"]

    bad = chat_workflow()
    bad["nodes"][0].pop("type")
    bad["edges"][0].pop("sourceSlot")
    refused = api.put("/api/workflows/story", json=bad)
    assert refused.status_code == 422
    fields = {p["field"] for p in refused.json()["error"]["problems"]}
    assert fields == {"nodes[0].type", "edges[0].sourceSlot"}
    assert not (workflows_dir(home) / "story.json").exists()


def test_an_id_with_a_trailing_newline_is_refused_and_writes_nothing(
    api: httpx.Client, home: Path
) -> None:
    refused = api.put("/api/workflows/x%0A", json=chat_workflow("x\n"))
    assert refused.status_code == 422, refused.text
    assert [p["field"] for p in refused.json()["error"]["problems"]] == ["id"]
    assert api.get("/api/workflows/x%0A").status_code in (404, 422)
    assert not workflows_dir(home).exists() or list(workflows_dir(home).iterdir()) == []


def test_a_broken_file_is_listed_with_its_problems(api: httpx.Client, home: Path) -> None:
    folder = workflows_dir(home)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "torn.json").write_text('{"id": "torn", "nodes": [')
    (folder / "odd.json").write_text(json.dumps({"id": "odd", "nodes": [{"id": "a"}]}))
    api.put("/api/workflows/fine", json=chat_workflow("fine"))

    listing = api.get("/api/workflows").json()
    assert [w["id"] for w in listing["workflows"]] == ["chat-default", "fine"]
    broken = {Path(b["file"]).name: b["problems"] for b in listing["broken"]}
    assert set(broken) == {"torn.json", "odd.json"}
    assert broken["torn.json"][0]["reason"].startswith("not JSON")
    assert broken["odd.json"] == [{"field": "nodes[0].type", "reason": "Field required"}]

    opened = api.get("/api/workflows/odd")
    assert opened.status_code == 422
    assert opened.json()["error"]["problems"][0]["field"] == "nodes[0].type"


def test_node_types_are_sorted_by_category_and_the_schema_is_the_files(
    api: httpx.Client,
) -> None:
    types = api.get("/api/workflows/node-types").json()
    names = [t["type"] for t in types]
    assert {"core:TextInput", "llm:Chat"} <= set(names)
    keys = [(t["category"], t["displayName"]) for t in types]
    assert keys == sorted(keys)
    chat = next(t for t in types if t["type"] == "llm:Chat")
    assert chat["streaming"] is True
    assert [s["name"] for s in chat["outputs"]] == ["text", "messages"]
    config = chat["configSchema"]
    assert config["type"] == "object" and "$defs" not in config
    role = config["properties"]["role"]
    assert role["enum"] == ["user", "agent"] and role["default"] == "user"
    assert role["x-match-categories"] == ["ComboOption"]
    assert [s["label"] for s in role["x-suggestions"]] == ["User model", "Agent model"]
    assert config["properties"]["prompt"]["x-widget"] == "textarea"

    schema = api.get("/api/workflows/schema").json()
    assert {"nodes", "edges", "interfaceInputs", "interfaceOutputs"} <= set(schema["properties"])
    by_type = {
        rule["if"]["properties"]["type"]["const"]: rule["then"]["properties"]["config"]
        for rule in schema["$defs"]["WorkflowNode"]["allOf"]
    }
    assert by_type["llm:Chat"] == config


def test_validate_answers_the_problems_without_saving(api: httpx.Client, home: Path) -> None:
    workflow = chat_workflow()
    workflow["nodes"][0]["type"] = "core:TextInptu"
    problems = api.post("/api/workflows/validate", json=workflow).json()["problems"]
    assert [(p["nodeId"], p["code"]) for p in problems] == [("prompt", "unknown-type")]
    assert "core:TextInput" in problems[0]["message"]
    assert list(workflows_dir(home).glob("*.json")) == []


def body_workflow() -> dict[str, Any]:
    """A workflow callable as a node: draft and depth in, draft and done out."""
    return {
        "id": "reviser",
        "nodes": [],
        "interfaceInputs": {
            "draft": {"dataFlowType": "STRING", "description": "the text so far", "required": True},
            "depth": {"dataFlowType": "INTEGER", "required": False},
        },
        "interfaceOutputs": {
            "draft": {"dataFlowType": "STRING"},
            "done": {"dataFlowType": "BOOLEAN"},
        },
    }


def slot_names(slots: dict[str, Any]) -> tuple[list[Any], list[Any]]:
    return (
        [(s["name"], s["type"]) for s in slots["inputs"]],
        [(s["name"], s["type"]) for s in slots["outputs"]],
    )


def test_validate_answers_a_called_workflows_interface_as_the_nodes_slots(
    api: httpx.Client,
) -> None:
    assert api.put("/api/workflows/reviser", json=body_workflow()).status_code == 200
    caller = {
        "id": "caller",
        "nodes": [
            {"id": "sub", "type": "core:SubWorkflow", "config": {"workflow": "reviser"}},
            {"id": "loop", "type": "core:Recursive", "config": {"workflow": "reviser"}},
            {"id": "prompt", "type": "core:TextInput", "config": {"text": "Once"}},
        ],
        "edges": [
            {"source": "prompt", "sourceSlot": "text", "target": "sub", "targetSlot": "draft"},
            {"source": "prompt", "sourceSlot": "text", "target": "loop", "targetSlot": "draft"},
        ],
    }
    report = api.post("/api/workflows/validate", json=caller).json()
    assert report["problems"] == []
    # Only nodes whose slots depend on their config are answered.
    assert set(report["slots"]) == {"sub", "loop"}
    sub = report["slots"]["sub"]
    assert slot_names(sub) == (
        [("draft", "STRING"), ("depth", "INTEGER")],
        [("draft", "STRING"), ("done", "BOOLEAN")],
    )
    assert sub["inputs"][0]["description"] == "the text so far"
    assert [s["required"] for s in sub["inputs"]] == [True, False]
    # Recursive fills the body's depth itself and adds its own outputs after the body's.
    assert slot_names(report["slots"]["loop"]) == (
        [("draft", "STRING")],
        [("draft", "STRING"), ("done", "BOOLEAN"), ("iterations", "INTEGER"), ("trace", "ARRAY")],
    )
    # A save answers the same slots.
    saved = api.put("/api/workflows/caller", json=caller).json()
    assert saved["slots"] == report["slots"]


def test_a_node_calling_a_missing_workflow_gets_a_problem_and_no_slots(
    api: httpx.Client,
) -> None:
    caller = {
        "id": "caller",
        "nodes": [
            {"id": "sub", "type": "core:SubWorkflow", "config": {"workflow": "nowhere"}},
            {"id": "unset", "type": "core:SubWorkflow", "config": {"workflow": ""}},
        ],
    }
    report = api.post("/api/workflows/validate", json=caller).json()
    assert report["slots"] == {"unset": {"inputs": [], "outputs": []}}
    missing = [p for p in report["problems"] if p["code"] == "missing-workflow"]
    assert [p["nodeId"] for p in missing] == ["sub"]
    assert "nowhere" in missing[0]["message"]


# -- runs -----------------------------------------------------------------------------------


def test_an_invalid_workflow_is_refused_with_every_problem_and_nothing_starts(
    api: httpx.Client,
) -> None:
    workflow = {
        "id": "tangle",
        "nodes": [
            {"id": "a", "type": "core:TextTemplate"},
            {"id": "b", "type": "core:TextTemplate"},
            {"id": "words", "type": "core:TextInput", "config": {"text": "hi"}},
            {"id": "fill", "type": "core:TextTemplate", "config": {"template": "{{x}}"}},
        ],
        "edges": [
            {"source": "a", "sourceSlot": "text", "target": "b", "targetSlot": "template"},
            {"source": "b", "sourceSlot": "text", "target": "a", "targetSlot": "template"},
            {"source": "ghost", "sourceSlot": "text", "target": "fill", "targetSlot": "template"},
            {"source": "words", "sourceSlot": "text", "target": "fill", "targetSlot": "variables"},
        ],
    }
    assert api.put("/api/workflows/tangle", json=workflow).status_code == 200
    refused = api.post("/api/workflows/tangle/runs", json={})
    assert refused.status_code == 422, refused.text
    body = refused.json()
    codes = {p["code"] for p in body["problems"]}
    assert {"cycle", "dangling-edge", "type-mismatch"} <= codes
    cycle = next(p for p in body["problems"] if p["code"] == "cycle")
    assert "a → b → a" in cycle["message"] or "b → a → b" in cycle["message"]
    mismatch = next(p for p in body["problems"] if p["code"] == "type-mismatch")
    assert (mismatch["nodeId"], mismatch["slot"]) == ("fill", "variables")
    assert "fill.variables" in {p["field"] for p in body["error"]["problems"]}
    assert api.get("/api/workflow-runs").json() == []


def test_a_run_streams_the_answer_and_its_events_are_kept(
    api: httpx.Client, llm: ReplayLLMServer
) -> None:
    llm.script(Reply(text="Once upon a time", chunk_delay_s=0.02))
    api.put("/api/workflows/story", json=chat_workflow())
    run_id = start_run(api, "story")
    run = wait_for_run(api, run_id)
    assert run["status"] == "completed", run
    events = run["events"]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert events[0]["type"] == "workflow:started"
    assert events[-1]["type"] == "workflow:completed"
    chunks = [e["chunk"] for e in events if e["type"] == "node:streaming"]
    assert len(chunks) > 1
    assert "".join(chunks) == "Once upon a time"
    assert llm.chat_requests[-1]["messages"][-1]["content"] == "Begin"

    later = api.get(f"/api/workflow-runs/{run_id}", params={"after": len(events) - 1}).json()
    assert [e["type"] for e in later["events"]] == ["workflow:completed"]
    runs = api.get("/api/workflow-runs").json()
    assert runs[0]["runId"] == run_id
    assert (runs[0]["status"], runs[0]["waitingFor"]) == ("completed", [])


def test_an_unsaved_graph_runs_when_sent_with_the_request(
    api: httpx.Client, llm: ReplayLLMServer
) -> None:
    llm.script(Reply(text="Unsaved"))
    run_id = start_run(api, "scratch", workflow=chat_workflow("scratch", "Try"))
    assert wait_for_run(api, run_id)["status"] == "completed"
    assert llm.chat_requests[-1]["messages"][-1]["content"] == "Try"
    assert api.get("/api/workflows/scratch").status_code == 404

    mismatch = api.post("/api/workflows/scratch/runs", json={"workflow": chat_workflow("other")})
    assert mismatch.status_code == 422
    assert mismatch.json()["error"]["problems"][0]["field"] == "workflow.id"
    assert api.post("/api/workflows/nowhere/runs", json={}).status_code == 404


def test_a_run_request_never_takes_an_api_key_from_the_browser(api: httpx.Client) -> None:
    api.put("/api/workflows/story", json=chat_workflow())
    refused = api.post(
        "/api/workflows/story/runs", json={"apiConfig": {"apiKey": "sk-browser", "model": "x"}}
    )
    assert refused.status_code == 422
    assert [p["field"] for p in refused.json()["error"]["problems"]] == ["apiConfig"]
    assert api.get("/api/workflow-runs").json() == []


def test_unknown_runs_are_404_and_a_decision_nobody_waits_for_is_409(
    api: httpx.Client, llm: ReplayLLMServer
) -> None:
    assert api.get("/api/workflow-runs/nope").status_code == 404
    assert api.post("/api/workflow-runs/nope/cancel").status_code == 404
    decision = {"nodeId": "writer", "decision": "approve"}
    assert api.post("/api/workflow-runs/nope/decisions", json=decision).status_code == 404

    llm.script(Reply(text="Done"))
    api.put("/api/workflows/story", json=chat_workflow())
    run_id = start_run(api, "story")
    wait_for_run(api, run_id)
    late = api.post(f"/api/workflow-runs/{run_id}/decisions", json=decision)
    assert late.status_code == 409
    assert "writer" in late.json()["error"]["message"]


# -- history and freezing ---------------------------------------------------------------------


def test_history_lists_outputs_and_a_frozen_node_is_reported_from_its_pin(
    api: httpx.Client, llm: ReplayLLMServer
) -> None:
    llm.script(Reply(text="First answer"), Reply(text="Second answer"))
    api.put("/api/workflows/story", json=chat_workflow(prompt="One"))
    first = wait_for_run(api, start_run(api, "story"))
    completed = next(
        e for e in first["events"] if e["type"] == "node:completed" and e["nodeId"] == "writer"
    )

    history = api.get("/api/workflows/story/nodes/writer/history").json()
    assert len(history) == 1
    entry = history[0]
    assert (entry["id"], entry["runId"]) == (completed["historyId"], first["runId"])
    assert entry["frozen"] is False
    assert entry["outputs"]["text"] == "First answer"

    pinned = api.put("/api/workflows/story/nodes/writer/freeze", json={"historyId": entry["id"]})
    assert pinned.status_code == 200, pinned.text
    assert pinned.json()["frozen"] is True
    assert set(api.get("/api/workflows/story/frozen").json()) == {"writer"}

    # A changed prompt would make the node run again; frozen, it reports its pin instead.
    api.put("/api/workflows/story", json=chat_workflow(prompt="Two"))
    second = wait_for_run(api, start_run(api, "story"))
    assert second["status"] == "completed"
    cached = [e for e in second["events"] if e["type"] == "node:cached"]
    assert [(e["nodeId"], e["source"]) for e in cached if e["nodeId"] == "writer"] == [
        ("writer", "frozen")
    ]
    assert cached[-1]["outputs"]["text"] == "First answer"
    assert len(llm.chat_requests) == 1

    assert api.delete("/api/workflows/story/nodes/writer/freeze").status_code == 204
    assert api.get("/api/workflows/story/frozen").json() == {}
    third = wait_for_run(api, start_run(api, "story"))
    assert any(e["type"] == "node:completed" and e["nodeId"] == "writer" for e in third["events"])
    assert len(api.get("/api/workflows/story/nodes/writer/history").json()) == 2


def test_freezing_an_unknown_history_entry_or_another_nodes_is_404(
    api: httpx.Client, llm: ReplayLLMServer
) -> None:
    llm.script(Reply(text="Answer"))
    api.put("/api/workflows/story", json=chat_workflow())
    wait_for_run(api, start_run(api, "story"))
    entry = api.get("/api/workflows/story/nodes/writer/history").json()[0]
    unknown = api.put("/api/workflows/story/nodes/writer/freeze", json={"historyId": 999})
    assert unknown.status_code == 404
    other = api.put("/api/workflows/story/nodes/prompt/freeze", json={"historyId": entry["id"]})
    assert other.status_code == 404
    assert api.get("/api/workflows/story/frozen").json() == {}


def test_the_last_fifty_finished_runs_are_kept(api: httpx.Client) -> None:
    workflow = {"id": "quick", "nodes": [{"id": "t", "type": "core:TextInput"}]}
    api.put("/api/workflows/quick", json=workflow)
    run_ids = [start_run(api, "quick") for _ in range(52)]
    for run_id in run_ids[2:]:
        assert wait_for_run(api, run_id)["status"] == "completed"
    runs = api.get("/api/workflow-runs").json()
    assert [r["runId"] for r in runs] == run_ids[:1:-1]
    assert api.get(f"/api/workflow-runs/{run_ids[0]}").status_code == 404
