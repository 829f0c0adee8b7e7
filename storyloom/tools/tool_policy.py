"""Which tools may run: ``allow`` / ``ask`` / ``deny`` rules by tool-id glob, and which
knowledge bases the KB tools may read and write.

Among the rules that match a tool, the strictest wins (deny over ask over allow), so a
broad ``deny`` cannot be undone by a narrower ``allow``; a tool no rule matches gets the
policy's ``default``. Policies stack the same way: :func:`combine` of the global policy
and an agent profile's answers, for each tool, the stricter of the two, with one
exception (:func:`caller_action`): a caller's own explicit ``allow`` answers the global
policy's ``ask`` for that caller alone (a person said "always" to that agent), never
its ``deny``.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

PolicyAction = Literal["allow", "ask", "deny"]
STRICTNESS: dict[str, int] = {"allow": 0, "ask": 1, "deny": 2}


def strictest(actions: Iterable[str]) -> PolicyAction:
    """The strictest of ``actions`` (``allow`` when there are none)."""
    best: PolicyAction = "allow"
    for action in actions:
        if action == "deny":
            return "deny"
        if action == "ask":
            best = "ask"
    return best


class PolicyRule(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tool: str = Field(min_length=1, description="Tool-id glob, e.g. kb:* or workflow:draft_*")
    action: PolicyAction

    def matches(self, tool_id: str) -> bool:
        return fnmatch.fnmatchcase(tool_id, self.tool)


class ToolPolicy(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rules: list[PolicyRule] = Field(default_factory=list)
    default: PolicyAction = "ask"
    _parts: tuple[ToolPolicy, ...] = PrivateAttr(default=())

    def action(self, tool_id: str) -> PolicyAction:
        if self._parts:
            return strictest(part.action(tool_id) for part in self._parts)
        matching = [rule.action for rule in self.rules if rule.matches(tool_id)]
        return strictest(matching) if matching else self.default

    def explicit(self, tool_id: str) -> PolicyAction | None:
        """The strictest rule matching ``tool_id``, or ``None`` when only the default
        would answer (a combined policy: the strictest of its parts' explicit answers)."""
        if self._parts:
            found = [a for a in (part.explicit(tool_id) for part in self._parts) if a]
            return strictest(found) if found else None
        matching = [rule.action for rule in self.rules if rule.matches(tool_id)]
        return strictest(matching) if matching else None

    def with_rule(self, tool: str, action: PolicyAction) -> ToolPolicy:
        """A copy with the rule for exactly ``tool`` set to ``action`` (an ``always``
        answer saves ``allow`` this way)."""
        kept = [rule for rule in self.rules if rule.tool != tool]
        return ToolPolicy(rules=[*kept, PolicyRule(tool=tool, action=action)], default=self.default)


def combine(*policies: ToolPolicy) -> ToolPolicy:
    """A policy that answers, for every tool, the strictest answer of ``policies``.

    Its ``rules`` and ``default`` are only a summary for display (all rules, the
    strictest default); :meth:`ToolPolicy.action` asks each part.
    """
    parts: list[ToolPolicy] = []
    for policy in policies:
        parts.extend(policy._parts or (policy,))
    if len(parts) == 1:
        return parts[0]
    combined = ToolPolicy(
        rules=[rule for part in parts for rule in part.rules],
        default=strictest(part.default for part in parts),
    )
    combined._parts = tuple(parts)
    return combined


def caller_action(global_policy: ToolPolicy, own: ToolPolicy, tool_id: str) -> PolicyAction:
    """What a call by a caller with policy ``own`` (an agent profile's) gets.

    The stricter of the two, except that an explicit ``allow`` rule of the caller's own
    lifts the global ``ask``: "always" for one agent is saved in its profile, and holds
    for it alone. A global ``deny`` always holds.
    """
    base = global_policy.action(tool_id)
    action = strictest([base, own.action(tool_id)])
    if action == "ask" and base == "ask" and own.explicit(tool_id) == "allow":
        return "allow"
    return action


def policy_from_settings(settings: Any) -> ToolPolicy:
    """The global policy kept in settings (``tool_policy``); none kept: the default."""
    stored = getattr(settings, "tool_policy", None)
    if stored is None:
        return ToolPolicy()
    if isinstance(stored, ToolPolicy):
        return stored
    data = stored.model_dump() if isinstance(stored, BaseModel) else stored
    return ToolPolicy.model_validate(data)


class KbAccess(BaseModel):
    """Which knowledge bases the KB tools may read and write: globs matched against a
    KB's id, display name, project aliases and reference ids. Refusals are errors the
    model reads."""

    model_config = ConfigDict(extra="forbid")

    read: list[str] = Field(default_factory=lambda: ["*"])
    write: list[str] = Field(default_factory=list)

    def can_read(self, names: Iterable[str]) -> bool:
        return _any_match(self.read, names)

    def can_write(self, names: Iterable[str]) -> bool:
        return _any_match(self.write, names)


def _any_match(globs: list[str], names: Iterable[str]) -> bool:
    wanted = [name for name in names if name]
    return any(fnmatch.fnmatchcase(name, glob) for glob in globs for name in wanted)
