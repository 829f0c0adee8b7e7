"""``/api/agents``: the project's agent profiles (``<project>/agents/<id>.json``).

The JSON is the file's own (snake_case field names, as the seed writes
``tool_ids_inventory``). ``POST`` creates (409 when the id is taken), ``PUT`` replaces an
existing profile (404 when there is none), ``DELETE`` removes it. A profile that does not
validate is a 422 naming each field, and nothing is written.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from storyloom.core.errors import Conflict, FieldProblem, InvalidInput, NotFound
from storyloom.server.api_errors import error_responses
from storyloom.server.state import server_state
from storyloom.tools.agent_profile import AgentLibrary, AgentProfile, check_agent_id

router = APIRouter(prefix="/api/agents", tags=["agents"])

_ERRORS = error_responses(404, 409, 422)


class AgentExists(Conflict):
    def __init__(self, agent_id: str) -> None:
        super().__init__(f"agent profile {agent_id!r} already exists; save it with PUT")


def _library(request: Request) -> AgentLibrary:
    library = server_state(request).tools.agents.library
    if library is None:  # the server always has a project; the CLI may not
        raise NotFound("agent profiles need a project")
    assert isinstance(library, AgentLibrary)
    return library


@router.get("", response_model=list[AgentProfile])
def list_agents(request: Request) -> list[AgentProfile]:
    """The profiles that read, by id (a broken file is left out; its GET says why)."""
    return _library(request).list()


@router.post("", status_code=201, response_model=AgentProfile, responses=_ERRORS)
def create_agent(request: Request, profile: AgentProfile) -> AgentProfile:
    library = _library(request)
    if library.exists(profile.id):
        raise AgentExists(profile.id)
    return library.save(profile)


@router.get("/{agent_id}", response_model=AgentProfile, responses=_ERRORS)
def get_agent(request: Request, agent_id: str) -> AgentProfile:
    return _library(request).get(check_agent_id(agent_id))


@router.put("/{agent_id}", response_model=AgentProfile, responses=_ERRORS)
def put_agent(request: Request, agent_id: str, profile: AgentProfile) -> AgentProfile:
    """Replace the profile ``agent_id``; the body's ``id`` must be the same."""
    library = _library(request)
    check_agent_id(agent_id)
    if profile.id != agent_id:
        reason = f"is {profile.id!r}, but the profile saved is {agent_id!r}"
        raise InvalidInput.of("agent profile", [FieldProblem("id", reason)])
    if not library.exists(agent_id):
        raise NotFound(f"no agent profile {agent_id!r}; create it with POST /api/agents")
    return library.save(profile)


@router.delete("/{agent_id}", status_code=204, responses=_ERRORS)
def delete_agent(request: Request, agent_id: str) -> Response:
    _library(request).delete(check_agent_id(agent_id))
    return Response(status_code=204)
