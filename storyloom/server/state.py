"""What one running server holds: its data directory, settings and database."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from storyloom.core.settings import LoadedSettings, Settings, SettingsStore
from storyloom.store.database import Database


@dataclass
class ServerState:
    home: Path
    settings_store: SettingsStore
    loaded: LoadedSettings
    database: Database
    token: str | None = None
    settings_lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    @classmethod
    def open(
        cls, home: Path, *, token: str | None = None, environ: Mapping[str, str] | None = None
    ) -> ServerState:
        store = SettingsStore(home, environ)
        return cls(home, store, store.load(), Database.in_home(home), token)

    @property
    def settings(self) -> Settings:
        return self.loaded.effective

    def reload_settings(self) -> None:
        self.loaded = self.settings_store.load()
