"""An activation's reasons in words: what matched, where, and by which rule.

A scan keeps compact match records (``("key", 0)``, ``("secondary", hits)``…) while it
runs; :func:`describe` turns the record of an entry that activated or was dropped into
:class:`Reason`\\ s, quoting the text each key matched.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from storyloom.knowledge.activation_result import Reason, ReasonValue
from storyloom.knowledge.caiu import SecondaryLogic
from storyloom.knowledge.compiled_entry import CompiledEntry
from storyloom.knowledge.scan_buffer import ScanBuffer, place_words
from storyloom.knowledge.timed_effects import EntryKey, TimedEffect

_LOGIC_RULE = {
    SecondaryLogic.AND_ANY: "secondary_and_any",
    SecondaryLogic.NOT_ALL: "secondary_not_all",
    SecondaryLogic.NOT_ANY: "secondary_not_any",
    SecondaryLogic.AND_ALL: "secondary_and_all",
}


def describe(
    scan: ScanBuffer,
    sticky: Mapping[EntryKey, TimedEffect],
    e: CompiledEntry,
    match: Sequence[tuple[Any, ...]],
    where: tuple[int, bool, int],
) -> list[Reason]:
    """The activating reasons of a compact match record, in words."""
    reasons: list[Reason] = []
    for item in match:
        kind = item[0]
        if kind == "constant":
            reasons.append(Reason("constant", "always active (constant)", "activated", "constant"))
        elif kind == "sticky":
            effect = sticky[e.key]
            detail = f"sticky since the chat had {effect.start} messages, until {effect.end}"
            values: dict[str, ReasonValue] = {"start": effect.start, "end": effect.end}
            reasons.append(Reason("sticky", detail, "activated", "sticky", values))
        elif kind == "semantic":
            detail = f"semantic similarity {item[1]:.3f} reached the threshold {e.threshold:g}"
            values = {"score": round(float(item[1]), 3), "threshold": e.threshold}
            reasons.append(Reason("semantic", detail, "activated", "semantic", values))
        elif kind == "key":
            code, key = e.primary[item[1]], e.primary_text[item[1]]
            rule = "regex_key" if code < 0 else "primary_key"
            label = "regex" if code < 0 else "key"
            at = scan.locate(code, e, where)
            detail = f'{label} "{key}" matched {place_words(at)}'
            reasons.append(Reason(rule, detail, "activated", label, {"key": key, **at}))
        elif kind == "key_group":
            need_all, codes, texts, group_id = e.groups[item[1]]
            hits = [
                key for code, key in zip(codes, texts, strict=True) if scan.hit_then(code, e, where)
            ]
            quoted = ", ".join(f'"{key}"' for key in hits)
            logic = "all keys" if need_all else "a key"
            detail = f"key group {group_id} ({logic}) matched: {quoted}"
            term = "key_group_all" if need_all else "key_group_any"
            values = {"group": group_id, "keys": hits}
            reasons.append(Reason("key_group", detail, "activated", term, values))
        elif kind == "secondary":
            reasons.append(_secondary_reason(e, item[1]))
    return reasons


def _secondary_reason(e: CompiledEntry, hits: tuple[bool, ...]) -> Reason:
    found = [k for k, hit in zip(e.secondary_text, hits, strict=True) if hit]
    missing = [k for k, hit in zip(e.secondary_text, hits, strict=True) if not hit]

    def quote(keys: list[str]) -> str:
        return ", ".join(f'"{k}"' for k in keys)

    logic = e.logic
    if logic is SecondaryLogic.AND_ANY:
        detail = f"and secondary key {quote(found[:1])} matched (AND ANY)"
        keys = found[:1]
    elif logic is SecondaryLogic.NOT_ALL:
        detail = f"and secondary key {quote(missing[:1])} did not match (NOT ALL)"
        keys = missing[:1]
    elif logic is SecondaryLogic.NOT_ANY:
        detail = f"and none of the secondary keys {quote(missing)} matched (NOT ANY)"
        keys = missing
    else:
        detail = f"and all secondary keys {quote(found)} matched (AND ALL)"
        keys = found
    rule = _LOGIC_RULE[logic]
    return Reason(rule, detail, "activated", rule, {"keys": keys})
