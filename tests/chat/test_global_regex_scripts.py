"""The user's global regex scripts: the file in the data directory (SillyTavern's script
shape, saved whole and atomically, a broken file named with its field and reason), and
the chat service running them before the card's, on record in the turn's snapshot."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storyloom.chat.store.conversation import ConversationSettings
from storyloom.chat.store.regex_library import FILE_NAME, GlobalRegexScripts
from storyloom.chat.store.regex_script import RegexScript
from storyloom.core.errors import FileFormatError, InvalidInput
from storyloom.store.database import Database
from storyloom.testing.replay_server import ReplayLLMServer
from tests.chat.conftest import running_chat_service, write_characters

CARD: dict[str, Any] = {
    "name": "Ash",
    "first_mes": "Hello.",
    "extensions": {
        "regex_scripts": [{"scriptName": "card", "findRegex": "/a/g", "placement": [1]}]
    },
}


def test_no_file_is_no_scripts_and_a_save_writes_sillytavern_s_shape(tmp_path: Path) -> None:
    store = GlobalRegexScripts.in_home(tmp_path)
    assert store.path == tmp_path / FILE_NAME
    assert store.load() == []
    script = RegexScript(scriptName="lamp", findRegex="/lantern/gi", replaceString="lamp")
    store.save([script])
    written = json.loads(store.path.read_text(encoding="utf-8"))
    assert written[0]["findRegex"] == "/lantern/gi" and written[0]["placement"] == []
    assert set(written[0]) >= {"id", "scriptName", "trimStrings", "markdownOnly", "minDepth"}
    assert store.load() == [script]


def test_a_sillytavern_single_script_export_dropped_in_as_the_file_reads(tmp_path: Path) -> None:
    exported = {
        "id": "u1",
        "scriptName": "x",
        "findRegex": "/x/",
        "replaceString": "y",
        "placement": [2],
        "substituteRegex": True,
        "minDepth": "",
        "trimStrings": None,
    }
    (tmp_path / FILE_NAME).write_text(json.dumps(exported), encoding="utf-8")
    (script,) = GlobalRegexScripts.in_home(tmp_path).load()
    assert script.substituteRegex == 1 and script.minDepth is None and script.trimStrings == []


@pytest.mark.parametrize(
    ("text", "field", "reason"),
    [
        ("[{", "", "not JSON"),
        ('{"not": "a script"}', "[0].findRegex", "Field required"),
        ('[{"findRegex": "/a/"}, {"findRegex": "/b/", "placement": "x"}]', "[1].placement", ""),
        ('"text"', "", "a list of regex scripts"),
        ("[1]", "[0]", "a regex script is a JSON object"),
    ],
)
def test_a_broken_file_names_the_file_the_field_and_the_reason(
    tmp_path: Path, text: str, field: str, reason: str
) -> None:
    (tmp_path / FILE_NAME).write_text(text, encoding="utf-8")
    with pytest.raises(FileFormatError) as caught:
        GlobalRegexScripts.in_home(tmp_path).load()
    assert caught.value.path == tmp_path / FILE_NAME
    assert caught.value.problems[0].field == field
    assert reason in caught.value.problems[0].reason


def test_a_save_with_a_bad_script_writes_nothing(tmp_path: Path) -> None:
    store = GlobalRegexScripts.in_home(tmp_path)
    good = RegexScript(scriptName="ok", findRegex="/a/g")
    store.save([good])
    fields: dict[str, Any] = {"findRegex": "/b/", "placement": "everywhere"}
    broken = RegexScript.model_construct(**fields)  # built without validation
    with pytest.raises(InvalidInput) as caught:
        store.save([good, broken])
    assert [p.field for p in caught.value.problems] == ["[1].placement"]
    assert store.load() == [good]


def test_append_adds_after_the_scripts_there_and_keeps_a_broken_file(tmp_path: Path) -> None:
    store = GlobalRegexScripts.in_home(tmp_path)
    store.save([RegexScript(scriptName="one", findRegex="/1/")])
    whole = store.append([RegexScript(scriptName="two", findRegex="/2/")])
    assert [s.scriptName for s in whole] == ["one", "two"] == [s.scriptName for s in store.load()]
    store.path.write_text("[{", encoding="utf-8")
    with pytest.raises(FileFormatError):
        store.append([RegexScript(scriptName="three", findRegex="/3/")])
    assert store.path.read_text(encoding="utf-8") == "[{"


_text = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=20)
_json_value = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=6,
)
_scripts = st.lists(
    st.builds(
        RegexScript,
        id=_text,
        scriptName=_text,
        findRegex=_text,
        replaceString=_text,
        trimStrings=st.lists(_text, max_size=3),
        placement=st.lists(st.sampled_from([0, 1, 2, 3, 4, 5, 6]), max_size=4),
        disabled=st.booleans(),
        markdownOnly=st.booleans(),
        promptOnly=st.booleans(),
        runOnEdit=st.booleans(),
        substituteRegex=st.sampled_from([0, 1, 2]),
        minDepth=st.none() | st.integers(-1, 1000),
        maxDepth=st.none() | st.integers(-1, 1000),
    ).flatmap(
        # fields of other extensions, kept as they came
        lambda script: st.dictionaries(
            st.sampled_from(["x_ext", "tavernHelper", "notes"]), _json_value, max_size=2
        ).map(lambda extra: RegexScript.model_validate({**script.model_dump(), **extra}))
    ),
    max_size=5,
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(scripts=_scripts)
def test_save_then_load_gives_back_any_valid_script_list(
    tmp_path: Path, scripts: list[RegexScript]
) -> None:
    store = GlobalRegexScripts.in_home(tmp_path)
    store.save(scripts)
    loaded = store.load()
    assert [s.model_dump(mode="json") for s in loaded] == [
        s.model_dump(mode="json") for s in scripts
    ]


async def test_the_snapshot_records_the_enabled_global_scripts_before_the_card_s(
    project: Path, db: Database, llm: ReplayLLMServer, tmp_path: Path
) -> None:
    write_characters(project, {"ash": CARD})
    store = GlobalRegexScripts.in_home(tmp_path / "home")
    store.path.parent.mkdir()
    store.save(
        [
            RegexScript(scriptName="on", findRegex="/b/g", placement=[1]),
            RegexScript(scriptName="off", findRegex="/c/g", placement=[1], disabled=True),
        ]
    )
    async with running_chat_service(project, db, llm, global_regex=store) as service:
        chat = service.create_conversation(
            character_id="ash", settings=ConversationSettings(allow_regex_scripts=True)
        )
        assert [s.scriptName for s in service.regex_scripts(chat)] == ["on", "card"]
        snapshot = await service.snapshot(chat, chat.pointer)
        assert [s["scriptName"] for s in snapshot.global_regex_scripts] == ["on"]
        assert [s["scriptName"] for s in snapshot.regex_scripts] == ["card"]
        assert snapshot.regex_problems == []
        store.path.write_text("{", encoding="utf-8")
        broken = await service.snapshot(chat, chat.pointer)
        assert broken.global_regex_scripts == []
        assert [s["scriptName"] for s in broken.regex_scripts] == ["card"]
        (problem,) = broken.regex_problems
        assert str(store.path) in problem and "not JSON" in problem
