"""Secrets at rest: encrypted one by one under a 0600 key file, in a 0600 file written
atomically; the plaintext never appears on disk."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from storyloom.core.errors import Unavailable
from storyloom.tools.secret_store import SecretStore, SecretStoreError


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_values_round_trip_and_are_never_stored_in_clear(tmp_path: Path) -> None:
    home = tmp_path / "home"
    store = SecretStore(home)
    assert store.get("mcp.github.env.TOKEN") is None
    assert not store.is_set("mcp.github.env.TOKEN")

    store.set("mcp.github.env.TOKEN", "ghp_plaintext_value")
    store.set("extensions.p.key", "秘密 value")

    again = SecretStore(home)
    assert again.get("mcp.github.env.TOKEN") == "ghp_plaintext_value"
    assert again.get("extensions.p.key") == "秘密 value"
    assert again.keys() == ["extensions.p.key", "mcp.github.env.TOKEN"]
    raw = (home / "secrets.json").read_bytes()
    assert b"ghp_plaintext_value" not in raw
    assert "秘密".encode() not in raw and b"\\u79d8" not in raw
    assert mode(home / "secrets.json") == 0o600
    assert mode(home / "secret.key") == 0o600


def test_none_removes_a_value(tmp_path: Path) -> None:
    store = SecretStore(tmp_path)
    store.set("a", "1")
    store.set("a", None)
    assert store.get("a") is None and not store.is_set("a")
    store.set("never-set", None)
    assert json.loads((tmp_path / "secrets.json").read_text())["values"] == {}


def test_each_value_is_its_own_token(tmp_path: Path) -> None:
    store = SecretStore(tmp_path)
    store.set("a", "same")
    store.set("b", "same")
    values = json.loads((tmp_path / "secrets.json").read_text())["values"]
    assert values["a"] != values["b"]


def test_a_token_moved_under_another_key_is_refused(tmp_path: Path) -> None:
    store = SecretStore(tmp_path)
    store.set("a", "for a")
    path = tmp_path / "secrets.json"
    document = json.loads(path.read_text())
    document["values"]["b"] = document["values"]["a"]
    path.write_text(json.dumps(document))
    with pytest.raises(SecretStoreError, match="belongs to another key"):
        store.get("b")


def test_a_replaced_key_file_is_an_error_that_says_so(tmp_path: Path) -> None:
    SecretStore(tmp_path).set("a", "x")
    (tmp_path / "secret.key").unlink()
    SecretStore(tmp_path / "other").set("z", "z")
    (tmp_path / "secret.key").write_bytes((tmp_path / "other" / "secret.key").read_bytes())
    with pytest.raises(Unavailable, match="cannot be decrypted"):
        SecretStore(tmp_path).get("a")


def test_a_missing_key_file_with_stored_secrets_is_not_silently_replaced(tmp_path: Path) -> None:
    SecretStore(tmp_path).set("a", "x")
    (tmp_path / "secret.key").unlink()
    store = SecretStore(tmp_path)
    with pytest.raises(SecretStoreError, match="missing"):
        store.get("a")


def test_a_broken_secrets_file_is_reported_not_overwritten(tmp_path: Path) -> None:
    (tmp_path / "secrets.json").write_text("{not json")
    store = SecretStore(tmp_path)
    with pytest.raises(SecretStoreError, match="not JSON"):
        store.set("a", "x")
    assert (tmp_path / "secrets.json").read_text() == "{not json"
