"""A turn's EJS templates: the lore entries and card fields that hold one, in one batch.

:func:`evaluate_turn_templates` runs before the lore scan (one sandboxed call for all of
them, :func:`~storyloom.chat.prompt.ejs_template.render_templates`), so an entry is
scanned, counted against the lore budget and injected as its rendered text, never as its
code. In that one batch, in this order: the ``@@if`` conditions, every lore entry whose
content holds ``<%`` (in the books' order), the card fields, the preset's prompts, then
the chat messages of the prompt. Every template entry is
therefore evaluated as ST-Prompt-Template's ``@@preprocessing`` ones are; the variables
a lore entry writes count only when the scan then activates it (:meth:`TurnTemplates.
variables_after`), as an entry the plugin never renders writes nothing.

``[InitialVariables]`` / ``@@initial_variables`` entries hold a JSON object of starting
variables: the keys the turn's variables lack are filled from it before the templates
run. Render entries (``[RENDER:BEFORE]``...) and initial-variable entries never reach the
prompt; ``[GENERATE:BEFORE]``/``[GENERATE:AFTER]`` go to the top / the end of it.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from storyloom.chat.prompt.ejs_template import (
    TemplateProblem,
    TemplateResult,
    TemplateScopes,
    TemplateSource,
    WorldInfoOf,
    WorldInfoText,
    apply_writes,
    has_template,
    problem_of,
    render_templates,
)
from storyloom.chat.prompt.shuttle_nodes import SkeinBuilder
from storyloom.chat.store.conversation import CharacterSnapshot
from storyloom.knowledge.caiu import CAIU, Placement
from storyloom.knowledge.catalog import LoadedKB
from storyloom.knowledge.keyword_matcher import (
    UnusableKeyError,
    compile_regex_key,
    parse_regex_key,
)
from storyloom.knowledge.knowledge_base import KnowledgeBase
from storyloom.knowledge.st_decorators import TEMPLATE_METADATA, TemplateMarks, template_marks
from storyloom.sillytavern.tavern_helper import helper_scripts
from storyloom.workflow.workflow_file import Workflow

EntryKey = tuple[str, str]

CARD_FIELDS = (
    "description",
    "personality",
    "scenario",
    "system_prompt",
    "post_history_instructions",
    "mes_example",
)
"""The card's text fields the prompt uses that may hold a template (``first_mes`` is a
message: it renders where messages are shown)."""

INJECTION_PLACEMENT = {
    # Where the prompt starts the skein builder moves it to the top (LoreHit.prompt_top).
    "generate_before": Placement.BEFORE_PROMPT,
    # The end of the prompt: in the chat, after the newest message.
    "generate_after": Placement.AT_DEPTH,
}


@dataclass(frozen=True)
class HistoryTemplate:
    """A chat message of the prompt holding a template, with the variables at it."""

    message_id: str
    role: str
    text: str
    variables: Mapping[str, Any]


@dataclass(frozen=True)
class PresetTemplate:
    """A prompt of the chat-completion preset (the pipeline's Skein Builder) holding a
    template: its name (the user's, else its identifier) and its text as written."""

    name: str
    text: str


@dataclass
class TurnTemplates:
    """What a turn's templates gave."""

    lore_texts: dict[EntryKey, str] = field(default_factory=dict)
    """Rendered content per lore entry (the scan's ``template_texts``)."""
    excluded: dict[EntryKey, str] = field(default_factory=dict)
    """Entries a template keeps out of the scan, with the reason term."""
    placements: dict[EntryKey, Placement] = field(default_factory=dict)
    """``[GENERATE:BEFORE]``/``[GENERATE:AFTER]`` entries: where they go."""
    lore: dict[EntryKey, TemplateResult] = field(default_factory=dict)
    """The result of each lore entry that is a template (for the inspector)."""
    fields: dict[str, str] = field(default_factory=dict)
    """Card fields as rendered (only those that hold a template and rendered)."""
    problems: list[TemplateProblem] = field(default_factory=list)
    variables: dict[str, Any] = field(default_factory=dict)
    """The turn's variables before any template wrote (initial variables filled in)."""
    global_variables: dict[str, Any] = field(default_factory=dict)
    always: list[TemplateResult] = field(default_factory=list)
    """Results whose writes count whatever the scan does (card fields, preset prompts)."""
    starting: list[TemplateResult] = field(default_factory=list)
    """``[InitialVariables]`` entries written as templates: the keys they filled (applied
    first: they ran first)."""
    history: dict[str, str] = field(default_factory=dict)
    """Chat messages of the prompt that hold a template, as rendered (message id → text)."""
    preset: dict[str, str] = field(default_factory=dict)
    """Preset prompts that hold a template, as rendered (the text as written → rendered)."""

    def variables_after(
        self, activated: Sequence[EntryKey]
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """The turn's and the global variables once the writes of the card fields and
        of the ``activated`` lore entries are applied, in the order they ran."""
        variables = copy.deepcopy(self.variables)
        global_variables = copy.deepcopy(self.global_variables)
        wanted = set(activated)
        ran = self.starting + [r for key, r in self.lore.items() if key in wanted] + self.always
        for result in ran:
            apply_writes(variables, result.writes, "message")
            apply_writes(global_variables, result.writes, "global")
        return variables, global_variables


_CANDIDATES: dict[int, tuple[KnowledgeBase, int, list[CAIU]]] = {}
_CANDIDATES_KEPT = 64


def template_entries(kb: KnowledgeBase) -> list[CAIU]:
    """The enabled entries of ``kb`` that may be templates (content with ``<%``, template
    decorators, a title tag): read once per loaded book, so a 10,000-entry book of plain
    text costs a turn nothing here. The catalog loads a book anew when it changes."""
    found = _CANDIDATES.get(id(kb))
    if found is not None and found[0] is kb and found[1] == len(kb.entries):
        return found[2]
    entries = [
        entry
        for entry in kb.entries
        if entry.management_metadata.is_enabled
        and (
            TEMPLATE_METADATA in entry.content.metadata
            or (entry.displayName or "").lstrip().startswith("[")
            or has_template(entry.content.value or "")
        )
    ]
    if len(_CANDIDATES) >= _CANDIDATES_KEPT:
        _CANDIDATES.clear()
    # The book itself is kept with its id, so the id cannot be reused by another book.
    _CANDIDATES[id(kb)] = (kb, len(kb.entries), entries)
    return entries


def _lore_source(entry: CAIU, text: str) -> TemplateSource:
    title = entry.displayName or entry.id
    return TemplateSource(name=f"lore {title}", text=text, origin="lore", label=title)


def fill_missing(target: dict[str, Any], source: Mapping[str, Any]) -> None:
    """The keys of ``source`` that ``target`` lacks (nested ones too), copied in."""
    for key, value in source.items():
        if key not in target:
            target[key] = copy.deepcopy(value)
        elif isinstance(target[key], dict) and isinstance(value, Mapping):
            fill_missing(target[key], value)


def _initial_variables(entry: CAIU, problems: list[TemplateProblem]) -> dict[str, Any]:
    text = entry.content.value or ""
    source = _lore_source(entry, text)
    try:
        value = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError as error:
        problems.append(problem_of(source, f"not JSON: {error.msg}", error.lineno))
        return {}
    if not isinstance(value, dict):
        problems.append(problem_of(source, "not a JSON object of variables"))
        return {}
    return value


RenderPosition = Literal["before", "after"]


@dataclass(frozen=True)
class RenderEntry:
    """A ``[RENDER:BEFORE]``/``[RENDER:AFTER]`` (``@@render_before``/``@@render_after``)
    lore entry: rendered into every displayed message, before or after its text, never
    sent to the model. As ST-Prompt-Template selects them: a before entry only when it is
    constant (or ``@@activate``); an after entry also when one of its primary keys is in
    the message's text; ``@@dont_activate`` never; ``@@if`` guards the text."""

    title: str
    text: str
    """The template as it runs (``@@private`` and ``@@if`` already wrapped around it)."""
    position: RenderPosition
    constant: bool
    keywords: tuple[str, ...] = ()

    def shown_with(self, message_text: str) -> bool:
        """Whether the entry is added to a message whose shown text is ``message_text``."""
        if self.constant:
            return True
        if self.position == "before":
            return False
        lowered = message_text.lower()
        for key in self.keywords:
            parsed = parse_regex_key(key)
            if parsed is None:
                if key and key.lower() in lowered:
                    return True
                continue
            try:
                if compile_regex_key(*parsed).search(message_text):
                    return True
            except UnusableKeyError:
                continue  # the lore editor names a broken key; here it matches nothing
        return False


def preset_templates(workflow: Workflow) -> list[PresetTemplate]:
    """The prompts of ``workflow``'s Skein Builders (the chat-completion preset the
    pipeline lays out) that hold a template, in their order."""
    out: list[PresetTemplate] = []
    for node in workflow.nodes:
        if node.type != SkeinBuilder.type:
            continue
        prompts = node.config.get("prompts")
        for prompt in prompts if isinstance(prompts, list) else []:
            if not isinstance(prompt, Mapping):
                continue
            text = prompt.get("content")
            if isinstance(text, str) and has_template(text):
                name = prompt.get("name") or prompt.get("identifier") or node.id
                out.append(PresetTemplate(name=str(name), text=text))
    return out


def world_info_of(kbs: Sequence[LoadedKB]) -> WorldInfoOf:
    """The enabled entries of ``kbs`` for ``getwi``, read when a template calls it."""

    def entries() -> list[WorldInfoText]:
        return [
            WorldInfoText(
                book=loaded.kb_id,
                book_name=loaded.kb.kb_displayName or loaded.kb_id,
                id=entry.id,
                title=entry.displayName or entry.id,
                text=entry.content.value or "",
            )
            for loaded in kbs
            for entry in loaded.kb.entries
            if entry.management_metadata.is_enabled
        ]

    return entries


def starting_variables(kbs: Sequence[LoadedKB]) -> dict[str, Any]:
    """The starting variables of the ``[InitialVariables]`` entries of ``kbs`` written as
    plain JSON (what a displayed message falls back on, as the plugin's messages do; the
    turn names a broken one)."""
    out: dict[str, Any] = {}
    for loaded in kbs:
        for entry in template_entries(loaded.kb):
            text = entry.content.value or ""
            if template_marks(entry).initial_variables and not has_template(text):
                fill_missing(out, _initial_variables(entry, []))
    return out


def render_entries(kbs: Sequence[LoadedKB]) -> list[RenderEntry]:
    """The render entries of the books ``kbs``, in the books' order (read from the
    template candidates each book keeps: a book without one costs nothing)."""
    out: list[RenderEntry] = []
    for loaded in kbs:
        for entry in template_entries(loaded.kb):
            marks = template_marks(entry)
            if marks.injection not in ("render_before", "render_after"):
                continue
            criteria = entry.activation_criteria
            if criteria.never_activate:
                continue
            text = _template_text(entry.content.value or "", marks)
            if marks.condition is not None:
                # One line of JavaScript, as @@if asks; false shows nothing.
                condition = marks.condition.replace("\n", " ")
                text = "<%_ if (" + condition + ") { _%>" + text + "<%_ } _%>"
            out.append(
                RenderEntry(
                    title=entry.displayName or entry.id,
                    text=text,
                    position="before" if marks.injection == "render_before" else "after",
                    constant=criteria.constant,
                    keywords=tuple(criteria.keywords),
                )
            )
    return out


def _template_text(text: str, marks: TemplateMarks) -> str:
    # @@private: the entry's code in a block of its own; on its first and last line, so
    # the lines stay the template's.
    return "<% { %>" + text + "<% } %>" if marks.private else text


async def evaluate_turn_templates(
    kbs: Sequence[LoadedKB],
    character: CharacterSnapshot,
    variables: Mapping[str, Any],
    global_variables: Mapping[str, Any],
    names: Mapping[str, str],
    seed: int = 0,
    history: Sequence[HistoryTemplate] = (),
    preset_prompts: Sequence[PresetTemplate] = (),
) -> TurnTemplates:
    """The templates of the lore in ``kbs`` and of ``character``'s card, rendered against
    the turn's ``variables``, the user's ``global_variables`` and the card's Tavern Helper
    variables, ``Math.random`` seeded by the turn's ``seed``, and the chat messages of the
    prompt that hold one (``history``, each against the variables at it; what they write
    is not kept, as a message's template wrote when it was shown), and the preset's
    prompts that hold one (``preset_prompts``, after the card fields; what they write
    counts, as a card field's does); no sandbox call when none holds a template."""
    out = TurnTemplates(
        variables=copy.deepcopy(dict(variables)),
        global_variables=copy.deepcopy(dict(global_variables)),
    )
    conditions: list[tuple[EntryKey, TemplateSource]] = []
    lore: list[tuple[EntryKey, TemplateSource]] = []
    starting: list[TemplateSource] = []
    initial: dict[str, Any] = {}
    for loaded in kbs:
        for entry in template_entries(loaded.kb):
            key = (loaded.kb_id, entry.id)
            text = entry.content.value or ""
            marks = template_marks(entry)
            if marks.initial_variables:
                out.excluded[key] = "template_render_only"
                if has_template(text):
                    # Rendered first in the batch; its JSON fills the variables there.
                    source = _lore_source(entry, text).model_copy(update={"kind": "initial"})
                    starting.append(source)
                else:
                    fill_missing(initial, _initial_variables(entry, out.problems))
                continue
            if marks.prompt_only_when_rendered:
                out.excluded[key] = "template_render_only"
                continue
            if marks.injection in INJECTION_PLACEMENT:
                out.placements[key] = INJECTION_PLACEMENT[marks.injection]
            if marks.condition is not None:
                title = entry.displayName or entry.id
                source = TemplateSource(
                    name=f"lore {title} @@if",
                    text=marks.condition,
                    kind="condition",
                    origin="lore_condition",
                    label=title,
                )
                conditions.append((key, source))
            if has_template(text):
                source = _lore_source(entry, _template_text(text, marks))
                lore.append((key, source))
    fill_missing(out.variables, initial)
    card_fields = [
        (
            name,
            TemplateSource(
                name=f"card {name}", text=character.card[name], origin="card", label=name
            ),
        )
        for name in CARD_FIELDS
        if isinstance(character.card.get(name), str) and has_template(character.card[name])
    ]
    said = [
        TemplateSource(
            name=f"message {m.message_id}",
            text=m.text,
            origin="message",
            label=m.message_id,
            variables=dict(m.variables),
            message={
                "id": m.message_id,
                "is_user": m.role == "user",
                "is_system": m.role == "system",
            },
        )
        for m in history
        if has_template(m.text)
    ]
    preset = [
        TemplateSource(name=f"preset {p.name}", text=p.text, origin="preset", label=p.name)
        for p in preset_prompts
        if has_template(p.text)
    ]
    sources = starting + [s for _, s in conditions] + [s for _, s in lore]
    sources += [s for _, s in card_fields] + preset + said
    if not sources:
        return out
    scopes = TemplateScopes(
        message=out.variables,
        global_=out.global_variables,
        character=helper_scripts(character.card).variables,
        initial=initial,
    )
    results = await render_templates(
        sources,
        scopes,
        names=names,
        seed=seed,
        card=character.card,
        world_info=world_info_of(kbs),
    )
    done = iter(results)
    for _ in starting:
        result = next(done)
        if result.problem is not None:
            out.problems.append(result.problem)
        else:
            out.starting.append(result)
    for key, _ in conditions:
        result = next(done)
        if result.problem is not None:
            # A condition that fails keeps the entry out, and says why.
            out.problems.append(result.problem)
            out.excluded[key] = "template_if_false"
        elif not result.value:
            out.excluded[key] = "template_if_false"
    for key, _ in lore:
        result = next(done)
        out.lore[key] = result
        if result.problem is not None:
            out.problems.append(result.problem)
        else:
            out.lore_texts[key] = result.text
    for name, _ in card_fields:
        result = next(done)
        if result.problem is not None:
            out.problems.append(result.problem)
        else:
            out.fields[name] = result.text
            out.always.append(result)
    for source in preset:
        result = next(done)
        if result.problem is not None:
            out.problems.append(result.problem)
        else:
            out.preset[source.text] = result.text
            out.always.append(result)
    for source in said:
        result = next(done)
        if result.problem is not None:
            out.problems.append(result.problem)
        else:
            out.history[source.label] = result.text
    return out
