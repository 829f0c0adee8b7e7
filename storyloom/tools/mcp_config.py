"""External MCP servers storyloom connects to: ``mcp_servers.json`` in the project and in
the data directory.

The file keeps the shape other MCP hosts use (``{"mcpServers": {"<name>": {...}}}``), so a
server entry copied from one of them works here. A project's entry overrides the user's
entry of the same name. Secret values (an API key in ``env``, an ``Authorization`` header)
are never in the file: the file names them in ``secretEnv`` / ``secretHeaders`` and the
values live in the secret store under ``mcp.<server>.<name>``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic.alias_generators import to_camel

from storyloom.core.atomic_io import atomic_write_json
from storyloom.core.errors import FieldProblem, FileFormatError, problems_from_validation

MCP_SERVERS_FILE = "mcp_servers.json"
SERVER_NAME_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"

Scope = Literal["project", "user"]


class McpServerConfig(BaseModel):
    """One external MCP server: how to reach it and how long a call may take."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", validate_default=True
    )

    # Letters, digits, '-' and '_' only: the name is part of every tool id
    # (``mcp.<server>.<tool>``) and of the secret keys.
    name: str = Field(default="", pattern=r"^([A-Za-z0-9_-]{1,64})?$")
    type: Literal["stdio", "http"] | None = Field(
        default=None, description="Transport; left out, 'http' when url is set, else 'stdio'"
    )
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    cwd: str | None = Field(
        default=None, description="Working folder of the command; relative to the file's folder"
    )
    env: dict[str, str] = Field(default_factory=dict, description="Plain environment values")
    secret_env: list[str] = Field(
        default_factory=list, description="Environment names whose values are in the secret store"
    )
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    secret_headers: list[str] = Field(
        default_factory=list, description="Header names whose values are in the secret store"
    )
    timeout_s: float = Field(default=30.0, gt=0, le=3600)
    enabled: bool = True

    @model_validator(mode="after")
    def _transport_fields(self) -> McpServerConfig:
        if self.type is None:
            self.type = "http" if self.url else "stdio"
        if self.type == "stdio" and not self.command:
            raise ValueError("a stdio server needs 'command'")
        if self.type == "http" and not self.url:
            raise ValueError("an http server needs 'url'")
        if self.type == "http" and self.url and not self.url.startswith(("http://", "https://")):
            raise ValueError("'url' must start with http:// or https://")
        overlap = set(self.env) & set(self.secret_env)
        if overlap:
            raise ValueError(f"{sorted(overlap)[0]} is both a plain and a secret env value")
        return self

    @property
    def transport(self) -> Literal["stdio", "http"]:
        return self.type or "stdio"


class McpServersFile(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="forbid")

    mcp_servers: dict[str, McpServerConfig] = Field(default_factory=dict, alias="mcpServers")

    @model_validator(mode="after")
    def _names(self) -> McpServersFile:
        import re

        for key, server in self.mcp_servers.items():
            if not re.match(SERVER_NAME_PATTERN, key):
                raise ValueError(f"server name {key!r}: use letters, digits, '-' and '_' only")
            server.name = key
        return self


@dataclass(frozen=True)
class ScopedServer:
    """A configured server and the file it came from."""

    config: McpServerConfig
    scope: Scope
    file: Path

    @property
    def name(self) -> str:
        return self.config.name

    def cwd(self) -> Path:
        """The command's working folder (a relative ``cwd`` is relative to the file)."""
        base = self.file.parent
        return base / self.config.cwd if self.config.cwd else base


@dataclass(frozen=True)
class McpConfigProblem:
    file: str
    field: str
    reason: str


def secret_key(server: str, name: str) -> str:
    """Where a secret env value or header of ``server`` lives in the secret store."""
    return f"mcp.{server}.{name}"


def config_file(folder: Path) -> Path:
    return folder / MCP_SERVERS_FILE


def read_servers_file(path: Path) -> McpServersFile:
    """The file at ``path`` (none there: no servers); :class:`FileFormatError` names the
    field and why when it does not fit."""
    if not path.is_file():
        return McpServersFile()
    try:
        raw: Any = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise FileFormatError(path, [FieldProblem("", f"not readable JSON ({exc})")]) from None
    try:
        return McpServersFile.model_validate(raw)
    except ValidationError as exc:
        raise FileFormatError(path, problems_from_validation(exc)) from None


def write_servers_file(path: Path, servers: McpServersFile) -> None:
    data = servers.model_dump(
        by_alias=True, exclude_defaults=True, exclude={"mcp_servers": {"__all__": {"name"}}}
    )
    data.setdefault("mcpServers", {})
    atomic_write_json(path, data)


def _entries(path: Path) -> tuple[dict[str, McpServerConfig], list[McpConfigProblem]]:
    """Each server entry of the file on its own: a broken entry is a problem, the other
    entries still count."""
    if not path.is_file():
        return {}, []
    try:
        raw: Any = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return {}, [McpConfigProblem(str(path), "", f"not readable JSON ({exc})")]
    servers = raw.get("mcpServers") if isinstance(raw, dict) else None
    if not isinstance(servers, dict):
        return {}, [McpConfigProblem(str(path), "mcpServers", "must be an object of servers")]
    found: dict[str, McpServerConfig] = {}
    problems: list[McpConfigProblem] = []
    for name, entry in servers.items():
        where = f"mcpServers.{name}"
        try:
            parsed = McpServersFile.model_validate({"mcpServers": {name: entry}})
        except ValidationError as exc:
            problems.extend(
                McpConfigProblem(str(path), p.field or where, p.reason)
                for p in problems_from_validation(exc)
            )
            continue
        found[name] = parsed.mcp_servers[name]
    return found, problems


def load_servers(
    project_dir: Path | None, home: Path
) -> tuple[list[ScopedServer], list[McpConfigProblem]]:
    """Every configured server, the project's over the user's of the same name; an entry
    that does not fit is reported (file, field, reason) and left out, the others count."""
    found: dict[str, ScopedServer] = {}
    problems: list[McpConfigProblem] = []
    sources: list[tuple[Scope, Path]] = [("user", config_file(home))]
    if project_dir is not None:
        sources.append(("project", config_file(project_dir)))
    for scope, path in sources:
        entries, entry_problems = _entries(path)
        problems.extend(entry_problems)
        for name, config in entries.items():
            found[name] = ScopedServer(config, scope, path)
    return sorted(found.values(), key=lambda s: s.name), problems


def save_server(folder: Path, config: McpServerConfig) -> None:
    """Add or replace ``config`` in the file of ``folder`` (atomic; other entries kept)."""
    path = config_file(folder)
    current = read_servers_file(path)
    current.mcp_servers[config.name] = config
    write_servers_file(path, current)


def remove_server(folder: Path, name: str) -> bool:
    """Drop ``name`` from the file of ``folder``; False when it was not there."""
    path = config_file(folder)
    current = read_servers_file(path)
    if current.mcp_servers.pop(name, None) is None:
        return False
    write_servers_file(path, current)
    return True
