"""mcp_servers.json: the project's over the user's, a bad entry reported without hiding
the others, writes that keep the other entries."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from storyloom.core.errors import FileFormatError
from storyloom.tools.mcp_config import (
    McpServerConfig,
    load_servers,
    read_servers_file,
    remove_server,
    save_server,
)


def _write(folder: Path, servers: object) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "mcp_servers.json"
    path.write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    return path


def test_a_bad_entry_is_reported_by_file_and_field_and_hides_no_other(tmp_path: Path) -> None:
    home = _write(
        tmp_path / "home",
        {"files": {"command": "npx", "args": ["files"]}, "bad": {"url": "ftp://x"}},
    )
    project = _write(tmp_path / "project", {"web": {"url": "http://127.0.0.1:9/mcp"}})
    servers, problems = load_servers(project.parent, home.parent)
    assert [(s.name, s.scope, s.config.transport) for s in servers] == [
        ("files", "user", "stdio"),
        ("web", "project", "http"),
    ]
    assert len(problems) == 1
    assert problems[0].file == str(home)
    assert problems[0].field == "mcpServers.bad"
    assert "http://" in problems[0].reason


def test_the_project_entry_wins_over_the_users_of_the_same_name(tmp_path: Path) -> None:
    _write(tmp_path / "home", {"files": {"command": "user-files"}})
    _write(tmp_path / "project", {"files": {"command": "project-files", "cwd": "tools"}})
    servers, problems = load_servers(tmp_path / "project", tmp_path / "home")
    assert problems == []
    [files] = servers
    assert (files.scope, files.config.command) == ("project", "project-files")
    assert files.cwd() == tmp_path / "project" / "tools"


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        ({"args": ["x"]}, "needs 'command'"),
        ({"type": "http"}, "needs 'url'"),
        ({"command": "x", "env": {"K": "v"}, "secretEnv": ["K"]}, "both a plain and a secret"),
        ({"command": "x", "timeoutS": 0}, "greater than 0"),
        ({"command": "x", "colour": "red"}, "Extra inputs"),
    ],
)
def test_an_entry_that_does_not_fit_says_why(
    tmp_path: Path, entry: dict[str, object], reason: str
) -> None:
    _write(tmp_path, {"srv": entry})
    servers, problems = load_servers(None, tmp_path)
    assert servers == []
    assert any(reason in p.reason for p in problems), problems


def test_a_server_name_that_cannot_be_part_of_a_tool_id_is_refused(tmp_path: Path) -> None:
    _write(tmp_path, {"my.server": {"command": "x"}})
    servers, problems = load_servers(None, tmp_path)
    assert servers == [] and "letters, digits" in problems[0].reason


def test_save_and_remove_keep_the_other_entries(tmp_path: Path) -> None:
    _write(tmp_path, {"a": {"command": "a"}})
    save_server(
        tmp_path,
        McpServerConfig(name="b", url="http://localhost:1/mcp", secret_headers=["Authorization"]),
    )
    stored = json.loads((tmp_path / "mcp_servers.json").read_text(encoding="utf-8"))
    assert stored == {
        "mcpServers": {
            "a": {"type": "stdio", "command": "a"},
            "b": {
                "type": "http",
                "url": "http://localhost:1/mcp",
                "secretHeaders": ["Authorization"],
            },
        }
    }
    assert read_servers_file(tmp_path / "mcp_servers.json").mcp_servers["b"].transport == "http"
    assert remove_server(tmp_path, "a") is True
    assert remove_server(tmp_path, "a") is False
    assert list(read_servers_file(tmp_path / "mcp_servers.json").mcp_servers) == ["b"]


def test_a_write_over_a_broken_file_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "mcp_servers.json"
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(FileFormatError, match="not readable JSON"):
        save_server(tmp_path, McpServerConfig(name="b", command="b"))
    assert path.read_text(encoding="utf-8") == "{not json"
