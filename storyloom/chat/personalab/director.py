"""The director (seed 004): keeps a story on its background's outline.

With a story outline, :class:`PlotState` says which point the story is working toward.
A reply carrying the ``[PROGRESS]`` marker (or Filament's ``<progress>``) means the
point was reached: the plot moves to the next one, and after the last it is completed
and the director falls silent. A reply without it counts toward
``rag_fallback_threshold``; from there on the guidance steers firmly instead of hinting.

Everything here is a pure function of the plot state, which lives in each message's
:class:`~storyloom.chat.store.state.ChatState`: a swipe, a branch or going back in time
gets the plot state of its own branch, and nothing here mutates its input.
"""

from __future__ import annotations

from typing import Any

from storyloom.chat.store.conversation import BackgroundSnapshot
from storyloom.chat.store.state import PlotState

PROGRESS_MARKER = "[PROGRESS]"


def outline_points(background: BackgroundSnapshot | None) -> list[str]:
    """The outline's point texts in index order (point n is item n - 1)."""
    if background is None:
        return []
    points: list[tuple[int, int, str]] = []
    for position, item in enumerate(background.story_outline):
        content = _content(item)
        if content:
            points.append((_index(item, position + 1), position, content))
    return [content for _, _, content in sorted(points)]


def _content(item: Any) -> str:
    if isinstance(item, dict):
        value = item.get("content")
        return value.strip() if isinstance(value, str) else ""
    return item.strip() if isinstance(item, str) else ""


def _index(item: Any, fallback: int) -> int:
    value = item.get("index") if isinstance(item, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else fallback


def initial_plot(background: BackgroundSnapshot | None) -> PlotState | None:
    """The plot state a conversation starts with: point 1, or None without an outline."""
    if not outline_points(background):
        return None
    return PlotState(
        enabled=True, current_plot_index=1, current_status="in_progress", no_update_count=0
    )


def advance_plot(plot: PlotState, outline_len: int, progressed: bool) -> PlotState:
    """The plot state after one reply (a new object; ``plot`` is left as it was).

    ``progressed``: the next point, ``no_update_count`` back to 0; after the last point
    the plot is ``completed``. Otherwise ``no_update_count`` grows by one. A disabled or
    completed plot does not change; one whose point lies past the outline (the
    background was changed under it) is completed.
    """
    if not plot.enabled or plot.current_status == "completed":
        return plot.model_copy()
    if plot.current_plot_index > outline_len:
        return plot.model_copy(
            update={
                "current_plot_index": max(1, outline_len),
                "current_status": "completed",
                "no_update_count": 0,
            }
        )
    if not progressed:
        return plot.model_copy(
            update={"current_status": "in_progress", "no_update_count": plot.no_update_count + 1}
        )
    if plot.current_plot_index >= outline_len:
        return plot.model_copy(update={"current_status": "completed", "no_update_count": 0})
    return plot.model_copy(
        update={
            "current_plot_index": plot.current_plot_index + 1,
            "current_status": "in_progress",
            "no_update_count": 0,
        }
    )


def director_guidance(
    plot: PlotState | None, background: BackgroundSnapshot | None, threshold: int
) -> str | None:
    """The instruction the director adds to the prompt, or None when it has nothing to say.

    Below ``threshold`` replies without progress it names the current point and asks for
    the marker once the point is reached; from ``threshold`` on it tells the model to
    bring the point about in this reply.
    """
    if plot is None or not plot.enabled or plot.current_status == "completed":
        return None
    points = outline_points(background)
    index = plot.current_plot_index
    if not 1 <= index <= len(points):
        return None
    point = points[index - 1]
    where = f"point {index} of {len(points)}"
    if plot.no_update_count >= max(1, threshold):
        return (
            f"[Story director] The story has not moved for {plot.no_update_count} replies. "
            f"Steer it now toward outline {where}: {point}\n"
            "In this reply, make it happen: bring in an event, a character or a decision "
            "that reaches this point, while staying in character. When it is reached, end "
            f"the reply with {PROGRESS_MARKER}."
        )
    return (
        f"[Story director] The story is working toward outline {where}: {point}\n"
        "Let it move there naturally through the characters' choices; do not skip ahead. "
        f"When a reply reaches this point, end that reply with {PROGRESS_MARKER}."
    )
