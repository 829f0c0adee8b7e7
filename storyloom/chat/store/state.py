"""The structured state of a chat at one turn: what going back in time restores.

A :class:`ChatState` is stored per message along the state chain (keyframes + deltas, see
:mod:`storyloom.chat.store.state_chain`); the state *at* a message is the state after that
message was added. Everything a turn can change that a branch or a swipe must not
share lives here: the RPG variables (Filament ``<state_update>``, MVU JSON Patch, the
``{{setvar}}`` macros), the lore timed effects (sticky, cooldown, ``once_per_session``)
and the director's plot state.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from storyloom.knowledge.timed_effects import TimedEffectsState

PlotStatus = Literal["pending", "in_progress", "completed"]


class PlotState(BaseModel):
    """PersonaLab's ``plot_state.json`` (seed 004): where the story outline stands."""

    model_config = ConfigDict(extra="allow")

    enabled: bool = True
    current_plot_index: int = Field(default=1, ge=1, description="1-based outline point")
    current_status: PlotStatus = "in_progress"
    no_update_count: int = Field(
        default=0, ge=0, description="Replies in a row without a [PROGRESS] marker"
    )


class ChatState(BaseModel):
    """The world at one turn. Plain JSON; unknown keys are kept (a script may add some)."""

    model_config = ConfigDict(extra="allow")

    variables: dict[str, Any] = Field(
        default_factory=dict, description="Chat variables: {{getvar}}, <state_update>, MVU"
    )
    timed_effects: TimedEffectsState = Field(
        default_factory=TimedEffectsState, description="Lore sticky/cooldown/once-per-session"
    )
    plot: PlotState | None = Field(default=None, description="The director's plot state")

    def as_json(self) -> dict[str, Any]:
        """The state as the JSON document the state chain diffs and patches."""
        data: dict[str, Any] = self.model_dump(mode="json")
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ChatState:
        return cls.model_validate(data)
