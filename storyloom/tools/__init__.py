"""Tools and agents: plugins, the ToolManager, TAM, agent profiles, MCP (issue 14)."""
