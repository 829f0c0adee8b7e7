import json
from pathlib import Path
from typing import Any

import pytest

from storyloom.core.settings import Settings
from storyloom.plugins import node_registry
from storyloom.testing.replay_server import ReplayLLMServer, Reply
from storyloom.workflow.node_type import WorkflowServices
from storyloom.workflow.nodes.llm_nodes import Chat
from storyloom.workflow.nodes.text_nodes import RegexApplicator, TextTemplate
from storyloom.workflow.runner import WorkflowRunner
from storyloom.workflow.workflow_file import Workflow, parse_workflow
from storyloom.workflow.workflow_tools import (
    ToolArgumentsInvalid,
    ToolRunFailed,
    UnknownNodeType,
    node_tool_schema,
    run_node_tool,
    run_workflow_tool,
    workflow_tool_schema,
)

# Seed 003 4.4.3, verbatim: the interface of summarize_text.json and the schema it gives.
SEED_WORKFLOW = """
{
  "description": "对提供的长文本进行摘要。当需要理解大量文本的核心内容时使用。",
  "interfaceInputs": {
    "text_to_summarize": {
      "description": "需要进行摘要处理的原始长文本内容。",
      "dataFlowType": "STRING",
      "required": true
    },
    "summary_length": {
      "description": "期望的摘要长度。",
      "dataFlowType": "STRING",
      "required": false,
      "matchCategories": ["ComboOption"],
      "config": {
        "default": "中等",
        "suggestions": [{ "value": "简短" }, { "value": "中等" }, { "value": "详细" }]
      }
    }
  },
  "interfaceOutputs": {
    "summary_result": {
      "description": "生成的摘要文本。",
      "dataFlowType": "STRING"
    }
  }
}
"""

SEED_SCHEMA = """
{
  "name": "workflow:summarize_text",
  "description": "对提供的长文本进行摘要。当需要理解大量文本的核心内容时使用。",
  "parameters": {
    "type": "object",
    "properties": {
      "text_to_summarize": {
        "type": "string",
        "description": "需要进行摘要处理的原始长文本内容。"
      },
      "summary_length": {
        "type": "string",
        "description": "期望的摘要长度。",
        "enum": ["简短", "中等", "详细"]
      }
    },
    "required": ["text_to_summarize"]
  }
}
"""


def summarize_text(
    nodes: list[dict[str, Any]] | None = None, edges: list[dict[str, Any]] | None = None
) -> Workflow:
    data = json.loads(SEED_WORKFLOW)
    return parse_workflow(
        {"id": "summarize_text", **data, "nodes": nodes or [], "edges": edges or []}
    )


def edge(source: str, source_slot: str, target: str, target_slot: str) -> dict[str, str]:
    return {
        "source": source,
        "sourceSlot": source_slot,
        "target": target,
        "targetSlot": target_slot,
    }


def test_the_seed_summarize_text_example_gives_exactly_the_seed_schema() -> None:
    assert workflow_tool_schema(summarize_text()) == json.loads(SEED_SCHEMA)


def test_suggestions_become_an_enum_only_with_combo_option() -> None:
    wf = parse_workflow(
        {
            "id": "w",
            "interfaceInputs": {
                "hint": {"config": {"suggestions": [{"value": "a"}]}},
                "count": {"dataFlowType": "INTEGER", "required": True},
                "ratio": {"dataFlowType": "FLOAT"},
                "flag": {"dataFlowType": "BOOLEAN"},
                "options": {"dataFlowType": "OBJECT"},
                "history": {"dataFlowType": "MESSAGES"},
                "whatever": {"dataFlowType": "ANY", "description": "anything"},
            },
        }
    )
    props = workflow_tool_schema(wf)["parameters"]["properties"]
    assert props == {
        "hint": {"type": "string"},
        "count": {"type": "integer"},
        "ratio": {"type": "number"},
        "flag": {"type": "boolean"},
        "options": {"type": "object"},
        "history": {"type": "array"},
        "whatever": {"description": "anything"},
    }
    assert workflow_tool_schema(wf)["parameters"]["required"] == ["count"]


def test_a_node_type_as_a_tool_takes_its_inputs_and_config() -> None:
    schema = node_tool_schema(TextTemplate.info())
    assert schema["name"] == "node:core:TextTemplate"
    params = schema["parameters"]
    assert set(params["properties"]) == {"template", "variables"}
    assert params["properties"]["variables"]["type"] == "object"
    assert params["required"] == ["template"]

    chat = node_tool_schema(Chat.info())["parameters"]
    assert chat["required"] == ["prompt"]
    assert chat["properties"]["history"]["type"] == "array"
    assert chat["properties"]["role"] == {
        "type": "string",
        "description": Chat.info().config_schema["properties"]["role"]["description"],
        "enum": ["user", "agent"],
        "default": "user",
    }
    assert chat["properties"]["temperature"]["minimum"] == 0
    assert chat["properties"]["temperature"]["maximum"] == 2

    regex_props = node_tool_schema(RegexApplicator.info())["parameters"]["properties"]
    assert "enum" not in regex_props["flags"]  # suggestions, not a closed list
    assert regex_props["flags"]["default"] == "g"


# -- running tools through the runner ------------------------------------------------------


def summarizer() -> Workflow:
    """summarize_text, with its length and text merged instead of asking an LLM."""
    return summarize_text(
        nodes=[
            {"id": "in", "type": "core:GroupInput"},
            {"id": "m", "type": "core:Merge", "config": {"mode": "concat", "separator": ": "}},
            {"id": "out", "type": "core:GroupOutput"},
        ],
        edges=[
            edge("in", "summary_length", "m", "first"),
            edge("in", "text_to_summarize", "m", "second"),
            edge("m", "value", "out", "summary_result"),
        ],
    )


def runner() -> WorkflowRunner:
    return WorkflowRunner(node_registry(entry_points=False))


async def test_a_workflow_tool_returns_its_single_output_unwrapped() -> None:
    result = await run_workflow_tool(
        runner(), summarizer(), {"text_to_summarize": "long text", "summary_length": "简短"}
    )
    assert result == "简短: long text"


async def test_an_argument_left_out_takes_the_interface_default() -> None:
    result = await run_workflow_tool(runner(), summarizer(), {"text_to_summarize": "long text"})
    assert result == "中等: long text"


async def test_bad_arguments_are_refused_before_running_each_named() -> None:
    with pytest.raises(ToolArgumentsInvalid) as caught:
        await run_workflow_tool(
            runner(), summarizer(), {"summary_length": "很长", "colour": "blue"}
        )
    problems = {p.field: p.reason for p in caught.value.problems}
    assert set(problems) == {"text_to_summarize", "summary_length", "colour"}
    assert problems["text_to_summarize"] == "required"
    assert "is not one of" in problems["summary_length"]
    assert problems["colour"].startswith("unknown argument")
    assert str(caught.value).startswith("workflow:summarize_text: argument ")


async def test_a_wrongly_typed_argument_names_the_argument() -> None:
    with pytest.raises(ToolArgumentsInvalid) as caught:
        await run_workflow_tool(runner(), summarizer(), {"text_to_summarize": 3})
    (problem,) = caught.value.problems
    assert problem.field == "text_to_summarize"
    assert "is not of type 'string'" in problem.reason


async def test_several_outputs_come_back_as_an_object() -> None:
    wf = parse_workflow(
        {
            "id": "two",
            "interfaceInputs": {"text": {"required": True}},
            "interfaceOutputs": {"text": {}, "count": {"dataFlowType": "INTEGER"}},
            "nodes": [
                {"id": "in", "type": "core:GroupInput"},
                {"id": "re", "type": "core:RegexApplicator", "config": {"pattern": "a"}},
                {"id": "out", "type": "core:GroupOutput"},
            ],
            "edges": [
                edge("in", "text", "re", "text"),
                edge("re", "text", "out", "text"),
                edge("re", "matches", "out", "count"),
            ],
        }
    )
    assert await run_workflow_tool(runner(), wf, {"text": "banana"}) == {
        "text": "bnn",
        "count": 3,
    }


async def test_a_failing_run_is_reported_with_the_node_and_why() -> None:
    wf = parse_workflow(
        {
            "id": "strict",
            "interfaceInputs": {"text": {"required": True}},
            "interfaceOutputs": {"text": {}},
            "nodes": [
                {"id": "in", "type": "core:GroupInput"},
                {"id": "vars", "type": "core:JsonExtract"},
                {"id": "apply", "type": "core:VariableApplicator", "config": {"missing": "error"}},
                {"id": "out", "type": "core:GroupOutput"},
            ],
            "edges": [
                edge("in", "text", "apply", "text"),
                edge("in", "text", "vars", "text"),
                edge("vars", "value", "apply", "variables"),
                edge("apply", "text", "out", "text"),
            ],
        }
    )
    assert await run_workflow_tool(runner(), wf, {"text": '{"a": 1} {{a}}'}) == '{"a": 1} 1'
    with pytest.raises(ToolRunFailed) as caught:
        await run_workflow_tool(runner(), wf, {"text": '{"a": 1} {{b}}'})
    assert caught.value.result.status == "failed"
    assert "node apply: " in str(caught.value) and "{{b}}" in str(caught.value)


async def test_a_node_type_runs_as_a_tool() -> None:
    result = await run_node_tool(
        runner(),
        node_registry(entry_points=False),
        "core:RegexApplicator",
        {"text": "a-b-c", "pattern": "/-/", "replacement": "+", "flags": "g"},
    )
    assert result == {"text": "a+b-c", "matches": 1}  # /-/ without g: the first match only
    template = await run_node_tool(
        runner(),
        node_registry(entry_points=False),
        "core:TextTemplate",
        {"template": "Hi {{who.name}}", "variables": {"who": {"name": "Ann"}}},
    )
    assert template == "Hi Ann"


async def test_a_node_tool_with_an_llm_streams_through_the_runner(tmp_path: Path) -> None:
    with ReplayLLMServer(models=["m"]) as llm:
        llm.script(Reply(text="Once upon a time"))
        settings = Settings.model_validate({"user_llm": {"base_url": llm.url, "model": "m"}})
        services = WorkflowServices(settings=lambda: settings)
        tool_runner = WorkflowRunner(node_registry(entry_points=False), services)
        result = await run_node_tool(
            tool_runner,
            node_registry(entry_points=False),
            "llm:Chat",
            {"prompt": "Tell me a story", "system": "Be brief", "temperature": 0.5},
        )
        request = llm.chat_requests[-1]
    assert result["text"] == "Once upon a time"
    assert result["messages"][-1] == {"role": "assistant", "content": "Once upon a time"}
    assert request["messages"] == [
        {"role": "system", "content": "Be brief"},
        {"role": "user", "content": "Tell me a story"},
    ]
    assert request["temperature"] == 0.5


async def test_unknown_or_dynamic_node_types_are_not_tools() -> None:
    registry = node_registry(entry_points=False)
    with pytest.raises(UnknownNodeType, match="no such node type"):
        await run_node_tool(runner(), registry, "core:Nope", {})
    with pytest.raises(UnknownNodeType, match="depend on its config"):
        await run_node_tool(runner(), registry, "core:GroupInput", {})
