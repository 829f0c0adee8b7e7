"""An MVU card's Zod schema script, run in the quickjs sandbox, gives a JSON Schema."""

from __future__ import annotations

import pytest

from storyloom.sillytavern.mvu_zod import ZodSchemaError, card_state_schema, zod_json_schema

SCRIPT = """\
import { registerMvuSchema } from 'https://testingcf.jsdelivr.net/gh/StageDog/tavern_resource/dist/util/mvu_zod.js';
const percent = (fallback = 0) =>
  z.coerce.number().catch(fallback).transform(v => _.clamp(v, 0, 100)).prefault(fallback);
export const Schema = z.object({
  系统: z.object({
    阶段: z.enum(['一', '二']),
    任务: z.string().prefault('').describe('当前任务'),
    记录: z.array(z.string()).max(3).optional(),
  }),
  角色: z.record(z.string(), z.object({ 好感: percent(10), 备注: z.literal('x').or(z.null()) })),
  模式: z.union([z.boolean(), z.number().int().min(0)]).default(false),
}).strict();
$(() => { registerMvuSchema(Schema); });
"""


def test_the_script_s_schema_comes_back_as_json_schema() -> None:
    schema = zod_json_schema(SCRIPT)
    system = schema["properties"]["系统"]
    assert system["properties"]["阶段"] == {"type": "string", "enum": ["一", "二"]}
    assert system["properties"]["任务"] == {
        "type": "string",
        "default": "",
        "description": "当前任务",
    }
    assert system["properties"]["记录"] == {
        "type": "array",
        "items": {"type": "string"},
        "maxItems": 3,
    }
    assert system["required"] == ["阶段"]  # a prefault or optional field may be left out
    role = schema["properties"]["角色"]["additionalProperties"]
    assert role["properties"]["好感"] == {
        "type": "number",
        "x-coerce": "number",
        "x-catch": 10,
        "default": 10,
    }
    assert schema["properties"]["模式"]["anyOf"][1] == {"type": "integer", "minimum": 0}
    assert schema["additionalProperties"] is False
    assert schema["required"] == ["系统", "角色"]


def test_an_unknown_zod_method_is_named_with_its_line() -> None:
    script = "const S = z.object({\n  a: z.string().email(),\n});\nregisterMvuSchema(S);\n"
    with pytest.raises(ZodSchemaError) as caught:
        zod_json_schema(script)
    assert str(caught.value) == "Zod schema: .email() is not supported by storyloom (line 2)"


def test_a_script_that_registers_nothing_says_so() -> None:
    with pytest.raises(ZodSchemaError, match="registers no schema"):
        zod_json_schema("const S = z.object({});")


def test_a_card_without_a_schema_script_has_no_schema() -> None:
    card: dict[str, object] = {"data": {"extensions": {"tavern_helper": {"scripts": []}}}}
    assert card_state_schema(card) is None
