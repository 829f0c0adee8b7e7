"""Reading a card's Tavern Helper scripts in every shape Tavern Helper has written."""

from __future__ import annotations

from typing import Any

from storyloom.sillytavern.tavern_helper import helper_scripts, script_kind

MVU_IMPORT = (
    "import 'https://testingcf.jsdelivr.net/gh/MagicalAstrogy/MagVarUpdate/artifact/bundle.js'"
)
ZOD = (
    "import { registerMvuSchema } from 'x';\n"
    "export const Schema = z.object({});\nregisterMvuSchema(Schema);"
)


def _script(sid: str, content: str, **extra: Any) -> dict[str, Any]:
    return {"type": "script", "id": sid, "name": sid.upper(), "content": content, **extra}


def _card(extensions: dict[str, Any]) -> dict[str, Any]:
    return {"spec": "chara_card_v3", "data": {"name": "A", "extensions": extensions}}


def test_current_shape_is_read_with_kinds_buttons_and_variables() -> None:
    found = helper_scripts(
        _card(
            {
                "tavern_helper": {
                    "scripts": [
                        _script(
                            "m",
                            MVU_IMPORT,
                            button={"buttons": [{"name": "重新处理变量", "visible": True}]},
                        ),
                        _script("z", ZOD),
                        _script("o", "eventOn('x', () => {})", enabled=False),
                    ],
                    "variables": {"好感": 3},
                }
            }
        )
    )
    assert [(s.id, s.kind, s.enabled) for s in found.scripts] == [
        ("m", "mvu_bundle", True),
        ("z", "mvu_schema", True),
        ("o", "other", False),
    ]
    assert found.scripts[0].buttons[0].name == "重新处理变量"
    assert found.variables == {"好感": 3}
    assert found.problems == []


def test_pair_list_and_oldest_key_give_each_script_once() -> None:
    same = _script("s1", "console.log(1)")
    found = helper_scripts(
        _card(
            {
                "tavern_helper": [["scripts", [same]], ["variables", {"a": 1}]],
                "TavernHelper_scripts": [same, _script("s2", MVU_IMPORT.replace("/gh/", "/gh/x/"))],
            }
        )
    )
    assert [s.id for s in found.scripts] == ["s1", "s2"]
    assert found.variables == {"a": 1}


def test_folders_are_flattened_and_bad_items_named() -> None:
    found = helper_scripts(
        _card(
            {
                "tavern_helper": {
                    "scripts": [
                        {"type": "folder", "name": "工具", "scripts": [_script("f1", "1")]},
                        "not a script",
                        {"type": "script", "id": "x"},
                    ]
                }
            }
        )
    )
    assert [(s.id, s.folder) for s in found.scripts] == [("f1", "工具")]
    assert found.problems == [
        "extensions.tavern_helper.scripts[1]: not a script object",
        "extensions.tavern_helper.scripts[2].content: missing or not text",
    ]


def test_a_card_without_scripts_has_none() -> None:
    assert helper_scripts({"name": "V1 card"}).scripts == []


def test_kind_is_read_from_the_code() -> None:
    assert script_kind(MVU_IMPORT) == "mvu_bundle"
    assert (
        script_kind(
            "import 'https://cdn.jsdelivr.net/gh/MagicalAstrogy/MagVarUpdate@beta/artifact/bundle.js'"
        )
        == "mvu_bundle"
    )
    assert script_kind(ZOD) == "mvu_schema"
    assert script_kind("import 'https://example.com/bundle.js'") == "other"
