"""``storyloom workflow ...`` end to end: a real process, a real home, the replay LLM."""

import json
from pathlib import Path
from typing import Any

from storyloom.store.database import Database
from storyloom.testing.replay_server import ReplayLLMServer, Reply
from storyloom.workflow.node_history import NodeHistory
from tests.cli.cli_support import storyloom

REPO = Path(__file__).resolve().parents[2]


def edge(spec: str) -> dict[str, str]:
    source, target = (part.strip() for part in spec.split(">"))
    s_node, s_slot = source.split(".")
    t_node, t_slot = target.split(".")
    return {"source": s_node, "sourceSlot": s_slot, "target": t_node, "targetSlot": t_slot}


STORY: dict[str, Any] = {
    "id": "story",
    "description": "Tell a story about a topic",
    "interfaceInputs": {
        "topic": {"dataFlowType": "STRING", "required": True},
        "words": {"dataFlowType": "INTEGER", "config": {"default": 50}},
    },
    "interfaceOutputs": {"story": {"dataFlowType": "STRING"}, "words": {"dataFlowType": "INTEGER"}},
    "nodes": [
        {"id": "in", "type": "core:GroupInput"},
        {"id": "chat", "type": "llm:Chat", "config": {"system": "Be brief"}},
        {"id": "out", "type": "core:GroupOutput"},
    ],
    "edges": [
        edge("in.topic > chat.prompt"),
        edge("chat.text > out.story"),
        edge("in.words > out.words"),
    ],
}


def setup(tmp_path: Path, llm: ReplayLLMServer, workflow: dict[str, Any] = STORY) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    endpoint = {"base_url": llm.url, "model": "m", "max_retries": 0}
    (home / "settings.json").write_text(json.dumps({"user_llm": endpoint}))
    file = tmp_path / "story.json"
    file.write_text(json.dumps(workflow))
    return home


def test_run_streams_the_llm_text_then_prints_the_outputs(tmp_path: Path) -> None:
    with ReplayLLMServer(models=["m"]) as llm:
        llm.script(Reply(text="Once upon a time, tea."))
        home = setup(tmp_path, llm)
        result = storyloom(
            "workflow", "run", str(tmp_path / "story.json"), "--input", "topic=tea", home=home
        )
        request = llm.chat_requests[-1]
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    header = lines.index("--- chat (llm:Chat) ---")
    assert lines[header + 1] == "Once upon a time, tea."
    assert lines[header + 2 :] == ["=== story ===", "Once upon a time, tea.", "=== words ===", "50"]
    assert request["messages"][-1] == {"role": "user", "content": "tea"}
    # The run's outputs went into the home's node history.
    database = Database.in_home(home)
    try:
        (entry,) = NodeHistory(database).entries("story", "chat")
    finally:
        database.close()
    assert entry.outputs["text"] == "Once upon a time, tea."


def test_run_json_is_one_object_with_typed_inputs(tmp_path: Path) -> None:
    with ReplayLLMServer(models=["m"]) as llm:
        llm.script(Reply(text="A short one."))
        home = setup(tmp_path, llm)
        result = storyloom(
            "workflow",
            "run",
            str(tmp_path / "story.json"),
            "-i",
            "topic=ships",
            "--input",
            "words=12",
            "--json",
            home=home,
        )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert set(report) == {"runId", "status", "interfaceOutputs", "outputs", "errors"}
    assert report["status"] == "completed"
    assert report["interfaceOutputs"] == {"story": "A short one.", "words": 12}
    assert report["outputs"]["chat"]["text"] == "A short one."
    assert report["errors"] == {}


def test_a_failing_run_exits_1_and_names_the_node(tmp_path: Path) -> None:
    with ReplayLLMServer(models=["m"]) as llm:
        llm.script(Reply(status=401, error_message="bad key"), Reply(status=401))
        home = setup(tmp_path, llm)
        file = str(tmp_path / "story.json")
        plain = storyloom("workflow", "run", file, "--input", "topic=tea", home=home)
        as_json = storyloom("workflow", "run", file, "--input", "topic=tea", "--json", home=home)
    assert plain.returncode == 1
    assert "node 'chat' failed: AuthenticationFailed" in plain.stderr
    assert as_json.returncode == 1
    report = json.loads(as_json.stdout)
    assert report["status"] == "failed"
    assert report["errors"]["chat"].startswith("AuthenticationFailed")


def test_bad_inputs_are_all_listed(tmp_path: Path) -> None:
    with ReplayLLMServer(models=["m"]) as llm:
        home = setup(tmp_path, llm)
        result = storyloom(
            "workflow",
            "run",
            str(tmp_path / "story.json"),
            "--input",
            "words=many",
            "--input",
            "colour=blue",
            "--input",
            "novalue",
            home=home,
        )
        assert llm.chat_requests == []
    assert result.returncode == 1
    err = result.stderr
    assert "words: expected INTEGER, got 'many'" in err
    assert "colour: not an input of this workflow (inputs: topic, words)" in err
    assert "novalue: expected name=value" in err
    assert "topic: required: pass --input topic=..." in err


BROKEN: dict[str, Any] = {
    "id": "broken",
    "nodes": [
        {"id": "a", "type": "core:TextInput"},
        {"id": "b", "type": "core:RegexApplicator", "config": {"pattern": "x"}},
        {"id": "c", "type": "core:RegexApplicator", "config": {"pattern": "y"}},
        {"id": "s", "type": "core:Switch"},
    ],
    "edges": [
        edge("ghost.text > b.text"),
        edge("b.text > c.text"),
        edge("c.text > b.replacement"),
        edge("a.text > s.condition"),
    ],
}


def test_an_invalid_workflow_is_refused_with_every_problem(tmp_path: Path) -> None:
    with ReplayLLMServer(models=["m"]) as llm:
        home = setup(tmp_path, llm, BROKEN)
    file = str(tmp_path / "story.json")
    ran = storyloom("workflow", "run", file, home=home)
    assert ran.returncode == 1
    err = ran.stderr
    assert "4 problem(s)" in err
    assert "[dangling-edge] ghost.text: edge ghost.text → b.text names node 'ghost'" in err
    assert "[missing-input] b.text:" in err
    assert "[type-mismatch] s.condition: node 's' input 'condition' takes BOOLEAN" in err
    assert "[cycle] " in err and ("b → c → b" in err or "c → b → c" in err)

    checked = storyloom("workflow", "validate", file, "--json", home=home)
    assert checked.returncode == 1
    report = json.loads(checked.stdout)
    assert report["valid"] is False
    assert sorted(p["code"] for p in report["problems"]) == [
        "cycle",
        "dangling-edge",
        "missing-input",
        "type-mismatch",
    ]
    assert any(p["nodeId"] == "s" and p["slot"] == "condition" for p in report["problems"])


def test_a_malformed_file_names_each_bad_field(tmp_path: Path) -> None:
    file = tmp_path / "bad.json"
    file.write_text(json.dumps({"id": "-bad", "nodes": [{"type": "core:TextInput"}], "edges": 3}))
    result = storyloom("workflow", "validate", str(file), home=tmp_path)
    assert result.returncode == 1
    err = result.stderr
    assert f"storyloom: {file}:" in err
    assert "  id: " in err and "  nodes[0].id: " in err and "  edges: " in err
    not_json = tmp_path / "nope.json"
    not_json.write_text("{")
    assert "not JSON" in storyloom("workflow", "run", str(not_json), home=tmp_path).stderr


def test_validate_nodes_and_schema_commands(tmp_path: Path) -> None:
    with ReplayLLMServer(models=["m"]) as llm:
        home = setup(tmp_path, llm)
    valid = storyloom("workflow", "validate", str(tmp_path / "story.json"), home=home)
    assert valid.returncode == 0, valid.stderr
    assert "valid (3 nodes, 3 edges)" in valid.stdout

    listed = json.loads(storyloom("workflow", "nodes", "--json", home=home).stdout)
    by_type = {info["type"]: info for info in listed}
    assert {"core:TextInput", "core:Switch", "core:GroupInput", "llm:Chat"} <= set(by_type)
    assert by_type["llm:Chat"]["streaming"] is True
    assert by_type["llm:Chat"]["category"] == "LLM"
    plain = storyloom("workflow", "nodes", home=home).stdout
    assert "\nFlow\n" in plain and "  core:Merge  Merge: " in plain

    schema = json.loads(storyloom("workflow", "schema", home=home).stdout)
    assert "interfaceInputs" in schema["properties"]


def test_without_an_interface_the_end_nodes_outputs_are_printed(tmp_path: Path) -> None:
    file = tmp_path / "plain.json"
    workflow = {
        "id": "plain",
        "nodes": [
            {"id": "in", "type": "core:TextInput", "config": {"text": "a-b"}},
            {"id": "re", "type": "core:RegexApplicator", "config": {"pattern": "-"}},
        ],
        "edges": [edge("in.text > re.text")],
    }
    file.write_text(json.dumps(workflow))
    result = storyloom("workflow", "run", str(file), home=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["=== re.text ===", "ab", "=== re.matches ===", "1"]
