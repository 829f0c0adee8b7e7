"""The built-in node types, each module a pluggy plugin (``storyloom_node_types``)."""

BUILTIN_MODULES = (
    "storyloom.workflow.nodes.text_nodes",
    "storyloom.workflow.nodes.flow_nodes",
    "storyloom.workflow.nodes.interface_nodes",
    "storyloom.workflow.nodes.llm_nodes",
    "storyloom.workflow.nodes.subworkflow_nodes",
    "storyloom.workflow.nodes.human_nodes",
    "storyloom.workflow.nodes.iteration_nodes",
    "storyloom.workflow.nodes.knowledge_nodes",
    # The chat pipeline's shuttles live with the chat engine, a layer above: named here,
    # imported only when the registry is built, so workflow/ never imports chat/.
    "storyloom.chat.shuttle_nodes",
)
