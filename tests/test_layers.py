"""Imports point down the layers of ARCHITECTURE.md: no module imports one above it.

Every module under ``storyloom/`` is parsed, not imported. An import is any ``import``
or ``from ... import`` statement anywhere in the module (inside functions and
``if TYPE_CHECKING:`` blocks too; relative imports resolved), and any string constant
that names a storyloom module, such as a name handed to ``importlib``: a string is an
import hidden from the statements, so it counts as one. Docstrings are prose and do not.

Two packages are ordered inside too: chat/'s parts (store < reply < personalab < prompt <
service), and cli/, whose command modules share only ``options`` and ``context`` and
never import each other (``main`` assembles them).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import storyloom

PACKAGE_ROOT = Path(storyloom.__file__).parent

# Bottom to top; packages on one floor may import each other.
FLOORS: tuple[tuple[str, ...], ...] = (
    ("core",),
    ("llm", "store", "sandbox"),
    ("sillytavern",),
    ("knowledge", "project"),
    ("workflow",),
    ("chat",),
    ("tools", "writing"),
    ("server", "cli", "plugins", "__init__", "__main__"),
)
FLOOR_OF = {package: floor for floor, packages in enumerate(FLOORS) for package in packages}

# A side package: the scripted LLM server and sample documents for tests and offline demos.
SIDE_PACKAGE = "testing"
SIDE_PACKAGE_MAY_IMPORT = frozenset({"core", "llm", "sillytavern", SIDE_PACKAGE})
SIDE_PACKAGE_IMPORTED_BY = frozenset({"cli", SIDE_PACKAGE})

# Inside chat/, bottom to top; chat/__init__ sits below them all.
CHAT_FLOORS: tuple[str, ...] = ("__init__", "store", "reply", "personalab", "prompt", "service")

# Inside cli/: shared pieces, then one module per command group or top-level command
# (which never import each other), then main, which assembles them.
CLI_SHARED = frozenset({"__init__", "options", "context"})
CLI_TOP = "main"

MODULE_NAME_IN_STRING = re.compile(r"\bstoryloom(?:\.\w+)+")


@dataclass(frozen=True)
class Import:
    importer: str
    imported: str
    line: int
    how: str  # "import" or "string"


@dataclass(frozen=True)
class Violation:
    found: Import
    reason: str

    def __str__(self) -> str:
        kind = "names in a string" if self.found.how == "string" else "imports"
        return (
            f"{self.found.importer} (line {self.found.line}) {kind} {self.found.imported}: "
            f"{self.reason}"
        )


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE_ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def storyloom_modules() -> dict[str, Path]:
    """Every module and package of storyloom, by dotted name."""
    return {module_name(path): path for path in sorted(PACKAGE_ROOT.rglob("*.py"))}


def _is_package(name: str, modules: dict[str, Path]) -> bool:
    path = modules.get(name)
    return path is not None and path.name == "__init__.py"


def _known(name: str, modules: dict[str, Path]) -> str | None:
    """The longest prefix of ``name`` that is a storyloom module (a string may go on to
    name an attribute, ``storyloom.plugins.node_registry``)."""
    parts = name.split(".")
    for end in range(len(parts), 1, -1):
        prefix = ".".join(parts[:end])
        if prefix in modules:
            return prefix
    return None


def _docstrings(tree: ast.Module) -> set[int]:
    """ids of the string constants that are bare expression statements (docstrings)."""
    return {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    }


def imports_of(importer: str, source: str, modules: dict[str, Path]) -> list[Import]:
    """The storyloom modules that the module ``importer`` (given as source) imports."""
    tree = ast.parse(source, filename=importer)
    package = importer if _is_package(importer, modules) else importer.rpartition(".")[0]
    prose = _docstrings(tree)
    found: list[Import] = []

    def add(name: str, line: int, how: str) -> None:
        known = _known(name, modules)
        if known is not None:
            found.append(Import(importer, known, line, how))

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, node.lineno, "import")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                origin = ".".join([*base, node.module] if node.module else base)
            else:
                origin = node.module or ""
            for alias in node.names:
                # ``from pkg import name``: a submodule when there is one, else pkg itself.
                submodule = f"{origin}.{alias.name}"
                add(submodule if submodule in modules else origin, node.lineno, "import")
        elif (
            isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose
        ):
            for match in MODULE_NAME_IN_STRING.finditer(node.value):
                add(match.group(), node.lineno, "string")
    return found


def package_of(module: str) -> str:
    """The top-level package of a storyloom module (``__init__`` for storyloom itself)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _part(module: str) -> str:
    """The sub-package or module right below the top-level package."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 else "__init__"


def _place(package: str) -> str:
    if package == SIDE_PACKAGE:
        return "side package testing"
    return f"{package}, floor {FLOOR_OF[package]}"


def check(found: Import) -> Violation | None:
    """Why this import points up the layers, or None when it may be made."""
    source, target = package_of(found.importer), package_of(found.imported)
    for package, module in ((source, found.importer), (target, found.imported)):
        if package not in FLOOR_OF and package != SIDE_PACKAGE:
            return Violation(found, f"{module} is in {package}/, which has no layer: add it")
    if target == SIDE_PACKAGE and source not in SIDE_PACKAGE_IMPORTED_BY:
        return Violation(found, f"only cli imports testing/, not {source} ({_place(source)})")
    if source == SIDE_PACKAGE:
        if target not in SIDE_PACKAGE_MAY_IMPORT:
            allowed = ", ".join(sorted(SIDE_PACKAGE_MAY_IMPORT - {SIDE_PACKAGE}))
            return Violation(found, f"testing/ may import only {allowed}, not {_place(target)}")
        return None
    if target == SIDE_PACKAGE:
        return None
    if FLOOR_OF[target] > FLOOR_OF[source]:
        return Violation(found, f"{_place(source)} imports upward into {_place(target)}")
    if source == target == "cli":
        low, high = _part(found.importer), _part(found.imported)
        if low != high and low != CLI_TOP and high not in CLI_SHARED:
            shared = ", ".join(f"cli/{name}" for name in sorted(CLI_SHARED - {"__init__"}))
            return Violation(
                found,
                f"cli/{low} imports another command module, cli/{high}: commands share only "
                f"{shared}, and cli/{CLI_TOP} assembles them",
            )
    if source == target == "chat":
        low, high = _part(found.importer), _part(found.imported)
        if CHAT_FLOORS.index(high) > CHAT_FLOORS.index(low):
            return Violation(
                found,
                f"chat/{low} (chat floor {CHAT_FLOORS.index(low)}) imports upward into "
                f"chat/{high} (chat floor {CHAT_FLOORS.index(high)})",
            )
    return None


def violations(importer: str, source: str, modules: dict[str, Path]) -> list[Violation]:
    checked = (check(found) for found in imports_of(importer, source, modules))
    return [violation for violation in checked if violation is not None]


def test_no_module_imports_one_above_it() -> None:
    modules = storyloom_modules()
    assert "storyloom.chat.store" in modules and "storyloom.workflow.runner" in modules
    unplaced = {
        package_of(name)
        for name in modules
        if package_of(name) not in FLOOR_OF and package_of(name) != SIDE_PACKAGE
    }
    assert not unplaced, f"packages with no layer in FLOORS: {sorted(unplaced)}"
    chat_parts = {_part(name) for name in modules if package_of(name) == "chat"}
    assert chat_parts <= set(CHAT_FLOORS), f"chat/ parts with no floor: {chat_parts}"
    found = [
        str(violation)
        for name, path in modules.items()
        for violation in violations(name, path.read_text(encoding="utf-8"), modules)
    ]
    assert not found, "imports that point up the layers:\n" + "\n".join(found)


def test_checker_reports_upward_imports_and_module_names_in_strings() -> None:
    modules = storyloom_modules()
    # A module written as the workflow layer once was: it loads chat's nodes.
    modules["storyloom.workflow.nodes.loader"] = PACKAGE_ROOT / "workflow/nodes/loader.py"
    source = '''"""Loads nodes; the docstring may mention storyloom.chat.prompt freely."""
import importlib
from typing import TYPE_CHECKING

from ...core import errors
from ..runner import WorkflowRunner

if TYPE_CHECKING:
    from storyloom.server.app import create_app

NODE_MODULES = ("storyloom.chat.prompt.shuttle_nodes", "storyloom.knowledge.activation")


def load() -> None:
    from ...chat.reply import filament
    import storyloom.testing.replay_server
    importlib.import_module("storyloom.plugins")
'''
    found = violations("storyloom.workflow.nodes.loader", source, modules)
    reported = {(v.found.imported, v.found.how) for v in found}
    assert reported == {
        ("storyloom.server.app", "import"),
        ("storyloom.chat.prompt.shuttle_nodes", "string"),
        ("storyloom.chat.reply.filament", "import"),
        ("storyloom.testing.replay_server", "import"),
        ("storyloom.plugins", "string"),
    }
    message = next(str(v) for v in found if v.found.imported == "storyloom.server.app")
    assert message == (
        "storyloom.workflow.nodes.loader (line 9) imports storyloom.server.app: "
        "workflow, floor 4 imports upward into server, floor 7"
    )
    # Allowed: down (core, the workflow runner) and the knowledge module named in a string.
    allowed = {
        imp.imported for imp in imports_of("storyloom.workflow.nodes.loader", source, modules)
    }
    assert {"storyloom.core.errors", "storyloom.workflow.runner"} <= allowed
    assert "storyloom.knowledge.activation" in allowed


def test_checker_orders_chat_parts_keeps_cli_groups_apart_and_testing_aside() -> None:
    modules = storyloom_modules()
    cases = {
        # (importer, source): the module it must report, or None when allowed.
        ("storyloom.chat.store.turn_tree", "from storyloom.chat.service import reply_run"): (
            "storyloom.chat.service.reply_run"
        ),
        ("storyloom.chat.prompt.weaver", "from ..reply import filament"): None,
        ("storyloom.chat.reply.mvu", "from storyloom.chat import store"): None,
        ("storyloom.testing.st_documents", "import storyloom.knowledge.caiu"): (
            "storyloom.knowledge.caiu"
        ),
        ("storyloom.testing.st_documents", "from storyloom.sillytavern import charx"): None,
        ("storyloom.server.app", "from storyloom.testing import replay_server"): (
            "storyloom.testing.replay_server"
        ),
        ("storyloom.cli.main", "from storyloom.testing import replay_server"): None,
        ("storyloom.knowledge.caiu", "from storyloom.sillytavern import world_info"): None,
        ("storyloom.cli.kb", "from storyloom.cli.chat import chat_app"): "storyloom.cli.chat",
        ("storyloom.cli.kb", "from storyloom.cli.main import app"): "storyloom.cli.main",
        ("storyloom.cli.kb", "from ..cli.context import project_id"): None,
        ("storyloom.cli.main", "from storyloom.cli.kb import kb_app"): None,
    }
    for (importer, source), expected in cases.items():
        reported = [v.found.imported for v in violations(importer, source, modules)]
        assert reported == ([expected] if expected else []), (importer, source)
