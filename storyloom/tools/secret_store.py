"""Secret values (API keys of MCP servers, secret plugin and tool options), encrypted at rest.

``<home>/secrets.json`` holds each value as its own Fernet token (AES-128-CBC with an
HMAC-SHA256), under ``<home>/secret.key``; both files are 0600. Fernet rather than the
OS keyring: a headless Linux server has no keyring daemon, and one behaviour everywhere
is easier to reason about (docs/decisions.md). The key file guards against a copied
``secrets.json`` or a backup leaking values, not against someone who can read the whole
data directory as the user.

Each token encrypts ``[key, value]``, so a token moved under another key does not
decrypt as that key's value.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

from cryptography.fernet import Fernet, InvalidToken

from storyloom.core.atomic_io import atomic_write_json
from storyloom.core.errors import ConfigurationError
from storyloom.core.settings import PRIVATE_DIR_MODE, PRIVATE_FILE_MODE

KEY_FILE = "secret.key"
SECRETS_FILE = "secrets.json"
FORMAT_VERSION = 1


class SecretStoreError(ConfigurationError):
    """The key file or the secrets file cannot be used as it is; the message says how to
    fix it. Nothing is overwritten: replacing a key would lose every stored secret."""


class SecretStore:
    """Secrets of one data directory, by key (``extensions.<plugin>.<option>``,
    ``mcp.<server>.env.<NAME>``...)."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.key_path = home / KEY_FILE
        self.path = home / SECRETS_FILE
        self._lock = threading.Lock()
        self._fernet: Fernet | None = None

    def get(self, key: str) -> str | None:
        token = self._read().get(key)
        if token is None:
            return None
        try:
            stored_key, value = json.loads(self._cipher(create=False).decrypt(token.encode()))
        except (InvalidToken, ValueError, TypeError):
            raise SecretStoreError(
                f"secret {key!r} in {self.path} cannot be decrypted with {self.key_path} "
                "(the key file was replaced?); set the secret again"
            ) from None
        if stored_key != key or not isinstance(value, str):
            raise SecretStoreError(f"secret {key!r} in {self.path} belongs to another key")
        return value

    def set(self, key: str, value: str | None) -> None:
        """Store ``value`` under ``key``; None removes it."""
        with self._lock:
            values = self._read()
            if value is None:
                if values.pop(key, None) is None:
                    return
            else:
                plain = json.dumps([key, value], ensure_ascii=False).encode()
                values[key] = self._cipher(create=True).encrypt(plain).decode()
            self._write(values)

    def is_set(self, key: str) -> bool:
        return key in self._read()

    def keys(self) -> list[str]:
        return sorted(self._read())

    def _read(self) -> dict[str, str]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        except (OSError, UnicodeDecodeError) as exc:
            raise SecretStoreError(f"cannot read {self.path}: {exc}") from None
        try:
            data: Any = json.loads(text)
        except json.JSONDecodeError as exc:
            raise SecretStoreError(f"{self.path} is not JSON ({exc}); fix or remove it") from None
        values = data.get("values") if isinstance(data, dict) else None
        if not isinstance(values, dict) or not all(isinstance(v, str) for v in values.values()):
            raise SecretStoreError(f"{self.path}: values must be an object of strings")
        return dict(values)

    def _write(self, values: dict[str, str]) -> None:
        self._private_home()
        document = {"version": FORMAT_VERSION, "values": dict(sorted(values.items()))}
        atomic_write_json(self.path, document, mode=PRIVATE_FILE_MODE)

    def _private_home(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR_MODE)

    def _cipher(self, *, create: bool) -> Fernet:
        if self._fernet is None:
            self._fernet = Fernet(self._load_key(create=create))
        return self._fernet

    def _load_key(self, *, create: bool) -> bytes:
        try:
            key = self.key_path.read_bytes().strip()
        except FileNotFoundError:
            if not create:
                raise SecretStoreError(
                    f"{self.key_path} is missing, so the secrets in {self.path} cannot be "
                    "read; set them again"
                ) from None
            return self._create_key()
        except OSError as exc:
            raise SecretStoreError(f"cannot read {self.key_path}: {exc.strerror}") from None
        try:
            Fernet(key)
        except ValueError:
            raise SecretStoreError(
                f"{self.key_path} is not a Fernet key; restore it from a backup"
            ) from None
        return key

    def _create_key(self) -> bytes:
        self._private_home()
        key = Fernet.generate_key()
        try:
            # O_EXCL: a second process creating the key at the same time reads the first's.
            fd = os.open(self.key_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE_MODE)
        except FileExistsError:
            return self._load_key(create=False)
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), PRIVATE_FILE_MODE)
            handle.write(key + b"\n")
            handle.flush()
            os.fsync(handle.fileno())
        return key
