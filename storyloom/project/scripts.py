"""The scripts of a project and of its enabled plugins: Lua and JavaScript files that a
``chat:Script`` node runs on a chat turn.

A project script is ``<project>/scripts/<name>`` where ``name`` matches
:data:`SCRIPT_NAME` (``mood.lua``, ``trim-history.js``): no folders, so a name can never
point outside the folder, and the extension says the language. The library lists, reads,
writes (atomically) and deletes them.

A plugin's scripts are the same kind of files in ``<plugin folder>/scripts/``, named
``<plugin>:<file>`` and read-only: they change when the plugin does. Which plugins are
enabled is known only to the tools layer, which sits above this one, so the library is
handed the enabled plugins' folders (plugin name → plugin folder) by whoever knows them:
the server passes them to the REST routes, and the chat runner's
:class:`~storyloom.workflow.node_type.WorkflowServices` carries them for the node as
``script_folders``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from storyloom.core.atomic_io import atomic_write_text
from storyloom.core.errors import Conflict, FieldProblem, InvalidInput, NotFound

SCRIPTS_DIR = "scripts"
SCRIPT_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*\.(lua|js)$")
"""A script file's name: no folder, no leading dot, ``.lua`` or ``.js``."""
PLUGIN_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
MAX_SCRIPT_BYTES = 256 * 1024
"""A script bigger than this is refused: the prompt's scripts are small, and a bigger
file is more likely a mistake (a bundle, a data file) than a script."""

ScriptFileLanguage = Literal["lua", "javascript"]
_LANGUAGE_OF_SUFFIX: dict[str, ScriptFileLanguage] = {".lua": "lua", ".js": "javascript"}


class ScriptNotFound(NotFound):
    pass


class ScriptReadOnly(Conflict):
    """A plugin's script: it can be read and run, not changed here."""


class ScriptNameInvalid(InvalidInput):
    pass


class ScriptInfo(BaseModel):
    """A script as the list shows it."""

    name: str = Field(description="'mood.lua' (project) or '<plugin>:<file>' (plugin)")
    language: ScriptFileLanguage
    size: int = Field(description="Bytes")
    plugin: str | None = Field(default=None, description="The plugin it comes with, if any")


class ScriptFile(BaseModel):
    """A script with its code."""

    name: str
    language: ScriptFileLanguage
    code: str
    read_only: bool = Field(description="A plugin's script: it cannot be changed here")


def script_language(name: str) -> ScriptFileLanguage:
    """The language of a script file from its extension."""
    language = _LANGUAGE_OF_SUFFIX.get(Path(name).suffix)
    if language is None:
        raise _bad_name(name)
    return language


def _bad_name(name: str) -> ScriptNameInvalid:
    reason = (
        "a script name is letters, digits, '_', '.' and '-', starts with a letter, digit "
        "or '_', and ends in .lua or .js (a plugin's script: '<plugin>:<file>')"
    )
    return ScriptNameInvalid(f"invalid script name {name!r}", [FieldProblem("name", reason)])


def content_hash(code: str) -> str:
    return hashlib.sha256(code.encode("utf-8")).hexdigest()


class ScriptLibrary:
    """The scripts of one project (``project_dir``, None: none) and of the enabled
    plugins (``plugin_folders``: plugin name → its folder)."""

    def __init__(
        self, project_dir: Path | None, plugin_folders: Mapping[str, Path] | None = None
    ) -> None:
        self.project_dir = project_dir
        self.plugin_folders = dict(plugin_folders or {})

    @property
    def folder(self) -> Path | None:
        """The project's scripts folder (it may not exist yet)."""
        return self.project_dir / SCRIPTS_DIR if self.project_dir is not None else None

    # -- names ----------------------------------------------------------------------------

    def path_of(self, name: str) -> tuple[Path, str | None]:
        """The file of script ``name`` and its plugin (None: the project's); raises
        :class:`ScriptNameInvalid` for a bad name and :class:`ScriptNotFound` when the
        plugin is not enabled or there is no project. The file may not exist."""
        plugin, sep, file = name.partition(":")
        if not sep:
            plugin, file = "", name
        if not SCRIPT_NAME.match(file) or (sep and not PLUGIN_NAME.match(plugin)):
            raise _bad_name(name)
        if sep:
            folder = self.plugin_folders.get(plugin)
            if folder is None:
                raise ScriptNotFound(f"script {name!r}: no enabled plugin named {plugin!r}")
            return folder / SCRIPTS_DIR / file, plugin
        if self.folder is None:
            raise ScriptNotFound(f"script {name!r}: there is no project to hold scripts")
        return self.folder / file, None

    # -- reading ----------------------------------------------------------------------------

    def list_scripts(self) -> list[ScriptInfo]:
        """The project's scripts by name, then each enabled plugin's (plugins by name)."""
        out: list[ScriptInfo] = []
        if self.folder is not None:
            out += self._scan(self.folder, None)
        for plugin in sorted(self.plugin_folders):
            out += self._scan(self.plugin_folders[plugin] / SCRIPTS_DIR, plugin)
        return out

    def _scan(self, folder: Path, plugin: str | None) -> list[ScriptInfo]:
        if not folder.is_dir():
            return []
        found: list[ScriptInfo] = []
        for path in sorted(folder.iterdir(), key=lambda p: p.name):
            if not SCRIPT_NAME.match(path.name) or not self._inside(path, folder):
                continue
            if not path.is_file():
                continue
            found.append(
                ScriptInfo(
                    name=f"{plugin}:{path.name}" if plugin else path.name,
                    language=script_language(path.name),
                    size=path.stat().st_size,
                    plugin=plugin,
                )
            )
        return found

    @staticmethod
    def _inside(path: Path, folder: Path) -> bool:
        # A link in the folder that points elsewhere would read a file the user never
        # put among the scripts (a plugin could reach the project's files this way).
        try:
            return path.resolve().parent == folder.resolve()
        except OSError:
            return False

    def read(self, name: str) -> ScriptFile:
        path, plugin = self.path_of(name)
        if not path.is_file() or not self._inside(path, path.parent):
            raise ScriptNotFound(f"no script named {name!r}")
        data = path.read_bytes()
        if len(data) > MAX_SCRIPT_BYTES:
            raise InvalidInput(
                f"script {name!r} is {len(data)} bytes; scripts may be at most "
                f"{MAX_SCRIPT_BYTES} bytes"
            )
        try:
            code = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidInput(f"script {name!r} is not UTF-8 text ({exc.reason})") from None
        return ScriptFile(
            name=name, language=script_language(name), code=code, read_only=plugin is not None
        )

    def fingerprint(self, name: str) -> str:
        """What the script's result depends on besides its inputs: its content's hash
        (``missing`` when it cannot be read, so it runs and reports why)."""
        try:
            path, _ = self.path_of(name)
            return content_hash(path.read_bytes().decode("utf-8", "replace"))
        except (OSError, ScriptNotFound, ScriptNameInvalid):
            return "missing"

    # -- writing ----------------------------------------------------------------------------

    def write(self, name: str, code: str) -> ScriptFile:
        """Save a project script (created or replaced atomically)."""
        path, plugin = self.path_of(name)
        if plugin is not None:
            raise ScriptReadOnly(f"script {name!r} comes with plugin {plugin!r}: it is read-only")
        size = len(code.encode("utf-8"))
        if size > MAX_SCRIPT_BYTES:
            raise InvalidInput(
                f"script {name!r} is {size} bytes; scripts may be at most {MAX_SCRIPT_BYTES} bytes",
                [FieldProblem("code", f"at most {MAX_SCRIPT_BYTES} bytes")],
            )
        if path.is_symlink():
            raise ScriptReadOnly(f"script {name!r} is a link; change the file it points to")
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, code)
        return ScriptFile(name=name, language=script_language(name), code=code, read_only=False)

    def delete(self, name: str) -> None:
        path, plugin = self.path_of(name)
        if plugin is not None:
            raise ScriptReadOnly(f"script {name!r} comes with plugin {plugin!r}: it is read-only")
        if not path.is_file() and not path.is_symlink():
            raise ScriptNotFound(f"no script named {name!r}")
        path.unlink()
