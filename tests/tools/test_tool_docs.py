"""Tool documentation for ``{{{system:available_tools}}}``: the seed's shape, stable bytes."""

from __future__ import annotations

from pathlib import Path

from storyloom.tools.tool_docs import render_tool_docs
from tests.tools.tool_support import make_tools, service_tool

INVENTORY = ["kb:Query", "chat:RollDice", "system:get_current_time"]


def test_docs_follow_the_seed_format(tmp_path: Path) -> None:
    tools = make_tools(tmp_path)
    text = render_tool_docs([tools.manager.get(i) for i in INVENTORY])
    assert text.startswith("[Available tools]\n- Tool ID: chat:RollDice\n  - Description: ")
    assert "  - Parameters:\n    - notation (string, required): Dice such as 2d6+1" in text
    assert "    - top_k (integer, optional): How many entries to return; default: 5" in text
    assert "    - kb (array of string, optional)" in text
    assert (
        "<|[REQUEST_TOOL]|>\ncommand:「始」chat:RollDice「末」\nnotation:「始」...「末」\n<|[END_TOOL]|>"
        in text
    )
    zh = render_tool_docs([tools.manager.get("chat:RollDice")], "zh")
    assert "  - 描述: " in zh and "  - 参数:" in zh


def test_docs_are_byte_identical_for_the_same_inventory(tmp_path: Path) -> None:
    tools = make_tools(tmp_path)
    first = render_tool_docs([tools.manager.get(i) for i in INVENTORY])
    again = render_tool_docs([tools.manager.get(i) for i in reversed(INVENTORY)])
    assert first.encode() == again.encode()
    other = render_tool_docs([tools.manager.get(i) for i in INVENTORY[:2]])
    assert other != first


def test_tools_without_parameters_and_empty_inventories(tmp_path: Path) -> None:
    tools = make_tools(tmp_path, [service_tool("test:ping", lambda a, c: "pong", None, "Ping.")])
    text = render_tool_docs([tools.manager.get("test:ping")])
    assert "- Tool ID: test:ping\n  - Description: Ping.\n  - Parameters: (none)\n" in text
    assert "command:「始」test:ping「末」\n<|[END_TOOL]|>" in text
    assert render_tool_docs([]) == "[Available tools]\n(no tools are available)\n"


def test_the_system_namespace_is_never_a_knowledge_reference() -> None:
    from storyloom.knowledge.caiu import CAIU, Content
    from storyloom.knowledge.catalog import KnowledgeCatalog
    from storyloom.knowledge.knowledge_base import KnowledgeBase
    from storyloom.knowledge.reference_syntax import find_references
    from storyloom.knowledge.references import ReferenceResolver

    # Even with a KB named "system" holding an entry of that name.
    system = KnowledgeBase(
        kb_id="kb_s",
        kb_displayName="system",
        entries=[CAIU(id="a", displayName="available_tools", content=Content(value="LEAK"))],
    )
    lore = KnowledgeBase(
        kb_id="kb_l",
        kb_displayName="Lore",
        entries=[CAIU(id="t", displayName="Tavern", content=Content(value="A tavern."))],
    )
    text = "Tools:\n{{{system:available_tools}}}\nPlace: {{{Lore:Tavern}}}"
    out = ReferenceResolver(KnowledgeCatalog.of([system, lore])).resolve(text, None)
    assert out.text == "Tools:\n{{{system:available_tools}}}\nPlace: A tavern."
    assert out.problems == []
    assert [span.raw for span in find_references(text)] == ["Lore:Tavern"]
