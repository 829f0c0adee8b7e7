"""The text an entry contributes to a prompt.

A plain entry gives its content wrapped in its enabled prefix and suffix. A group entry
(one with ``child_ids``, or of ``entry_type`` ``"group_container"``) gives its children's
texts, in ``child_ids`` order, wrapped in the group's prefix and suffix; its own content
is editor-only and never injected (seed 000, 2.2.1). Children that are groups aggregate
recursively; a child id that is missing, disabled or already on the path (a cycle) is
skipped. A group whose children give no text (an empty ``group_container`` included)
injects nothing at all, not even its prefix and suffix.
"""

from __future__ import annotations

from collections.abc import Callable

from storyloom.knowledge.caiu import CAIU
from storyloom.knowledge.knowledge_base import KnowledgeBase

GROUP_JOINER = "\n"

TextHook = Callable[[KnowledgeBase, CAIU, str], str]


def with_affixes(entry: CAIU, body: str) -> str:
    """``body`` wrapped in ``entry``'s enabled prefix and suffix."""
    return _wrap(entry, body)


def _wrap(entry: CAIU, body: str) -> str:
    usage = entry.usage_metadata
    prefix = usage.prefix.text if usage.prefix.is_enabled else ""
    suffix = usage.suffix.text if usage.suffix.is_enabled else ""
    return f"{prefix}{body}{suffix}"


def entry_body(
    kb: KnowledgeBase,
    entry: CAIU,
    transform: TextHook | None = None,
    _path: tuple[str, ...] = (),
) -> str:
    """The entry's text without its own prefix/suffix (children keep theirs)."""
    if not entry.is_group:
        text = entry.text
        return transform(kb, entry, text) if transform else text
    parts = []
    path = (*_path, entry.id)
    for child_id in entry.management_metadata.child_ids:
        child = kb.entry(child_id)
        if child is None or child.id in path or not child.management_metadata.is_enabled:
            continue
        parts.append(injected_text(kb, child, transform, path))
    return GROUP_JOINER.join(part for part in parts if part)


def injected_text(
    kb: KnowledgeBase,
    entry: CAIU,
    transform: TextHook | None = None,
    _path: tuple[str, ...] = (),
) -> str:
    """What goes into the prompt for ``entry``; ``transform`` rewrites each leaf's content
    (reference resolution, variables) before wrapping."""
    body = entry_body(kb, entry, transform, _path)
    if entry.is_group and not body:
        return ""  # a group with nothing to show brings no bare prefix/suffix either
    return _wrap(entry, body)
