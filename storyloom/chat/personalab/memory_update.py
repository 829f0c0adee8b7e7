""" "Update memory" (seed 004): the agent model rewrites the character's evolved persona.

The base persona never changes; the evolved persona is a qualitative description of how
the character has grown through this conversation. The agent model proposes a new text
from the conversation; the user sees it as a diff and accepts it (or not): nothing is
written here.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence

from pydantic import BaseModel, Field

from storyloom.chat.personalab.summaries import (
    endpoint_counter,
    transcript_budget,
    transcript_lines,
    transcript_tail,
)
from storyloom.chat.store.conversation import CharacterSnapshot
from storyloom.chat.store.snapshot import HistoryMessage
from storyloom.chat.store.turn_tree import ChatError
from storyloom.core.settings import ChatEndpoint
from storyloom.llm.chat import ChatClient

MEMORY_SYSTEM_PROMPT = (
    "You maintain a roleplay character's memory. The character has a base persona, which "
    "stays unchanged: do not rewrite, repeat or contradict it. You write the evolved "
    "persona: how the character has changed through the conversation so far, their "
    "feelings toward the people they met, what they learned, what they now want or fear, "
    "the promises and secrets they keep. Keep what still holds from the current evolved "
    "persona and fold in what the conversation adds. Describe qualitatively, in prose; "
    "use no numbers, scores or stats. Write in the language of the conversation. "
    "Return only the new evolved persona text, with no heading or commentary."
)

_FENCE = re.compile(r"^```[^\n]*\n(.*?)\n?```$", re.DOTALL)
_LABEL = re.compile(
    r"^(?:\*\*)?(?:new\s+)?evolved[ _]persona(?:\s*[:：]\s*\*\*|\*\*\s*[:：]|\s*[:：])\s*",
    re.IGNORECASE,
)


class MemoryProposal(BaseModel):
    """A proposed evolved persona and how it differs from the current one."""

    evolved_persona: str
    previous: str
    diff: list[str] = Field(description="Unified diff lines, current → proposed")


def persona_diff(previous: str, proposed: str) -> list[str]:
    """Unified diff lines of two persona texts (empty when they are equal)."""
    return list(
        difflib.unified_diff(
            previous.splitlines(),
            proposed.splitlines(),
            fromfile="evolved_persona (current)",
            tofile="evolved_persona (proposed)",
            lineterm="",
        )
    )


def clean_persona_text(text: str) -> str:
    """The answer without the wrapping models add anyway: a code fence, a label, quotes."""
    text = text.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1).strip()
    text = _LABEL.sub("", text, count=1).strip()
    if len(text) > 1 and text[0] == text[-1] and text[0] in "\"'":
        text = text[1:-1].strip()
    return text


def memory_prompt(
    snapshot: CharacterSnapshot, transcript: str, *, character_name: str
) -> list[dict[str, str]]:
    current = snapshot.evolved_persona.strip() or "(empty: this is the first update)"
    user = (
        f"Character: {character_name}\n\n"
        f"Base persona (unchanged):\n{snapshot.base_persona.strip() or '(none)'}\n\n"
        f"Current evolved persona:\n{current}\n\n"
        f"Conversation:\n{transcript}\n\n"
        "Write the new evolved persona."
    )
    return [
        {"role": "system", "content": MEMORY_SYSTEM_PROMPT},
        {"role": "user", "content": user},
    ]


async def propose_memory_update(
    endpoint: ChatEndpoint,
    snapshot: CharacterSnapshot,
    history: Sequence[HistoryMessage],
    *,
    user_name: str = "User",
) -> MemoryProposal:
    """Ask the agent model at ``endpoint`` for a new evolved persona.

    The conversation is cut from the start when it does not fit the model's context.
    Raises ``ChatError`` for an empty conversation or an empty answer, and
    :class:`~storyloom.llm.errors.LLMError` when the endpoint fails.
    """
    name = str(snapshot.card.get("name") or snapshot.source_preset or "the character")
    lines = transcript_lines(history, user_name=user_name, character_name=name)
    if not lines:
        raise ChatError("there is nothing to remember yet: the conversation has no messages")
    counter = endpoint_counter(endpoint)
    fixed = counter.count(snapshot.base_persona) + counter.count(snapshot.evolved_persona)
    budget = max(256, await transcript_budget(endpoint) - fixed)
    transcript = transcript_tail(lines, counter, budget)
    async with ChatClient(endpoint) as client:
        result = await client.complete(memory_prompt(snapshot, transcript, character_name=name))
    proposed = clean_persona_text(result.text)
    if not proposed:
        raise ChatError("the agent model returned an empty persona; try again or another model")
    previous = snapshot.evolved_persona
    return MemoryProposal(
        evolved_persona=proposed, previous=previous, diff=persona_diff(previous, proposed)
    )
