"""The director: [PROGRESS] advances the outline, a stalled story gets a firmer steer after
rag_fallback_threshold replies, the plot completes after the last point, and every
branch keeps its own plot state."""

from __future__ import annotations

import pytest

from storyloom.chat.personalab.director import (
    PROGRESS_MARKER,
    advance_plot,
    director_guidance,
    initial_plot,
    outline_points,
)
from storyloom.chat.store.conversation import BackgroundSnapshot
from storyloom.chat.store.state import ChatState, PlotState

OUTLINE = ["Find the traitor's trail", "Sneak into the enemy hideout", "Face the old enemy"]
THRESHOLD = 3


def background(points: list[str] = OUTLINE) -> BackgroundSnapshot:
    return BackgroundSnapshot(
        source_preset="wasteland",
        name="Wasteland",
        world_setting="After the war.",
        story_outline=[{"index": i, "content": text} for i, text in enumerate(points, start=1)],
    )


def run(plot: PlotState, progress: list[bool], outline_len: int = len(OUTLINE)) -> PlotState:
    for progressed in progress:
        plot = advance_plot(plot, outline_len, progressed)
    return plot


def test_no_outline_means_no_plot_and_no_guidance() -> None:
    assert initial_plot(None) is None
    assert initial_plot(background([])) is None
    assert director_guidance(None, background(), THRESHOLD) is None


def test_a_plot_starts_at_the_first_point_in_progress() -> None:
    plot = initial_plot(background())

    assert plot == PlotState(
        enabled=True, current_plot_index=1, current_status="in_progress", no_update_count=0
    )


def test_outline_points_follow_their_index_not_their_order_in_the_file() -> None:
    shuffled = BackgroundSnapshot(
        story_outline=[
            {"index": 3, "content": "third"},
            {"index": 1, "content": "first"},
            {"index": 2, "content": "second"},
            {"index": 4, "content": "   "},
        ]
    )

    assert outline_points(shuffled) == ["first", "second", "third"]


def test_progress_moves_to_the_next_point_and_resets_the_count() -> None:
    plot = run(PlotState(), [False, False, True])

    assert plot.current_plot_index == 2
    assert plot.no_update_count == 0
    assert plot.current_status == "in_progress"


def test_replies_without_progress_count_up() -> None:
    assert run(PlotState(), [False] * 5).no_update_count == 5
    assert run(PlotState(), [False] * 5).current_plot_index == 1


def test_progress_on_the_last_point_completes_the_plot_and_silences_the_director() -> None:
    plot = run(PlotState(), [True, True])
    assert plot.current_plot_index == 3
    assert director_guidance(plot, background(), THRESHOLD) is not None

    done = advance_plot(plot, len(OUTLINE), True)

    assert done.current_status == "completed"
    assert done.current_plot_index == 3
    assert director_guidance(done, background(), THRESHOLD) is None


def test_a_completed_plot_stays_completed() -> None:
    done = run(PlotState(), [True, True, True])

    assert run(done, [True, False, False, False]) == done


def test_a_disabled_plot_does_not_move_or_guide() -> None:
    off = PlotState(enabled=False)

    assert run(off, [True, False]) == off
    assert director_guidance(off, background(), THRESHOLD) is None


def test_a_plot_past_a_shortened_outline_completes() -> None:
    plot = PlotState(current_plot_index=3, no_update_count=2)

    after = advance_plot(plot, 2, False)

    assert after.current_status == "completed"
    assert after.current_plot_index == 2
    assert director_guidance(plot, background(OUTLINE[:2]), THRESHOLD) is None


def test_guidance_names_the_current_point_and_asks_for_the_marker() -> None:
    guidance = director_guidance(PlotState(current_plot_index=2), background(), THRESHOLD)

    assert guidance is not None
    assert "Sneak into the enemy hideout" in guidance
    assert "point 2 of 3" in guidance
    assert PROGRESS_MARKER in guidance
    assert "has not moved" not in guidance


@pytest.mark.parametrize("stalled", [0, 1, 2])
def test_below_the_threshold_the_director_only_hints(stalled: int) -> None:
    plot = run(PlotState(), [False] * stalled)

    guidance = director_guidance(plot, background(), THRESHOLD)

    assert guidance is not None
    assert "naturally" in guidance
    assert "Steer it now" not in guidance


@pytest.mark.parametrize("stalled", [3, 4, 10])
def test_from_the_threshold_on_the_director_steers_firmly(stalled: int) -> None:
    plot = run(PlotState(), [False] * stalled)

    guidance = director_guidance(plot, background(), THRESHOLD)

    assert guidance is not None
    assert f"has not moved for {stalled} replies" in guidance
    assert "Steer it now toward outline point 1 of 3: Find the traitor's trail" in guidance
    assert "In this reply, make it happen" in guidance
    assert PROGRESS_MARKER in guidance


def test_progress_after_a_firm_steer_returns_to_hinting_at_the_next_point() -> None:
    plot = run(PlotState(), [False, False, False, True])

    guidance = director_guidance(plot, background(), THRESHOLD)

    assert guidance is not None
    assert "Sneak into the enemy hideout" in guidance
    assert "Steer it now" not in guidance


def test_the_threshold_is_the_conversations_setting() -> None:
    plot = run(PlotState(), [False])

    assert "Steer it now" in (director_guidance(plot, background(), 1) or "")
    assert "Steer it now" not in (director_guidance(plot, background(), 2) or "")


def test_advancing_never_changes_the_state_it_was_given() -> None:
    parent = PlotState(current_plot_index=2, no_update_count=1)
    copy = parent.model_copy()

    advance_plot(parent, len(OUTLINE), True)
    advance_plot(parent, len(OUTLINE), False)

    assert parent == copy


def test_two_branches_from_one_message_keep_their_own_plot_state() -> None:
    # The parent message's state; a swipe and the original reply branch from it.
    parent = ChatState(plot=run(PlotState(), [False, False]))

    progressed = ChatState(plot=advance_plot(parent.plot or PlotState(), len(OUTLINE), True))
    stalled = ChatState(plot=advance_plot(parent.plot or PlotState(), len(OUTLINE), False))

    assert progressed.plot == PlotState(current_plot_index=2, no_update_count=0)
    assert stalled.plot == PlotState(current_plot_index=1, no_update_count=3)
    assert parent.plot == PlotState(current_plot_index=1, no_update_count=2)
    # Each branch's next prompt follows its own plot state.
    assert "Sneak into" in (director_guidance(progressed.plot, background(), THRESHOLD) or "")
    stalled_guidance = director_guidance(stalled.plot, background(), THRESHOLD) or ""
    assert "Steer it now toward outline point 1" in stalled_guidance
    # Going back to the parent (time travel) gives back its hint, not either branch's.
    assert "naturally" in (director_guidance(parent.plot, background(), THRESHOLD) or "")


def test_plot_state_survives_the_state_chain_json_round_trip() -> None:
    state = ChatState(plot=run(PlotState(), [True, False, False]))

    restored = ChatState.from_json(state.as_json())

    assert restored.plot == state.plot
    assert restored.plot is not None and restored.plot.no_update_count == 2
