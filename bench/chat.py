"""What does the chat engine cost at the size of a long roleplay?

(a) Time travel. A 10,000-turn conversation (a user message and a reply each) with 50
    branches, every reply changing the state (variables, lore timers). Moving the pointer
    to a deep turn and reconstructing its state, storyloom (keyframes every 32 messages
    plus deltas, caches cold) against the naive way: every delta replayed from the root.
    Ends with ``ratio:`` (naive / storyloom); the issue's target is at least 50.
(b) Engine time of one turn without the LLM, at that size: the context snapshot (history
    chain, state, lore activation over a 1,000-entry knowledge base), the default chat
    pipeline, the Filament parse of a 2,000-token reply and the writes. The LLM is the
    replay server answering at once; the invoker node's own time is printed and taken
    off. Target: under 50 ms.
(c) Opening a 10,000-message conversation whose every reply has 3 swipes: through the
    API (``GET /api/chats/{id}``), and in the chat page (Chromium, from navigation to the
    last message on screen). SillyTavern 1.18, measured on the same shape of chat, takes
    a median 200 ms to fetch it and 477 ms to open it in its page; the target is under a
    third of each.

Prints figures, asserts nothing.

    .venv/bin/python bench/chat.py [--rounds 5] [--skip-page]
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonpatch

from storyloom.chat.chat_state import ChatState
from storyloom.chat.state_chain import state_delta
from storyloom.chat.turn_tree import NewMessage, TurnTree
from storyloom.knowledge.timed_effects import TimedEffect, TimedEffectsState
from storyloom.store.database import Database

TURNS = 10_000
BRANCHES = 50
BRANCH_TURNS = 20
ST_FETCH_MS = 200.0
ST_PAGE_MS = 477.0


def median_ms(rounds: int, run: Callable[[], Any]) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        run()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


# -- (a) ----------------------------------------------------------------------------------


def turn_state(rng: random.Random, previous: ChatState, turn: int) -> ChatState:
    """The state after a reply: a few variables change, a lore timer starts or ends."""
    variables = dict(previous.variables)
    variables["turn"] = turn
    variables["hp"] = max(0, int(variables.get("hp", 100)) + rng.randint(-5, 5))
    variables[f"flag_{rng.randrange(200)}"] = rng.random() < 0.5
    inventory = list(variables.get("inventory", []))
    if rng.random() < 0.1:
        inventory.append(f"item {turn}")
    variables["inventory"] = inventory[-20:]
    sticky = dict(previous.timed_effects.sticky.get("kb", {}))
    if rng.random() < 0.2:
        sticky[f"e{rng.randrange(50)}"] = TimedEffect(start=turn * 2, end=turn * 2 + 6)
    timed = TimedEffectsState(sticky={"kb": sticky} if sticky else {})
    return ChatState(variables=variables, timed_effects=timed)


def build_long_chat(
    tree: TurnTree, *, turns: int, branches: int, seed: int = 7
) -> tuple[str, list[str], dict[str, ChatState]]:
    """The conversation of (a): its id, the ids of the main line, the states written."""
    rng = random.Random(seed)
    conversation = tree.create_conversation(project_id="bench", title="long chat")
    rows: list[NewMessage] = []
    states: dict[str, ChatState] = {}
    main: list[str] = []
    state = ChatState(variables={"hp": 100})
    parent: str | None = None
    for turn in range(turns):
        user_id, reply_id = f"u{turn:06d}", f"a{turn:06d}"
        rows.append(
            NewMessage(
                message_id=user_id, parent_id=parent, role="user", content=f"I go on ({turn})."
            )
        )
        state = turn_state(rng, state, turn)
        rows.append(
            NewMessage(
                message_id=reply_id,
                parent_id=user_id,
                role="assistant",
                content=f"The story goes on, turn {turn}.",
                state=state,
            )
        )
        states[user_id] = states.get(parent or "", ChatState(variables={"hp": 100}))
        states[reply_id] = state
        main += [user_id, reply_id]
        parent = reply_id
    for branch in range(branches):
        fork = main[rng.randrange(len(main) // 2, len(main)) | 1]  # a reply
        branch_state = states[fork]
        parent = fork
        for turn in range(BRANCH_TURNS):
            user_id, reply_id = f"b{branch:02d}u{turn:03d}", f"b{branch:02d}a{turn:03d}"
            rows.append(
                NewMessage(message_id=user_id, parent_id=parent, role="user", content="Other.")
            )
            branch_state = turn_state(rng, branch_state, 100_000 + turn)
            rows.append(
                NewMessage(
                    message_id=reply_id,
                    parent_id=user_id,
                    role="assistant",
                    content="Another way.",
                    state=branch_state,
                )
            )
            states[user_id] = states[parent]
            states[reply_id] = branch_state
            parent = reply_id
    tree.add_messages(conversation.id, rows)
    return conversation.id, main, states


def naive_deltas(tree: TurnTree, path: list[str], states: dict[str, ChatState]) -> list[str]:
    """The naive store: one delta per message from its parent, none of them keyframes."""
    out = []
    previous = ChatState().as_json()
    for message_id in path:
        doc = states[message_id].as_json()
        out.append(jsonpatch.JsonPatch(state_delta(previous, doc)).to_string())
        previous = doc
    return out


def bench_time_travel(rounds: int) -> None:
    print(f"(a) {TURNS:,}-turn conversation with {BRANCHES} branches: time travel")
    with tempfile.TemporaryDirectory() as tmp:
        db = Database(Path(tmp) / "bench.db")
        tree = TurnTree(db)
        start = time.perf_counter()
        conversation_id, main, states = build_long_chat(tree, turns=TURNS, branches=BRANCHES)
        print(f"    built {len(states):,} messages in {time.perf_counter() - start:.1f} s")
        target = main[int(len(main) * 0.9) | 1]
        path_ids = [m.id for m in tree.path(target)]
        stored = naive_deltas(tree, path_ids, states)

        def storyloom_way() -> None:
            fresh = TurnTree(db)  # cold caches: no reconstructed state kept
            fresh.set_pointer(conversation_id, target)
            state = fresh.state_at(target)
            assert state == states[target]

        def naive_way() -> None:
            doc: Any = ChatState().as_json()
            for text in stored:
                doc = jsonpatch.JsonPatch.from_string(text).apply(doc)
            assert ChatState.from_json(doc) == states[target]

        ours = median_ms(rounds, storyloom_way)
        naive = median_ms(rounds, naive_way)
        depth = len(path_ids)
        print(f"    pointer to depth {depth:,} and its state: storyloom {ours:.2f} ms")
        print(f"    naive replay of {depth:,} deltas from the root: {naive:.2f} ms")
        print(f"    ratio: {naive / ours:.1f}")
        db.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--skip-page", action="store_true", help="skip the browser in (c)")
    args = parser.parse_args()
    bench_time_travel(args.rounds)


if __name__ == "__main__":
    main()
