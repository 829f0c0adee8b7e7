"""Agent profiles: what one tool-using agent may do, one JSON file each.

``<project>/agents/<id>.json`` holds an :class:`AgentProfile`: the seed's
``tool_ids_inventory`` (§4.4.1) plus what an agent turn needs besides: its system prompt
(which may hold ``{{{system:available_tools}}}``, §7.2) or a deliberation workflow, the
model it talks to, how it calls tools (TAM, native or automatic), a step limit, its tool
policy, its knowledge-base scopes and the tools whose results stay out of later prompts.

The file's field names are the model's (snake_case, as the seed writes
``tool_ids_inventory``); the REST API sends the same JSON. A file that does not read is a
:class:`~storyloom.core.errors.FileFormatError` naming it, the field and the reason; a
save that does not validate changes nothing on disk.
"""

from __future__ import annotations

import fnmatch
import re
import threading
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from storyloom.core.atomic_io import atomic_write_text
from storyloom.core.errors import (
    FieldProblem,
    FileFormatError,
    InvalidInput,
    NotFound,
    StoryloomError,
)
from storyloom.core.json_files import (
    json_file_ids,
    model_json_text,
    read_json_object,
    validate_document,
)
from storyloom.tools.tool_policy import KbAccess, ToolPolicy

AGENTS_DIR = "agents"
AVAILABLE_TOOLS = "{{{system:available_tools}}}"
"""Where an agent's prompt wants its tool documentation (seed §7.2)."""

_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
"""An id is a file stem: letters, digits, ``_`` and ``-`` (no dots, no separators)."""

AgentProtocol = Literal["tam", "native", "auto"]


class AgentProfile(BaseModel):
    """One agent: its tools, its prompt, its model, its protocol and its limits."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=_ID.pattern, description="The file stem under agents/")
    name: str = Field(min_length=1, max_length=200)
    description: str = ""
    tool_ids_inventory: list[str] = Field(
        default_factory=list,
        description="The tools this agent may call (seed §4.4.1); only these are documented "
        "in its prompt and offered to the model",
    )
    prompt: str = Field(
        "",
        description="System prompt; {{{system:available_tools}}} is replaced by the "
        "inventory's documentation",
    )
    workflow: str | None = Field(
        None,
        description="Deliberation workflow id (optional): run instead of a plain model call "
        "each round, input `messages`, output `text` (TAM)",
    )
    model_role: Literal["user", "agent"] = Field(
        "agent", description="Which configured model answers: the user's or the agent's"
    )
    connection: str | None = Field(
        None,
        max_length=80,
        description="A named connection (Settings → Connections) that answers instead of "
        "model_role's model; None: that model (or, on the user model, the chat's connection)",
    )
    protocol: AgentProtocol = Field(
        "auto",
        description="tam: tool calls in the text; native: the endpoint's tools/tool_calls; "
        "auto: native unless the endpoint refuses `tools` (then TAM)",
    )
    max_steps: int = Field(8, ge=1, le=100, description="Model rounds at most per turn")
    policy: ToolPolicy = Field(
        default_factory=lambda: ToolPolicy(default="allow"),
        description="allow/ask/deny rules of this agent, combined with the global policy "
        "(the stricter wins); by default it adds nothing to the global policy, the "
        "inventory already limits what the agent may call",
    )
    kb_access: KbAccess = Field(default_factory=KbAccess)
    stealth_tools: list[str] = Field(
        default_factory=list,
        description="Tool id globs whose calls and results stay out of later prompts",
    )
    call_timeout_s: float = Field(30.0, gt=0, le=3600, description="Longest a tool call may run")

    def is_stealth(self, tool_id: str) -> bool:
        return any(fnmatch.fnmatchcase(tool_id, pattern) for pattern in self.stealth_tools)

    def with_allow_rule(self, tool_id: str) -> AgentProfile:
        """This profile with an ``allow`` rule for exactly ``tool_id`` (a person answered
        "always"); a rule that named exactly that tool is replaced."""
        return self.model_copy(update={"policy": self.policy.with_rule(tool_id, "allow")})


def check_agent_id(agent_id: str) -> str:
    if not isinstance(agent_id, str) or not _ID.match(agent_id):
        raise InvalidInput.of(
            "agent profile id",
            [
                FieldProblem(
                    "id",
                    f"{str(agent_id)[:80]!r} is not allowed: use 1-64 letters, digits, "
                    "'_' or '-', starting with a letter or digit",
                )
            ],
        )
    return agent_id


def validate_profile(data: Any, where: Path | str) -> AgentProfile:
    """``data`` as a profile, or :class:`FileFormatError` naming ``where``, field, reason."""
    return validate_document(AgentProfile, data, where)


class AgentProfileProblem(BaseModel):
    """A profile file that does not read."""

    id: str
    file: str
    problems: list[dict[str, str]] = Field(description="[{field, reason}]")


class AgentLibrary:
    """The agent profiles of one project (``<project>/agents/*.json``)."""

    def __init__(self, project_dir: Path) -> None:
        self.project_dir = project_dir
        self.folder = project_dir / AGENTS_DIR
        self._lock = threading.Lock()

    def path(self, agent_id: str) -> Path:
        return self.folder / f"{check_agent_id(agent_id)}.json"

    def ids(self) -> list[str]:
        return json_file_ids(self.folder)

    def exists(self, agent_id: str) -> bool:
        try:
            return self.path(agent_id).is_file()
        except InvalidInput:
            return False

    def get(self, agent_id: str) -> AgentProfile:
        """The profile; :class:`NotFound` when there is no file, :class:`FileFormatError`
        when it does not read or its ``id`` is not its file name."""
        path = self.path(agent_id)
        if not path.is_file():
            raise NotFound(f"no agent profile {agent_id!r} (looked for {path})")
        profile = validate_profile(read_json_object(path), path)
        if profile.id != agent_id:
            raise FileFormatError(
                path, [FieldProblem("id", f"is {profile.id!r}, but the file is {agent_id}.json")]
            )
        return profile

    def scan(self) -> tuple[list[AgentProfile], list[AgentProfileProblem]]:
        """The profiles that read, and the files that do not (each with its problems)."""
        good: list[AgentProfile] = []
        bad: list[AgentProfileProblem] = []
        for agent_id in self.ids():
            path = self.folder / f"{agent_id}.json"
            try:
                good.append(self.get(agent_id))
            except FileFormatError as exc:
                problems = [{"field": p.field, "reason": p.reason} for p in exc.problems]
                bad.append(AgentProfileProblem(id=agent_id, file=str(path), problems=problems))
            except (StoryloomError, OSError) as exc:
                problem = {"field": "", "reason": str(exc)}
                bad.append(AgentProfileProblem(id=agent_id, file=str(path), problems=[problem]))
        return good, bad

    def list(self) -> list[AgentProfile]:
        """The profiles that read (see :meth:`scan` for the broken ones)."""
        return self.scan()[0]

    def save(self, profile: AgentProfile | dict[str, Any]) -> AgentProfile:
        """Write the profile (created or replaced); a dict is validated first, and a bad
        one raises :class:`~storyloom.core.errors.InvalidInput` with nothing written."""
        # A model built with model_construct or changed in place is checked again.
        data = profile.model_dump(mode="json") if isinstance(profile, AgentProfile) else profile
        try:
            profile = AgentProfile.model_validate(data)
        except ValidationError as exc:
            raise InvalidInput.from_validation("agent profile", exc) from None
        path = self.path(profile.id)
        with self._lock:
            atomic_write_text(path, model_json_text(profile))
        return profile

    def allow_always(self, agent_id: str, tool_id: str) -> AgentProfile:
        """Add an ``allow`` rule for ``tool_id`` to the saved profile (read afresh, so an
        edit made meanwhile is kept)."""
        with self._lock:
            profile = self.get(agent_id).with_allow_rule(tool_id)
            atomic_write_text(self.path(agent_id), model_json_text(profile))
        return profile

    def delete(self, agent_id: str) -> None:
        path = self.path(agent_id)
        with self._lock:
            if not path.is_file():
                raise NotFound(f"no agent profile {agent_id!r} (looked for {path})")
            path.unlink()
