"""Text in, text out: typed text, templates, chat variables, regex rewriting, and JSON
pulled out of an LLM's reply."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal

import regex
from pydantic import Field

from storyloom.core.errors import StoryloomError
from storyloom.core.plugin_markers import hookimpl
from storyloom.knowledge.variables import apply_variables, lookup_variable, placeholders
from storyloom.workflow.node_type import (
    TEXTAREA,
    NodeConfig,
    NodeContext,
    NodeExpansion,
    NodeType,
    Slot,
    Suggestion,
    Suggestions,
)
from storyloom.workflow.slot_types import ANY, ARRAY, BOOLEAN, INTEGER, OBJECT, STRING


class TextNodeError(StoryloomError, ValueError):
    """A text node cannot do what its inputs ask (a bad pattern, a missing variable)."""


class TextInputConfig(NodeConfig):
    text: Annotated[str, TEXTAREA] = Field("", description="The text")


class TextInput(NodeType[TextInputConfig]):
    """Text typed on the node."""

    type: ClassVar[str] = "core:TextInput"
    display_name: ClassVar[str] = "Text"
    category: ClassVar[str] = "Text"
    description: ClassVar[str] = "Text typed on the node, handed to whatever it is wired to."
    outputs: ClassVar[tuple[Slot, ...]] = (
        Slot(name="text", type=STRING, description="The text as typed"),
    )

    async def run(
        self, ctx: NodeContext, inputs: dict[str, Any], config: TextInputConfig
    ) -> dict[str, Any] | NodeExpansion:
        return {"text": config.text}


class TextTemplateConfig(NodeConfig):
    template: Annotated[str | None, TEXTAREA] = Field(
        None, description="The template, used when the template input is not connected"
    )


class TextTemplate(NodeType[TextTemplateConfig]):
    """``{{name}}`` and ``{{a.b}}`` filled from an object; unknown placeholders stay as
    they are, so macros meant for a later stage survive."""

    type: ClassVar[str] = "core:TextTemplate"
    display_name: ClassVar[str] = "Text template"
    category: ClassVar[str] = "Text"
    description: ClassVar[str] = (
        "Fill {{name}} and {{a.b}} placeholders of a template from an object of values."
    )
    inputs: ClassVar[tuple[Slot, ...]] = (
        Slot(
            name="template",
            type=STRING,
            description="Text with {{name}} placeholders; the config value when unconnected",
        ),
        Slot(
            name="variables",
            type=OBJECT,
            required=False,
            description="Values by name; a dotted name reaches into objects and lists",
        ),
    )
    outputs: ClassVar[tuple[Slot, ...]] = (
        Slot(name="text", type=STRING, description="The template with placeholders filled"),
    )

    async def run(
        self, ctx: NodeContext, inputs: dict[str, Any], config: TextTemplateConfig
    ) -> dict[str, Any] | NodeExpansion:
        template = _text(inputs.get("template", config.template), "template")
        return {"text": apply_variables(template, _object(inputs.get("variables"), "variables"))}


class VariableApplicatorConfig(NodeConfig):
    missing: Annotated[
        Literal["keep", "empty", "error"],
        Suggestions(
            Suggestion(value="keep", label="Keep the placeholder"),
            Suggestion(value="empty", label="Remove it"),
            Suggestion(value="error", label="Fail the node"),
        ),
    ] = Field("keep", description="What a placeholder naming no variable becomes")


class VariableApplicator(NodeType[VariableApplicatorConfig]):
    """Seed 000's Variable Applicator: chat variables into a text, with a choice of what a
    placeholder naming no variable becomes."""

    type: ClassVar[str] = "core:VariableApplicator"
    display_name: ClassVar[str] = "Variable applicator"
    category: ClassVar[str] = "Knowledge processing"
    description: ClassVar[str] = (
        "Apply variables to a text: each {{name}} becomes the variable's value."
    )
    inputs: ClassVar[tuple[Slot, ...]] = (
        Slot(name="text", type=STRING, description="Text with {{name}} placeholders"),
        Slot(
            name="variables",
            type=OBJECT,
            description="The variables (a chat's state variables); dotted names reach inside",
        ),
    )
    outputs: ClassVar[tuple[Slot, ...]] = (
        Slot(name="text", type=STRING, description="The text with variables applied"),
    )

    async def run(
        self, ctx: NodeContext, inputs: dict[str, Any], config: VariableApplicatorConfig
    ) -> dict[str, Any] | NodeExpansion:
        text = _text(inputs.get("text"), "text")
        variables = _object(inputs.get("variables"), "variables")
        mode = config.missing
        missing = [name for name in placeholders(text) if not lookup_variable(variables, name)[0]]
        if missing and mode == "error":
            names = ", ".join("{{" + name + "}}" for name in missing)
            raise TextNodeError(f"no variable for {names} (config missing = 'error')")
        if missing and mode == "empty":
            # An exact-name key wins over the dotted walk, so "a.b" can be blanked too.
            variables = {**variables, **dict.fromkeys(missing, "")}
        return {"text": apply_variables(text, variables)}


DEFAULT_REGEX_TIMEOUT_S = 1.0
# JavaScript's flag letters (SillyTavern regex scripts are written for JS).
_FLAG_BITS = {
    "i": regex.IGNORECASE,
    "m": regex.MULTILINE,
    "s": regex.DOTALL,
    "x": regex.VERBOSE,
    "u": 0,  # patterns are Unicode already
    "y": 0,  # sticky matching has no equivalent in a whole-text replace; ignored
    "g": 0,  # "replace all": handled by the count, not a compile flag
}
_SLASHED = re.compile(r"^/(.*)/([A-Za-z]*)$", re.DOTALL)
_REPLACEMENT_REF = re.compile(r"\$(\$|&|\d{1,2}|<[^>]*>)|\{\{match\}\}")


@dataclass(frozen=True)
class RegexRule:
    pattern: str
    replacement: str
    flags: str


class RegexApplicatorConfig(NodeConfig):
    pattern: str | None = Field(None, description="The pattern, or /pattern/flags")
    replacement: str = Field("", description="The replacement")
    flags: Annotated[str, Suggestions("g", "gi", "gm")] = Field(
        "g", description="JavaScript-style flags for a bare pattern: g (all matches), i, m, s, x"
    )
    timeout_s: float = Field(
        DEFAULT_REGEX_TIMEOUT_S,
        ge=0.001,
        le=60,
        description="Seconds one pattern may run before the node fails",
    )


class RegexApplicator(NodeType[RegexApplicatorConfig]):
    """Seed 000's Dynamic Regex Applicator: patterns that may arrive from other nodes (a
    character card's regex scripts, a generated rule list) rewrite a text.

    Patterns are JavaScript-flavoured as SillyTavern writes them: ``/pattern/flags`` or a
    bare pattern with the ``flags`` config; without ``g`` only the first match is
    replaced. Replacements understand ``$1``, ``$<name>``, ``$&``, ``$$`` and ST's
    ``{{match}}``. Every pattern runs under a time limit, so a catastrophic one fails this
    node instead of hanging the run.
    """

    type: ClassVar[str] = "core:RegexApplicator"
    display_name: ClassVar[str] = "Dynamic regex applicator"
    category: ClassVar[str] = "Knowledge processing"
    description: ClassVar[str] = (
        "Rewrite a text with a regular expression, or a list of rules, that may come from "
        "other nodes. Accepts SillyTavern-style /pattern/flags."
    )
    inputs: ClassVar[tuple[Slot, ...]] = (
        Slot(name="text", type=STRING, description="The text to rewrite"),
        Slot(
            name="pattern",
            type=STRING,
            required=False,
            description="A pattern or /pattern/flags; the config value when unconnected",
        ),
        Slot(
            name="replacement",
            type=STRING,
            required=False,
            default="",
            description="What each match becomes ($1, $<name>, $&); the config value when "
            "unconnected",
        ),
        Slot(
            name="rules",
            type=ARRAY,
            required=False,
            description="More rules applied after the pattern, in order: "
            "[{pattern, replacement, flags}]",
        ),
    )
    outputs: ClassVar[tuple[Slot, ...]] = (
        Slot(name="text", type=STRING, description="The rewritten text"),
        Slot(name="matches", type=INTEGER, description="How many replacements were made"),
    )

    async def run(
        self, ctx: NodeContext, inputs: dict[str, Any], config: RegexApplicatorConfig
    ) -> dict[str, Any] | NodeExpansion:
        text = _text(inputs.get("text"), "text")
        flags = config.flags
        rules: list[RegexRule] = []
        pattern = inputs.get("pattern", config.pattern)
        if pattern not in (None, ""):
            replacement = inputs.get("replacement", config.replacement)
            rules.append(_rule(_text(pattern, "pattern"), replacement, flags, "pattern"))
        given = inputs.get("rules")
        if given is not None:
            rules += _rules(given, flags)
        if not rules and given is None:
            raise TextNodeError("nothing to apply: set a pattern or connect rules")
        timeout = config.timeout_s
        return await ctx.run_blocking(_apply_rules, text, rules, timeout)


def _rules(given: Any, flags: str) -> list[RegexRule]:
    if not isinstance(given, list):
        raise TextNodeError(f"input 'rules': expected a list of rules, got {given!r}")
    out: list[RegexRule] = []
    for i, item in enumerate(given):
        where = f"rules[{i}]"
        if not isinstance(item, Mapping) or not isinstance(item.get("pattern"), str):
            raise TextNodeError(f"input {where}: expected {{pattern, replacement, flags}}")
        out.append(_rule(item["pattern"], item.get("replacement"), item.get("flags", flags), where))
    return out


def _rule(pattern: str, replacement: Any, flags: Any, where: str) -> RegexRule:
    if replacement is not None and not isinstance(replacement, str):
        raise TextNodeError(f"{where}: replacement must be text, got {replacement!r}")
    slashed = _SLASHED.match(pattern)
    if slashed:
        pattern, flags = slashed.group(1), slashed.group(2)
    flags = str(flags or "")
    unknown = sorted(set(flags) - set(_FLAG_BITS))
    if unknown:
        raise TextNodeError(
            f"{where}: unknown regex flag(s) {''.join(unknown)!r} (known: {''.join(_FLAG_BITS)})"
        )
    return RegexRule(pattern, replacement or "", flags)


def _apply_rules(text: str, rules: Sequence[RegexRule], timeout: float) -> dict[str, Any]:
    total = 0
    for rule in rules:
        bits = 0
        for letter in rule.flags:
            bits |= _FLAG_BITS[letter]
        try:
            compiled = regex.compile(rule.pattern, bits)
        except regex.error as exc:
            raise TextNodeError(f"pattern {rule.pattern!r} is not a valid regex: {exc}") from None
        try:
            text, count = compiled.subn(
                _replacer(rule.replacement, compiled),
                text,
                count=0 if "g" in rule.flags else 1,
                timeout=timeout,
                concurrent=True,
            )
        except TimeoutError:
            raise TextNodeError(
                f"pattern {rule.pattern!r} ran longer than {timeout:g}s on this text "
                "(catastrophic backtracking?); simplify it or raise timeout_s"
            ) from None
        total += count
    return {"text": text, "matches": total}


def _replacer(template: str, compiled: regex.Pattern[str]) -> Any:
    """A replacement function following JavaScript's ``String.replace`` rules; a reference
    to a group that does not exist stays as typed, as in JavaScript."""
    group_count = compiled.groups
    names = set(compiled.groupindex)

    def expand(m: regex.Match[str]) -> str:
        def one(ref: re.Match[str]) -> str:
            token = ref.group(1)
            if token is None:  # {{match}}
                return m.group(0)
            if token == "$":
                return "$"
            if token == "&":
                return m.group(0)
            if token.startswith("<"):
                name = token[1:-1]
                return (m.group(name) or "") if name in names else ref.group(0)
            number, rest = int(token), ""
            if number > group_count and len(token) == 2:
                number, rest = int(token[0]), token[1]  # "$12" with one group is $1 + "2"
            if number == 0 or number > group_count:
                return ref.group(0)
            return (m.group(number) or "") + rest

        return _REPLACEMENT_REF.sub(one, template)

    return expand


class JsonExtractConfig(NodeConfig):
    path: str = Field(
        "",
        description='JSON Pointer ("/a/0/b") or dotted path ("a.0.b"); empty: the whole value',
    )


class JsonExtract(NodeType[JsonExtractConfig]):
    """JSON out of an LLM's reply: the whole text, a fenced ``json`` block, or the first
    balanced ``{...}`` / ``[...]`` that parses; then a path into it. Finding nothing is an
    answer (``found`` false), not an error, so a Switch can route on it."""

    type: ClassVar[str] = "core:JsonExtract"
    display_name: ClassVar[str] = "JSON extract"
    category: ClassVar[str] = "Data"
    description: ClassVar[str] = (
        "Find JSON in a text (an LLM reply, code fences and prose around it allowed) and "
        "take the value at a path."
    )
    inputs: ClassVar[tuple[Slot, ...]] = (
        Slot(
            name="text",
            type=ANY,
            description="Text containing JSON, or an already-parsed object or list",
        ),
    )
    outputs: ClassVar[tuple[Slot, ...]] = (
        Slot(name="value", type=ANY, description="The value at the path (null when not found)"),
        Slot(name="found", type=BOOLEAN, description="Whether JSON and the path were found"),
    )

    async def run(
        self, ctx: NodeContext, inputs: dict[str, Any], config: JsonExtractConfig
    ) -> dict[str, Any] | NodeExpansion:
        source = inputs.get("text")
        if not isinstance(source, str):
            found, value = True, source
        elif len(source) > _LONG_TEXT:
            found, value = await ctx.run_blocking(find_json, source)
        else:
            found, value = find_json(source)
        if found and value is not None:
            found, value = follow_path(value, config.path)
        else:
            found, value = False, None
        return {"value": value if found else None, "found": found}


_FENCE = re.compile(r"```[ \t]*(?:json5?|JSON)?[ \t]*\n(.*?)```", re.DOTALL)
_OPENING = re.compile(r"[{\[]")
_DECODER = json.JSONDecoder()
_MAX_STARTS = 1000
_LONG_TEXT = 20_000
"""Longer texts are searched in a thread, so the server's event loop stays free."""


def find_json(text: str) -> tuple[bool, Any]:
    """``(found, value)``: the first JSON value in ``text`` as LLMs write it."""
    stripped = text.strip()
    candidates = [stripped, *(m.group(1).strip() for m in _FENCE.finditer(text))]
    for candidate in candidates:
        if candidate:
            try:
                return True, json.loads(candidate)
            except (json.JSONDecodeError, RecursionError):
                pass
    return _first_embedded(text)


def _first_embedded(text: str) -> tuple[bool, Any]:
    """The first ``{...}`` or ``[...]`` in ``text`` that parses. Each try is the C decoder
    stopping at its first syntax error, and at most ``_MAX_STARTS`` brackets are tried, so
    a long reply full of stray brackets stays cheap."""
    for count, match in enumerate(_OPENING.finditer(text)):
        if count == _MAX_STARTS:
            break
        try:
            value, _ = _DECODER.raw_decode(text, match.start())
        except (json.JSONDecodeError, RecursionError):
            continue
        return True, value
    return False, None


def follow_path(value: Any, path: str) -> tuple[bool, Any]:
    """``(found, value)`` at a JSON Pointer or dotted path inside ``value``."""
    path = path.strip()
    if not path:
        return True, value
    if path.startswith("/"):
        parts = [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]
    else:
        parts = path.split(".")
    current = value
    for part in parts:
        if isinstance(current, Mapping) and part in current:
            current = current[part]
        elif isinstance(current, list) and part.isdigit() and int(part) < len(current):
            current = current[int(part)]
        else:
            return False, None
    return True, current


def _text(value: Any, slot: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise TextNodeError(f"input {slot!r}: expected text, got {type(value).__name__}")
    return value


def _object(value: Any, slot: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TextNodeError(f"input {slot!r}: expected an object, got {type(value).__name__}")
    return dict(value)


@hookimpl
def storyloom_node_types() -> list[type[NodeType]]:
    return [TextInput, TextTemplate, VariableApplicator, RegexApplicator, JsonExtract]
