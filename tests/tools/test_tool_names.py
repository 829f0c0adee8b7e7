"""Tool ids as MCP and OpenAI function names: plain for ordinary ids, escaped and still
reversible for every other id."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from storyloom.tools.tool_names import (
    BadToolName,
    ToolNameTooLong,
    from_function_name,
    from_mcp_name,
    to_function_name,
    to_mcp_name,
)

MCP_NAME = re.compile(r"[A-Za-z0-9._-]{1,128}")
FUNCTION_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")


@pytest.mark.parametrize(
    ("tool_id", "mcp", "function"),
    [
        ("Plugin:tool", "Plugin.tool", "Plugin__tool"),
        ("system:get_current_time", "system.get_current_time", "system__get_current_time"),
        (
            "my-awesome-plugin:my_script_tool",
            "my-awesome-plugin.my_script_tool",
            "my-awesome-plugin__my_script_tool",
        ),
        ("node:agent:Run", "node.agent.Run", "node__agent__Run"),
    ],
)
def test_ordinary_ids_map_plainly(tool_id: str, mcp: str, function: str) -> None:
    assert to_mcp_name(tool_id) == mcp
    assert to_function_name(tool_id) == function
    assert from_mcp_name(mcp) == tool_id
    assert from_function_name(function) == tool_id


def test_ids_with_dots_or_double_underscores_are_escaped_and_reversible() -> None:
    assert to_mcp_name("mcp.files.read") == "_mcp_2efiles_2eread"
    assert from_mcp_name("_mcp_2efiles_2eread") == "mcp.files.read"
    assert to_function_name("a__b:c") == "_a_5f_5fb__c"
    assert from_function_name("_a_5f_5fb__c") == "a__b:c"
    # The plain name of another id never collides with an escaped one.
    assert to_mcp_name("FileOperator.ApplyEdit") != to_mcp_name("FileOperator:ApplyEdit")


def test_chinese_ids_are_escaped_by_utf8_bytes() -> None:
    name = to_function_name("骰子:掷")
    assert FUNCTION_NAME.fullmatch(name)
    assert from_function_name(name) == "骰子:掷"


def test_names_no_id_maps_to_are_refused() -> None:
    for bad in ("a___b", "_zz", "_", "x__", ""):
        with pytest.raises(BadToolName):
            from_function_name(bad)
    for bad in ("a..b", "_q", ".a"):
        with pytest.raises(BadToolName):
            from_mcp_name(bad)


def test_an_id_too_long_for_a_function_name_is_refused_with_its_length() -> None:
    with pytest.raises(ToolNameTooLong, match="at most 64"):
        to_function_name("plugin:" + "x" * 80)


ids = st.text(min_size=1, max_size=20)


@given(ids)
def test_mcp_mapping_round_trips_for_any_id(tool_id: str) -> None:
    try:
        name = to_mcp_name(tool_id)
    except ToolNameTooLong:
        return
    assert MCP_NAME.fullmatch(name)
    assert from_mcp_name(name) == tool_id


@given(ids)
def test_function_mapping_round_trips_for_any_id(tool_id: str) -> None:
    try:
        name = to_function_name(tool_id)
    except ToolNameTooLong:
        return
    assert FUNCTION_NAME.fullmatch(name)
    assert from_function_name(name) == tool_id


@given(st.from_regex(r"[A-Za-z][A-Za-z0-9-]{0,8}:[A-Za-z][A-Za-z0-9]{0,8}", fullmatch=True))
def test_namespaced_ids_stay_readable(tool_id: str) -> None:
    assert to_mcp_name(tool_id) == tool_id.replace(":", ".")
    assert to_function_name(tool_id) == tool_id.replace(":", "__")
