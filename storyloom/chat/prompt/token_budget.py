"""The Token Budget (seed 001 §5.1): measure every block, then cut by priority to fit.

Every enabled block is counted (``tokens``), the whole prompt as the Weaver will send it
(each message's few tokens of chat format included), and while it is over the budget
the lowest-priority block goes, ties in prompt order. With the Skein Builder's
priorities that is: example dialogues first (SillyTavern fills the history before the
examples), then the history from the oldest message, then retrieved memories, then the
least important lore, then summaries and the like. Blocks of priority 100 (the main
prompt, the card, the newest user message...) are never cut; if they alone do not fit,
the Skein says so in ``warnings`` and the prompt goes out over budget rather than
without them.

On a text-completion API the prompt is one string, and the instruct template's
sequences around each message (and the story string's prefix, suffix and labels, the
chat start, the open reply) take the place of the chat format's few tokens: the budget
then counts a :class:`MessageCost` measured by formatting with the connection's
templates (:func:`~storyloom.chat.prompt.text_prompt.template_cost`), so prompt plus
the longest reply still fit the context.

Every cut is recorded (:class:`~storyloom.chat.prompt.skein.CutBlock`, with its tokens and why),
and a cut lore entry also gets a ``token_budget`` reason in the lore report, so the
inspector shows what the model did not see.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from storyloom.chat.prompt.skein import BlockKind, CutBlock, Skein
from storyloom.llm.tokens import TOKENS_PER_MESSAGE, TOKENS_REPLY_PRIMER

NEVER_CUT = 100
"""Blocks of this priority or more are never cut."""


def measure(skein: Skein, count: Callable[[str], int]) -> Skein:
    """A copy of ``skein`` with ``tokens`` set on every block (its text only)."""
    out = skein.model_copy(deep=True)
    out.blocks = [b.model_copy(update={"tokens": count(b.content)}) for b in out.blocks]
    return out


@dataclass(frozen=True)
class MessageCost:
    """Tokens the format adds: around each message, and once per prompt."""

    per_message: int = TOKENS_PER_MESSAGE
    fixed: int = TOKENS_REPLY_PRIMER


CHAT_COST = MessageCost()
"""A chat-completion API's: the chat template's tokens per message and the reply primer."""


def prompt_tokens(skein: Skein, cost: MessageCost = CHAT_COST) -> int:
    """The prompt's size, counting each non-empty enabled block as a message of its own
    (an upper bound: blocks the Weaver joins share one message's overhead)."""
    used = [b.tokens or 0 for b in skein.blocks if b.enabled and b.content]
    return sum(t + cost.per_message for t in used) + (cost.fixed if used else 0)


def apply_budget(
    skein: Skein, budget: int, count: Callable[[str], int], cost: MessageCost = CHAT_COST
) -> Skein:
    """``skein`` measured and cut to ``budget`` tokens (see the module docstring), each
    message costing ``cost`` on top of its text."""
    out = measure(skein, count)
    out.budget = budget
    total = prompt_tokens(out, cost)
    if total <= budget:
        return out
    order = sorted(
        (
            (block.priority, index)
            for index, block in enumerate(out.blocks)
            if block.enabled and block.content and block.priority < NEVER_CUT
        ),
    )
    gone: set[int] = set()
    for priority, index in order:
        if total <= budget:
            break
        block = out.blocks[index]
        tokens = block.tokens or 0
        total -= tokens + cost.per_message
        gone.add(index)
        out.cut.append(
            CutBlock(
                id=block.id,
                kind=block.kind,
                tokens=tokens,
                reason=f"over the budget of {budget} tokens; lowest priority left ({priority})",
                term="over_budget",
                values={"budget": budget, "priority": priority},
            )
        )
        if block.kind is BlockKind.LORE and block.source.id:
            _mark_lore_cut(out, block.source.id, budget)
    if total > budget:
        out.warnings.append(
            f"the prompt needs {total} tokens, over the budget of {budget}, even with "
            "everything optional cut; raise max_context_tokens or shorten the card"
        )
    out.blocks = [block for index, block in enumerate(out.blocks) if index not in gone]
    return out


def _mark_lore_cut(skein: Skein, key: str, budget: int) -> None:
    kb_id, _, entry_id = key.partition("/")
    for record in skein.lore:
        if record.kb_id == kb_id and record.entry_id == entry_id:
            record.reasons.append(
                {
                    "rule": "token_budget",
                    "detail": f"cut to fit the prompt budget of {budget} tokens",
                    "outcome": "dropped",
                }
            )
