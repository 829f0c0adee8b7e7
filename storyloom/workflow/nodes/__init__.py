"""The workflow layer's own node types, each module a pluggy plugin (``storyloom_node_types``).

They are registered at start-up beside every other plugin (see :mod:`storyloom.plugins`);
this layer names no module above it.
"""

from storyloom.workflow.nodes import (
    flow_nodes,
    human_nodes,
    interface_nodes,
    iteration_nodes,
    knowledge_nodes,
    llm_nodes,
    subworkflow_nodes,
    text_nodes,
)

PLUGINS = (
    text_nodes,
    flow_nodes,
    interface_nodes,
    llm_nodes,
    subworkflow_nodes,
    human_nodes,
    iteration_nodes,
    knowledge_nodes,
)
