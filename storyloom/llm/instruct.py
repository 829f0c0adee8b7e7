"""Instruct and context templates: how a chat becomes one prompt for a text-completion API.

Chat-completion servers apply the model's chat template themselves; text-completion
servers (KoboldCpp, llama.cpp's ``/completion``, any ``/v1/completions``) take one
string, so storyloom writes the turn markers itself, as SillyTavern's instruct mode does.
The two template kinds are SillyTavern's own files, read and written as they are:

- an **instruct template** (``instruct/*.json``): the sequences around each turn
  (``input_sequence`` ... ``system_suffix``), the first/last variants, the stop sequence,
  how names are shown;
- a **context template** (``context/*.json``): the *story string* (a handlebars
  template over the character's fields), the example separator and the chat start.

Fields keep SillyTavern's names and defaults, and keys this module does not know are kept
(``extra="allow"``), so a file imported from SillyTavern and saved again is unchanged.
:func:`format_prompt` follows SillyTavern's assembly: story string (wrapped in
``story_string_prefix``/``suffix``), examples, chat start, each turn wrapped in its
sequences, and the last output sequence left open for the model to continue.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from storyloom.core.atomic_io import atomic_write_json
from storyloom.core.errors import (
    Conflict,
    FieldProblem,
    FileFormatError,
    InvalidInput,
    NotFound,
    StoryloomError,
    problems_from_validation,
)
from storyloom.core.settings import ChatEndpoint, Settings
from storyloom.llm.errors import LLMError

__all__ = [
    "ContextTemplate",
    "InstructTemplate",
    "PromptPiece",
    "PromptTurn",
    "ResolvedTemplates",
    "TemplateKind",
    "TemplateLibrary",
    "TextPrompt",
    "builtin_context_templates",
    "builtin_instruct_templates",
    "format_prompt",
    "messages_prompt",
    "render_story_string",
    "template_for_model",
    "templates_of",
]

TemplateKind = Literal["instruct", "context"]
NamesBehavior = Literal["none", "force", "always"]
PieceKind = Literal["story_string", "sequence", "separator", "name", "example", "message"]

DEFAULT_INSTRUCT = "ChatML"
DEFAULT_CONTEXT = "Default"

# SillyTavern's default story string (its "Default" context template and the value a
# context file without ``story_string`` gets).
DEFAULT_STORY_STRING = (
    "{{#if anchorBefore}}{{anchorBefore}}\n{{/if}}"
    "{{#if system}}{{system}}\n{{/if}}"
    "{{#if wiBefore}}{{wiBefore}}\n{{/if}}"
    "{{#if description}}{{description}}\n{{/if}}"
    "{{#if personality}}{{char}}'s personality: {{personality}}\n{{/if}}"
    "{{#if scenario}}Scenario: {{scenario}}\n{{/if}}"
    "{{#if wiAfter}}{{wiAfter}}\n{{/if}}"
    "{{#if persona}}{{persona}}\n{{/if}}"
    "{{#if anchorAfter}}{{anchorAfter}}\n{{/if}}"
    "{{trim}}"
)
# The same fields without labels: SillyTavern's "Minimalist" and its model-named context
# templates (the model's own markers come from the instruct template's story string
# prefix and suffix).
PLAIN_STORY_STRING = (
    "{{#if anchorBefore}}{{anchorBefore}}\n{{/if}}"
    "{{#if system}}{{system}}\n{{/if}}"
    "{{#if wiBefore}}{{wiBefore}}\n{{/if}}"
    "{{#if description}}{{description}}\n{{/if}}"
    "{{#if personality}}{{personality}}\n{{/if}}"
    "{{#if scenario}}{{scenario}}\n{{/if}}"
    "{{#if wiAfter}}{{wiAfter}}\n{{/if}}"
    "{{#if persona}}{{persona}}\n{{/if}}"
    "{{#if anchorAfter}}{{anchorAfter}}\n{{/if}}"
    "{{trim}}"
)

# SillyTavern's extension_prompt_types: where the story string goes.
STORY_IN_PROMPT = 0
STORY_IN_CHAT = 1
# SillyTavern's extension_prompt_roles: the role of a story string placed in the chat.
_STORY_ROLES: dict[int, Literal["system", "user", "assistant"]] = {
    0: "system",
    1: "user",
    2: "assistant",
}


class InstructTemplate(BaseModel):
    """A SillyTavern instruct template (``instruct/*.json``, or the ``instruct`` object of
    its settings and master export). Unknown keys are kept as they are."""

    model_config = ConfigDict(extra="allow")

    name: str = Field(default="", description="The template's name (SillyTavern: the file's)")
    input_sequence: str = Field(default="### Instruction:", description="Before a user turn")
    input_suffix: str = Field(default="", description="After a user turn")
    output_sequence: str = Field(default="### Response:", description="Before a reply")
    output_suffix: str = Field(default="", description="After a reply")
    system_sequence: str = Field(default="", description="Before a system turn in the chat")
    system_suffix: str = Field(default="", description="After a system turn in the chat")
    first_input_sequence: str = Field(default="", description="The chat's first user turn")
    last_input_sequence: str = Field(default="", description="The chat's last user turn")
    first_output_sequence: str = Field(default="", description="The chat's first reply")
    last_output_sequence: str = Field(
        default="", description="The open sequence the model continues from"
    )
    last_system_sequence: str = Field(
        default="", description="SillyTavern's quiet (system) generations; kept as it is"
    )
    story_string_prefix: str = Field(default="", description="Before the story string")
    story_string_suffix: str = Field(default="", description="After the story string")
    stop_sequence: str = Field(default="", description="Ends the reply (one per line)")
    sequences_as_stop_strings: bool = Field(
        default=True, description="The turn sequences also end the reply"
    )
    user_alignment_message: str = Field(
        default="", description="A user turn put first when the chat does not open with one"
    )
    system_same_as_user: bool = Field(
        default=False, description="System turns use the user's sequences"
    )
    wrap: bool = Field(default=True, description="A newline between sequence and text")
    macro: bool = Field(default=True, description="Replace {{user}}, {{char}}, {{name}}")
    names_behavior: NamesBehavior = Field(
        default="force",
        description="none: no names; force: names of speakers other than the user and the "
        "character (groups, personas); always: every turn starts with 'Name: '",
    )
    skip_examples: bool = Field(
        default=False, description="Example dialogue as plain text, not wrapped in turns"
    )
    activation_regex: str = Field(
        default="", description="Picked for models whose name matches (/pattern/flags)"
    )

    @model_validator(mode="before")
    @classmethod
    def _migrate(cls, data: Any) -> Any:
        """SillyTavern's own migrations of older files, so those load as it loads them."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if "separator_sequence" in data:
            separator = data.pop("separator_sequence")
            data.setdefault("output_suffix", separator or "")
        if "names" in data:
            names = data.pop("names")
            force = data.pop("names_force_groups", True)
            if "names_behavior" not in data:
                data["names_behavior"] = "always" if names else ("force" if force else "none")
        data.pop("names_force_groups", None)
        # Before story_string_prefix/suffix existed, system_sequence_prefix/suffix went
        # around the system prompt; a file with neither wraps it in its system sequence.
        if "story_string_prefix" not in data and "story_string_suffix" not in data:
            old_prefix = data.pop("system_sequence_prefix", "") or ""
            old_suffix = data.pop("system_sequence_suffix", "") or ""
            if old_prefix or old_suffix:
                data["story_string_prefix"] = old_prefix
                data["story_string_suffix"] = old_suffix
            elif "system_sequence" in data:
                same = bool(data.get("system_same_as_user"))
                data["story_string_prefix"] = (
                    data.get("input_sequence", "") if same else data.get("system_sequence", "")
                ) or ""
                data["story_string_suffix"] = (
                    data.get("input_suffix", "") if same else data.get("system_suffix", "")
                ) or ""
        return data


class ContextTemplate(BaseModel):
    """A SillyTavern context template (``context/*.json``, or the ``context`` object of its
    settings and master export). Unknown keys (``always_force_name2``, ``trim_sentences``,
    ...) are kept as they are."""

    model_config = ConfigDict(extra="allow")

    name: str = Field(default="", description="The template's name")
    story_string: str = Field(
        default=DEFAULT_STORY_STRING,
        description="Handlebars over the character's fields: {{#if x}}…{{else}}…{{/if}}, "
        "{{x}}, {{trim}}",
    )
    example_separator: str = Field(default="***", description="Before each example block")
    chat_start: str = Field(default="***", description="Between the examples and the chat")
    use_stop_strings: bool = Field(
        default=True, description="The chat start and example separator end the reply"
    )
    names_as_stop_strings: bool = Field(
        default=True, description="'\\n<user>:' (and other speakers) end the reply"
    )
    story_string_position: int = Field(
        default=STORY_IN_PROMPT,
        ge=0,
        le=2,
        description="0: at the top of the prompt; 1: in the chat at story_string_depth",
    )
    story_string_depth: int = Field(
        default=1, ge=0, description="Turns from the end, with position 1"
    )
    story_string_role: int = Field(
        default=0, ge=0, le=2, description="With position 1: 0 system, 1 user, 2 assistant"
    )
    single_line: bool = Field(default=False, description="The reply ends at its first newline")


class PromptPiece(BaseModel):
    """Where a stretch of :attr:`TextPrompt.text` came from (for the prompt inspector and
    token accounting): ``text[start:end]``."""

    start: int
    end: int
    source: str = Field(
        description="Where it came from: 'story string', 'input sequence', 'chat start', "
        "the turn's source such as 'message m123', ..."
    )
    kind: PieceKind


class TextPrompt(BaseModel):
    """A prompt for a text-completion API: the text, its stop strings and its pieces."""

    text: str
    stop: list[str] = Field(default_factory=list)
    pieces: list[PromptPiece] = Field(default_factory=list)


class PromptTurn(BaseModel):
    """One turn of the chat (or of an example) before formatting."""

    role: Literal["system", "user", "assistant"]
    content: str
    name: str | None = Field(
        default=None, description="The speaker; unset: the user or the character by role"
    )
    source: str = Field(default="", description="A label for PromptPiece.source")


@dataclass(frozen=True)
class ResolvedTemplates:
    """The templates one endpoint formats with (attached by :meth:`TemplateLibrary.resolve`)."""

    instruct: InstructTemplate
    context: ContextTemplate


# -- story string ---------------------------------------------------------------------

_MUSTACHE = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
_TRIM = re.compile(r"(?:\r?\n)*\{\{trim\}\}(?:\r?\n)*", re.IGNORECASE)
_TRIM_MARK = "{{trim}}"


def render_story_string(template: str, fields: Mapping[str, str]) -> str:
    """Render SillyTavern's story string: the handlebars subset it uses.

    ``{{#if name}}…{{else}}…{{/if}}`` (nestable; empty is false), ``{{#unless name}}``,
    ``{{name}}``, ``{{! comments }}`` and ``{{trim}}`` (removes itself and the newlines
    around it). A name the fields lack renders empty. Leading newlines are dropped, as
    SillyTavern drops them.
    """
    tokens = _tokenize(template)
    output, _ = _render(tokens, 0, _field_lookup(fields), closing=())
    return _TRIM.sub("", output).lstrip("\n")


def _field_lookup(fields: Mapping[str, str]) -> dict[str, str]:
    lookup = {key: str(value) for key, value in fields.items()}
    for old, new in (("loreBefore", "wiBefore"), ("loreAfter", "wiAfter")):
        if old in lookup and new not in lookup:
            lookup[new] = lookup[old]
        if new in lookup and old not in lookup:
            lookup[old] = lookup[new]
    return lookup


def _tokenize(template: str) -> list[tuple[str, str]]:
    """("text", chunk) and ("tag", inside-the-braces) pairs."""
    tokens: list[tuple[str, str]] = []
    position = 0
    for match in _MUSTACHE.finditer(template):
        if match.start() > position:
            tokens.append(("text", template[position : match.start()]))
        tokens.append(("tag", match.group(1).strip()))
        position = match.end()
    if position < len(template):
        tokens.append(("text", template[position:]))
    return tokens


def _lookup(fields: Mapping[str, str], name: str) -> str:
    if name in fields:
        return fields[name]
    lowered = name.lower()
    for key, value in fields.items():
        if key.lower() == lowered:
            return value
    return ""


def _render(
    tokens: list[tuple[str, str]], index: int, fields: Mapping[str, str], closing: tuple[str, ...]
) -> tuple[str, int]:
    """Render from ``index`` until a tag in ``closing``; return the text and that tag's index."""
    out: list[str] = []
    while index < len(tokens):
        kind, value = tokens[index]
        if kind == "text":
            out.append(value)
            index += 1
            continue
        if value in closing:
            return "".join(out), index
        if value.startswith("!"):
            index += 1
        elif value.startswith(("#if ", "#unless ")):
            negate = value.startswith("#unless ")
            name = value.split(None, 1)[1].strip()
            truthy = bool(_lookup(fields, name).strip() if name else "")
            if negate:
                truthy = not truthy
            then_text, index = _render(tokens, index + 1, fields, ("else", "/if", "/unless"))
            else_text = ""
            if index < len(tokens) and tokens[index][1] == "else":
                else_text, index = _render(tokens, index + 1, fields, ("/if", "/unless"))
            index += 1  # past the closing tag (or the end)
            out.append(then_text if truthy else else_text)
        elif value.lower() == "trim":
            out.append(_TRIM_MARK)
            index += 1
        else:
            out.append(_lookup(fields, value))
            index += 1
    return "".join(out), index


# -- formatting -----------------------------------------------------------------------

_NAME_MACRO = re.compile(r"\{\{name\}\}", re.IGNORECASE)
_USER_MACRO = re.compile(r"\{\{user\}\}", re.IGNORECASE)
_CHAR_MACRO = re.compile(r"\{\{char\}\}", re.IGNORECASE)


class _Builder:
    """Text with a piece for every stretch of it."""

    def __init__(self) -> None:
        self.parts: list[tuple[str, PieceKind, str]] = []  # (text, kind, source)

    def add(self, text: str, kind: PieceKind, source: str) -> None:
        if text:
            self.parts.append((text, kind, source))

    def drop_trailing_newline(self) -> None:
        """SillyTavern removes one newline at the end of the last chat turn when
        sequences wrap, because the open sequence brings its own."""
        if self.parts and self.parts[-1][0].endswith("\n"):
            text, kind, source = self.parts.pop()
            self.add(text[:-1], kind, source)

    def build(self, stop: list[str]) -> TextPrompt:
        pieces: list[PromptPiece] = []
        position = 0
        for text, kind, source in self.parts:
            end = position + len(text)
            if pieces and pieces[-1].source == source and pieces[-1].kind == kind:
                pieces[-1].end = end
            else:
                pieces.append(PromptPiece(start=position, end=end, source=source, kind=kind))
            position = end
        return TextPrompt(text="".join(text for text, _, _ in self.parts), stop=stop, pieces=pieces)


@dataclass
class _Names:
    user: str
    char: str

    def macros(self, text: str, instruct: InstructTemplate, name: str) -> str:
        if not instruct.macro:
            return text
        text = _USER_MACRO.sub(lambda _: self.user, text)
        text = _CHAR_MACRO.sub(lambda _: self.char, text)
        return _NAME_MACRO.sub(lambda _: name or "System", text)


def _speaker(turn: PromptTurn, names: _Names) -> str:
    if turn.name:
        return turn.name
    return names.user if turn.role == "user" else names.char if turn.role == "assistant" else ""


def _shows_name(turn: PromptTurn, instruct: InstructTemplate, names: _Names) -> bool:
    if turn.role == "system":
        return False
    match instruct.names_behavior:
        case "always":
            return True
        case "force":
            # SillyTavern forces names in groups and for a switched persona: speakers
            # other than the user and the chat's character.
            return bool(turn.name) and turn.name not in (names.user, names.char)
        case "none":
            return False


def _turn_sequences(
    turn: PromptTurn, instruct: InstructTemplate, position: Literal["first", "last", ""]
) -> tuple[str, str, str, str]:
    """(prefix, prefix label, suffix, suffix label); a label is the template's field name
    in words ("first output sequence")."""
    if turn.role == "system" and not instruct.system_same_as_user:
        side, variants = "system", False
    else:
        # A system turn written as the user's has no first/last variant of its own.
        side, variants = ("output" if turn.role == "assistant" else "input"), turn.role != "system"
    prefix = f"{side}_sequence"
    if variants and position and getattr(instruct, f"{position}_{prefix}"):
        prefix = f"{position}_{prefix}"
    suffix = f"{side}_suffix"
    return (
        str(getattr(instruct, prefix)),
        prefix.replace("_", " "),
        str(getattr(instruct, suffix)),
        suffix.replace("_", " "),
    )


def _add_turn(
    out: _Builder,
    turn: PromptTurn,
    instruct: InstructTemplate,
    names: _Names,
    *,
    position: Literal["first", "last", ""] = "",
    kind: Literal["message", "example"] = "message",
    source: str,
    force_name: bool = False,
) -> None:
    prefix, prefix_label, suffix, suffix_label = _turn_sequences(turn, instruct, position)
    speaker = _speaker(turn, names)
    prefix = names.macros(prefix, instruct, speaker)
    suffix = names.macros(suffix, instruct, speaker)
    if not suffix and instruct.wrap:
        suffix, suffix_label = "\n", "wrap"
    separator = "\n" if instruct.wrap else ""
    if prefix:
        out.add(prefix, "sequence", prefix_label)
        out.add(separator, "sequence", "wrap")
    if speaker and (force_name or _shows_name(turn, instruct, names)):
        out.add(f"{speaker}: ", "name", f"name {speaker}")
    out.add(turn.content, kind, turn.source or source)
    out.add(suffix, "sequence", suffix_label)


def _add_open_sequence(out: _Builder, instruct: InstructTemplate, names: _Names) -> None:
    """The open reply the model continues (SillyTavern's formatInstructModePrompt)."""
    sequence = instruct.last_output_sequence or instruct.output_sequence
    label = "last output sequence" if instruct.last_output_sequence else "output sequence"
    shows_name = instruct.names_behavior == "always"
    filler = ""
    # Mistral's output sequence ends in a space its last output sequence lacks: the name
    # still needs the space before it.
    if (
        shows_name
        and instruct.last_output_sequence
        and instruct.output_sequence[-1:].isspace()
        and not instruct.last_output_sequence[-1:].isspace()
    ):
        filler = instruct.output_sequence[-1]
    sequence = names.macros(sequence, instruct, names.char)
    separator = "\n" if instruct.wrap else ""
    if instruct.wrap:
        out.drop_trailing_newline()
    if shows_name:
        out.add(separator, "sequence", "wrap")
        out.add(sequence, "sequence", label)
        out.add(separator + filler, "sequence", "wrap")
        out.add(f"{names.char}:", "name", f"name {names.char}")
        return
    text = separator + sequence
    if instruct.wrap:
        text = text.rstrip()
    out.add(text + separator, "sequence", label)


def _stop_strings(
    instruct: InstructTemplate, context: ContextTemplate, names: _Names, speakers: Iterable[str]
) -> list[str]:
    found: list[str] = []

    def add(text: str) -> None:
        if text and text.strip() and text not in found:
            found.append(text)

    for line in instruct.stop_sequence.split("\n"):
        add(names.macros(line, instruct, names.char))
    if instruct.sequences_as_stop_strings:
        for sequence, name in (
            (instruct.input_sequence, names.user),
            (instruct.output_sequence, names.char),
            (instruct.first_output_sequence, names.char),
            (instruct.last_output_sequence, names.char),
            (instruct.system_sequence, "System"),
            (instruct.last_system_sequence, "System"),
        ):
            for line in names.macros(sequence, instruct, name).split("\n"):
                add(line.strip())
    if context.use_stop_strings:
        for marker in (context.chat_start, context.example_separator):
            if marker.strip():
                add("\n" + names.macros(marker, instruct, names.char))
    if context.names_as_stop_strings:
        add(f"\n{names.user}:")
        for speaker in speakers:
            if speaker != names.char:
                add(f"\n{speaker}:")
    if context.single_line:
        found.append("\n")
    return found


def _examples_text(
    examples: Sequence[Sequence[PromptTurn]],
    instruct: InstructTemplate,
    context: ContextTemplate,
    names: _Names,
) -> _Builder:
    out = _Builder()
    heading = names.macros(context.example_separator, instruct, names.char)
    for number, block in enumerate(examples, start=1):
        if not block:
            continue
        if heading:
            out.add(heading + "\n", "separator", "example separator")
        for turn in block:
            source = turn.source or f"example {number}"
            if instruct.skip_examples:
                speaker = _speaker(turn, names)
                out.add(f"{speaker}: " if speaker else "", "name", f"name {speaker}")
                out.add(turn.content, "example", source)
                out.add("\n", "sequence", "wrap")
                continue
            # SillyTavern shows the user's name in examples under "force" too.
            forced = instruct.names_behavior == "force" and turn.role == "user"
            _add_turn(out, turn, instruct, names, kind="example", source=source, force_name=forced)
    return out


def format_prompt(
    turns: Sequence[PromptTurn],
    instruct: InstructTemplate,
    context: ContextTemplate,
    *,
    user: str,
    char: str,
    story: Mapping[str, str] | None = None,
    examples: Sequence[Sequence[PromptTurn]] = (),
) -> TextPrompt:
    """The chat as one prompt, the way SillyTavern's instruct mode builds it.

    In order: the story string rendered from ``story`` (system, description, personality,
    scenario, persona, wiBefore/loreBefore, wiAfter/loreAfter, anchorBefore/After, ...;
    ``char`` and ``user`` are filled in) and wrapped in ``story_string_prefix``/``suffix``;
    the example blocks, each after the example separator (or inside the story string
    where it names ``{{mesExamples}}``); the chat start; every turn in its sequences
    (first and last variants, ``system_same_as_user``, names per ``names_behavior``, the
    user alignment message when the chat does not open with the user); and the last
    output sequence, left open for the model (with ``Char:`` when names are always
    shown). ``stop`` holds the stop sequence, the turn sequences (trimmed, with
    ``sequences_as_stop_strings``), the chat start and example separator (with
    ``use_stop_strings``) and ``\\n<name>:`` for the user and other speakers (with
    ``names_as_stop_strings``), without duplicates or empty strings.
    """
    names = _Names(user=user, char=char)
    out = _Builder()

    examples_out = _examples_text(examples, instruct, context, names)
    examples_text = "".join(text for text, _, _ in examples_out.parts)
    fields: dict[str, str] = {"char": char, "user": user}
    fields.update(story or {})
    examples_in_story = "mesexamples" in context.story_string.lower()
    if examples_in_story:
        fields.setdefault("mesExamples", examples_text)

    story_text = render_story_string(context.story_string, fields)
    story_text = names.macros(story_text, instruct, "System")
    in_chat = context.story_string_position == STORY_IN_CHAT
    chat_turns = list(turns)
    if in_chat:
        if story_text:
            depth = min(max(context.story_string_depth, 0), len(chat_turns))
            role = _STORY_ROLES.get(context.story_string_role, "system")
            chat_turns.insert(
                len(chat_turns) - depth,
                PromptTurn(role=role, content=story_text.strip(), source="story string"),
            )
    elif story_text:
        prefix = names.macros(instruct.story_string_prefix, instruct, "System")
        suffix = names.macros(instruct.story_string_suffix, instruct, "System")
        # A context template from before SillyTavern 1.12.12 holds the model's system
        # markers itself; wrapping it again would double them.
        if prefix.strip() and story_text.startswith(prefix.strip()):
            prefix = suffix = ""
        if not story_text.endswith("\n") and instruct.wrap and not suffix:
            story_text += "\n"
        if prefix:
            out.add(prefix, "sequence", "story string prefix")
            out.add("\n" if instruct.wrap else "", "sequence", "wrap")
        out.add(story_text, "story_string", "story string")
        out.add(suffix, "sequence", "story string suffix")

    if not examples_in_story:
        out.parts.extend(examples_out.parts)

    chat_start = names.macros(context.chat_start, instruct, char)
    if chat_start:
        out.add(chat_start + "\n", "separator", "chat start")

    if instruct.user_alignment_message and (not chat_turns or chat_turns[0].role != "user"):
        alignment = PromptTurn(
            role="user",
            content=names.macros(instruct.user_alignment_message, instruct, user),
            source="user alignment message",
        )
        _add_turn(out, alignment, instruct, names, position="first", source=alignment.source)

    last_user = max((i for i, t in enumerate(chat_turns) if t.role == "user"), default=-1)
    for index, turn in enumerate(chat_turns):
        position: Literal["first", "last", ""] = ""
        if index == last_user:
            position = "last"
        elif index == 0:
            position = "first"
        _add_turn(out, turn, instruct, names, position=position, source=f"message {index + 1}")

    _add_open_sequence(out, instruct, names)
    speakers = {t.name for t in chat_turns if t.name and t.role == "assistant"}
    return out.build(_stop_strings(instruct, context, names, sorted(speakers)))


# -- plain messages -------------------------------------------------------------------

MESSAGES_USER = "User"
MESSAGES_CHAR = "Assistant"


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
    return "" if content is None else str(content)


def messages_prompt(messages: Sequence[Mapping[str, Any]], endpoint: ChatEndpoint) -> TextPrompt:
    """OpenAI-style messages as a prompt with ``endpoint``'s templates (resolved, or the
    built-ins for its names). Leading system messages become the story string's
    ``{{system}}``; later ones are system turns; the user is "User" and the model
    "Assistant" (shown only where the template always shows names)."""
    templates = templates_of(endpoint)
    system: list[str] = []
    turns: list[PromptTurn] = []
    for index, message in enumerate(messages):
        role = str(message.get("role", "user"))
        text = _content_text(message.get("content"))
        if role in ("system", "developer") and not turns:
            system.append(text)
            continue
        mapped: Literal["system", "user", "assistant"] = (
            "assistant" if role == "assistant" else "user" if role == "user" else "system"
        )
        name = message.get("name")
        turns.append(
            PromptTurn(
                role=mapped,
                content=text,
                name=str(name) if name else None,
                source=f"message {index + 1}",
            )
        )
    return format_prompt(
        turns,
        templates.instruct,
        templates.context,
        user=MESSAGES_USER,
        char=MESSAGES_CHAR,
        story={"system": "\n\n".join(part for part in system if part)},
    )


def templates_of(endpoint: ChatEndpoint) -> ResolvedTemplates:
    """The templates attached to ``endpoint``, else those its names pick among the
    built-ins."""
    attached = endpoint.prompt_templates
    if isinstance(attached, ResolvedTemplates):
        return attached
    if isinstance(attached, StoryloomError):
        raise LLMError(
            f"The prompt templates of this connection cannot be used: {attached}. Pick "
            "others under Settings, or fix the file.",
            kind="not_configured",
        )
    try:
        return TemplateLibrary(None).templates_for(endpoint)
    except StoryloomError as error:
        raise LLMError(
            f"The prompt templates of this connection cannot be used: {error}.",
            kind="not_configured",
        ) from error


# -- built-in templates ---------------------------------------------------------------


def _instruct(name: str, **fields: Any) -> InstructTemplate:
    base: dict[str, Any] = {
        "name": name,
        "input_sequence": "",
        "input_suffix": "",
        "output_sequence": "",
        "output_suffix": "",
        "system_sequence": "",
        "system_suffix": "",
        "first_input_sequence": "",
        "last_input_sequence": "",
        "first_output_sequence": "",
        "last_output_sequence": "",
        "last_system_sequence": "",
        "story_string_prefix": "",
        "story_string_suffix": "",
        "stop_sequence": "",
        "sequences_as_stop_strings": True,
        "user_alignment_message": "",
        "system_same_as_user": False,
        "wrap": False,
        "macro": True,
        "names_behavior": "force",
        "skip_examples": False,
        "activation_regex": "",
    }
    base.update(fields)
    return InstructTemplate.model_validate(base)


def _chatml(name: str) -> InstructTemplate:
    # <|im_start|>role\n text <|im_end|>\n per turn; the reply opens "<|im_start|>assistant\n".
    return _instruct(
        name,
        input_sequence="<|im_start|>user",
        input_suffix="<|im_end|>\n",
        output_sequence="<|im_start|>assistant",
        output_suffix="<|im_end|>\n",
        system_sequence="<|im_start|>system",
        system_suffix="<|im_end|>\n",
        story_string_prefix="<|im_start|>system",
        story_string_suffix="<|im_end|>\n",
        stop_sequence="<|im_end|>",
        wrap=True,
    )


def builtin_instruct_templates() -> dict[str, InstructTemplate]:
    """Instruct templates for the common model families, written from each model's
    documented prompt format. The beginning-of-text token is left to the server, which
    adds it when it tokenizes the prompt."""
    templates = [
        _chatml("ChatML"),
        # Qwen 1.5 to 3 and QwQ use ChatML; Qwen's own chat template adds a default
        # system prompt when none is given, which storyloom leaves to the story string.
        _chatml("Qwen"),
        _instruct(
            "Llama 3 Instruct",
            input_sequence="<|start_header_id|>user<|end_header_id|>\n\n",
            input_suffix="<|eot_id|>",
            output_sequence="<|start_header_id|>assistant<|end_header_id|>\n\n",
            output_suffix="<|eot_id|>",
            system_sequence="<|start_header_id|>system<|end_header_id|>\n\n",
            system_suffix="<|eot_id|>",
            story_string_prefix="<|start_header_id|>system<|end_header_id|>\n\n",
            story_string_suffix="<|eot_id|>",
            stop_sequence="<|eot_id|>",
        ),
        # Mistral Large 2411 and other SentencePiece models of the V7 format:
        # [SYSTEM_PROMPT] s[/SYSTEM_PROMPT][INST] u[/INST] a</s>
        _instruct(
            "Mistral V7",
            input_sequence="[INST] ",
            input_suffix="[/INST]",
            output_sequence=" ",
            output_suffix="</s>",
            system_sequence="[SYSTEM_PROMPT] ",
            system_suffix="[/SYSTEM_PROMPT]",
            story_string_prefix="[SYSTEM_PROMPT] ",
            story_string_suffix="[/SYSTEM_PROMPT]",
            stop_sequence="</s>",
        ),
        # Tekken-tokenizer models (Mistral Small 3+, Nemo, Ministral): no spaces.
        _instruct(
            "Mistral V7-Tekken",
            input_sequence="[INST]",
            input_suffix="[/INST]",
            output_suffix="</s>",
            system_sequence="[SYSTEM_PROMPT]",
            system_suffix="[/SYSTEM_PROMPT]",
            story_string_prefix="[SYSTEM_PROMPT]",
            story_string_suffix="[/SYSTEM_PROMPT]",
            stop_sequence="</s>",
        ),
        # Gemma 2 and 3 have no system role: system text is a user turn.
        _instruct(
            "Gemma 2",
            input_sequence="<start_of_turn>user",
            input_suffix="<end_of_turn>\n",
            output_sequence="<start_of_turn>model",
            output_suffix="<end_of_turn>\n",
            system_same_as_user=True,
            story_string_prefix="<start_of_turn>user",
            story_string_suffix="<end_of_turn>\n",
            stop_sequence="<end_of_turn>",
            wrap=True,
        ),
        # ### Instruction:\n u\n\n### Response:\n a\n\n
        _instruct(
            "Alpaca",
            input_sequence="### Instruction:",
            input_suffix="\n\n",
            output_sequence="### Response:",
            output_suffix="\n\n",
            system_sequence="### Input:",
            system_suffix="\n\n",
            story_string_suffix="\n\n",
            wrap=True,
        ),
        # FastChat's vicuna_v1.1: "s USER: u ASSISTANT: a</s>USER: u ASSISTANT:"
        _instruct(
            "Vicuna 1.1",
            input_sequence="USER: ",
            input_suffix=" ",
            output_sequence="ASSISTANT: ",
            output_suffix="</s>",
            last_output_sequence="ASSISTANT:",
            system_same_as_user=True,
            story_string_suffix=" ",
        ),
        # Phi-3 and 3.5: <|role|>\n text <|end|>\n
        _instruct(
            "Phi",
            input_sequence="<|user|>\n",
            input_suffix="<|end|>\n",
            output_sequence="<|assistant|>\n",
            output_suffix="<|end|>\n",
            system_sequence="<|system|>\n",
            system_suffix="<|end|>\n",
            story_string_prefix="<|system|>\n",
            story_string_suffix="<|end|>\n",
            stop_sequence="<|end|>",
        ),
        # DeepSeek V2.5, V3 and the R1 distills: s<｜User｜>u<｜Assistant｜>a<｜end▁of▁sentence｜>
        _instruct(
            "DeepSeek",
            input_sequence="<｜User｜>",
            output_sequence="<｜Assistant｜>",
            output_suffix="<｜end▁of▁sentence｜>",
            system_same_as_user=True,
            stop_sequence="<｜end▁of▁sentence｜>",
        ),
        # Pygmalion 2 / Metharme: <|system|>s<|user|>u<|model|>a
        _instruct(
            "Metharme",
            input_sequence="<|user|>",
            output_sequence="<|model|>",
            system_sequence="<|system|>",
            story_string_prefix="<|system|>",
            stop_sequence="</s>",
        ),
    ]
    return {template.name: template for template in templates}


def builtin_context_templates() -> dict[str, ContextTemplate]:
    """SillyTavern's "Default" and "Minimalist", and one plain context template named like
    each built-in instruct template (picked with it when no context template is set)."""

    def plain(name: str) -> ContextTemplate:
        return ContextTemplate(
            name=name,
            story_string=PLAIN_STORY_STRING,
            example_separator="",
            chat_start="",
            use_stop_strings=False,
            names_as_stop_strings=True,
        )

    templates = [
        ContextTemplate(
            name=DEFAULT_CONTEXT,
            story_string=DEFAULT_STORY_STRING,
            example_separator="***",
            chat_start="***",
            use_stop_strings=False,
            names_as_stop_strings=True,
        ),
        plain("Minimalist"),
        *(plain(name) for name in builtin_instruct_templates()),
    ]
    return {template.name: template for template in templates}


_MODEL_FAMILIES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), name)
    for pattern, name in (
        # DeepSeek first: its distills also name Qwen or Llama.
        (r"deepseek", "DeepSeek"),
        (r"llama[-_ ]?3", "Llama 3 Instruct"),
        (r"mistral[-_ ]?large|2411|mixtral|mistral[-_ ]?7b", "Mistral V7"),
        (r"mistral|ministral|magistral|devstral|codestral|pixtral|nemo", "Mistral V7-Tekken"),
        (r"gemma", "Gemma 2"),
        (r"qwen|qwq", "Qwen"),
        (r"phi[-_ ]?3", "Phi"),
        (r"vicuna", "Vicuna 1.1"),
        (r"pygmalion|metharme", "Metharme"),
        (r"alpaca", "Alpaca"),
        (r"smollm|chatml|hermes|dolphin", "ChatML"),
    )
)


def template_for_model(model: str) -> str:
    """The built-in instruct template a model's name suggests, else ChatML."""
    lowered = model.lower()
    for pattern, name in _MODEL_FAMILIES:
        if pattern.search(lowered):
            return name
    return DEFAULT_INSTRUCT


def _activation_pattern(regex: str) -> re.Pattern[str] | None:
    """SillyTavern's activation regex: ``/pattern/flags`` or a bare pattern."""
    match = re.fullmatch(r"/(.*)/([a-z]*)", regex, re.DOTALL)
    pattern, flags = (match.group(1), match.group(2)) if match else (regex, "")
    try:
        return re.compile(pattern, re.IGNORECASE if "i" in flags else 0)
    except re.error:
        return None


# -- the library ----------------------------------------------------------------------

_MODELS: dict[TemplateKind, type[InstructTemplate] | type[ContextTemplate]] = {
    "instruct": InstructTemplate,
    "context": ContextTemplate,
}
_UNSAFE_NAME = re.compile(r'[\\/:*?"<>|\x00-\x1f]')


@functools.cache
def _builtins(kind: TemplateKind) -> Mapping[str, InstructTemplate | ContextTemplate]:
    """The built-in templates of ``kind``, built once: the library looks them up on every
    resolve, and the settings in force resolve their templates on each read."""
    return builtin_instruct_templates() if kind == "instruct" else builtin_context_templates()


def _file_name(name: str) -> str:
    cleaned = _UNSAFE_NAME.sub("_", name).strip().strip(".")
    if not cleaned:
        raise InvalidInput.of("template", [FieldProblem("name", "must not be empty")])
    return f"{cleaned}.json"


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise FileFormatError(path, [FieldProblem("", f"cannot read ({exc.strerror})")]) from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise FileFormatError(path, [FieldProblem("", f"not JSON ({exc})")]) from None
    if not isinstance(data, dict):
        raise FileFormatError(path, [FieldProblem("", "must be a JSON object")])
    return data


def _kind_of(data: Mapping[str, Any]) -> TemplateKind | None:
    if "story_string" in data:
        return "context"
    if "input_sequence" in data or "output_sequence" in data:
        return "instruct"
    return None


class TemplateLibrary:
    """The built-in templates plus the files in ``<home>/instruct`` and ``<home>/context``
    (SillyTavern's files, imported or saved). A file wins over a built-in of the same name.
    ``home`` None: the built-ins only."""

    def __init__(self, home: Path | None) -> None:
        self.home = home
        # path → (mtime_ns, size, parsed JSON): the settings in force resolve templates on
        # every read, so a file is parsed again only when it changed.
        self._parsed: dict[Path, tuple[int, int, dict[str, Any]]] = {}

    def _read(self, path: Path) -> dict[str, Any]:
        try:
            stat = path.stat()
        except OSError:
            return _read_json(path)  # names the file and why it cannot be read
        cached = self._parsed.get(path)
        if cached is not None and cached[:2] == (stat.st_mtime_ns, stat.st_size):
            return dict(cached[2])
        data = _read_json(path)
        self._parsed[path] = (stat.st_mtime_ns, stat.st_size, data)
        return dict(data)

    def _folder(self, kind: TemplateKind) -> Path | None:
        return None if self.home is None else self.home / kind

    def _files(self, kind: TemplateKind) -> dict[str, Path]:
        """Template name → file; a file that does not parse is listed under its stem."""
        folder = self._folder(kind)
        found: dict[str, Path] = {}
        if folder is None or not folder.is_dir():
            return found
        for path in sorted(folder.glob("*.json")):
            try:
                data = self._read(path)
            except FileFormatError:
                found.setdefault(path.stem, path)
                continue
            name = data.get("name")
            found.setdefault(name if isinstance(name, str) and name else path.stem, path)
        return found

    def _load(self, kind: TemplateKind, path: Path, name: str) -> Any:
        data = self._read(path)
        data.setdefault("name", name)
        try:
            return _MODELS[kind].model_validate(data)
        except ValidationError as exc:
            raise FileFormatError(path, problems_from_validation(exc)) from None

    def _get(self, kind: TemplateKind, name: str) -> Any:
        path = self._files(kind).get(name)
        if path is not None:
            return self._load(kind, path, name)
        builtins = _builtins(kind)
        if name in builtins:
            # A copy: the built-ins are built once and shared.
            return builtins[name].model_copy()
        where = (
            f"the built-in templates and {self._folder(kind)}"
            if self.home
            else "the built-in templates"
        )
        raise NotFound(f"no {kind} template named {name!r} in {where}")

    def instruct(self, name: str) -> InstructTemplate:
        template: InstructTemplate = self._get("instruct", name)
        return template

    def context(self, name: str) -> ContextTemplate:
        template: ContextTemplate = self._get("context", name)
        return template

    def names(self, kind: TemplateKind) -> list[str]:
        """The templates of ``kind``, built in or stored, sorted."""
        return sorted(set(_builtins(kind)) | set(self._files(kind)), key=str.lower)

    def is_builtin(self, kind: TemplateKind, name: str) -> bool:
        return name in _builtins(kind)

    def import_file(self, path: Path) -> tuple[TemplateKind, str]:
        """Validate a SillyTavern instruct or context file as a whole and store it in the
        library (written atomically, as it is). Returns its kind and name."""
        data = _read_json(path)
        kind = _kind_of(data)
        if kind is None:
            raise FileFormatError(
                path,
                [
                    FieldProblem(
                        "",
                        "neither an instruct template (it has no input_sequence or "
                        "output_sequence) nor a context template (it has no story_string)",
                    )
                ],
            )
        name = data.get("name")
        if name is not None and not isinstance(name, str):
            raise FileFormatError(path, [FieldProblem("name", "must be a string")])
        data["name"] = name or path.stem
        try:
            _MODELS[kind].model_validate(data)
        except ValidationError as exc:
            raise FileFormatError(path, problems_from_validation(exc)) from None
        self._write(kind, data["name"], data)
        return kind, data["name"]

    def save(self, kind: TemplateKind, template: InstructTemplate | ContextTemplate) -> None:
        """Store ``template`` under its name (replacing a file of that name)."""
        if not isinstance(template, _MODELS[kind]):
            raise InvalidInput(f"a {type(template).__name__} is not a {kind} template")
        self._write(kind, template.name, template.model_dump(mode="json"))

    def _write(self, kind: TemplateKind, name: str, data: Mapping[str, Any]) -> None:
        folder = self._folder(kind)
        if folder is None:
            raise InvalidInput("this template library has no data directory to save into")
        existing = self._files(kind).get(name)
        atomic_write_json(existing or folder / _file_name(name), dict(data))

    def delete(self, kind: TemplateKind, name: str) -> None:
        """Remove a stored template; a built-in one of the same name shows again."""
        path = self._files(kind).get(name)
        if path is None:
            if self.is_builtin(kind, name):
                raise Conflict(f"the {kind} template {name!r} is built in and cannot be deleted")
            raise NotFound(f"no {kind} template named {name!r} in {self._folder(kind)}")
        path.unlink()

    def instruct_for_model(self, model: str) -> str:
        """The stored template whose ``activation_regex`` matches ``model`` (SillyTavern's
        auto-select), else :func:`template_for_model`."""
        for name, path in self._files("instruct").items():
            try:
                template: InstructTemplate = self._load("instruct", path, name)
            except FileFormatError:
                continue
            pattern = _activation_pattern(template.activation_regex)
            if template.activation_regex and pattern is not None and pattern.search(model):
                return name
        return template_for_model(model)

    def templates_for(self, endpoint: ChatEndpoint) -> ResolvedTemplates:
        """The templates ``endpoint`` names. An unset instruct template is picked from the
        model name; an unset context template is the one named like the instruct template
        (SillyTavern's "bind to context"), else "Default"."""
        instruct_name = endpoint.instruct_template or self.instruct_for_model(endpoint.model)
        context_name = endpoint.context_template
        if not context_name:
            bound = instruct_name in _builtins("context") or instruct_name in self._files("context")
            context_name = instruct_name if bound else DEFAULT_CONTEXT
        return ResolvedTemplates(self.instruct(instruct_name), self.context(context_name))

    def resolve(self, endpoint: ChatEndpoint) -> ChatEndpoint:
        """``endpoint`` with its templates attached (for the text-completion apis; a chat
        api endpoint is returned as it is). Raises NotFound or FileFormatError when a
        named template is missing or its file is broken."""
        if endpoint.api == "chat":
            return endpoint
        return endpoint.with_prompt_templates(self.templates_for(endpoint))

    def resolve_settings(self, settings: Settings) -> Settings:
        """``settings`` with the templates of every text-completion endpoint (both chat
        roles and each connection) attached. One whose templates cannot be loaded carries
        the reason instead, raised (as ``not_configured``) when it is asked for text, so
        one broken file never stops the server."""

        def attach(_key: str, endpoint: ChatEndpoint) -> ChatEndpoint:
            if endpoint.api == "chat":
                return endpoint
            try:
                return self.resolve(endpoint)
            except StoryloomError as error:
                return endpoint.with_prompt_templates(error)

        return settings.with_chat_endpoints(attach)
