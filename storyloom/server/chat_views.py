"""How the chat page sees a conversation: its messages as views, and the whole chat.

A view is a stored message plus what the page shows with it (how many siblings it has,
the text after display-only regex scripts). Both the REST routes (:mod:`.chat_api`) and
the WebSocket delivery (:mod:`.chat_ws`) build them here.

Opening a conversation must stay fast at 10,000 messages, so :func:`chat_view_json`
builds its answer with one ``TypeAdapter.dump_json`` call and returns the bytes as they
are, without FastAPI's ``jsonable_encoder`` walking every field again.
"""

from __future__ import annotations

import copy
import zlib
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from pydantic import BaseModel, Field, TypeAdapter

from storyloom.chat.prompt.ejs_template import (
    DISPLAY_LIMITS,
    TemplateScopes,
    TemplateSource,
    has_template,
    render_templates_blocking,
)
from storyloom.chat.prompt.macros import MacroContext, expand_macros
from storyloom.chat.prompt.regex_scripts import RegexScript, apply_regex_scripts
from storyloom.chat.prompt.skein_builder import STATUS_PLACEHOLDER
from storyloom.chat.reply.mvu import STAT_DATA
from storyloom.chat.service.conversations import ChatService, macro_context, placement_of
from storyloom.chat.service.display_sources import DisplaySources
from storyloom.chat.service.turn_templates import fill_missing
from storyloom.chat.store.conversation import Conversation, card_macros
from storyloom.chat.store.message import Message
from storyloom.chat.store.turn_tree import TurnTree
from storyloom.sillytavern.tavern_helper import helper_scripts


class MessageView(Message):
    """A message as the page shows it."""

    sibling_count: int = Field(default=1, description="Siblings including itself (n/m)")
    display: str | None = Field(
        default=None,
        description="The text after display-only regex scripts, its EJS template and the "
        "lore's render entries ([RENDER:BEFORE]/[RENDER:AFTER]), when different",
    )


class ChatView(BaseModel):
    conversation: Conversation
    messages: list[MessageView] = Field(description="Root → pointer")
    continuation: list[MessageView] = Field(
        description="After the pointer along the active children: what time travel left"
    )
    running: bool = Field(description="A reply is being written")
    earlier: int = Field(
        default=0, description="With ?tail=N: messages of the path before the first one sent"
    )
    mvu: bool = Field(
        default=False,
        description="The chat plays an MVU card (its state has stat_data, or its card carries "
        "MVU's scripts): the page offers MVU's actions",
    )


_chat_view_adapter: TypeAdapter[ChatView] = TypeAdapter(ChatView)

SourcesOf = Callable[[Conversation], DisplaySources]
"""What showing a conversation's messages needs (:meth:`ChatService.display_sources`)."""


def display_texts(
    conversation: Conversation,
    messages: Sequence[Message],
    scripts: Sequence[RegexScript],
    newest_depth: int = 0,
    variables_of: Callable[[str], dict[str, Any]] | None = None,
) -> dict[str, str]:
    """Message id → text after the display-only (``markdownOnly``) ``scripts``, for the
    messages they change; depth counts from the newest message of ``messages``. MVU's
    ``<StatusPlaceHolderImpl/>`` is left to the scripts (a card's status bar replaces it)
    and removed where none did: no raw tag under a reply.

    ``variables_of`` gives the chat variables at a message (the state after it), which
    the scripts' macros read (``{{get_message_variable::stat_data.x}}`` in a status bar
    shows the values of *that* reply, as Tavern Helper does); read only for a message a
    script matched (reading every message's state of a long chat costs)."""
    shown = [s for s in scripts if s.markdownOnly and not s.disabled]
    if not shown and not any(STATUS_PLACEHOLDER in m.content for m in messages):
        return {}
    base = macro_context(conversation)
    out: dict[str, str] = {}
    last = len(messages) - 1
    for n, message in enumerate(messages):
        text = message.content
        if shown:
            made: list[MacroContext] = []

            def macros(
                text: str, message_id: str = message.id, made: list[MacroContext] = made
            ) -> str:
                # the message's state is read only once a script matched and asks a macro
                if not made:
                    state = None if variables_of is None else variables_of(message_id)
                    made.append(base if state is None else replace(base, variables=dict(state)))
                return expand_macros(text, made[0])

            text = apply_regex_scripts(
                text,
                shown,
                placement=placement_of(message.role),
                phase="display",
                depth=newest_depth + last - n,
                macros=macros,
            )
        if STATUS_PLACEHOLDER in text:
            text = text.replace(STATUS_PLACEHOLDER, "")
        if text != message.content:
            out[message.id] = text
    return out


def is_mvu_chat(tree: TurnTree, conversation: Conversation) -> bool:
    """Whether the chat plays an MVU card (see :attr:`ChatView.mvu`)."""
    scripts = helper_scripts(conversation.character.card).scripts
    if any(s.kind in ("mvu_bundle", "mvu_schema") for s in scripts):
        return True
    if conversation.pointer is None:
        return False
    return STAT_DATA in tree.state_at(conversation.pointer).variables


_VIEW_FIELDS = frozenset(MessageView.model_fields)


def message_view(
    message: Message, sibling_count: int = 1, display: str | None = None
) -> MessageView:
    """The view of a stored message, built without validating again (the store did): at
    10,000 messages, ``model_construct`` alone would cost more than reading them."""
    values = dict(message.__dict__)
    values["sibling_count"] = sibling_count
    values["display"] = display
    view = object.__new__(MessageView)
    object.__setattr__(view, "__dict__", values)
    object.__setattr__(view, "__pydantic_fields_set__", _VIEW_FIELDS)
    object.__setattr__(view, "__pydantic_extra__", None)
    object.__setattr__(view, "__pydantic_private__", None)
    return view


RENDER_DEPTH = 64
"""Render entries are added to the newest this many messages of a view (a long chat's
older ones are shown without them, as ST-Prompt-Template's depth limit does)."""


def _display_source(
    text: str, message: Message, state: dict[str, Any], entry: str | None = None
) -> TemplateSource:
    """A template shown with ``message``: its own text, or the render entry titled
    ``entry``; all of a message's share the state at it."""
    return TemplateSource(
        name=f"message {message.id}" if entry is None else f"render {entry}",
        text=text,
        origin="message" if entry is None else "lore",
        label=message.id if entry is None else entry,
        variables=state,
        message={
            "id": message.id,
            "is_user": message.role == "user",
            "is_system": message.role == "system",
        },
        # The same message shows the same text each time it is drawn.
        seed=zlib.crc32(message.id.encode()),
        shares=message.id,
    )


def rendered_templates(
    tree: TurnTree,
    conversation: Conversation,
    messages: Sequence[Message],
    shown: dict[str, str],
    sources: DisplaySources | None = None,
) -> None:
    """The messages whose shown text holds an EJS template, rendered in the sandbox, and
    the lore's render entries (``[RENDER:BEFORE]``/``[RENDER:AFTER]``) added before and
    after the newest :data:`RENDER_DEPTH` of them: ONE sandboxed call for the whole view.
    Each message renders against the state at it and the user's global variables (what
    it writes is not kept); its render entries see what it wrote. ``shown`` is updated in
    place; a message template that fails is shown as written, a render entry that fails
    adds nothing. Without ``<%`` and render entries, nothing runs."""
    sources = sources or DisplaySources()
    first_rendered = len(messages) - RENDER_DEPTH
    batch: list[TemplateSource] = []
    # per message: (its own template's index in batch or None, before indexes, after ones)
    plans: list[tuple[Message, int | None, list[int], list[int]]] = []
    for n, message in enumerate(messages):
        text = shown.get(message.id, message.content)
        # (a reply still being written gets them once it is finished, as in the plugin)
        rendered = n >= first_rendered and message.status != "streaming"
        entries = [
            entry
            for entry in (sources.render_entries if rendered else ())
            if entry.shown_with(text)
        ]
        own = has_template(text)
        if not own and not entries:
            continue
        state = dict(tree.state_at(message.id).variables)
        if sources.initial_variables:
            # (filled into a copy: the tree's state is not this view's to change)
            state = copy.deepcopy(state)
            fill_missing(state, sources.initial_variables)
        before: list[int] = []
        after: list[int] = []
        mine: int | None = None
        # In the order they run: the before entries, the message, the after entries.
        for entry in [e for e in entries if e.position == "before"]:
            before.append(len(batch))
            batch.append(_display_source(entry.text, message, state, entry.title))
        if own:
            mine = len(batch)
            batch.append(_display_source(text, message, state))
        for entry in [e for e in entries if e.position == "after"]:
            after.append(len(batch))
            batch.append(_display_source(entry.text, message, state, entry.title))
        plans.append((message, mine, before, after))
    if not batch:
        return
    macros = card_macros(conversation.character, conversation.settings)
    scopes = TemplateScopes(
        global_=dict(sources.global_variables),
        character=helper_scripts(conversation.character.card).variables,
        initial=dict(sources.initial_variables),
    )
    results = render_templates_blocking(
        batch,
        scopes,
        names={"user": macros["user"], "char": macros["char"]},
        escape=True,
        limits=DISPLAY_LIMITS,
        card=conversation.character.card,
        world_info=sources.world_info,
    )

    def texts(indexes: list[int]) -> list[str]:
        return [
            results[i].text
            for i in indexes
            if results[i].problem is None and results[i].text.strip()
        ]

    for message, mine, before, after in plans:
        text = shown.get(message.id, message.content)
        if mine is not None and results[mine].problem is None:
            text = results[mine].text
        # Blocks of their own: a status bar under a reply is not part of its last line.
        text = "\n\n".join([*texts(before), text, *texts(after)])
        if text != message.content:
            shown[message.id] = text
        else:
            shown.pop(message.id, None)


def message_views(
    tree: TurnTree,
    conversation: Conversation,
    messages: Sequence[Message],
    sources: DisplaySources,
    newest_depth: int = 0,
) -> list[MessageView]:
    counts = tree.sibling_counts([m.id for m in messages])
    shown = display_texts(
        conversation,
        messages,
        sources.scripts,
        newest_depth,
        variables_of=lambda message_id: tree.state_at(message_id).variables,
    )
    rendered_templates(tree, conversation, messages, shown, sources)
    return [message_view(m, counts.get(m.id, 1), shown.get(m.id)) for m in messages]


def single_view(tree: TurnTree, message: Message, sources_of: SourcesOf) -> MessageView:
    """One message (just added or finalised: the newest of its branch)."""
    conversation = tree.conversation(message.conversation_id)
    return message_views(tree, conversation, [message], sources_of(conversation))[0]


def chat_view(
    tree: TurnTree,
    chat: ChatService,
    conversation_id: str,
    tail: int | None = None,
    sources: DisplaySources | None = None,
) -> ChatView:
    # Asked first: "not running" then means what is read next is the reply as finished.
    running = chat.running(conversation_id)
    conversation = tree.conversation(conversation_id)
    if tail is None:
        path = tree.active_path(conversation_id)
    else:
        path = tree.path_tail(conversation.pointer, tail)
    later = tree.continuation(conversation_id)
    sources = sources or chat.display_sources(conversation)
    # Built without validation: every part is a model the store already validated.
    return ChatView.model_construct(
        conversation=conversation,
        messages=message_views(tree, conversation, path, sources),
        continuation=message_views(tree, conversation, later, sources),
        running=running,
        earlier=path[0].depth if path else 0,
        mvu=is_mvu_chat(tree, conversation),
    )


_views_adapter: TypeAdapter[list[MessageView]] = TypeAdapter(list[MessageView])


def chat_view_json(
    tree: TurnTree, chat: ChatService, conversation_id: str, tail: int | None = None
) -> bytes:
    """:func:`chat_view` as JSON bytes. Unless display-only regex scripts change the
    texts, the messages come as JSON from SQLite (:meth:`TurnTree.path_json`): that is
    what keeps opening a 10,000-message chat within a frame or two. A chat holding an
    EJS template (``<%``) takes the slow path, which renders it."""
    running = chat.running(conversation_id)
    conversation = tree.conversation(conversation_id)
    sources = chat.display_sources(conversation)
    slow = sources.render_entries or any(s.markdownOnly and not s.disabled for s in sources.scripts)
    if slow:
        return _chat_view_adapter.dump_json(chat_view(tree, chat, conversation_id, tail, sources))
    pointer = conversation.pointer
    messages = tree.path_json(pointer, limit=tail)
    # an MVU card's placeholder is taken out of the view; templates are rendered
    if STATUS_PLACEHOLDER in messages or has_template(messages):
        return _chat_view_adapter.dump_json(chat_view(tree, chat, conversation_id, tail, sources))
    earlier = 0
    if tail is not None and pointer is not None:
        earlier = max(0, tree.message(pointer).depth + 1 - tail)
    later = message_views(tree, conversation, tree.continuation(conversation_id), sources)
    return b"".join(
        (
            b'{"conversation":',
            conversation.model_dump_json().encode(),
            b',"messages":',
            messages.encode(),
            b',"continuation":',
            _views_adapter.dump_json(later),
            b',"running":',
            b"true" if running else b"false",
            b',"earlier":',
            str(earlier).encode(),
            b',"mvu":',
            b"true" if is_mvu_chat(tree, conversation) else b"false",
            b"}",
        )
    )
