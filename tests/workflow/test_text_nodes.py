"""The text nodes, each run through the real runner as GroupInput → node."""

from typing import Any

from storyloom.plugins import node_registry
from storyloom.workflow.nodes.text_nodes import find_json
from storyloom.workflow.runner import RunResult, WorkflowRunner
from storyloom.workflow.slot_types import ANY, ARRAY, OBJECT, STRING
from storyloom.workflow.workflow_file import Workflow

REGISTRY = node_registry(entry_points=False)


async def run_node(
    node_type: str, config: dict[str, Any] | None = None, **inputs: tuple[str, Any]
) -> RunResult:
    """Run one node; each input given as ``name=(type, value)`` arrives through GroupInput."""
    edges = [
        {"source": "in", "sourceSlot": name, "target": "node", "targetSlot": name}
        for name in inputs
    ]
    workflow = Workflow.model_validate(
        {
            "id": "one",
            "nodes": [
                {"id": "in", "type": "core:GroupInput"},
                {"id": "node", "type": node_type, "config": config or {}},
            ],
            "edges": edges,
            "interfaceInputs": {name: {"dataFlowType": t} for name, (t, _) in inputs.items()},
        }
    )
    values = {name: value for name, (_, value) in inputs.items()}
    return await WorkflowRunner(REGISTRY).run(workflow, inputs=values, outputs=["node"])


async def outputs_of(node_type: str, config: dict[str, Any] | None = None, **inputs: Any) -> Any:
    result = await run_node(node_type, config, **inputs)
    assert result.status == "completed", result.errors
    return result.outputs["node"]


async def error_of(node_type: str, config: dict[str, Any] | None = None, **inputs: Any) -> str:
    result = await run_node(node_type, config, **inputs)
    assert result.status == "failed"
    return result.errors["node"]


async def test_text_input_hands_on_its_typed_text() -> None:
    assert await outputs_of("core:TextInput", {"text": "Once upon a time"}) == {
        "text": "Once upon a time"
    }


async def test_template_fills_names_and_dotted_paths_and_keeps_unknown_ones() -> None:
    variables = {"name": "Ann", "stats": {"hp": 7}, "party": [{"name": "Bo"}]}
    out = await outputs_of(
        "core:TextTemplate",
        {"template": "{{name}} ({{stats.hp}} hp) with {{party.0.name}}; {{later}} {{{kb:ref}}}"},
        variables=(OBJECT, variables),
    )
    assert out == {"text": "Ann (7 hp) with Bo; {{later}} {{{kb:ref}}}"}


async def test_a_connected_template_wins_over_the_config_one() -> None:
    out = await outputs_of(
        "core:TextTemplate",
        {"template": "from config"},
        template=(STRING, "Hi {{who}}"),
        variables=(OBJECT, {"who": "you"}),
    )
    assert out == {"text": "Hi you"}
    assert await outputs_of("core:TextTemplate", {"template": "plain"}) == {"text": "plain"}


async def test_variable_applicator_keeps_blanks_or_refuses_missing_variables() -> None:
    text = (STRING, "{{mood}} and {{weather.today}}")
    variables = (OBJECT, {"mood": "calm"})
    keep = await outputs_of("core:VariableApplicator", text=text, variables=variables)
    assert keep == {"text": "calm and {{weather.today}}"}
    empty = await outputs_of(
        "core:VariableApplicator", {"missing": "empty"}, text=text, variables=variables
    )
    assert empty == {"text": "calm and "}
    error = await error_of(
        "core:VariableApplicator", {"missing": "error"}, text=text, variables=variables
    )
    assert "{{weather.today}}" in error and "{{mood}}" not in error


async def test_regex_replaces_every_match_with_g_and_the_first_without() -> None:
    text = (STRING, "a-b-c")
    every = await outputs_of(
        "core:RegexApplicator", {"pattern": "-", "replacement": "+"}, text=text
    )
    assert every == {"text": "a+b+c", "matches": 2}
    first = await outputs_of(
        "core:RegexApplicator", {"pattern": "-", "replacement": "+", "flags": ""}, text=text
    )
    assert first == {"text": "a+b-c", "matches": 1}


async def test_regex_accepts_sillytavern_slashed_patterns_with_their_flags() -> None:
    out = await outputs_of(
        "core:RegexApplicator",
        {"replacement": "<$&>", "flags": ""},
        text=(STRING, "Tea, TEA, tea"),
        pattern=(STRING, "/tea/gi"),
    )
    assert out == {"text": "<Tea>, <TEA>, <tea>", "matches": 3}


async def test_regex_replacements_use_javascript_group_references() -> None:
    out = await outputs_of(
        "core:RegexApplicator",
        {
            "pattern": r"(?<first>\w+) (\w+)",
            "replacement": "$2, $<first> ($$1 = $1, $9 stays, {{match}})",
        },
        text=(STRING, "Ann Lee"),
    )
    assert out["text"] == "Lee, Ann ($1 = Ann, $9 stays, Ann Lee)"


async def test_regex_rules_from_another_node_apply_in_order_after_the_pattern() -> None:
    rules = [
        {"pattern": "/cat/g", "replacement": "dog"},
        {"pattern": "DOG", "replacement": "wolf", "flags": "gi"},
    ]
    out = await outputs_of(
        "core:RegexApplicator",
        {"pattern": "kitten", "replacement": "cat"},
        text=(STRING, "kitten, cat"),
        rules=(ARRAY, rules),
    )
    assert out == {"text": "wolf, wolf", "matches": 5}


async def test_a_catastrophic_pattern_fails_the_node_instead_of_hanging() -> None:
    error = await error_of(
        "core:RegexApplicator",
        {"pattern": r"^(a|a)+$", "timeout_s": 0.05},
        text=(STRING, "a" * 40 + "!"),
    )
    assert "ran longer than 0.05s" in error and "timeout_s" in error


async def test_a_bad_pattern_or_flag_is_named_in_the_node_error() -> None:
    bad = await error_of("core:RegexApplicator", {"pattern": "(unclosed"}, text=(STRING, "x"))
    assert "'(unclosed' is not a valid regex" in bad
    flag = await error_of("core:RegexApplicator", {"pattern": "/x/q"}, text=(STRING, "x"))
    assert "unknown regex flag(s) 'q'" in flag
    rule = await error_of(
        "core:RegexApplicator", text=(STRING, "x"), rules=(ARRAY, [{"replacement": "y"}])
    )
    assert "rules[0]" in rule


REPLY = """Sure! Here is the character:

```json
{"name": "Ann", "tags": ["brave", "{curly}"], "stats": {"hp": 7}}
```
Anything else?"""


async def test_json_extract_finds_fenced_json_in_an_llm_reply() -> None:
    out = await outputs_of("core:JsonExtract", {"path": "/stats/hp"}, text=(STRING, REPLY))
    assert out == {"value": 7, "found": True}
    dotted = await outputs_of("core:JsonExtract", {"path": "tags.1"}, text=(STRING, REPLY))
    assert dotted == {"value": "{curly}", "found": True}


async def test_json_extract_finds_the_first_balanced_value_in_prose() -> None:
    text = 'I think {"mood": "a } brace", "list": [1, 2]} fits. Also {"other": 1}'
    out = await outputs_of("core:JsonExtract", text=(STRING, text))
    assert out == {"value": {"mood": "a } brace", "list": [1, 2]}, "found": True}
    broken_first = "{not json} then [3, 4]"
    assert await outputs_of("core:JsonExtract", text=(STRING, broken_first)) == {
        "value": [3, 4],
        "found": True,
    }


async def test_json_extract_reports_not_found_instead_of_failing() -> None:
    assert await outputs_of("core:JsonExtract", text=(STRING, "no json here")) == {
        "value": None,
        "found": False,
    }
    missing_path = await outputs_of("core:JsonExtract", {"path": "/a/b"}, text=(STRING, '{"a": 1}'))
    assert missing_path == {"value": None, "found": False}


async def test_json_extract_takes_already_parsed_values_as_they_are() -> None:
    out = await outputs_of(
        "core:JsonExtract", {"path": "/a~1b/0"}, text=(ANY, {"a/b": ["slash key"]})
    )
    assert out == {"value": "slash key", "found": True}


def test_a_reply_full_of_stray_brackets_is_searched_without_blowing_up() -> None:
    # Nested past the decoder's recursion limit, and far more starts than are tried.
    assert find_json("[" * 200_000) == (False, None)
    assert find_json("{" * 200_000) == (False, None)
    assert find_json("see [ this " * 10 + '{"ok": 1}') == (True, {"ok": 1})
