"""``storyloom chat ...`` end to end: a real process, a real home and its database."""

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from storyloom.chat.store.turn_tree import TurnTree
from storyloom.plugins import node_registry
from storyloom.project.project_file import init_project
from storyloom.store.database import Database
from storyloom.workflow.validation import validate_workflow
from storyloom.workflow.workflow_file import load_workflow_file

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sillytavern"
LEGACY = FIXTURES / "chat_maren_legacy_header.jsonl"
MODERN = FIXTURES / "chat_maren_modern_header.jsonl"
PRESET = FIXTURES / "preset_seaside_chat_completion.json"


def storyloom(*args: str, home: Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "storyloom", *args, "--home", str(home)],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "HOME": str(home)},
        timeout=120,
        cwd=cwd or home,
    )


@pytest.fixture
def home(tmp_path: Path) -> Path:
    folder = tmp_path / "home"
    folder.mkdir()
    return folder


def lines_of(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.split("\n") if line.strip()]


def counts(path: Path) -> tuple[int, int]:
    messages = [o for o in lines_of(path.read_text(encoding="utf-8")) if "mes" in o]
    return len(messages), sum(max(len(o.get("swipes") or []) - 1, 0) for o in messages)


def import_json(file: Path, home: Path, *more: str) -> dict[str, Any]:
    result = storyloom("chat", "import", str(file), "--json", *more, home=home)
    assert result.returncode == 0, result.stderr
    report: dict[str, Any] = json.loads(result.stdout)
    return report


@pytest.mark.parametrize("sample", [LEGACY, MODERN], ids=["legacy", "modern"])
def test_import_prints_the_ids_and_counts_and_export_gives_the_file_back(
    home: Path, sample: Path
) -> None:
    report = import_json(sample, home)
    messages, siblings = counts(sample)
    assert set(report) == {"conversation_id", "messages", "siblings", "total"}
    assert (report["messages"], report["siblings"]) == (messages, siblings)
    assert report["total"] == messages + siblings
    out = home / "back.jsonl"
    result = storyloom(
        "chat",
        "export",
        report["conversation_id"],
        "--format",
        "sillytavern",
        "--out",
        str(out),
        home=home,
    )
    assert result.returncode == 0, result.stderr
    original = sample.read_text(encoding="utf-8")
    exported = out.read_text(encoding="utf-8")
    assert lines_of(exported) == lines_of(original)
    assert [list(o) for o in lines_of(exported)] == [list(o) for o in lines_of(original)]


def test_import_says_what_it_made_in_one_line(home: Path) -> None:
    result = storyloom("chat", "import", str(LEGACY), home=home)
    assert result.returncode == 0, result.stderr
    messages, siblings = counts(LEGACY)
    [line] = result.stdout.splitlines()
    conversation_id = line.split()[1].rstrip(":")
    assert line == f"conversation {conversation_id}: {messages} messages, {siblings} siblings"
    database = Database.in_home(home)
    try:
        conversation = TurnTree(database).conversation(conversation_id)
    finally:
        database.close()
    assert conversation.title == LEGACY.stem


def test_a_bad_file_names_the_line_and_writes_nothing(home: Path, tmp_path: Path) -> None:
    bad = tmp_path / "broken.jsonl"
    good = LEGACY.read_text(encoding="utf-8").split("\n")
    bad.write_text("\n".join([*good[:3], '{"name": "Sera", "mes": ', *good[3:]]), "utf-8")
    result = storyloom("chat", "import", str(bad), home=home)
    assert result.returncode == 1
    assert str(bad) in result.stderr
    assert "line 4" in result.stderr
    listed = storyloom("chat", "list", "--all", "--json", home=home)
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == {"conversations": []}


def test_export_defaults_to_the_title_as_file_name_here(home: Path, tmp_path: Path) -> None:
    report = import_json(MODERN, home, "--title", "Sera: night/1")
    work = tmp_path / "work"
    work.mkdir()
    result = storyloom("chat", "export", report["conversation_id"], home=home, cwd=work)
    assert result.returncode == 0, result.stderr
    written = work / "Sera_ night_1.jsonl"
    assert written.is_file()
    assert lines_of(written.read_text(encoding="utf-8")) == lines_of(
        MODERN.read_text(encoding="utf-8")
    )


def test_export_as_personalab_writes_the_conversation_folder(home: Path, tmp_path: Path) -> None:
    report = import_json(LEGACY, home)
    folder = tmp_path / "lab"
    result = storyloom(
        "chat",
        "export",
        report["conversation_id"],
        "--format",
        "personalab",
        "-o",
        str(folder),
        home=home,
    )
    assert result.returncode == 0, result.stderr
    names = sorted(p.name for p in folder.iterdir())
    assert names == ["character_snapshot.json", "conversation.jsonl", "metadata.json"]
    talk = lines_of((folder / "conversation.jsonl").read_text(encoding="utf-8"))
    originals = [o for o in lines_of(LEGACY.read_text(encoding="utf-8")) if "mes" in o]
    assert [line["content"] for line in talk] == [o["mes"] for o in originals]
    assert [line["role"] for line in talk][:3] == ["assistant", "user", "assistant"]
    metadata = json.loads((folder / "metadata.json").read_text(encoding="utf-8"))
    assert metadata["conversation_id"] == report["conversation_id"]


def test_export_of_an_unknown_conversation_or_format_fails_plainly(home: Path) -> None:
    missing = storyloom("chat", "export", "0123456789abcdef", home=home)
    assert missing.returncode == 1
    assert "0123456789abcdef" in missing.stderr
    assert "Traceback" not in missing.stderr
    report = import_json(MODERN, home)
    odd = storyloom("chat", "export", report["conversation_id"], "--format", "html", home=home)
    assert odd.returncode == 1
    assert "html" in odd.stderr


def test_conversations_belong_to_the_project_they_were_imported_into(
    home: Path, tmp_path: Path
) -> None:
    project = tmp_path / "novel"
    init_project(project)
    characters = project / "presets" / "characters"
    characters.mkdir(parents=True)
    card = {"name": "Maren", "description": "Keeper of the lighthouse."}
    (characters / "maren.json").write_text(json.dumps(card), "utf-8")
    in_project = import_json(LEGACY, home, "--project", str(project))
    in_default = import_json(MODERN, home)

    def listed(*args: str) -> list[str]:
        result = storyloom("chat", "list", "--json", *args, home=home)
        assert result.returncode == 0, result.stderr
        return [row["id"] for row in json.loads(result.stdout)["conversations"]]

    assert listed("--project", str(project)) == [in_project["conversation_id"]]
    assert listed() == [in_default["conversation_id"]]
    assert sorted(listed("--all")) == sorted(
        [in_project["conversation_id"], in_default["conversation_id"]]
    )
    plain = storyloom("chat", "list", "--project", str(project), home=home)
    assert in_project["conversation_id"] in plain.stdout
    assert "Maren" in plain.stdout
    # The project's character preset of that name became the conversation's snapshot.
    database = Database.in_home(home)
    try:
        conversation = TurnTree(database).conversation(in_project["conversation_id"])
    finally:
        database.close()
    assert conversation.character.source_preset == "maren"
    assert conversation.character.base_persona == "Keeper of the lighthouse."


# -- chat-completion presets -------------------------------------------------------------------


def st_preset(temperature: Any = 0.65) -> dict[str, Any]:
    """A small preset in the shape of SillyTavern's presets/openai/Default.json."""
    return {
        "chat_completion_source": "openai",
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
        "prompts": [
            {
                "name": "Main Prompt",
                "system_prompt": True,
                "role": "system",
                "content": "Write {{char}}'s next reply.",
                "identifier": "main",
            },
            {
                "identifier": "chatHistory",
                "name": "Chat History",
                "system_prompt": True,
                "marker": True,
            },
        ],
        "prompt_order": [
            {
                "character_id": 100001,
                "order": [
                    {"identifier": "main", "enabled": True},
                    {"identifier": "chatHistory", "enabled": True},
                ],
            }
        ],
    }


def write_preset(folder: Path, name: str, data: Any) -> Path:
    path = folder / name
    path.write_text(json.dumps(data), "utf-8")
    return path


def invoker_config(path: Path) -> dict[str, Any]:
    workflow = json.loads(path.read_text(encoding="utf-8"))
    [invoker] = [n for n in workflow["nodes"] if n["type"] == "chat:LLMInvoker"]
    config: dict[str, Any] = invoker["config"]
    return config


def test_import_preset_saves_a_pipeline_workflow_and_says_where(home: Path, tmp_path: Path) -> None:
    project = tmp_path / "novel"
    init_project(project)
    file = write_preset(tmp_path, "Terse Storm.json", st_preset())
    result = storyloom("chat", "import-preset", str(file), "--project", str(project), home=home)
    assert result.returncode == 0, result.stderr
    saved = project / "workflows" / "st-terse-storm.json"
    assert result.stdout.strip() == f"workflow st-terse-storm: saved to {saved}"
    workflow = json.loads(saved.read_text(encoding="utf-8"))
    assert workflow["id"] == "st-terse-storm" and workflow["name"] == "Terse Storm"
    assert invoker_config(saved)["temperature"] == 0.65
    registry = node_registry(entry_points=False)
    assert validate_workflow(load_workflow_file(saved), registry) == []


def test_a_preset_with_every_prompt_sillytavern_ships_imports_as_a_valid_pipeline(
    home: Path, tmp_path: Path
) -> None:
    project = tmp_path / "novel"
    init_project(project)
    result = storyloom("chat", "import-preset", str(PRESET), "--project", str(project), home=home)
    assert result.returncode == 0, result.stderr
    saved = project / "workflows" / "st-preset_seaside_chat_completion.json"
    assert saved.is_file(), result.stdout
    assert invoker_config(saved)["temperature"] == 0.8
    registry = node_registry(entry_points=False)
    assert validate_workflow(load_workflow_file(saved), registry) == []


def test_import_preset_takes_an_id_and_name_and_refuses_to_overwrite(
    home: Path, tmp_path: Path
) -> None:
    project = tmp_path / "novel"
    init_project(project)
    first = write_preset(tmp_path, "Default.json", st_preset(0.5))
    args = ("--id", "storm", "--name", "Storm", "--project", str(project), "--json")
    made = storyloom("chat", "import-preset", str(first), *args, home=home)
    assert made.returncode == 0, made.stderr
    saved = project / "workflows" / "storm.json"
    assert json.loads(made.stdout) == {"id": "storm", "name": "Storm", "path": str(saved)}
    before = saved.read_bytes()
    second = write_preset(tmp_path, "Other.json", st_preset(1.2))
    again = storyloom("chat", "import-preset", str(second), *args, home=home)
    assert again.returncode == 1
    assert "'storm' already exists" in again.stderr
    assert saved.read_bytes() == before
    replaced = storyloom("chat", "import-preset", str(second), *args, "--overwrite", home=home)
    assert replaced.returncode == 0, replaced.stderr
    assert invoker_config(saved)["temperature"] == 1.2


def test_import_preset_of_a_bad_file_names_file_and_field_and_writes_nothing(
    home: Path, tmp_path: Path
) -> None:
    project = tmp_path / "novel"
    init_project(project)
    before = sorted(p.relative_to(project) for p in project.rglob("*"))
    bad = write_preset(tmp_path, "Hot.json", st_preset("hot"))
    result = storyloom("chat", "import-preset", str(bad), "--project", str(project), home=home)
    assert result.returncode == 1
    assert str(bad) in result.stderr and "temperature" in result.stderr
    assert "Traceback" not in result.stderr
    broken = tmp_path / "Broken.json"
    broken.write_text('{"prompts": [', "utf-8")
    result = storyloom("chat", "import-preset", str(broken), "--project", str(project), home=home)
    assert result.returncode == 1
    assert str(broken) in result.stderr and "not JSON" in result.stderr
    assert sorted(p.relative_to(project) for p in project.rglob("*")) == before


def test_import_preset_help_says_how_a_conversation_uses_it(home: Path) -> None:
    result = storyloom("chat", "import-preset", "--help", home=home)
    assert result.returncode == 0, result.stderr
    text = " ".join(result.stdout.split())
    assert "pipeline setting" in text
    listing = storyloom("chat", "list", "--help", home=home)
    assert "Print one JSON object" in listing.stdout
