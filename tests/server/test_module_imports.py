"""The server's modules import one another without a circle (``TYPE_CHECKING`` imports
count): what two routes share sits below both."""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

SERVER = Path(__file__).resolve().parents[2] / "storyloom" / "server"
PACKAGE = "storyloom.server"


def server_imports() -> dict[str, set[str]]:
    """Module → the server modules it imports."""
    modules = {f"{PACKAGE}.{p.stem}": p for p in SERVER.glob("*.py") if p.stem != "__init__"}
    edges: dict[str, set[str]] = {}
    for name, path in modules.items():
        named: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                named.add(node.module)
                named.update(f"{node.module}.{alias.name}" for alias in node.names)
            elif isinstance(node, ast.Import):
                named.update(alias.name for alias in node.names)
        edges[name] = {n for n in named if n in modules and n != name}
    return edges


def test_server_modules_import_without_a_circle() -> None:
    edges = server_imports()
    assert f"{PACKAGE}.chat_views" in edges[f"{PACKAGE}.chat_ws"]
    try:
        graphlib.TopologicalSorter(edges).prepare()
    except graphlib.CycleError as exc:
        raise AssertionError(f"import circle: {' → '.join(exc.args[1])}") from None
