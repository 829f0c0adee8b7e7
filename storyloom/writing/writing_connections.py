"""Which endpoint each of the writing studio's roles talks to.

A writing node's ``role`` names the user model (it writes the story: drafts, revisions)
or the agent model (it plans, reads claims for Role C, analyses intent, curates, helps
build workflows). Settings → Writing may pick a named connection for either
(``writing.user_connection`` / ``writing.agent_connection``); without one, the role's
model answers.
"""

from __future__ import annotations

from storyloom.core.settings import ChatEndpoint, Settings


def writing_endpoint(role: str, settings: Settings) -> ChatEndpoint:
    """The endpoint of writing role ``role`` ("agent" or "user"); a connection that is
    gone is a :class:`~storyloom.core.settings.ConnectionNotFound` naming it."""
    agent = role in ("agent", "agent_llm")
    chosen = settings.writing.agent_connection if agent else settings.writing.user_connection
    which = "agent" if agent else "user"
    return settings.endpoint_for(
        which, chosen, chosen_in=f"Settings → Writing ({which} connection)"
    )
