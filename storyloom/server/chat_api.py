"""``/api/chats`` and ``/api/presets``: the chat page's conversations, turns and presets.

Every write takes the ``expected_version`` the page last saw; a stale one is answered 409
with the current ``version`` (nothing changed), so two tabs never overwrite each other:
the second reloads and sees the first's turn. A reply is written in the background; its
text streams over the WebSocket (``chat:*`` messages, see :mod:`.chat_ws`). The views
the page gets are built in :mod:`.chat_views`; errors become answers in :mod:`.api_errors`.
"""

from __future__ import annotations

import asyncio
import io
import zipfile
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import APIRouter, File, Query, Request, Response, UploadFile
from pydantic import BaseModel, ConfigDict, Field

from storyloom.chat.personalab.card_reimport import CardReimport
from storyloom.chat.personalab.export import export_personalab
from storyloom.chat.personalab.library import (
    BackgroundPreset,
    CharacterListing,
    PresetLibrary,
    PresetProblem,
    SummaryPreset,
    snapshot_by_name,
)
from storyloom.chat.personalab.memory_update import MemoryProposal
from storyloom.chat.personalab.summaries import SeedOrder
from storyloom.chat.prompt.skein import ScriptRun
from storyloom.chat.prompt.skein_builder import (
    DEFAULT_PROMPT_ORDER,
    DEFAULT_PROMPTS,
    PresetPrompt,
    PromptOrderEntry,
)
from storyloom.chat.service.reply_run import inspector_view, message_ids
from storyloom.chat.store.conversation import Conversation, ConversationSettings
from storyloom.chat.store.message import Message
from storyloom.chat.store.st_chat import export_st_chat, import_st_chat
from storyloom.chat.store.state import ChatState
from storyloom.chat.store.template_problem import TemplateProblem
from storyloom.chat.store.turn_tree import ChatError, ConversationSummary, TreeNode, TurnTree
from storyloom.core.errors import InvalidInput, NotFound
from storyloom.core.image_kind import image_type
from storyloom.core.settings import ConnectionNotFound
from storyloom.knowledge.st_import import import_sillytavern_bytes
from storyloom.llm.tokenizers import counter_for
from storyloom.server.api_errors import (
    CardConflictBody,
    error_responses,
    field_errors,
    upload_errors,
)
from storyloom.server.chat_views import ChatView, MessageView, chat_view_json, single_view
from storyloom.server.file_transfer import (
    CardConflictChoice,
    download,
    import_upload,
    read_named_upload,
)
from storyloom.server.generated_avatar import initials_response
from storyloom.server.limits import MAX_NAME_CHARS, MAX_TITLE_CHARS
from storyloom.server.state import ServerState, server_state
from storyloom.sillytavern.character import CharacterDefinition

router = APIRouter(prefix="/api/chats", tags=["chats"])
# Handlers that change a conversation are ``async``: they announce the change on the
# WebSocket hub, whose queues belong to the event loop. Reads run in the thread pool.
presets_router = APIRouter(prefix="/api/presets", tags=["presets"])

_ERRORS = error_responses(400, 404, 409, 422)


# -- conversations -------------------------------------------------------------------------


class _Body(BaseModel):
    model_config = ConfigDict(extra="ignore")


class ConversationList(BaseModel):
    conversations: list[ConversationSummary]


@router.get("", response_model=ConversationList)
def list_chats(request: Request) -> ConversationList:
    """The project's conversations, most recently changed first."""
    state = server_state(request)
    found = state.turn_tree.conversations(state.chat.project_id)
    return ConversationList(conversations=sorted(found, key=lambda c: -c.updated_at))


class NewChat(_Body):
    character_id: str | None = Field(default=None, description="A character preset's id")
    background_id: str | None = Field(default=None, description="A background preset's id")
    title: str | None = Field(default=None, max_length=MAX_TITLE_CHARS)
    user_name: str | None = Field(default=None, max_length=MAX_NAME_CHARS)
    persona: str | None = None
    persona_id: str | None = Field(default=None, description="The persona the chat speaks as")


@router.post("", status_code=201, response_model=Conversation, responses=_ERRORS)
async def create_chat(request: Request, body: NewChat) -> Conversation:
    """A new conversation, from a character preset (its greetings are the first
    messages, alternates as siblings) and optionally a background."""
    return server_state(request).chat.create_conversation(
        character_id=body.character_id,
        background_id=body.background_id,
        title=body.title,
        user_name=body.user_name,
        persona=body.persona,
        persona_id=body.persona_id,
    )


class ImportedChatView(BaseModel):
    conversation: Conversation
    kind: Literal["chat", "character"]
    messages: int = Field(default=0, description="Imported chat: messages on the active path")
    siblings: int = Field(default=0, description="Imported chat: extra swipes")
    character_id: str | None = Field(default=None, description="Imported card: its preset")
    warnings: list[str] = Field(default_factory=list)


@router.post(
    "/import",
    status_code=201,
    response_model=ImportedChatView,
    responses={**_ERRORS, 409: {"model": CardConflictBody}},
)
async def import_chat(
    request: Request,
    file: Annotated[UploadFile, File(description="ST chat or card")],
    on_conflict: CardConflictChoice = "ask",
) -> ImportedChatView:
    """A SillyTavern chat (``.jsonl``) becomes a conversation with its swipes as siblings;
    a character card (PNG, JSON, CHARX) becomes a character preset (its lorebook a
    knowledge base of the project), or a new version of the one here, and a new
    conversation with it."""
    state = server_state(request)
    filename, data = await read_named_upload(request, file)
    # Told apart by content, before anything is written: a world-info book sent here
    # must be refused without landing in the project first.
    with upload_errors(filename):
        parsed = await asyncio.to_thread(import_sillytavern_bytes, data, filename)
    if parsed.kind == "world_info":
        raise InvalidInput(
            f"{filename}: a world-info book, not a chat (.jsonl) or a character card; "
            "import it on the Knowledge page"
        )
    if parsed.chat is not None:
        log = parsed.chat
        presets = state.chat.presets
        character = (
            await asyncio.to_thread(
                snapshot_by_name, presets, log.character_name, datetime.now(UTC)
            )
            if presets is not None
            else None
        )
        imported = await asyncio.to_thread(
            import_st_chat,
            state.turn_tree,
            log,
            project_id=state.chat.project_id,
            title=None,  # named from the chat: its character and date, not the file
            character=character,
        )
        conversation = state.chat.announce(imported.conversation_id)
        return ImportedChatView(
            conversation=conversation,
            kind="chat",
            messages=imported.messages,
            siblings=imported.siblings,
        )
    library = state.chat.presets
    card_home = CardReimport(library, on_conflict) if library is not None else None
    outcome = await import_upload(state.knowledge, data, filename, card_home=card_home)
    if outcome.character_file is None:
        raise InvalidInput(
            f"{filename}: not a chat (.jsonl) or a character card; import it on the Knowledge page"
        )
    character_id = outcome.character_file.stem
    conversation = state.chat.create_conversation(character_id=character_id)
    return ImportedChatView(
        conversation=conversation,
        kind="character",
        character_id=character_id,
        warnings=outcome.warnings,
    )


@router.get("/{conversation_id}", response_model=ChatView, responses=_ERRORS)
def get_chat(
    request: Request,
    conversation_id: str,
    tail: Annotated[int | None, Query(ge=1, description="Only the last N messages")] = None,
) -> Response:
    """The conversation, its messages root → pointer (or the last ``tail`` of them) and
    what lies after the pointer."""
    state = server_state(request)
    return Response(
        chat_view_json(state.turn_tree, state.chat, conversation_id, tail),
        media_type="application/json",
    )


class ChatPatch(_Body):
    expected_version: int | None = None
    title: str | None = Field(default=None, max_length=MAX_TITLE_CHARS)
    settings: dict[str, Any] | None = Field(
        default=None, description="Settings to change (the others stay as they are)"
    )


@router.patch("/{conversation_id}", response_model=Conversation, responses=_ERRORS)
async def patch_chat(request: Request, conversation_id: str, body: ChatPatch) -> Conversation:
    state = server_state(request)
    chat = state.chat
    settings = None
    if body.settings is not None:
        current = state.turn_tree.conversation(conversation_id).settings
        with field_errors("settings", "settings"):
            settings = ConversationSettings.model_validate(
                {**current.model_dump(mode="json"), **body.settings}
            )
    return chat.update_conversation(
        conversation_id,
        expected_version=body.expected_version,
        title=body.title,
        settings=settings,
    )


@router.delete("/{conversation_id}", status_code=204, responses=_ERRORS)
async def delete_chat(request: Request, conversation_id: str) -> Response:
    await server_state(request).chat.delete_conversation(conversation_id)
    return Response(status_code=204)


# -- turns --------------------------------------------------------------------------------


class SendBody(_Body):
    text: str
    expected_version: int | None = None


class SendAccepted(BaseModel):
    user_message: MessageView
    assistant_message: MessageView | None = Field(
        description="The reply, status streaming; None: nobody answers (a group chat in "
        "manual order, or every member muted)"
    )
    version: int


@router.post(
    "/{conversation_id}/messages", status_code=202, response_model=SendAccepted, responses=_ERRORS
)
async def send(request: Request, conversation_id: str, body: SendBody) -> SendAccepted:
    """Save the user's message, start the reply (its text streams over the WebSocket)."""
    state = server_state(request)
    result = await state.chat.send(
        conversation_id, body.text, expected_version=body.expected_version
    )
    tree = state.turn_tree
    return SendAccepted(
        user_message=single_view(tree, result.user_message, state.chat.display_sources),
        assistant_message=(
            None
            if result.assistant_message is None
            else single_view(tree, result.assistant_message, state.chat.display_sources)
        ),
        version=result.version,
    )


class GenerateBody(_Body):
    kind: Literal["reply", "swipe", "continue"] = "reply"
    parent_id: str | None = Field(
        default=None,
        description="reply: the message to answer (default: the pointer); swipe: an "
        "assistant message to re-roll (or the message to answer)",
    )
    message_id: str | None = Field(
        default=None, description="swipe / retry: the reply to re-roll; continue: the reply"
    )
    expected_version: int | None = None
    reroll: bool = Field(
        default=False,
        description="swipe: roll the dice again (by default a swipe's chat:RollDice calls "
        "replay the rolls of the reply it re-rolls)",
    )


class TurnAccepted(BaseModel):
    message: MessageView
    version: int


def _accepted(state: ServerState, conversation_id: str, message: Message) -> TurnAccepted:
    """``message``, just written or changed, and the conversation's version after it."""
    version = state.turn_tree.conversation(conversation_id).version
    return TurnAccepted(
        message=single_view(state.turn_tree, message, state.chat.display_sources), version=version
    )


@router.post(
    "/{conversation_id}/generate", status_code=202, response_model=TurnAccepted, responses=_ERRORS
)
async def generate(request: Request, conversation_id: str, body: GenerateBody) -> TurnAccepted:
    """Write a reply, a new swipe (also "retry" of a failed reply) or more of a reply."""
    state = server_state(request)
    message = await state.chat.generate(
        conversation_id,
        parent_id=body.parent_id,
        message_id=body.message_id,
        kind=body.kind,
        expected_version=body.expected_version,
        reroll=body.reroll,
    )
    return _accepted(state, conversation_id, message)


class Stopped(BaseModel):
    message: MessageView | None = Field(description="The reply as kept; None: none was running")
    version: int


@router.post("/{conversation_id}/stop", response_model=Stopped, responses=_ERRORS)
async def stop(request: Request, conversation_id: str) -> Stopped:
    """Stop the reply being written; what arrived is kept, marked partial."""
    state = server_state(request)
    state.turn_tree.conversation(conversation_id)
    message = await state.chat.stop(conversation_id)
    version = state.turn_tree.conversation(conversation_id).version
    view = (
        single_view(state.turn_tree, message, state.chat.display_sources)
        if message is not None
        else None
    )
    return Stopped(message=view, version=version)


class PointerBody(_Body):
    message_id: str | None
    expected_version: int | None = None


@router.post("/{conversation_id}/pointer", response_model=Conversation, responses=_ERRORS)
async def move_pointer(request: Request, conversation_id: str, body: PointerBody) -> Conversation:
    """Time travel / branch from here: the pointer moves, nothing is deleted."""
    return server_state(request).chat.set_pointer(
        conversation_id, body.message_id, expected_version=body.expected_version
    )


class SwipeBody(_Body):
    message_id: str
    to_index: int
    expected_version: int | None = None


@router.post("/{conversation_id}/swipe", response_model=Conversation, responses=_ERRORS)
async def swipe(request: Request, conversation_id: str, body: SwipeBody) -> Conversation:
    """Show sibling ``to_index`` of any message; the pointer follows its branch down."""
    return server_state(request).chat.swipe(
        conversation_id, body.message_id, body.to_index, expected_version=body.expected_version
    )


class EditBody(_Body):
    content: str
    mode: Literal["in_place", "branch"] = Field(
        default="branch",
        description="in_place: rewrite the message and keep what follows (its old text is "
        "kept as a version); branch: a new sibling with the new text",
    )
    expected_version: int | None = None


@router.post(
    "/{conversation_id}/messages/{message_id}/edit",
    response_model=TurnAccepted,
    responses=_ERRORS,
)
async def edit(
    request: Request, conversation_id: str, message_id: str, body: EditBody
) -> TurnAccepted:
    """Edit a message: in place (what follows stays; the old text becomes a version) or
    as a new branch (a new sibling; the old one stays, a swipe away)."""
    state = server_state(request)
    if body.mode == "in_place":
        message = state.chat.rewrite_message(
            conversation_id, message_id, body.content, expected_version=body.expected_version
        )
    else:
        message = state.chat.edit_message(
            conversation_id, message_id, body.content, expected_version=body.expected_version
        )
    return _accepted(state, conversation_id, message)


class RestoreBody(_Body):
    index: int = Field(ge=0, description="Which earlier version (0 = the oldest)")
    expected_version: int | None = None


@router.post(
    "/{conversation_id}/messages/{message_id}/restore",
    response_model=TurnAccepted,
    responses=_ERRORS,
)
async def restore_version(
    request: Request, conversation_id: str, message_id: str, body: RestoreBody
) -> TurnAccepted:
    """An earlier version of the message's text becomes its text again; the text it had
    is kept as the newest version."""
    state = server_state(request)
    message = state.chat.restore_version(
        conversation_id, message_id, body.index, expected_version=body.expected_version
    )
    return _accepted(state, conversation_id, message)


class HiddenBody(_Body):
    hidden: bool
    expected_version: int | None = None


@router.post(
    "/{conversation_id}/messages/{message_id}/hidden",
    response_model=TurnAccepted,
    responses=_ERRORS,
)
async def set_hidden(
    request: Request, conversation_id: str, message_id: str, body: HiddenBody
) -> TurnAccepted:
    """Hide a message from the prompt (SillyTavern's ghost) or show it to the model again;
    it stays in the chat either way."""
    state = server_state(request)
    message = state.chat.set_hidden(
        conversation_id, message_id, body.hidden, expected_version=body.expected_version
    )
    return _accepted(state, conversation_id, message)


class TokenCountBody(_Body):
    message_ids: list[str] = Field(max_length=500)


class TokenCounts(BaseModel):
    counts: dict[str, int] = Field(description="Message id → tokens of its text")
    tokenizer: str = Field(description="The encoding that counted")


@router.post("/{conversation_id}/token-counts", response_model=TokenCounts, responses=_ERRORS)
def token_counts(request: Request, conversation_id: str, body: TokenCountBody) -> TokenCounts:
    """How many tokens each message's text is, counted for the model that writes the
    chat's replies (its connection, else the user model; unknown ids,
    and messages of other conversations, are left out)."""
    state = server_state(request)
    tree = state.turn_tree
    choice = state.chat.connection_choice(tree.conversation(conversation_id))
    try:
        endpoint = state.settings.endpoint_for("user", choice.name, chosen_in=choice.chosen_in)
    except ConnectionNotFound:
        endpoint = state.settings.user_llm  # the turn itself reports the missing connection
    counter = counter_for(endpoint)
    counts: dict[str, int] = {}
    for message_id in dict.fromkeys(body.message_ids):
        try:
            message = tree.message(message_id)
        except NotFound:
            continue
        if message.conversation_id == conversation_id:
            counts[message_id] = counter.count(message.content)
    return TokenCounts(counts=counts, tokenizer=counter.name)


@router.delete(
    "/{conversation_id}/messages/{message_id}", response_model=Conversation, responses=_ERRORS
)
async def delete_message(
    request: Request,
    conversation_id: str,
    message_id: str,
    expected_version: Annotated[int | None, Query()] = None,
) -> Conversation:
    """Delete the message and everything under it."""
    return server_state(request).chat.delete_message(
        conversation_id, message_id, expected_version=expected_version
    )


# -- looking inside -----------------------------------------------------------------------


class TreeView(BaseModel):
    nodes: list[TreeNode]


@router.get("/{conversation_id}/tree", response_model=TreeView, responses=_ERRORS)
def tree(request: Request, conversation_id: str) -> TreeView:
    return TreeView(nodes=server_state(request).turn_tree.tree(conversation_id))


def _message_of(tree: TurnTree, conversation_id: str, message_id: str) -> Message:
    message = tree.message(message_id)
    if message.conversation_id != conversation_id:
        raise NotFound(f"no message {message_id!r} in conversation {conversation_id!r}")
    return message


class StateView(BaseModel):
    state: ChatState = Field(description="The state after this message")
    delta: list[dict[str, Any]] = Field(description="RFC 6902 ops: parent's state → this one")


@router.get(
    "/{conversation_id}/messages/{message_id}/state", response_model=StateView, responses=_ERRORS
)
def message_state(request: Request, conversation_id: str, message_id: str) -> StateView:
    tree = server_state(request).turn_tree
    _message_of(tree, conversation_id, message_id)
    return StateView(state=tree.state_at(message_id), delta=tree.delta_of(message_id))


class InspectorBlock(BaseModel):
    model_config = ConfigDict(extra="allow")

    id: str
    kind: str
    role: str | None = None
    content: str = ""
    source: dict[str, Any] | None = Field(default=None, description="Where it came from")
    tokens: int | None = None
    depth: int | None = None
    name: str | None = None
    message_id: str | None = Field(default=None, description="History blocks: the message")
    edited_by: list[str] = Field(default_factory=list, description="Scripts that changed it")


class TextPromptPiece(BaseModel):
    """Where ``text[start:end]`` of a text-completion prompt came from."""

    start: int
    end: int
    kind: str = Field(description="story_string, sequence, separator, name, example or message")
    source: str = Field(description="Words for a person: 'Card: description', 'input sequence'")
    block: str | None = Field(
        default=None, description="The Skein block it is; null: the template's own text"
    )


class TextPromptView(BaseModel):
    """The one string a text-completion API got, with where each part came from."""

    text: str
    stop: list[str] = Field(default_factory=list, description="Stop strings sent with it")
    pieces: list[TextPromptPiece] = Field(default_factory=list)
    instruct: str | None = Field(default=None, description="The instruct template's name")
    context: str | None = Field(default=None, description="The context template's name")


class PromptInspector(BaseModel):
    """A reply's prompt as it was sent: blocks in prompt order, lore with reasons, what
    the budget cut, the budget, and the chat messages the model got."""

    model_config = ConfigDict(extra="allow")

    blocks: list[InspectorBlock]
    lore: list[dict[str, Any]] = Field(description="LoreRecord: activated and dropped entries")
    cut: list[dict[str, Any]] = Field(description="CutBlock: what the token budget removed")
    budget: int | None = None
    warnings: list[str] = Field(default_factory=list)
    templates: list[TemplateProblem] = Field(
        default_factory=list,
        description="The EJS templates of the turn left as written, and why",
    )
    scripts: list[ScriptRun] = Field(default_factory=list, description="What each script did")
    messages: list[dict[str, Any]] = Field(description="[{role, content, name?}] as sent")
    text_prompt: TextPromptView | None = Field(
        default=None,
        description="On a text-completion API: the exact text sent, its pieces' sources",
    )


@router.get(
    "/{conversation_id}/messages/{message_id}/prompt",
    response_model=PromptInspector,
    responses=_ERRORS,
)
def message_prompt(request: Request, conversation_id: str, message_id: str) -> dict[str, Any]:
    """The prompt inspector of a reply: the Skein's blocks with sources and tokens, the
    lore activated and dropped with reasons, what the budget cut, the messages sent."""
    tree = server_state(request).turn_tree
    message = _message_of(tree, conversation_id, message_id)
    record = tree.turn_record(message_id).prompt
    if not isinstance(record, Mapping):
        raise NotFound(f"message {message_id} has no recorded prompt (only finished replies do)")
    wanted = message_ids(record)
    texts = {m.id: m.content for m in tree.path(message.parent_id) if m.id in wanted}
    return inspector_view(record, texts)


# -- memory, summaries, export ------------------------------------------------------------


@router.post("/{conversation_id}/memory", response_model=MemoryProposal, responses=_ERRORS)
async def propose_memory(request: Request, conversation_id: str) -> MemoryProposal:
    """The agent model's proposal for the evolved persona, with a diff (nothing saved)."""
    return await server_state(request).chat.propose_memory(conversation_id)


class MemoryAccept(_Body):
    evolved_persona: str
    expected_version: int | None = None


@router.post("/{conversation_id}/memory/accept", response_model=Conversation, responses=_ERRORS)
async def accept_memory(request: Request, conversation_id: str, body: MemoryAccept) -> Conversation:
    return server_state(request).chat.accept_memory(
        conversation_id, body.evolved_persona, expected_version=body.expected_version
    )


@router.post("/{conversation_id}/summarise", response_model=SummaryPreset, responses=_ERRORS)
async def summarise(request: Request, conversation_id: str) -> SummaryPreset:
    """Summarise the active branch into plot points (a summary preset, indexed)."""
    return await server_state(request).chat.summarise(conversation_id)


class ContinueBody(_Body):
    summary_id: str | None = Field(
        default=None, description="Default: the newest summary of this conversation"
    )
    order: SeedOrder = "summary_first"
    last_n_turns: int = Field(default=3, ge=0)
    title: str | None = Field(default=None, max_length=MAX_TITLE_CHARS)


@router.post(
    "/{conversation_id}/continue-from-summary",
    status_code=201,
    response_model=Conversation,
    responses=_ERRORS,
)
async def continue_from_summary(
    request: Request, conversation_id: str, body: ContinueBody | None = None
) -> Conversation:
    body = body or ContinueBody()
    return await server_state(request).chat.continue_from_summary(
        conversation_id,
        summary_id=body.summary_id,
        order=body.order,
        last_n_turns=body.last_n_turns,
        title=body.title,
    )


@router.get("/{conversation_id}/export", responses=_ERRORS)
def export_chat(
    request: Request,
    conversation_id: str,
    format: Annotated[Literal["sillytavern", "personalab"], Query()] = "sillytavern",
) -> Response:
    """The active branch as a SillyTavern ``.jsonl`` or a PersonaLab zip."""
    tree = server_state(request).turn_tree
    conversation = tree.conversation(conversation_id)
    stem = "".join(c if c.isalnum() or c in "-_ " else "_" for c in conversation.title).strip()
    stem = stem or conversation_id
    if format == "sillytavern":
        text = export_st_chat(tree, conversation_id)
        return download(text.encode("utf-8"), f"{stem}.jsonl", "application/jsonl")
    path = tree.active_path(conversation_id)
    files = export_personalab(conversation, path, tree.state_at(conversation.pointer))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, content in files.items():
            archive.writestr(name, content)
    return download(buffer.getvalue(), f"{stem}.zip", "application/zip")


# -- presets ------------------------------------------------------------------------------


def _presets(request: Request) -> PresetLibrary:
    presets = server_state(request).chat.presets
    if presets is None:
        raise ChatError("presets need a project")
    return presets


class CharacterList(BaseModel):
    characters: list[CharacterListing]


class BackgroundList(BaseModel):
    backgrounds: list[BackgroundPreset]
    problems: list[PresetProblem]


class SummaryList(BaseModel):
    summaries: list[SummaryPreset]
    problems: list[PresetProblem]


class SavedCharacter(BaseModel):
    id: str


class PromptDefaults(BaseModel):
    """What the chat pipeline's Skein Builder uses where its config leaves ``prompts`` or
    ``prompt_order`` out (SillyTavern's default preset): the prompt manager starts here."""

    prompts: list[PresetPrompt]
    prompt_order: list[PromptOrderEntry]


@presets_router.get("/prompt-defaults", response_model=PromptDefaults)
def prompt_defaults() -> PromptDefaults:
    return PromptDefaults(prompts=list(DEFAULT_PROMPTS), prompt_order=list(DEFAULT_PROMPT_ORDER))


@presets_router.get("/characters", response_model=CharacterList)
def list_characters(request: Request) -> CharacterList:
    """Every character preset (a file that does not read is listed with its error)."""
    return CharacterList(characters=_presets(request).characters())


@presets_router.get("/characters/{character_id}", responses=_ERRORS)
def get_character(request: Request, character_id: str) -> dict[str, Any]:
    preset = _presets(request).character(character_id)
    data: dict[str, Any] = preset.model_dump(mode="json", exclude={"source_card"})
    return data


@presets_router.get("/characters/{character_id}/avatar", responses=_ERRORS)
def character_avatar(request: Request, character_id: str) -> Response:
    presets = _presets(request)
    preset = presets.character(character_id)
    if not preset.avatar:
        return initials_response(preset.name)  # no picture: its generated face
    path = presets.folder("characters") / Path(preset.avatar).name
    if not path.is_file():
        raise NotFound(f"the avatar of character {character_id} is missing ({path.name})")
    data = path.read_bytes()
    # Only an image goes out, with its own type: the preset names any file of the folder.
    media_type = image_type(data)
    if media_type is None:
        raise NotFound(f"the avatar of character {character_id} ({path.name}) is not an image")
    return Response(data, media_type=media_type)


@presets_router.post(
    "/characters", status_code=201, response_model=SavedCharacter, responses=_ERRORS
)
def save_character(
    request: Request,
    body: dict[str, Any],
    id: Annotated[str | None, Query(description="Overwrite this preset")] = None,
) -> SavedCharacter:
    presets = _presets(request)
    with field_errors("character", "character"):
        preset = CharacterDefinition.model_validate(body)
    if id is not None and presets.path("characters", id).is_file():
        old = presets.character(id)
        if old.source_card is not None and preset.source_card is None:
            # The page edits fields; the imported card stays for a lossless export.
            preset = preset.model_copy(update={"source_card": old.source_card})
        if "knowledge_bases" in old.model_fields_set and "knowledge_bases" not in body:
            # A body from before books could be bound leaves the bindings as they are.
            preset = preset.model_copy(update={"knowledge_bases": old.knowledge_bases})
    return SavedCharacter(id=presets.save_character(id, preset))


@presets_router.get("/backgrounds", response_model=BackgroundList)
def list_backgrounds(request: Request) -> BackgroundList:
    presets = _presets(request)
    return BackgroundList(
        backgrounds=presets.backgrounds(), problems=presets.problems("backgrounds")
    )


@presets_router.post(
    "/backgrounds", status_code=201, response_model=BackgroundPreset, responses=_ERRORS
)
def save_background(request: Request, body: dict[str, Any]) -> BackgroundPreset:
    with field_errors("background", "background"):
        preset = BackgroundPreset.model_validate(body)
    return _presets(request).save_background(preset)


@presets_router.get("/summaries", response_model=SummaryList)
def list_summaries(request: Request) -> SummaryList:
    presets = _presets(request)
    return SummaryList(summaries=presets.summaries(), problems=presets.problems("summaries"))


@presets_router.post("/summaries", status_code=201, response_model=SummaryPreset, responses=_ERRORS)
def save_summary(request: Request, body: dict[str, Any]) -> SummaryPreset:
    with field_errors("summary", "summary"):
        preset = SummaryPreset.model_validate(body)
    return _presets(request).save_summary(preset)


@presets_router.delete("/{kind}/{preset_id}", status_code=204, responses=_ERRORS)
def delete_preset(
    request: Request,
    kind: Literal["characters", "backgrounds", "summaries"],
    preset_id: str,
) -> Response:
    _presets(request).delete(kind, preset_id)
    return Response(status_code=204)
