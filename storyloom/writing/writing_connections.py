"""Which endpoint each of the writing studio's roles talks to.

A writing node's ``role`` names the user model (it writes the story: drafts, revisions)
or the agent model (it plans, reads claims for Role C, analyses intent, curates, helps
build workflows). Settings → Writing may pick a named connection for either
(``writing.user_connection`` / ``writing.agent_connection``); without one, the role's
model answers, and with no agent model set up the user's model answers the agent role
(``Settings.agent_model``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from storyloom.core.settings import ChatEndpoint, ConnectionNotFound, Settings


def _chosen(role: str, settings: Settings) -> tuple[bool, str | None]:
    """Whether ``role`` is the agent role, and the connection Settings → Writing picked
    for it (None: the role's own model)."""
    agent = role in ("agent", "agent_llm")
    return agent, settings.writing.agent_connection if agent else settings.writing.user_connection


def writing_endpoint(role: str, settings: Settings) -> ChatEndpoint:
    """The endpoint of writing role ``role`` ("agent" or "user"); a connection that is
    gone is a :class:`~storyloom.core.settings.ConnectionNotFound` naming it."""
    agent, chosen = _chosen(role, settings)
    which = "agent" if agent else "user"
    return settings.endpoint_for(
        which, chosen, chosen_in=f"Settings → Writing ({which} connection)"
    )


WritingModelSource = Literal["connection", "agent", "user"]
"""A named connection (Settings → Writing), the agent model, or the user's model (no
agent model is set up)."""


class WritingModelView(BaseModel):
    """Which model a writing role runs on, for the Writing page to say so (and, when
    there is none, that its memory steps are skipped and where to set one)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    source: WritingModelSource
    model: str = Field(description="The model's name as its endpoint knows it ('' unknown)")
    ready: bool = Field(
        description="It has an address (and a model): its steps run on it; false also when "
        "its local model does not run or the connection chosen is gone"
    )


def writing_model(role: str, settings: Settings) -> WritingModelView:
    """What :func:`writing_endpoint` answers ``role`` with, described."""
    agent, chosen = _chosen(role, settings)
    source: WritingModelSource = "connection" if chosen else "agent"
    if not chosen and (not agent or settings.agent_uses_user_model):
        source = "user"
    try:
        endpoint = writing_endpoint(role, settings)
    except ConnectionNotFound:
        return WritingModelView(source=source, model="", ready=False)
    return WritingModelView(source=source, model=endpoint.model, ready=endpoint.configured)
