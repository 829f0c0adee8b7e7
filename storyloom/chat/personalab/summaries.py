"""Summarise and continue (seed 004): plot-point summaries, their index, and new chats.

"Summarise" asks the agent model for the conversation's plot points as JSON
(``{"points": [...]}``, held to that schema where the endpoint takes one, see
:mod:`storyloom.llm.structured_output`; a bare array, one in a code fence or a numbered
list is read too). The points become a
summary preset (:mod:`storyloom.chat.personalab.library`) and are indexed in SQLite with their
embeddings (:class:`SummaryIndex`), so retrieval can bring old events back into the
prompt, scoped by conversation (``rag_scope``: ``self_only`` searches just the
conversation itself). "Continue" starts a new conversation from :func:`seed_messages`:
the summaries as system messages and the last turns of the old branch, in the order the
user chose.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel

from storyloom.chat.personalab.export import SUMMARY_TYPE, is_summary, number_turns
from storyloom.chat.personalab.library import SummaryPoint, SummaryPreset
from storyloom.chat.store.message import Message
from storyloom.chat.store.snapshot import HistoryMessage, RagHit
from storyloom.chat.store.turn_tree import ChatError, NewMessage, new_id
from storyloom.core.settings import ChatEndpoint
from storyloom.llm.chat import ChatClient
from storyloom.llm.context_size import context_size_of
from storyloom.llm.embeddings import EmbeddingProvider
from storyloom.llm.structured_output import ask_json
from storyloom.llm.tokens import TokenCounter, token_counter
from storyloom.store.database import Database

SeedOrder = Literal["summary_first", "last_n_first"]

ANSWER_RESERVE_TOKENS = 1536
"""Room left for the instructions and the answer when a transcript is cut to fit."""
MIN_TRANSCRIPT_TOKENS = 512

SUMMARY_SYSTEM_PROMPT = (
    "You summarise a roleplay conversation into plot points for long-term memory. "
    "Each plot point is one event or development: who did what, what was learned, "
    "promised or decided, how a relationship changed. Write each in one or two "
    "sentences, in the past tense, in the language of the conversation, keeping names. "
    'Answer only JSON: {"points": ["<plot point>", ...]}, the points in story order, '
    "without commentary."
)


class PlotPoints(BaseModel):
    """What the agent model answers to "summarise"."""

    points: list[str]


def _plot_points_json(text: str) -> dict[str, list[str]]:
    return {"points": parse_plot_points(text)}


# -- transcripts ----------------------------------------------------------------------


def transcript_lines(
    history: Sequence[HistoryMessage], *, user_name: str, character_name: str
) -> list[str]:
    """One ``Name: text`` line per message, as the agent model reads a conversation."""
    lines: list[str] = []
    for message in history:
        text = message.content.strip()
        if not text:
            continue
        if message.role == "user":
            speaker = message.name or user_name
        elif message.role == "assistant":
            speaker = message.name or character_name
        else:
            speaker = message.name or "System"
        lines.append(f"{speaker}: {text}")
    return lines


async def transcript_budget(endpoint: ChatEndpoint) -> int:
    """Tokens of transcript one request to ``endpoint`` can carry (in the context its
    server really has)."""
    window = await asyncio.to_thread(context_size_of, endpoint)
    return max(MIN_TRANSCRIPT_TOKENS, window - ANSWER_RESERVE_TOKENS)


def endpoint_counter(endpoint: ChatEndpoint) -> TokenCounter:
    return token_counter(endpoint.model, endpoint.token_encoding)


def transcript_chunks(lines: Sequence[str], counter: TokenCounter, max_tokens: int) -> list[str]:
    """The lines joined into pieces of at most ``max_tokens`` each (a longer line is cut)."""
    chunks: list[str] = []
    current: list[str] = []
    used = 0
    for line in lines:
        cost = counter.count(line) + 1
        if cost > max_tokens:
            line = counter.decode(counter.encode(line)[: max_tokens - 1])
            cost = max_tokens
        if current and used + cost > max_tokens:
            chunks.append("\n".join(current))
            current, used = [], 0
        current.append(line)
        used += cost
    if current:
        chunks.append("\n".join(current))
    return chunks


def transcript_tail(lines: Sequence[str], counter: TokenCounter, max_tokens: int) -> str:
    """The latest lines that fit in ``max_tokens`` (the end of a conversation matters most)."""
    kept: list[str] = []
    used = 0
    for line in reversed(lines):
        cost = counter.count(line) + 1
        if used + cost > max_tokens:
            if not kept:
                kept.append(counter.decode(counter.encode(line)[-(max_tokens - 1) :]))
            break
        kept.append(line)
        used += cost
    return "\n".join(reversed(kept))


# -- summarising ----------------------------------------------------------------------

_FENCE = re.compile(r"```[^\n`]*\n?(.*?)```", re.DOTALL)
_BULLET = re.compile(r"^\s*(?:[-*•·]|\(?\d{1,3}[.)、:：]|\d{1,3}\s*-)\s*")
_POINT_KEYS = ("content", "summary", "text", "event", "point")
_LIST_KEYS = ("summaries", "plot_points", "points", "events", "items")


def _point_text(item: Any) -> str:
    if isinstance(item, str):
        return item.strip()
    if isinstance(item, dict):
        for key in _POINT_KEYS:
            value = item.get(key)
            if isinstance(value, str) and value.strip():
                return value.strip()
    if isinstance(item, int | float) and not isinstance(item, bool):
        return str(item)
    return ""


def _json_points(text: str) -> list[str] | None:
    start = text.find("[")
    end = text.rfind("]")
    candidates = [text[start : end + 1]] if 0 <= start < end else []
    brace, close = text.find("{"), text.rfind("}")
    if 0 <= brace < close:
        candidates.append(text[brace : close + 1])
    for candidate in candidates:
        try:
            data = json.loads(candidate)
        except json.JSONDecodeError:
            continue
        if isinstance(data, dict):
            data = next((data[k] for k in _LIST_KEYS if isinstance(data.get(k), list)), None)
        if isinstance(data, list):
            return [t for t in (_point_text(item) for item in data) if t]
    return None


def parse_plot_points(text: str) -> list[str]:
    """Plot points from the agent's answer: a JSON array (bare, in a code fence, or an
    object holding one), else one point per numbered or bulleted line."""
    fenced = _FENCE.search(text)
    body = fenced.group(1) if fenced else text
    points = _json_points(body)
    if points is None and fenced:
        points = _json_points(text)
    if points is not None:
        return points
    out: list[str] = []
    for raw in body.splitlines():
        line = raw.strip()
        if not line or line.startswith("```") or line in ("[", "]"):
            continue
        line = _BULLET.sub("", line).strip().strip('",').strip()
        if line:
            out.append(line)
    return out


async def summarise(
    endpoint: ChatEndpoint,
    history: Sequence[HistoryMessage],
    *,
    character_name: str,
    user_name: str = "User",
) -> list[SummaryPoint]:
    """The conversation's plot points, by the agent model at ``endpoint``.

    A conversation longer than the model's context is summarised in parts, in order.
    Raises ``ChatError`` when there is nothing to summarise or no point comes back, and
    :class:`~storyloom.llm.errors.LLMError` when the endpoint fails.
    """
    lines = transcript_lines(history, user_name=user_name, character_name=character_name)
    if not lines:
        raise ChatError("there is nothing to summarise: the conversation has no messages")
    budget = await transcript_budget(endpoint)
    chunks = transcript_chunks(lines, endpoint_counter(endpoint), budget)
    texts: list[str] = []
    async with ChatClient(endpoint) as client:
        for number, chunk in enumerate(chunks, start=1):
            part = f" (part {number} of {len(chunks)})" if len(chunks) > 1 else ""
            prompt = (
                f"Conversation between {user_name} and {character_name}{part}:\n\n{chunk}\n\n"
                "Return the JSON with the plot points."
            )
            answer = await ask_json(
                client,
                [
                    {"role": "system", "content": SUMMARY_SYSTEM_PROMPT},
                    {"role": "user", "content": prompt},
                ],
                PlotPoints,
                what="plot points",
                parse=_plot_points_json,
            )
            texts.extend(t for t in (p.strip() for p in answer.points) if t)
    if not texts:
        raise ChatError("the agent model returned no plot points; try again or another model")
    return [SummaryPoint(index=i, content=t) for i, t in enumerate(texts, start=1)]


# -- the index ------------------------------------------------------------------------


def _unit_blob(vector: Sequence[float]) -> tuple[bytes, int]:
    array = np.asarray(vector, dtype=np.float32).reshape(-1)
    norm = float(np.linalg.norm(array))
    if norm > 0:
        array = array / np.float32(norm)
    return array.astype(np.float32).tobytes(), int(array.shape[0])


class SummaryIndex:
    """Plot points per conversation with their embeddings, searched by cosine similarity.

    Rows live in ``chat_summary`` (migration 5) and go when their conversation is deleted.
    Vectors are stored unit-length with the id of the model that made them; a search
    embeds again the rows another model made, so changing the embedding model in
    Settings keeps retrieval working.
    """

    def __init__(self, db: Database, embedder: EmbeddingProvider) -> None:
        self.db = db
        self.embedder = embedder

    async def index(self, conversation_id: str, points: Sequence[SummaryPoint], source: str) -> int:
        """Store ``points`` for the conversation under ``source`` (a summary preset id),
        replacing what that source had; returns how many were stored."""
        vectors = await self.embedder.embed_passages([p.content for p in points])
        model = self.embedder.model_id
        now = time.time()
        with self.db.transaction() as conn:
            conn.execute(
                "DELETE FROM chat_summary WHERE conversation_id = ? AND source = ?",
                (conversation_id, source),
            )
            for point, vector in zip(points, vectors, strict=True):
                blob, dim = _unit_blob(vector)
                conn.execute(
                    "INSERT INTO chat_summary (conversation_id, source, idx, content, model,"
                    " dim, embedding, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (conversation_id, source, point.index, point.content, model, dim, blob, now),
                )
        return len(points)

    def points(self, conversation_id: str, source: str | None = None) -> list[SummaryPoint]:
        """The stored points of a conversation (of one source, or all), in order."""
        sql = "SELECT idx, content FROM chat_summary WHERE conversation_id = ?"
        args: tuple[str, ...] = (conversation_id,)
        if source is not None:
            sql += " AND source = ?"
            args += (source,)
        rows = self.db.connection().execute(sql + " ORDER BY source, idx", args).fetchall()
        return [SummaryPoint.model_validate({"index": i, "content": c}) for i, c in rows]

    def delete(self, conversation_id: str, source: str | None = None) -> int:
        """Forget a conversation's points (of one source, or all); returns how many."""
        sql = "DELETE FROM chat_summary WHERE conversation_id = ?"
        args: tuple[str, ...] = (conversation_id,)
        if source is not None:
            sql += " AND source = ?"
            args += (source,)
        with self.db.transaction() as conn:
            conn.execute(sql, args)
            changed: int = conn.changes()
            return changed

    async def search(
        self, query: str, conversation_ids: Sequence[str], top_k: int = 5
    ) -> list[RagHit]:
        """The ``top_k`` points of these conversations nearest to ``query``, best first."""
        ids = list(dict.fromkeys(conversation_ids))
        if not query.strip() or not ids or top_k <= 0:
            return []
        rows = self._rows(ids)
        if not rows:
            return []
        await self._refresh([row for row in rows if row["model"] != self.embedder.model_id])
        rows = [row for row in self._rows(ids) if row["model"] == self.embedder.model_id]
        query_blob, dim = _unit_blob(await self.embedder.embed_query(query))
        rows = [row for row in rows if row["dim"] == dim]
        if not rows:
            return []
        matrix = np.stack([np.frombuffer(row["embedding"], dtype=np.float32) for row in rows])
        scores = matrix @ np.frombuffer(query_blob, dtype=np.float32)
        order = sorted(range(len(rows)), key=lambda i: (-float(scores[i]), rows[i]["key"]))
        return [
            RagHit(
                id=f"summary_{rows[i]['conversation_id']}_{rows[i]['source']}_{rows[i]['idx']}",
                content=rows[i]["content"],
                score=round(float(scores[i]), 6),
                source=rows[i]["source"],
            )
            for i in order[:top_k]
        ]

    def _rows(self, conversation_ids: list[str]) -> list[dict[str, Any]]:
        marks = ", ".join("?" for _ in conversation_ids)
        cursor = self.db.connection().execute(
            "SELECT id, conversation_id, source, idx, content, model, dim, embedding"
            f" FROM chat_summary WHERE conversation_id IN ({marks})",
            tuple(conversation_ids),
        )
        return [
            {
                "id": row[0],
                "conversation_id": row[1],
                "source": row[2],
                "idx": row[3],
                "content": row[4],
                "model": row[5],
                "dim": row[6],
                "embedding": row[7],
                "key": (row[1], row[2], row[3]),
            }
            for row in cursor.fetchall()
        ]

    async def _refresh(self, stale: list[dict[str, Any]]) -> None:
        if not stale:
            return
        vectors = await self.embedder.embed_passages([row["content"] for row in stale])
        model = self.embedder.model_id
        with self.db.transaction() as conn:
            for row, vector in zip(stale, vectors, strict=True):
                blob, dim = _unit_blob(vector)
                conn.execute(
                    "UPDATE chat_summary SET model = ?, dim = ?, embedding = ? WHERE id = ?",
                    (model, dim, blob, row["id"]),
                )


# -- continuing from a summary ----------------------------------------------------------


NewMessageSpec = NewMessage
"""A message of a new conversation's opening: :class:`~storyloom.chat.store.turn_tree.NewMessage`
rows, each the parent of the next, ready for :meth:`TurnTree.add_messages`."""


def summary_messages(summary: SummaryPreset) -> list[NewMessage]:
    """One system message per plot point, marked so exports write it as a summary line."""
    return [
        NewMessage(
            role="system",
            content=point.content,
            extra={"type": SUMMARY_TYPE, "summary_id": summary.summary_id, "index": point.index},
        )
        for point in summary.summaries
    ]


def last_turns(previous_path: Sequence[Message], last_n_turns: int) -> list[Message]:
    """The user and assistant messages of the last ``last_n_turns`` turns of a branch
    (a failed reply without text and earlier summaries are left out)."""
    if last_n_turns <= 0:
        return []
    talk = [
        m
        for m in previous_path
        if m.role in ("user", "assistant")
        and not is_summary(m)
        and not (m.status == "error" and not m.content)
    ]
    turns = number_turns(talk)
    if not turns:
        return []
    first = turns[-1] - last_n_turns + 1
    return [m for m, turn in zip(talk, turns, strict=True) if turn >= first]


def seed_messages(
    summary: SummaryPreset,
    previous_path: Sequence[Message],
    order: SeedOrder,
    last_n_turns: int,
) -> list[NewMessage]:
    """The opening of a conversation continued from ``summary``: its plot points as
    system messages and the last ``last_n_turns`` turns of ``previous_path`` (root →
    leaf of the old branch), summaries first or turns first as ``order`` says.

    The rows form one chain (fresh ``message_id``s, each row the parent of the next), so
    ``tree.add_messages(new_conversation_id, rows)`` adds them as they are.
    """
    if order not in ("summary_first", "last_n_first"):
        raise ChatError(f"order {order!r} is not known; use summary_first or last_n_first")
    summaries = summary_messages(summary)
    turns = [
        NewMessage(
            role=m.role,
            content=m.content,
            name=m.name,
            thought=m.thought,
            extra={"copied_from": m.id, "source_conversation": m.conversation_id},
        )
        for m in last_turns(previous_path, last_n_turns)
    ]
    rows = summaries + turns if order == "summary_first" else turns + summaries
    chained: list[NewMessage] = []
    for row in rows:
        parent = chained[-1].message_id if chained else None
        chained.append(row.model_copy(update={"message_id": new_id(), "parent_id": parent}))
    return chained
