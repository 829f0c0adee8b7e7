"""Tool policies: deny wins among matching rules, combined policies take the strictest
answer, KB scopes match ids and names."""

from __future__ import annotations

from storyloom.tools.tool_policy import KbAccess, PolicyRule, ToolPolicy, combine


def policy(default: str = "ask", **by_glob: str) -> ToolPolicy:
    return ToolPolicy.model_validate(
        {"rules": [{"tool": g, "action": a} for g, a in by_glob.items()], "default": default}
    )


def test_no_matching_rule_gives_the_default() -> None:
    assert policy("ask").action("kb:Query") == "ask"
    assert policy("deny", **{"chat:*": "allow"}).action("kb:Query") == "deny"


def test_deny_wins_over_ask_and_allow_whatever_the_order() -> None:
    p = ToolPolicy(
        rules=[
            PolicyRule(tool="kb:Query", action="allow"),
            PolicyRule(tool="kb:*", action="deny"),
            PolicyRule(tool="*", action="ask"),
        ]
    )
    assert p.action("kb:Query") == "deny"
    assert p.action("chat:RollDice") == "ask"
    assert policy("deny", **{"*": "allow", "chat:*": "ask"}).action("chat:RollDice") == "ask"


def test_combined_policy_answers_the_strictest_of_its_parts() -> None:
    global_ = policy("deny", **{"kb:Query": "allow"})
    agent = policy("ask")
    both = combine(global_, agent)
    assert both.action("kb:Query") == "ask"  # allowed globally, ask for this agent
    assert both.action("chat:RollDice") == "deny"  # denied by the global default
    assert combine(policy("allow"), policy("allow", **{"kb:*": "deny"})).action("kb:Read") == "deny"
    assert combine(both, policy("allow")).action("kb:Query") == "ask"


def test_with_rule_replaces_the_rule_for_that_tool() -> None:
    p = policy("ask", **{"chat:RollDice": "deny"}).with_rule("chat:RollDice", "allow")
    assert [r.tool for r in p.rules] == ["chat:RollDice"]
    assert p.action("chat:RollDice") == "allow"


def test_kb_access_matches_any_of_a_kbs_names() -> None:
    access = KbAccess(read=["*"], write=["notes-*", "kb_123"])
    assert access.can_read(["kb_9", "Lore"])
    assert access.can_write(["kb_9", "notes-2024"])
    assert access.can_write(["kb_123", "Main"])
    assert not access.can_write(["kb_9", "Lore"])
    assert not KbAccess().can_write(["anything"])
