"""One reply being written: the pipeline run behind an assistant message, and its events.

The assistant message exists (status ``streaming``) before the model is asked, so a
failure, a stop or a killed server always leaves a message to show. The pipeline's LLM
deltas go through a :class:`~storyloom.chat.reply.filament.FilamentParser` as they arrive: the
visible reply streams to the browser with thoughts apart, and the text so far is written
to SQLite at most every :data:`FLUSH_INTERVAL_S`, so ``kill -9`` loses at most that much.
The turn ends ``complete`` (reply, thought, state, the prompt for the inspector),
``partial`` (stopped or failed after some text: the text is kept) or ``error`` (failed
before any text).
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from storyloom.chat.prompt.default_pipeline import (
    INVOKER_TYPE,
    pipeline_context_tokens,
    pipeline_extra_tags,
)
from storyloom.chat.reply.filament import FilamentEvent, FilamentParser, FilamentTags
from storyloom.chat.reply.mvu_values import MVU_WARNING_KINDS, MvuWarning
from storyloom.chat.store.message import Message, MessageStatus
from storyloom.chat.store.snapshot import ContextSnapshot, dropped_lore_record
from storyloom.chat.store.state import ChatState
from storyloom.chat.store.turn_tree import TurnTree
from storyloom.workflow.events import NodeStarted, NodeStreaming, NodeToolStep, RunEvent
from storyloom.workflow.runner import RunResult, WorkflowRun, WorkflowRunner
from storyloom.workflow.workflow_file import Workflow

logger = logging.getLogger(__name__)

FLUSH_INTERVAL_S = 0.2
"""Longest time streamed text stays only in memory."""
FRAME_S = 1 / 60
"""Streamed text goes out at most once a frame: a local model can send thousands of
tokens a second, and the page cannot show them faster than it draws."""
STOPPED = "stopped"
INTERRUPTED = "interrupted: the server stopped while the reply was being written"

TurnKind = Literal["reply", "swipe", "continue"]
GENERATION_OF: dict[str, str] = {"reply": "normal", "swipe": "swipe", "continue": "continue"}
"""Turn kind → the snapshot's ``generation`` (SillyTavern's generation types)."""


# -- what a turn tells the browser ------------------------------------------------------


@dataclass(frozen=True)
class MessageAdded:
    """A message was added or finalised."""

    conversation_id: str
    message: Message
    version: int


@dataclass(frozen=True)
class StreamDelta:
    """Visible reply text (and thought text) that just arrived."""

    conversation_id: str
    message_id: str
    text: str = ""
    thought: str | None = None


@dataclass(frozen=True)
class ToolStepAdded:
    """An agent turn's tool call ended (``step`` is a ``ToolStep`` as JSON)."""

    conversation_id: str
    message_id: str
    step: dict[str, Any]


@dataclass(frozen=True)
class TurnDone:
    conversation_id: str
    message_id: str
    status: MessageStatus
    error: str | None
    version: int


@dataclass(frozen=True)
class ConversationChanged:
    """Anything else changed (an edit, a swipe, the pointer, the settings)."""

    conversation_id: str
    version: int
    listed: bool = False
    """The conversation list changed too (created, renamed, deleted)."""
    deleted: bool = False


ChatEvent = MessageAdded | StreamDelta | ToolStepAdded | TurnDone | ConversationChanged
Publish = Callable[[ChatEvent], None]


# -- the prompt as the inspector shows it -------------------------------------------------


def inspector_record(
    skein: Mapping[str, Any] | None,
    messages: Sequence[Mapping[str, Any]] | None,
    snapshot: ContextSnapshot,
    text_prompt: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """What ``extra.prompt`` keeps of a turn's prompt: the Skein's blocks with sources and
    tokens, the lore report, what the budget cut, the budget, the messages sent, and on a
    text-completion API the text sent (``text_prompt``: its pieces with their sources).

    A history block (or a prompt message, or a stretch of the text) whose text is its
    message's stored text keeps only a reference to that message: every reply would
    otherwise store the whole history again. :func:`inspector_view` puts the text back.
    """
    skein = skein or {}
    stored = {m.id: m.content for m in snapshot.history}
    blocks: list[dict[str, Any]] = []
    for raw in skein.get("blocks") or []:
        if not isinstance(raw, Mapping):
            continue
        block = {
            k: raw.get(k)
            for k in ("id", "kind", "role", "content", "source", "tokens", "depth", "name")
        }
        if raw.get("edited_by"):
            block["edited_by"] = raw["edited_by"]
        block["message_id"] = message_id = raw.get("message_id")
        if message_id is not None and stored.get(message_id) == block["content"]:
            del block["content"]
        blocks.append(block)
    by_text = {content: mid for mid, content in stored.items() if content}
    sent: list[dict[str, Any]] = []
    for raw in messages or []:
        item = dict(raw)
        content = item.get("content")
        ref = by_text.get(content) if isinstance(content, str) else None
        if ref is not None:
            del item["content"]
            item["message_id"] = ref
        sent.append(item)
    lore = skein.get("lore") or [r.model_dump(mode="json") for r in snapshot.lore_report]
    record: dict[str, Any] = {
        "blocks": blocks,
        "lore": lore,
        # Compact rows: the inspector builds their records when it is opened.
        "lore_dropped": skein.get("lore_dropped") or snapshot.lore_dropped,
        "cut": skein.get("cut") or [],
        "budget": skein.get("budget"),
        "warnings": skein.get("warnings") or [],
        "scripts": skein.get("scripts") or [],
        "messages": sent,
    }
    if snapshot.template_problems:
        record["templates"] = [p.model_dump(mode="json") for p in snapshot.template_problems]
    if text_prompt and isinstance(text_prompt.get("text"), str) and text_prompt["text"]:
        record["text_prompt"] = _compact_text(text_prompt, stored)
    return record


_MESSAGE_BLOCK = "msg:"


def _compact_text(prompt: Mapping[str, Any], stored: Mapping[str, str]) -> dict[str, Any]:
    """The text prompt with each history message's stored text as ``{"message_id"}``:
    ``parts`` joined give the text again."""
    text: str = prompt["text"]
    parts: list[str | dict[str, str]] = []
    position = 0
    for piece in prompt.get("pieces") or []:
        block = piece.get("block") if isinstance(piece, Mapping) else None
        if not isinstance(block, str) or not block.startswith(_MESSAGE_BLOCK):
            continue
        message_id = block[len(_MESSAGE_BLOCK) :]
        start, end = piece.get("start"), piece.get("end")
        if not isinstance(start, int) or not isinstance(end, int) or start < position:
            continue
        if stored.get(message_id) != text[start:end] or start == end:
            continue
        if start > position:
            parts.append(text[position:start])
        parts.append({"message_id": message_id})
        position = end
    if position < len(text):
        parts.append(text[position:])
    return {
        **{k: v for k, v in prompt.items() if k != "text"},
        "parts": parts,
    }


def _text_of(parts: Sequence[Any], texts: Mapping[str, str]) -> str:
    return "".join(
        part if isinstance(part, str) else texts.get(str(part.get("message_id") or ""), "")
        for part in parts
        if isinstance(part, str | Mapping)
    )


def inspector_view(record: Mapping[str, Any], texts: Mapping[str, str]) -> dict[str, Any]:
    """``extra.prompt`` with history texts put back from ``texts`` (message id → text)."""
    blocks = []
    for block in record.get("blocks") or []:
        block = dict(block)
        if "content" not in block:
            block["content"] = texts.get(block.get("message_id") or "", "")
        blocks.append(block)
    messages = []
    for item in record.get("messages") or []:
        item = dict(item)
        if "content" not in item:
            item["content"] = texts.get(item.pop("message_id", "") or "", "")
        messages.append(item)
    view = {**record, "blocks": blocks, "messages": messages}
    compact = record.get("text_prompt")
    if isinstance(compact, Mapping):
        prompt = {k: v for k, v in compact.items() if k != "parts"}
        view["text_prompt"] = {**prompt, "text": _text_of(compact.get("parts") or [], texts)}
    # A record stored before compact rows holds its dropped entries in "lore" already.
    rows = view.pop("lore_dropped", None) or []
    view["lore"] = [*(record.get("lore") or []), *(dropped_lore_record(row) for row in rows)]
    return view


def message_ids(record: Mapping[str, Any]) -> set[str]:
    """The messages an inspector record refers to."""
    ids = {b.get("message_id") for b in record.get("blocks") or [] if "content" not in b}
    ids |= {m.get("message_id") for m in record.get("messages") or [] if "content" not in m}
    compact = record.get("text_prompt")
    if isinstance(compact, Mapping):
        ids |= {p.get("message_id") for p in compact.get("parts") or [] if isinstance(p, Mapping)}
    return {i for i in ids if isinstance(i, str)}


_EXC_PREFIX = re.compile(r"^[A-Za-z_][\w.]*: ")


def _plain(error: str) -> str:
    """A node error without the ``ExcType:`` the runner puts in front."""
    return _EXC_PREFIX.sub("", error, count=1)


def split_problems(problems: Any) -> tuple[list[str], list[dict[str, Any]]]:
    """A pipeline's ``problems``: the plain ones (text) and the refused MVU updates
    (:class:`~storyloom.chat.reply.mvu_values.MvuWarning` as objects, kept structured so
    the page can say them in the reader's language)."""
    if not isinstance(problems, list):
        return [], []
    plain: list[str] = []
    warnings: list[dict[str, Any]] = []
    for problem in problems:
        if isinstance(problem, Mapping) and problem.get("kind") in MVU_WARNING_KINDS:
            warnings.append(MvuWarning.model_validate(problem).model_dump(mode="json"))
        else:
            plain.append(str(problem))
    return plain, warnings


# -- the turn -------------------------------------------------------------------------------


@dataclass
class TurnSetup:
    """Everything a turn needs, worked out by the service before it starts."""

    tree: TurnTree
    runner: WorkflowRunner
    conversation_id: str
    message: Message
    kind: TurnKind
    snapshot: Callable[[int | None], Awaitable[ContextSnapshot]]
    """The snapshot for a context of this many tokens (None: the model's window)."""
    workflow: Callable[[], Workflow]
    clean_reply: Callable[[str], str] = field(default=lambda text: text)
    """Stored-phase regex scripts of AI output (identity when none are allowed)."""
    clean_thought: Callable[[str], str] = field(default=lambda text: text)
    """Stored-phase regex scripts of reasoning, for the thought."""
    publish: Publish | None = None
    keep_globals: Callable[[Mapping[str, Any], Mapping[str, Any]], None] | None = None
    """Saves the user's global variables a finished turn changed (as it began, as its
    macros left them)."""
    updater: Callable[[ContextSnapshot, Mapping[str, Any]], Awaitable[dict[str, Any]]] | None = None
    """MVU's separate updater (the chat's ``mvu_updater``): given the finished pipeline's
    outputs, the same with the agent model's updates applied to the state."""
    prefix: str = ""
    """Continue: the text the message already had; the new text is appended."""
    thought_prefix: str = ""


class ChatTurn:
    """Runs one reply; :meth:`start` it, :meth:`stop` it, await :attr:`task`."""

    def __init__(self, setup: TurnSetup) -> None:
        self.setup = setup
        self.message_id = setup.message.id
        self.parser = FilamentParser()
        self.raw = ""
        self.reply = ""
        self.thought = ""
        self.run: WorkflowRun | None = None
        self.snapshot: ContextSnapshot | None = None
        self.stop_reason: str | None = None
        self._node_types: dict[str, str] = {}
        self._last_flush = 0.0
        self._flush_handle: asyncio.TimerHandle | None = None
        self._dirty = False
        self._pending_text = ""
        self._pending_thought = ""
        self._last_publish = 0.0
        self._publish_handle: asyncio.TimerHandle | None = None
        self._parser_closed = False
        self._extra = dict(setup.message.extra)
        self.steps: list[dict[str, Any]] = []
        """The agent's tool steps of this turn as they were reported."""
        self.task: asyncio.Task[Message] | None = None
        self._updated: dict[str, Any] | None = None
        """The outputs after MVU's separate updater, when it ran."""

    def start(self) -> asyncio.Task[Message]:
        self.task = asyncio.get_running_loop().create_task(self._main())
        return self.task

    def stop(self, reason: str = STOPPED) -> None:
        """Cancel the run; the text so far stays, marked ``partial`` with ``reason``."""
        if self.stop_reason is None:
            self.stop_reason = reason
        if self.run is not None:
            self.run.cancel()
        # Before the run starts (the snapshot is being built) the turn sees the reason
        # once it may start the run, and ends there.

    # -- streaming ------------------------------------------------------------------------

    def _publish(self, event: ChatEvent) -> None:
        if self.setup.publish is not None:
            try:
                self.setup.publish(event)
            except Exception:
                logger.exception("publishing a chat event failed")

    def _on_event(self, event: RunEvent) -> None:
        if isinstance(event, NodeStarted):
            self._node_types[event.node_id] = event.node_type
        elif (
            isinstance(event, NodeStreaming) and self._node_types.get(event.node_id) == INVOKER_TYPE
        ):
            self._feed(event.chunk)
        elif (
            isinstance(event, NodeToolStep) and self._node_types.get(event.node_id) == INVOKER_TYPE
        ):
            self.steps.append(event.step)
            # The text before the call is on screen before the call is.
            if self._publish_handle is not None:
                self._publish_handle.cancel()
            self._publish_stream()
            self._publish(ToolStepAdded(self.setup.conversation_id, self.message_id, event.step))

    def _tool_steps(self, outputs: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """The message's tool steps: those it had (a continued reply), then this turn's
        (the pipeline's ``steps`` output, else those reported while it ran)."""
        earlier = self._extra.get("tool_steps")
        steps = outputs.get("steps") if outputs is not None else None
        new = [s for s in steps if isinstance(s, dict)] if isinstance(steps, list) else self.steps
        return [*(earlier if isinstance(earlier, list) else []), *new]

    def _feed(self, chunk: str) -> None:
        self.raw += chunk
        self._parsed(self.parser.feed(chunk))
        self._dirty = True
        self._schedule_flush()

    def _parsed(self, events: Sequence[FilamentEvent]) -> None:
        text, thought = "", ""
        for event in events:
            if event.kind == "reply":
                text += event.text
            elif event.kind == "thought":
                thought += event.text
        if text or thought:
            self.reply += text
            self.thought += thought
            self._pending_text += text
            self._pending_thought += thought
            self._schedule_stream()

    def _schedule_stream(self) -> None:
        if self._publish_handle is not None:
            return
        wait = self._last_publish + FRAME_S - time.monotonic()
        if wait <= 0:
            self._publish_stream()
        else:
            loop = asyncio.get_running_loop()
            self._publish_handle = loop.call_later(wait, self._publish_stream)

    def _publish_stream(self) -> None:
        """Send the text parsed since the last frame (called at the end too)."""
        self._publish_handle = None
        text, thought = self._pending_text, self._pending_thought
        if not (text or thought):
            return
        self._pending_text = self._pending_thought = ""
        self._last_publish = time.monotonic()
        self._publish(
            StreamDelta(self.setup.conversation_id, self.message_id, text, thought or None)
        )

    def _close_parser(self) -> None:
        """End of the stream: unclosed tags close, held-back text comes out (once)."""
        if not self._parser_closed:
            self._parser_closed = True
            self._parsed(self.parser.close())
            # Now, not a frame later: the turn's end follows and must be the last word.
            if self._publish_handle is not None:
                self._publish_handle.cancel()
            self._publish_stream()

    def _schedule_flush(self) -> None:
        if self._flush_handle is not None:
            return
        wait = self._last_flush + FLUSH_INTERVAL_S - time.monotonic()
        if wait <= 0:
            self._flush()
        else:
            loop = asyncio.get_running_loop()
            self._flush_handle = loop.call_later(wait, self._flush)

    def _flush(self) -> None:
        self._flush_handle = None
        if not self._dirty:
            return
        self._dirty = False
        self._last_flush = time.monotonic()
        try:
            self.setup.tree.update_message(
                self.message_id,
                content=self._joined(self.reply),
                thought=self._thought_text() or None,
                raw=self.raw,
            )
        except Exception:  # the next flush or the final write tries again
            logger.exception("flushing message %s failed", self.message_id)
            self._dirty = True

    def _joined(self, reply: str) -> str:
        """Continue: the old text, then the new. The parser strips the reply's leading
        space, so the space the model began with (if any) is put back between them."""
        prefix = self.setup.prefix
        if not prefix or not reply:
            return prefix + reply
        joint = " " if self.raw[:1].isspace() and not prefix[-1].isspace() else ""
        return prefix + joint + reply

    def _thought_text(self) -> str:
        return self.setup.thought_prefix + self.thought

    # -- the run --------------------------------------------------------------------------

    async def _main(self) -> Message:
        result: RunResult | None = None
        failure: str | None = None
        try:
            workflow = self.setup.workflow()
            self.parser = FilamentParser(FilamentTags(extra=pipeline_extra_tags(workflow)))
            self.snapshot = await self.setup.snapshot(pipeline_context_tokens(workflow))
            if self.stop_reason is None:
                self.run = self.setup.runner.start(
                    workflow,
                    inputs={"snapshot": self.snapshot.model_dump(mode="json")},
                    on_event=self._on_event,
                )
                result = await self.run.wait()
                if result.status == "completed" and self.setup.updater is not None:
                    self._updated = await self.setup.updater(
                        self.snapshot, result.interface_outputs
                    )
        except asyncio.CancelledError:
            if self.run is not None:
                self.run.cancel()
            self.stop_reason = self.stop_reason or INTERRUPTED
        except Exception as exc:
            logger.info("chat turn %s failed: %s", self.message_id, exc)
            failure = str(exc) or type(exc).__name__
        finally:
            if self._flush_handle is not None:
                self._flush_handle.cancel()
                self._flush_handle = None
            if self._publish_handle is not None:
                self._publish_handle.cancel()
            self._publish_stream()
        return self._finish(result, failure)

    def _finish(self, result: RunResult | None, failure: str | None) -> Message:
        tree = self.setup.tree
        message: Message | None = None
        if result is not None and result.status == "completed":
            try:
                message = self._complete(result.interface_outputs)
            except Exception as exc:  # e.g. a custom pipeline's state that does not validate
                logger.exception("finishing reply %s failed", self.message_id)
                failure = f"the reply could not be saved as finished: {exc}"
        if message is None:
            if result is not None and result.status == "failed":
                failure = self._run_error(result)
            self._close_parser()
            reply = self.parser.result.reply if self.raw else self.reply
            error = failure or self.stop_reason or "the reply stopped"
            if result is not None and result.status == "cancelled" and failure is None:
                error = self.stop_reason or STOPPED
            status: MessageStatus = "partial" if reply or self.setup.prefix else "error"
            # Calls that ran are kept with what was streamed: they happened.
            steps = self._tool_steps() if self.steps else None
            message = tree.update_message(
                self.message_id,
                content=self._joined(self.setup.clean_reply(reply) if reply else ""),
                status=status,
                thought=self._thought_text() or None,
                error=error,
                raw=self.raw or None,
                extra={**self._extra, "tool_steps": steps} if steps else None,
                bump_version=True,
            )
        version = tree.conversation(self.setup.conversation_id).version
        self._publish(MessageAdded(self.setup.conversation_id, message, version))
        self._publish(
            TurnDone(
                self.setup.conversation_id, self.message_id, message.status, message.error, version
            )
        )
        return message

    def _run_error(self, result: RunResult) -> str:
        errors = result.errors
        invoker = [n for n in errors if self._node_types.get(n) == INVOKER_TYPE]
        node = invoker[0] if invoker else next(iter(errors), None)
        return _plain(errors[node]) if node is not None else "the chat pipeline failed"

    def _complete(self, outputs: Mapping[str, Any]) -> Message:
        assert self.snapshot is not None
        if self._updated is not None:
            outputs = self._updated
        raw = outputs.get("raw")
        if isinstance(raw, str) and raw:
            self.raw = raw
        reply = outputs.get("reply")
        if not isinstance(reply, str):
            self._close_parser()
            reply = self.parser.result.reply
        thought = outputs.get("thought")
        thought = self.setup.clean_thought(thought) if isinstance(thought, str) and thought else ""
        thought_text = self.setup.thought_prefix + thought
        text = self._joined(reply)
        state_json = outputs.get("state")
        state = ChatState.from_json(state_json) if isinstance(state_json, dict) else None
        problems = outputs.get("problems")
        messages = outputs.get("messages")
        skein = outputs.get("skein")
        plain, warnings = split_problems(problems)
        extra: dict[str, Any] = {
            **self._extra,
            "problems": plain,
            "generation": self.snapshot.generation,
        }
        if warnings:
            extra["mvu_warnings"] = warnings
        else:
            extra.pop("mvu_warnings", None)
        tool_steps = self._tool_steps(outputs)
        if tool_steps:
            extra["tool_steps"] = tool_steps
        # What the lore budget cut from this reply's prompt (a swipe may cut nothing).
        extra.pop("lore_cut", None)
        if self.snapshot.lore_cut is not None:
            extra["lore_cut"] = self.snapshot.lore_cut.model_dump(mode="json")
        text_prompt = outputs.get("prompt")
        prompt = inspector_record(
            skein if isinstance(skein, Mapping) else None,
            messages if isinstance(messages, list) else None,
            self.snapshot,
            text_prompt if isinstance(text_prompt, Mapping) else None,
        )
        # Only the new text: a continued reply's start was rewritten when it was saved.
        cleaned = self._joined(self.setup.clean_reply(reply))
        globals_after = skein.get("global_variables") if isinstance(skein, Mapping) else None
        if self.setup.keep_globals is not None and isinstance(globals_after, Mapping):
            try:
                self.setup.keep_globals(self.snapshot.global_variables, globals_after)
            except Exception:  # the reply is still worth keeping
                logger.exception("saving the global variables of %s failed", self.message_id)
        return self.setup.tree.update_message(
            self.message_id,
            content=cleaned,
            # The reply before the card's stored-phase scripts rewrote it.
            original=text if cleaned != text else None,
            status="complete",
            thought=thought_text or None,
            # A continued reply that had stopped is whole now ("" clears: None keeps).
            error="" if self.setup.message.error else None,
            extra=extra,
            state=state,
            bump_version=True,
            raw=self.raw,
            prompt=prompt,
        )
