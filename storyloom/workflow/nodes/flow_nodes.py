"""(being written)"""

from __future__ import annotations

from storyloom.core.plugin_markers import hookimpl
from storyloom.workflow.node_type import NodeType


@hookimpl
def storyloom_node_types() -> list[type[NodeType]]:
    return []
