"""What the chat page needs, beyond the stored messages, to show a conversation's messages
as the player sees them: the regex scripts that change the display, the user's global
variables (a displayed template reads them) and the lore's render entries
(``[RENDER:BEFORE]``/``[RENDER:AFTER]``, added to every displayed message).

:meth:`ChatService.display_sources <storyloom.chat.service.conversations.ChatService.
display_sources>` gathers them once per view, so the REST routes and the WebSocket's
finished reply show a message the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from storyloom.chat.prompt.ejs_template import WorldInfoOf
from storyloom.chat.prompt.regex_scripts import RegexScript
from storyloom.chat.service.turn_templates import RenderEntry


@dataclass(frozen=True)
class DisplaySources:
    """A conversation's display inputs, read once for one view."""

    scripts: Sequence[RegexScript] = ()
    """Every regex script in the order they run (the display-only ones change the view)."""
    global_variables: Mapping[str, Any] = field(default_factory=dict)
    render_entries: Sequence[RenderEntry] = ()
    initial_variables: Mapping[str, Any] = field(default_factory=dict)
    """The ``[InitialVariables]`` of the lore: what a message's state lacks comes from it."""
    world_info: WorldInfoOf | None = None
    """The lore entries a displayed template reads with ``getwi`` (read when one does)."""
